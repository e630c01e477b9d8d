//! `[[follow]]` and `[levels.NAME]`: links that lead to detail pages, and the rules of those
//! pages. Every level a rule names must exist, and every level must be reachable.

use std::collections::{BTreeMap, BTreeSet};

use toml::Spanned;

use super::Validator;
use crate::profile::raw::{FollowToml, LevelToml, RenderToml};
use crate::profile::{Diagnostic, FollowRule, Level, RenderMode, did_you_mean};

impl From<RenderToml> for RenderMode {
    fn from(raw: RenderToml) -> Self {
        match raw {
            RenderToml::Static => Self::Static,
            RenderToml::Browser => Self::Browser,
            RenderToml::Auto => Self::Auto,
        }
    }
}

impl Validator<'_> {
    /// `[levels]` and every `[[follow]]` rule (the profile's own and each level's). A level's
    /// pages render as the profile's do unless it says otherwise. `None` when any is invalid.
    pub(super) fn levels(
        &mut self,
        follow: Vec<FollowToml>,
        levels: BTreeMap<Spanned<String>, LevelToml>,
        render: RenderMode,
    ) -> Option<(Vec<FollowRule>, BTreeMap<String, Level>)> {
        let names: BTreeSet<String> = levels.keys().map(|k| k.get_ref().clone()).collect();
        let mut reached = BTreeSet::new();
        let top = self.follow_rules(follow, &names, &mut reached);
        let mut checked = BTreeMap::new();
        let mut ok = top.is_some();
        let mut unreached = Vec::new();
        for (name, level) in levels {
            let key = name.get_ref().clone();
            let valid_name = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
            if !valid_name {
                self.error(name.span(), format!("invalid level name `{key}`"));
                ok = false;
            }
            if level.images.is_empty() && level.follow.is_empty() {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(name.span()),
                        format!("level `{key}` has no `images` or `follow` rule"),
                    )
                    .with_hint(format!(
                        "add one, e.g. [[levels.{key}.images]] with selector = \"img\""
                    )),
                );
                ok = false;
            }
            let images: Vec<_> = level
                .images
                .into_iter()
                .enumerate()
                .map(|(i, rule)| self.image_rule(i, rule))
                .collect();
            let follow = self.follow_rules(level.follow, &names, &mut reached);
            unreached.push(name);
            let (Some(images), Some(follow)) =
                (images.into_iter().collect::<Option<Vec<_>>>(), follow)
            else {
                ok = false;
                continue;
            };
            let render = level.render.map_or(render, |r| (*r.get_ref()).into());
            checked.insert(
                key,
                Level {
                    render,
                    images,
                    follow,
                },
            );
        }
        // A rule naming a level that does not exist is likely a typo of one that does: that
        // error says it all.
        let misnamed = reached.iter().any(|level| !names.contains(level));
        for name in unreached {
            if !misnamed && !reached.contains(name.get_ref()) {
                self.diagnostics.push(
                    Diagnostic::warning(
                        Some(name.span()),
                        format!("no `[[follow]]` rule leads to level `{}`", name.get_ref()),
                    )
                    .with_hint("name it in a follow rule's `level`, or remove it"),
                );
            }
        }
        ok.then_some((top?, checked))
    }

    /// The `[[follow]]` rules of one page kind; the levels they name go into `reached`.
    fn follow_rules(
        &mut self,
        rules: Vec<FollowToml>,
        levels: &BTreeSet<String>,
        reached: &mut BTreeSet<String>,
    ) -> Option<Vec<FollowRule>> {
        let mut ok = true;
        let mut checked = Vec::new();
        for rule in rules {
            let selector = self.selector(&rule.selector);
            let attribute = match &rule.attribute {
                None => "href".to_owned(),
                Some(a) if a.get_ref().trim().is_empty() => {
                    self.error(a.span(), "`attribute` is empty");
                    ok = false;
                    String::new()
                }
                Some(a) => a.get_ref().trim().to_owned(),
            };
            let level = rule.level.get_ref().clone();
            if !levels.contains(&level) {
                let mut diagnostic = Diagnostic::error(
                    Some(rule.level.span()),
                    format!("no level `{level}` in `[levels]`"),
                );
                diagnostic = match did_you_mean(&level, levels.iter().map(String::as_str)) {
                    Some(near) => diagnostic.with_hint(format!("did you mean \"{near}\"?")),
                    None => diagnostic.with_hint(format!(
                        "add a [levels.{level}] table with the rules of the linked pages"
                    )),
                };
                self.diagnostics.push(diagnostic);
                ok = false;
            }
            reached.insert(level.clone());
            let allow = match &rule.allow {
                None => None,
                Some(text) => match regex::Regex::new(text.get_ref()) {
                    Ok(re) => Some(re),
                    Err(e) => {
                        self.error(
                            text.span(),
                            format!("invalid regex `{}`: {e}", text.get_ref()),
                        );
                        ok = false;
                        None
                    }
                },
            };
            let mut metadata = Vec::new();
            for (field, from) in &rule.metadata {
                match self.metadata_source(from) {
                    Some(source) => metadata.push((field.clone(), source)),
                    None => ok = false,
                }
            }
            if let Some(selector) = selector {
                checked.push(FollowRule {
                    selector,
                    attribute,
                    level,
                    allow,
                    metadata,
                });
            } else {
                ok = false;
            }
        }
        ok.then_some(checked)
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::{MetadataSource, RenderMode, check};

    const BASE: &str = "name = \"t\"\nstart = [\"https://a.test/\"]\n";

    fn messages(source: &str) -> Vec<String> {
        check(source)
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect()
    }

    #[test]
    fn a_listing_with_a_detail_level_checks() {
        let source = format!(
            "{BASE}render = \"browser\"\n[[follow]]\nselector = \"a.thumb\"\nlevel = \"photo\"\nmetadata = {{ title = \"@title\" }}\n[levels.photo]\nrender = \"static\"\n[[levels.photo.images]]\nselector = \"img.full\"\n"
        );
        let checked = check(&source);
        let profile = checked.profile.expect("valid");
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        assert_eq!(profile.follow.len(), 1);
        assert_eq!(profile.follow[0].attribute, "href");
        assert_eq!(profile.follow[0].level, "photo");
        assert_eq!(
            profile.follow[0].metadata,
            [(
                "title".to_owned(),
                MetadataSource::Attribute("title".into())
            )]
        );
        let photo = profile.for_level("photo").unwrap();
        assert_eq!(photo.render, RenderMode::Static);
        assert_eq!(photo.images.len(), 1);
        assert!(photo.follow.is_empty());
        assert!(profile.uses_browser());
    }

    #[test]
    fn a_follow_rule_naming_no_level_is_an_error_with_a_suggestion() {
        let source = format!(
            "{BASE}[[follow]]\nselector = \"a\"\nlevel = \"phot\"\n[levels.photo]\n[[levels.photo.images]]\nselector = \"img\"\n"
        );
        let checked = check(&source);
        assert!(checked.profile.is_none());
        let error = &checked.diagnostics[0];
        assert_eq!(error.message, "no level `phot` in `[levels]`");
        assert_eq!(error.hint.as_deref(), Some("did you mean \"photo\"?"));
        assert_eq!(&source[error.span.clone().unwrap()], "\"phot\"");
    }

    #[test]
    fn an_empty_level_and_a_bad_selector_are_errors() {
        let source = format!(
            "{BASE}[[follow]]\nselector = \"a[\"\nlevel = \"photo\"\nallow = \"(\"\n[levels.photo]\n"
        );
        let found = messages(&source);
        assert!(
            found
                .iter()
                .any(|m| m.starts_with("invalid CSS selector `a[`")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|m| m.starts_with("invalid regex `(`")),
            "{found:?}"
        );
        assert!(
            found.contains(&"level `photo` has no `images` or `follow` rule".to_owned()),
            "{found:?}"
        );
    }

    #[test]
    fn a_level_no_rule_leads_to_is_a_warning() {
        let source = format!(
            "{BASE}[[images]]\nselector = \"img\"\n[levels.photo]\n[[levels.photo.images]]\nselector = \"img\"\n"
        );
        let checked = check(&source);
        assert!(checked.profile.is_some());
        assert_eq!(
            messages(&source),
            ["no `[[follow]]` rule leads to level `photo`"]
        );
    }

    #[test]
    fn follow_rules_alone_make_a_profile() {
        let source = format!(
            "{BASE}[[follow]]\nselector = \"a\"\nlevel = \"photo\"\n[levels.photo]\n[[levels.photo.images]]\nselector = \"img\"\n"
        );
        assert!(check(&source).profile.is_some(), "{:?}", messages(&source));
    }
}
