//! Session: what a run sends to say who it is. `env:` header values are read once, when the
//! run starts, so a missing variable stops the run before anything is fetched (not as a failed
//! page later). Secret values are kept as sensitive header values: never logged, stored in the
//! state or written to the manifest.

use reqwest::header::HeaderValue;

use crate::profile::{DownloadSettings, HeaderSource, Pagination, Profile};

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
}

/// Reads every `env:` header value of `profile` (`[download]` and `[pagination]` headers)
/// into a literal.
pub fn resolve_env(profile: &mut Profile) -> Result<(), SessionError> {
    resolve_download_env(&mut profile.download)?;
    if let Pagination::JsonCursor(cursor) = &mut profile.pagination {
        resolve_headers(&mut cursor.headers, "[pagination] headers")?;
    }
    Ok(())
}

/// Reads the `env:` values of `[download] headers` into literals.
pub fn resolve_download_env(settings: &mut DownloadSettings) -> Result<(), SessionError> {
    resolve_headers(&mut settings.headers, "[download] headers")
}

fn resolve_headers(
    headers: &mut [(String, HeaderSource)],
    table: &str,
) -> Result<(), SessionError> {
    for (name, value) in headers.iter_mut() {
        if let HeaderSource::Env(variable) = value {
            let used_by = format!("{table}.{name}");
            let text = read_env(variable, &used_by)?;
            if HeaderValue::from_str(&text).is_err() {
                return Err(SessionError::InvalidEnv {
                    variable: variable.clone(),
                    used_by,
                });
            }
            *value = HeaderSource::Literal(text);
        }
    }
    Ok(())
}

/// The value of environment variable `variable`, which `used_by` needs.
fn read_env(variable: &str, used_by: &str) -> Result<String, SessionError> {
    std::env::var(variable).map_err(|_| SessionError::MissingEnv {
        variable: variable.to_owned(),
        used_by: used_by.to_owned(),
    })
}
