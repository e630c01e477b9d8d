//! `scrape download` (a URL list) and `scrape retry` (failed images again).

use std::path::Path;

use anyhow::Context;
use scrape::job::{JobSpec, Source};
use scrape::profile::DownloadSettings;
use scrape::state::State;
use tokio_util::sync::CancellationToken;

use super::{apply_limits, load_profile};
use crate::cli::{DownloadArgs, LimitArgs, RetryArgs};
use crate::{Outcome, UsageError};

/// The job name of URL-list downloads, kept in the state so a profile's output folder and a
/// list's are never mixed up.
const LIST_JOB: &str = "download";

pub async fn download(
    args: DownloadArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    if !args.urls.is_file() {
        return Err(UsageError(format!(
            "URL list `{}` does not exist or is not a file",
            args.urls.display()
        ))
        .into());
    }
    let download = settings(args.profile.as_deref(), &args.limits, LIST_JOB)?;
    let spec = JobSpec {
        name: LIST_JOB.to_owned(),
        download,
        source: Source::List {
            path: args.urls.clone(),
            column: args.url_column.clone(),
        },
    };
    let options = super::job_options(args.out, args.fresh, &args.progress, quiet)?;
    super::run::execute(spec, options, quiet, cancel).await
}

pub async fn retry(
    args: RetryArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let (name, requeued) = {
        let state = State::open_existing(&args.out)?;
        let name = state.profile_name()?.unwrap_or_else(|| LIST_JOB.to_owned());
        let requeued = state
            .requeue_failed(&args.class)
            .context("cannot re-queue failed images")?;
        (name, requeued)
    };
    if !quiet {
        let which = if args.class.is_empty() {
            "failed".to_owned()
        } else {
            format!("failed ({})", args.class.join(", "))
        };
        eprintln!("{requeued} {which} image(s) queued again");
    }
    let download = settings(args.profile.as_deref(), &args.limits, &name)?;
    let spec = JobSpec {
        name,
        download,
        source: Source::Pending,
    };
    let options = super::job_options(args.out, false, &args.progress, quiet)?;
    super::run::execute(spec, options, quiet, cancel).await
}

/// Settings from the profile's `[download]` (or the defaults for job `name`), with the flags.
fn settings(
    profile: Option<&Path>,
    limits: &LimitArgs,
    name: &str,
) -> anyhow::Result<DownloadSettings> {
    let base = match profile {
        Some(path) => load_profile(path)?.download,
        None => DownloadSettings::defaults_for(name),
    };
    apply_limits(base, limits)
}
