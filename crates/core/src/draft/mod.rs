//! Drafting a profile for a new site (`scrape new-profile`): from a page as plain HTTP serves
//! it and as the browser renders it (with the JSON it fetched), propose image rules for the
//! gallery, the next-page link, browser actions (overlays to dismiss, a "load more" or
//! carousel button to click, the element to scroll), links to detail pages and `[[api]]`
//! rules, written as a commented TOML profile meant to be edited. What the draft could not
//! decide is listed at its top ([`Draft::notes`]).
//!
//! Pure: the command fetches and renders; this module only reads snapshots (with the marks the
//! command's page script leaves, see [`layout`]). The draft is checked by the real validator
//! before it is written.

mod follow;
mod images;
mod json;
pub mod layout;
mod links;
mod overlays;

use std::collections::BTreeSet;
use std::fmt::Write as _;

use scraper::Selector;
use url::Url;

pub use follow::{DetailLinks, detail_links};
pub use images::{ClassNames, ImageGroup, STATE_CLASSES, image_groups, is_state_class};
pub use json::{ApiDraft, api_rules};
pub use links::{Carousel, Control, carousel_next, load_more_button, next_link};
pub use overlays::{Overlay, overlay_buttons};

use crate::analyze::analyze_page;
use crate::page::{CapturedJson, PageSnapshot};
use crate::paginate::first_page;
use crate::profile::{self, RenderMode};

/// What the command saw of the page.
#[derive(Debug, Clone)]
pub struct DraftInput {
    /// The page's URL, the draft's `start`.
    pub url: Url,
    /// The page as plain HTTP serves it, if it could be fetched.
    pub static_page: Option<PageSnapshot>,
    /// The page rendered by the browser, once loaded.
    pub rendered: Option<PageSnapshot>,
    /// The same page after scrolling to the bottom until it stopped growing.
    pub scrolled: Option<PageSnapshot>,
    /// `render` as the user asked for it; `None` lets the draft choose.
    pub render: Option<RenderMode>,
    /// `[browser] wait_for` and `page_timeout` the pages were rendered with
    /// (`--wait-for`, `--page-timeout`), as given: a browser draft keeps them.
    pub wait_for: Option<String>,
    pub page_timeout: Option<String>,
}

/// Longest drafted profile name, in characters: it names the output folder too.
const MAX_NAME_CHARS: usize = 60;

/// Scrolls a draft proposes where the page grew when scrolled or scrolls in an element.
const DRAFT_SCROLLS: u32 = 20;

/// A drafted profile and what went into it.
#[derive(Debug, Clone)]
pub struct Draft {
    pub toml: String,
    /// The profile's name, from the page's host and path; also its output folder's name.
    pub name: String,
    pub render: RenderMode,
    pub images: Vec<ImageGroup>,
    pub api: Vec<ApiDraft>,
    pub next: Option<Control>,
    pub load_more: Option<Control>,
    /// Buttons that click overlays away (`dismiss`).
    pub overlays: Vec<Overlay>,
    /// A carousel's "next" control.
    pub carousel: Option<Carousel>,
    /// The element that scrolls the gallery (`scroll_element`).
    pub scroll_element: Option<String>,
    /// The gallery's thumbnails' links to detail pages (`[[follow]]`).
    pub follow: Option<DetailLinks>,
    /// What the draft could not decide or read, one sentence each.
    pub notes: Vec<String>,
    /// Whether the page grew when scrolled (infinite scroll).
    pub scrolls: bool,
    /// Image URLs the drafted rules accept on the static page and on the rendered one.
    pub found_static: usize,
    pub found_rendered: usize,
    /// The browser keys the pages were rendered with.
    wait_for: Option<String>,
    page_timeout: Option<String>,
}

