//! Signing in by the profile's `[session.login]`: the sign-in page fetched, its form filled as
//! a browser fills it (hidden fields, a CSRF token among them, go along; see
//! [`crate::form`]), sent, and the page it leads to read for success. The cookies the site
//! sets land in the run's cookie jar, so pages, API requests and images carry them. A run
//! signs in before its first page, and again when a page meets a sign-in wall
//! ([`crate::net::walls`]). The field values are secrets: never logged.

use std::sync::Arc;

use reqwest::cookie::{CookieStore, Jar};

use crate::form::{FormMethod, fill_form, signed_in};
use crate::net::{HttpClient, MAX_PAGE_BYTES, classify};
use crate::profile::LoginSteps;

/// A run's way of signing in.
pub struct Login {
    client: HttpClient,
    jar: Arc<Jar>,
    steps: LoginSteps,
    page: url::Url,
    /// One sign-in at a time: pages that meet a wall together wait for the one under way.
    pub(crate) turn: tokio::sync::Mutex<()>,
}

/// Why signing in did not work.
#[derive(Debug, thiserror::Error)]
#[error("signing in at `{url}` did not work: {detail}")]
pub struct LoginError {
    pub url: String,
    pub detail: String,
}

impl Login {
    /// Signing in by `steps` (their field values read from the environment already) at the
    /// sign-in page of a run that starts at `start`, through `client`, whose cookies are kept
    /// in `jar`.
    pub fn new(client: HttpClient, jar: Arc<Jar>, steps: LoginSteps, start: &url::Url) -> Self {
        let page = steps.page(start);
        Self {
            client,
            jar,
            steps,
            page,
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Fetches the sign-in page, fills and sends its form, and checks the page it leads to.
    pub async fn sign_in(&self) -> Result<(), LoginError> {
        let failed = |detail: String| LoginError {
            url: crate::redact::redact(&self.page).to_string(),
            detail,
        };
        let (at, html) = self
            .read(self.client.get(self.page.clone()))
            .await
            .map_err(&failed)?;
        let fill: Vec<(String, String)> = self
            .steps
            .fields
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), value.literal()?.to_owned())))
            .collect();
        let submission = {
            let page = scraper::Html::parse_document(&html);
            fill_form(
                &at,
                &page,
                self.steps.form.as_ref().map(|f| &f.selector),
                &fill,
            )
            .map_err(&failed)?
        };
        tracing::debug!(form = ?submission, "sending the sign-in form");
        let request = match submission.method {
            FormMethod::Post => self
                .client
                .post(submission.action.clone())
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(
                    url::form_urlencoded::Serializer::new(String::new())
                        .extend_pairs(&submission.fields)
                        .finish(),
                ),
            FormMethod::Get => {
                let mut action = submission.action.clone();
                action.query_pairs_mut().extend_pairs(&submission.fields);
                self.client.get(action)
            }
        };
        let (landed, html) = self.read(request).await.map_err(&failed)?;
        let has_cookie = self.steps.success.cookie.as_ref().is_some_and(|name| {
            [&landed, &submission.action, &self.page].iter().any(|url| {
                self.jar.cookies(url).is_some_and(|header| {
                    header.to_str().unwrap_or_default().split("; ").any(|pair| {
                        pair.split_once('=')
                            .is_some_and(|(n, _)| n == name.as_str())
                    })
                })
            })
        });
        let page = scraper::Html::parse_document(&html);
        signed_in(&self.steps.success, &landed, &page, has_cookie)
            .map_err(|why| failed(format!("{why} (a wrong name or password?)")))?;
        tracing::info!(page = %crate::redact::redact(&self.page), "signed in");
        Ok(())
    }

    /// Sends `request`: the URL it was answered from and the page, or why not.
    async fn read(&self, request: reqwest::RequestBuilder) -> Result<(url::Url, String), String> {
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| classify(&e).detail)?;
        let status = response.status();
        let landed = response.url().clone();
        if !status.is_success() {
            return Err(format!(
                "`{}` answered HTTP {}",
                crate::redact::redact(&landed),
                status.as_u16()
            ));
        }
        let bytes = response.bytes().await.map_err(|e| classify(&e).detail)?;
        if bytes.len() > MAX_PAGE_BYTES {
            return Err(format!(
                "`{}` is larger than a page may be",
                crate::redact::redact(&landed)
            ));
        }
        Ok((landed, String::from_utf8_lossy(&bytes).into_owned()))
    }
}
