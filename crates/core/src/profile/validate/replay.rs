//! `[replay]`: where a recording is kept and which parts of a request do not tell requests apart.

use std::path::PathBuf;

use super::Validator;
use crate::profile::raw::ReplayToml;
use crate::profile::{Diagnostic, ReplaySettings};

impl Validator<'_> {
    /// `[replay]`.
    pub(super) fn replay(&mut self, raw: ReplayToml) -> Option<ReplaySettings> {
        let mut ok = true;
        let is_name = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.[]".contains(&b))
        };
        let recording = match &raw.recording {
            Some(path) if path.get_ref().trim().is_empty() => {
                self.error(path.span(), "`recording` is empty");
                ok = false;
                None
            }
            Some(path) => Some(PathBuf::from(path.get_ref())),
            None => None,
        };
        for param in &raw.ignore_params {
            if param.get_ref().is_empty() {
                self.error(param.span(), "a query parameter name is empty");
                ok = false;
            }
        }
        let mut ignore_body_paths = Vec::new();
        for path in &raw.ignore_body_paths {
            let text = path.get_ref().trim();
            let rest = text.strip_prefix("$.").unwrap_or(text);
            if rest.is_empty() || rest.split('.').any(|s| s.is_empty()) {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(path.span()),
                        format!("`{text}` is not a dotted JSON path"),
                    )
                    .with_hint(
                        "write the keys from the top of the body, e.g. \"variables.requestId\"",
                    ),
                );
                ok = false;
            } else {
                ignore_body_paths.push(text.to_owned());
            }
        }
        let jsonp_param = match &raw.jsonp_param {
            Some(p) if !is_name(p.get_ref()) => {
                self.error(
                    p.span(),
                    format!("`{}` is not a query parameter name", p.get_ref()),
                );
                ok = false;
                String::new()
            }
            Some(p) => p.get_ref().clone(),
            None => "callback".to_owned(),
        };
        let mut ignore = Vec::new();
        for pattern in &raw.ignore {
            match regex::Regex::new(pattern.get_ref()) {
                Ok(_) => ignore.push(pattern.get_ref().clone()),
                Err(e) => {
                    let detail = e.to_string();
                    let last = detail.lines().last().unwrap_or_default().trim().to_owned();
                    self.error(
                        pattern.span(),
                        format!("invalid regex `{}`: {last}", pattern.get_ref()),
                    );
                    ok = false;
                }
            }
        }
        ok.then(|| ReplaySettings {
            recording,
            ignore_params: raw
                .ignore_params
                .iter()
                .map(|p| p.get_ref().clone())
                .collect(),
            ignore_body_paths,
            jsonp_param,
            ignore,
        })
    }
}
