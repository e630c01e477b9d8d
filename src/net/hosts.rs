//! Per-host politeness: a window of requests in flight that adapts to the host, a pace between
//! request starts, and back-off that slows only the host that complains. The crawl (pages and
//! API calls) and the download stage each keep one [`Hosts`] with their own caps, and use it
//! the same way: [`Host::acquire`] a [`HostPermit`], send, then report how it went on the permit.
//!
//! The window works like TCP's congestion window. It starts polite ([`START_WINDOW`], or the cap
//! if that is lower), grows by one per success while it is below the threshold (doubling every
//! round trip) and by one per window after that, as long as answers come back in healthy time
//! (within twice the fastest answer seen, plus [`LATENCY_SLACK`]) and the window is in use. A
//! congestion signal (429, 503, a time-out, a reset) halves it, once per event: requests that
//! started before the last decrease do not decrease it again, however many of them fail. It never
//! goes above the cap (`per_host`) nor below one. A pinned window (`adaptive = false`) stays at
//! the cap.
//!
//! The pace is a minimum interval between request starts, the configured floor (`per_host_rps`)
//! at first. A 429 or 503 doubles it (once per event, like the window) and `Retry-After` pauses
//! the host; each success halves it again, back to the floor. A time-out or a reset only shrinks
//! the window: a host that stops answering is asked one request at a time, and goes back to
//! full speed within a few round trips once it answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::retry::MAX_RETRY_AFTER;
use super::{Failure, FailureClass};

/// The window a new host starts with, when the cap allows it.
pub const START_WINDOW: usize = 8;
/// Latency above twice the fastest answer plus this much stops the window's growth.
const LATENCY_SLACK: Duration = Duration::from_millis(50);
/// The interval a host is slowed to at least after its first 429 or 503.
const THROTTLED_FLOOR: Duration = Duration::from_millis(100);
/// The slowest pace back-off goes to.
const SLOWEST: Duration = Duration::from_secs(30);
/// Window growth is logged at most this often per host (decreases always are).
const LOG_EVERY: Duration = Duration::from_secs(1);
/// Hosts shown in snapshots (`scrape status`, metrics): the busiest ones.
pub const SHOWN_HOSTS: usize = 20;

/// How a stage limits each host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostLimits {
    /// Requests in flight to one host at most: the window's cap.
    pub per_host: usize,
    /// Whether the window adapts between one and `per_host`; pinned at `per_host` if not.
    pub adaptive: bool,
    /// Request starts per second to one host at most (`None`: no floor on the interval).
    pub rate: Option<f64>,
}

/// Every host seen by one stage in a run.
pub struct Hosts {
    /// The stage, as logs and snapshots name it: `download` or `crawl`.
    stage: &'static str,
    limits: HostLimits,
    floor: Duration,
    map: Mutex<HashMap<String, Arc<Host>>>,
    /// Requests in flight over every host, when the stage limits them ([`Hosts::with_total`]).
    total: Option<Arc<Semaphore>>,
}

/// One host's window and pace.
pub struct Host {
    /// `host:port`.
    key: String,
    stage: &'static str,
    /// The window's free places: the window minus the requests in flight, less any debt.
    permits: Arc<Semaphore>,
    state: Mutex<HostState>,
    floor: Duration,
    /// The stage's places over every host, taken once the host's turn has come.
    total: Option<Arc<Semaphore>>,
}

struct HostState {
    window: Window,
    /// Permits to take out of circulation as requests end, after a decrease found them in use.
    debt: usize,
    in_flight: usize,
    /// The most requests in flight at once since the window last decreased: how much of the
    /// window is in use.
    peak: usize,
    interval: Duration,
    /// Set by the site itself (robots.txt `Crawl-delay`): the pace never gets faster.
    min_interval: Duration,
    next_start: Instant,
    paused_until: Instant,
    /// When the window's growth was last logged.
    logged: Option<Instant>,
}

/// The congestion window of one host: pure arithmetic, the clock passed in. Workers share one
/// per host through Redis, as JSON (`size` and `epoch` are read there).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    size: usize,
    /// Below it the window grows by one per success, from it on by one per window.
    threshold: usize,
    /// Successes counted towards the next step of growth above the threshold.
    credit: usize,
    cap: usize,
    adaptive: bool,
    /// Decreases so far: a request remembers the count when it went out, and its failure
    /// decreases the window only if no decrease came since (else it is the same event).
    epoch: u64,
    /// The fastest answer seen.
    fastest: Option<Duration>,
}

