//! When to try again: one policy for page fetches, API calls and downloads. Transient failures
//! (time-outs, resets, 429, 5xx) are retried a bounded number of times, after the server's
//! `Retry-After` when it sent one (capped), else after exponential back-off with full jitter.

use std::time::Duration;

use super::failure::Failure;
use super::hosts::MAX_RETRY_AFTER;

/// First back-off ceiling; it doubles with every attempt up to [`BACKOFF_CAP`].
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// The longest back-off between two attempts (a `Retry-After` may ask for longer).
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// How often and how long to wait before trying a request again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first, at most.
    pub retries: u32,
}

impl RetryPolicy {
    pub fn new(retries: u32) -> Self {
        Self { retries }
    }

    /// The wait before the next attempt, after attempt number `attempt` (1-based) ended in
    /// `failed`; `None` when the failure is final (not transient, or no retries left).
    pub fn next_wait(&self, attempt: u32, failed: &Failure) -> Option<Duration> {
        if !(failed.class.is_transient() && attempt <= self.retries) {
            return None;
        }
        Some(
            failed
                .retry_after
                .map(|w| w.min(MAX_RETRY_AFTER))
                .unwrap_or_else(|| backoff(attempt, BACKOFF_BASE, BACKOFF_CAP)),
        )
    }
}

/// Exponential back-off with full jitter: attempt 1 waits up to `base`, doubling to `cap`.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let ceiling = exp.min(cap);
    ceiling.mul_f64(0.5 + fastrand::f64() * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::failure::FailureClass;

    #[test]
    fn transient_failures_are_retried_until_the_retries_are_spent() {
        let policy = RetryPolicy::new(2);
        let reset = Failure::new(FailureClass::Reset, "reset");
        assert!(policy.next_wait(1, &reset).is_some());
        assert!(policy.next_wait(2, &reset).is_some());
        assert_eq!(policy.next_wait(3, &reset), None);
        let missing = Failure::new(FailureClass::Http(404), "HTTP 404");
        assert_eq!(policy.next_wait(1, &missing), None);
    }

    #[test]
    fn retry_after_is_obeyed_and_capped() {
        let policy = RetryPolicy::new(3);
        let mut busy = Failure::new(FailureClass::Http(429), "HTTP 429");
        busy.retry_after = Some(Duration::from_secs(7));
        assert_eq!(policy.next_wait(1, &busy), Some(Duration::from_secs(7)));
        busy.retry_after = Some(Duration::from_secs(86_400));
        assert_eq!(policy.next_wait(1, &busy), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(2);
        for attempt in 1..20 {
            let wait = backoff(attempt, base, cap);
            assert!(wait <= cap, "attempt {attempt}: {wait:?}");
        }
        assert!(backoff(1, base, cap) <= base);
        assert!(backoff(4, base, cap) >= Duration::from_millis(400));
    }
}
