//! `scrape status`: what is done, pending and failed.

use scrape::state::State;
use scrape::telemetry::human_bytes;

use super::load_profile;
use crate::Outcome;
use crate::cli::StatusArgs;

pub fn status(args: &StatusArgs) -> anyhow::Result<Outcome> {
    let profile = args.profile.as_deref().map(load_profile).transpose()?;
    let out = match (&args.out, &profile) {
        (Some(out), _) => out.clone(),
        (None, Some(p)) => p.download.out.clone(),
        (None, None) => unreachable!("clap requires --profile or --out"),
    };
    let state = State::open_existing(&out)?;
    let counters = state.counters()?;
    let failures = state.failure_classes()?;
    let chains = state.chains()?;
    let name = state.profile_name()?.unwrap_or_default();
    if args.json {
        let value = serde_json::json!({
            "profile": name,
            "out": out,
            "counters": counters,
            "pending": counters.pending(),
            "failures": failures.iter().map(|(c, n)| (c.clone(), *n)).collect::<std::collections::BTreeMap<_, _>>(),
            "chains": chains.iter().map(|(start, c)| serde_json::json!({ "start": start, "checkpoint": c })).collect::<Vec<_>>(),
        });
        println!("{value}");
        return Ok(Outcome::Done);
    }
    println!("profile   {name} (state {})", state.path().display());
    println!(
        "pages     {} done, {} failed",
        counters.pages_done, counters.pages_failed
    );
    println!(
        "images    {} found: {} stored ({}), {} duplicates, {} failed, {} pending",
        counters.images_found,
        counters.stored,
        human_bytes(counters.stored_bytes),
        counters.duplicates,
        counters.failed,
        counters.pending()
    );
    if !failures.is_empty() {
        let classes: Vec<_> = failures.iter().map(|(c, n)| format!("{c} {n}")).collect();
        println!("failures  {}", classes.join(", "));
    }
    for (start, c) in chains {
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
        println!(
            "chain     {start}: {} pages, {} image URLs seen{api}; {stands}",
            c.pages_done, c.images_found
        );
    }
    let done = counters.pending() == 0 && counters.pages_failed == 0;
    println!(
        "{}",
        if done {
            "complete"
        } else {
            "incomplete: run the profile again to continue"
        }
    );
    Ok(Outcome::Done)
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
