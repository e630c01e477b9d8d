//! `[session]` and `[session.token]`: cookies, and the token sent with API requests.

use std::path::PathBuf;

use toml::Spanned;

use super::Validator;
use crate::profile::raw::{LoginToml, MethodToml, Quantity, SessionToml, SignedOutToml, TokenToml};
use crate::profile::{
    ApiMethod, CssRule, Diagnostic, HeaderSource, LoginSteps, LoginSuccess, SessionFile,
    SessionProfile, SignedOut, TokenRequest, parse_duration,
};
use crate::redact::Secret;

impl Validator<'_> {
    /// `[session]`; `json_cursor` says whether there are API requests to carry a token.
    pub(super) fn session(
        &mut self,
        raw: SessionToml,
        json_cursor: bool,
    ) -> Option<SessionProfile> {
        let mut ok = true;
        let mut file = |text: Option<Spanned<String>>, key: &str, what: &str| match text {
            None => None,
            Some(text) if text.get_ref().trim().is_empty() => {
                self.error(
                    text.span(),
                    format!("`{key}` is empty: name {what} or \"env:NAME\""),
                );
                ok = false;
                None
            }
            Some(text) => match self.env_or_literal(&text, &format!("`{key}`")) {
                Some(HeaderSource::Env(variable)) => Some(SessionFile::Env(variable)),
                Some(HeaderSource::Literal(path)) => {
                    Some(SessionFile::File(PathBuf::from(path.expose())))
                }
                None => {
                    ok = false;
                    None
                }
            },
        };
        let cookies = file(raw.cookies, "cookies", "a cookies file");
        let storage_state = file(raw.storage_state, "storage_state", "a storage state file");
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
        let signed_out = match raw.signed_out {
            None => SignedOut::default(),
            Some(rules) => self.signed_out(rules.into_inner()).unwrap_or_else(|| {
                ok = false;
                SignedOut::default()
            }),
        };
        let login = raw.login.and_then(|login| {
            let login = self.login(login.into_inner());
            ok &= login.is_some();
            login
        });
        ok.then_some(SessionProfile {
            cookies,
            storage_state,
            login,
            token,
            signed_out,
        })
    }

    /// Whether `url`, a request's `url` (absolute, or relative to the run's first start), is
    /// a URL; an error at its place when it is not.
    fn relative_url(&mut self, url: &Spanned<String>) -> bool {
        // Invariant: a constant, valid URL.
        let probe = url::Url::parse("http://example.invalid/").expect("valid URL");
        let text = url.get_ref().trim();
        let valid = !text.is_empty() && probe.join(text).is_ok();
        if !valid {
            self.error(
                url.span(),
                format!("`url` `{}` is not a URL", url.get_ref()),
            );
        }
        valid
    }

    /// `[session.login]`.
    fn login(&mut self, raw: LoginToml) -> Option<LoginSteps> {
        let url = raw.url.get_ref().trim().to_owned();
        let mut ok = self.relative_url(&raw.url);
        let span = raw.fields.span();
        let table = raw.fields.into_inner();
        if table.is_empty() {
            self.error(
                span,
                "`fields` is empty: name the fields to fill, such as `password`",
            );
            ok = false;
        }
        let mut fields = Vec::new();
        for (name, value) in table {
            match self.env_or_literal(&value, &format!("field `{name}`")) {
                Some(HeaderSource::Env(variable)) => {
                    fields.push((name, HeaderSource::Env(variable)))
                }
                Some(HeaderSource::Literal(_)) => {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Some(value.span()),
                            format!("field `{name}`: a sign-in value comes from the environment, never from the profile file"),
                        )
                        .with_hint(format!("write \"env:NAME\" and set NAME when you run it, e.g. \"env:{}\"", name.to_ascii_uppercase())),
                    );
                    ok = false;
                }
                None => ok = false,
            }
        }
        let mut rule = |text: Option<Spanned<String>>| {
            text.and_then(|text| {
                let selector = self.selector(&text);
                ok &= selector.is_some();
                selector.map(|selector| CssRule {
                    selector,
                    text: text.into_inner(),
                })
            })
        };
        let form = rule(raw.form);
        let selector = rule(raw.success_selector);
        let success = LoginSuccess {
            cookie: raw.success_cookie.map(Spanned::into_inner),
            selector,
            url: raw.success_url.map(Spanned::into_inner),
        };
        ok.then_some(LoginSteps {
            url,
            fields,
            form,
            success,
        })
    }

    /// `[session.signed_out]`.
    fn signed_out(&mut self, raw: SignedOutToml) -> Option<SignedOut> {
        let mut ok = true;
        let selector = raw.selector.and_then(|text| {
            let selector = self.selector(&text);
            ok &= selector.is_some();
            selector.map(|selector| CssRule {
                selector,
                text: text.into_inner(),
            })
        });
        let mut url = Vec::new();
        for part in raw.url.unwrap_or_default() {
            if part.get_ref().trim().is_empty() {
                self.error(part.span(), "an empty `url` part would match every URL");
                ok = false;
            } else {
                url.push(part.into_inner());
            }
        }
        let mut status = Vec::new();
        for code in raw.status.unwrap_or_default() {
            match u16::try_from(*code.get_ref()) {
                Ok(code @ 400..=599) => status.push(code),
                _ => {
                    self.error(
                        code.span(),
                        format!(
                            "`status` {} is not an error status (400-599)",
                            code.get_ref()
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(SignedOut {
            selector,
            url,
            status,
        })
    }

    /// `[session.token]`.
    fn token(&mut self, raw: TokenToml) -> Option<TokenRequest> {
        let url = raw.url.get_ref().trim().to_owned();
        let mut ok = self.relative_url(&raw.url);
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
            body: body.map(Secret::new),
            headers,
            token,
            header,
            format,
            refresh_after,
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{HEAD, messages};
    use crate::profile::{ApiMethod, check};

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
}
