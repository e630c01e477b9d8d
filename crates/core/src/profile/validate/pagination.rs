//! `[pagination]`: how one page leads to the next, and for `kind = "json_cursor"` the API
//! request, its paging fields and what it needs from the rest of the profile.

use std::ops::Range;

use toml::Spanned;

use super::{DEFAULT_EXPIRED_STATUS, Validator};
use crate::profile::raw::{ApiRuleToml, MethodToml, OrderToml, PaginationKindToml, PaginationToml};
use crate::profile::{
    ApiMethod, ApiPaging, Diagnostic, IdOrder, JsonCursor, Pagination, RenderMode, UrlTemplate,
};

impl Validator<'_> {
    /// `[pagination]`, its `max_pages`, and (for chains of pages, not `json_cursor` whose
    /// walks count items) its `stop_after_known`.
    pub(super) fn pagination(
        &mut self,
        mut p: PaginationToml,
    ) -> (Option<Pagination>, Option<u64>, Option<u64>) {
        let max_pages = match p.max_pages.take() {
            Some(m) if *m.get_ref() == 0 => {
                self.error(m.span(), "`max_pages` must be at least 1");
                None
            }
            m => m.map(|m| *m.get_ref()),
        };
        let refresh = match *p.kind.get_ref() {
            PaginationKindToml::JsonCursor => None,
            _ => match p.stop_after_known.take() {
                Some(n) if *n.get_ref() == 0 => {
                    self.error(n.span(), "`stop_after_known` must be at least 1");
                    None
                }
                n => n.map(|n| n.into_inner()),
            },
        };
        for (span, message) in stray_keys(&p) {
            self.error(span, message);
        }
        let pagination = match *p.kind.get_ref() {
            PaginationKindToml::JsonCursor => self
                .json_cursor(p)
                .map(|c| Pagination::JsonCursor(Box::new(c))),
            PaginationKindToml::None => Some(Pagination::None),
            PaginationKindToml::NextLink => self.next_link(p),
            PaginationKindToml::UrlTemplate => self.url_template(p),
        };
        (pagination, max_pages, refresh)
    }

    /// `kind = "next_link"`: the link to the next page and its attribute.
    fn next_link(&mut self, p: PaginationToml) -> Option<Pagination> {
        let Some(selector) = p.selector else {
            self.error(
                p.kind.span(),
                "kind = \"next_link\" needs a `selector` for the next-page link",
            );
            return None;
        };
        let attribute = p.attribute.map_or("href".to_owned(), |a| a.into_inner());
        if attribute.trim().is_empty() {
            self.error(
                p.kind.span(),
                "`attribute` is empty: name the attribute holding the next-page URL",
            );
            return None;
        }
        self.selector(&selector)
            .map(|selector| Pagination::NextLink {
                selector,
                attribute,
            })
    }

    /// `kind = "url_template"`: page URLs from a template and a counter.
    fn url_template(&mut self, p: PaginationToml) -> Option<Pagination> {
        let Some(template) = p.template else {
            self.error(
                p.kind.span(),
                "kind = \"url_template\" needs a `template` such as \"/gallery?page={page}\"",
            );
            return None;
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
        } else if let Some(pages) = pages_before_numbers_run_out(start, step)
            && pages <= FEW_PAGE_NUMBERS
        {
            let span = p
                .step
                .as_ref()
                .filter(|s| s.get_ref().unsigned_abs() > 1)
                .or(p.start.as_ref())
                .map_or_else(|| p.kind.span(), |s| s.span());
            self.diagnostics.push(
                Diagnostic::warning(
                    Some(span),
                    format!("page numbers from `start` = {start} by `step` = {step} run out after {pages} page(s): the chain ends there"),
                )
                .with_hint("page numbers are 64-bit integers; set `stop` if the site has fewer pages"),
            );
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
        let numbered = [PAGE, OFFSET].iter().any(|placeholder| {
            request.get_ref().contains(placeholder)
                || p.body
                    .as_ref()
                    .is_some_and(|b| b.get_ref().contains(placeholder))
        });
        let cursor = match (p.cursor, numbered) {
            (Some(cursor), false) => Some(cursor),
            (None, true) => None,
            (Some(cursor), true) => {
                self.error(
                    cursor.span(),
                    "`cursor` and a \"{page}\" or \"{offset}\" placeholder both say how pages follow one another: keep one",
                );
                return None;
            }
            (None, false) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(p.kind.span()),
                        "kind = \"json_cursor\" needs a `cursor`, the JSONPath of the next cursor such as \"$.next_cursor\"",
                    )
                    .with_hint("or number the pages: put \"{page}\" or \"{offset}\" in `request` (or `body`), e.g. \"/api/photos?page={page}\""),
                );
                return None;
            }
        };
        let first = match (&p.start, numbered) {
            (Some(first), true) => *first.get_ref(),
            (Some(first), false) => {
                self.error(
                    first.span(),
                    "`start` numbers pages: it needs a \"{page}\" placeholder in `request` or `body`",
                );
                ok = false;
                1
            }
            (None, _) => 1,
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
        let body = self.cursor_body(
            p.kind.span(),
            method,
            p.body,
            (after_id.is_some(), numbered),
            &mut ok,
        );
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
        let paging = match &cursor {
            Some(cursor) => self.json_path(cursor).map(ApiPaging::Cursor),
            None => Some(ApiPaging::Numbered { first }),
        };
        let has_more = p.has_more.as_ref().map(|h| self.json_path(h));
        let expired_match = p.expired_match.as_ref().map(|e| self.json_path(e));
        let expired_status = match p.expired_status {
            None => DEFAULT_EXPIRED_STATUS.to_vec(),
            Some(list) => self.expired_status(list).unwrap_or_else(|| {
                ok = false;
                Vec::new()
            }),
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
            paging: paging?,
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

    /// The `body` of a json_cursor request: only with POST, JSON with a `"{cursor}"`
    /// placeholder (or, for numbered pages, `"{page}"` or `"{offset}"`), and an
    /// `"{after_id}"` one when `after_id` is set. `kind` is where a missing body is reported;
    /// `ok` turns false on any error.
    fn cursor_body(
        &mut self,
        kind: Range<usize>,
        method: ApiMethod,
        body: Option<Spanned<String>>,
        (after_id, numbered): (bool, bool),
        ok: &mut bool,
    ) -> Option<serde_json::Value> {
        match (method, body) {
            (ApiMethod::Get, Some(body)) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(body.span()),
                        "`body` is only sent with method = \"POST\"",
                    )
                    .with_hint("add method = \"POST\", or put the parameters in `request`"),
                );
                *ok = false;
                None
            }
            (ApiMethod::Get, None) => None,
            (ApiMethod::Post, None) => {
                self.error(
                    kind,
                    "method = \"POST\" needs a `body` with a \"{cursor}\" placeholder",
                );
                *ok = false;
                None
            }
            (ApiMethod::Post, Some(body)) => {
                match serde_json::from_str::<serde_json::Value>(body.get_ref()) {
                    Err(e) => {
                        self.error(body.span(), format!("`body` is not JSON: {e}"));
                        *ok = false;
                        None
                    }
                    Ok(value) => {
                        let numbered_here = numbered
                            && (has_placeholder(&value, PAGE) || has_placeholder(&value, OFFSET));
                        if !numbered_here && !has_placeholder(&value, "{cursor}") {
                            self.diagnostics.push(
                                Diagnostic::error(Some(body.span()), "`body` has no \"{cursor}\" placeholder")
                                    .with_hint("write the cursor's place as the JSON string \"{cursor}\", e.g. \"variables\": {\"after\": \"{cursor}\"}"),
                            );
                            *ok = false;
                        }
                        if after_id && !has_placeholder(&value, "{after_id}") {
                            self.error(body.span(), "`body` has no \"{after_id}\" placeholder, which `after_id` needs with method = \"POST\"");
                            *ok = false;
                        }
                        Some(value)
                    }
                }
            }
        }
    }

    /// `expired_status`: HTTP status codes; `None` when any is not one (each is reported).
    fn expired_status(&mut self, list: Spanned<Vec<Spanned<u64>>>) -> Option<Vec<u16>> {
        let mut ok = true;
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
        ok.then_some(codes)
    }

    /// What `kind = "json_cursor"` needs from the rest of the profile.
    pub(super) fn json_cursor_fits(
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
}