/// Drafts a profile for `input.url`.
pub fn draft_profile(input: &DraftInput) -> Draft {
    let richest = input
        .scrolled
        .as_ref()
        .or(input.rendered.as_ref())
        .or(input.static_page.as_ref());
    let loaded = input.rendered.as_ref().or(input.static_page.as_ref());
    // Classes the server sent, as opposed to those scripts added later (`are-images-ready`):
    // a browser draft prefers them, a static one uses nothing else.
    let served = input.static_page.as_ref().map(|p| classes_in(&p.html));
    let names = ClassNames::Prefer(served.as_ref());
    let images = richest
        .map(|p| image_groups(&p.html, names))
        .unwrap_or_default();
    let next = loaded.and_then(|p| next_link(&p.html, &p.url));
    let load_more = input
        .rendered
        .as_ref()
        .and_then(|p| load_more_button(&p.html));
    let overlays = input
        .rendered
        .as_ref()
        .map(|p| overlay_buttons(&p.html))
        .unwrap_or_default();
    let carousel = loaded.and_then(|p| carousel_next(&p.html));
    let scrolls = match (&input.rendered, &input.scrolled) {
        (Some(before), Some(after)) => {
            count_matches(&images, &after.html) > count_matches(&images, &before.html)
        }
        _ => false,
    };
    let responses: Vec<CapturedJson> = {
        let mut all: Vec<CapturedJson> = Vec::new();
        for page in [&input.rendered, &input.scrolled].into_iter().flatten() {
            for r in &page.json {
                if !all
                    .iter()
                    .any(|a| a.url == r.url && a.request_body == r.request_body)
                {
                    all.push(r.clone());
                }
            }
        }
        all
    };
    let api = api_rules(&responses);
    let mut draft = Draft {
        toml: String::new(),
        name: name_for(&input.url),
        render: RenderMode::Static,
        images,
        api,
        next,
        load_more,
        overlays,
        carousel,
        scroll_element: None,
        follow: None,
        notes: Vec::new(),
        scrolls,
        found_static: 0,
        found_rendered: 0,
        wait_for: input.wait_for.clone(),
        page_timeout: input.page_timeout.clone(),
    };
    draft.found_static = found(&draft, &input.url, input.static_page.as_ref());
    draft.found_rendered = found(
        &draft,
        &input.url,
        richest.filter(|_| input.rendered.is_some()),
    );
    draft.render = input.render.unwrap_or_else(|| choose_render(&draft, input));
    if draft.render == RenderMode::Static
        && let (Some(page), Some(served)) = (&input.static_page, &served)
    {
        // A static run reads the served HTML: every selector is drafted from it.
        draft.images = image_groups(&page.html, ClassNames::Only(served));
        draft.next = next_link(&page.html, &page.url);
        draft.found_static = found(&draft, &input.url, Some(page));
    }
    let shown = match draft.render {
        RenderMode::Static => input.static_page.as_ref(),
        _ => richest,
    };
    if let Some(page) = shown {
        draft.follow = detail_links(&page.html, &page.url, &draft.images);
    }
    if let Some(page) = richest.filter(|_| input.rendered.is_some()) {
        draft.scroll_element = layout::scroll_container(&page.html, &draft.images);
        draft.notes = layout::hidden_content(&page.html, &page.url, &draft.images);
    }
    draft.notes.extend(undecided(&draft));
    cite_extracted_examples(&mut draft, &input.url, shown);
    draft.toml = write_toml(&draft, &input.url);
    draft
}

/// What the draft proposes without being sure, or leaves out, said for the author.
fn undecided(draft: &Draft) -> Vec<String> {
    let mut notes = Vec::new();
    let browser_used = draft.render != RenderMode::Static;
    for overlay in draft.overlays.iter().filter(|o| browser_used && !o.sure) {
        notes.push(format!(
            "could not tell whether {} ({}) closes an overlay that hides the gallery: `dismiss` for it is commented out",
            quoted(&overlay.control.selector),
            quoted(&overlay.control.text),
        ));
    }
    if let Some(carousel) = &draft.carousel {
        let selector = quoted(&carousel.control.selector);
        if !carousel.sure {
            notes.push(format!(
                "could not tell whether {selector} is a carousel's \"next\" control: its `click` is commented out"
            ));
        } else if draft.load_more.is_some() {
            notes.push(format!(
                "{selector} looks like a carousel's \"next\" control, but `click` is the \"load more\" button's: it is commented out"
            ));
        } else if browser_used {
            notes.push(format!(
                "clicking {selector} goes on while each click shows new images and stops when a slide comes back or the control is disabled; count the slides with `scrape probe`"
            ));
        } else {
            notes.push(format!(
                "a carousel ({selector}) was found; with `render = \"static\"` its slides are read from the served HTML as they are, nothing is clicked"
            ));
        }
    }
    if let Some(follow) = &draft.follow {
        notes.push(format!(
            "the gallery's thumbnails link to {} page(s) of the site, e.g. {}; those pages were not opened, so `[[follow]]` and its level are commented out: probe one, write the level's image rule, and uncomment",
            follow.pages, follow.example
        ));
    }
    if draft.has_fallback_rule() {
        notes.push(
            "no repeated gallery was found: the image rule takes every image of the page".into(),
        );
    }
    notes
}

