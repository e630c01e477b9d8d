//! The walls a run's pages meet (sign-in walls, bot challenges; told from pages by
//! [`crate::wall`]). A host whose page was a wall is paused for the rest of the run: its other
//! pages would meet the same wall, so they are not asked, and fail with the wall's class. A
//! failed page keeps its chain where it was and its link queued, so the run after a fresh
//! sign-in goes on from there. The summary says what was met and what to do.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::hosts::host_of;
use super::session::Login;
use super::{Failure, FailureClass};
use crate::profile::{Profile, SignedOut};
use crate::redact::redact;
use crate::wall::{Wall, WallKind, wall_of_status};

/// The walls of one run, by host; shared by the page source and the download stage, so a
/// wall met by either pauses the host for both.
pub struct Walls {
    rules: SignedOut,
    /// The run carries a session (cookies): a 403 means it ended.
    has_session: bool,
    seen: Mutex<Seen>,
    /// How the run signs in again after a sign-in wall (`[session.login]`).
    login: Option<Arc<Login>>,
}

#[derive(Default)]
struct Seen {
    /// Hosts that served a page that was no wall, or an image, this run.
    let_in: HashSet<String>,
    /// Hosts paused by a wall, with the first one met.
    met: BTreeMap<String, Met>,
    /// Hosts the run signed in again for, that have not let a request through since: another
    /// wall there means signing in does not help.
    renewed_unproven: HashSet<String>,
    /// Times the run signed in again: the session's generation.
    renewals: u64,
    /// Requests under way, by URL: the generation they were sent with. A wall met by a request
    /// sent before the run last signed in again says nothing of the new session.
    sent_with: HashMap<String, u64>,
}

/// Requests remembered in [`Seen::sent_with`] at most: a request that ends neither let in nor
/// checked (a cancelled one) leaves its entry, and these are forgotten together (then counted
/// as sent with the current session, as before generations were kept).
const MAX_REMEMBERED: usize = 65_536;

impl Seen {
    /// Whether the request for `url` went out before the run last signed in again.
    fn is_stale(&self, url: &url::Url) -> bool {
        self.sent_with
            .get(url.as_str())
            .is_some_and(|sent| *sent < self.renewals)
    }

    /// `url` is asked for now, with the current session.
    fn sending(&mut self, url: &url::Url) {
        if self.sent_with.len() >= MAX_REMEMBERED {
            self.sent_with.clear();
        }
        self.sent_with.insert(url.to_string(), self.renewals);
    }
}

struct Met {
    wall: Wall,
    url: url::Url,
    /// Requests that met a wall on the host.
    walls: u64,
    /// Pages of the host not asked since.
    pages_held: u64,
    /// Images of the host not asked since (or that met the wall): left pending.
    images_held: u64,
}

/// What a request of the host is for, as far as counting what a wall held back goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Page,
    Image,
}

impl Walls {
    /// The walls of a run whose pages are told from walls by `rules`; `has_session`: the run
    /// carries a session (cookies), so a 403 means it ended.
    pub fn new(rules: SignedOut, has_session: bool) -> Self {
        Self {
            rules,
            has_session,
            seen: Mutex::default(),
            login: None,
        }
    }

    /// The walls of a run of `profile`.
    pub fn of(profile: &Profile) -> Self {
        let session = &profile.session;
        Self::new(
            session.signed_out.clone(),
            session.cookies.is_some() || session.storage_state.is_some(),
        )
    }

    /// The same walls, signing in again by `login` when one is met.
    pub fn with_login(mut self, login: Arc<Login>) -> Self {
        self.has_session = true;
        self.login = Some(login);
        self
    }

    /// After a request for `url` met a wall (or before one is sent to a host that showed
    /// one): signs in again, when the run can and the last time it did for this host got a
    /// request through, and reopens the host. `true`: the request is worth sending again (the
    /// host is open, by this sign-in or by one made since the request went out), and it is
    /// remembered as sent with the new session.
    pub async fn renew(&self, url: &url::Url) -> bool {
        let Some(login) = &self.login else {
            return false;
        };
        let host = host_of(url);
        let _turn = login.turn.lock().await;
        let open = {
            let mut seen = self.seen();
            let open = if seen.is_stale(url) {
                Some(true)
            } else {
                match seen.met.get(&host) {
                    None => Some(true),
                    Some(met) if met.wall.kind == WallKind::Blocked => Some(false),
                    Some(_) if seen.renewed_unproven.contains(&host) => Some(false),
                    Some(_) => None,
                }
            };
            if open == Some(true) {
                seen.sending(url);
            }
            open
        };
        match open {
            Some(open) => open,
            None => self.sign_in_again(login, url).await,
        }
    }

