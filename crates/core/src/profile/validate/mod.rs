//! From profile text to a checked [`Profile`], collecting every problem it can find.
//!
//! Order: TOML syntax, then unknown keys (all of them, each with a "did you mean"), then types
//! (serde stops at the first), then meaning: selectors, regexes, templates, URLs, limits.
//! Tables with checks of their own have a file of their own here.

mod crawl;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::raw::{
    ApiRuleToml, BrowserToml, DownloadToml, FiltersToml, ImageRuleToml, MethodToml, OrderToml,
    PaginationKindToml, PaginationToml, PickToml, ProfileToml, ProxyToml, Quantity, RenderToml,
    ReplayToml, SessionToml, TokenToml, WaitToml,
};
use super::{
    ApiMethod, ApiRule, BrowserProfile, Checked, CookieSource, DEFAULT_USER_AGENT, Diagnostic,
    DownloadSettings, HeaderSource, IdOrder, ImageRule, ImageSource, JsonCursor, MetadataSource,
    PageWait, Pagination, PathTemplate, Profile, ProxySettings, RenderMode, ReplaySettings,
    SessionProfile, TokenRequest, UrlTemplate, did_you_mean, parse_bytes, parse_duration,
};

use super::{FilterError, Pick, UrlFilter};
use crate::proxy::ProxyEndpoint;
use crate::verify::{ImageFormat, VerifyRules};

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
        let start = self.start_urls(&raw.start);
        let render = match raw.render.as_ref().map(|r| *r.get_ref()) {
            None | Some(RenderToml::Static) => RenderMode::Static,
            Some(RenderToml::Browser) => RenderMode::Browser,
            Some(RenderToml::Auto) => RenderMode::Auto,
        };
        let cursor_kind = raw
            .pagination
            .as_ref()
            .filter(|p| *p.kind.get_ref() == PaginationKindToml::JsonCursor)
            .map(|p| p.kind.span());
        let (pagination, max_pages) = match raw.pagination {
            Some(p) => self.pagination(p),
            None => (Some(Pagination::None), None),
        };
        if let Some(span) = cursor_kind.clone() {
            self.json_cursor_fits(span, render, &raw.api, pagination.as_ref());
        }
        if raw.images.is_empty() && raw.api.is_empty() {
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
        if let Some(download) = &mut download {
            download.proxy = proxy?;
        }
        Some(Profile {
            name,
            start: start?,
            render,
            pagination: pagination?,
            max_pages,
            crawl: crawl?,
            images: images.into_iter().collect::<Option<_>>()?,
            api: api.into_iter().collect::<Option<_>>()?,
            browser: browser?,
            filter: filter?,
            download: download?,
            session: session?,
            replay: replay?,
        })
    }

    fn replay(&mut self, raw: ReplayToml) -> Option<ReplaySettings> {
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
        ok.then(|| ReplaySettings {
            recording,
            ignore_params: raw
                .ignore_params
                .iter()
                .map(|p| p.get_ref().clone())
                .collect(),
            ignore_body_paths,
            jsonp_param,
        })
    }

    /// `[session]`; `json_cursor` says whether there are API requests to carry a token.
    fn session(&mut self, raw: SessionToml, json_cursor: bool) -> Option<SessionProfile> {
        let mut ok = true;
        let cookies = match raw.cookies {
            None => None,
            Some(text) if text.get_ref().trim().is_empty() => {
                self.error(
                    text.span(),
                    "`cookies` is empty: name a cookies file or \"env:NAME\"",
                );
                ok = false;
                None
            }
            Some(text) => match self.env_or_literal(&text, "`cookies`") {
                Some(HeaderSource::Env(variable)) => Some(CookieSource::Env(variable)),
                Some(HeaderSource::Literal(path)) => Some(CookieSource::File(PathBuf::from(path))),
                None => {
                    ok = false;
                    None
                }
            },
        };
        let token = match raw.token {
            None => None,
            Some(token) if !json_cursor => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(token.span()),
                        "`[session.token]` is only sent with the API requests of kind = \"json_cursor\"",
                    )
                    .with_hint("for pages and images, use [download] headers with \"env:NAME\" values"),
                );
                ok = false;
                None
            }
            Some(token) => {
                let token = self.token(token.into_inner());
                ok &= token.is_some();
                token
            }
        };
        ok.then_some(SessionProfile { cookies, token })
    }

    /// `[session.token]`.
    fn token(&mut self, raw: TokenToml) -> Option<TokenRequest> {
        let mut ok = true;
        // Invariant: a constant, valid URL.
        let probe = url::Url::parse("http://example.invalid/").expect("valid URL");
        let url = raw.url.get_ref().trim().to_owned();
        if url.is_empty() || probe.join(&url).is_err() {
            self.error(
                raw.url.span(),
                format!("`url` `{}` is not a URL", raw.url.get_ref()),
            );
            ok = false;
        }
        let method = match (raw.method.as_ref().map(|m| *m.get_ref()), &raw.body) {
            (Some(MethodToml::Post), _) | (None, Some(_)) => ApiMethod::Post,
            (Some(MethodToml::Get), Some(body)) => {
                self.error(body.span(), "`body` is only sent with method = \"POST\"");
                ok = false;
                ApiMethod::Get
            }
            (Some(MethodToml::Get), None) | (None, None) => ApiMethod::Get,
        };
        let body = match &raw.body {
            None => None,
            Some(text) => match serde_json::from_str::<serde_json::Value>(text.get_ref()) {
                Ok(value) => {
                    if let Some(bad) = bad_env_value(&value) {
                        self.error(
                            text.span(),
                            format!("`body`: `{bad}` is not an environment variable name"),
                        );
                        ok = false;
                    }
                    Some(value)
                }
                Err(e) => {
                    self.error(text.span(), format!("`body` is not JSON: {e}"));
                    ok = false;
                    None
                }
            },
        };
        let headers = self
            .headers(raw.headers.map(|h| h.into_inner()).unwrap_or_default())
            .unwrap_or_else(|| {
                ok = false;
                Vec::new()
            });
        let path = self.json_path(&raw.token);
        let header = raw
            .header
            .map_or_else(|| "Authorization".to_owned(), |h| h.into_inner());
        let header_ok = !header.is_empty()
            && header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !header_ok {
            self.error(
                raw.token.span(),
                format!("`header` `{header}` is not a header name"),
            );
            ok = false;
        }
        let format = match raw.format {
            None => "Bearer {token}".to_owned(),
            Some(f) if !f.get_ref().contains("{token}") => {
                self.diagnostics.push(
                    Diagnostic::error(Some(f.span()), "`format` has no `{token}` placeholder")
                        .with_hint("e.g. \"Bearer {token}\", or \"{token}\" for the token alone"),
                );
                ok = false;
                String::new()
            }
            Some(f) => f.into_inner(),
        };
        let refresh_after = match raw.refresh_after {
            None => None,
            Some(v) => match v.get_ref() {
                Quantity::Text(t) => match parse_duration(t) {
                    Ok(d) if !d.is_zero() => Some(d),
                    Ok(_) => {
                        self.error(v.span(), "`refresh_after` must be longer than 0s");
                        ok = false;
                        None
                    }
                    Err(m) => {
                        self.error(v.span(), m);
                        ok = false;
                        None
                    }
                },
                Quantity::Number(_) => {
                    self.diagnostics.push(
                        Diagnostic::error(Some(v.span()), "a duration needs a unit")
                            .with_hint("write e.g. \"50m\" or \"1h\""),
                    );
                    ok = false;
                    None
                }
            },
        };
        let token = path?;
        ok.then_some(TokenRequest {
            url,
            method,
            body,
            headers,
            token,
            header,
            format,
            refresh_after,
        })
    }

    fn start_urls(&mut self, start: &Spanned<Vec<Spanned<String>>>) -> Option<Vec<url::Url>> {
        if start.get_ref().is_empty() {
            self.error(start.span(), "`start` lists no URL");
            return None;
        }
        let mut urls = Vec::new();
        let mut ok = true;
        for item in start.get_ref() {
            match parse_http_url(item.get_ref()) {
                Ok(url) => urls.push(url),
                Err(message) => {
                    self.error(item.span(), message);
                    ok = false;
                }
            }
        }
        ok.then_some(urls)
    }

    fn pagination(&mut self, mut p: PaginationToml) -> (Option<Pagination>, Option<u64>) {
        let max_pages = match p.max_pages.take() {
            Some(m) if *m.get_ref() == 0 => {
                self.error(m.span(), "`max_pages` must be at least 1");
                None
            }
            m => m.map(|m| *m.get_ref()),
        };
        let kind = *p.kind.get_ref();
        let unused =
            |name: &str, used_by: &str| format!("`{name}` is only used by kind = \"{used_by}\"");
        let mut stray = Vec::new();
        if kind != PaginationKindToml::NextLink {
            stray.extend(
                p.selector
                    .as_ref()
                    .map(|s| (s.span(), unused("selector", "next_link"))),
            );
            stray.extend(
                p.attribute
                    .as_ref()
                    .map(|s| (s.span(), unused("attribute", "next_link"))),
            );
        }
        if kind != PaginationKindToml::UrlTemplate {
            for (name, value) in [("start", &p.start), ("step", &p.step), ("stop", &p.stop)] {
                stray.extend(
                    value
                        .as_ref()
                        .map(|v| (v.span(), unused(name, "url_template"))),
                );
            }
            stray.extend(
                p.template
                    .as_ref()
                    .map(|s| (s.span(), unused("template", "url_template"))),
            );
        }
        if kind != PaginationKindToml::JsonCursor {
            let spans = [
                ("request", p.request.as_ref().map(|v| v.span())),
                ("method", p.method.as_ref().map(|v| v.span())),
                ("body", p.body.as_ref().map(|v| v.span())),
                ("headers", p.headers.as_ref().map(|v| v.span())),
                ("cursor", p.cursor.as_ref().map(|v| v.span())),
                ("cursor_param", p.cursor_param.as_ref().map(|v| v.span())),
                ("has_more", p.has_more.as_ref().map(|v| v.span())),
                ("after_id", p.after_id.as_ref().map(|v| v.span())),
                ("order", p.order.as_ref().map(|v| v.span())),
                (
                    "expired_status",
                    p.expired_status.as_ref().map(|v| v.span()),
                ),
                ("expired_match", p.expired_match.as_ref().map(|v| v.span())),
                (
                    "stop_after_known",
                    p.stop_after_known.as_ref().map(|v| v.span()),
                ),
                (
                    "stop_at_known_id",
                    p.stop_at_known_id.as_ref().map(|v| v.span()),
                ),
            ];
            for (name, span) in spans {
                stray.extend(span.map(|s| (s, unused(name, "json_cursor"))));
            }
        }
        for (span, message) in stray {
            self.error(span, message);
        }
        let pagination = match kind {
            PaginationKindToml::JsonCursor => self
                .json_cursor(p)
                .map(|c| Pagination::JsonCursor(Box::new(c))),
            PaginationKindToml::None => Some(Pagination::None),
            PaginationKindToml::NextLink => {
                let Some(selector) = p.selector else {
                    self.error(
                        p.kind.span(),
                        "kind = \"next_link\" needs a `selector` for the next-page link",
                    );
                    return (None, max_pages);
                };
                let attribute = p.attribute.map_or("href".to_owned(), |a| a.into_inner());
                if attribute.trim().is_empty() {
                    self.error(
                        p.kind.span(),
                        "`attribute` is empty: name the attribute holding the next-page URL",
                    );
                    return (None, max_pages);
                }
                self.selector(&selector)
                    .map(|selector| Pagination::NextLink {
                        selector,
                        attribute,
                    })
            }
            PaginationKindToml::UrlTemplate => {
                let Some(template) = p.template else {
                    self.error(p.kind.span(), "kind = \"url_template\" needs a `template` such as \"/gallery?page={page}\"");
                    return (None, max_pages);
                };
                let step = p.step.as_ref().map_or(1, |s| *s.get_ref());
                if let Some(s) = p.step.as_ref().filter(|s| *s.get_ref() == 0) {
                    self.error(s.span(), "`step` must not be 0");
                }
                let start = p.start.as_ref().map_or(1, |s| *s.get_ref());
                if let Some(stop) = p.stop.as_ref() {
                    let stop_value = *stop.get_ref();
                    if (step > 0 && stop_value < start) || (step < 0 && stop_value > start) {
                        self.error(stop.span(), format!("`stop` = {stop_value} is never reached from `start` = {start} with `step` = {step}"));
                    }
                }
                match UrlTemplate::parse(template.get_ref()) {
                    Ok(t) if step != 0 => Some(Pagination::UrlTemplate {
                        template: t,
                        start,
                        step,
                        stop: p.stop.map(|s| s.into_inner()),
                    }),
                    Ok(_) => None,
                    Err(message) => {
                        self.error(template.span(), message);
                        None
                    }
                }
            }
        };
        (pagination, max_pages)
    }

    /// `kind = "json_cursor"`: the API request and the paging fields of its responses.
    fn json_cursor(&mut self, p: PaginationToml) -> Option<JsonCursor> {
        let mut ok = true;
        let Some(request) = p.request else {
            self.error(
                p.kind.span(),
                "kind = \"json_cursor\" needs a `request`, the API URL such as \"/api/photos?limit=50\"",
            );
            return None;
        };
        let Some(cursor) = p.cursor else {
            self.error(
                p.kind.span(),
                "kind = \"json_cursor\" needs a `cursor`, the JSONPath of the next cursor such as \"$.next_cursor\"",
            );
            return None;
        };
        // Invariant: a constant, valid URL.
        let probe = url::Url::parse("http://example.invalid/").expect("valid URL");
        if request.get_ref().trim().is_empty() || probe.join(request.get_ref().trim()).is_err() {
            self.error(
                request.span(),
                format!("`request` `{}` is not a URL", request.get_ref()),
            );
            ok = false;
        }
        let method = match p.method.as_ref().map(|m| *m.get_ref()) {
            None | Some(MethodToml::Get) => ApiMethod::Get,
            Some(MethodToml::Post) => ApiMethod::Post,
        };
        let after_id = match p.after_id {
            Some(a) if a.get_ref().trim().is_empty() => {
                self.error(
                    a.span(),
                    "`after_id` is empty: name the parameter, e.g. \"after_id\"",
                );
                ok = false;
                None
            }
            a => a.map(|a| a.into_inner().trim().to_owned()),
        };
        let body = match (method, p.body) {
            (ApiMethod::Get, Some(body)) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(body.span()),
                        "`body` is only sent with method = \"POST\"",
                    )
                    .with_hint("add method = \"POST\", or put the parameters in `request`"),
                );
                ok = false;
                None
            }
            (ApiMethod::Get, None) => None,
            (ApiMethod::Post, None) => {
                self.error(
                    p.kind.span(),
                    "method = \"POST\" needs a `body` with a \"{cursor}\" placeholder",
                );
                ok = false;
                None
            }
            (ApiMethod::Post, Some(body)) => {
                match serde_json::from_str::<serde_json::Value>(body.get_ref()) {
                    Err(e) => {
                        self.error(body.span(), format!("`body` is not JSON: {e}"));
                        ok = false;
                        None
                    }
                    Ok(value) => {
                        if !has_placeholder(&value, "{cursor}") {
                            self.diagnostics.push(
                            Diagnostic::error(Some(body.span()), "`body` has no \"{cursor}\" placeholder")
                                .with_hint("write the cursor's place as the JSON string \"{cursor}\", e.g. \"variables\": {\"after\": \"{cursor}\"}"),
                        );
                            ok = false;
                        }
                        if after_id.is_some() && !has_placeholder(&value, "{after_id}") {
                            self.error(body.span(), "`body` has no \"{after_id}\" placeholder, which `after_id` needs with method = \"POST\"");
                            ok = false;
                        }
                        Some(value)
                    }
                }
            }
        };
        if method == ApiMethod::Post
            && let Some(c) = &p.cursor_param
        {
            self.error(c.span(), "`cursor_param` is only used with method = \"GET\"; a POST sends the cursor in `body`");
            ok = false;
        }
        let cursor_param = p
            .cursor_param
            .map_or("cursor".to_owned(), |c| c.into_inner());
        if cursor_param.trim().is_empty() {
            self.error(p.kind.span(), "`cursor_param` is empty");
            ok = false;
        }
        let headers = match self.headers(p.headers.map(|h| h.into_inner()).unwrap_or_default()) {
            Some(headers) => headers,
            None => {
                ok = false;
                Vec::new()
            }
        };
        let cursor = self.json_path(&cursor);
        let has_more = p.has_more.as_ref().map(|h| self.json_path(h));
        let expired_match = p.expired_match.as_ref().map(|e| self.json_path(e));
        let expired_status = match p.expired_status {
            None => DEFAULT_EXPIRED_STATUS.to_vec(),
            Some(list) => {
                let mut codes = Vec::new();
                for code in list.get_ref() {
                    if (100..=599).contains(code.get_ref()) {
                        codes.push(*code.get_ref() as u16);
                    } else {
                        self.error(
                            code.span(),
                            format!("`{}` is not an HTTP status code", code.get_ref()),
                        );
                        ok = false;
                    }
                }
                codes
            }
        };
        let stop_after_known = match p.stop_after_known {
            Some(n) if *n.get_ref() == 0 => {
                self.error(n.span(), "`stop_after_known` must be at least 1");
                ok = false;
                None
            }
            n => n.map(|n| n.into_inner()),
        };
        let order = match p.order.map(|o| o.into_inner()) {
            None | Some(OrderToml::Ascending) => IdOrder::Ascending,
            Some(OrderToml::Descending) => IdOrder::Descending,
        };
        let stop_at_known_id = match p.stop_at_known_id {
            Some(flag) if *flag.get_ref() && order != IdOrder::Descending => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(flag.span()),
                        "`stop_at_known_id` is for APIs that list the newest items first",
                    )
                    .with_hint("add order = \"descending\"; an ascending API continues after the last id by itself"),
                );
                ok = false;
                false
            }
            flag => flag.is_some_and(|f| f.into_inner()),
        };
        let has_more = match has_more {
            None => None,
            Some(None) => return None,
            Some(Some(path)) => Some(path),
        };
        let expired_match = match expired_match {
            None => None,
            Some(None) => return None,
            Some(Some(path)) => Some(path),
        };
        if !ok {
            return None;
        }
        Some(JsonCursor {
            request: request.into_inner().trim().to_owned(),
            method,
            body,
            headers,
            cursor: cursor?,
            cursor_param,
            has_more,
            after_id,
            order,
            expired_status,
            expired_match,
            stop_after_known,
            stop_at_known_id,
        })
    }

    /// What `kind = "json_cursor"` needs from the rest of the profile.
    fn json_cursor_fits(
        &mut self,
        kind: Range<usize>,
        render: RenderMode,
        api: &[ApiRuleToml],
        pagination: Option<&Pagination>,
    ) {
        if render == RenderMode::Auto {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(kind.clone()),
                    "kind = \"json_cursor\" needs render = \"static\" (the tool calls the API) or \"browser\" (the page calls it)",
                )
                .with_hint("`auto` decides page by page, but an API chain is one walk"),
            );
        }
        if api.is_empty() {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(kind.clone()),
                    "kind = \"json_cursor\" needs an `[[api]]` rule for the items of each response",
                )
                .with_hint("add [[api]] with `url`, `items`, `image` and `id`"),
            );
        }
        if let Some(Pagination::JsonCursor(c)) = pagination
            && c.stop_at_known_id
            && !api.is_empty()
            && api.iter().all(|rule| rule.id.is_none())
        {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(kind.clone()),
                    "`stop_at_known_id` needs the item ids: give the `[[api]]` rule an `id`",
                )
                .with_hint("e.g. id = \"$.id\""),
            );
        }
        if let Some(Pagination::JsonCursor(c)) = pagination
            && c.after_id.is_some()
            && !api.is_empty()
            && api.iter().all(|rule| rule.id.is_none())
        {
            self.diagnostics.push(
                Diagnostic::error(
                    Some(kind),
                    "`after_id` needs the item ids: give the `[[api]]` rule an `id`",
                )
                .with_hint("e.g. id = \"$.id\""),
            );
        }
    }

    fn selector(&mut self, text: &Spanned<String>) -> Option<scraper::Selector> {
        match scraper::Selector::parse(text.get_ref()) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(
                    text.span(),
                    format!("invalid CSS selector `{}`: {e}", text.get_ref()),
                );
                None
            }
        }
    }

    fn image_rule(&mut self, index: usize, rule: ImageRuleToml) -> Option<ImageRule> {
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
            let text = from.get_ref().trim();
            let source = if text == "text()" {
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
            };
            metadata.extend(source.map(|s| (field, s)));
        }
        if sources.is_empty() {
            return None;
        }
        Some(ImageRule {
            name,
            selector: selector?,
            sources,
            pick,
            metadata,
        })
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
            let literal_ok = source.literal().is_none_or(|v| {
                v.bytes()
                    .all(|b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80)
            });
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !name_ok || !literal_ok {
                self.error(
                    value.span(),
                    format!("header `{name}` has an invalid name or value"),
                );
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
            None => Some(HeaderSource::Literal(text.clone())),
        }
    }

    fn json_path(&mut self, text: &Spanned<String>) -> Option<serde_json_path::JsonPath> {
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

    fn api_rule(&mut self, index: usize, rule: ApiRuleToml) -> Option<ApiRule> {
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
        })
    }

    fn browser_duration(
        &mut self,
        value: Option<Spanned<Quantity>>,
        default: Duration,
        allow_zero: bool,
    ) -> Option<Duration> {
        let Some(v) = value else { return Some(default) };
        let parsed = match v.get_ref() {
            Quantity::Text(t) => parse_duration(t),
            Quantity::Number(_) => Err("a duration needs a unit (write e.g. \"2s\")".to_owned()),
        };
        match parsed {
            Ok(d) if d.is_zero() && !allow_zero => {
                self.error(v.span(), "a duration of zero would end every page at once");
                None
            }
            Ok(d) => Some(d),
            Err(m) => {
                self.error(v.span(), m);
                None
            }
        }
    }

    fn browser(&mut self, raw: BrowserToml) -> Option<BrowserProfile> {
        let mut ok = true;
        let mut count = |v: &Option<Spanned<u64>>,
                         default: u64,
                         name: &str,
                         min: u64,
                         max: u64,
                         this: &mut Self| match v {
            None => default,
            Some(v) if (min..=max).contains(v.get_ref()) => *v.get_ref(),
            Some(v) => {
                this.error(
                    v.span(),
                    format!(
                        "`{name}` must be between {min} and {max}, not {}",
                        v.get_ref()
                    ),
                );
                ok = false;
                default
            }
        };
        let tabs = count(&raw.tabs, 2, "tabs", 1, 64, self) as usize;
        let processes = count(&raw.processes, 1, "processes", 1, 16, self) as usize;
        let recycle_after =
            count(&raw.recycle_after, 100, "recycle_after", 1, 1_000_000, self) as u32;
        let max_clicks = count(&raw.max_clicks, 20, "max_clicks", 1, 100_000, self) as u32;
        let scroll = count(&raw.scroll, 0, "scroll", 0, 100_000, self) as u32;
        if let Some(selector) = raw.wait_for.as_ref().or(raw.click.as_ref()) {
            let _ = self.selector(selector);
        }
        if let (Some(wait_for), Some(click)) = (&raw.wait_for, &raw.click)
            && wait_for.span() != click.span()
        {
            let _ = self.selector(click);
        }
        let page_timeout = self.browser_duration(raw.page_timeout, Duration::from_secs(60), false);
        let settle = self.browser_duration(raw.settle, Duration::from_secs(2), false);
        let delay = match raw.delay {
            None => Some(None),
            Some(v) => self
                .browser_duration(Some(v), Duration::ZERO, true)
                .map(Some),
        };
        let wait = match raw.wait.map(|w| w.into_inner()) {
            None | Some(WaitToml::NetworkIdle) => PageWait::NetworkIdle,
            Some(WaitToml::Load) => PageWait::Load,
        };
        if !ok {
            return None;
        }
        Some(BrowserProfile {
            executable: raw.executable.map(|e| PathBuf::from(e.into_inner())),
            tabs,
            processes,
            recycle_after,
            block_stylesheets: raw.block_stylesheets.unwrap_or(false),
            page_timeout: page_timeout?,
            wait,
            wait_for: raw.wait_for.map(|w| w.into_inner()),
            delay: delay?,
            script: raw.script.map(|s| s.into_inner()),
            click: raw.click.map(|c| c.into_inner()),
            max_clicks,
            scroll,
            settle: settle?,
        })
    }

    fn filters(&mut self, raw: FiltersToml) -> Option<UrlFilter> {
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

    fn download(&mut self, raw: DownloadToml, profile_name: &str) -> Option<DownloadSettings> {
        let mut ok = true;
        let out = raw.out.map_or_else(
            || PathBuf::from("downloads").join(profile_name),
            |o| PathBuf::from(o.into_inner()),
        );
        let path = match raw.path {
            None => PathTemplate::parse("{shard}/{sha256}.{ext}").ok(),
            Some(text) => match PathTemplate::parse(text.get_ref()) {
                Ok(t) => {
                    if !t.is_sharded() {
                        self.diagnostics.push(
                            Diagnostic::warning(Some(text.span()), "path template has no `{shard}`: one folder may hold very many files")
                                .with_hint("start it with \"{shard}/\" to keep folders under ~10,000 files"),
                        );
                    }
                    Some(t)
                }
                Err(message) => {
                    self.error(text.span(), message);
                    None
                }
            },
        };
        let mut count =
            |value: Option<Spanned<u64>>, default: u64, name: &str, max: u64| match value {
                None => default,
                Some(v) if (1..=max).contains(v.get_ref()) => *v.get_ref(),
                Some(v) => {
                    self.diagnostics.push(Diagnostic::error(
                        Some(v.span()),
                        format!("`{name}` must be between 1 and {max}, not {}", v.get_ref()),
                    ));
                    ok = false;
                    default
                }
            };
        let concurrency = count(raw.concurrency, 32, "concurrency", 4096) as usize;
        let per_host = count(raw.per_host, 8, "per_host", 4096) as usize;
        let mut duration = |value: Option<Spanned<Quantity>>, default: Duration| match value {
            None => default,
            Some(v) => match v.get_ref() {
                Quantity::Text(t) => match parse_duration(t) {
                    Ok(d) if d.is_zero() => {
                        self.diagnostics.push(Diagnostic::error(
                            Some(v.span()),
                            format!("a timeout of `{t}` would fail every request"),
                        ));
                        ok = false;
                        default
                    }
                    Ok(d) => d,
                    Err(m) => {
                        self.diagnostics.push(Diagnostic::error(Some(v.span()), m));
                        ok = false;
                        default
                    }
                },
                Quantity::Number(_) => {
                    self.diagnostics.push(
                        Diagnostic::error(Some(v.span()), "a duration needs a unit")
                            .with_hint("write e.g. \"30s\" or \"500ms\""),
                    );
                    ok = false;
                    default
                }
            },
        };
        let connect_timeout = duration(raw.connect_timeout, Duration::from_secs(10));
        let timeout = duration(raw.timeout, Duration::from_secs(60));
        let first_byte_timeout = duration(raw.first_byte_timeout, Duration::from_secs(30));
        let retries = raw.retries.map_or(4, |r| (*r.get_ref()).min(100) as u32);
        let max_bytes = match raw.max_bytes {
            None => 100_000_000,
            Some(v) => {
                let parsed = match v.get_ref() {
                    Quantity::Number(n) => Ok(*n),
                    Quantity::Text(t) => parse_bytes(t),
                };
                match parsed {
                    Ok(n) if n > 0 => n,
                    Ok(_) => {
                        self.error(v.span(), "`max_bytes` of 0 would reject every image");
                        ok = false;
                        0
                    }
                    Err(m) => {
                        self.error(v.span(), m);
                        ok = false;
                        0
                    }
                }
            }
        };
        let mut verify = VerifyRules::default();
        if let Some(formats) = raw.formats {
            if formats.get_ref().is_empty() {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(formats.span()),
                        "`formats` is empty: no image could be kept",
                    )
                    .with_hint("leave it out to keep every raster format"),
                );
                ok = false;
            }
            let mut allowed = Vec::new();
            for f in formats.get_ref() {
                match ImageFormat::from_name(f.get_ref()) {
                    Some(format) => allowed.push(format),
                    None => {
                        let names = ImageFormat::ALL.map(ImageFormat::name);
                        let mut d = Diagnostic::error(
                            Some(f.span()),
                            format!("unknown image format `{}`", f.get_ref()),
                        );
                        d = match did_you_mean(f.get_ref(), names) {
                            Some(best) => d.with_hint(format!("did you mean `{best}`?")),
                            None => d.with_hint(format!("known formats: {}", names.join(", "))),
                        };
                        self.diagnostics.push(d);
                        ok = false;
                    }
                }
            }
            verify.allowed = allowed;
        }
        verify.min_width = raw
            .min_width
            .map_or(0, |v| (*v.get_ref()).min(u32::MAX as u64) as u32);
        verify.min_height = raw
            .min_height
            .map_or(0, |v| (*v.get_ref()).min(u32::MAX as u64) as u32);
        if let Some(max) = raw.max_pixels {
            if *max.get_ref() == 0 {
                self.error(max.span(), "`max_pixels` of 0 would reject every image");
                ok = false;
            }
            verify.max_pixels = *max.get_ref();
        }
        let user_agent = raw
            .user_agent
            .map_or(DEFAULT_USER_AGENT.to_owned(), |u| u.into_inner());
        let headers = self.headers(raw.headers).unwrap_or_else(|| {
            ok = false;
            Vec::new()
        });
        let min_speed_bytes = match raw.min_speed {
            None => 1_000,
            Some(v) => {
                let parsed = match v.get_ref() {
                    Quantity::Number(n) => Ok(*n),
                    Quantity::Text(t) => parse_bytes(t.trim_end_matches("/s")),
                };
                parsed.unwrap_or_else(|m| {
                    self.error(v.span(), m);
                    ok = false;
                    0
                })
            }
        };
        let per_host_rps = match raw.per_host_rps {
            Some(v) if !(v.get_ref().is_finite() && *v.get_ref() > 0.0) => {
                self.error(
                    v.span(),
                    format!(
                        "`per_host_rps` must be a positive number, not {}",
                        v.get_ref()
                    ),
                );
                ok = false;
                None
            }
            v => v.map(|v| *v.get_ref()),
        };
        Some(DownloadSettings {
            out,
            path: path?,
            concurrency,
            per_host,
            connect_timeout,
            timeout,
            first_byte_timeout,
            min_speed_bytes,
            per_host_rps,
            retries,
            user_agent,
            headers,
            max_bytes,
            verify,
            proxy: ProxySettings::default(),
        })
        .filter(|_| ok)
    }

    /// `[proxy]`.
    fn proxy(&mut self, raw: ProxyToml) -> Option<ProxySettings> {
        let mut ok = true;
        let defaults = ProxySettings::default();
        let mut endpoints = Vec::new();
        for text in &raw.urls {
            match ProxyEndpoint::parse(text.get_ref()) {
                Ok(endpoint) => endpoints.push(endpoint),
                Err(message) => {
                    self.diagnostics.push(
                        Diagnostic::error(Some(text.span()), message)
                            .with_hint("write e.g. \"http://proxy.example:8080\" or \"socks5://proxy.example:1080\""),
                    );
                    ok = false;
                }
            }
        }
        let file = match &raw.file {
            Some(f) if f.get_ref().trim().is_empty() => {
                self.error(f.span(), "`file` is empty");
                ok = false;
                None
            }
            Some(f) => Some(PathBuf::from(f.get_ref().trim())),
            None => None,
        };
        let mut credential = |value: &Option<Spanned<String>>, what: &str| match value {
            None => None,
            Some(v) => {
                let source = self.env_or_literal(v, what);
                ok &= source.is_some();
                source
            }
        };
        let username = credential(&raw.username, "`username`");
        let password = credential(&raw.password, "`password`");
        match (&raw.username, &raw.password) {
            (Some(_), None) | (None, Some(_)) => {
                let span = raw
                    .username
                    .as_ref()
                    .or(raw.password.as_ref())
                    .map(Spanned::span);
                self.diagnostics.push(
                    Diagnostic::error(span, "`username` and `password` go together")
                        .with_hint("set both, e.g. password = \"env:PROXY_PASSWORD\""),
                );
                ok = false;
            }
            _ => {}
        }
        let max_failures = match &raw.max_failures {
            None => defaults.max_failures,
            Some(v) if (1..=u64::from(u32::MAX)).contains(v.get_ref()) => *v.get_ref() as u32,
            Some(v) => {
                self.error(v.span(), "`max_failures` must be at least 1");
                ok = false;
                defaults.max_failures
            }
        };
        let cooldown = self.browser_duration(raw.cooldown, defaults.cooldown, true);
        ok &= cooldown.is_some();
        ok.then(|| ProxySettings {
            endpoints,
            file,
            username,
            password,
            max_failures,
            cooldown: cooldown.unwrap_or(defaults.cooldown),
        })
    }
}

