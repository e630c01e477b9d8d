//! The link queue: pages `[[follow]]` links lead to, crawled by their level's rules while the
//! chains run and after.

use super::*;

impl Crawler<'_> {
    /// The link queue: pages `[[follow]]` links lead to, read from the state in the order they
    /// were found, while the chains run and after, until the queue is empty and nothing in
    /// flight can add to it. A linked page's images and the links it leads to commit with it;
    /// a failed one stays queued for the next run.
    pub(super) async fn crawl_links(&self) -> Result<LinkTally, StateError> {
        let mut tally = LinkTally::default();
        if self.levels.is_empty() && self.profile.sitemap.is_empty() {
            return Ok(tally);
        }
        let room = self
            .profile
            .crawl
            .concurrency
            .saturating_mul(WAITING_PER_PLACE);
        let mut from = 0;
        let mut in_flight = FuturesUnordered::new();
        loop {
            // Read before the queue is: chains that were done by then had committed every link
            // they found, so a look that finds nothing after it is the last word.
            let chains_were_done = self.chains_done.load(Ordering::SeqCst);
            if !self.cancel.is_cancelled() && in_flight.len() < room {
                let limit = room - in_flight.len();
                let batch = read(self.state, move |s| s.queued_links_from(from, limit)).await?;
                for (url, link) in batch {
                    from = link.seq + 1;
                    in_flight.push(self.crawl_link(url, link));
                }
            }
            if in_flight.is_empty() {
                // Chains done before the look at the queue just now, and it found nothing: no
                // commit can queue a link any more.
                if self.cancel.is_cancelled() || chains_were_done {
                    break;
                }
                tokio::select! {
                    () = self.links_added.notified() => {}
                    () = self.cancel.cancelled() => {}
                }
                continue;
            }
            tokio::select! {
                Some(done) = in_flight.next() => match done? {
                    LinkOutcome::Done => tally.done += 1,
                    LinkOutcome::Failed => tally.failed += 1,
                    LinkOutcome::Interrupted => tally.interrupted += 1,
                    LinkOutcome::SitemapRead(read) => {
                        let sitemaps = &mut tally.sitemaps;
                        sitemaps.read += read.read;
                        sitemaps.pages += read.pages;
                        sitemaps.images += read.images;
                        sitemaps.skipped += read.skipped;
                    }
                    LinkOutcome::SitemapFailed => tally.sitemaps.failed += 1,
                },
                () = self.links_added.notified(), if in_flight.len() < room => {}
            }
        }
        Ok(tally)
    }

    /// One linked page: fetched and analysed by its level's rules, committed with its images
    /// (carrying what the link passed down) and the links it leads to.
    async fn crawl_link(&self, url: String, link: LinkRecord) -> Result<LinkOutcome, StateError> {
        if link.level == crate::engine::sitemap::SITEMAP_LEVEL {
            return self.crawl_sitemap(url, link).await;
        }
        let position = PagePosition {
            url: url.clone(),
            number: 0,
            done: 0,
            cursor: None,
            after_id: None,
            offset: 0,
        };
        let mut ledger = LinkedPages::new(self.state, self.writer);
        let page = |position: PagePosition, result: PageResult, validators| PageUnit {
            start: link.start.clone(),
            position,
            in_chain: false,
            result,
            next: None,
            seen: PageSeen {
                validators,
                next: None,
            },
        };
        let failed = |error: FailureRecord| {
            page(
                position.clone(),
                PageResult::Failed(error),
                Validators::default(),
            )
        };
        let Some(level) = self.levels.get(&link.level) else {
            let error = other_failure(format!(
                "the profile has no level `{}` any more",
                link.level
            ));
            return Ok(link_outcome(commit_page(&mut ledger, failed(error)).await?));
        };
        let Ok(start) = Url::parse(&link.start).or_else(|_| Url::parse(&url)) else {
            let error = other_failure(format!("`{url}` is not a valid URL"));
            return Ok(link_outcome(commit_page(&mut ledger, failed(error)).await?));
        };
        // A known page a refresh looks at again is asked only if it changed, when its
        // validators were kept.
        let revisit = match self.profile.refresh.is_some() && self.asks_if_changed(level) {
            false => None,
            true => read(self.state, {
                let url = url.clone();
                move |s| s.page(&url)
            })
            .await?
            .and_then(|record| record.validators_if_done().cloned())
            .map(|validators| (validators, NextPage::End(EndReason::SinglePage))),
        };
        let (position, fetched, validators) = match self
            .revisit_page(level, &start, position, revisit, None)
            .await
        {
            (position, Revisited::Page(fetched, validators)) => (position, fetched, validators),
            (_, Revisited::Unchanged(_)) => {
                self.writer.commit_unchanged_link(&url).await?;
                return Ok(LinkOutcome::Done);
            }
        };
        let place = PagePlace {
            position: &position,
            in_chain: false,
            depth: link.depth,
            max_depth: self.profile.crawl.max_depth,
            ends_on_missing: false,
            inherited: &link.metadata,
            revisited: &self.revisited,
        };
        let result = match page_step(&place, fetched) {
            PageStep::Interrupted => return Ok(LinkOutcome::Interrupted),
            // Only a chain's page ends a chain.
            PageStep::EndOfChain { .. } => return Ok(LinkOutcome::Failed),
            PageStep::Commit { result, .. } => result,
        };
        let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
        let committed = commit_page(&mut ledger, page(position, result, validators)).await?;
        if queued {
            self.links_added.notify_one();
        }
        Ok(link_outcome(committed))
    }
}

/// How a linked page ended, by its commit.
fn link_outcome(committed: PageCommitted) -> LinkOutcome {
    match committed {
        PageCommitted::Done | PageCommitted::Before => LinkOutcome::Done,
        PageCommitted::Failed(_) => LinkOutcome::Failed,
    }
}

/// How one linked page (or sitemap) ended.
pub(super) enum LinkOutcome {
    Done,
    Failed,
    Interrupted,
    /// A sitemap read, and what it listed.
    SitemapRead(SitemapTally),
    /// A sitemap that could not be had or read; it stays queued.
    SitemapFailed,
}
