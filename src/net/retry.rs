//! When to try again, and the one loop every request goes through: pages, API calls, renders
//! and images, in one process or in a worker. Transient failures (time-outs, resets, 429, 5xx)
//! are retried a bounded number of times, after the server's `Retry-After` when it sent one
//! (capped), else after exponential back-off with full jitter. Each attempt takes a turn at its
//! host from a [`Gate`] (the process's own windows, or the job's in Redis) and tells the turn how
//! it ended; the loop stops at once when the run is cancelled, waiting or not.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::failure::Failure;

/// The longest `Retry-After` honoured; longer ones are capped, not obeyed blindly.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Where a request waits for its turn at its host.
pub trait Gate {
    type Turn: Turn<Error = Self::Error>;
    type Error;

    /// Waits for the next turn.
    fn turn(&self) -> impl Future<Output = Result<Self::Turn, Self::Error>> + Send;
}

/// One request's turn at its host.
pub trait Turn {
    type Error;

    /// The request ended: `failed` says how, when it did not succeed (a 429 or 503 holds the
    /// host back, a congestion signal narrows its window, a success may widen it).
    fn end(self, failed: Option<&Failure>) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Why the attempts stopped without a result.
#[derive(Debug)]
pub enum Stopped<E> {
    /// The run was cancelled.
    Cancelled,
    /// The gate or an attempt met an error that stops the run (a full disk, Redis gone).
    Fatal(E),
}

/// Attempts at one request under `policy`: each in a turn from `gate`, told how it ended, and
/// after a transient failure the wait the policy says (no turn is held while waiting).
/// `attempt` is given the attempt's number (1-based) and gives a result, a failure to judge, or
/// an error that stops the run. The attempts made, with the last result.
pub async fn with_retries<G, T, F, Fut>(
    policy: RetryPolicy,
    gate: &G,
    cancel: &CancellationToken,
    mut attempt: F,
) -> Result<(Result<T, Failure>, u32), Stopped<G::Error>>
where
    G: Gate,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<Result<T, Failure>, G::Error>>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let tried = async {
            let turn = gate.turn().await?;
            let result = attempt(attempts).await;
            match &result {
                Ok(Ok(_)) => turn.end(None).await?,
                Ok(Err(failed)) => turn.end(Some(failed)).await?,
                // The turn goes back as its lease or permit is dropped.
                Err(_) => {}
            }
            result
        };
        let result = tokio::select! {
            result = tried => result.map_err(Stopped::Fatal)?,
            () = cancel.cancelled() => return Err(Stopped::Cancelled),
        };
        let failed = match result {
            Ok(done) => return Ok((Ok(done), attempts)),
            Err(failed) => failed,
        };
        let Some(wait) = policy.next_wait(attempts, &failed) else {
            return Ok((Err(failed), attempts));
        };
        tracing::debug!(attempts, class = %failed.class.name(), error = %failed.detail, "request failed; trying again in {wait:?}");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return Err(Stopped::Cancelled),
        }
    }
}

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
    use std::sync::{Arc, Mutex};

    /// A gate that writes down how each turn ended.
    #[derive(Default, Clone)]
    struct Tally(Arc<Mutex<Vec<String>>>);

    impl Gate for Tally {
        type Turn = Tally;
        type Error = String;

        async fn turn(&self) -> Result<Tally, String> {
            Ok(self.clone())
        }
    }

    impl Turn for Tally {
        type Error = String;

        async fn end(self, failed: Option<&Failure>) -> Result<(), String> {
            let said = failed.map_or("ok".to_owned(), |f| f.class.name());
            self.0.lock().unwrap().push(said);
            Ok(())
        }
    }

    fn ends(tally: &Tally) -> Vec<String> {
        tally.0.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn each_attempt_takes_a_turn_and_says_how_it_ended_until_one_succeeds() {
        let gate = Tally::default();
        let cancel = CancellationToken::new();
        let (result, attempts) =
            with_retries(RetryPolicy::new(5), &gate, &cancel, |n| async move {
                Ok(match n {
                    1 => Err(Failure::new(FailureClass::Http(503), "HTTP 503")),
                    2 => Err(Failure::new(FailureClass::Timeout, "timed out")),
                    _ => Ok(n),
                })
            })
            .await
            .unwrap();
        assert_eq!((result.unwrap(), attempts), (3, 3));
        assert_eq!(ends(&gate), ["http_503", "timeout", "ok"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_failure_is_given_back_after_one_attempt_and_a_fatal_error_stops() {
        let gate = Tally::default();
        let cancel = CancellationToken::new();
        let (result, attempts) = with_retries(RetryPolicy::new(5), &gate, &cancel, |_| async {
            Ok::<Result<(), Failure>, String>(Err(Failure::new(
                FailureClass::Http(404),
                "HTTP 404",
            )))
        })
        .await
        .unwrap();
        assert_eq!(
            (result.unwrap_err().class, attempts),
            (FailureClass::Http(404), 1)
        );
        let stopped = with_retries(RetryPolicy::new(5), &gate, &cancel, |_| async {
            Err::<Result<(), Failure>, String>("the disk is full".into())
        })
        .await;
        assert!(matches!(stopped, Err(Stopped::Fatal(e)) if e == "the disk is full"));
    }

    #[tokio::test]
    async fn cancelling_ends_a_retry_after_wait_at_once() {
        let gate = Tally::default();
        let cancel = CancellationToken::new();
        let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = Arc::clone(&attempts);
        let waiting = with_retries(RetryPolicy::new(5), &gate, &cancel, move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                let mut busy = Failure::new(FailureClass::Http(429), "HTTP 429");
                busy.retry_after = Some(Duration::from_secs(600));
                Ok::<Result<(), Failure>, String>(Err(busy))
            }
        });
        let stopper = async {
            // The first attempt has failed and the loop waits out its Retry-After.
            while ends(&gate).is_empty() {
                tokio::task::yield_now().await;
            }
            cancel.cancel();
        };
        let (stopped, ()) = tokio::join!(waiting, stopper);
        assert!(matches!(stopped, Err(Stopped::Cancelled)));
        assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

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
