//! From profile text to a checked [`Profile`], collecting every problem it can find.
//!
//! Order: TOML syntax, then unknown keys (all of them, each with a "did you mean"), then types
//! (serde stops at the first), then meaning: selectors, regexes, templates, URLs, limits.
//! Each table has a file of its own here, with its checks and their tests; this one holds
//! the passes over the whole file, the top-level keys, and the checks tables share (selectors,
//! JSONPaths, headers, `env:` values).

mod api;
mod browser;
mod crawl;
mod download;
mod filters;
mod follow;
mod images;
mod pagination;
mod politeness;
mod proxy;
mod replay;
mod session;
mod sources;

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::raw::{DownloadToml, PaginationKindToml, ProfileToml, RobotsToml};
use super::{
    Checked, Diagnostic, DownloadSettings, HeaderSource, Pagination, Profile, RenderMode,
    did_you_mean, limits,
};
use crate::redact::Secret;

/// Attributes read when a rule names none: real URLs of lazy images first, placeholders last.
pub const DEFAULT_ATTRIBUTES: [&str; 8] = [
    "data-srcset",
    "srcset",
    "picture",
    "data-src",
    "data-lazy",
    "data-original",
    "src",
    "style",
];

/// Statuses that mean "this cursor has expired" when a profile names none.
pub const DEFAULT_EXPIRED_STATUS: [u16; 3] = [400, 404, 410];

/// Most unknown keys reported for one file before giving up (each costs a re-parse).
const MAX_UNKNOWN_KEYS: usize = 50;

pub(super) fn check(source: &str) -> Checked {
    let mut diagnostics = Vec::new();
    let raw = match deserialize(source, &mut diagnostics) {
        Some(raw) => raw,
        None => {
            sort_by_position(&mut diagnostics);
            return Checked {
                profile: None,
                diagnostics,
            };
        }
    };
    let profile = Validator {
        diagnostics: &mut diagnostics,
    }
    .profile(raw);
    sort_by_position(&mut diagnostics);
    let has_errors = diagnostics.iter().any(Diagnostic::is_error);
    Checked {
        profile: if has_errors { None } else { profile },
        diagnostics,
    }
}

/// Parses and deserializes, reporting every unknown key by removing each and trying again.
fn deserialize(source: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<ProfileToml> {
    let mut table = match DeTable::parse(source) {
        Ok(table) => table,
        Err(e) => {
            diagnostics.push(Diagnostic::error(e.span(), first_line(e.message())));
            return None;
        }
    };
    // Keys suggested for misspelt ones: their absence is already explained.
    let mut suggested = Vec::new();
    for _ in 0..MAX_UNKNOWN_KEYS {
        let attempt = ProfileToml::deserialize(toml::de::Deserializer::from(table.clone()));
        let error = match attempt {
            Ok(raw) if diagnostics.is_empty() => return Some(raw),
            Ok(_) => return None,
            Err(e) => e,
        };
        let message = first_line(error.message());
        match (unknown_key(&message), error.span()) {
            (Some((key, expected)), Some(span)) if remove_key(table.get_mut(), &span) => {
                let mut d = Diagnostic::error(Some(span), format!("unknown key `{key}`"));
                if let Some(best) = did_you_mean(&key, expected.iter().map(String::as_str)) {
                    d = d.with_hint(format!("did you mean `{best}`?"));
                    suggested.push(best.to_owned());
                } else if !expected.is_empty() {
                    d = d.with_hint(format!("expected one of: {}", expected.join(", ")));
                }
                diagnostics.push(d);
            }
            _ => {
                let missing = message
                    .strip_prefix("missing field `")
                    .and_then(|rest| rest.split_once('`'))
                    .map(|(key, _)| key.to_owned());
                if missing.as_ref().is_some_and(|key| suggested.contains(key)) {
                    return None;
                }
                let text = missing.map_or(message.clone(), |key| format!("missing key `{key}`"));
                let mut d = Diagnostic::error(error.span(), text);
                if let Some((word, expected)) = unknown_word("unknown variant `", &message)
                    && let Some(best) = did_you_mean(&word, expected.iter().map(String::as_str))
                {
                    d = d.with_hint(format!("did you mean `{best}`?"));
                }
                diagnostics.push(d);
                return None;
            }
        }
    }
    None
}

/// In file order, as a person reads them; problems of the whole file come last.
fn sort_by_position(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| d.span.as_ref().map_or(usize::MAX, |s| s.start));
}

/// `unknown field `x`, expected one of `a`, `b`` → (`x`, [`a`, `b`]).
fn unknown_key(message: &str) -> Option<(String, Vec<String>)> {
    unknown_word("unknown field `", message)
}

