//! One module per command: thin glue between flags, the library and what a person reads.

pub mod check;
pub mod demo;
pub mod download;
pub mod new_profile;
pub mod probe;
pub mod record;
pub mod run;
pub mod schema;
pub mod status;
pub mod test;
pub mod urls;

use std::path::Path;

use anyhow::Context;
use scrape::profile::{self, Profile};

use scrape::profile::{DownloadSettings, PathTemplate, parse_bytes, parse_duration};
use scrape::proxy::ProxyEndpoint;
use scrape::verify::ImageFormat;

use crate::UsageError;
use crate::cli::LimitArgs;

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
        plain_every: duration_flag("--progress-interval", &progress.progress_interval)?,
        network: scrape::replay::Network::Live,
        download: true,
        metrics: bind_metrics(progress.metrics)?,
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

/// Parses a `--progress-interval`-style duration flag.
pub fn duration_flag(name: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    profile::parse_duration(text)
        .map_err(|m| UsageError(format!("{name}: {m}")))
        .context("invalid flag")
}

/// Applies download-limit flags over a profile's (or the default) settings.
pub fn apply_limits(
    mut s: DownloadSettings,
    limits: &LimitArgs,
) -> anyhow::Result<DownloadSettings> {
    let usage = |m: String| anyhow::Error::from(UsageError(m));
    for (flag, value) in [
        ("--concurrency", limits.concurrency),
        ("--per-host", limits.per_host),
    ] {
        if value == Some(0) {
            return Err(usage(format!("{flag} must be at least 1")));
        }
    }
    if let Some(n) = limits.concurrency {
        s.concurrency = n;
    }
    if let Some(n) = limits.per_host {
        s.per_host = n;
    }
    if let Some(t) = &limits.connect_timeout {
        s.connect_timeout =
            parse_duration(t).map_err(|m| usage(format!("--connect-timeout: {m}")))?;
    }
    if let Some(t) = &limits.timeout {
        s.timeout = parse_duration(t).map_err(|m| usage(format!("--timeout: {m}")))?;
    }
    if let Some(t) = &limits.first_byte_timeout {
        s.first_byte_timeout =
            parse_duration(t).map_err(|m| usage(format!("--first-byte-timeout: {m}")))?;
    }
    if let Some(b) = &limits.min_speed {
        s.min_speed_bytes = parse_bytes(b.trim_end_matches("/s"))
            .map_err(|m| usage(format!("--min-speed: {m}")))?;
    }
    if let Some(r) = limits.per_host_rps {
        if !(r.is_finite() && r > 0.0) {
            return Err(usage(format!(
                "--per-host-rps must be a positive number, not {r}"
            )));
        }
        s.per_host_rps = Some(r);
    }
    if let Some(n) = limits.retries {
        s.retries = n;
    }
    if let Some(b) = &limits.max_bytes {
        s.max_bytes = parse_bytes(b).map_err(|m| usage(format!("--max-bytes: {m}")))?;
    }
    if let Some(ua) = &limits.user_agent {
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
        let name = name.trim();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid {
            return Err(usage(format!("--header `{header}` has an invalid name")));
        }
        s.headers.push((
            name.to_owned(),
            profile::HeaderSource::Literal(value.trim().to_owned()),
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
        s.verify.max_pixels = p;
    }
    if let Some(t) = &limits.path {
        s.path = PathTemplate::parse(t).map_err(|m| usage(format!("--path: {m}")))?;
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
