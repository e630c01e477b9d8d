//! `[filters]`: which image URLs are kept, by pattern, domain and extension.

use toml::Spanned;

use super::Validator;
use crate::profile::raw::FiltersToml;
use crate::profile::{FilterError, UrlFilter};

impl Validator<'_> {
    /// `[filters]`; each bad pattern is reported at its list item.
    pub(super) fn filters(&mut self, raw: FiltersToml) -> Option<UrlFilter> {
        let texts =
            |list: &[Spanned<String>]| list.iter().map(|s| s.get_ref().clone()).collect::<Vec<_>>();
        let built = UrlFilter::new(
            &texts(&raw.allow),
            &texts(&raw.deny),
            &texts(&raw.domains),
            &texts(&raw.extensions),
        );
        match built {
            Ok(filter) => Some(filter),
            Err(errors) => {
                for FilterError {
                    list,
                    index,
                    message,
                } in errors
                {
                    let item = match list {
                        "allow" => &raw.allow[index],
                        "deny" => &raw.deny[index],
                        "domains" => &raw.domains[index],
                        _ => &raw.extensions[index],
                    };
                    self.error(item.span(), message);
                }
                None
            }
        }
    }
}
