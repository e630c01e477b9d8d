//! `scrape worker`, `scrape enqueue`, `scrape status --redis` and `scrape export`: one job run
//! by many workers over one Redis.

use scrape::cluster::identity::profile_digest;
use scrape::cluster::report::{export_job, job_status, pick_job, watch_counters};
use scrape::cluster::{
    ClusterError, Connection, JobQueue, WorkerOptions, hide_credentials, run_worker, start_items,
};
use scrape::telemetry::{ProgressMode, ProgressReporter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scrape::output::Format;
use scrape::output::bucket::Destination;
use scrape::profile::{DatasetSettings, Profile};
use tokio_util::sync::CancellationToken;

use super::{load_profile, override_starts, print_stdout};
use crate::cli::{EnqueueArgs, ExportArgs, StatusArgs, WorkerArgs};
use crate::{Outcome, UsageError};

/// Connects to `url`; a Redis that cannot be reached is the environment's error (exit 2).
async fn connect(url: &str) -> anyhow::Result<Connection> {
    Connection::open(url).await.map_err(|e| {
        let cause = match &e {
            ClusterError::Url { source, .. } | ClusterError::Connect { source, .. } => {
                format!(": {}", hide_credentials(&source.to_string(), url))
            }
            _ => String::new(),
        };
        UsageError(format!("--redis: {e}{cause}")).into()
    })
}

/// Refuses a Redis that can lose the job (no append-only file, or an eviction policy) unless
/// `allow`; warns when its settings cannot be read (managed services refuse `CONFIG`).
async fn check_durability(conn: &Connection, allow: bool) -> anyhow::Result<()> {
    let durability = conn.durability().await;
    if durability.unknown() {
        tracing::warn!(
            "cannot read the Redis settings (CONFIG refused): a job survives a restart of Redis only with `appendonly yes`, and a full memory only with `maxmemory-policy noeviction`"
        );
    }
    let risks = durability.risks();
    if risks.is_empty() {
        return Ok(());
    }
    if allow {
        for risk in &risks {
            tracing::warn!("{risk} (accepted with --allow-volatile-redis)");
        }
        return Ok(());
    }
    Err(UsageError(format!(
        "this Redis can lose the job: {}; set `appendonly yes` and `maxmemory-policy noeviction` \
         (redis.conf, or CONFIG SET), or pass --allow-volatile-redis to accept the risk",
        risks.join("; ")
    ))
    .into())
}

/// This worker's default name: the host's name and the process id.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Refuses, before Redis is asked anything, a profile with `sitemap`: workers take pages from
/// the job's Redis stream, which sitemaps do not feed, so its pages would silently not be
/// crawled.
fn check_no_sitemap(profile: &Profile) -> anyhow::Result<()> {
    if profile.sitemap.is_empty() {
        return Ok(());
    }
    Err(UsageError(
        "`sitemap` is not supported with --redis: workers crawl the pages enqueued from `start` alone; run a profile with sitemaps on one machine (without --redis)"
            .into(),
    )
    .into())
}

pub async fn worker(args: WorkerArgs, cancel: CancellationToken) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    profile.download = super::apply_limits(profile.download, &args.limits)?;
    check_no_sitemap(&profile)?;
    let lease = super::flag("--lease", scrape::profile::limits::interval(&args.lease))?;
    if lease < std::time::Duration::from_millis(300) {
        return Err(UsageError(format!("--lease `{}` is shorter than 300ms", args.lease)).into());
    }
    if args.max_deliveries == 0 {
        return Err(UsageError("--max-deliveries must be at least 1".into()).into());
    }
    let to = Destination::resolve(&args.out.unwrap_or_else(|| profile.download.out.clone()))?;
    let job = args.job.unwrap_or_else(|| profile.name.clone());
    let name = args.name.unwrap_or_else(default_name);
    let conn = connect(&args.redis).await?;
    check_durability(&conn, args.allow_volatile_redis).await?;
    let queue = JobQueue::new(conn, &job, &name);
    check_job_profile(&queue, &args.profile).await?;
    queue.create_groups().await?;
    let options = WorkerOptions {
        lease,
        max_deliveries: args.max_deliveries,
        keep_waiting: args.keep_waiting,
        ..WorkerOptions::new(to)
    };
    let progress = (
        args.progress,
        super::interval_flag("--progress-interval", &args.progress_interval)?,
    );
    work(profile, queue, options, progress, cancel).await
}