/// Every class of `html`'s elements.
fn classes_in(html: &str) -> BTreeSet<String> {
    crate::page::parse_html(html)
        .root_element()
        .descendants()
        .filter_map(scraper::ElementRef::wrap)
        .flat_map(|e| e.value().classes().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The example each rule's comment cites: the first URL the real extractor takes with the
/// rule on `page` (a `srcset`'s widest, say, where the page's first-written URL is another),
/// so the comment names what the rule will find.
fn cite_extracted_examples(draft: &mut Draft, url: &Url, page: Option<&PageSnapshot>) {
    let taken = accepted(draft, url, page);
    let first_of = |rule: &str| {
        taken
            .iter()
            .find(|(r, _)| r == rule)
            .map(|(_, url)| url.clone())
    };
    for (index, group) in draft.images.iter_mut().enumerate() {
        if let Some(url) = first_of(&image_rule_name(index)) {
            group.example = url;
        }
    }
}

/// `static` when the plain HTML already shows every image the browser finds and nothing needs
/// the browser (JSON, scrolling, clicking); `browser` otherwise.
fn choose_render(draft: &Draft, input: &DraftInput) -> RenderMode {
    if input.rendered.is_none() {
        return RenderMode::Static;
    }
    let needs_browser = !draft.api.is_empty() || draft.scrolls || draft.load_more.is_some();
    if !needs_browser && draft.found_static > 0 && draft.found_static >= draft.found_rendered {
        RenderMode::Static
    } else {
        RenderMode::Browser
    }
}

/// Elements the drafted selectors match in `html`.
fn count_matches(groups: &[ImageGroup], html: &str) -> usize {
    let document = crate::page::parse_html(html);
    groups
        .iter()
        .filter_map(|g| Selector::parse(&g.selector).ok())
        .map(|s| document.select(&s).count())
        .sum()
}

/// Image URLs the drafted image and api rules accept on `page`, by the real extractor.
fn found(draft: &Draft, url: &Url, page: Option<&PageSnapshot>) -> usize {
    accepted(draft, url, page).len()
}

/// The rule and URL of each image the drafted image and api rules accept on `page`, by the
/// real extractor, in page order.
fn accepted(draft: &Draft, url: &Url, page: Option<&PageSnapshot>) -> Vec<(String, String)> {
    let Some(page) = page else {
        return Vec::new();
    };
    let rules = Draft {
        render: RenderMode::Browser,
        next: None,
        ..draft.clone()
    };
    let Some(profile) = profile::check(&write_toml(&rules, url)).profile else {
        return Vec::new();
    };
    let position = first_page(&profile.pagination, url);
    analyze_page(&profile, url, &position, page)
        .accepted()
        .map(|c| (c.rule.clone(), c.url.to_string()))
        .collect()
}

/// The name of the draft's `index`th `[[images]]` rule.
fn image_rule_name(index: usize) -> String {
    match index {
        0 => "gallery".to_owned(),
        n => format!("gallery-{}", n + 1),
    }
}

/// A profile name from the page's host and path, so drafts of two pages of one site differ:
/// `https://www.example.com/gallery/cats/` → `example-com-gallery-cats`. Lowercase letters,
/// digits and `-`, at most [`MAX_NAME_CHARS`]; a page file's `.html` (and `index.html`) and
/// the port are left out, the query is kept.
fn name_for(url: &Url) -> String {
    let host = url.host_str().unwrap_or("site");
    let host = host.strip_prefix("www.").unwrap_or(host);
    let mut path = url.path().to_owned();
    for page in ["index.html", "index.htm", "index.php"] {
        if path.ends_with(page) {
            path.truncate(path.len() - page.len());
        }
    }
    for extension in [".html", ".htm", ".php", ".aspx", ".asp", ".jsp"] {
        if path.ends_with(extension) {
            path.truncate(path.len() - extension.len());
        }
    }
    let words = format!("{host} {path} {}", url.query().unwrap_or_default());
    let mut name = String::new();
    for c in words.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    // All ASCII, so any byte index is a character boundary.
    name.truncate(MAX_NAME_CHARS);
    let name = name.trim_matches('-');
    if name.is_empty() {
        "site".to_owned()
    } else {
        name.to_owned()
    }
}

impl Draft {
    /// `[[images]]` rules the draft holds: the gallery's, or the every-image rule written when
    /// none was found.
    pub fn image_rules(&self) -> usize {
        if self.has_fallback_rule() {
            1
        } else {
            self.images.len()
        }
    }

    /// `[[api]]` rules the draft holds: none unless rendered in the browser.
    pub fn api_rules(&self) -> usize {
        if self.render == RenderMode::Static {
            0
        } else {
            self.api.len()
        }
    }

    /// What the draft proposes beyond its image rules and pagination, as written in it:
    /// `dismiss`, a click, `scroll_element`, `[[follow]]`.
    pub fn proposals(&self) -> Vec<&'static str> {
        let browser = self.render != RenderMode::Static;
        let carousel = self.carousel.as_ref();
        let carousel_clicked = carousel.is_some_and(|c| c.sure) && self.load_more.is_none();
        [
            (browser && self.overlays.iter().any(|o| o.sure), "dismiss"),
            (
                browser && self.overlays.iter().any(|o| !o.sure),
                "dismiss (commented out)",
            ),
            (browser && self.load_more.is_some(), "a load-more click"),
            (browser && carousel_clicked, "a carousel click"),
            (
                browser && carousel.is_some() && !carousel_clicked,
                "a carousel click (commented out)",
            ),
            (browser && self.scroll_element.is_some(), "scroll_element"),
            (self.follow.is_some(), "[[follow]] (commented out)"),
        ]
        .into_iter()
        .filter_map(|(written, what)| written.then_some(what))
        .collect()
    }

    /// Whether no gallery and no API rule was found, so the draft takes every image.
    fn has_fallback_rule(&self) -> bool {
        self.images.is_empty() && self.api_rules() == 0
    }
}

/// `text` as comment lines of about 96 characters at most, the first starting `#`, the others
/// `continuation` (both followed by a space).
fn write_comment(t: &mut String, text: &str, continuation: &str) {
    let mut line = "#".to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.len() + word.len() >= 96 {
            let _ = writeln!(t, "{line}");
            line = continuation.to_owned();
        }
        line.push(' ');
        line.push_str(word);
        empty = false;
    }
    let _ = writeln!(t, "{line}");
}

