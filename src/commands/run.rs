//! `scrape --profile FILE` / `scrape run`: crawl and download, live or from a recording.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use scrape::job::{JobOptions, JobOutcome, JobSpec, run_job};
use scrape::profile::{OutputFormat, Profile};
use scrape::replay::matching::MatchRules;
use scrape::replay::{Network, Replayer};
use scrape::telemetry::ProgressMode;
use tokio_util::sync::CancellationToken;

use super::{load_profile, override_starts};
use crate::cli::RunArgs;
use crate::{Outcome, UsageError};

/// What a run of a profile does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stages {
    /// Crawl and download, together.
    All,
    /// Crawl, and queue the images found for a later download (`scrape crawl`).
    CrawlOnly,
}

pub async fn run(
    args: RunArgs,
    stages: Stages,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let Some(path) = &args.profile else {
        return Err(UsageError(
            "no profile given: use `scrape --profile FILE` (see `scrape --help`)".into(),
        )
        .into());
    };
    let mut profile = load_profile(path)?;
    override_starts(&mut profile, &args.start)?;
    profile.download = super::apply_limits(profile.download, &args.limits)?;
    if let Some(n) = args.crawl_concurrency {
        use scrape::profile::limits::{MAX_PAGES_IN_FLIGHT, count};
        profile.crawl.concurrency = super::flag(
            "--crawl-concurrency",
            count("concurrency", n, MAX_PAGES_IN_FLIGHT),
        )? as usize;
    }
    if let Some(known) = args.refresh {
        if known == Some(0) {
            return Err(UsageError("--refresh N: N must be at least 1".into()).into());
        }
        profile = profile.refreshing(known);
    }
    if args.recheck_images && profile.download.dataset.format == OutputFormat::WebDataset {
        return Err(UsageError(
            "--recheck-images works with files and Parquet output: a WebDataset shard cannot take an image back".into(),
        )
        .into());
    }
    if let Some(redis) = &args.redis {
        if stages == Stages::CrawlOnly {
            return Err(UsageError(
                "--redis runs the whole job (crawl and download): use `scrape --profile P --redis URL`".into(),
            )
            .into());
        }
        let out = args.out.unwrap_or_else(|| profile.download.out.clone());
        let redis = (redis.as_str(), args.allow_volatile_redis);
        let mode = if quiet {
            ProgressMode::Off
        } else {
            args.progress.progress
        };
        let every = super::interval_flag("--progress-interval", &args.progress.progress_interval)?;
        return super::cluster::run_and_work(profile, path, redis, (out, (mode, every)), cancel)
            .await;
    }
    let Some(recording) = &args.replay else {
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| profile.download.out.clone());
        let mut options = super::job_options(out, args.fresh, &args.progress, quiet)?;
        options.download = stages == Stages::All;
        options.recheck_images = args.recheck_images;
        let outcome = execute(JobSpec::crawl(profile), options.clone(), quiet, cancel).await;
        if stages == Stages::CrawlOnly && !quiet && matches!(outcome, Ok(Outcome::Done)) {
            eprintln!(
                "  queued    the images wait for a download: `scrape download --out {} --profile {}`, or a run of the profile",
                options.out.display(),
                path.display()
            );
        }
        return outcome;
    };
    let replayer = Arc::new(load_replayer(&profile, recording)?);
    // A replay never mixes with the state of a live job.
    let out = args.out.clone().unwrap_or_else(|| replay_folder(&profile));
    let mut options = super::job_options(out, args.fresh, &args.progress, quiet)?;
    options.network = Network::Replay(Arc::clone(&replayer));
    // Without image bodies there is nothing to download, and nothing fake is stored.
    options.download = stages == Stages::All && replayer.has_image_bodies();
    let outcome = run_job(JobSpec::crawl(profile), options.clone(), cancel)
        .await
        .context("the replay did not finish")?;
    let result = report(&outcome, quiet);
    if !options.download && stages == Stages::All && !quiet {
        eprintln!(
            "  replay    {} images found; the recording has no image bodies, so none was downloaded",
            outcome.summary.after.images_found
        );
    }
    let unmatched = replayer.unmatched();
    print_unmatched(&unmatched);
    // Nothing found while requests went unanswered: the replay did not see what was recorded.
    let found_nothing = outcome.summary.after.images_found == 0 && !unmatched.is_empty();
    if found_nothing && !quiet {
        eprintln!(
            "  replay    no image found, and the requests above are not in the recording (recorded from another URL or scheme?)"
        );
    }
    Ok(match result {
        Outcome::Done if found_nothing || (args.replay_strict && !unmatched.is_empty()) => {
            Outcome::DoneWithFailures
        }
        other => other,
    })
}

/// The recording at `path`, matched by the profile's `[replay]` rules.
pub fn load_replayer(profile: &Profile, path: &Path) -> anyhow::Result<Replayer> {
    Ok(Replayer::load(path, MatchRules::from(&profile.replay))?)
}

/// The profile's output folder with `-replay` appended.
fn replay_folder(profile: &Profile) -> PathBuf {
    let mut name = profile.download.out.as_os_str().to_owned();
    name.push("-replay");
    PathBuf::from(name)
}

/// Lists the requests a replay could not answer (on stderr).
pub fn print_unmatched(unmatched: &[String]) {
    if unmatched.is_empty() {
        return;
    }
    eprintln!(
        "{} request{} not in the recording:",
        unmatched.len(),
        if unmatched.len() == 1 {
            " was"
        } else {
            "s were"
        }
    );
    for line in unmatched {
        eprintln!("  {line}");
    }
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
    Ok(report(&outcome, quiet))
}

/// Prints a finished job's summary; its outcome.
fn report(outcome: &JobOutcome, quiet: bool) -> Outcome {
    if !quiet {
        eprint!("{}", outcome.summary);
        eprintln!(
            "  output    {} ({} manifest lines, {} failures listed)",
            outcome.out.display(),
            outcome.export.manifest_lines,
            outcome.export.failure_lines
        );
        if outcome.export.missing_files > 0 {
            eprintln!(
                "  missing   {} stored file(s) gone or changed: `scrape verify --out {} --requeue` fetches them again",
                outcome.export.missing_files,
                outcome.out.display()
            );
        }
    }
    if outcome.summary.interrupted {
        Outcome::Interrupted
    } else if outcome.has_failures() {
        Outcome::DoneWithFailures
    } else {
        Outcome::Done
    }
}
