//! `scrape status`: what is done, pending and failed.

use scrape::net::{FailureClass, HostWindow};
use scrape::state::{ChainCheckpoint, Counters, LastRun, PageStatus, State, StateError, live};
use std::time::Duration;

use scrape::telemetry::{Pace, human_bytes, human_duration};

use super::{load_profile, print_stdout};
use crate::Outcome;
use crate::cli::StatusArgs;

pub fn status(args: &StatusArgs) -> anyhow::Result<Outcome> {
    let profile = args.profile.as_deref().map(load_profile).transpose()?;
    let out = match (&args.out, &profile) {
        (Some(out), _) => out.clone(),
        (None, Some(p)) => p.download.out.clone(),
        (None, None) => unreachable!("clap requires --profile or --out"),
    };
    // A bucket's state is in a local folder of its own.
    let out = scrape::output::bucket::Destination::state_folder(&out)?;
    let report = match State::open_existing(&out) {
        // A run killed before it set up the database: nothing is recorded yet.
        Ok(state) if state.profile_name()?.is_none() => Report {
            profile: String::new(),
            place: format!("state {}", state.path().display()),
            counters: Counters::default(),
            failures: None,
            chains: Vec::new(),
            links_by_level: Vec::new(),
            last_run: LastRun::Unfinished,
            run: None,
            live: None,
            walled_pages: 0,
        },
        Ok(state) => {
            // One pass over the image records: failures by class, the last run's new images.
            let current = state.current_run()?;
            let tally = state.image_tally(current.map_or(0, |(number, _)| number))?;
            Report {
                profile: state.profile_name()?.unwrap_or_default(),
                place: format!("state {}", state.path().display()),
                counters: state.counters()?,
                failures: Some(tally.failure_classes),
                chains: state.chains()?,
                links_by_level: state.links_queued_by_level()?,
                last_run: state.last_run()?,
                run: current.map(|(number, run)| RunNews {
                    number,
                    started: run.started,
                    found: tally.found_by_run,
                    stored: tally.stored_by_run,
                    checked: run.checked,
                    unchanged: run.unchanged,
                }),
                live: None,
                walled_pages: walled_pages(&state)?,
            }
        }
        // A run holds the database: its snapshot tells where it stands.
        Err(StateError::Locked { path }) => match live::read(&out) {
            Some(snapshot) => Report {
                profile: snapshot.profile,
                place: format!("running: pid {}", snapshot.pid),
                counters: snapshot.counters,
                failures: None,
                chains: snapshot.chains,
                links_by_level: Vec::new(),
                last_run: LastRun::Unfinished,
                run: None,
                live: Some(Running {
                    pid: snapshot.pid,
                    updated: snapshot.updated,
                    pace: Pace::between(
                        &snapshot.at_start,
                        &snapshot.counters,
                        Duration::from_secs(snapshot.updated.saturating_sub(snapshot.started)),
                    ),
                    hosts: snapshot.hosts,
                }),
                walled_pages: 0,
            },
            None => return Err(StateError::Locked { path }.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let text = if args.json {
        report.json(&out)
    } else {
        report.text()
    };
    print_stdout(&text)?;
    Ok(Outcome::Done)
}

/// Where a job stands, from its database or from a running job's snapshot.
struct Report {
    profile: String,
    /// The state file, or the process that holds it.
    place: String,
    counters: Counters,
    /// Failures by class: read from every image record, so not while a run holds them.
    failures: Option<Vec<(String, u64)>>,
    chains: Vec<(String, ChainCheckpoint)>,
    /// Linked pages still queued, by `[[follow]]` level (read from the database only).
    links_by_level: Vec<(String, u64)>,
    last_run: LastRun,
    /// The last run, for a job whose runs are numbered (read from the database only).
    run: Option<RunNews>,
    /// A running job, as its snapshot says.
    live: Option<Running>,
    /// Failed pages that met a sign-in wall or a bot challenge (read from the database only).
    walled_pages: u64,
}

/// The last run and the images new with it.
struct RunNews {
    number: u32,
    /// When it began, seconds since the epoch.
    started: u64,
    /// Images it found first.
    found: u64,
    /// Images it stored, or found duplicates, first: its `runs/NNNNN.jsonl`.
    stored: u64,
    /// Pages it asked only if they changed, and of those the unchanged ones (`304`).
    checked: u64,
    unchanged: u64,
}

struct Running {
    pid: u32,
    /// When the snapshot was taken, seconds since the epoch.
    updated: u64,
    pace: Pace,
    /// The busiest hosts' windows of requests in flight.
    hosts: Vec<HostWindow>,
}

/// Where the job stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Running,
    /// The last run stopped (killed, interrupted) before it ended.
    Interrupted,
    /// The last run ended, but pages or images failed or wait.
    Incomplete,
    Complete,
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Running => "running",
            Verdict::Interrupted => "interrupted",
            Verdict::Incomplete => "incomplete",
            Verdict::Complete => "complete",
        }
    }
}

