//! Per-host politeness: a concurrency limit, a pace between request starts, and back-off that
//! slows only the host that complains. The crawl (pages and API calls) and the download stage
//! each keep one [`Hosts`] with their own limits, and use it the same way.
//!
//! Each host has a minimum interval between request starts. A throttle signal (429, 503, a
//! time-out) doubles it and honours `Retry-After` by pausing the host; every success shrinks it by
//! a tenth, back down to the configured floor: multiplicative both ways, host by host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The interval a host is slowed to at least after its first throttle signal.
const THROTTLED_FLOOR: Duration = Duration::from_millis(100);
/// The slowest pace back-off goes to.
const SLOWEST: Duration = Duration::from_secs(30);
/// The longest `Retry-After` honoured; longer ones are capped, not obeyed blindly.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Every host seen in a run.
pub struct Hosts {
    per_host: usize,
    floor: Duration,
    map: Mutex<HashMap<String, Arc<Host>>>,
}

/// One host's limits and pace.
pub struct Host {
    permits: Arc<Semaphore>,
    pace: Mutex<Pace>,
    floor: Duration,
}

struct Pace {
    interval: Duration,
    /// Set by the site itself (robots.txt `Crawl-delay`): the pace never gets faster.
    min_interval: Duration,
    next_start: Instant,
    paused_until: Instant,
}

/// Holding this is the right to have one request to the host in flight.
pub struct HostPermit {
    _permit: OwnedSemaphorePermit,
}

impl Hosts {
    /// `per_host` requests in flight per host at most, and at most `rate` request starts per
    /// second per host (`None`: no floor on the interval).
    pub fn new(per_host: usize, rate: Option<f64>) -> Self {
        let floor = rate
            .filter(|r| *r > 0.0)
            .map_or(Duration::ZERO, |r| Duration::from_secs_f64(1.0 / r));
        Self {
            per_host: per_host.max(1),
            floor,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// No limit worth the name: for commands that fetch one page at a time.
    pub fn unlimited() -> Self {
        Self::new(Semaphore::MAX_PERMITS, None)
    }

    /// The host of `url` (by host name and port).
    pub fn get(&self, url: &url::Url) -> Arc<Host> {
        let key = format!(
            "{}:{}",
            url.host_str().unwrap_or_default(),
            url.port_or_known_default().unwrap_or(0)
        );
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(map.entry(key).or_insert_with(|| {
            Arc::new(Host {
                permits: Arc::new(Semaphore::new(self.per_host)),
                pace: Mutex::new(Pace {
                    interval: self.floor,
                    min_interval: Duration::ZERO,
                    next_start: Instant::now(),
                    paused_until: Instant::now(),
                }),
                floor: self.floor,
            })
        }))
    }
}

impl Host {
    /// Waits for a free slot and for the host's pace, then reserves the next start time.
    pub async fn acquire(&self) -> HostPermit {
        // Invariant: the semaphore is never closed.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("host semaphore open");
        loop {
            let wait_until = {
                let mut pace = self.pace.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                let start = pace.next_start.max(pace.paused_until);
                if start <= now {
                    pace.next_start = now + pace.interval;
                    return HostPermit { _permit: permit };
                }
                start
            };
            tokio::time::sleep_until(wait_until).await;
        }
    }

    /// A request succeeded: speed up a little, never past the floor.
    pub fn succeeded(&self) {
        let mut pace = self.pace.lock().unwrap_or_else(|e| e.into_inner());
        let floor = self.floor.max(pace.min_interval);
        if pace.interval > floor {
            pace.interval = pace.interval.mul_f64(0.9).max(floor);
            if pace.interval < THROTTLED_FLOOR && floor < THROTTLED_FLOOR {
                pace.interval = floor;
            }
        }
    }

    /// The host asked us to slow down (429, 503, a time-out): halve the rate and, with
    /// `Retry-After`, pause the host that long.
    pub fn throttled(&self, retry_after: Option<Duration>) {
        let mut pace = self.pace.lock().unwrap_or_else(|e| e.into_inner());
        pace.interval = (pace.interval * 2)
            .max(THROTTLED_FLOOR)
            .min(SLOWEST)
            .max(pace.min_interval);
        if let Some(wait) = retry_after {
            let until = Instant::now() + wait.min(MAX_RETRY_AFTER);
            pace.paused_until = pace.paused_until.max(until);
        }
    }

    /// Never start requests to this host closer than `interval` apart (the site's robots.txt
    /// `Crawl-delay`), whatever the configured rate and however fast the host answers.
    pub fn raise_floor(&self, interval: Duration) {
        let mut pace = self.pace.lock().unwrap_or_else(|e| e.into_inner());
        pace.min_interval = pace.min_interval.max(interval);
        pace.interval = pace.interval.max(pace.min_interval);
    }

    /// The current interval between request starts.
    pub fn interval(&self) -> Duration {
        self.pace.lock().unwrap_or_else(|e| e.into_inner()).interval
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
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
    fn throttling_slows_only_that_host_and_success_recovers() {
        let hosts = Hosts::new(4, None);
        let a = hosts.get(&url("http://a.test/1"));
        let b = hosts.get(&url("http://b.test/1"));
        a.throttled(None);
        a.throttled(None);
        assert_eq!(a.interval(), Duration::from_millis(200));
        assert_eq!(b.interval(), Duration::ZERO);
        for _ in 0..100 {
            a.succeeded();
        }
        assert_eq!(a.interval(), Duration::ZERO);
    }

    #[test]
    fn back_off_is_capped() {
        let hosts = Hosts::new(1, Some(2.0));
        let a = hosts.get(&url("http://a.test/"));
        assert_eq!(a.interval(), Duration::from_millis(500));
        for _ in 0..20 {
            a.throttled(None);
        }
        assert_eq!(a.interval(), SLOWEST);
        for _ in 0..200 {
            a.succeeded();
        }
        assert_eq!(a.interval(), Duration::from_millis(500));
    }

    #[test]
    fn a_raised_floor_holds_through_success_and_back_off() {
        let hosts = Hosts::new(4, Some(100.0));
        let a = hosts.get(&url("http://a.test/"));
        a.raise_floor(Duration::from_secs(2));
        assert_eq!(a.interval(), Duration::from_secs(2));
        for _ in 0..100 {
            a.succeeded();
        }
        assert_eq!(a.interval(), Duration::from_secs(2));
        a.raise_floor(Duration::from_secs(40));
        a.throttled(None);
        assert_eq!(a.interval(), Duration::from_secs(40));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_the_host() {
        let hosts = Hosts::new(2, None);
        let a = hosts.get(&url("http://a.test/"));
        a.throttled(Some(Duration::from_secs(5)));
        let started = Instant::now();
        let _permit = a.acquire().await;
        assert!(started.elapsed() >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_floor_spaces_request_starts() {
        let hosts = Hosts::new(8, Some(10.0));
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
