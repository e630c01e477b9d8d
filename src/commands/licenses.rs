//! `scrape licenses`: what a dataset is made of before anyone trains on it, its images counted
//! by licence and by creator as their pages published them. Read from `manifest.jsonl`, the
//! dataset's own description, a line at a time: one process's and workers' alike.

use std::collections::BTreeMap;
use std::io::BufRead;

use anyhow::Context;

use crate::cli::LicensesArgs;
use crate::{Outcome, UsageError};

/// Creators shown in the table at most; the rest are counted in one line.
const SHOWN_CREATORS: usize = 20;
/// What an image without the field counts as.
const NONE_STATED: &str = "(none stated)";

pub fn licenses(args: &LicensesArgs) -> anyhow::Result<Outcome> {
    let path = args.out.join("manifest.jsonl");
    let file = std::fs::File::open(&path).map_err(|e| {
        UsageError(format!(
            "cannot read `{}`: {e} (a run of the profile, or `scrape export`, writes it)",
            path.display()
        ))
    })?;
    let mut images = 0u64;
    let mut licenses: BTreeMap<String, u64> = BTreeMap::new();
    let mut creators: BTreeMap<String, u64> = BTreeMap::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading `{}`", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("`{}` line {} is not JSON", path.display(), n + 1))?;
        images += 1;
        let field = |name: &str| {
            value["rights"][name]["value"]
                .as_str()
                .unwrap_or(NONE_STATED)
                .to_owned()
        };
        *licenses.entry(field("license")).or_default() += 1;
        *creators.entry(field("creator")).or_default() += 1;
    }
    if args.json {
        let json =
            serde_json::json!({ "images": images, "licenses": licenses, "creators": creators });
        println!("{json}");
        return Ok(Outcome::Done);
    }
    println!("{images} images in {}", path.display());
    print_table("licence", &licenses, usize::MAX);
    print_table("creator", &creators, SHOWN_CREATORS);
    Ok(Outcome::Done)
}

/// `counts` as a table, most images first, `most` rows at most (the rest in one line).
fn print_table(what: &str, counts: &BTreeMap<String, u64>, most: usize) {
    let mut rows: Vec<(&String, &u64)> = counts.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!();
    println!("{:>8}  {what}", "images");
    for (name, count) in rows.iter().take(most) {
        println!("{count:>8}  {name}");
    }
    if rows.len() > most {
        let rest: u64 = rows[most..].iter().map(|(_, n)| **n).sum();
        println!("{rest:>8}  ({} more {what}s)", rows.len() - most);
    }
}
