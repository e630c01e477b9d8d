//! `scrape verify`: every stored file (or object of the bucket) re-hashed against the state;
//! those missing or changed listed on stdout (`PATH<TAB>PROBLEM<TAB>URL`), and with `--requeue`
//! queued again.

use std::collections::BTreeSet;

use anyhow::Context;
use scrape::output::audit::{Stored, audit};
use scrape::output::bucket::Destination;

use super::print_stdout;
use crate::cli::VerifyArgs;
use crate::{Outcome, UsageError};

pub async fn verify(args: &VerifyArgs) -> anyhow::Result<Outcome> {
    let state = super::urls::open(&args.out, "verify")?;
    let to = Destination::resolve(&args.out)?;
    let found = {
        let (state, to) = (state.clone(), to.clone());
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let scratch = to.dir.join(scrape::state::STATE_DIR);
            let stored = match &to.bucket {
                None => Stored::Folder(&to.dir),
                Some(bucket) => Stored::Bucket {
                    bucket,
                    runtime,
                    scratch: &scratch,
                },
            };
            audit(&state, &stored)
        })
        .await
        .context("the check stopped")??
    };
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
    let shown = args.out.display();
    if args.requeue {
        let urls: BTreeSet<String> = found.mismatches.iter().map(|m| m.url.clone()).collect();
        // A damaged sample leaves its shard before its image is queued again: no shard keeps a
        // sample nothing points at.
        let paths: BTreeSet<String> = found.mismatches.iter().map(|m| m.path.clone()).collect();
        let dropped = match &to.bucket {
            None => scrape::output::shards::drop_samples(&to.dir, &state, &paths)
                .context("cannot take the damaged samples out of their shards")?,
            Some(bucket) => {
                if paths
                    .iter()
                    .any(|p| scrape::output::shards::member_of(p).is_some())
                {
                    return Err(UsageError(format!(
                        "the damaged samples are in shards of `{shown}`, which cannot be \
                         rewritten in place; remove those shards' objects and run the job \
                         with --fresh to store them again"
                    ))
                    .into());
                }
                // A damaged object goes first: the image's next put is create-only.
                for path in &paths {
                    bucket
                        .remove(path)
                        .await
                        .context("cannot remove a damaged object")?;
                }
                Default::default()
            }
        };
        let requeued = state
            .requeue_urls(&urls, |path| dropped.covers(path), &dropped.records)
            .context("cannot queue the images again")?;
        eprintln!(
            "{requeued} image(s) queued again: `scrape download --out {shown}` (or a run of the profile) fetches them"
        );
    } else {
        eprintln!("`scrape verify --out {shown} --requeue` queues them for download again");
    }
    Ok(Outcome::DoneWithFailures)
}
