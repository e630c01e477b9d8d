//! The network edge: everything a request passes through on its way out, for pages, API calls
//! and images alike.
//!
//! - [`client`]: the one HTTP client of a run (recording, replay and proxies plug in here)
//! - [`failure`]: why a request failed, as a class kept in state and the summary
//! - [`hosts`]: per-host politeness: an adaptive window of requests in flight, pace, back-off
//!   on 429/503/time-outs/resets
//! - [`retry`]: when to try again, and the one attempt loop every request goes through
//! - [`robots`]: robots.txt per origin: may this page or API request be sent
//! - [`session`]: who is asking: headers from the environment, cookies, login tokens
//! - [`walls`]: sign-in walls and bot challenges met by a run: the host is paused

pub mod client;
pub mod failure;
pub mod hosts;
pub mod retry;
pub mod robots;
pub mod session;
pub mod walls;

pub use client::{HttpClient, MAX_PAGE_BYTES, build_client};
pub use failure::{Failure, FailureClass, classify, error_chain};
pub use hosts::{Host, HostLimits, HostWindow, Hosts};
pub use retry::{Gate, RetryPolicy, Stopped, Turn, backoff, with_retries};
pub use robots::RobotsGate;