/// The keys set that only another `kind` uses, each with its message, in the order reported.
fn stray_keys(p: &PaginationToml) -> Vec<(Range<usize>, String)> {
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
        // A numbered API's first page number is its `start` too.
        let start = Some(&p.start).filter(|_| kind != PaginationKindToml::JsonCursor);
        let numbering = start.into_iter().map(|s| ("start", s));
        for (name, value) in numbering.chain([("step", &p.step), ("stop", &p.stop)]) {
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
                "stop_at_known_id",
                p.stop_at_known_id.as_ref().map(|v| v.span()),
            ),
        ];
        for (name, span) in spans {
            stray.extend(span.map(|s| (s, unused(name, "json_cursor"))));
        }
    }
    stray
}

/// The page number placeholder of numbered API pages.
const PAGE: &str = "{page}";
/// The item offset placeholder of numbered API pages.
const OFFSET: &str = "{offset}";

/// Whether `value` holds the string `placeholder` as a whole string value, at any depth.
fn has_placeholder(value: &serde_json::Value, placeholder: &str) -> bool {
    match value {
        serde_json::Value::String(s) => s == placeholder,
        serde_json::Value::Array(items) => items.iter().any(|v| has_placeholder(v, placeholder)),
        serde_json::Value::Object(map) => map.values().any(|v| has_placeholder(v, placeholder)),
        _ => false,
    }
}

/// Below this many pages before the page numbers run out, `check` warns: a chain that short is
/// more likely a typo in `start` or `step` than a site's real numbering.
const FEW_PAGE_NUMBERS: u64 = 1_000_000;

/// How many pages a chain without `stop` has before its numbers leave the 64-bit range (the
/// crawl ends the chain there); `None` for `step` = 0.
fn pages_before_numbers_run_out(start: i64, step: i64) -> Option<u64> {
    let end = if step > 0 { i64::MAX } else { i64::MIN };
    let steps = (i128::from(end) - i128::from(start)).checked_div(i128::from(step))?;
    u64::try_from(steps + 1).ok()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::messages;

    #[test]
    fn a_template_whose_page_numbers_soon_run_out_is_a_warning() {
        let template = "[pagination]\nkind = \"url_template\"\ntemplate = \"/p/{page}\"\n";
        let cases = [
            (
                "start = 9223372036854775806\n",
                Some("run out after 2 page(s)"),
            ),
            (
                "start = -9223372036854775800\nstep = -1\n",
                Some("run out after 9 page(s)"),
            ),
            (
                "step = 4611686018427387904\nstart = 0\n",
                Some("run out after 2 page(s)"),
            ),
            (
                "start = 9223372036854775806\nstop = 9223372036854775807\n",
                None,
            ),
            ("start = 1\n", None),
            ("start = 1\nstep = -1\n", None),
        ];
        for (numbering, expected) in cases {
            let found = messages(&format!("{template}{numbering}"));
            match expected {
                Some(text) => assert!(
                    found.len() == 1 && found[0].contains(text),
                    "{numbering}: {found:?}"
                ),
                None => assert!(found.is_empty(), "{numbering}: {found:?}"),
            }
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
}
