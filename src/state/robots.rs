//! The robots.txt answers of a job, kept in its state so a rerun within their lifetime does not
//! ask again: the state's side of `net::robots::RobotsStore`.

use futures_util::future::BoxFuture;

use super::{State, WriterHandle};
use crate::net::robots::{RobotsRecord, RobotsStore};

/// Robots.txt records read from `state` and written through `writer`.
pub struct RobotsCache {
    state: State,
    writer: WriterHandle,
}

impl RobotsCache {
    pub fn new(state: State, writer: WriterHandle) -> Self {
        Self { state, writer }
    }
}

impl RobotsStore for RobotsCache {
    fn load(&self, origin: String) -> BoxFuture<'_, Option<RobotsRecord>> {
        let state = self.state.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || state.robots(&origin))
                .await
                .ok()?
                .ok()?
        })
    }

    fn save(&self, origin: String, record: RobotsRecord) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // A lost record only means asking again next run.
            let _ = self.writer.save_robots(origin, record).await;
        })
    }
}
