//! `scrape --profile FILE` / `scrape run`: crawl and download.

use anyhow::Context;
use scrape::job::{JobOptions, JobSpec, run_job};
use tokio_util::sync::CancellationToken;

use super::{load_profile, override_starts};
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
    profile.download = super::apply_limits(profile.download, &args.limits)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| profile.download.out.clone());
    let options = super::job_options(out, args.fresh, &args.progress, quiet)?;
    execute(JobSpec::crawl(profile), options, quiet, cancel).await
}

/// Runs a job and prints its summary; shared with `demo`, `download` and `retry`.
pub async fn execute(
    spec: JobSpec,
    options: JobOptions,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let name = spec.name.clone();
    let outcome = run_job(spec, options, cancel)
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
