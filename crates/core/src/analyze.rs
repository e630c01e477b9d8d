//! One page through the pure stages: extract its images (DOM rules and JSON rules), filter them,
//! decide the next page.
//!
//! Shared by the crawl and by `scrape probe`, so what a profile author sees is exactly what a
//! run does.

use url::Url;

use crate::extract::{
    FollowLink, ImageCandidate, extract_images, extract_json_images, follow_links,
};
use crate::page::{PageSnapshot, ParsedPage};
use crate::paginate::{NextPage, PagePosition, next_page};
use crate::profile::Profile;
use crate::profile::Rejection;

/// What a page yields.
#[derive(Debug, Clone)]
pub struct PageAnalysis {
    /// Every candidate the rules found, with the filter's verdict.
    pub candidates: Vec<(ImageCandidate, Result<(), Rejection>)>,
    /// Pages the `[[follow]]` rules lead to.
    pub links: Vec<FollowLink>,
    pub next: NextPage,
}

impl PageAnalysis {
    /// The candidates the filters accept.
    pub fn accepted(&self) -> impl Iterator<Item = &ImageCandidate> {
        self.candidates
            .iter()
            .filter(|(_, verdict)| verdict.is_ok())
            .map(|(c, _)| c)
    }
}

/// Analyses `snapshot`, the page at `position` of the chain that began at `start`.
pub fn analyze_page(
    profile: &Profile,
    start: &Url,
    position: &PagePosition,
    snapshot: &PageSnapshot,
) -> PageAnalysis {
    let page = ParsedPage::parse(snapshot);
    let mut seen = std::collections::HashSet::new();
    let candidates: Vec<_> = extract_images(&profile.images, &page)
        .into_iter()
        .chain(extract_json_images(&profile.api, &snapshot.json))
        .filter(|c| seen.insert(c.url.clone()))
        .map(|c| {
            let verdict = profile.filter.check(&c.url);
            (c, verdict)
        })
        .collect();
    let accepted = candidates.iter().filter(|(_, v)| v.is_ok()).count();
    let links = follow_links(&profile.follow, &page);
    // A listing page whose links lead to the images is not an empty page.
    let next = next_page(
        &profile.pagination,
        profile.max_pages,
        start,
        position,
        &page,
        accepted + links.len(),
    );
    PageAnalysis {
        candidates,
        links,
        next,
    }
}
