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
use crate::profile::{Rejection, agent_token};
use crate::robots::{PageOptOut, page_opt_out};
use crate::wall::{Wall, Yielded, wall_in_page};

/// What a page yields.
#[derive(Debug, Clone)]
pub struct PageAnalysis {
    /// Every candidate the rules found, with the filter's verdict.
    pub candidates: Vec<(ImageCandidate, Result<(), Rejection>)>,
    /// Pages the `[[follow]]` rules lead to.
    pub links: Vec<FollowLink>,
    pub next: NextPage,
    /// The directive of `[politeness] opt_out` the page's `<meta name="robots">` or its
    /// response's `X-Robots-Tag` carries: its images are rejected, its links and next page
    /// still followed.
    pub opted_out: Option<PageOptOut>,
    /// The page is a sign-in wall or a bot challenge, not the page asked for: it fails, and
    /// its chain stays where it was.
    pub wall: Option<Wall>,
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
    let politeness = &profile.download.politeness;
    let opted_out = page_opt_out(
        &snapshot.robots_tags,
        &page.document,
        &agent_token(&profile.download.user_agent),
        &politeness.opt_out,
    );
    let mut seen = std::collections::HashSet::new();
    let rights = crate::extract::rights::PageRights::of(&page);
    let candidates: Vec<_> = extract_images(&profile.images, &page)
        .into_iter()
        .chain(extract_json_images(&profile.api, &snapshot.json))
        .filter(|c| seen.insert(c.url.clone()))
        .map(|mut c| {
            crate::extract::rights::fill(&mut c.rights, rights.for_image(c.url.as_str()));
            let verdict = match &opted_out {
                Some(o) => profile
                    .filter
                    .check(&c.url)
                    .and(Err(Rejection::OptedOut(o.source))),
                None => profile.filter.check(&c.url),
            };
            (c, verdict)
        })
        .collect();
    // An opted-out page's images count for pagination: the pages after it are not opted out.
    let accepted = candidates
        .iter()
        .filter(|(_, v)| matches!(v, Ok(()) | Err(Rejection::OptedOut(_))))
        .count();
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
    let requested = Url::parse(&position.url).unwrap_or_else(|_| snapshot.url.clone());
    let yielded = Yielded {
        images: accepted,
        links: links.len(),
    };
    let wall = wall_in_page(
        &profile.session.signed_out,
        &requested,
        &snapshot.url,
        &page.document,
        yielded,
    );
    PageAnalysis {
        candidates,
        links,
        next,
        opted_out,
        wall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::check;
    use crate::robots::OptOutSource;

    fn profile(rest: &str) -> Profile {
        let source = format!(
            "name = \"t\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n{rest}"
        );
        check(&source).profile.unwrap()
    }

    fn analyse(profile: &Profile, html: &str) -> PageAnalysis {
        let url = Url::parse("http://a.test/").unwrap();
        let position = crate::paginate::first_page(&profile.pagination, &url);
        let snapshot = PageSnapshot::html(url.clone(), html.to_owned());
        analyze_page(profile, &url, &position, &snapshot)
    }

    #[test]
    fn a_page_that_opts_out_yields_no_image() {
        let html =
            r#"<meta name="robots" content="noimageai"><img src="/a.jpg"><img src="/b.jpg">"#;
        let analysis = analyse(&profile(""), html);
        assert_eq!(
            analysis.opted_out.as_ref().map(|o| o.directive.as_str()),
            Some("noimageai")
        );
        assert_eq!(analysis.accepted().count(), 0);
        assert!(
            analysis
                .candidates
                .iter()
                .all(|(_, v)| *v == Err(Rejection::OptedOut(OptOutSource::MetaRobots)))
        );
        let off = profile("[politeness]\nopt_out = []\n");
        assert_eq!(analyse(&off, html).accepted().count(), 2);
        let plain = analyse(&profile(""), r#"<img src="/a.jpg">"#);
        assert_eq!((plain.accepted().count(), plain.opted_out), (1, None));
    }

    #[test]
    fn a_page_whose_response_opts_out_yields_no_image() {
        let url = Url::parse("http://a.test/").unwrap();
        let p = profile("");
        let position = crate::paginate::first_page(&p.pagination, &url);
        let mut snapshot = PageSnapshot::html(url.clone(), r#"<img src="/a.jpg">"#.to_owned());
        snapshot.robots_tags = vec!["noai, noimageai".to_owned()];
        let analysis = analyze_page(&p, &url, &position, &snapshot);
        assert_eq!(
            analysis.opted_out,
            Some(PageOptOut {
                directive: "noai".to_owned(),
                source: OptOutSource::XRobotsTag
            })
        );
        assert_eq!(
            analysis.candidates[0].1,
            Err(Rejection::OptedOut(OptOutSource::XRobotsTag))
        );
        assert_eq!(
            Rejection::OptedOut(OptOutSource::XRobotsTag).as_str(),
            "the page opts out (X-Robots-Tag)"
        );
    }
}