impl Window {
    /// A window capped at `cap`: adaptive from [`START_WINDOW`], or pinned at the cap.
    pub fn new(cap: usize, adaptive: bool) -> Self {
        let cap = cap.max(1);
        let size = if adaptive { START_WINDOW.min(cap) } else { cap };
        Self {
            size,
            threshold: cap,
            credit: 0,
            cap,
            adaptive,
            epoch: 0,
            fastest: None,
        }
    }

    /// Requests allowed in flight.
    pub fn size(&self) -> usize {
        self.size.clamp(1, self.cap)
    }

    /// A request answered in `latency`, with at most `in_use` requests in flight at once lately:
    /// grows the window if the answer came in healthy time and the window was in use.
    pub fn succeeded(&mut self, latency: Duration, in_use: usize) {
        let fastest = *self.fastest.get_or_insert(latency);
        self.fastest = Some(fastest.min(latency));
        if !self.adaptive || latency > fastest * 2 + LATENCY_SLACK {
            return;
        }
        // A window not half used says nothing about whether the host could take a larger one.
        if in_use * 2 < self.size() {
            return;
        }
        if self.size < self.threshold {
            self.size += 1;
        } else {
            self.credit += 1;
            if self.credit >= self.size {
                self.credit = 0;
                self.size += 1;
            }
        }
        self.size = self.size.min(self.cap);
    }

    /// Decreases so far, for a request going out now to remember.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A request that went out at `epoch` met congestion: halves the window, unless the window
    /// decreased since the request went out (the same event). Returns whether this was a new
    /// event.
    pub fn congested(&mut self, epoch: u64) -> bool {
        if epoch != self.epoch {
            return false;
        }
        self.epoch += 1;
        if self.adaptive {
            self.size = (self.size / 2).max(1);
            self.threshold = self.size;
            self.credit = 0;
        }
        true
    }
}

/// Holding this is the right to have one request to the host in flight. Report the outcome
/// with [`HostPermit::succeeded`] or [`HostPermit::failed`]; dropping it says nothing.
pub struct HostPermit {
    host: Arc<Host>,
    permit: Option<OwnedSemaphorePermit>,
    /// Its place among the stage's requests over every host, if the stage limits them.
    place: Option<OwnedSemaphorePermit>,
    started: Instant,
    /// The window's decreases when the request went out.
    epoch: u64,
}

impl Hosts {
    /// The hosts of `stage` (`download` or `crawl`), each limited by `limits`.
    pub fn new(stage: &'static str, limits: HostLimits) -> Self {
        let floor = limits
            .rate
            .filter(|r| *r > 0.0)
            .map_or(Duration::ZERO, |r| Duration::from_secs_f64(1.0 / r));
        Self {
            stage,
            limits: HostLimits {
                per_host: limits.per_host.clamp(1, Semaphore::MAX_PERMITS),
                ..limits
            },
            floor,
            map: Mutex::new(HashMap::new()),
            total: None,
        }
    }

    /// At most `total` requests in flight over every host. A request takes its place only
    /// once its host's turn has come, so the requests of a host that is slow, silent or held
    /// back wait without a place, and other hosts go on at full speed.
    pub fn with_total(mut self, total: usize) -> Self {
        self.total = Some(Arc::new(Semaphore::new(
            total.clamp(1, Semaphore::MAX_PERMITS),
        )));
        self
    }

    /// The crawl's hosts, limited as the profile's `[crawl]` table says (page fetches, API
    /// calls and renders, in one process or in each worker): `per_host` each, `concurrency`
    /// over all of them.
    pub fn for_crawl(crawl: &crate::profile::CrawlSettings) -> Self {
        Self::new(
            "crawl",
            HostLimits {
                per_host: crawl.per_host,
                adaptive: crawl.adaptive,
                rate: crawl.per_host_rps,
            },
        )
        .with_total(crawl.concurrency)
    }

    /// No limit worth the name: for commands that fetch one page at a time.
    pub fn unlimited() -> Self {
        Self::new(
            "crawl",
            HostLimits {
                per_host: Semaphore::MAX_PERMITS,
                adaptive: false,
                rate: None,
            },
        )
    }