/// After `prefix`: `x`, expected one of `a`, `b`` → (`x`, [`a`, `b`]).
fn unknown_word(prefix: &str, message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix(prefix)?;
    let (key, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    Some((key.to_owned(), expected))
}

/// Removes the key whose span is `span`, wherever it is nested; whether one was found.
fn remove_key(table: &mut DeTable<'_>, span: &Range<usize>) -> bool {
    let key = table
        .iter()
        .find(|(k, _)| k.span() == *span)
        .map(|(k, _)| k.clone());
    if let Some(key) = key {
        table.remove(&key);
        return true;
    }
    table
        .iter_mut()
        .any(|(_, value)| remove_in_value(value.get_mut(), span))
}

fn remove_in_value(value: &mut DeValue<'_>, span: &Range<usize>) -> bool {
    match value {
        DeValue::Table(t) => remove_key(t, span),
        DeValue::Array(items) => items
            .iter_mut()
            .any(|item| remove_in_value(item.get_mut(), span)),
        _ => false,
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}

struct Validator<'d> {
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl Validator<'_> {
    /// A `per_host_rps` (of `[crawl]` or `[download]`): a positive number, or none; `ok`
    /// turns false when it is not one.
    fn per_host_rps(&mut self, value: Option<Spanned<f64>>, ok: &mut bool) -> Option<f64> {
        let value = value?;
        limits::per_host_rps(*value.get_ref())
            .map_err(|message| {
                self.error(value.span(), message);
                *ok = false;
            })
            .ok()
    }

    fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::error(Some(span), message));
    }

    fn profile(&mut self, raw: ProfileToml) -> Option<Profile> {
        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(raw.name.span()),
                    format!("invalid profile name `{name}`"),
                )
                .with_hint("use letters, digits, `-`, `_` or `.`: the name is part of file paths"),
            );
        }
        let sources = self.sources(raw.start.as_ref(), raw.sitemap.as_ref());
        let render = raw
            .render
            .as_ref()
            .map_or(RenderMode::Static, |r| (*r.get_ref()).into());
        let cursor_kind = raw
            .pagination
            .as_ref()
            .filter(|p| *p.kind.get_ref() == PaginationKindToml::JsonCursor)
            .map(|p| p.kind.span());
        let paginated = raw
            .pagination
            .as_ref()
            .filter(|p| *p.kind.get_ref() != PaginationKindToml::None)
            .map(|p| p.kind.span());
        let (pagination, max_pages, refresh) = match raw.pagination {
            Some(p) => self.pagination(p),
            None => (Some(Pagination::None), None, None),
        };
        if let Some(span) = cursor_kind.clone() {
            self.json_cursor_fits(span, render, &raw.api, pagination.as_ref());
        }
        let no_start = sources.as_ref().is_some_and(|s| s.start.is_empty());
        if no_start && let Some(span) = paginated {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(span),
                    "`[pagination]` walks from `start` pages, and the profile has none",
                )
                .with_hint(
                    "a sitemap's pages are single pages: add `start`, or remove `[pagination]`",
                ),
            );
        }
        if let Some(span) = sources.as_ref().and_then(|s| s.robots_entry.clone())
            && raw
                .politeness
                .robots
                .as_ref()
                .is_some_and(|r| *r.get_ref() == RobotsToml::Ignore)
        {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(span),
                    "a robots.txt in `sitemap` is read for its `Sitemap:` lines, and `[politeness] robots = \"ignore\"` says robots.txt is not read",
                )
                .with_hint("name the sitemap files themselves, or obey robots.txt"),
            );
        }
        let has_sitemap = sources.as_ref().is_some_and(|s| !s.sitemap.is_empty());
        // A sitemap may give its pages' images itself (the image extension): no rule needed.
        if raw.images.is_empty() && raw.api.is_empty() && raw.follow.is_empty() && !has_sitemap {
            self.diagnostics.push(
                Diagnostic::error(None, "the profile has no `[[images]]` or `[[api]]` rule")
                    .with_hint("add one, e.g. [[images]] with selector = \"img\""),
            );
        }
        if render == RenderMode::Static
            && cursor_kind.is_none()
            && let Some(first) = raw.api.first()
        {
            self.diagnostics.push(
                Diagnostic::warning(
                    Some(first.url.span()),
                    "`[[api]]` rules only apply when pages render in the browser",
                )
                .with_hint("set render = \"browser\" or \"auto\""),
            );
        }
        let api: Vec<_> = raw
            .api
            .into_iter()
            .enumerate()
            .map(|(i, rule)| self.api_rule(i, rule))
            .collect();
        let browser = self.browser(raw.browser.unwrap_or_default());
        let crawl = self.crawl(raw.crawl, render, browser.as_ref().map_or(1, |b| b.tabs));
        let levels = self.levels(raw.follow, raw.levels, render);
        let images: Vec<_> = raw
            .images
            .into_iter()
            .enumerate()
            .map(|(i, rule)| self.image_rule(i, rule))
            .collect();
        let filter = self.filters(raw.filters);
        let mut download = self.download(raw.download, &name);
        let session = self.session(raw.session, cursor_kind.is_some());
        let replay = self.replay(raw.replay);
        let proxy = self.proxy(raw.proxy);
        let politeness = self.politeness(raw.politeness);
        if let Some(download) = &mut download {
            download.proxy = proxy?;
            download.user_agent = politeness.as_ref()?.user_agent(&download.user_agent);
            download.politeness = politeness?;
        }
        let sources = sources?;
        Some(Profile {
            name,
            start: sources.start,
            sitemap: sources.sitemap,
            render,
            pagination: pagination?,
            max_pages,
            refresh,
            crawl: crawl?,
            follow: levels.as_ref()?.0.clone(),
            levels: levels?.1,
            images: images.into_iter().collect::<Option<_>>()?,
            api: api.into_iter().collect::<Option<_>>()?,
            browser: browser?,
            filter: filter?,
            download: download?,
            session: session?,
            replay: replay?,
        })
    }

    fn selector(&mut self, text: &Spanned<String>) -> Option<scraper::Selector> {
        match super::limits::css_selector(text.get_ref()) {
            Ok(s) => Some(s),
            Err(message) => {
                self.error(text.span(), message);
                None
            }
        }
    }

    /// A table of request headers; a value `"env:NAME"` is read from the environment when a
    /// run starts. `None` when any is invalid (each is reported).
    fn headers(
        &mut self,
        table: BTreeMap<String, Spanned<String>>,
    ) -> Option<Vec<(String, HeaderSource)>> {
        let mut ok = true;
        let mut headers = Vec::new();
        for (name, value) in table {
            let source = match self.env_or_literal(&value, &format!("header `{name}`")) {
                Some(source) => source,
                None => {
                    ok = false;
                    continue;
                }
            };
            if let Err(message) = limits::header(&name, source.literal().unwrap_or_default()) {
                self.error(value.span(), message);
                ok = false;
                continue;
            }
            headers.push((name, source));
        }
        ok.then_some(headers)
    }

    /// `"env:NAME"` (checked to be a variable name) or a literal value; `what` names the
    /// value in the error.
    fn env_or_literal(&mut self, value: &Spanned<String>, what: &str) -> Option<HeaderSource> {
        let text = value.get_ref();
        match text.strip_prefix("env:") {
            Some(var)
                if !var.is_empty()
                    && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                Some(HeaderSource::Env(var.to_owned()))
            }
            Some(_) => {
                self.error(
                    value.span(),
                    format!("{what}: `{text}` is not an environment variable name"),
                );
                None
            }
            None => Some(HeaderSource::Literal(Secret::new(text.clone()))),
        }
    }

    fn json_path(&mut self, text: &Spanned<String>) -> Option<serde_json_path::JsonPath> {
        // The parser recurses per level of nesting and backtracks through nested function
        // calls: bounded first, so no expression overflows the stack or parses for minutes.
        if let Err(message) = json_path_bounds(text.get_ref()) {
            self.error(text.span(), message);
            return None;
        }
        match serde_json_path::JsonPath::parse(text.get_ref()) {
            Ok(path) => Some(path),
            Err(e) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(text.span()),
                        format!("invalid JSONPath `{}`: {}", text.get_ref(), e.message()),
                    )
                    .with_hint(
                        "JSONPath (RFC 9535) starts at `$`, e.g. \"$.items[*]\" or \"$.urls.full\"",
                    ),
                );
                None
            }
        }
    }
}

