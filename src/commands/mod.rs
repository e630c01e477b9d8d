//! One module per command: thin glue between flags, the library and what a person reads.

pub mod check;
pub mod cluster;
pub mod demo;
pub mod docs;
pub mod download;
pub mod licenses;
pub mod login;
pub mod new_profile;
pub mod probe;
pub mod record;
pub mod run;
pub mod schema;
pub mod status;
pub mod test;
pub mod urls;
pub mod verify;

use std::path::Path;

use scrape::profile::{self, Profile};

use scrape::profile::{DownloadSettings, PathTemplate, parse_bytes};
use scrape::proxy::ProxyEndpoint;
use scrape::verify::ImageFormat;

use crate::UsageError;
use crate::cli::LimitArgs;

/// Writes `text` to stdout. A reader that has gone away (`scrape status | head -1`) is not an
/// error: it has read what it wanted, so the rest is dropped quietly.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}

/// Loads a profile, printing its warnings.
pub fn load_profile(path: &Path) -> anyhow::Result<Profile> {
    let (profile, warnings) = profile::load(path)?;
    for warning in warnings {
        eprint!("{warning}");
    }
    Ok(profile)
}

/// Replaces the profile's start URLs with `starts`, each checked.
pub fn override_starts(profile: &mut Profile, starts: &[String]) -> anyhow::Result<()> {
    if starts.is_empty() {
        return Ok(());
    }
    profile.start = starts
        .iter()
        .map(|s| profile::parse_http_url(s).map_err(|m| UsageError(format!("--start: {m}"))))
        .collect::<Result<_, _>>()?;
    Ok(())
}

/// The options of a job run from the command line.
pub fn job_options(
    out: std::path::PathBuf,
    fresh: bool,
    progress: &crate::cli::ProgressArgs,
    quiet: bool,
) -> anyhow::Result<scrape::job::JobOptions> {
    Ok(scrape::job::JobOptions {
        out,
        fresh,
        progress: if quiet {
            scrape::telemetry::ProgressMode::Off
        } else {
            progress.progress
        },
        plain_every: interval_flag("--progress-interval", &progress.progress_interval)?,
        network: scrape::replay::Network::Live,
        download: true,
        metrics: bind_metrics(progress.metrics)?,
        recheck_images: false,
    })
}

/// Binds `--metrics ADDR`, before the job touches anything: a taken port is the user's to fix.
pub fn bind_metrics(
    addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<Option<scrape::telemetry::MetricsListener>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = scrape::telemetry::MetricsListener::bind(addr)
        .map_err(|e| UsageError(format!("--metrics: {e}: {}", e.source)))?;
    Ok(Some(listener))
}

/// Checks a flag's value with the check of the profile key it overrides; a refused value is a
/// usage error naming the flag.
pub fn flag<T>(name: &str, checked: Result<T, String>) -> anyhow::Result<T> {
    checked.map_err(|m| UsageError(format!("{name}: {m}")).into())
}

/// `--progress-interval`: how often a plain progress line is printed.
pub fn interval_flag(name: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    flag(name, profile::limits::interval(text))
}

/// Applies download-limit flags over a profile's (or the default) settings; each is checked
/// like the `[download]` key it overrides.
pub fn apply_limits(
    mut s: DownloadSettings,
    limits: &LimitArgs,
) -> anyhow::Result<DownloadSettings> {
    use scrape::profile::limits::{self as check, MAX_DOWNLOADS_IN_FLIGHT};
    let usage = |m: String| anyhow::Error::from(UsageError(m));
    if let Some(n) = limits.concurrency {
        s.concurrency = flag(
            "--concurrency",
            check::count("concurrency", n, MAX_DOWNLOADS_IN_FLIGHT),
        )? as usize;
    }
    if let Some(n) = limits.per_host {
        s.per_host = flag(
            "--per-host",
            check::count("per_host", n, MAX_DOWNLOADS_IN_FLIGHT),
        )? as usize;
    }
    if let Some(t) = &limits.connect_timeout {
        s.connect_timeout = flag("--connect-timeout", check::timeout(t))?;
    }
    if let Some(t) = &limits.timeout {
        s.timeout = flag("--timeout", check::timeout(t))?;
    }
    if let Some(t) = &limits.first_byte_timeout {
        s.first_byte_timeout = flag("--first-byte-timeout", check::timeout(t))?;
    }
    if let Some(b) = &limits.min_speed {
        s.min_speed_bytes = flag("--min-speed", parse_bytes(b.trim_end_matches("/s")))?;
    }
    if let Some(r) = limits.per_host_rps {
        s.per_host_rps = Some(flag("--per-host-rps", check::per_host_rps(r))?);
    }
    if let Some(n) = limits.retries {
        s.retries = flag("--retries", check::retries(n))?;
    }
    if let Some(b) = &limits.max_bytes {
        s.max_bytes = flag(
            "--max-bytes",
            parse_bytes(b).and_then(|n| check::above_zero("max_bytes", n)),
        )?;
    }
    if let Some(ua) = &limits.user_agent {
        flag("--user-agent", check::header("User-Agent", ua))?;
        s.user_agent = ua.clone();
    }
    if let Some(mode) = limits.robots {
        s.politeness.robots = match mode {
            crate::cli::RobotsArg::Obey => profile::RobotsMode::Obey,
            crate::cli::RobotsArg::Ignore => profile::RobotsMode::Ignore,
        };
    }
    for header in &limits.headers {
        let Some((name, value)) = header.split_once(':') else {
            return Err(usage(format!("--header `{header}` is not `Name: value`")));
        };
        let (name, value) = (name.trim(), value.trim());
        flag("--header", check::header(name, value))?;
        s.headers.push((
            name.to_owned(),
            profile::HeaderSource::Literal(scrape::redact::Secret::new(value.to_owned())),
        ));
    }
    if !limits.formats.is_empty() {
        s.verify.allowed = limits
            .formats
            .iter()
            .map(|f| {
                ImageFormat::from_name(f)
                    .ok_or_else(|| usage(format!("--formats: unknown image format `{f}`")))
            })
            .collect::<Result<_, _>>()?;
    }
    if let Some(w) = limits.min_width {
        s.verify.min_width = w;
    }
    if let Some(h) = limits.min_height {
        s.verify.min_height = h;
    }
    if let Some(p) = limits.max_pixels {
        s.verify.max_pixels = flag("--max-pixels", check::above_zero("max_pixels", p))?;
    }
    if let Some(t) = &limits.path {
        s.path = PathTemplate::parse(t).map_err(|m| usage(format!("--path: {m}")))?;
    }
    if let Some(name) = &limits.format {
        s.dataset.format = flag("--format", profile::dataset::format(name))?;
    }
    if let Some(n) = limits.shard_size {
        s.dataset.shard_size = flag("--shard-size", profile::dataset::shard_size(n))?;
    }
    if !limits.proxies.is_empty() {
        s.proxy.endpoints = limits
            .proxies
            .iter()
            .map(|p| ProxyEndpoint::parse(p).map_err(|m| usage(format!("--proxy: {m}"))))
            .collect::<Result<_, _>>()?;
        s.proxy.file = None;
    }
    Ok(s)
}