    /// Signs in again for `url`'s host, within the login's turn.
    async fn sign_in_again(&self, login: &Login, url: &url::Url) -> bool {
        match login.sign_in().await {
            Ok(()) => {
                let mut seen = self.seen();
                let host = host_of(url);
                seen.met.remove(&host);
                seen.renewed_unproven.insert(host);
                seen.renewals += 1;
                seen.sending(url);
                true
            }
            Err(error) => {
                tracing::warn!("signing in again did not work: {error}");
                false
            }
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `url` may be asked for: not when its host showed a wall this run that signing
    /// in again does not open (the failure to record, with the wall's class, then).
    pub async fn admit(&self, url: &url::Url, asked: Asked) -> Result<(), Failure> {
        let walled = self.seen().met.contains_key(&host_of(url));
        // A request that comes while the host is walled signs the run in again itself, or
        // waits for the sign-in under way: it is not held back for a wall already passed.
        if walled && self.renew(url).await {
            return Ok(());
        }
        let mut seen = self.seen();
        let Some(met) = seen.met.get_mut(&host_of(url)) else {
            seen.sending(url);
            return Ok(());
        };
        match asked {
            Asked::Page => met.pages_held += 1,
            Asked::Image => met.images_held += 1,
        }
        Err(Failure::new(
            met.wall.kind.class(),
            format!(
                "not asked: the host answered `{}` with a {} earlier in this run ({})",
                redact(&met.url),
                describe_kind(met.wall.kind),
                met.wall.reason
            ),
        ))
    }

    /// The host of `url` answered with what was asked for: a later 403 from it means the
    /// session ended.
    pub fn let_in(&self, url: &url::Url) {
        let host = host_of(url);
        let mut seen = self.seen();
        seen.sent_with.remove(url.as_str());
        seen.renewed_unproven.remove(&host);
        if !seen.let_in.contains(&host) {
            seen.let_in.insert(host);
        }
    }

    /// `failed`, the failure of a request for `url`, read for a wall: a 401, a 403 where the
    /// run was let in before, a status the profile names, or a failure already classed as a
    /// wall (by the page's analysis). A wall pauses the host and comes back with its class;
    /// a sign-in wall met by a request sent before the run last signed in again comes back
    /// with its class but pauses nothing: the new session has not been refused.
    pub fn checked(&self, url: &url::Url, asked: Asked, failed: Failure) -> Failure {
        let wall = match failed.class {
            FailureClass::Http(status) => {
                let let_in = self.has_session || self.seen().let_in.contains(&host_of(url));
                wall_of_status(&self.rules, status, let_in)
            }
            FailureClass::LoginRequired => Some(Wall {
                kind: WallKind::LoginRequired,
                reason: failed.detail.clone(),
            }),
            FailureClass::Blocked => Some(Wall {
                kind: WallKind::Blocked,
                reason: failed.detail.clone(),
            }),
            _ => None,
        };
        match wall {
            Some(wall) if wall.kind == WallKind::LoginRequired && self.seen().is_stale(url) => {
                Failure::new(wall.kind.class(), wall.reason)
            }
            Some(wall) => self.met(url, asked, wall),
            None => {
                self.seen().sent_with.remove(url.as_str());
                failed
            }
        }
    }

    /// Records `wall`, met at `url`, pausing its host; the request's failure.
    fn met(&self, url: &url::Url, asked: Asked, wall: Wall) -> Failure {
        let host = host_of(url);
        let failure = Failure::new(wall.kind.class(), wall.reason.clone());
        let mut seen = self.seen();
        let met = seen.met.entry(host.clone()).or_insert_with(|| {
            tracing::warn!(url = %redact(url), host, reason = %wall.reason, "a {}: the host's other pages and images are not asked this run", describe_kind(wall.kind));
            Met {
                wall,
                url: url.clone(),
                walls: 0,
                pages_held: 0,
                images_held: 0,
            }
        });
        met.walls += 1;
        if asked == Asked::Image {
            met.images_held += 1;
        }
        failure
    }

    /// Whether a wall was met this run.
    pub fn any(&self) -> bool {
        !self.seen().met.is_empty()
    }

    /// The summary's lines: one per host that showed a wall, with what to do, and how often
    /// the run signed in again.
    pub fn describe(&self) -> Vec<(String, String)> {
        let seen = self.seen();
        let renewed = (seen.renewals > 0).then(|| {
            (
                "session".to_owned(),
                format!(
                    "signed in again {} times after the site signed the run out",
                    seen.renewals
                ),
            )
        });
        seen.met
            .iter()
            .map(|(host, met)| {
                let todo = match met.wall.kind {
                    WallKind::LoginRequired => {
                        "sign in again (fresh cookies or storage state), then run the same command: it goes on where it stopped"
                    }
                    WallKind::Blocked => {
                        "the site took the run for a robot: slow down ([crawl] per_host, delay) or try later; the same command goes on where it stopped"
                    }
                };
                (
                    format!("{} on {host}", describe_kind(met.wall.kind)),
                    format!(
                        "at `{}`: {}; {} requests met it; {} pages and {} images left for the next run. {todo}",
                        redact(&met.url),
                        met.wall.reason,
                        met.walls,
                        met.pages_held,
                        met.images_held
                    ),
                )
            })
            .chain(renewed)
            .collect()
    }
}

fn describe_kind(kind: WallKind) -> &'static str {
    match kind {
        WallKind::LoginRequired => "sign-in wall",
        WallKind::Blocked => "bot challenge",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> Failure {
        Failure::new(FailureClass::Http(status), format!("HTTP {status}"))
    }

    fn url(text: &str) -> url::Url {
        url::Url::parse(text).unwrap()
    }

    #[tokio::test]
    async fn a_wall_pauses_its_host_and_only_its_host() {
        let walls = Walls::new(SignedOut::default(), false);
        let (a, b) = (url("http://a.test/p/2"), url("http://b.test/p/2"));
        let checked = walls.checked(&a, Asked::Page, http(403));
        assert_eq!(checked.class.name(), "http_403");
        walls.let_in(&a);
        let checked = walls.checked(&a, Asked::Page, http(403));
        assert_eq!(
            checked.class.name(),
            "login_required",
            "a 403 after the host let the run in"
        );
        let held = walls.admit(&url("http://a.test/p/3"), Asked::Page).await;
        assert_eq!(
            held.map_err(|f| f.class.name()),
            Err("login_required".into())
        );
        let held = walls.admit(&url("http://a.test/i.jpg"), Asked::Image).await;
        assert_eq!(
            held.map_err(|f| f.class.name()),
            Err("login_required".into())
        );
        assert_eq!(walls.admit(&b, Asked::Page).await, Ok(()));
        let lines = walls.describe();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].0, "sign-in wall on a.test:80");
        assert!(
            lines[0]
                .1
                .contains("1 requests met it; 1 pages and 1 images left"),
            "{}",
            lines[0].1
        );
    }

