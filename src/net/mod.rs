//! The network edge: everything a request passes through on its way out, for pages, API calls
//! and images alike.
//!
//! - [`client`]: the one HTTP client of a run (recording, replay and proxies plug in here)
//! - [`failure`]: why a request failed, as a class kept in state and the summary
//! - [`retry`]: when to try again (exponential back-off with jitter)
//! - [`session`]: who is asking: headers from the environment, cookies, login tokens

pub mod client;
pub mod failure;
pub mod retry;
pub mod session;

pub use client::{HttpClient, build_client};
pub use failure::{Failed, FailureClass, classify, error_chain};
pub use retry::backoff;
