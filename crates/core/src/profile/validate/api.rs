//! `[[api]]`: which API responses hold items, and the JSONPaths of their images and fields.

use super::Validator;
use crate::profile::ApiRule;
use crate::profile::raw::ApiRuleToml;

impl Validator<'_> {
    /// `[[api]]` rule number `index`.
    pub(super) fn api_rule(&mut self, index: usize, rule: ApiRuleToml) -> Option<ApiRule> {
        let name = rule
            .name
            .map_or_else(|| format!("api[{index}]"), |n| n.into_inner());
        let url = match regex::Regex::new(rule.url.get_ref()) {
            Ok(r) => Some(r),
            Err(e) => {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or_default().trim().to_owned();
                self.error(
                    rule.url.span(),
                    format!("invalid regex `{}`: {last}", rule.url.get_ref()),
                );
                None
            }
        };
        let items = self.json_path(&rule.items);
        let image = self.json_path(&rule.image);
        let id = rule.id.as_ref().map(|p| self.json_path(p));
        let mut metadata = Vec::new();
        let mut ok = true;
        for (field, path) in &rule.metadata {
            match self.json_path(path) {
                Some(p) => metadata.push((field.clone(), p)),
                None => ok = false,
            }
        }
        let id = match id {
            Some(None) => return None,
            Some(Some(p)) => Some(p),
            None => None,
        };
        let caption = match &rule.caption {
            Some(path) => Some(self.json_path(path)?),
            None => None,
        };
        let mut rights = Vec::new();
        for (field, path) in &rule.rights {
            if !crate::profile::RIGHTS_FIELDS.contains(&field.as_str()) {
                self.error(
                    path.span(),
                    format!(
                        "`{field}` is not a rights field; use one of {}",
                        crate::profile::RIGHTS_FIELDS.join(", ")
                    ),
                );
                ok = false;
                continue;
            }
            match self.json_path(path) {
                Some(p) => rights.push((field.clone(), p)),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        Some(ApiRule {
            name,
            url: url?,
            items: items?,
            image: image?,
            id,
            metadata,
            caption,
            rights,
        })
    }
}
