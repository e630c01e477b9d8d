//! `scrape urls`: every image URL a job discovered and what became of it, one line each,
//! streamed from one read transaction (a job may hold millions of records).

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use scrape::output::JobRecords;
use scrape::state::{ImageRecord, ImageStatus, State, StateError, live};
use serde::Serialize;

use crate::cli::{UrlState, UrlsArgs};
use crate::{Outcome, UsageError};

/// Where the output is written, named in errors.
const STDOUT: &str = "<stdout>";

pub fn urls(args: &UrlsArgs) -> anyhow::Result<Outcome> {
    let state = open(&args.out, "urls")?;
    let starts = state.run_starts()?;
    // `--new`: the images the last run found; a state from before runs were numbered has no
    // last run, and so nothing new.
    let only_run = match (args.new, state.current_run()?) {
        (false, _) => None,
        (true, Some((number, _))) => Some(number),
        (true, None) => return Ok(Outcome::Done),
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = state
        .for_each_image(|url, record| {
            if !args.state.admits(record.status) || only_run.is_some_and(|n| record.run != n) {
                return Ok(());
            }
            let line = if args.json {
                serde_json::to_writer(&mut out, &Line::new(url, record, &starts))
                    .map_err(Into::into)
            } else {
                write!(out, "{}\t{url}", status_name(record.status))
            };
            line.and_then(|()| out.write_all(b"\n"))
                .map_err(|source| StateError::Io {
                    path: STDOUT.into(),
                    source,
                })
        })
        .and_then(|()| {
            out.flush().map_err(|source| StateError::Io {
                path: STDOUT.into(),
                source,
            })
        });
    match written {
        Ok(()) => Ok(Outcome::Done),
        // `scrape urls | head`: the reader has what it wanted.
        Err(StateError::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(Outcome::Done)
        }
        Err(e) => Err(e.into()),
    }
}

/// The state database of output folder `out`, opened as `scrape status` opens it; every way
/// it cannot be read is the user's to fix (exit 2), said in words.
pub(super) fn open(out: &Path, command: &str) -> anyhow::Result<State> {
    let shown = out.display();
    // A bucket's state is in a local folder of its own.
    let folder = scrape::output::bucket::Destination::state_folder(out)?;
    let out = folder.as_path();
    if !out.is_dir() {
        return Err(UsageError(format!("`{shown}` is not a folder")).into());
    }
    let not_scrape = || {
        UsageError(format!(
            "`{shown}` is not a scrape output folder (no state database `{}`)",
            State::path_for(out).display()
        ))
    };
    let state = match State::open_existing(out) {
        Ok(state) => state,
        Err(StateError::Missing { .. }) => return Err(not_scrape().into()),
        // redb lets one process open the database; a run holds it until it ends.
        Err(e @ StateError::Locked { .. }) => {
            let who = match live::read(out) {
                Some(snapshot) => format!("a running scrape (pid {})", snapshot.pid),
                None => "another scrape process".to_owned(),
            };
            return Err(anyhow::Error::new(e).context(UsageError(format!(
                "`{shown}` is in use by {who}, which holds its state database until it ends; \
                 run `scrape {command}` again then (`scrape status --out {shown}` shows its progress meanwhile)"
            ))));
        }
        Err(e @ StateError::Open { .. }) => {
            return Err(anyhow::Error::new(e).context(not_scrape()));
        }
        Err(e) => return Err(e.into()),
    };
    // A redb file of something else has none of the job's tables.
    if state.profile_name()?.is_none() {
        return Err(not_scrape().into());
    }
    Ok(state)
}

impl UrlState {
    fn admits(self, status: ImageStatus) -> bool {
        match self {
            Self::All => true,
            Self::Pending => status == ImageStatus::Pending,
            Self::Stored => status == ImageStatus::Stored,
            Self::Duplicate => status == ImageStatus::Duplicate,
            Self::Failed => status == ImageStatus::Failed,
        }
    }
}

fn status_name(status: ImageStatus) -> &'static str {
    match status {
        ImageStatus::Pending => "pending",
        ImageStatus::Stored => "stored",
        ImageStatus::Duplicate => "duplicate",
        ImageStatus::Failed => "failed",
    }
}

/// One `--json` line, borrowed from the record.
#[derive(Serialize)]
struct Line<'a> {
    url: &'a str,
    state: &'static str,
    /// The page the image was found on (for URL lists, the list).
    page: &'a str,
    rule: &'a str,
    attribute: &'a str,
    metadata: &'a std::collections::BTreeMap<String, String>,
    /// Stored and duplicate images: the file (for a duplicate, the one first stored with the
    /// same bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    /// Failed images: why, and after how many attempts.
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    /// The run that first found it, and when that run began (as in the manifest).
    run: u32,
    found_at: Option<String>,
}

impl<'a> Line<'a> {
    fn new(url: &'a str, record: &'a ImageRecord, starts: &BTreeMap<u32, u64>) -> Self {
        let stored = record
            .stored
            .as_ref()
            .filter(|_| matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate));
        let failure = record
            .failure
            .as_ref()
            .filter(|_| record.status == ImageStatus::Failed);
        Self {
            url,
            state: status_name(record.status),
            page: &record.page,
            rule: &record.rule,
            attribute: &record.attribute,
            metadata: &record.metadata,
            path: stored.map(|f| f.path.as_str()),
            sha256: stored.map(|f| f.sha256.as_str()),
            bytes: stored.map(|f| f.bytes),
            content_type: stored.map(|f| f.content_type.as_str()),
            width: stored.map(|f| f.width),
            height: stored.map(|f| f.height),
            class: failure.map(|f| f.class.as_str()),
            detail: failure.map(|f| f.detail.as_str()),
            attempts: failure.map(|_| record.attempts),
            run: record.run,
            found_at: scrape::output::found_at(starts, record.run),
        }
    }
}
