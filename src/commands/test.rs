//! `scrape test`: a profile's recording replayed offline (no download), what it finds compared
//! with the expected file beside the recording.
//!
//! The recording is the profile's `[replay] recording`, relative to the profile file, by
//! default `../fixtures/<profile stem>/site.har` from the profile's folder (so
//! `site-profiles/demo.toml` uses `fixtures/demo/site.har`); the expected file is
//! `expected.jsonl` in the recording's folder: one JSON object per image found (URL, rule,
//! attribute, metadata, page), sorted. Replays here are strict: a request that is not in the
//! recording fails the test (unless `[replay] ignore` matches it), and `--update` writes the
//! expected file only from a replay without failed pages or unrecorded requests. A chain whose
//! next page is not in the recording ends there ("end of recording"), not as a failed page.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use scrape::job::{JobOptions, JobSpec, run_job};
use scrape::replay::Network;
use scrape::state::State;
use scrape::telemetry::ProgressMode;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::load_profile;
use super::run::{load_replayer, print_unmatched};
use crate::cli::TestArgs;
use crate::{Outcome, UsageError};

/// The expected file's name, in the recording's folder.
pub const EXPECTED: &str = "expected.jsonl";

/// One image found, as a line of the expected file.
#[derive(Serialize)]
struct FoundImage<'a> {
    url: &'a str,
    rule: &'a str,
    attribute: &'a str,
    metadata: &'a BTreeMap<String, String>,
    page: &'a str,
}

pub async fn test(args: TestArgs, cancel: CancellationToken) -> anyhow::Result<Outcome> {
    let mut failed = 0;
    for path in &args.profiles {
        match test_one(path, args.update, &cancel).await? {
            Outcome::Done => {}
            Outcome::Interrupted => return Ok(Outcome::Interrupted),
            Outcome::DoneWithFailures => failed += 1,
        }
    }
    if args.profiles.len() > 1 {
        eprintln!("{} profiles tested, {failed} failed", args.profiles.len());
    }
    Ok(if failed > 0 {
        Outcome::DoneWithFailures
    } else {
        Outcome::Done
    })
}

async fn test_one(
    path: &Path,
    update: bool,
    cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    let profile = load_profile(path)?;
    let recording = profile.replay.recording_for(path);
    let expected_path = recording.with_file_name(EXPECTED);
    if !recording.exists() {
        return Err(UsageError(format!(
            "`{}` has no recording at `{}`: make one with `scrape record --profile {} --out {}` \
             (or name it in `[replay] recording`)",
            path.display(),
            recording.display(),
            path.display(),
            recording.parent().unwrap_or(Path::new(".")).display()
        ))
        .into());
    }
    let replayer = Arc::new(load_replayer(&profile, &recording)?);
    let work = tempfile::tempdir().context("cannot make a temporary folder for the replay")?;
    let options = JobOptions {
        out: work.path().to_owned(),
        fresh: true,
        progress: ProgressMode::Off,
        plain_every: std::time::Duration::from_secs(10),
        network: Network::Replay(Arc::clone(&replayer)),
        download: false,
        metrics: None,
        recheck_images: false,
    };
    let name = profile.name.clone();
    let outcome = run_job(JobSpec::crawl(profile), options, cancel.clone())
        .await
        .with_context(|| format!("the replay of `{name}` did not finish"))?;
    if outcome.summary.interrupted {
        return Ok(Outcome::Interrupted);
    }
    let found = found_lines(work.path())?;
    let shown = path.display();
    let unmatched = replayer.unmatched();
    let pages_failed = outcome.summary.after.pages_failed;
    if update && (!unmatched.is_empty() || pages_failed > 0) {
        // An expected file is only ever written from a replay that worked.
        eprintln!(
            "{shown}: FAILED: the replay did not work; `{}` is left as it was",
            expected_path.display()
        );
        print_unmatched(&unmatched);
        if pages_failed > 0 {
            eprintln!("{shown}: {pages_failed} pages failed in the replay");
        }
        return Ok(Outcome::DoneWithFailures);
    }
    if update {
        let mut text = found.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(&expected_path, text)
            .with_context(|| format!("cannot write `{}`", expected_path.display()))?;
        eprintln!(
            "{shown}: wrote {} images to {}",
            found.len(),
            expected_path.display()
        );
        return Ok(Outcome::Done);
    }
    let expected: Vec<String> = match std::fs::read_to_string(&expected_path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "{shown}: FAILED: no `{}`; run `scrape test {shown} --update` to write it",
                expected_path.display()
            );
            return Ok(Outcome::DoneWithFailures);
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read `{}`", expected_path.display()));
        }
    };
    let diff = diff_sorted(&expected, &found);
    let mut ok = true;
    if !diff.is_empty() {
        ok = false;
        eprintln!(
            "{shown}: FAILED: the replay found other images than `{}`",
            expected_path.display()
        );
        eprintln!("--- {} (expected)", expected_path.display());
        eprintln!("+++ replay of {}", recording.display());
        for line in &diff {
            eprintln!("{line}");
        }
        eprintln!("(after a deliberate change: `scrape test {shown} --update`)");
    }
    if !unmatched.is_empty() {
        ok = false;
        eprintln!("{shown}: FAILED: the replay asked for requests the recording does not have");
        print_unmatched(&unmatched);
    }
    if pages_failed > 0 {
        ok = false;
        eprintln!("{shown}: FAILED: {pages_failed} pages failed in the replay");
    }
    if ok {
        eprintln!(
            "{shown}: ok ({} images, as in `{}`)",
            found.len(),
            expected_path.display()
        );
        Ok(Outcome::Done)
    } else {
        Ok(Outcome::DoneWithFailures)
    }
}

/// The images of the replay's state, one JSON line each, sorted.
fn found_lines(out: &Path) -> anyhow::Result<Vec<String>> {
    let state = State::open_existing(out)?;
    let mut lines = Vec::new();
    state.for_each_image(|url, record| {
        let line = serde_json::to_string(&FoundImage {
            url,
            rule: &record.rule,
            attribute: &record.attribute,
            metadata: &record.metadata,
            page: &record.page,
        })
        .unwrap_or_default();
        lines.push(line);
        Ok(())
    })?;
    lines.sort();
    Ok(lines)
}

/// `-` lines only expected, `+` lines only found, both lists sorted.
fn diff_sorted(expected: &[String], found: &[String]) -> Vec<String> {
    let mut expected: Vec<&String> = expected.iter().collect();
    expected.sort();
    let (mut e, mut f) = (0, 0);
    let mut out = Vec::new();
    while e < expected.len() || f < found.len() {
        match (expected.get(e), found.get(f)) {
            (Some(a), Some(b)) if *a == b => {
                e += 1;
                f += 1;
            }
            (Some(a), Some(b)) if a.as_str() < b.as_str() => {
                out.push(format!("-{a}"));
                e += 1;
            }
            (Some(_), Some(b)) => {
                out.push(format!("+{b}"));
                f += 1;
            }
            (Some(a), None) => {
                out.push(format!("-{a}"));
                e += 1;
            }
            (None, Some(b)) => {
                out.push(format!("+{b}"));
                f += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_removed_and_added_lines() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            diff_sorted(&s(&["a", "b", "d"]), &s(&["a", "c", "d", "e"])),
            ["-b", "+c", "+e"]
        );
        assert!(diff_sorted(&s(&["a"]), &s(&["a"])).is_empty());
    }
}
