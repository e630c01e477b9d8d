//! `scrape schema`: the JSON Schema of profiles, for editors (taplo, Even Better TOML).

use anyhow::Context;

use crate::Outcome;
use crate::cli::SchemaArgs;

pub fn schema(args: &SchemaArgs) -> anyhow::Result<Outcome> {
    let schema = scrape::profile::profile_schema();
    // Invariant: a `serde_json::Value` always serializes.
    let mut text = serde_json::to_string_pretty(&schema).expect("JSON value serializes");
    text.push('\n');
    match &args.out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write `{}`", path.display()))?,
        None => super::print_stdout(&text)?,
    }
    Ok(Outcome::Done)
}
