//! `scrape completions` and `scrape man`: shell completions and manual pages, generated from the
//! same flag definitions as `--help`, so the three never disagree.

use anyhow::Context;
use clap::CommandFactory;

use crate::Outcome;
use crate::cli::{Cli, CompletionsArgs, ManArgs};

pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "scrape", &mut script);
    super::print_stdout(&String::from_utf8_lossy(&script))?;
    Ok(Outcome::Done)
}

pub fn man(args: &ManArgs) -> anyhow::Result<Outcome> {
    let command = Cli::command();
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create `{}`", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write manual pages into `{}`", dir.display()))?;
        }
        None => {
            let mut page = Vec::new();
            // As `generate_to` does: `help` is no command of its own with a page.
            clap_mangen::Man::new(command.disable_help_subcommand(true))
                .render(&mut page)
                .context("cannot render the manual page")?;
            super::print_stdout(&String::from_utf8_lossy(&page))?;
        }
    }
    Ok(Outcome::Done)
}
