//! `[[images]]`: which elements hold images, the attributes read from them, and metadata.

use toml::Spanned;

use super::{DEFAULT_ATTRIBUTES, Validator};
use crate::profile::raw::{ImageRuleToml, PickToml};
use crate::profile::{CaptionSource, Diagnostic, ImageRule, ImageSource, MetadataSource, Pick};

impl Validator<'_> {
    /// `[[images]]` rule number `index`.
    pub(super) fn image_rule(&mut self, index: usize, rule: ImageRuleToml) -> Option<ImageRule> {
        let name = rule
            .name
            .map_or_else(|| format!("images[{index}]"), |n| n.into_inner());
        let selector = self.selector(&rule.selector);
        let sources = match &rule.attributes {
            None => DEFAULT_ATTRIBUTES.iter().map(|a| source_for(a)).collect(),
            Some(list) if list.get_ref().is_empty() => {
                self.error(
                    list.span(),
                    "`attributes` is empty: name at least one, e.g. [\"src\"]",
                );
                Vec::new()
            }
            Some(list) => list
                .get_ref()
                .iter()
                .filter_map(|a| {
                    let name = a.get_ref().trim();
                    let valid = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_:".contains(c));
                    if !valid {
                        self.error(a.span(), format!("`{name}` is not an attribute name"));
                    }
                    valid.then(|| source_for(name))
                })
                .collect(),
        };
        let pick = match rule.pick.map(|p| p.into_inner()) {
            None | Some(PickToml::Largest) => Pick::Largest,
            Some(PickToml::All) => Pick::All,
            Some(PickToml::First) => Pick::First,
        };
        let mut metadata = Vec::new();
        for (field, from) in rule.metadata {
            metadata.extend(self.metadata_source(&from).map(|s| (field, s)));
        }
        let caption = match &rule.caption {
            None => None,
            Some(from) => Some(self.caption_source(from)?),
        };
        if sources.is_empty() {
            return None;
        }
        Some(ImageRule {
            name,
            selector: selector?,
            sources,
            pick,
            metadata,
            caption,
        })
    }

    /// A rule's `caption`: `"@attribute"` or `"text()"` of the matched element, else a CSS
    /// selector found near it.
    fn caption_source(&mut self, from: &Spanned<String>) -> Option<CaptionSource> {
        let text = from.get_ref().trim();
        if text == "text()" || text.starts_with('@') {
            return self.metadata_source(from).map(CaptionSource::Element);
        }
        self.selector(from).map(CaptionSource::Near)
    }

    /// A metadata source: `"@attribute"` or `"text()"`; reported where it is neither (image
    /// rules and follow rules read metadata the same way).
    pub(super) fn metadata_source(&mut self, from: &Spanned<String>) -> Option<MetadataSource> {
        let text = from.get_ref().trim();
        if text == "text()" {
            Some(MetadataSource::Text)
        } else if let Some(attr) = text.strip_prefix('@').filter(|a| !a.is_empty()) {
            Some(MetadataSource::Attribute(attr.to_owned()))
        } else {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(from.span()),
                    format!("metadata source `{text}` is not understood"),
                )
                .with_hint("use \"@attribute\" (e.g. \"@alt\") or \"text()\""),
            );
            None
        }
    }
}

fn source_for(attribute: &str) -> ImageSource {
    match attribute {
        "picture" => ImageSource::Picture,
        "style" => ImageSource::Style,
        a if a.ends_with("srcset") => ImageSource::Srcset(a.to_owned()),
        a => ImageSource::Url(a.to_owned()),
    }
}
