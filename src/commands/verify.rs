//! `scrape verify`: every stored file re-hashed against the state; those missing or changed
//! listed on stdout (`PATH<TAB>PROBLEM<TAB>URL`), and with `--requeue` queued again.

use std::collections::BTreeSet;

use anyhow::Context;
use scrape::output::audit::audit;

use super::print_stdout;
use crate::Outcome;
use crate::cli::VerifyArgs;

pub fn verify(args: &VerifyArgs) -> anyhow::Result<Outcome> {
    let state = super::urls::open(&args.out, "verify")?;
    let found = audit(&state, &args.out)?;
    for m in &found.mismatches {
        print_stdout(&format!("{}\t{}\t{}\n", m.path, m.problem, m.url))?;
    }
    eprintln!(
        "{} checked: {} missing or changed",
        found.checked(),
        found.mismatches.len()
    );
    if found.mismatches.is_empty() {
        return Ok(Outcome::Done);
    }
    if args.requeue {
        let urls: BTreeSet<String> = found.mismatches.iter().map(|m| m.url.clone()).collect();
        // A damaged sample leaves its shard before its image is queued again: no shard keeps a
        // sample nothing points at.
        let paths: BTreeSet<String> = found.mismatches.iter().map(|m| m.path.clone()).collect();
        let dropped = scrape::output::shards::drop_samples(&args.out, &state, &paths)
            .context("cannot take the damaged samples out of their shards")?;
        let requeued = state
            .requeue_urls(&urls, |path| dropped.covers(path), &dropped.records)
            .context("cannot queue the images again")?;
        eprintln!(
            "{requeued} image(s) queued again: `scrape download --out {}` (or a run of the profile) fetches them",
            args.out.display()
        );
    } else {
        eprintln!(
            "`scrape verify --out {} --requeue` queues them for download again",
            args.out.display()
        );
    }
    Ok(Outcome::DoneWithFailures)
}
