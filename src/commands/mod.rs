//! One module per command: thin glue between flags, the library and what a person reads.

pub mod check;
pub mod demo;
pub mod probe;
pub mod run;
pub mod status;

use std::path::Path;

use anyhow::Context;
use scrape::profile::{self, Profile};

use crate::UsageError;

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

/// Parses a `--progress-interval`-style duration flag.
pub fn duration_flag(name: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    profile::parse_duration(text)
        .map_err(|m| UsageError(format!("{name}: {m}")))
        .context("invalid flag")
}
