//! `[politeness]`: robots.txt on or off, the opt-out directives that count, a contact address.

use super::Validator;
use crate::profile::raw::{PolitenessToml, RobotsToml};
use crate::profile::{Diagnostic, OPT_OUT_DIRECTIVES, Politeness, RobotsMode, did_you_mean};

impl Validator<'_> {
    /// `[politeness]`.
    pub(super) fn politeness(&mut self, raw: PolitenessToml) -> Option<Politeness> {
        let mut ok = true;
        let defaults = Politeness::default();
        let robots = match raw.robots.map(|r| *r.get_ref()) {
            None | Some(RobotsToml::Obey) => RobotsMode::Obey,
            Some(RobotsToml::Ignore) => RobotsMode::Ignore,
        };
        let opt_out = match raw.opt_out {
            None => defaults.opt_out,
            Some(list) => {
                let mut directives: Vec<String> = Vec::new();
                for item in &list {
                    let directive = item.get_ref().trim().to_ascii_lowercase();
                    if OPT_OUT_DIRECTIVES.contains(&directive.as_str()) {
                        if !directives.contains(&directive) {
                            directives.push(directive);
                        }
                        continue;
                    }
                    let hint = match did_you_mean(&directive, OPT_OUT_DIRECTIVES.iter().copied()) {
                        Some(best) => format!("did you mean `{best}`?"),
                        None => format!("use one of {}", OPT_OUT_DIRECTIVES.join(", ")),
                    };
                    self.diagnostics.push(
                        Diagnostic::error(
                            Some(item.span()),
                            format!("unknown opt-out directive `{}`", item.get_ref()),
                        )
                        .with_hint(hint),
                    );
                    ok = false;
                }
                directives
            }
        };
        let contact = match raw.contact {
            None => None,
            Some(c) => {
                let text = c.get_ref().trim();
                let reachable = ["mailto:", "http://", "https://"]
                    .iter()
                    .any(|scheme| text.len() > scheme.len() && text.starts_with(scheme));
                if reachable && !text.chars().any(|ch| ch.is_control() || ch == ')') {
                    Some(text.to_owned())
                } else {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Some(c.span()),
                            format!(
                                "`contact` must be a mailto: or http(s):// address, not `{text}`"
                            ),
                        )
                        .with_hint("write e.g. contact = \"mailto:crawler@example.org\""),
                    );
                    ok = false;
                    None
                }
            }
        };
        ok.then_some(Politeness {
            robots,
            opt_out,
            contact,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{HEAD, messages};
    use crate::profile::{DEFAULT_USER_AGENT, Politeness, RobotsMode, agent_token, check};

    #[test]
    fn politeness_obeys_by_default_and_takes_its_keys() {
        let profile = check(HEAD).profile.unwrap();
        assert_eq!(profile.download.politeness, Politeness::default());
        assert_eq!(profile.download.user_agent, DEFAULT_USER_AGENT);
        let checked = check(&format!(
            "{HEAD}[politeness]\nrobots = \"ignore\"\nopt_out = [\"NoAI\", \"noindex\", \"noai\"]\n\
             contact = \"mailto:crawl@example.org\"\n"
        ));
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let download = checked.profile.unwrap().download;
        assert_eq!(download.politeness.robots, RobotsMode::Ignore);
        assert_eq!(download.politeness.opt_out, ["noai", "noindex"]);
        assert_eq!(
            download.user_agent,
            format!("{DEFAULT_USER_AGENT} (+mailto:crawl@example.org)")
        );
        let none = check(&format!("{HEAD}[politeness]\nopt_out = []\n"));
        assert!(none.profile.unwrap().download.politeness.opt_out.is_empty());
    }

    #[test]
    fn bad_politeness_values_are_errors_with_hints() {
        for (rest, expected) in [
            ("robots = \"maybe\"", "unknown variant `maybe`"),
            ("opt_out = [\"noimgai\"]", "did you mean `noimageai`?"),
            ("opt_out = [\"nofollow\"]", "use one of noai"),
            ("contact = \"me\"", "`contact` must be a mailto:"),
            ("contact = \"mailto:\"", "`contact` must be a mailto:"),
            ("colour = 1", "unknown key `colour`"),
        ] {
            let found = messages(&format!("[politeness]\n{rest}\n"));
            assert!(
                found.iter().any(|m| m.contains(expected)),
                "{rest}: {found:?}"
            );
        }
    }

    #[test]
    fn the_robots_token_is_the_user_agents_product() {
        assert_eq!(agent_token(DEFAULT_USER_AGENT), "scrape");
        assert_eq!(agent_token("MyBot/2.0 (+mailto:a@b.c)"), "mybot");
        assert_eq!(agent_token("42"), "scrape");
    }
}