/// `dismiss`: the sure buttons as is; with any unsure one, the whole list commented out below.
fn write_dismiss(t: &mut String, overlays: &[Overlay]) {
    if overlays.is_empty() {
        return;
    }
    let list = |sure_only: bool| {
        overlays
            .iter()
            .filter(|o| o.sure || !sure_only)
            .map(|o| quoted(&o.control.selector))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sure: Vec<&Overlay> = overlays.iter().filter(|o| o.sure).collect();
    if !sure.is_empty() {
        let texts: Vec<String> = sure.iter().map(|o| quoted(&o.control.text)).collect();
        let _ = writeln!(
            t,
            "# Overlays clicked away first: {} in a {}.",
            texts.join(", "),
            sure[0].control.convention
        );
        let _ = writeln!(t, "dismiss = [{}]", list(true));
    }
    if sure.len() < overlays.len() {
        let _ = writeln!(
            t,
            "# Perhaps overlays too (a dialog or fixed element): uncomment if they hide the gallery."
        );
        let _ = writeln!(t, "# dismiss = [{}]", list(false));
    }
}

/// `[[follow]]` and its level, commented out: the linked pages were not seen.
fn write_follow(t: &mut String, follow: &DetailLinks) {
    let _ = writeln!(t);
    write_comment(
        t,
        &format!(
            "The thumbnails link to {} page(s) of the site (e.g. {}), often holding the originals. Probe one, write its image rule, and uncomment:",
            follow.pages, follow.example
        ),
        "#",
    );
    let _ = writeln!(t, "# [[follow]]");
    let _ = writeln!(t, "# selector = {}", quoted(&follow.selector));
    let _ = writeln!(t, "# level = \"detail\"");
    let _ = writeln!(t, "#");
    let _ = writeln!(t, "# [levels.detail]");
    let _ = writeln!(t, "# [[levels.detail.images]]");
    let _ = writeln!(t, "# selector = \"main img\"");
}

/// A TOML string: basic quotes when nothing needs escaping, else a literal string.
fn quoted(text: &str) -> String {
    let plain = !text.contains(['"', '\\']) && !text.chars().any(char::is_control);
    if plain {
        format!("\"{text}\"")
    } else if !text.contains('\'') && !text.chars().any(char::is_control) {
        format!("'{text}'")
    } else {
        toml::Value::String(text.to_owned()).to_string()
    }
}

fn write_toml(draft: &Draft, url: &Url) -> String {
    let mut t = String::new();
    let render_name = match draft.render {
        RenderMode::Static => "static",
        RenderMode::Browser => "browser",
        RenderMode::Auto => "auto",
    };
    let browser_used = draft.render != RenderMode::Static;
    // Writing to a String cannot fail.
    let _ = writeln!(t, "# Drafted by `scrape new-profile` from {url}");
    let _ = writeln!(
        t,
        "# A starting point: check what it finds with `scrape probe --profile FILE --url URL`,"
    );
    let _ = writeln!(
        t,
        "# edit, and validate with `scrape check --profile FILE`."
    );
    if !draft.notes.is_empty() {
        let _ = writeln!(
            t,
            "#\n# Left to you (the draft could not decide or read these):"
        );
        for note in &draft.notes {
            write_comment(&mut t, &format!("- {note}"), "#  ");
        }
    }
    let _ = writeln!(t, "name = {}", quoted(&draft.name));
    let _ = writeln!(t, "start = [{}]", quoted(url.as_str()));
    let why = match draft.render {
        RenderMode::Static if draft.found_static > 0 => format!(
            "The page's HTML already holds the images ({} found without a browser).",
            draft.found_static
        ),
        RenderMode::Static => "Plain HTTP: the page is not rendered.".to_owned(),
        RenderMode::Browser => format!(
            "The images appear only once scripts have run ({} found without a browser, {} with).",
            draft.found_static, draft.found_rendered
        ),
        RenderMode::Auto => {
            "plain HTTP first, the browser for pages where that finds none".to_owned()
        }
    };
    let _ = writeln!(t, "# {why}");
    let _ = writeln!(t, "render = \"{render_name}\"");

    match &draft.next {
        Some(next) => {
            let _ = writeln!(t, "\n[pagination]");
            let _ = writeln!(
                t,
                "# The page's link to the next one ({}, by its {}).",
                quoted(&next.text),
                next.convention
            );
            let _ = writeln!(t, "kind = \"next_link\"");
            let _ = writeln!(t, "selector = {}", quoted(&next.selector));
            let _ = writeln!(t, "# max_pages = 5  # while trying the profile out");
        }
        None => {
            let _ = writeln!(
                t,
                "\n# No next-page link found: one page per start URL. See the"
            );
            let _ = writeln!(
                t,
                "# `[pagination]` kinds in docs/profiles.md if the site has more."
            );
        }
    }

    let rendered_with = draft.wait_for.is_some() || draft.page_timeout.is_some();
    let acts = draft.scrolls
        || draft.load_more.is_some()
        || !draft.overlays.is_empty()
        || draft.carousel.is_some()
        || draft.scroll_element.is_some();
    if browser_used && (acts || rendered_with) {
        let _ = writeln!(t, "\n[browser]");
        if let Some(selector) = &draft.wait_for {
            let _ = writeln!(t, "# The page was rendered waiting for this element.");
            let _ = writeln!(t, "wait_for = {}", quoted(selector));
        }
        if let Some(timeout) = &draft.page_timeout {
            let _ = writeln!(t, "page_timeout = {}", quoted(timeout));
        }
        write_dismiss(&mut t, &draft.overlays);
        if let Some(button) = &draft.load_more {
            let _ = writeln!(t, "# A {} button loads more items.", quoted(&button.text));
            let _ = writeln!(t, "click = {}", quoted(&button.selector));
        }
        if let Some(carousel) = &draft.carousel {
            let certain = carousel.sure && draft.load_more.is_none();
            let _ = writeln!(
                t,
                "# A carousel's \"next\" control ({}){}.",
                quoted(&carousel.control.text),
                if carousel.sure { "" } else { ", perhaps" }
            );
            let line = format!("click = {}", quoted(&carousel.control.selector));
            let _ = writeln!(t, "{}{line}", if certain { "" } else { "# " });
        }
        if let Some(element) = &draft.scroll_element {
            let _ = writeln!(
                t,
                "# The gallery scrolls inside this element, not the window."
            );
            let _ = writeln!(t, "scroll = {DRAFT_SCROLLS}");
            let _ = writeln!(t, "scroll_element = {}", quoted(element));
        } else if draft.scrolls {
            let _ = writeln!(t, "# The page grew when scrolled: infinite scroll.");
            let _ = writeln!(t, "scroll = {DRAFT_SCROLLS}");
        }
    }

    let _ = writeln!(t, "\n[download]");
    let _ = writeln!(t, "# A folder of this draft's own, named like it.");
    let _ = writeln!(t, "out = {}", quoted(&format!("downloads/{}", draft.name)));

    for (index, group) in draft.images.iter().enumerate() {
        let _ = writeln!(t, "\n[[images]]");
        let _ = writeln!(
            t,
            "# {} image(s) in {} repeated `{}` element(s), e.g. {}",
            group.elements, group.containers, group.container, group.example
        );
        let _ = writeln!(t, "name = \"{}\"", image_rule_name(index));
        let _ = writeln!(t, "selector = {}", quoted(&group.selector));
        if group.all_have_alt {
            let _ = writeln!(t, "metadata = {{ title = \"@alt\" }}");
        }
    }
    if browser_used {
        for (index, api) in draft.api.iter().enumerate() {
            let _ = writeln!(t, "\n[[api]]");
            let _ = writeln!(
                t,
                "# {} item(s) with an image in {} response(s) to {}, e.g. {}",
                api.items_found, api.responses, api.seen, api.example
            );
            let name = match index {
                0 => "api".to_owned(),
                n => format!("api-{}", n + 1),
            };
            let _ = writeln!(t, "name = \"{name}\"");
            let _ = writeln!(t, "url = {}", quoted(&api.url));
            let _ = writeln!(t, "items = {}", quoted(&api.items));
            let _ = writeln!(t, "image = {}", quoted(&api.image));
            if let Some(id) = &api.id {
                let _ = writeln!(t, "id = {}", quoted(id));
            }
            if let Some(title) = &api.title {
                let _ = writeln!(t, "metadata = {{ title = {} }}", quoted(title));
            }
        }
    }
    if let Some(follow) = &draft.follow {
        write_follow(&mut t, follow);
    }
    if draft.has_fallback_rule() {
        let _ = writeln!(t, "\n[[images]]");
        let _ = writeln!(
            t,
            "# No repeated gallery was found: every image of the page. Narrow the selector."
        );
        let _ = writeln!(t, "name = \"images\"");
        let _ = writeln!(t, "selector = \"img, [style*=background]\"");
    }
    t
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn page(url: &str, html: &str) -> PageSnapshot {
        PageSnapshot::html(Url::parse(url).unwrap(), html.to_owned())
    }

    fn input(
        static_html: Option<&str>,
        rendered: Option<&str>,
        scrolled: Option<&str>,
    ) -> DraftInput {
        let url = "http://a.test/gallery/";
        DraftInput {
            url: Url::parse(url).unwrap(),
            static_page: static_html.map(|h| page(url, h)),
            rendered: rendered.map(|h| page(url, h)),
            scrolled: scrolled.map(|h| page(url, h)),
            render: None,
            wait_for: None,
            page_timeout: None,
        }
    }

    fn assert_checks(draft: &Draft) -> profile::Profile {
        let checked = profile::check(&draft.toml);
        assert!(
            checked.diagnostics.is_empty(),
            "{:?}\n{}",
            checked.diagnostics,
            draft.toml
        );
        checked.profile.expect("a profile")
    }

    const GALLERY: &str = r#"<body><main class="gallery">
        <figure><img src="/img/1.jpg" alt="one"></figure>
        <figure><img src="/img/2.jpg" alt="two"></figure>
        <figure><img src="/img/3.jpg" alt="three"></figure>
      </main><a class="next" rel="next" href="/gallery/2">Next</a></body>"#;

    #[test]
    fn a_static_gallery_drafts_a_static_profile_with_next_link() {
        let draft = draft_profile(&input(Some(GALLERY), Some(GALLERY), Some(GALLERY)));
        let profile = assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Static, "{}", draft.toml);
        assert_eq!((draft.found_static, draft.found_rendered), (3, 3));
        assert_eq!(profile.images.len(), 1);
        assert!(
            draft.toml.contains("selector = \".gallery figure img\""),
            "{}",
            draft.toml
        );
        assert!(
            draft.toml.contains("kind = \"next_link\""),
            "{}",
            draft.toml
        );
        assert!(
            draft.toml.contains("metadata = { title = \"@alt\" }"),
            "{}",
            draft.toml
        );
        assert!(!draft.toml.contains("[browser]"), "{}", draft.toml);
    }

    #[test]
    fn images_only_scripts_show_make_a_browser_profile_and_scrolling_growth_scrolls() {
        let empty = r#"<body><div id="gallery"></div></body>"#;
        let items = |n: usize| {
            let divs: String = (0..n)
                .map(|i| format!("<div class=\"item\"><img class=\"lazy\" src=\"data:,\" data-src=\"/img/{i}.jpg\"></div>"))
                .collect();
            format!("<body><div id=\"gallery\">{divs}</div></body>")
        };
        let draft = draft_profile(&input(Some(empty), Some(&items(4)), Some(&items(12))));
        assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Browser, "{}", draft.toml);
        assert!(draft.scrolls);
        assert!(draft.toml.contains("scroll = 20"), "{}", draft.toml);
        assert!(
            draft.toml.contains("selector = \"#gallery div.item img\""),
            "{}",
            draft.toml
        );
        assert_eq!((draft.found_static, draft.found_rendered), (0, 12));
    }

    #[test]
    fn json_images_and_a_load_more_button_make_api_rules_and_a_click() {
        let html = r#"<body><div id="app"><ul><li>a</li><li>b</li></ul><button id="more">Load more</button></div></body>"#;
        let mut rendered = page("http://a.test/spa/", html);
        rendered.json.push(CapturedJson {
            url: "http://a.test/spa/api/items".into(),
            method: "POST".into(),
            request_body: Some("{\"cursor\":null}".into()),
            status: 200,
            body: json!({ "items": [
                { "id": "1", "title": "a", "image": { "url": "/img/a.jpg" } },
                { "id": "2", "title": "b", "image": { "url": "/img/b.jpg" } },
            ], "next_cursor": "c2" }),
        });
        let draft = draft_profile(&DraftInput {
            url: Url::parse("http://a.test/spa/").unwrap(),
            static_page: Some(page(
                "http://a.test/spa/",
                "<body><div id=app></div></body>",
            )),
            scrolled: Some(rendered.clone()),
            rendered: Some(rendered),
            render: None,
            wait_for: None,
            page_timeout: None,
        });
        let profile = assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Browser);
        assert_eq!(profile.api.len(), 1, "{}", draft.toml);
        assert!(profile.images.is_empty(), "{}", draft.toml);
        assert!(draft.toml.contains("click = \"#more\""), "{}", draft.toml);
        assert!(
            draft.toml.contains("url = \"/spa/api/items$\""),
            "{}",
            draft.toml
        );
        assert!(
            draft.toml.contains("image = \"$.image.url\""),
            "{}",
            draft.toml
        );
        assert_eq!(draft.found_rendered, 2);
    }

    #[test]
    fn a_static_draft_names_no_class_a_script_added() {
        // metafizzy's demos: a script adds `are-images-ready` to the grid once images load.
        let served = r#"<body><div class="grid"><div class="grid__item"><img src="/1.jpg"></div>
            <div class="grid__item"><img src="/2.jpg"></div></div>
            <p><a class="pagination__next" href="/gallery/2">Next</a></p></body>"#;
        let rendered = served.replace(r#"class="grid""#, r#"class="are-images-ready grid""#);
        let draft = draft_profile(&input(Some(served), Some(&rendered), Some(&rendered)));
        assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Static, "{}", draft.toml);
        assert!(!draft.toml.contains("are-images-ready"), "{}", draft.toml);
        assert!(
            draft
                .toml
                .contains("selector = \".grid div.grid__item img\""),
            "{}",
            draft.toml
        );
        assert!(
            draft.toml.contains("selector = \"a.pagination__next\""),
            "{}",
            draft.toml
        );
        assert_eq!(draft.found_static, 2);
    }

    #[test]
    fn the_comment_cites_the_url_the_rule_takes() {
        // The first URL written is the srcset's narrow one; the extractor takes the widest.
        let html = r#"<body><ul class="grid">
            <li><img srcset="/a-small.jpg 200w, /a-large.jpg 1200w" src="/a-small.jpg"></li>
            <li><img srcset="/b-small.jpg 200w, /b-large.jpg 1200w" src="/b-small.jpg"></li>
          </ul></body>"#;
        let draft = draft_profile(&input(Some(html), None, None));
        assert_checks(&draft);
        let profile = profile::check(&draft.toml).profile.unwrap();
        let page = page("http://a.test/gallery/", html);
        let url = page.url.clone();
        let position = first_page(&profile.pagination, &url);
        let analysis = analyze_page(&profile, &url, &position, &page);
        let taken = analysis.accepted().next().unwrap().url.to_string();
        assert_eq!(taken, "http://a.test/a-large.jpg");
        let comment = draft
            .toml
            .lines()
            .find(|l| l.contains("e.g."))
            .unwrap_or_default();
        assert!(
            comment.ends_with(&format!("e.g. {taken}")),
            "{}",
            draft.toml
        );
    }

    #[test]
    fn wait_for_and_page_timeout_go_into_a_browser_draft() {
        let mut i = input(Some("<body></body>"), Some(GALLERY), Some(GALLERY));
        i.wait_for = Some(".gallery figure".into());
        i.page_timeout = Some("90s".into());
        let draft = draft_profile(&i);
        let profile = assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Browser, "{}", draft.toml);
        assert_eq!(profile.browser.wait_for.as_deref(), Some(".gallery figure"));
        assert_eq!(
            profile.browser.page_timeout,
            std::time::Duration::from_secs(90)
        );
    }

    #[test]
    fn a_page_without_a_gallery_still_drafts_a_valid_profile() {
        let draft = draft_profile(&input(Some("<body><p>hello</p></body>"), None, None));
        assert_checks(&draft);
        assert_eq!(draft.render, RenderMode::Static);
        assert!(draft.toml.contains("No repeated gallery"), "{}", draft.toml);
    }

    #[test]
    fn a_forced_static_render_leaves_browser_only_rules_out() {
        let mut i = input(Some(GALLERY), Some(GALLERY), Some(GALLERY));
        i.render = Some(RenderMode::Static);
        if let Some(r) = i.rendered.as_mut() {
            r.json.push(CapturedJson {
                url: "http://a.test/api/x".into(),
                method: "GET".into(),
                request_body: None,
                status: 200,
                body: json!({ "items": [{ "src": "/a.jpg" }] }),
            });
        }
        let draft = draft_profile(&i);
        assert_checks(&draft);
        assert!(!draft.toml.contains("[[api]]"), "{}", draft.toml);
    }

    #[test]
    fn every_forced_render_with_json_and_buttons_drafts_a_valid_profile() {
        for mode in [RenderMode::Static, RenderMode::Browser, RenderMode::Auto] {
            let html = r#"<body><ul class="grid"><li><img src="/1.jpg"></li><li><img src="/2.jpg"></li></ul>
                <button id="more">Load more</button></body>"#;
            let mut i = input(Some(html), Some(html), Some(html));
            i.render = Some(mode);
            if let Some(r) = i.rendered.as_mut() {
                r.json.push(CapturedJson {
                    url: "http://a.test/api/x?page=1".into(),
                    method: "GET".into(),
                    request_body: None,
                    status: 200,
                    body: json!({ "items": [{ "full": "/a.jpg", "thumb": "/a-t.jpg" }] }),
                });
            }
            let draft = draft_profile(&i);
            assert_eq!(draft.render, mode);
            assert_checks(&draft);
        }
    }

    #[test]
    fn a_draft_without_a_gallery_counts_its_every_image_rule() {
        let draft = draft_profile(&input(
            Some("<body><img src=\"/a.jpg\"></body>"),
            None,
            None,
        ));
        let profile = assert_checks(&draft);
        assert_eq!(profile.images.len(), 1, "{}", draft.toml);
        assert_eq!(draft.image_rules(), 1, "the summary said 0 image rule(s)");
        assert_eq!(draft.api_rules(), 0);
        assert!(draft.proposals().is_empty());
        let gallery = draft_profile(&input(Some(GALLERY), None, None));
        assert_eq!(gallery.image_rules(), 1);
    }

    #[test]
    fn drafts_of_two_pages_of_one_site_have_names_and_out_folders_of_their_own() {
        let mut cats = input(Some(GALLERY), None, None);
        cats.url = Url::parse("https://www.example.com/gallery/cats/").unwrap();
        let mut dogs = cats.clone();
        dogs.url = Url::parse("https://www.example.com/gallery/dogs/").unwrap();
        let (cats, dogs) = (draft_profile(&cats), draft_profile(&dogs));
        let (c, d) = (assert_checks(&cats), assert_checks(&dogs));
        assert_eq!(c.name, "example-com-gallery-cats");
        assert_eq!(d.name, "example-com-gallery-dogs");
        assert_eq!(
            c.download.out,
            std::path::PathBuf::from("downloads/example-com-gallery-cats")
        );
        assert!(
            cats.toml.contains("[download]\n# A folder"),
            "{}",
            cats.toml
        );
        assert_ne!(c.download.out, d.download.out);
    }

    /// What a rendered page shows beyond its gallery, proposed in the draft.
    #[test]
    fn rendered_pages_draft_their_overlays_buttons_links_and_scroll_element() {
        let thumbs: String = (1..=4)
            .map(|i| format!(r#"<figure><a class="thumb" href="/photo/{i}"><img src="/t/{i}.jpg"></a></figure>"#))
            .collect();
        let gallery = format!(r#"<section class="gallery">{thumbs}</section>"#);
        // (case, rendered body, lines the draft holds, lines it must not hold).
        type Case = (
            &'static str,
            String,
            &'static [&'static str],
            &'static [&'static str],
        );
        let cases: [Case; 6] = [
            (
                "a consent banner is dismissed",
                format!(
                    r#"<div id="cookie-banner"><button class="accept">Accept all</button></div>{gallery}"#
                ),
                &["dismiss = [\"button.accept\"]"],
                &["# dismiss"],
            ),
            (
                "a close button in a dialog is only suggested",
                format!(
                    r#"<div role="dialog" class="promo"><button class="close">Close</button></div>{gallery}"#
                ),
                &[
                    "# dismiss = [\"button.close\"]",
                    "could not tell whether \"button.close\"",
                ],
                &["\ndismiss ="],
            ),
            (
                "thumbnails linking to detail pages are followed, commented out",
                gallery.clone(),
                &[
                    "# [[follow]]",
                    "# selector = \".gallery figure a.thumb\"",
                    "# [levels.detail]",
                    "link to 4 page(s)",
                ],
                &["\n[[follow]]"],
            ),
            (
                "an add content button is clicked",
                format!(r#"{gallery}<button id="add">Add content</button>"#),
                &["click = \"#add\""],
                &[],
            ),
            (
                "a carousel's next control is clicked",
                format!(
                    r#"<div class="carousel"><div class="slides">{thumbs}</div><button class="carousel-next" aria-label="Next slide">›</button></div>"#
                ),
                &[
                    "click = \"button.carousel-next\"",
                    "goes on while each click shows new images",
                ],
                &[],
            ),
            (
                "a scroll container and a frame",
                format!(
                    r#"<div id="feed" data-scrape-scrolls>{gallery}</div><iframe src="https://video.test/x"></iframe>"#
                ),
                &[
                    "scroll_element = \"#feed\"",
                    "scroll = 20",
                    "found 1 iframe(s)",
                    "cross-origin frames are not read",
                ],
                &[],
            ),
        ];
        let mut failures = Vec::new();
        for (case, body, holds, lacks) in cases {
            let html = format!("<body>{body}</body>");
            let draft = draft_profile(&input(Some("<body></body>"), Some(&html), Some(&html)));
            assert_checks(&draft);
            for line in holds.iter().filter(|l| !draft.toml.contains(*l)) {
                failures.push(format!("{case}: lacks {line:?}\n{}", draft.toml));
            }
            for line in lacks.iter().filter(|l| draft.toml.contains(*l)) {
                failures.push(format!("{case}: holds {line:?}\n{}", draft.toml));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn names_and_strings_are_safe_toml() {
        // (page URL, drafted name).
        let names = [
            (
                "https://www.example.com/gallery/cats/",
                "example-com-gallery-cats",
            ),
            (
                "https://www.example.com/gallery/dogs",
                "example-com-gallery-dogs",
            ),
            ("http://127.0.0.1:8080/", "127-0-0-1"),
            ("http://a.test/albums/index.html", "a-test-albums"),
            (
                "http://a.test/p/page-2.html?sort=new&Tag=x",
                "a-test-p-page-2-sort-new-tag-x",
            ),
            (
                "http://a.test/%E2%9C%93/caf%C3%A9",
                "a-test-e2-9c-93-caf-c3-a9",
            ),
        ];
        for (url, name) in names {
            assert_eq!(name_for(&Url::parse(url).unwrap()), name, "{url}");
        }
        let long =
            name_for(&Url::parse(&format!("http://a.test/{}/", "word-".repeat(40))).unwrap());
        assert!(
            long.len() <= MAX_NAME_CHARS && !long.ends_with('-'),
            "{long}"
        );
        assert_eq!(quoted("a.b"), "\"a.b\"");
        assert_eq!(quoted(r#"a[rel~="next"]"#), r#"'a[rel~="next"]'"#);
        assert_eq!(quoted(r"\d+"), r"'\d+'");
        let odd = quoted("it's \"x\"");
        assert_eq!(
            toml::from_str::<toml::Table>(&format!("k = {odd}")).unwrap()["k"].as_str(),
            Some("it's \"x\"")
        );
    }
}