/// `scrape --profile P --redis URL`: seeds the job with the profile's start pages and works on
/// it as one worker with the default lease, as `scrape enqueue` then `scrape worker` do; other
/// workers may join it.
pub async fn run_and_work(
    profile: Profile,
    path: &Path,
    (redis, allow_volatile): (&str, bool),
    (out, progress): (PathBuf, Progress),
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    check_no_sitemap(&profile)?;
    let conn = connect(redis).await?;
    check_durability(&conn, allow_volatile).await?;
    let queue = JobQueue::new(conn, &profile.name, &default_name());
    check_job_profile(&queue, path).await?;
    queue.create_groups().await?;
    seed(&queue, &profile).await?;
    let to = Destination::resolve(&out)?;
    work(profile, queue, WorkerOptions::new(to), progress, cancel).await
}

/// How a worker shows the job's progress, and how often a plain line.
pub type Progress = (ProgressMode, std::time::Duration);

/// Runs this process as a worker of `queue`'s job until the job is finished (or `cancel`).
async fn work(
    profile: Profile,
    queue: JobQueue,
    options: WorkerOptions,
    (mode, every): Progress,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let name = queue.consumer().to_owned();
    let interrupted = cancel.clone();
    let polling = CancellationToken::new();
    let (totals, poller) = watch_counters(queue.clone(), polling.clone());
    let reporter = ProgressReporter::start(mode, totals, Arc::clone(&options.live), every);
    let worked = run_worker(profile, queue, options, cancel).await;
    polling.cancel();
    let _ = poller.await;
    reporter.finish().await;
    let summary = worked?;
    eprintln!(
        "worker {name}: {} pages ({} failed), {} images ({} failed), {} dead-lettered, {} found done already",
        summary.pages,
        summary.pages_failed,
        summary.images,
        summary.images_failed,
        summary.dead,
        summary.already_done
    );
    Ok(if interrupted.is_cancelled() {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}

/// Refuses (exit 2) the profile at `path` for `queue`'s job when the job runs another one:
/// a profile that only shares the job's name would otherwise be run with the job's rules. The
/// first enqueue or worker of a job records its profile's digest.
async fn check_job_profile(queue: &JobQueue, path: &Path) -> anyhow::Result<()> {
    check_key_format(queue).await?;
    let source = scrape::profile::read_source(path)?;
    let digest =
        profile_digest(&source).map_err(|e| UsageError(format!("`{}`: {e}", path.display())))?;
    if queue.claim_profile(&digest).await?.is_none() {
        return Ok(());
    }
    Err(UsageError(format!(
        "job `{}` runs another profile: `{}` differs from it in what is fetched or stored \
         (only its name, start pages, `out` and pace may differ); give this profile a `name` of \
         its own, or run it as another job with `--job NAME`",
        queue.keys().job(),
        path.display()
    ))
    .into())
}

/// Refuses (exit 2) a job begun by a version of scrape that keeps its seen and done sets
/// otherwise; the first command of a job records the format.
async fn check_key_format(queue: &JobQueue) -> anyhow::Result<()> {
    match queue.claim_key_format().await {
        Ok(()) => Ok(()),
        Err(scrape::cluster::ClusterError::Job(refusal)) => Err(UsageError(refusal).into()),
        Err(e) => Err(e.into()),
    }
}

/// Enqueues the first page of each of `profile`'s chains (a repeat adds nothing).
async fn seed(queue: &JobQueue, profile: &Profile) -> anyhow::Result<()> {
    let items = start_items(profile);
    let added = queue.enqueue(&items).await?;
    eprintln!(
        "job {}: {added} of {} start pages enqueued ({} known already)",
        queue.keys().job(),
        items.len(),
        items.len() as u64 - added
    );
    Ok(())
}

pub async fn enqueue(args: EnqueueArgs) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    check_no_sitemap(&profile)?;
    override_starts(&mut profile, &args.start)?;
    let job = args.job.unwrap_or_else(|| profile.name.clone());
    let conn = connect(&args.redis).await?;
    check_durability(&conn, args.allow_volatile_redis).await?;
    let queue = JobQueue::new(conn, &job, "enqueue");
    check_job_profile(&queue, &args.profile).await?;
    queue.create_groups().await?;
    seed(&queue, &profile).await?;
    Ok(Outcome::Done)
}

pub async fn status(args: StatusArgs) -> anyhow::Result<Outcome> {
    let Some(url) = &args.redis else {
        return Err(UsageError("--redis is required here".into()).into());
    };
    let conn = connect(url).await?;
    let named = match (&args.job, &args.profile) {
        (Some(job), _) => Some(job.clone()),
        (None, Some(path)) => Some(load_profile(path)?.name),
        (None, None) => None,
    };
    let job = pick_job(&conn, named.as_deref())
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    let status = job_status(&JobQueue::new(conn, &job, "status")).await?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&status)?)
    } else {
        status.to_string()
    };
    print_stdout(&text)?;
    Ok(Outcome::Done)
}

