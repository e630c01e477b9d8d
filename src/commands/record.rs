//! `scrape record`: a few pages of a profile crawled live, every request and response kept in
//! `DIR/site.har` for offline replays (`scrape --replay`, `scrape test`).
//!
//! The crawl's state lives in a temporary folder: a recording run leaves nothing but the HAR
//! file. Image bodies are left out unless `--images keep` (the download stage runs and its
//! requests are recorded) or `--images placeholder` (a tiny valid image of the type the URL
//! names, the profile's minimum size, is recorded for each image found).

use std::sync::Arc;

use anyhow::Context;
use scrape::job::{JobOptions, JobSpec, run_job};
use scrape::profile::{HeaderSource, Pagination, Profile};
use scrape::replay::har::HarError;
use scrape::replay::{Network, OutgoingRequest, RecordedResponse, Recorder, TokenSource};
use scrape::state::State;
use scrape::telemetry::ProgressMode;
use scrape::verify::ImageFormat;
use tokio_util::sync::CancellationToken;

use super::{load_profile, override_starts};
use crate::cli::{ImageBodies, RecordArgs};
use crate::{Outcome, UsageError};

/// The file a recording folder holds.
pub const RECORDING: &str = "site.har";

pub async fn record(
    args: RecordArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    override_starts(&mut profile, &args.start)?;
    if args.pages == 0 {
        return Err(UsageError("--pages must be at least 1".into()).into());
    }
    // A folder that cannot take the recording fails now, not after the crawl.
    std::fs::create_dir_all(&args.out)
        .and_then(|()| tempfile::NamedTempFile::new_in(&args.out).map(drop))
        .map_err(|source| HarError::Write {
            path: args.out.join(RECORDING),
            source,
        })?;
    profile.max_pages = Some(profile.max_pages.map_or(args.pages, |m| m.min(args.pages)));
    let verify = profile.download.verify.clone();
    let mut recorder = Recorder::with_secrets(env_secrets(&profile));
    if let (Some(token), Some(start)) = (&profile.session.token, profile.start.first()) {
        recorder = recorder.redacting_tokens(TokenSource {
            method: token.method.as_str().to_owned(),
            url: token.endpoint(start),
            path: token.token.clone(),
        });
    }
    let recorder = Arc::new(recorder);
    let work = tempfile::tempdir().context("cannot make a temporary folder for the crawl")?;
    let options = JobOptions {
        out: work.path().to_owned(),
        fresh: true,
        progress: if quiet {
            ProgressMode::Off
        } else {
            ProgressMode::Auto
        },
        plain_every: std::time::Duration::from_secs(10),
        network: Network::Record(Arc::clone(&recorder)),
        download: args.images == ImageBodies::Keep,
        metrics: None,
        recheck_images: false,
    };
    let outcome = run_job(JobSpec::crawl(profile), options, cancel)
        .await
        .context("the recording crawl did not finish")?;
    if outcome.summary.interrupted {
        return Ok(Outcome::Interrupted);
    }
    if args.images == ImageBodies::Placeholder {
        let state = State::open_existing(work.path())?;
        let mut urls = Vec::new();
        state.for_each_image(|url, _| {
            urls.push(url.to_owned());
            Ok(())
        })?;
        let (width, height) = (verify.min_width.max(1), verify.min_height.max(1));
        let mut skipped = 0;
        for url in urls {
            match placeholder(&url, width, height) {
                Some((request, response)) => recorder.record(&request, &response),
                None => skipped += 1,
            }
        }
        if skipped > 0 && !quiet {
            eprintln!(
                "warning: {skipped} images have no placeholder (only JPEG, PNG and GIF URLs get one)"
            );
        }
    }
    let path = args.out.join(RECORDING);
    let entries = recorder.write(&path)?;
    let after = &outcome.summary.after;
    if !quiet {
        eprintln!(
            "recorded {entries} requests ({} pages, {} images found) to {}",
            after.pages_done,
            after.images_found,
            path.display()
        );
        if after.pages_failed > 0 {
            eprintln!(
                "warning: {} pages failed; their error responses are in the recording",
                after.pages_failed
            );
        }
    }
    Ok(if after.pages_failed > 0 {
        Outcome::DoneWithFailures
    } else {
        Outcome::Done
    })
}

/// The values of the profile's `env:` settings (headers, the token request's body, the
/// sign-in fields), which the recording must not contain.
fn env_secrets(profile: &Profile) -> Vec<String> {
    let mut names = Vec::new();
    let mut headers: Vec<&(String, HeaderSource)> = profile.download.headers.iter().collect();
    if let Pagination::JsonCursor(cursor) = &profile.pagination {
        headers.extend(&cursor.headers);
    }
    if let Some(login) = &profile.session.login {
        headers.extend(&login.fields);
    }
    if let Some(token) = &profile.session.token {
        headers.extend(&token.headers);
        if let Some(body) = &token.body {
            env_names_in(body.expose(), &mut names);
        }
    }
    for (_, source) in headers {
        if let HeaderSource::Env(name) = source {
            names.push(name.clone());
        }
    }
    // A sign-in form sends its values form-encoded: both spellings are secrets.
    names
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .flat_map(|value| {
            let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
            [Some(value.clone()), (encoded != value).then_some(encoded)]
        })
        .flatten()
        .collect()
}

/// The variable names of the `"env:NAME"` strings in `json`.
fn env_names_in(json: &serde_json::Value, names: &mut Vec<String>) {
    match json {
        serde_json::Value::String(s) => {
            if let Some(name) = s.strip_prefix("env:") {
                names.push(name.to_owned());
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| env_names_in(v, names)),
        serde_json::Value::Object(map) => map.values().for_each(|v| env_names_in(v, names)),
        _ => {}
    }
}

/// A GET of image `url` answered by a tiny valid image of the type its extension names.
fn placeholder(url: &str, width: u32, height: u32) -> Option<(OutgoingRequest, RecordedResponse)> {
    let url = url::Url::parse(url).ok()?;
    let extension = url.path().rsplit_once('.').map(|(_, e)| e)?;
    let format = ImageFormat::from_name(extension)?;
    // Distinct bytes per URL, so a replay does not see every image as a duplicate.
    let seed = url
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let body = scrape::demo::imagegen::generate(format, seed, width, height)?;
    Some((
        OutgoingRequest {
            method: "GET".into(),
            url,
            headers: Vec::new(),
            body: None,
        },
        RecordedResponse {
            status: 200,
            headers: vec![("content-type".into(), format.content_type().into())],
            body,
        },
    ))
}
