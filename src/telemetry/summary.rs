//! The end-of-run summary.

use std::fmt;
use std::time::Duration;

use super::{human_bytes, human_duration};
use crate::state::Counters;

/// What a run did, for the final lines.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub before: Counters,
    pub after: Counters,
    pub elapsed: Duration,
    /// Failure counts by class, over the whole job.
    pub failure_classes: Vec<(String, u64)>,
    /// Where images came from (start URLs, URL lists) and how each ended.
    pub sources: Vec<(String, String)>,
    pub interrupted: bool,
    /// A sign-in wall or a bot challenge held pages or images back for the next run.
    pub walled: bool,
    /// The run's number and its list of new images, for a job whose runs are numbered.
    pub run_list: Option<crate::output::RunListed>,
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.after, &self.before);
        let stored_now = a.stored - b.stored.min(a.stored);
        let title = if self.interrupted {
            "interrupted"
        } else {
            "done"
        };
        writeln!(f, "{title} in {}", human_duration(self.elapsed))?;
        if a.pages_done + a.pages_failed > 0 {
            let robots = if a.pages_robots > 0 {
                format!(
                    " ({} disallowed by robots.txt: class robots)",
                    a.pages_robots
                )
            } else {
                String::new()
            };
            writeln!(
                f,
                "  pages     {} done, {} failed{robots}",
                a.pages_done, a.pages_failed
            )?;
        }
        if a.links_queued > 0 {
            writeln!(
                f,
                "  links     {} linked pages ([[follow]]) queued, not crawled yet",
                a.links_queued
            )?;
        }
        writeln!(
            f,
            "  images    {} found, {} stored ({} this run, {}), {} duplicates, {} failed, {} pending",
            a.images_found,
            a.stored,
            stored_now,
            human_bytes(a.stored_bytes),
            a.duplicates,
            a.failed,
            a.pending()
        )?;
        if let Some(listed) = &self.run_list {
            writeln!(
                f,
                "  new       {} new images stored by run {} (listed in {}), {} found by it",
                listed.lines,
                listed.number,
                crate::output::run_list_name(listed.number),
                listed.found
            )?;
        }
        if b.rechecks_queued > 0 {
            let asked = b.rechecks_queued.saturating_sub(a.rechecks_queued);
            let changed = a.rechecks_changed.saturating_sub(b.rechecks_changed);
            write!(
                f,
                "  recheck   {asked} stored images asked again, {changed} changed and stored anew"
            )?;
            match a.rechecks_queued {
                0 => writeln!(f)?,
                left => writeln!(f, ", {left} left for the next run")?,
            }
        }
        let done_now =
            (a.stored + a.duplicates + a.failed).saturating_sub(b.stored + b.duplicates + b.failed);
        let rate = done_now as f64 / self.elapsed.as_secs_f64().max(0.001);
        writeln!(f, "  rate      {rate:.1} images/s this run")?;
        if !self.failure_classes.is_empty() {
            let classes: Vec<_> = self
                .failure_classes
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            writeln!(f, "  failures  {}", classes.join(", "))?;
        }
        for (source, outcome) in &self.sources {
            writeln!(f, "  source    {source}: {outcome}")?;
        }
        Ok(())
    }
}
