//! Every fuzz target on stable: a seed corpus per target and a few thousand deterministic
//! mutations of it ([`scrape_core::fuzz::mutation`]), none of which may panic. Runs in a few seconds in a debug build; `fuzz/` runs the same targets unbounded.

use scrape_core::fuzz::mutation::{Rng, run_mutations};
use scrape_core::fuzz::{PAGE_PROFILE, TARGETS, json_path_profile, page_profile};
use scrape_core::profile::check;

/// Mutated inputs per target.
const MUTATIONS: usize = 5_000;

const VALID_PROFILE: &str = r#"name = "demo"
start = ["http://127.0.0.1:8080/gallery/"]
render = "static"

[pagination]
kind = "next_link"
selector = "a.next"
max_pages = 50

[[images]]
name = "photos"
selector = ".gallery figure img, .gallery figure .tile"
pick = "largest"
metadata = { title = "@alt", label = "@aria-label" }

[filters]
extensions = ["jpg", "jpeg", "png", "gif", "webp"]

[download]
out = "demo-output"
concurrency = 16
timeout = "30s"
retries = 3
"#;

const API_PROFILE: &str = r#"name = "api"
start = ["http://127.0.0.1:8080/photos/"]

[pagination]
kind = "json_cursor"
request = "/api/photos?limit=10"
cursor = "$.next_cursor"
after_id = "before_id"

[[api]]
name = "photos"
url = "/api/photos"
items = "$.data.items[*]"
image = "$.urls.full"
id = "$.id"
metadata = { title = "$.title", author = "$.user.name" }

[session.token]
url = "/api/token"
body = '{"client_id": "archive"}'
token = "$.access_token"
refresh_after = "50m"
"#;

const VALID_HAR: &str = r#"{"log": {"version": "1.2", "creator": {"name": "scrape", "version": "0.1"},
"entries": [
 {"startedDateTime": "2024-01-01T00:00:00Z", "time": 1,
  "request": {"method": "GET", "url": "http://127.0.0.1/api?page=2&cb=x", "httpVersion": "HTTP/1.1",
   "headers": [{"name": "Accept", "value": "*/*"}], "queryString": [], "headersSize": -1, "bodySize": 0},
  "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1",
   "headers": [{"name": "Content-Type", "value": "application/json"}],
   "content": {"size": 9, "mimeType": "application/json", "text": "{\"a\": 1}"},
   "redirectURL": "", "headersSize": -1, "bodySize": 9}},
 {"request": {"method": "POST", "url": "http://127.0.0.1/graphql",
   "postData": {"mimeType": "application/json", "text": "{\"variables\": {\"id\": 1}}"}},
  "response": {"status": 200,
   "content": {"size": 4, "mimeType": "image/png", "text": "iVBORw==", "encoding": "base64"}}}
]}}"#;

const PAGE: &str = r#"<!doctype html><html><head><base href="/photos/">
<meta name="robots" content="noimageai"><link rel="next" href="?page=2"></head>
<body><div class="gallery"><figure><img src="a.jpg" alt="A"
 srcset="a-400.jpg 400w, a-800.jpg 800w" data-src="lazy.jpg"></figure>
<picture><source srcset="b.webp 1x, b@2x.webp 2x"><img src="b.png"></picture>
<div class="tile" style="background-image: url('c.jpg'), image-set('d.jpg' 1x)"></div>
<noscript><img src="e.gif"></noscript>
<a class="detail" href="/detail/1">1</a><a class="next" href="/gallery/2">next</a></div></body></html>"#;

/// The seed corpus of target `name`.
fn seeds(name: &str) -> Vec<&'static str> {
    match name {
        "profile" => vec![
            VALID_PROFILE,
            API_PROFILE,
            "",
            "name = 1",
            "[[images]]\nselector = \"\"\n",
        ],
        "har" => vec![
            VALID_HAR,
            "\u{feff}{\"log\": {\"entries\": []}}",
            "{}",
            "[]",
            "{\"log\": 1}",
        ],
        "srcset" => vec![
            "a.jpg 400w, b.jpg 800w",
            "a.jpg 1x, b.jpg 2x",
            "data:image/png;base64,iVBO= 1x, x.jpg 2.5x",
            "a,b.jpg 10w 20h, (c.jpg), d.jpg 1e2w",
            "  , ,a.jpg",
        ],
        "css_url" => vec![
            r#"background-image: url("a.jpg"), url(b.png)"#,
            r#"background: image-set("lo.jpg" 1x, "hi.jpg" 2x) no-repeat"#,
            "background-image:\r\nurl(\x0Ca.jpg\r)",
            "mask-image: url(m.png); cursor: url(c.cur), auto",
            "background:url(a\\)b.jpg",
        ],
        "json_path" => vec![
            "$.data.items[*]",
            "$..items[?@.n > 1]",
            "$['a b'][0:3:2]",
            "$.items[?length(@.tags) == 2 && match(@.url, 'a.*')]",
            "$[-1]",
        ],
        "page" => vec![
            PAGE,
            "",
            "<img srcset=\",,,\">",
            "<div style=\"background:url(\">",
        ],
        other => panic!("no seed corpus for fuzz target `{other}`"),
    }
}

#[test]
fn every_fuzz_target_has_a_seed_corpus_and_a_fuzz_folder_entry() {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/fuzz_targets");
    for target in TARGETS {
        assert!(!seeds(target.name).is_empty(), "{}", target.name);
        let file = format!("{folder}/{}.rs", target.name);
        assert!(
            std::path::Path::new(&file).is_file(),
            "fuzz target `{}` has no {file}",
            target.name
        );
    }
}

/// The messages of the diagnostics of profile `source`.
fn diagnostics(source: &str) -> Vec<String> {
    check(source)
        .diagnostics
        .iter()
        .map(|d| d.render("fuzz.toml", source).to_string())
        .collect()
}

#[test]
fn the_page_target_analyses_with_a_valid_profile() {
    assert!(page_profile().is_some(), "{:#?}", diagnostics(PAGE_PROFILE));
}

#[test]
fn the_json_path_target_compiles_valid_paths_into_a_valid_profile() {
    for path in seeds("json_path") {
        let source = json_path_profile(path);
        assert!(
            check(&source).profile.is_some(),
            "{path}: {:#?}",
            diagnostics(&source)
        );
    }
}

#[test]
fn no_fuzz_target_panics_on_its_seeds_or_their_mutations() {
    let mut rng = Rng(0x5EED_F00D_CAFE_BEEF);
    for target in TARGETS {
        let corpus = seeds(target.name);
        run_mutations(&mut rng, target.name, target.run, &corpus, MUTATIONS);
    }
}