impl Report {
    fn verdict(&self) -> Verdict {
        let c = &self.counters;
        let chains_open = self.chains.iter().any(|(_, chain)| chain.next.is_some());
        if self.live.is_some() {
            Verdict::Running
        } else if self.last_run == LastRun::Unfinished {
            Verdict::Interrupted
        } else if c.pending() > 0 || c.links_queued > 0 || c.pages_failed > 0 || chains_open {
            Verdict::Incomplete
        } else {
            Verdict::Complete
        }
    }

    /// The verdict's line for people.
    fn verdict_line(&self) -> String {
        let nothing_yet = self.chains.is_empty() && self.counters.images_found == 0;
        match self.verdict() {
            Verdict::Running => "running".to_owned(),
            Verdict::Interrupted if nothing_yet => {
                "interrupted before its first checkpoint: run the profile again to start".to_owned()
            }
            Verdict::Interrupted => {
                "interrupted: the last run did not finish; run the profile again to continue"
                    .to_owned()
            }
            Verdict::Incomplete if self.walled_pages > 0 => format!(
                "incomplete: {} pages met a sign-in wall or a bot challenge; sign in again (fresh cookies or storage state, `scrape login`), then run the profile again to continue",
                self.walled_pages
            ),
            Verdict::Incomplete => "incomplete: run the profile again to continue".to_owned(),
            Verdict::Complete if self.counters.failed > 0 => format!(
                "complete, {} images failed: `scrape retry` tries them again",
                self.counters.failed
            ),
            Verdict::Complete => "complete".to_owned(),
        }
    }

