//! `scrape download` (a URL list) and `scrape retry` (failed images again).

use scrape::output::bucket::Destination;
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
    let Some(urls) = &args.urls else {
        return download_queued(args, quiet, cancel).await;
    };
    if !urls.is_file() {
        return Err(UsageError(format!(
            "URL list `{}` does not exist or is not a file",
            urls.display()
        ))
        .into());
    }
    let download = settings(args.profile.as_deref(), &args.limits, LIST_JOB)?;
    let spec = JobSpec {
        name: LIST_JOB.to_owned(),
        download,
        source: Source::List {
            path: urls.clone(),
            column: args.url_column.clone(),
        },
    };
    let options = super::job_options(args.out, args.fresh, &args.progress, quiet)?;
    super::run::execute(spec, options, quiet, cancel).await
}

/// `scrape download --out DIR` without a list: the images queued in `DIR` (by `scrape crawl`
/// or an earlier run), for the job that queued them.
async fn download_queued(
    args: DownloadArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    if args.fresh {
        return Err(UsageError(
            "--fresh without --urls would forget the queue it is asked to download".into(),
        )
        .into());
    }
    let (name, download) = queue_owner(&args.out, args.profile.as_deref(), &args.limits)?;
    let spec = JobSpec {
        name,
        download,
        source: Source::Pending,
    };
    let options = super::job_options(args.out, false, &args.progress, quiet)?;
    super::run::execute(spec, options, quiet, cancel).await
}

pub async fn retry(
    args: RetryArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    if let Some(redis) = &args.redis {
        return super::cluster::retry(redis, args.job.as_deref(), &args.class, quiet).await;
    }
    let Some(out) = args.out.clone() else {
        return Err(UsageError("--out DIR (or --redis URL) is required".into()).into());
    };
    let (name, download) = queue_owner(&out, args.profile.as_deref(), &args.limits)?;
    // Before the re-queue: a flag that cannot be honoured leaves the state as it was.
    let options = super::job_options(out.clone(), false, &args.progress, quiet)?;
    let requeued = State::open_existing(&Destination::state_folder(&out)?)?
        .requeue_failed(&args.class)
        .context("cannot re-queue failed images")?;
    if !quiet {
        let which = if args.class.is_empty() {
            "failed".to_owned()
        } else {
            format!("failed ({})", args.class.join(", "))
        };
        eprintln!("{requeued} {which} image(s) queued again");
    }
    let spec = JobSpec {
        name,
        download,
        source: Source::Pending,
    };
    super::run::execute(spec, options, quiet, cancel).await
}

/// The job whose queue `out` holds, and its download settings with the flags: a profile's
/// folder needs the profile (`profile`), whose `[download]` table decides headers, file names
/// and limits; a URL list's folder takes the defaults unless a profile is given, in the format
/// it was stored in unless `--format` says otherwise.
fn queue_owner(
    out: &Path,
    profile: Option<&Path>,
    limits: &LimitArgs,
) -> anyhow::Result<(String, DownloadSettings)> {
    let state = State::open_existing(&Destination::state_folder(out)?)?;
    let name = state.profile_name()?.unwrap_or_else(|| LIST_JOB.to_owned());
    if name != LIST_JOB && profile.is_none() {
        return Err(UsageError(format!(
            "`{}` holds the images of profile `{name}`: give the profile with `--profile FILE` \
             (its [download] settings decide headers, file names and limits)",
            out.display()
        ))
        .into());
    }
    let mut download = settings(profile, limits, &name)?;
    // A list's settings came from flags, which a rerun without them goes on with: the format
    // and shard size its images were stored with.
    if profile.is_none()
        && limits.format.is_none()
        && let Some((format, shard_size)) = state.stored_format()?
    {
        download.dataset.format = format;
        download.dataset.shard_size = limits.shard_size.unwrap_or(shard_size);
    }
    Ok((name, download))
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