    /// The host of `url` (by host name and port).
    pub fn get(&self, url: &url::Url) -> Arc<Host> {
        let key = host_of(url);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(host) = map.get(&key) {
            return Arc::clone(host);
        }
        let window = Window::new(self.limits.per_host, self.limits.adaptive);
        let now = Instant::now();
        let host = Arc::new(Host {
            key: key.clone(),
            stage: self.stage,
            permits: Arc::new(Semaphore::new(window.size())),
            state: Mutex::new(HostState {
                window,
                debt: 0,
                in_flight: 0,
                peak: 0,
                interval: self.floor,
                min_interval: Duration::ZERO,
                next_start: now,
                paused_until: now,
                logged: None,
            }),
            floor: self.floor,
            total: self.total.clone(),
        });
        map.insert(key, Arc::clone(&host));
        host
    }

    /// The stage, as logs and snapshots name it: `download` or `crawl`.
    pub fn stage(&self) -> &'static str {
        self.stage
    }

    /// Requests in flight now over every host: those whose turn has come.
    pub fn in_flight(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().map(|h| h.lock().in_flight).sum()
    }

    /// The busiest hosts' windows (most in flight, then largest window), [`SHOWN_HOSTS`] at
    /// most.
    pub fn windows(&self) -> Vec<HostWindow> {
        let hosts: Vec<Arc<Host>> = {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.values().cloned().collect()
        };
        let mut windows: Vec<HostWindow> = hosts.iter().map(|h| h.snapshot()).collect();
        windows.sort_by(|a, b| {
            (b.in_flight, b.window, &a.host).cmp(&(a.in_flight, a.window, &b.host))
        });
        windows.truncate(SHOWN_HOSTS);
        windows
    }
}

impl Host {
    fn lock(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a place in the host's window and for its pace, reserves the next start, then
    /// waits for a place among the stage's requests over every host, if it limits them.
    pub async fn acquire(self: &Arc<Self>) -> HostPermit {
        let mut permit = self.acquire_turn().await;
        if let Some(total) = &self.total {
            // Invariant: the semaphore is never closed.
            let place = Arc::clone(total)
                .acquire_owned()
                .await
                .expect("total semaphore open");
            permit.place = Some(place);
            permit.sending();
        }
        permit
    }

    async fn acquire_turn(self: &Arc<Self>) -> HostPermit {
        // Invariant: the semaphore is never closed.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("host semaphore open");
        loop {
            let wait_until = {
                let mut state = self.lock();
                let now = Instant::now();
                let start = state.next_start.max(state.paused_until);
                if start <= now {
                    state.next_start = now + state.interval;
                    state.in_flight += 1;
                    state.peak = state.peak.max(state.in_flight);
                    return HostPermit {
                        host: Arc::clone(self),
                        permit: Some(permit),
                        place: None,
                        started: now,
                        epoch: state.window.epoch(),
                    };
                }
                start
            };
            tokio::time::sleep_until(wait_until).await;
        }
    }

    /// `host:port`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Requests allowed in flight now.
    pub fn window(&self) -> usize {
        self.lock().window.size()
    }

    /// Never start requests to this host closer than `interval` apart (the site's robots.txt
    /// `Crawl-delay`), whatever the configured rate and however fast the host answers.
    pub fn raise_floor(&self, interval: Duration) {
        let mut state = self.lock();
        state.min_interval = state.min_interval.max(interval);
        state.interval = state.interval.max(state.min_interval);
    }

    /// The current interval between request starts.
    pub fn interval(&self) -> Duration {
        self.lock().interval
    }

    fn snapshot(&self) -> HostWindow {
        let state = self.lock();
        HostWindow {
            stage: self.stage.to_owned(),
            host: self.key.clone(),
            window: state.window.size(),
            in_flight: state.in_flight,
        }
    }

    /// Puts the semaphore in step with a window that went from `before` to `after`.
    fn resize(&self, state: &mut HostState, before: usize, after: usize) {
        if after > before {
            let mut grow = after - before;
            let repaid = grow.min(state.debt);
            state.debt -= repaid;
            grow -= repaid;
            self.permits.add_permits(grow);
        } else if after < before {
            let shrink = before - after;
            let taken = self.permits.forget_permits(shrink);
            state.debt += shrink - taken;
        }
    }

    fn log_window(&self, state: &mut HostState, before: usize, now: Instant) {
        let after = state.window.size();
        if after == before {
            return;
        }
        let grew = after > before;
        if grew
            && state
                .logged
                .is_some_and(|at| now.duration_since(at) < LOG_EVERY)
        {
            return;
        }
        state.logged = Some(now);
        tracing::debug!(
            stage = self.stage,
            host = %self.key,
            window = after,
            in_flight = state.in_flight,
            "host window {}",
            if grew { "grew" } else { "shrank" }
        );
    }
}

impl HostPermit {
    /// The request goes out now: its latency is measured from here (time spent waiting for
    /// other limits after the host's turn does not count against the host).
    pub fn sending(&mut self) {
        self.started = Instant::now();
        self.epoch = self.host.lock().window.epoch();
    }