    #[tokio::test]
    async fn a_sign_in_wall_met_by_a_request_sent_before_the_last_sign_in_pauses_nothing() {
        let walls = Walls::new(SignedOut::default(), true);
        let (before, after) = (url("http://a.test/p/1"), url("http://a.test/p/2"));
        walls.admit(&before, Asked::Page).await.unwrap();
        // The run signs in again (another request met the wall) while `before` is under way.
        walls.seen().renewals += 1;
        walls.admit(&after, Asked::Page).await.unwrap();
        let stale = walls.checked(&before, Asked::Page, http(403));
        assert_eq!(stale.class, FailureClass::LoginRequired);
        assert!(!walls.any(), "the old session's wall pauses nothing");
        assert_eq!(
            walls.admit(&url("http://a.test/p/3"), Asked::Page).await,
            Ok(())
        );
        let current = walls.checked(&after, Asked::Page, http(403));
        assert_eq!(current.class, FailureClass::LoginRequired);
        assert!(walls.any(), "the new session's wall pauses the host");
        let held = walls.admit(&url("http://a.test/p/4"), Asked::Page).await;
        assert_eq!(held.map_err(|f| f.class), Err(FailureClass::LoginRequired));
    }

    #[test]
    fn a_403_is_a_wall_from_the_first_request_when_the_run_carries_a_session() {
        let walls = Walls::new(SignedOut::default(), true);
        let checked = walls.checked(&url("http://a.test/"), Asked::Image, http(403));
        assert_eq!(checked.class, FailureClass::LoginRequired);
        assert!(walls.any());
    }
}