/// The longest JSONPath accepted, in bytes.
pub const MAX_JSON_PATH_BYTES: usize = 1024;
/// The deepest nesting of brackets and parentheses in a JSONPath.
pub const MAX_JSON_PATH_NESTING: usize = 10;

/// Whether `text` is short and shallow enough to parse quickly: at most
/// [`MAX_JSON_PATH_BYTES`] bytes and [`MAX_JSON_PATH_NESTING`] levels of `(` and `[` (outside
/// quoted names and strings).
fn json_path_bounds(text: &str) -> Result<(), String> {
    if text.len() > MAX_JSON_PATH_BYTES {
        return Err(format!(
            "JSONPath of {} bytes is longer than the {MAX_JSON_PATH_BYTES} allowed",
            text.len()
        ));
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ')' | ']' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    if deepest > MAX_JSON_PATH_NESTING {
        return Err(format!(
            "JSONPath nests {deepest} levels of brackets and parentheses, more than the {MAX_JSON_PATH_NESTING} allowed"
        ));
    }
    Ok(())
}

/// An absolute `http`/`https` URL, or a message saying why not.
pub fn parse_http_url(text: &str) -> Result<url::Url, String> {
    let url =
        url::Url::parse(text.trim()).map_err(|e| format!("`{text}` is not a valid URL: {e}"))?;
    match url.scheme() {
        "http" | "https" if url.host().is_some() => Ok(url),
        "http" | "https" => Err(format!("`{text}` has no host")),
        other => Err(format!(
            "`{text}` uses `{other}:`; only http and https are supported"
        )),
    }
}

/// The download settings of a profile without a `[download]` table, for job `name`.
pub(super) fn default_download(name: &str) -> DownloadSettings {
    let mut diagnostics = Vec::new();
    let settings = Validator {
        diagnostics: &mut diagnostics,
    }
    .download(DownloadToml::default(), name);
    // Invariant: the defaults are valid settings.
    settings.expect("default download settings are valid")
}

/// What the tests of every table share.
#[cfg(test)]
mod test_support {
    use super::check;

    pub(super) const HEAD: &str =
        "name = \"t\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n";

    /// The messages (with hints) of checking `HEAD` followed by `rest`.
    pub(super) fn messages(rest: &str) -> Vec<String> {
        check(&format!("{HEAD}{rest}"))
            .diagnostics
            .into_iter()
            .map(|d| format!("{} {}", d.message, d.hint.unwrap_or_default()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::test_support::{HEAD, messages};
    use super::*;
    use crate::profile::{DEFAULT_USER_AGENT, ImageSource, PathTemplate, Pick};
    use crate::verify::VerifyRules;

    #[test]
    fn defaults_are_the_documented_ones() {
        let checked = check(HEAD);
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let p = checked.profile.unwrap();
        assert_eq!(p.render, RenderMode::Static);
        assert!(matches!(p.pagination, Pagination::None));
        assert_eq!(p.max_pages, None);
        let rule = &p.images[0];
        assert_eq!(rule.name, "images[0]");
        assert_eq!(rule.pick, Pick::Largest);
        let sources: Vec<_> = rule.sources.iter().map(ImageSource::name).collect();
        assert_eq!(sources, DEFAULT_ATTRIBUTES);
        let d = &p.download;
        assert_eq!(d.out, PathBuf::from("downloads/t"));
        assert_eq!(
            d.path,
            PathTemplate::parse("{shard}/{sha256}.{ext}").unwrap()
        );
        assert_eq!((d.concurrency, d.per_host, d.retries), (256, 256, 4));
        assert!(d.adaptive, "each host's window adapts up to per_host");
        assert_eq!(d.connect_timeout, Duration::from_secs(10));
        assert_eq!(d.timeout, Duration::from_secs(60));
        assert_eq!(d.user_agent, DEFAULT_USER_AGENT);
        assert_eq!(d.max_bytes, 100_000_000);
        assert_eq!(d.verify.allowed, VerifyRules::default().allowed);
        assert_eq!((d.verify.min_width, d.verify.min_height), (0, 0));
        assert_eq!(d.verify.max_pixels, VerifyRules::default().max_pixels);
    }

    #[test]
    fn every_unknown_key_is_reported_in_file_order() {
        let found = messages("selecter = \"x\"\n[download]\nconcurency = 3\n");
        assert_eq!(
            found,
            [
                "unknown key `selecter` did you mean `selector`?",
                "unknown key `concurency` did you mean `concurrency`?",
            ]
        );
    }

    #[test]
    fn a_misspelt_required_key_is_reported_once() {
        let found =
            check("name = \"t\"\nstart = [\"http://a.test/\"]\n[[images]]\nselecter = \"img\"\n");
        let messages: Vec<_> = found
            .diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(messages, ["unknown key `selecter`"]);
        let found = check("name = \"t\"\nstart = [\"http://a.test/\"]\n[[images]]\n");
        let messages: Vec<_> = found
            .diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(messages, ["missing key `selector`"]);
    }

    #[test]
    fn a_misspelt_choice_gets_a_suggestion() {
        let found = messages("[pagination]\nkind = \"next_links\"\nselector = \"a\"\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("unknown variant `next_links`"),
            "{found:?}"
        );
        assert!(found[0].ends_with("did you mean `next_link`?"), "{found:?}");
    }

    #[test]
    fn meaning_errors_come_in_file_order() {
        let source = "name = \"t\"\nstart = [\"ftp://a.test/\"]\n[[images]]\nselector = \"img[\"\n[filters]\nallow = [\"(\"]\n";
        let lines: Vec<_> = check(source)
            .diagnostics
            .iter()
            .map(|d| d.span.clone().unwrap().start)
            .collect();
        let mut sorted = lines.clone();
        sorted.sort_unstable();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines, sorted);
    }
}