    /// The request succeeded: the window may grow and the pace recovers.
    pub fn succeeded(mut self) {
        let host = Arc::clone(&self.host);
        let mut state = host.lock();
        let now = Instant::now();
        let before = state.window.size();
        let in_use = state.peak;
        state
            .window
            .succeeded(now.duration_since(self.started), in_use);
        let after = state.window.size();
        host.resize(&mut state, before, after);
        host.log_window(&mut state, before, now);
        let floor = host.floor.max(state.min_interval);
        if state.interval > floor {
            state.interval /= 2;
            if state.interval < THROTTLED_FLOOR {
                state.interval = floor;
            }
            state.interval = state.interval.max(floor);
        }
        self.release(&mut state);
    }

    /// The request failed with `failed`: a congestion signal (429, 503, a time-out, a reset)
    /// shrinks the window once per event, a 429 or 503 also slows the pace, and `Retry-After`
    /// pauses the host.
    pub fn failed(mut self, failed: &Failure) {
        let host = Arc::clone(&self.host);
        let mut state = host.lock();
        if failed.is_throttle() {
            let now = Instant::now();
            let before = state.window.size();
            if state.window.congested(self.epoch) {
                let after = state.window.size();
                state.peak = state.in_flight;
                host.resize(&mut state, before, after);
                host.log_window(&mut state, before, now);
                if matches!(failed.class, FailureClass::Http(429 | 503)) {
                    state.interval = (state.interval * 2)
                        .clamp(THROTTLED_FLOOR, SLOWEST)
                        .max(host.floor)
                        .max(state.min_interval);
                    tracing::debug!(stage = host.stage, host = %host.key, interval = ?state.interval, "host slowed down");
                }
            }
            if let Some(wait) = failed.retry_after {
                let until = now + wait.min(MAX_RETRY_AFTER);
                state.paused_until = state.paused_until.max(until);
            }
        }
        self.release(&mut state);
    }

    /// Gives the place back, or takes it out of circulation if the window shrank meanwhile.
    fn release(&mut self, state: &mut HostState) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.debt > 0 {
            state.debt -= 1;
            permit.forget();
        }
    }
}

impl Drop for HostPermit {
    fn drop(&mut self) {
        if self.permit.is_some() {
            let host = Arc::clone(&self.host);
            let mut state = host.lock();
            self.release(&mut state);
        }
    }
}

/// One host's window, as a snapshot shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostWindow {
    /// `download` or `crawl`.
    pub stage: String,
    /// `host:port`.
    pub host: String,
    /// Requests allowed in flight now.
    pub window: usize,
    /// Requests in flight now.
    pub in_flight: usize,
}

/// The turns of this process at one host ([`Host::acquire`]): the gate of
/// [`super::retry::with_retries`] in a one-process run. Never fails; `E` is the error the
/// attempts may stop the run with.
pub struct LocalGate<'a, E> {
    host: &'a Arc<Host>,
    error: std::marker::PhantomData<fn() -> E>,
}

impl<'a, E> LocalGate<'a, E> {
    pub fn new(host: &'a Arc<Host>) -> Self {
        Self {
            host,
            error: std::marker::PhantomData,
        }
    }
}

impl<E> super::retry::Gate for LocalGate<'_, E> {
    type Turn = LocalTurn<E>;
    type Error = E;

    async fn turn(&self) -> Result<Self::Turn, E> {
        Ok(LocalTurn {
            permit: self.host.acquire().await,
            error: std::marker::PhantomData,
        })
    }
}

/// A turn given by [`LocalGate`].
pub struct LocalTurn<E> {
    permit: HostPermit,
    error: std::marker::PhantomData<fn() -> E>,
}

impl<E> super::retry::Turn for LocalTurn<E> {
    type Error = E;

    async fn end(self, failed: Option<&Failure>) -> Result<(), E> {
        match failed {
            None => self.permit.succeeded(),
            Some(failed) => self.permit.failed(failed),
        }
        Ok(())
    }
}

/// The `Retry-After` a response carries, as a wait from now.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()))
}