    /// The report as one JSON line.
    fn json(&self, out: &std::path::Path) -> String {
        let counters = &self.counters;
        let mut value = serde_json::json!({
            "profile": self.profile,
            "state": self.verdict().name(),
            "out": out,
            "counters": counters,
            "pending": counters.pending(),
            "links_queued": counters.links_queued,
            "walled_pages": self.walled_pages,
            "links_queued_by_level": self.links_by_level.iter().map(|(level, n)| (level.clone(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
            "chains": self.chains.iter().map(|(start, c)| serde_json::json!({ "start": start, "checkpoint": c })).collect::<Vec<_>>(),
        });
        if let Some(failures) = &self.failures {
            value["failures"] = failures
                .iter()
                .map(|(c, n)| (c.clone(), serde_json::json!(n)))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if let Some(run) = &self.run {
            value["last_run"] = serde_json::json!({
                "run": run.number,
                "started": run.started,
                "found": run.found,
                "stored": run.stored,
                "pages_checked": run.checked,
                "pages_unchanged": run.unchanged,
            });
        }
        if let Some(running) = &self.live {
            value["running"] = serde_json::json!({
                "pid": running.pid,
                "updated": running.updated,
                "images_per_second": (running.pace.rate * 10.0).round() / 10.0,
                "eta_seconds": running.pace.eta.map(|eta| eta.as_secs()),
                "hosts": running.hosts,
            });
        }
        format!("{value}\n")
    }

    /// The report as lines for people.
    fn text(&self) -> String {
        let counters = &self.counters;
        let mut text = String::new();
        let mut line = |line: String| {
            text.push_str(&line);
            text.push('\n');
        };
        line(format!("profile   {} ({})", self.profile, self.place));
        if let Some(running) = &self.live {
            let age = scrape::state::now().saturating_sub(running.updated);
            let eta = match running.pace.eta {
                Some(eta) => format!(", ETA {}", human_duration(eta)),
                None => String::new(),
            };
            line(format!(
                "running   {:.1} images/s this run{eta}; figures as of {age} s ago",
                running.pace.rate
            ));
            for w in &running.hosts {
                line(format!(
                    "host      {} ({}): window {}, {} in flight",
                    w.host, w.stage, w.window, w.in_flight
                ));
            }
        }
        line(format!(
            "pages     {} done, {} failed{}",
            counters.pages_done,
            counters.pages_failed,
            robots_refusals(counters.pages_robots)
        ));
        if counters.links_queued > 0 {
            let levels: Vec<String> = self
                .links_by_level
                .iter()
                .map(|(level, n)| format!("{level} {n}"))
                .collect();
            let by_level = if levels.is_empty() {
                String::new()
            } else {
                format!(" (by level: {})", levels.join(", "))
            };
            line(format!(
                "links     {} linked pages ([[follow]]) queued, not crawled yet{by_level}",
                counters.links_queued
            ));
        }
        line(format!(
            "images    {} found: {} stored ({}), {} duplicates, {} failed, {} pending",
            counters.images_found,
            counters.stored,
            human_bytes(counters.stored_bytes),
            counters.duplicates,
            counters.failed,
            counters.pending()
        ));
        match &self.failures {
            Some(failures) if !failures.is_empty() => {
                let classes: Vec<_> = failures.iter().map(|(c, n)| format!("{c} {n}")).collect();
                line(format!("failures  {}", classes.join(", ")));
            }
            None if counters.failed > 0 => {
                line("failures  by class once the run has ended".to_owned());
            }
            _ => {}
        }
        if let Some(run) = &self.run {
            line(format!(
                "last run  {} began {}: {} new images found, {} stored (listed in {})",
                run.number,
                scrape::output::run_time(run.started),
                run.found,
                run.stored,
                scrape::output::run_list_name(run.number)
            ));
            if run.checked > 0 {
                line(format!(
                    "refresh   {} pages checked, {} unchanged (304)",
                    run.checked, run.unchanged
                ));
            }
        }
        for (start, c) in &self.chains {
            line(format!("chain     {start}: {}", describe_chain(c)));
        }
        line(self.verdict_line());
        text
    }
}

/// Failed pages that met a sign-in wall or a bot challenge: looked for only when pages failed.
fn walled_pages(state: &State) -> Result<u64, StateError> {
    if state.counters()?.pages_failed == 0 {
        return Ok(0);
    }
    let walls = [FailureClass::LoginRequired, FailureClass::Blocked].map(FailureClass::name);
    let mut walled = 0;
    state.for_each_page(|_, page| {
        if page.status == PageStatus::Failed
            && page.class.as_ref().is_some_and(|c| walls.contains(c))
        {
            walled += 1;
        }
        Ok(())
    })?;
    Ok(walled)
}

/// One chain's progress and where it stands.
fn describe_chain(c: &ChainCheckpoint) -> String {
    let stands = match (&c.next, c.end) {
        (_, Some(end)) => format!("ended ({})", end.describe()),
        (Some(next), None) => match (&next.cursor, &next.after_id) {
            (Some(cursor), _) => {
                format!("next page {}, cursor `{}`", next.number, shorten(cursor))
            }
            (None, Some(id)) => format!("next page {}, after id `{id}`", next.number),
            (None, None) => format!("next page {} ({})", next.number, next.url),
        },
        (None, None) => "not started".to_owned(),
    };
    let api = match (&c.last_id, c.items_found) {
        (Some(id), items) => format!(", {items} items, last id `{id}`"),
        (None, 0) => String::new(),
        (None, items) => format!(", {items} items"),
    };
    format!(
        "{} pages, {} image URLs seen{api}; {stands}",
        c.pages_done, c.images_found
    )
}

/// A cursor short enough for one line: opaque cursors can be hundreds of characters.
fn shorten(cursor: &str) -> String {
    const MAX: usize = 48;
    if cursor.chars().count() <= MAX {
        return cursor.to_owned();
    }
    let head: String = cursor.chars().take(MAX).collect();
    format!("{head}...")
}

/// `, N of them disallowed by robots.txt` when some were.
fn robots_refusals(pages: u64) -> String {
    if pages == 0 {
        String::new()
    } else {
        format!(" ({pages} disallowed by robots.txt: class robots)")
    }
}
