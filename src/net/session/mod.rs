//! Session: what a run sends to say who it is: header values from the environment, cookies
//! from a cookies file, a token from a login endpoint, and the proxies' list file and
//! credentials. Everything but the token itself (the token request's own `env:` values
//! included) is read once, when the run starts, so a missing variable or a broken file stops
//! the run before anything is fetched (not as failed pages later). Secret values are never
//! logged, stored in the state or written to the manifest. A replay reads no secret: every
//! `env:` value is [`REDACTED`], which is what a recording holds in its place, and it reads no
//! proxy setting (a replay uses no proxy).

pub mod cookies;
pub mod login;
pub mod storage_state;
pub mod token;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use reqwest::cookie::Jar;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::net::HttpClient;
use crate::paginate::json_cursor::ApiRequest;
use crate::profile::{
    DownloadSettings, HeaderSource, LoginSteps, Pagination, Profile, ProxySettings, SessionFile,
    SessionProfile, TokenRequest,
};
use crate::proxy::{ProxyCredentials, parse_proxy_list};
use crate::redact::Secret;
use crate::replay::REDACTED;
pub use login::{Login, LoginError};
pub use storage_state::{OriginStorage, StorageState};
pub use token::TokenKeeper;

/// Where the values of `env:` settings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvValues {
    /// The process environment; a variable that is not set stops the run.
    Read,
    /// [`REDACTED`] for every one: a replay sends nothing anywhere, and a recording holds
    /// `[redacted]` where a secret was, so the replayed requests match the recorded ones.
    Redacted,
}

impl EnvValues {
    /// The value of variable `variable`, which `used_by` needs.
    fn get(self, variable: &str, used_by: &str) -> Result<String, SessionError> {
        match self {
            Self::Read => std::env::var(variable).map_err(|_| SessionError::MissingEnv {
                variable: variable.to_owned(),
                used_by: used_by.to_owned(),
            }),
            Self::Redacted => Ok(REDACTED.to_owned()),
        }
    }
}

/// What a run's requests carry beyond the profile's literal headers.
#[derive(Clone, Default)]
pub struct Session {
    /// The cookie jar of the run's client; it also keeps cookies the sites set.
    pub cookies: Option<Arc<Jar>>,
    /// The token of the API requests (fetched on the first one).
    pub token: Option<Arc<TokenKeeper>>,
    /// `[session.login]`, its fields read from the environment, and the run's first start
    /// URL its page is relative to. `None` in a replay: it sends nothing anywhere.
    pub login: Option<(LoginSteps, url::Url)>,
}

impl Session {
    /// The run's way of signing in, through `client` (built with this session's cookie jar).
    pub fn login(&self, client: &HttpClient) -> Option<Arc<Login>> {
        let (steps, start) = self.login.as_ref()?;
        let jar = self.cookies.as_ref()?;
        Some(Arc::new(Login::new(
            client.clone(),
            Arc::clone(jar),
            steps.clone(),
            start,
        )))
    }
}

impl Session {
    /// The session of `profile`: its `env:` values read into literals, its cookies loaded, its
    /// token request made ready (not sent yet).
    pub fn start(profile: &mut Profile, env: EnvValues) -> Result<Self, SessionError> {
        resolve_env(profile, env)?;
        let session = &profile.session;
        let login = match env {
            EnvValues::Read => login_steps(profile)?,
            EnvValues::Redacted => None,
        };
        let cookies = match (&session.cookies, &session.storage_state) {
            (None, None) if login.is_none() => None,
            (file, state) => {
                let mut all = Vec::new();
                if let Some(source) = file {
                    all.extend(read_cookies(source, env)?);
                }
                if let Some(source) = state {
                    all.extend(read_storage_state(source, env)?.cookies);
                }
                let jar = Jar::default();
                let added = cookies::fill_jar(&jar, &all, SystemTime::now());
                tracing::debug!("{added} cookies loaded ({} expired)", all.len() - added);
                Some(Arc::new(jar))
            }
        };
        let token = match (&profile.session.token, profile.start.first()) {
            (Some(request), Some(start)) => Some(Arc::new(token_keeper(request, start, env)?)),
            _ => None,
        };
        Ok(Self {
            cookies,
            token,
            login,
        })
    }
}

