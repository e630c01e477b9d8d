//! When to try again: exponential back-off with full jitter.

use std::time::Duration;

/// Exponential back-off with full jitter: attempt 1 waits up to `base`, doubling to `cap`.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let ceiling = exp.min(cap);
    ceiling.mul_f64(0.5 + fastrand::f64() * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

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
