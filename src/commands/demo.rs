//! `scrape demo`: the bundled gallery served on loopback, and the demo profile run on it.

use anyhow::Context;
use scrape::demo::DemoSite;
use scrape::job::JobOptions;
use tokio_util::sync::CancellationToken;

use super::load_profile;
use crate::Outcome;
use crate::cli::DemoArgs;

pub async fn demo(
    args: DemoArgs,
    quiet: bool,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    let metrics = super::bind_metrics(args.metrics)?;
    // The profile's port is the site's usual place: image URLs, and so resume, depend on it.
    let port = profile.start.first().and_then(|u| u.port()).unwrap_or(0);
    let site = match DemoSite::start(&args.site, port).await {
        Ok(site) => site,
        Err(e) if port != 0 => {
            eprintln!(
                "warning: port {port} is taken ({e}); serving on another port, so a later run cannot resume this one"
            );
            DemoSite::start(&args.site, 0)
                .await
                .context("cannot start the demo site")?
        }
        Err(e) => return Err(e).context("cannot start the demo site"),
    };
    let origin = site.origin();
    if args.serve {
        eprintln!("demo site at {origin}/ (Ctrl-C to stop)");
        cancel.cancelled().await;
        site.stop().await;
        return Ok(Outcome::Done);
    }
    for start in &mut profile.start {
        let path = start[url::Position::BeforePath..].to_owned();
        *start = url::Url::parse(&format!("{origin}{path}")).context("demo start URL")?;
    }
    // The pages rendered in the browser are the ones reached through links to a level that
    // renders there (the albums, JavaScript apps); without Chromium, the rest still runs.
    let rendered: Vec<&str> = profile
        .levels
        .iter()
        .filter(|(_, level)| level.render != scrape::profile::RenderMode::Static)
        .map(|(name, _)| name.as_str())
        .collect();
    let rendered = rendered.join(", ");
    if !rendered.is_empty()
        && let Err(e) = scrape::render::find_executable(profile.browser.executable.as_deref())
    {
        eprintln!(
            "warning: {e}; the demo runs without its pages rendered in the browser (level `{rendered}`)"
        );
        profile.follow.clear();
        profile.levels.clear();
    } else if !quiet && !rendered.is_empty() {
        eprintln!(
            "pages of level `{rendered}` are rendered in headless Chromium (JavaScript apps: photos from a JSON API, \"Load more\" clicked); the others are fetched over plain HTTP"
        );
    }
    if !quiet {
        eprintln!(
            "demo site at {origin}/; profile {}; output {}",
            args.profile.display(),
            args.out.display()
        );
    }
    let options = JobOptions {
        out: args.out,
        fresh: args.fresh,
        progress: if quiet {
            scrape::telemetry::ProgressMode::Off
        } else {
            args.progress
        },
        plain_every: std::time::Duration::from_secs(2),
        network: scrape::replay::Network::Live,
        download: true,
        metrics,
        recheck_images: false,
    };
    let outcome =
        super::run::execute(scrape::job::JobSpec::crawl(profile), options, quiet, cancel).await;
    site.stop().await;
    outcome
}