/// The first string value `"env:..."` of `value` that does not name a variable, if any.
fn bad_env_value(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => s
            .strip_prefix("env:")
            .filter(|var| {
                var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
            .map(|_| s.clone()),
        serde_json::Value::Array(items) => items.iter().find_map(bad_env_value),
        serde_json::Value::Object(map) => map.values().find_map(bad_env_value),
        _ => None,
    }
}

/// Whether `value` holds the string `placeholder` as a whole string value, at any depth.
fn has_placeholder(value: &serde_json::Value, placeholder: &str) -> bool {
    match value {
        serde_json::Value::String(s) => s == placeholder,
        serde_json::Value::Array(items) => items.iter().any(|v| has_placeholder(v, placeholder)),
        serde_json::Value::Object(map) => map.values().any(|v| has_placeholder(v, placeholder)),
        _ => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "name = \"t\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n";

    /// The messages (with hints) of checking `HEAD` followed by `rest`.
    fn messages(rest: &str) -> Vec<String> {
        check(&format!("{HEAD}{rest}"))
            .diagnostics
            .into_iter()
            .map(|d| format!("{} {}", d.message, d.hint.unwrap_or_default()))
            .collect()
    }

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
        assert_eq!((d.concurrency, d.per_host, d.retries), (32, 8, 4));
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
    fn settings_that_would_reject_everything_are_errors() {
        let cases = [
            ("max_bytes = 0", "`max_bytes` of 0"),
            ("max_bytes = \"0MB\"", "`max_bytes` of 0"),
            ("max_pixels = 0", "`max_pixels` of 0"),
            ("formats = []", "`formats` is empty"),
            ("timeout = \"0s\"", "would fail every request"),
            ("connect_timeout = \"0ms\"", "would fail every request"),
            ("concurrency = 0", "between 1 and 4096"),
            ("per_host = 0", "between 1 and 4096"),
        ];
        for (line, expected) in cases {
            let found = messages(&format!("[download]\n{line}\n"));
            assert!(
                found.len() == 1 && found[0].contains(expected),
                "{line}: {found:?}"
            );
        }
    }

    #[test]
    fn next_link_needs_a_non_empty_attribute() {
        let found =
            messages("[pagination]\nkind = \"next_link\"\nselector = \"a\"\nattribute = \" \"\n");
        assert!(
            found.len() == 1 && found[0].contains("`attribute` is empty"),
            "{found:?}"
        );
    }

    #[test]
    fn a_token_needs_api_requests_and_a_usable_shape() {
        let token = "[session.token]\nurl = \"/auth\"\ntoken = \"$.t\"\n";
        let found = messages(token);
        assert!(
            found.len() == 1 && found[0].contains("only sent with the API requests"),
            "{found:?}"
        );
        let api = "[pagination]\nkind = \"json_cursor\"\nrequest = \"/api\"\ncursor = \"$.next\"\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\n";
        let cases = [
            (
                "method = \"GET\"\nbody = '{}'",
                "only sent with method = \"POST\"",
            ),
            (
                "body = '{\"p\": \"env:\"}'",
                "`env:` is not an environment variable name",
            ),
            ("refresh_after = \"0s\"", "longer than 0s"),
            ("format = \"Bearer\"", "no `{token}` placeholder"),
            ("header = \"X Token\"", "is not a header name"),
        ];
        for (line, expected) in cases {
            let found = messages(&format!("{api}{token}{line}\n"));
            assert!(
                found.len() == 1 && found[0].contains(expected),
                "{line}: {found:?}"
            );
        }
        let source = format!("{HEAD}{api}{token}body = '{{\"a\": 1}}'\n");
        let checked = check(&source);
        let t = checked.profile.unwrap().session.token.unwrap();
        assert_eq!(
            (t.method, t.header.as_str(), t.format.as_str()),
            (ApiMethod::Post, "Authorization", "Bearer {token}")
        );
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

    #[test]
    fn proxies_are_checked_with_their_credentials_and_bench_settings() {
        let checked = check(&format!(
            "{HEAD}[proxy]\nurls = [\"http://p.test:8080\", \"socks5h://q.test:1080\"]\n\
             file = \"more.txt\"\nusername = \"env:PROXY_USER\"\npassword = \"hunter2\"\n\
             max_failures = 2\ncooldown = \"5s\"\n"
        ));
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let proxy = checked.profile.unwrap().download.proxy;
        let servers: Vec<_> = proxy.endpoints.iter().map(|e| e.server()).collect();
        assert_eq!(servers, ["http://p.test:8080", "socks5://q.test:1080"]);
        assert_eq!(proxy.file, Some(PathBuf::from("more.txt")));
        assert_eq!(proxy.username, Some(HeaderSource::Env("PROXY_USER".into())));
        assert_eq!(
            (proxy.max_failures, proxy.cooldown),
            (2, Duration::from_secs(5))
        );
        assert!(!format!("{proxy:?}").contains("hunter2"));
        assert_eq!(
            check(HEAD).profile.unwrap().download.proxy,
            ProxySettings::default()
        );
        for (rest, expected) in [
            ("urls = [\"ftp://p.test:21\"]", "uses `ftp:`"),
            ("urls = [\"socks5://p.test\"]", "has no port"),
            ("password = \"x\"", "`username` and `password` go together"),
            ("max_failures = 0", "`max_failures` must be at least 1"),
            ("cooldown = 5", "a duration needs a unit"),
            ("file = \" \"", "`file` is empty"),
        ] {
            let found = messages(&format!("[proxy]\n{rest}\n"));
            assert!(
                found.len() == 1 && found[0].contains(expected),
                "{rest}: {found:?}"
            );
        }
    }

    #[test]
    fn browser_processes_default_to_one_and_stay_between_one_and_sixteen() {
        let checked = check(&format!("{HEAD}[browser]\nprocesses = 3\n"));
        assert_eq!(checked.profile.unwrap().browser.processes, 3);
        assert_eq!(check(HEAD).profile.unwrap().browser.processes, 1);
        for value in [0, 17] {
            let source = format!("{HEAD}[browser]\nprocesses = {value}\n");
            let found = check(&source).diagnostics;
            assert_eq!(found.len(), 1, "{value}: {found:?}");
            let rendered = found[0].render("p.toml", &source).to_string();
            assert!(
                rendered.starts_with(&format!(
                    "p.toml:6:13: error: `processes` must be between 1 and 16, not {value}"
                )),
                "{rendered}"
            );
        }
    }
}