/// The keeper of the token `request` describes, its `env:` values read.
fn token_keeper(
    request: &TokenRequest,
    start: &url::Url,
    env: EnvValues,
) -> Result<TokenKeeper, SessionError> {
    let mut headers = request.headers.clone();
    resolve_headers(&mut headers, "[session.token] headers", env)?;
    let mut map = HeaderMap::new();
    for (name, value) in &headers {
        // Names were checked by the profile, values by `resolve_headers`.
        if let (Ok(name), Some(Ok(mut value))) = (
            HeaderName::from_bytes(name.as_bytes()),
            value.literal().map(HeaderValue::from_str),
        ) {
            value.set_sensitive(true);
            map.insert(name, value);
        }
    }
    let body = match &request.body {
        None => None,
        Some(json) => {
            let mut json = json.expose().clone();
            token::fill_env(&mut json, &|variable| {
                env.get(variable, "[session.token] body")
            })?;
            Some(json.to_string())
        }
    };
    let url = request.endpoint(start);
    // Checked by the profile: a valid header name.
    let header =
        HeaderName::from_bytes(request.header.as_bytes()).unwrap_or(reqwest::header::AUTHORIZATION);
    Ok(TokenKeeper::new(
        ApiRequest {
            method: request.method,
            url,
            body,
        },
        map,
        request.token.clone(),
        header,
        request.format.clone(),
        request.refresh_after,
    ))
}

/// `[session.login]` of `profile`, its fields read from the environment, and the first start
/// URL its page is relative to.
pub fn login_steps(profile: &Profile) -> Result<Option<(LoginSteps, url::Url)>, SessionError> {
    let (Some(steps), Some(start)) = (&profile.session.login, profile.start.first()) else {
        return Ok(None);
    };
    let mut steps = steps.clone();
    resolve_headers(&mut steps.fields, "[session.login] fields", EnvValues::Read)?;
    Ok(Some((steps, start.clone())))
}

/// Why a run cannot present itself as the profile says.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("environment variable `{variable}` (used by `{used_by}`) is not set")]
    MissingEnv { variable: String, used_by: String },
    // The value may be a secret: only its variable is named.
    #[error(
        "environment variable `{variable}` (used by `{used_by}`) does not hold valid header text"
    )]
    InvalidEnv { variable: String, used_by: String },
    #[error("cannot read proxy file `{path}`")]
    ProxyFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    ProxyFileLine {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot read {what} `{path}`")]
    FileUnreadable {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `place` is the file's path, or the variable that holds its text.
    #[error("{place}: {message}")]
    StorageState { place: String, message: String },
    /// `place` is the file's path, or the variable that holds its text.
    #[error("{place}, line {line}: {message}")]
    CookiesLine {
        place: String,
        line: usize,
        message: String,
    },
}

/// What the browser of a run of `session` starts with: the unexpired cookies of its cookies
/// file and storage state, and the storage state's localStorage. The run checked them when it
/// started ([`Session::start`]); should they have become unreadable since, pages render
/// without them.
pub fn browser_session(session: &SessionProfile) -> (Vec<cookies::FileCookie>, Vec<OriginStorage>) {
    let mut all = Vec::new();
    let mut origins = Vec::new();
    if let Some(source) = &session.cookies {
        match read_cookies(source, EnvValues::Read) {
            Ok(parsed) => all.extend(parsed),
            Err(error) => {
                tracing::warn!("the browser gets no cookies from the cookies file: {error}")
            }
        }
    }
    if let Some(source) = &session.storage_state {
        match read_storage_state(source, EnvValues::Read) {
            Ok(state) => {
                all.extend(state.cookies);
                origins = state.origins;
            }
            Err(error) => tracing::warn!("the browser gets nothing of the storage state: {error}"),
        }
    }
    let now = SystemTime::now();
    all.retain(|c| c.expires.is_none_or(|at| at > now));
    (all, origins)
}

/// The cookies of `source`, or the line that is not one.
fn read_cookies(
    source: &SessionFile,
    env: EnvValues,
) -> Result<Vec<cookies::FileCookie>, SessionError> {
    // A replay's cookies are in its recording, which the replay does not send anyway.
    let Some((text, place)) = read_session_file(source, env, "cookies", "cookies file")? else {
        return Ok(Vec::new());
    };
    cookies::parse_cookies(&text).map_err(|e| SessionError::CookiesLine {
        place,
        line: e.line,
        message: e.message,
    })
}

/// The storage state of `source`, or what is wrong with it.
fn read_storage_state(source: &SessionFile, env: EnvValues) -> Result<StorageState, SessionError> {
    let Some((text, place)) =
        read_session_file(source, env, "storage_state", "storage state file")?
    else {
        return Ok(StorageState::default());
    };
    storage_state::parse_storage_state(&text)
        .map_err(|message| SessionError::StorageState { place, message })
}

/// The text of session file `source` (`[session] key`, a `what`) and how to name it; `None`
/// in a replay of one held in a variable. A file other users may read is warned about: it
/// holds a signed-in session.
fn read_session_file(
    source: &SessionFile,
    env: EnvValues,
    key: &str,
    what: &str,
) -> Result<Option<(String, String)>, SessionError> {
    match source {
        SessionFile::File(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|source| SessionError::FileUnreadable {
                    what: what.to_owned(),
                    path: path.clone(),
                    source,
                })?;
            warn_if_shared(path, what);
            Ok(Some((text, format!("{what} `{}`", path.display()))))
        }
        SessionFile::Env(_) if env == EnvValues::Redacted => Ok(None),
        SessionFile::Env(variable) => {
            let used_by = format!("[session] {key}");
            Ok(Some((
                env.get(variable, &used_by)?,
                format!("environment variable `{variable}` (used by `{used_by}`)"),
            )))
        }
    }
}

