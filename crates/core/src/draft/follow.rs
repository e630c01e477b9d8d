//! Links from a gallery's thumbnails to detail pages (`[[follow]]`): the repeated links that
//! wrap the gallery's images and lead to other pages of the same site, where the originals
//! usually are.

use std::collections::BTreeSet;

use scraper::{ElementRef, Selector};
use url::Url;

use super::ImageGroup;
use super::images::{is_stable_name, is_state_class};

/// How far above a thumbnail its link may be.
const MAX_LINK_DEPTH: usize = 4;

/// Extensions of links that point at an image file, not at a page.
const IMAGE_EXTENSIONS: [&str; 9] = [
    "jpg", "jpeg", "png", "gif", "webp", "avif", "bmp", "svg", "tiff",
];

/// The thumbnails' links, as a `[[follow]]` rule would take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailLinks {
    /// Finds exactly the links wrapping the gallery's images.
    pub selector: String,
    /// Distinct pages they lead to.
    pub pages: usize,
    /// One of them, absolute.
    pub example: String,
}

/// The links wrapping the gallery's (the first group's) images, when at least two distinct
/// same-site pages are linked and at least half the images have such a link.
pub fn detail_links(html: &str, page_url: &Url, groups: &[ImageGroup]) -> Option<DetailLinks> {
    let gallery = groups.first()?;
    let document = crate::page::parse_html(html);
    let images = Selector::parse(&gallery.selector).ok()?;
    let mut elements = 0;
    let mut links: Vec<(ElementRef<'_>, Url)> = Vec::new();
    for element in document.select(&images) {
        elements += 1;
        let link = std::iter::once(element)
            .chain(element.ancestors().filter_map(ElementRef::wrap))
            .take(MAX_LINK_DEPTH + 1)
            .find(|e| e.value().name() == "a" && e.value().attr("href").is_some());
        if let Some((link, url)) = link.and_then(|l| Some((l, detail_url(l, page_url)?))) {
            links.push((link, url));
        }
    }
    let pages: BTreeSet<&str> = links.iter().map(|(_, u)| u.as_str()).collect();
    if pages.len() < 2 || links.len() * 2 < elements {
        return None;
    }
    let wanted: BTreeSet<_> = links.iter().map(|(l, _)| l.id()).collect();
    let (first, example) = links.first()?;
    let mut tried = vec![gallery.base.clone()];
    tried.extend(
        first
            .value()
            .classes()
            .filter(|c| is_stable_name(c) && !is_state_class(c))
            .map(|c| format!("{} a.{c}", gallery.base)),
    );
    tried.push(format!("{} a", gallery.base));
    let selector = tried.into_iter().find(|css| {
        Selector::parse(css).is_ok_and(|s| {
            let matched: BTreeSet<_> = document.select(&s).map(|e| e.id()).collect();
            matched == wanted
        })
    })?;
    Some(DetailLinks {
        selector,
        pages: pages.len(),
        example: example.to_string(),
    })
}

/// The page `link` leads to, if it is another page of the same host and not an image file.
fn detail_url(link: ElementRef<'_>, page_url: &Url) -> Option<Url> {
    let mut url = page_url.join(link.value().attr("href")?.trim()).ok()?;
    url.set_fragment(None);
    let mut here = page_url.clone();
    here.set_fragment(None);
    let extension = url
        .path()
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase());
    let is_image = extension.is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.as_str()));
    (matches!(url.scheme(), "http" | "https")
        && url.host_str() == page_url.host_str()
        && url != here
        && !is_image)
        .then_some(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draft::{ClassNames, image_groups};

    #[test]
    fn thumbnails_linking_to_pages_of_the_site_are_followed() {
        let url = Url::parse("http://a.test/gallery/").unwrap();
        // (case, html, expected selector).
        let cases: [(&str, &str, Option<&str>); 6] = [
            (
                "figures holding linked thumbnails",
                r#"<div class="grid"><figure><a class="thumb" href="/photo/1"><img src="/t/1.jpg"></a></figure>
                   <figure><a class="thumb" href="/photo/2"><img src="/t/2.jpg"></a></figure></div>"#,
                Some(".grid figure a.thumb"),
            ),
            (
                "the repeated links are the containers",
                r#"<div id="g"><a class="card" href="/p/1"><img src="/t/1.jpg"></a>
                   <a class="card" href="/p/2"><img src="/t/2.jpg"></a></div>"#,
                Some("#g a.card"),
            ),
            (
                "links to the image files are no detail pages",
                r#"<div id="g"><a class="card" href="/full/1.jpg"><img src="/t/1.jpg"></a>
                   <a class="card" href="/full/2.JPG"><img src="/t/2.jpg"></a></div>"#,
                None,
            ),
            (
                "links to another site are not followed",
                r#"<div id="g"><a class="card" href="https://shop.test/1"><img src="/t/1.jpg"></a>
                   <a class="card" href="https://shop.test/2"><img src="/t/2.jpg"></a></div>"#,
                None,
            ),
            (
                "every thumbnail linking to one page is no set of detail pages",
                r#"<div id="g"><a class="card" href="/signup"><img src="/t/1.jpg"></a>
                   <a class="card" href="/signup"><img src="/t/2.jpg"></a></div>"#,
                None,
            ),
            (
                "unlinked thumbnails",
                r#"<div id="g"><figure><img src="/t/1.jpg"></figure><figure><img src="/t/2.jpg"></figure></div>"#,
                None,
            ),
        ];
        for (case, html, expected) in cases {
            let groups = image_groups(html, ClassNames::Prefer(None));
            let found = detail_links(html, &url, &groups);
            assert_eq!(
                found.as_ref().map(|f| f.selector.as_str()),
                expected,
                "{case}: {groups:?}"
            );
            if let Some(found) = found {
                assert_eq!(found.pages, 2, "{case}");
                assert!(found.example.starts_with("http://a.test/p"), "{case}");
            }
        }
    }
}
