//! Fuzz entry points: one function per parser that reads user or site input, each taking raw
//! bytes and calling the same functions the program calls. None of them may panic, whatever the
//! bytes. The `fuzz/` folder (cargo-fuzz, nightly) and the stable mutation test in
//! `tests/fuzz.rs` both run every target of [`TARGETS`], the latter through [`mutation`], which
//! the I/O crate's mutation test shares.

pub mod mutation;

use std::path::Path;
use std::sync::OnceLock;

use url::Url;

use crate::analyze::analyze_page;
use crate::extract::css::background_image_urls;
use crate::extract::extract_json_images;
use crate::extract::srcset::{parse_srcset, pick_candidates, select_at_density_one};
use crate::page::{CapturedJson, PageSnapshot};
use crate::paginate::first_page;
use crate::profile::{self, Pick, Profile};
use crate::replay::har::Har;
use crate::replay::matching::{MatchRules, request_key};

/// A fuzz target: its name (the `fuzz/fuzz_targets/NAME.rs` it runs from) and its entry point.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every fuzz target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "profile",
        run: profile,
    },
    Target {
        name: "har",
        run: har,
    },
    Target {
        name: "srcset",
        run: srcset,
    },
    Target {
        name: "css_url",
        run: css_url,
    },
    Target {
        name: "json_path",
        run: json_path,
    },
    Target {
        name: "page",
        run: page,
    },
];

/// A profile's text, checked as `profile::load` checks a file, with every diagnostic rendered.
pub fn profile(data: &[u8]) {
    let source = String::from_utf8_lossy(data);
    let checked = profile::check(&source);
    for diagnostic in &checked.diagnostics {
        let _ = diagnostic.render("fuzz.toml", &source).to_string();
    }
}

/// A HAR recording, parsed and checked as a replay reads it, and its requests keyed.
pub fn har(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(har) = Har::parse(&text, Path::new("fuzz.har")) else {
        return;
    };
    let rules = MatchRules::default();
    for entry in &har.log.entries {
        let _ = entry.response.content.body();
        let _ = entry.has_image_body();
        let Ok(url) = Url::parse(&entry.request.url) else {
            continue;
        };
        let post = entry.request.post_data.as_ref();
        let _ = request_key(
            &rules,
            &entry.request.method,
            &url,
            post.map(|p| p.mime_type.as_str()),
            post.map(|p| p.text.as_bytes()),
        );
    }
}

/// A `srcset` attribute, parsed and picked from by every `pick`.
pub fn srcset(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let candidates = parse_srcset(&text);
    let _ = select_at_density_one(&candidates);
    for pick in [Pick::Largest, Pick::All, Pick::First] {
        let _ = pick_candidates(candidates.clone(), pick);
    }
}

/// An inline `style`, read for its background image `url()`s.
pub fn css_url(data: &[u8]) {
    let _ = background_image_urls(&String::from_utf8_lossy(data));
}

/// A JSONPath, compiled where a profile compiles it (an `[[api]]` rule's `items`) and, when it
/// compiles, evaluated against a captured response.
pub fn json_path(data: &[u8]) {
    let source = json_path_profile(&String::from_utf8_lossy(data));
    let Some(profile) = profile::check(&source).profile else {
        return;
    };
    let response = CapturedJson {
        url: "http://127.0.0.1/api".to_owned(),
        method: "GET".to_owned(),
        request_body: None,
        status: 200,
        body: serde_json::json!({
            "items": [{"url": "/a.jpg", "n": 1}, {"url": "b.png", "tags": ["x", null]}],
            "url": "c.gif",
        }),
    };
    let _ = extract_json_images(&profile.api, &[response]);
}

/// A profile whose one `[[api]]` rule reads its items at `path`.
pub fn json_path_profile(path: &str) -> String {
    format!(
        "name = \"fuzz\"\nstart = [\"http://127.0.0.1/\"]\nrender = \"browser\"\n\n\
         [[api]]\nname = \"fuzz\"\nurl = \"/api\"\nitems = {}\nimage = \"$.url\"\n",
        toml::Value::String(path.to_owned())
    )
}

/// The profile [`page`] analyses pages with: image, follow and pagination rules that read
/// elements, attributes, `srcset` and inline styles.
pub const PAGE_PROFILE: &str = r#"name = "fuzz"
start = ["http://127.0.0.1/gallery/"]
render = "static"

[pagination]
kind = "next_link"
selector = "a.next, link[rel=next]"
max_pages = 5

[[images]]
name = "photos"
selector = "img, picture source, .tile, [style]"
pick = "largest"
metadata = { title = "@alt", label = "@aria-label" }

[[follow]]
selector = "a.detail"
level = "detail"

[[levels.detail.images]]
selector = "img"

[filters]
extensions = ["jpg", "jpeg", "png", "gif", "webp"]
"#;

/// [`PAGE_PROFILE`], checked once; `None` only if it stopped being a valid profile, which the
/// mutation test asserts against.
pub fn page_profile() -> Option<&'static Profile> {
    static PROFILE: OnceLock<Option<Profile>> = OnceLock::new();
    PROFILE
        .get_or_init(|| profile::check(PAGE_PROFILE).profile)
        .as_ref()
}

/// An HTML page, parsed and analysed with the rules of [`PAGE_PROFILE`].
pub fn page(data: &[u8]) {
    let Some(profile) = page_profile() else {
        return;
    };
    let Some(start) = profile.start.first() else {
        return;
    };
    let position = first_page(&profile.pagination, start);
    let snapshot = PageSnapshot::html(start.clone(), String::from_utf8_lossy(data).into_owned());
    let _ = analyze_page(profile, start, &position, &snapshot);
}
