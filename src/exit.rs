//! How a run that stopped with an error ends for the shell. Each error type of the tool says
//! which kind of stop it is ([`Classified`]); [`stop_of`] asks the causes of an error in order,
//! and the first that knows decides.

use std::error::Error;

use crate::input::ImportError;
use crate::input::urllist::ListError;
use crate::job::JobError;
use crate::net::session::SessionError;
use crate::output::bucket::BucketError;
use crate::profile::ProfileError;
use crate::render::RenderError;
use crate::replay::har::HarError;
use crate::state::StateError;

/// Why a run stopped, as its exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// What the user gave is wrong (profile, flags, URL list, output folder, another job's
    /// state, a missing browser): exit 2, nothing to retry as it is.
    BadInput,
    /// The disk is full: exit 2; the same command continues once there is room.
    DiskFull,
    /// The state database is damaged: exit 2; `--fresh` starts over, keeping the files.
    DamagedState,
    /// Ctrl-C came before the run had begun (nothing fetched, nothing to save): exit 130,
    /// as an interrupted run.
    Interrupted,
    /// Anything else: exit 1.
    Failed,
}

impl Stop {
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Failed => 1,
            Stop::BadInput | Stop::DiskFull | Stop::DamagedState => 2,
            Stop::Interrupted => 130,
        }
    }

    /// What the user can do about it, when there is something to say.
    pub fn help(self) -> Option<&'static str> {
        match self {
            Stop::DiskFull => Some(
                "free some space, then run the same command again: it continues where it stopped",
            ),
            Stop::DamagedState => Some(
                "the state database is damaged; run the same command with `--fresh` to start over (files already stored are kept)",
            ),
            Stop::BadInput | Stop::Interrupted | Stop::Failed => None,
        }
    }
}

/// An error that knows what kind of stop it is (`None`: it does not say; its causes may).
pub trait Classified {
    fn stop(&self) -> Option<Stop>;
}

impl Classified for StateError {
    fn stop(&self) -> Option<Stop> {
        if self.is_disk_full() {
            Some(Stop::DiskFull)
        } else if self.is_damage() {
            Some(Stop::DamagedState)
        } else if matches!(
            self,
            StateError::Locked { .. }
                | StateError::OtherProfile { .. }
                | StateError::OtherLayout { .. }
                | StateError::Missing { .. }
        ) {
            Some(Stop::BadInput)
        } else {
            None
        }
    }
}

impl Classified for BucketError {
    fn stop(&self) -> Option<Stop> {
        if matches!(self, BucketError::Interrupted { .. }) {
            return Some(Stop::Interrupted);
        }
        self.is_bad_input().then_some(Stop::BadInput)
    }
}

impl Classified for JobError {
    fn stop(&self) -> Option<Stop> {
        match self {
            JobError::State(s) => s.stop(),
            JobError::Bucket(b) => b.stop(),
            JobError::OutputNotWritable { .. }
            | JobError::Session(_)
            | JobError::Login(_)
            | JobError::Import(ImportError::List(_))
            | JobError::Render(
                RenderError::BrowserNotFound { .. } | RenderError::SocksLogin { .. },
            ) => Some(Stop::BadInput),
            _ => None,
        }
    }
}

/// The stop `error` says it is: a full disk anywhere among its causes, else the first of its
/// causes that says; [`Stop::Failed`] when none does.
pub fn stop_of(error: &(dyn Error + 'static)) -> Stop {
    if crate::state::is_disk_full(error) {
        return Stop::DiskFull;
    }
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(stop) = classify(e) {
            return stop;
        }
        cause = e.source();
    }
    Stop::Failed
}

/// The one place that looks behind `dyn Error` for the tool's error types.
fn classify(e: &(dyn Error + 'static)) -> Option<Stop> {
    if let Some(e) = e.downcast_ref::<JobError>() {
        return e.stop();
    }
    if let Some(e) = e.downcast_ref::<StateError>() {
        return e.stop();
    }
    if let Some(e) = e.downcast_ref::<BucketError>() {
        return e.stop();
    }
    let bad_input = e.is::<ProfileError>()
        || e.is::<ListError>()
        || e.is::<SessionError>()
        || e.is::<HarError>();
    bad_input.then_some(Stop::BadInput)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(error: anyhow::Error) -> Stop {
        stop_of(error.as_ref())
    }

    #[test]
    fn each_error_says_its_stop_whatever_context_wraps_it() {
        let locked = StateError::Locked {
            path: "out/.scrape/state.redb".into(),
        };
        let full = std::io::Error::from_raw_os_error(28);
        let cases = [
            (
                anyhow::Error::from(locked).context("cannot open the job"),
                Stop::BadInput,
            ),
            (
                anyhow::Error::from(full).context("cannot write a file"),
                Stop::DiskFull,
            ),
            (anyhow::anyhow!("the download stage stopped"), Stop::Failed),
            (
                anyhow::Error::from(JobError::Bucket(BucketError::Refused {
                    url: "s3://images".into(),
                    error: object_store::Error::Generic {
                        store: "S3",
                        source: "403 Forbidden".into(),
                    },
                }))
                .context("profile `p` did not finish"),
                Stop::BadInput,
            ),
            (
                anyhow::Error::from(StateError::from(BucketError::Taken {
                    object: "s3://images/a.jpg".into(),
                }))
                .context("cannot use the state"),
                Stop::Failed,
            ),
        ];
        for (error, expected) in cases {
            let said = format!("{error:#}");
            assert_eq!(stop(error), expected, "{said}");
        }
        assert_eq!(Stop::Failed.exit_code(), 1);
        assert_eq!(Stop::DiskFull.exit_code(), 2);
        assert!(
            Stop::DamagedState
                .help()
                .is_some_and(|h| h.contains("--fresh"))
        );
    }
}
