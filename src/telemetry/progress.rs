//! Progress: bars on a terminal, a plain line every few seconds otherwise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Live, human_bytes, human_duration};
use crate::state::Counters;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Bars when stderr is a terminal, plain lines otherwise.
    Auto,
    Bars,
    Plain,
    Off,
}

/// Draws progress until stopped.
pub struct ProgressReporter {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ProgressReporter {
    /// Starts reporting `counters` (with `live` bytes) in `mode`; `plain_every` is the interval of
    /// plain lines.
    pub fn start(
        mode: ProgressMode,
        counters: watch::Receiver<Counters>,
        live: Arc<Live>,
        plain_every: Duration,
    ) -> Self {
        let mode = match mode {
            ProgressMode::Auto if std::io::stderr().is_terminal() => ProgressMode::Bars,
            ProgressMode::Auto => ProgressMode::Plain,
            other => other,
        };
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            match mode {
                ProgressMode::Bars => bars(counters, live, token).await,
                ProgressMode::Plain => plain(counters, live, token, plain_every).await,
                ProgressMode::Auto | ProgressMode::Off => token.cancelled().await,
            }
        });
        Self { stop, task }
    }

    /// Stops and clears the display.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// How fast a run gets through its images, and when it will be through the pending ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Images done (stored, duplicate or failed) per second, this run.
    pub rate: f64,
    /// Time left for the pending images at that rate; none when nothing is pending or nothing
    /// was done yet.
    pub eta: Option<Duration>,
}

impl Pace {
    /// The pace of a run that had `start` done `elapsed` ago and has `now` done.
    pub fn between(start: &Counters, now: &Counters, elapsed: Duration) -> Self {
        let done = now.done().saturating_sub(start.done());
        let rate = done as f64 / elapsed.as_secs_f64().max(0.001);
        let pending = now.pending();
        let eta = (rate > 0.0 && pending > 0)
            .then(|| Duration::try_from_secs_f64(pending as f64 / rate).ok())
            .flatten();
        Self { rate, eta }
    }
}

/// What the display shows, computed from the counters at the start and now.
struct Snapshot {
    line: String,
    done: u64,
    total: u64,
}

fn snapshot(start: &Counters, now: &Counters, live: &Live, elapsed: Duration) -> Snapshot {
    let done_now = now.done();
    let Pace { rate, eta } = Pace::between(start, now, elapsed);
    let eta = match eta {
        Some(eta) => format!(", ETA {}", human_duration(eta)),
        None => String::new(),
    };
    let pages_now = now.pages_done.saturating_sub(start.pages_done);
    let page_rate = pages_now as f64 / elapsed.as_secs_f64().max(0.001);
    let chains = live.chains();
    let chains = if chains.total > 0 {
        format!(
            ", chains {}/{} done, {} active",
            chains.done, chains.total, chains.active
        )
    } else {
        String::new()
    };
    // A page waiting for its host's turn is not in flight yet.
    let in_flight = match live.pages_fetching_and_waiting() {
        (fetching, 0) => format!("{fetching} in flight"),
        (fetching, waiting) => format!("{fetching} in flight, {waiting} waiting for their host"),
    };
    let line = format!(
        "pages {} ({} failed, {in_flight}, {page_rate:.1}/s{chains}) | images {}/{} stored {} dup {} failed {} | {} ({}/s) | {:.1} img/s{eta}",
        now.pages_done,
        now.pages_failed,
        done_now,
        now.images_found,
        now.stored,
        now.duplicates,
        now.failed,
        human_bytes(live.bytes()),
        human_bytes((live.bytes() as f64 / elapsed.as_secs_f64().max(0.001)) as u64),
        rate,
    );
    Snapshot {
        line,
        done: done_now,
        total: now.images_found,
    }
}

async fn plain(
    mut counters: watch::Receiver<Counters>,
    live: Arc<Live>,
    stop: CancellationToken,
    every: Duration,
) {
    let start = *counters.borrow_and_update();
    let began = Instant::now();
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let now = *counters.borrow();
                eprintln!("{}", snapshot(&start, &now, &live, began.elapsed()).line);
            }
            () = stop.cancelled() => return,
        }
    }
}

async fn bars(mut counters: watch::Receiver<Counters>, live: Arc<Live>, stop: CancellationToken) {
    let start = *counters.borrow_and_update();
    let began = Instant::now();
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8));
    let pages = multi.add(ProgressBar::new_spinner());
    pages.set_style(
        ProgressStyle::with_template("{spinner} pages   {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let images = multi.add(ProgressBar::new(0));
    images.set_style(
        ProgressStyle::with_template("  images  [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let bytes = multi.add(ProgressBar::new_spinner());
    bytes.set_style(
        ProgressStyle::with_template("  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut ticker = tokio::time::interval(Duration::from_millis(150));
    loop {
        let now = *counters.borrow();
        let view = snapshot(&start, &now, &live, began.elapsed());
        let pages_line = view.line.split(" | ").next().unwrap_or_default();
        pages.set_message(pages_line.trim_start_matches("pages ").to_owned());
        pages.tick();
        images.set_length(view.total);
        images.set_position(view.done);
        images.set_message(format!(
            "stored {} dup {} failed {}",
            now.stored, now.duplicates, now.failed
        ));
        let rest = view
            .line
            .split(" | ")
            .skip(2)
            .collect::<Vec<_>>()
            .join(" | ");
        bytes.set_message(rest);
        tokio::select! {
            _ = ticker.tick() => {}
            () = stop.cancelled() => break,
        }
    }
    for bar in [&pages, &images, &bytes] {
        bar.finish_and_clear();
    }
    let _ = multi.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_counts_this_run_only_and_the_eta_covers_the_pending_images() {
        let start = Counters {
            images_found: 100,
            stored: 40,
            ..Counters::default()
        };
        let now = Counters {
            images_found: 100,
            stored: 70,
            duplicates: 5,
            failed: 5,
            ..Counters::default()
        };
        let pace = Pace::between(&start, &now, Duration::from_secs(10));
        assert_eq!(pace.rate, 4.0);
        assert_eq!(pace.eta, Some(Duration::from_secs(5)));
        assert_eq!(Pace::between(&now, &now, Duration::from_secs(10)).eta, None);
    }

    #[test]
    fn the_pages_part_counts_chains_done_and_active_when_the_job_has_chains() {
        let live = Live::default();
        let counters = Counters::default();
        let line = |live: &Live| snapshot(&counters, &counters, live, Duration::from_secs(1)).line;
        assert!(
            line(&live).starts_with("pages 0 (0 failed, 0 in flight, 0.0/s) | "),
            "{}",
            line(&live)
        );
        live.set_chains(5);
        let first = live.begin_chain();
        let _second = live.begin_chain();
        drop(first);
        assert!(
            line(&live).starts_with(
                "pages 0 (0 failed, 0 in flight, 0.0/s, chains 1/5 done, 1 active) | "
            ),
            "{}",
            line(&live)
        );
    }
}
