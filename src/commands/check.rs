//! `scrape check`: validate profiles.

use scrape::profile;

use crate::{Outcome, UsageError};

pub fn check(args: &crate::cli::CheckArgs) -> anyhow::Result<Outcome> {
    let mut failed = 0;
    for path in &args.profiles {
        let shown = path.display().to_string();
        let source = match profile::read_source(path) {
            Ok(s) => s,
            Err(profile::ProfileError::Read { source, .. }) => {
                eprintln!("{shown}: error: cannot read: {source}");
                failed += 1;
                continue;
            }
            Err(e) => {
                eprintln!("{shown}: error: {e}");
                failed += 1;
                continue;
            }
        };
        let checked = profile::check(&source);
        for d in &checked.diagnostics {
            eprint!("{}", d.render(&shown, &source));
        }
        match checked.profile {
            Some(p) => super::print_stdout(&format!(
                "{shown}: ok (profile `{}`, {} start URL(s), {} sitemap(s), {} image rule(s), {} api rule(s))\n",
                p.name,
                p.start.len(),
                p.sitemap.len(),
                p.images.len(),
                p.api.len()
            ))?,
            None => failed += 1,
        }
    }
    if failed > 0 {
        return Err(UsageError(format!("{failed} profile(s) have errors")).into());
    }
    Ok(Outcome::Done)
}
