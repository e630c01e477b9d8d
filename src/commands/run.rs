//! `scrape --profile FILE` / `scrape run`: crawl and download.

use anyhow::Context;
use scrape::job::{JobOptions, run_job};
use scrape::telemetry::ProgressMode;
use tokio_util::sync::CancellationToken;

use super::{duration_flag, load_profile, override_starts};
use crate::cli::RunArgs;
use crate::{Outcome, UsageError};

pub async fn run(args: RunArgs, quiet: bool, cancel: CancellationToken) -> anyhow::Result<Outcome> {
    let Some(path) = &args.profile else {
        return Err(UsageError(
            "no profile given: use `scrape --profile FILE` (see `scrape --help`)".into(),
        )
        .into());
    };
    let mut profile = load_profile(path)?;
    override_starts(&mut profile, &args.start)?;
    for (flag, value) in [
        ("--concurrency", &args.concurrency),
        ("--per-host", &args.per_host),
    ] {
        if *value == Some(0) {
            return Err(UsageError(format!("{flag} must be at least 1")).into());
        }
    }
    if let Some(n) = args.concurrency {
        profile.download.concurrency = n;
    }
    if let Some(n) = args.per_host {
        profile.download.per_host = n;
    }
    let options = JobOptions {
        out: args
            .out
            .clone()
            .unwrap_or_else(|| profile.download.out.clone()),
        fresh: args.fresh,
        progress: if quiet {
            ProgressMode::Off
        } else {
            args.progress
        },
        plain_every: duration_flag("--progress-interval", &args.progress_interval)?,
    };
    execute(profile, options, quiet, cancel).await
}

/// Runs a job and prints its summary; shared with `demo`.
pub async fn execute(
    profile: scrape::profile::Profile,
    options: JobOptions,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let name = profile.name.clone();
    let outcome = run_job(profile, options, cancel)
        .await
        .with_context(|| format!("profile `{name}` did not finish"))?;
    if !quiet {
        eprint!("{}", outcome.summary);
        eprintln!(
            "  output    {} ({} manifest lines, {} failures listed)",
            outcome.out.display(),
            outcome.export.manifest_lines,
            outcome.export.failure_lines
        );
    }
    Ok(if outcome.summary.interrupted {
        Outcome::Interrupted
    } else if outcome.has_failures() {
        Outcome::DoneWithFailures
    } else {
        Outcome::Done
    })
}