/// `Retry-After` as a duration from now: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The host (with port) requests to `url` count against; the whole URL when it has none.
pub fn host_of(url: &url::Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => url.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    fn limits(per_host: usize, adaptive: bool, rate: Option<f64>) -> HostLimits {
        HostLimits {
            per_host,
            adaptive,
            rate,
        }
    }

    fn failure(class: FailureClass) -> Failure {
        Failure::new(class, "test")
    }

    const FAST: Duration = Duration::from_millis(50);
    #[test]
    fn hosts_carry_their_port() {
        let url = url::Url::parse("http://127.0.0.1:8080/a").unwrap();
        assert_eq!(host_of(&url), "127.0.0.1:8080");
        let url = url::Url::parse("https://example.org/a").unwrap();
        assert_eq!(host_of(&url), "example.org:443");
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", SystemTime::now()), None);
    }

    #[test]
    fn a_window_starts_polite_and_doubles_each_round_trip_while_answers_are_healthy() {
        let mut window = Window::new(256, true);
        assert_eq!(window.size(), START_WINDOW);
        for round in 1..=3 {
            let full = window.size();
            for _ in 0..full {
                window.succeeded(FAST, full);
            }
            assert_eq!(window.size(), START_WINDOW << round);
        }
    }

    #[test]
    fn a_window_never_grows_past_its_cap() {
        let mut window = Window::new(20, true);
        for _ in 0..1000 {
            let full = window.size();
            window.succeeded(FAST, full);
        }
        assert_eq!(window.size(), 20);
        let mut small = Window::new(3, true);
        assert_eq!(small.size(), 3, "a cap below the start is where it starts");
        small.succeeded(FAST, 3);
        assert_eq!(small.size(), 3);
    }

    #[test]
    fn slow_answers_and_an_idle_window_hold_the_size() {
        let mut window = Window::new(256, true);
        window.succeeded(FAST, 8);
        assert_eq!(window.size(), 9);
        // Three times the fastest answer and more than the slack: the host is struggling.
        window.succeeded(FAST * 2 + LATENCY_SLACK + Duration::from_millis(1), 9);
        assert_eq!(window.size(), 9);
        // One request out of nine: the window is not what limits the pace.
        window.succeeded(FAST, 1);
        assert_eq!(window.size(), 9);
    }

    #[test]
    fn a_burst_of_failures_is_one_decrease_and_later_requests_can_decrease_again() {
        let mut window = Window::new(256, true);
        for _ in 0..56 {
            let full = window.size();
            window.succeeded(FAST, full);
        }
        assert_eq!(window.size(), 64);
        // 64 requests went out before the first failure, and all fail.
        let sent = window.epoch();
        let events = (0..64).filter(|_| window.congested(sent)).count();
        assert_eq!((events, window.size()), (1, 32));
        // A request sent after the decrease that fails too is news: the host is still congested.
        assert!(window.congested(window.epoch()));
        assert_eq!(window.size(), 16);
        // Above the threshold the window grows by one per window, not per success.
        for _ in 0..16 {
            window.succeeded(FAST, 16);
        }
        assert_eq!(window.size(), 17);
    }

    #[test]
    fn a_window_shrinks_to_one_and_no_further() {
        let mut window = Window::new(8, true);
        for _ in 0..10 {
            window.congested(window.epoch());
        }
        assert_eq!(window.size(), 1);
    }

    #[test]
    fn a_pinned_window_stays_at_its_cap() {
        let mut window = Window::new(6, false);
        assert_eq!(window.size(), 6);
        assert!(
            window.congested(window.epoch()),
            "still one event, for the pace"
        );
        window.succeeded(FAST, 6);
        assert_eq!(window.size(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_lets_no_more_requests_out_than_its_window() {
        let hosts = Hosts::new("download", limits(100, true, None));
        let a = hosts.get(&url("http://a.test/"));
        let mut held = Vec::new();
        for _ in 0..START_WINDOW {
            held.push(a.acquire().await);
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(1), a.acquire())
                .await
                .is_err(),
            "the ninth request waits for a place"
        );
        // Every one of the eight comes back in healthy time: the window doubles.
        for permit in held.drain(..) {
            permit.succeeded();
        }
        assert_eq!(a.window(), 2 * START_WINDOW);
        for _ in 0..2 * START_WINDOW {
            held.push(a.acquire().await);
        }
        assert_eq!(hosts.windows()[0].in_flight, 2 * START_WINDOW);
    }

    #[tokio::test(start_paused = true)]
    async fn a_503_burst_halves_the_window_once_and_places_in_use_leave_as_they_end() {
        let hosts = Hosts::new("download", limits(100, true, None));
        let a = hosts.get(&url("http://a.test/"));
        let mut held = Vec::new();
        for _ in 0..START_WINDOW {
            held.push(a.acquire().await);
        }
        let before = a.interval();
        for permit in held.drain(..) {
            permit.failed(&failure(FailureClass::Http(503)));
        }
        assert_eq!(a.window(), START_WINDOW / 2);
        assert_eq!(a.interval(), THROTTLED_FLOOR.max(before * 2), "slowed once");
        // Exactly the new window can be in flight.
        for _ in 0..START_WINDOW / 2 {
            held.push(a.acquire().await);
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(5), a.acquire())
                .await
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_slows_only_that_host_and_success_recovers() {
        let hosts = Hosts::new("download", limits(4, true, None));
        let a = hosts.get(&url("http://a.test/1"));
        let b = hosts.get(&url("http://b.test/1"));
        a.acquire().await.failed(&failure(FailureClass::Http(429)));
        a.acquire().await.failed(&failure(FailureClass::Http(429)));
        assert_eq!(a.interval(), Duration::from_millis(200));
        assert_eq!(a.window(), 1);
        assert_eq!((b.interval(), b.window()), (Duration::ZERO, 4));
        for _ in 0..4 {
            a.acquire().await.succeeded();
        }
        assert_eq!(a.interval(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_that_stops_answering_goes_to_one_request_and_recovers_within_round_trips() {
        let hosts = Hosts::new("download", limits(64, true, None));
        let a = hosts.get(&url("http://hang.test/"));
        // Three rounds of time-outs, each round started after the last decrease.
        for _ in 0..3 {
            let window = a.window();
            let mut held = Vec::new();
            for _ in 0..window {
                held.push(a.acquire().await);
            }
            tokio::time::advance(Duration::from_secs(30)).await;
            for permit in held {
                permit.failed(&failure(FailureClass::Timeout));
            }
        }
        assert_eq!(a.window(), 1);
        assert_eq!(
            a.interval(),
            Duration::ZERO,
            "time-outs do not stretch the pace"
        );
        // It answers again: a few round trips bring the window back to its start.
        let began = Instant::now();
        while a.window() < START_WINDOW {
            let window = a.window();
            let mut held = Vec::new();
            for _ in 0..window {
                held.push(a.acquire().await);
            }
            tokio::time::advance(FAST).await;
            for permit in held {
                permit.succeeded();
            }
        }
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "{:?}",
            began.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn back_off_is_capped() {
        let hosts = Hosts::new("download", limits(1, false, Some(2.0)));
        let a = hosts.get(&url("http://a.test/"));
        assert_eq!(a.interval(), Duration::from_millis(500));
        for _ in 0..20 {
            a.acquire().await.failed(&failure(FailureClass::Http(503)));
        }
        assert_eq!(a.interval(), SLOWEST);
        for _ in 0..20 {
            a.acquire().await.succeeded();
        }
        assert_eq!(a.interval(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_raised_floor_holds_through_success_and_back_off() {
        let hosts = Hosts::new("crawl", limits(4, true, Some(100.0)));
        let a = hosts.get(&url("http://a.test/"));
        a.raise_floor(Duration::from_secs(2));
        assert_eq!(a.interval(), Duration::from_secs(2));
        for _ in 0..10 {
            a.acquire().await.succeeded();
        }
        assert_eq!(a.interval(), Duration::from_secs(2));
        a.raise_floor(Duration::from_secs(40));
        a.acquire().await.failed(&failure(FailureClass::Http(503)));
        assert_eq!(a.interval(), Duration::from_secs(40));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_the_host() {
        let hosts = Hosts::new("download", limits(2, true, None));
        let a = hosts.get(&url("http://a.test/"));
        let mut throttled = failure(FailureClass::Http(429));
        throttled.retry_after = Some(Duration::from_secs(5));
        a.acquire().await.failed(&throttled);
        let started = Instant::now();
        let _permit = a.acquire().await;
        assert!(started.elapsed() >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_floor_spaces_request_starts() {
        let hosts = Hosts::new("download", limits(8, true, Some(10.0)));
        let a = hosts.get(&url("http://a.test/"));
        let started = Instant::now();
        for _ in 0..5 {
            drop(a.acquire().await);
        }
        // Five starts at 100 ms spacing: the fifth begins 400 ms after the first.
        assert!(
            started.elapsed() >= Duration::from_millis(400),
            "{:?}",
            started.elapsed()
        );
    }
}