pub async fn export(args: ExportArgs) -> anyhow::Result<Outcome> {
    // The profile before Redis: what it asks for is checked first. Without one, the workers'
    // records say where every image is (files or shards); only a table is not written.
    let format = match &args.profile {
        Some(path) => Format::of(&load_profile(path)?.download.dataset),
        None => Format::of(&DatasetSettings::default()),
    };
    let conn = connect(&args.redis).await?;
    let job = pick_job(&conn, args.job.as_deref())
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    let queue = JobQueue::new(conn, &job, "export");
    let to = Destination::resolve(&args.out)?;
    let lease = WorkerOptions::new(to.clone()).lease;
    let summary = export_job(&queue, &to, format, lease).await?;
    eprintln!(
        "job {job}: {} images in {}, {} failures in {}{}",
        summary.manifest_lines,
        args.out.join(scrape::output::MANIFEST).display(),
        summary.failure_lines,
        args.out.join(scrape::output::FAILURES).display(),
        match format.exported_table() {
            Some(table) => format!(", a row per image in {}", args.out.join(table).display()),
            None => String::new(),
        }
    );
    Ok(if summary.failure_lines > 0 {
        Outcome::DoneWithFailures
    } else {
        Outcome::Done
    })
}

/// `scrape retry --redis`: the job's dead letters and failed images (of `classes`, every class
/// when empty) go back in its streams; its workers do them again.
pub async fn retry(
    redis: &str,
    job: Option<&str>,
    classes: &[String],
    quiet: bool,
) -> anyhow::Result<Outcome> {
    let conn = connect(redis).await?;
    let job = pick_job(&conn, job)
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    let queue = JobQueue::new(conn, &job, "retry");
    check_key_format(&queue).await?;
    let requeued = scrape::cluster::retry::requeue_failed(&queue, classes).await?;
    if !quiet {
        eprintln!(
            "job {job}: {} dead letter(s) and {} failed image(s) queued again{}; run `scrape worker` to do them",
            requeued.dead_letters,
            requeued.failed_images,
            if requeued.unreadable > 0 {
                format!(
                    " ({} dead letter(s) that are no item left as they are)",
                    requeued.unreadable
                )
            } else {
                String::new()
            }
        );
    }
    Ok(Outcome::Done)
}
