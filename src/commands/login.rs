//! `scrape login`: sign in to a site once, in Chromium, and save what the browser holds then
//! (its cookies, the localStorage of the site) as the storage state the profile's
//! `[session] storage_state` names, for every run after. With a window, a person signs in and
//! presses Enter (or the page shows the profile's `success_selector`); `--headless` fills and
//! sends the `[session.login]` fields itself, for machines without a display.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use scrape::net::session::login_steps;
use scrape::net::session::storage_state::storage_state_json;
use scrape::profile::{LoginSuccess, SessionFile};
use scrape::redact::redact;
use scrape::render::login::{BrowserSignIn, sign_in};
use scrape::render::{Blocking, BrowserSettings};

use super::load_profile;
use crate::cli::LoginArgs;
use crate::{Outcome, UsageError};

pub async fn login(args: &LoginArgs) -> anyhow::Result<Outcome> {
    let profile = load_profile(&args.profile)?;
    let target = match (&args.out, &profile.session.storage_state) {
        (Some(out), _) => out.clone(),
        (None, Some(SessionFile::File(path))) => path.clone(),
        (None, Some(SessionFile::Env(variable))) => {
            return Err(UsageError(format!(
                "the profile reads its storage state from environment variable `{variable}`: name a file to write with --out"
            ))
            .into());
        }
        (None, None) => {
            return Err(UsageError(
                "the profile names no `[session] storage_state` file to write: add one, or name a file with --out".to_owned(),
            )
            .into());
        }
    };
    let window = !args.headless;
    if window
        && std::env::var_os("DISPLAY").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none()
    {
        return Err(UsageError(
            "there is no display to show a browser window on: sign in with --headless (it fills the `[session.login]` fields)".to_owned(),
        )
        .into());
    }
    let Some(start) = profile.start.first() else {
        return Err(UsageError("the profile has no start URL to sign in at".to_owned()).into());
    };
    // A person signing in needs no field values: only --headless reads them.
    let steps = match args.headless {
        true => login_steps(&profile)?.map(|(steps, _)| steps),
        false => profile.session.login.clone(),
    };
    let page = steps
        .as_ref()
        .map_or_else(|| start.clone(), |steps| steps.page(start));
    let no_success = LoginSuccess::default();
    let (fields, form, success) = match (&steps, args.headless) {
        (Some(steps), true) => (
            steps
                .fields
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.literal()?.to_owned())))
                .collect(),
            steps.form.as_ref().map(|f| f.text.clone()),
            &steps.success,
        ),
        (None, true) => {
            return Err(UsageError(
                "--headless fills the `[session.login]` fields, and the profile has none: add them, or sign in in a window (without --headless)".to_owned(),
            )
            .into());
        }
        (Some(steps), false) => (Vec::new(), None, &steps.success),
        (None, false) => (Vec::new(), None, &no_success),
    };
    let settings = BrowserSettings {
        executable: profile.browser.executable.clone(),
        page_timeout: profile.browser.page_timeout,
        block: if window {
            Blocking::NONE
        } else {
            Blocking::default()
        },
        window,
        ..BrowserSettings::default()
    };
    // Without a window nobody presses Enter: the page must show the visitor signed in.
    let done = window.then(|| {
        eprintln!(
            "A browser window shows `{}`: sign in there, then press Enter here.",
            redact(&page)
        );
        let (pressed, done) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if std::io::stdin().read_line(&mut line).is_ok() {
                let _ = pressed.send(());
            }
        });
        done
    });
    let sign_in_steps = BrowserSignIn {
        page,
        fields,
        form,
        success,
        patience: (!window).then_some(profile.browser.page_timeout),
    };
    let state = sign_in(&settings, sign_in_steps, done).await?;
    write_private(&target, storage_state_json(&state).as_bytes())
        .with_context(|| format!("cannot write the storage state to `{}`", target.display()))?;
    let items: usize = state.origins.iter().map(|o| o.items.len()).sum();
    eprintln!(
        "signed in: {} cookies and {items} localStorage items saved to {} (readable by you alone)",
        state.cookies.len(),
        target.display()
    );
    Ok(Outcome::Done)
}

/// Writes `bytes` to `path` readable by its owner alone, replacing it whole (a temporary file
/// renamed over it), so a reader never sees half of it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut temp = tempfile::NamedTempFile::new_in(&folder)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
