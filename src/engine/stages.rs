//! What a driver fetches a profile's pages through, built in one place for a one-process run and
//! a worker: the walls (signed in where the profile says how), the hosts' turns, robots.txt,
//! the page source (plain HTTP or the browser) and the API fetcher of a `json_cursor` chain.
//! The drivers differ only in what [`Driver`] says.

use std::sync::Arc;

use super::source::PageSource;
use crate::fetch::PageFetcher;
use crate::fetch::api::ApiFetcher;
use crate::net::robots::{RobotsGate, RobotsStore};
use crate::net::session::{LoginError, Session};
use crate::net::walls::Walls;
use crate::net::{Hosts, HttpClient};
use crate::profile::{Pagination, Profile, RobotsMode, SignedOut};
use crate::render::RenderError;

/// How one driver's stages differ from the other's.
pub struct Driver {
    /// How often each fetcher tries a request again by itself: the run's retries in one
    /// process; never for a worker, which tries again in a job-wide turn of the host instead.
    pub retries: u32,
    /// Where robots.txt answers outlive the run (one process: its state); a worker asks each
    /// origin once for itself.
    pub robots_store: Option<Arc<dyn RobotsStore>>,
}

/// The run's sign-in walls: a host that answers a page or an image with a sign-in wall or a
/// challenge is paused, or signed in again where the session says how. Signed in here, before
/// any page, when it does.
pub async fn signed_in(
    rules: SignedOut,
    session: &Session,
    client: &HttpClient,
) -> Result<Arc<Walls>, LoginError> {
    let mut walls = Walls::new(rules, session.cookies.is_some());
    if let Some(login) = session.login(client) {
        login.sign_in().await?;
        walls = walls.with_login(login);
    }
    Ok(Arc::new(walls))
}

/// The page stages of a run of `profile`.
pub struct Stages {
    /// Where the pages come from.
    pub source: PageSource,
    /// The API of a `json_cursor` chain.
    pub api: Option<ApiFetcher>,
}

impl Stages {
    /// Starts the stages of `profile` over `client` (the browser only where the profile
    /// renders), each request in a turn of its host under `[crawl]`'s per-host limits (the
    /// source's [`PageSource::hosts`]), asking robots.txt first unless the profile (or
    /// `--robots ignore`) says it is ignored.
    pub async fn start(
        profile: &Profile,
        client: &HttpClient,
        session: &Session,
        walls: Arc<Walls>,
        driver: Driver,
    ) -> Result<Self, RenderError> {
        let hosts = Arc::new(Hosts::for_crawl(&profile.crawl));
        let robots = robots_gate(profile, client, &hosts, driver.robots_store);
        let mut fetcher =
            PageFetcher::with_hosts(client.clone(), driver.retries, Arc::clone(&hosts));
        let api = match &profile.pagination {
            Pagination::JsonCursor(cursor) => Some(ApiFetcher::new(
                client.clone(),
                driver.retries,
                hosts,
                &cursor.headers,
                session.token.clone(),
            )),
            _ => None,
        };
        let api = match (&robots, api) {
            (Some(gate), Some(api)) => Some(api.with_robots(Arc::clone(gate))),
            (_, api) => api,
        };
        if let Some(gate) = robots {
            fetcher = fetcher.with_robots(gate);
        }
        let source = PageSource::start(profile, fetcher).await?.with_walls(walls);
        Ok(Self { source, api })
    }
}

/// The gate asking robots.txt before pages and API requests, its answers kept in `store`;
/// `None` (with a warning) when it is ignored.
fn robots_gate(
    profile: &Profile,
    client: &HttpClient,
    hosts: &Arc<Hosts>,
    store: Option<Arc<dyn RobotsStore>>,
) -> Option<Arc<RobotsGate>> {
    let settings = &profile.download;
    match settings.politeness.robots {
        RobotsMode::Obey => {
            let gate = RobotsGate::new(client.clone(), Arc::clone(hosts), &settings.user_agent);
            Some(Arc::new(match store {
                Some(store) => gate.with_store(store),
                None => gate,
            }))
        }
        RobotsMode::Ignore => {
            tracing::warn!(
                "robots.txt is ignored ([politeness] robots = \"ignore\" or --robots ignore): pages and API requests it disallows are fetched"
            );
            None
        }
    }
}