/// Warns when other users of the machine may read `path`, a file holding a session.
fn warn_if_shared(path: &std::path::Path, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                "{what} `{}` can be read by other users of this machine: it holds a signed-in session; `chmod 600` it",
                path.display()
            );
        }
    }
}

/// Reads every `env:` header value of `profile` (`[download]` and `[pagination]` headers)
/// into a literal.
pub fn resolve_env(profile: &mut Profile, env: EnvValues) -> Result<(), SessionError> {
    resolve_download_env(&mut profile.download, env)?;
    if let Pagination::JsonCursor(cursor) = &mut profile.pagination {
        resolve_headers(&mut cursor.headers, "[pagination] headers", env)?;
    }
    Ok(())
}

/// Reads the `env:` values of `[download] headers` into literals, and the `[proxy]` file and
/// credentials into its endpoints.
pub fn resolve_download_env(
    settings: &mut DownloadSettings,
    env: EnvValues,
) -> Result<(), SessionError> {
    resolve_headers(&mut settings.headers, "[download] headers", env)?;
    resolve_proxies(&mut settings.proxy, env)
}

/// Reads the proxy file into the endpoints and gives the `[proxy]` credentials to those
/// without their own. A replay uses no proxy: it reads neither file nor variable.
fn resolve_proxies(proxy: &mut ProxySettings, env: EnvValues) -> Result<(), SessionError> {
    if env == EnvValues::Redacted {
        proxy.file = None;
        proxy.username = None;
        proxy.password = None;
        return Ok(());
    }
    if let Some(path) = proxy.file.take() {
        let text =
            std::fs::read_to_string(&path).map_err(|source| SessionError::ProxyFileUnreadable {
                path: path.clone(),
                source,
            })?;
        let listed = parse_proxy_list(&text).map_err(|e| SessionError::ProxyFileLine {
            path,
            line: e.line,
            message: e.message,
        })?;
        proxy.endpoints.extend(listed);
    }
    let read = |value: Option<HeaderSource>, key: &str| match value {
        None => Ok(None),
        Some(HeaderSource::Literal(text)) => Ok(Some(text)),
        Some(HeaderSource::Env(variable)) => env.get(&variable, key).map(|v| Some(Secret::new(v))),
    };
    let username = read(proxy.username.take(), "[proxy] username")?;
    let password = read(proxy.password.take(), "[proxy] password")?;
    if let (Some(username), Some(password)) = (username, password) {
        let credentials = ProxyCredentials { username, password };
        proxy.endpoints = std::mem::take(&mut proxy.endpoints)
            .into_iter()
            .map(|e| e.with_default_credentials(Some(&credentials)))
            .collect();
    }
    Ok(())
}

fn resolve_headers(
    headers: &mut [(String, HeaderSource)],
    table: &str,
    env: EnvValues,
) -> Result<(), SessionError> {
    for (name, value) in headers.iter_mut() {
        if let HeaderSource::Env(variable) = value {
            let used_by = format!("{table}.{name}");
            let text = env.get(variable, &used_by)?;
            if HeaderValue::from_str(&text).is_err() {
                return Err(SessionError::InvalidEnv {
                    variable: variable.clone(),
                    used_by,
                });
            }
            *value = HeaderSource::Literal(Secret::new(text));
        }
    }
    Ok(())
}
