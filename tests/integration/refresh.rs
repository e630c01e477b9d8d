//! Keeping a collection current: a finished job run again with `--refresh` (or a profile's
//! `stop_after_known`) walks each chain's head until it knows what it sees, then goes on from
//! the chain's old end, against a gallery that grows between runs. The gallery answers each
//! page with an `ETag` of its content and honours `If-None-Match` (or sends no `ETag` at all).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::support::{
    Background, ServerRuntime, blocks, manifest, run, scrape, text, write_changed,
};

/// A gallery `/g/1.html`, `/g/2.html`, ... linked by `a.next`, whose pages show pictures
/// `/img/{seed}.png`; pages and pictures can be added while it is served.
struct Gallery {
    pages: Arc<Mutex<Vec<Vec<u64>>>>,
    hits: Arc<Mutex<BTreeMap<String, u64>>>,
    answers: Arc<Mutex<Vec<Answer>>>,
    redrawn: Arc<Mutex<BTreeMap<u64, u64>>>,
    image_answers: Arc<Mutex<Vec<Answer>>>,
    origin: String,
    _runtime: ServerRuntime,
}

#[derive(Clone)]
struct Shared {
    pages: Arc<Mutex<Vec<Vec<u64>>>>,
    hits: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Every page answer, in order.
    answers: Arc<Mutex<Vec<Answer>>>,
    /// Pictures drawn anew (seed → times): served with other bytes and another `ETag`.
    redrawn: Arc<Mutex<BTreeMap<u64, u64>>>,
    /// Every picture answer, in order.
    image_answers: Arc<Mutex<Vec<Answer>>>,
    /// Every page answer waits this long first.
    delay: Duration,
    /// Pages carry an `ETag` of their content, and `If-None-Match` is honoured.
    etags: bool,
}

/// A page request and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    path: String,
    /// The request's `If-None-Match` or `If-Modified-Since`, if it had either.
    conditional: bool,
    status: u16,
}

impl Gallery {
    /// `pages` pages of `per_page` pictures each, seeds numbered from 1 in page order, each
    /// with an `ETag`.
    fn serve(pages: u64, per_page: u64, delay: Duration) -> Self {
        Self::serve_with(pages, per_page, delay, true)
    }

    /// [`Gallery::serve`] whose pages carry no `ETag` (nor `Last-Modified`).
    fn serve_without_validators(pages: u64, per_page: u64) -> Self {
        Self::serve_with(pages, per_page, Duration::ZERO, false)
    }

    fn serve_with(pages: u64, per_page: u64, delay: Duration, etags: bool) -> Self {
        let seeds = (0..pages)
            .map(|p| (1..=per_page).map(|i| p * per_page + i).collect())
            .collect();
        let shared = Shared {
            pages: Arc::new(Mutex::new(seeds)),
            hits: Arc::new(Mutex::new(BTreeMap::new())),
            answers: Arc::new(Mutex::new(Vec::new())),
            redrawn: Arc::new(Mutex::new(BTreeMap::new())),
            image_answers: Arc::new(Mutex::new(Vec::new())),
            delay,
            etags,
        };
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let (runtime, origin) = ServerRuntime::serve(2, app);
        Self {
            pages: shared.pages,
            hits: shared.hits,
            answers: shared.answers,
            redrawn: shared.redrawn,
            image_answers: shared.image_answers,
            origin,
            _runtime: runtime,
        }
    }

    /// Publishes `seeds` at the top of page `page` (1-based).
    fn publish_on(&self, page: usize, seeds: &[u64]) {
        let mut pages = self.pages.lock().expect("pages");
        let images = &mut pages[page - 1];
        let mut new: Vec<u64> = seeds.to_vec();
        new.append(images);
        *images = new;
    }

    /// Adds a page at the end holding `seeds`.
    fn add_page(&self, seeds: &[u64]) {
        self.pages.lock().expect("pages").push(seeds.to_vec());
    }

    /// Draws the picture of `seed` anew: the same URL serves other bytes.
    fn redraw(&self, seed: u64) {
        *self
            .redrawn
            .lock()
            .expect("redrawn")
            .entry(seed)
            .or_default() += 1;
    }

    /// The picture answers given while `act` ran: `(path, conditional, status)`, in order.
    fn image_answers_to(&self, act: impl FnOnce()) -> Vec<(String, bool, u16)> {
        let before = self.image_answers.lock().expect("answers").len();
        act();
        self.image_answers.lock().expect("answers")[before..]
            .iter()
            .map(|a| (a.path.clone(), a.conditional, a.status))
            .collect()
    }

    /// Requests so far: pages (`/g/...`) and pictures (`/img/...`), by path.
    fn hits(&self) -> BTreeMap<String, u64> {
        self.hits.lock().expect("hits").clone()
    }

    /// The page answers given while `act` ran: `(path, conditional, status)`, in order.
    fn answers_to(&self, act: impl FnOnce()) -> Vec<(String, bool, u16)> {
        let before = self.answers.lock().expect("answers").len();
        act();
        self.answers.lock().expect("answers")[before..]
            .iter()
            .map(|a| (a.path.clone(), a.conditional, a.status))
            .collect()
    }

    fn count(&self, prefix: &str) -> u64 {
        self.hits()
            .iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every picture URL the gallery shows.
    fn image_urls(&self) -> Vec<String> {
        let pages = self.pages.lock().expect("pages");
        pages
            .iter()
            .flatten()
            .map(|seed| format!("{}/img/{seed}.png", self.origin))
            .collect()
    }
}

async fn answer(
    axum::extract::State(site): axum::extract::State<Shared>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let path = uri.path().to_owned();
    if let Ok(mut hits) = site.hits.lock() {
        *hits.entry(path.clone()).or_default() += 1;
    }
    if let Some(seed) = path
        .strip_prefix("/img/")
        .and_then(|p| p.strip_suffix(".png"))
        .and_then(|s| s.parse::<u64>().ok())
    {
        let drawn = site
            .redrawn
            .lock()
            .expect("redrawn")
            .get(&seed)
            .copied()
            .unwrap_or_default();
        let etag = format!("\"{seed}-{drawn}\"");
        let conditional = headers.contains_key("if-none-match");
        let unchanged = site.etags
            && headers
                .get("if-none-match")
                .is_some_and(|sent| sent.as_bytes() == etag.as_bytes());
        let response = if unchanged {
            (StatusCode::NOT_MODIFIED, [("etag", etag)]).into_response()
        } else {
            let mut bytes = std::io::Cursor::new(Vec::new());
            if blocks(seed + 1_000_000 * drawn)
                .write_to(&mut bytes, image::ImageFormat::Png)
                .is_err()
            {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            match site.etags {
                true => (
                    [("content-type", "image/png"), ("etag", etag.as_str())],
                    bytes.into_inner(),
                )
                    .into_response(),
                false => ([("content-type", "image/png")], bytes.into_inner()).into_response(),
            }
        };
        site.image_answers.lock().expect("answers").push(Answer {
            path,
            conditional,
            status: response.status().as_u16(),
        });
        return response;
    }
    tokio::time::sleep(site.delay).await;
    let number: Option<usize> = path
        .strip_prefix("/g/")
        .and_then(|p| p.strip_suffix(".html"))
        .and_then(|n| n.parse().ok());
    let pages = site.pages.lock().expect("pages").clone();
    let Some(images) = number.and_then(|n| pages.get(n.wrapping_sub(1))) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let number = number.unwrap_or_default();
    let figures: String = images
        .iter()
        .map(|seed| format!("<img src=\"/img/{seed}.png\" alt=\"\">"))
        .collect();
    let next = if number < pages.len() {
        format!("<a class=\"next\" href=\"/g/{}.html\">Next</a>", number + 1)
    } else {
        String::new()
    };
    let html =
        format!("<!doctype html><html><body><main>{figures}</main><nav>{next}</nav></body></html>");
    let conditional =
        headers.contains_key("if-none-match") || headers.contains_key("if-modified-since");
    let etag = site.etags.then(|| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&html, &mut hasher);
        format!("\"{:x}\"", std::hash::Hasher::finish(&hasher))
    });
    let unchanged = etag.as_deref().is_some_and(|etag| {
        headers
            .get("if-none-match")
            .is_some_and(|sent| sent.as_bytes() == etag.as_bytes())
    });
    let response = match (&etag, unchanged) {
        (Some(etag), true) => (StatusCode::NOT_MODIFIED, [("etag", etag.clone())]).into_response(),
        (Some(etag), false) => ([("etag", etag.clone())], Html(html)).into_response(),
        (None, _) => Html(html).into_response(),
    };
    site.answers.lock().expect("answers").push(Answer {
        path,
        conditional,
        status: response.status().as_u16(),
    });
    response
}

/// A job of the gallery: its folder, profile and output folder.
struct Job {
    dir: tempfile::TempDir,
    profile: PathBuf,
    out: PathBuf,
}

impl Job {
    /// `pagination` is the `[pagination]` table's body.
    fn new(site: &Gallery, pagination: &str) -> Self {
        let dir = tempfile::TempDir::new().expect("temporary folder");
        let profile = dir.path().join("grow.toml");
        std::fs::write(
            &profile,
            format!(
                "name = \"grow\"\nstart = [\"{}/g/1.html\"]\nrender = \"static\"\n\n\
                 [pagination]\n{pagination}\n\n\
                 [[images]]\nname = \"photos\"\nselector = \"main img\"\n\n\
                 [download]\nout = \"out\"\n",
                site.origin
            ),
        )
        .expect("profile written");
        let out = dir.path().join("out");
        Self { dir, profile, out }
    }

    fn command(&self, extra: &[&str]) -> std::process::Command {
        let mut cmd = scrape();
        cmd.arg("--profile")
            .arg(&self.profile)
            .args(["--progress", "off", "--out"])
            .arg(&self.out)
            .args(extra);
        cmd
    }

    fn run(&self, extra: &[&str]) {
        let output = run(&mut self.command(extra));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    }

    /// The manifest's URLs.
    fn stored(&self) -> Vec<String> {
        let mut urls: Vec<String> = manifest(&self.out)
            .iter()
            .map(|l| l["url"].as_str().unwrap_or_default().to_owned())
            .collect();
        urls.sort();
        urls
    }
}

/// The page requests and picture requests a run makes.
fn requests(site: &Gallery, act: impl FnOnce()) -> (u64, u64) {
    let (pages, images) = (site.count("/g/"), site.count("/img/"));
    act();
    (site.count("/g/") - pages, site.count("/img/") - images)
}

fn sorted(mut urls: Vec<String>) -> Vec<String> {
    urls.sort();
    urls
}

#[test]
fn a_refresh_of_a_next_link_chain_finds_new_pictures_at_the_top_and_new_pages_at_the_end() {
    let site = Gallery::serve(6, 3, Duration::ZERO);
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    job.run(&[]);
    assert_eq!(job.stored().len(), 18);

    // Without --refresh, a finished chain is done: nothing is asked for.
    assert_eq!(requests(&site, || job.run(&[])), (0, 0));

    site.publish_on(1, &[101, 102]);
    site.add_page(&[103, 104, 105]);
    let (pages, images) = requests(&site, || job.run(&["--refresh"]));
    assert_eq!(
        job.stored(),
        sorted(site.image_urls()),
        "every picture, the new ones too"
    );
    assert_eq!(images, 5, "the new pictures, each once, and no other");
    // The head (1 new, 2 and 3 known: two known pages in a row), the old last page, the new one.
    assert_eq!(pages, 5, "pages asked for by the refresh");

    // Nothing new: the head's first two pages, the last page; nothing downloaded.
    assert_eq!(requests(&site, || job.run(&["--refresh"])), (3, 0));
    assert_eq!(job.stored().len(), 23);
}

#[test]
fn a_template_chain_with_stop_after_known_grows_past_its_old_end_on_every_run() {
    let site = Gallery::serve(30, 1, Duration::ZERO);
    let job = Job::new(
        &site,
        "kind = \"url_template\"\ntemplate = \"/g/{page}.html\"\nstop_after_known = 1",
    );
    job.run(&[]);
    assert_eq!(job.stored().len(), 30);

    site.publish_on(1, &[201]);
    site.add_page(&[202, 203]);
    site.add_page(&[204]);
    // Four pages in flight at most, so a window fetched ahead past the end stays small.
    let (pages, images) = requests(&site, || job.run(&["--crawl-concurrency", "4"]));
    assert_eq!(job.stored(), sorted(site.image_urls()));
    assert_eq!(images, 4, "the new pictures, each once");
    // Pages 1 (new) and 2 (known), then 30 (the old end), 31, 32 and 33 (missing), and the
    // pages fetched ahead past the end: far fewer than the 33 of a walk from the start.
    assert!((6..=6 + 8).contains(&pages), "{pages} pages asked for");
}

#[test]
fn a_refresh_killed_midway_goes_on_where_it_stopped() {
    let site = Gallery::serve(24, 1, Duration::from_millis(40));
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    job.run(&[]);
    assert_eq!(job.stored().len(), 24);

    // A new picture on every page: the refresh's head never meets two known pages in a row.
    for page in 1..=24 {
        site.publish_on(page, &[1000 + page as u64]);
    }
    let asked_before = site.count("/g/");
    let mut refresh = Background::spawn(
        &mut job.command(&["--refresh"]),
        &job.dir.path().join("refresh.stderr"),
    );
    // Killed while its walk is a quarter of the way through the gallery.
    refresh.wait_for("the refresh's first pages", Duration::from_secs(60), || {
        site.count("/g/") >= asked_before + 6
    });
    refresh.kill();
    let first_page_then = site.hits()["/g/1.html"];
    assert!(
        site.count("/g/") < asked_before + 24,
        "the refresh was stopped before its end"
    );

    job.run(&["--refresh"]);
    assert_eq!(job.stored(), sorted(site.image_urls()));
    assert_eq!(
        site.hits()["/g/1.html"],
        first_page_then,
        "the refresh went on from its checkpoint, not from the first page again"
    );
    let seed = |p: &str| {
        p.strip_prefix("/img/")
            .and_then(|p| p.strip_suffix(".png"))
            .and_then(|s| s.parse::<u64>().ok())
    };
    let twice: Vec<u64> = site
        .hits()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .filter_map(|(p, _)| seed(&p))
        .collect();
    // The first run's pictures are never asked for again; a new one is only when the kill
    // caught it in flight.
    assert!(
        twice.iter().all(|s| *s > 1000),
        "pictures stored before fetched again: {twice:?}"
    );
    assert!(twice.len() <= 8, "fetched twice: {twice:?}");
}

/// `(path, conditional, status)` of a page answer.
fn page(number: u32, conditional: bool, status: u16) -> (String, bool, u16) {
    (format!("/g/{number}.html"), conditional, status)
}

#[test]
fn a_refresh_asks_each_known_page_only_if_it_changed_and_an_unchanged_one_counts_known() {
    let site = Gallery::serve(6, 3, Duration::ZERO);
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    let first = site.answers_to(|| job.run(&[]));
    assert!(
        first
            .iter()
            .all(|(_, conditional, status)| !conditional && *status == 200),
        "a first walk asks plainly: {first:?}"
    );

    site.publish_on(1, &[101, 102]);
    site.add_page(&[103, 104, 105]);
    let mut output = None;
    let (answers, images) = {
        let mut images = 0;
        let answers = site.answers_to(|| {
            images = requests(&site, || {
                let out = run(&mut job.command(&["--refresh"]));
                assert_eq!(out.status.code(), Some(0), "{}", text(&out));
                output = Some(out);
            })
            .1;
        });
        (answers, images)
    };
    // Page 1 changed (new pictures); pages 2 and 3 did not: two known pages in a row, then on
    // from the old last page (it changed: it links to the new page now) to the new page.
    assert_eq!(
        answers,
        [
            page(1, true, 200),
            page(2, true, 304),
            page(3, true, 304),
            page(6, true, 200),
            page(7, false, 200),
        ]
    );
    assert_eq!(
        job.stored(),
        sorted(site.image_urls()),
        "everything new stored"
    );
    assert_eq!(images, 5, "the new pictures, each once, and no other");
    let output = output.expect("the refresh ran");
    assert!(
        text(&output).contains("4 pages checked, 2 unchanged (304)"),
        "{}",
        text(&output)
    );
    let status = run(scrape().args(["status", "--out"]).arg(&job.out));
    assert!(
        text(&status).contains("refresh   4 pages checked, 2 unchanged (304)"),
        "`status` says what the last refresh found: {}",
        text(&status)
    );

    // Nothing changed: the head's two pages and the last page answer 304 and nothing more is
    // asked for, the last page's end being known without its body.
    let answers = site.answers_to(|| job.run(&["--refresh"]));
    assert_eq!(
        answers,
        [page(1, true, 304), page(2, true, 304), page(7, true, 304)]
    );
    assert_eq!(job.stored().len(), 23);
}

#[test]
fn a_gallery_whose_pages_carry_no_validators_is_refreshed_with_plain_requests() {
    let site = Gallery::serve_without_validators(6, 3);
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    job.run(&[]);
    site.publish_on(1, &[101, 102]);
    site.add_page(&[103, 104, 105]);
    let answers = site.answers_to(|| {
        let output = run(&mut job.command(&["--refresh"]));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        assert!(
            !text(&output).contains("pages checked"),
            "{}",
            text(&output)
        );
    });
    assert_eq!(
        answers,
        [
            page(1, false, 200),
            page(2, false, 200),
            page(3, false, 200),
            page(6, false, 200),
            page(7, false, 200),
        ]
    );
    assert_eq!(job.stored(), sorted(site.image_urls()));
}

/// A site of albums: `/index.html` links the albums (`a.album`), each album links its photo
/// pages (`a.photo`), each photo page shows one picture. `albums` gives each album's photos
/// (`"1-1"` for `/photos/1-1.html` showing `/img/1-1.png`).
fn write_albums(root: &std::path::Path, albums: &[&[&str]]) {
    let write = |path: &str, html: String| write_changed(&root.join(path), html.as_bytes());
    let links: String = (1..=albums.len())
        .map(|n| format!("<a class=\"album\" href=\"/albums/{n}.html\">{n}</a>"))
        .collect();
    write("index.html", format!("<html><body>{links}</body></html>"));
    for (n, photos) in albums.iter().enumerate() {
        let links: String = photos
            .iter()
            .map(|p| format!("<a class=\"photo\" href=\"/photos/{p}.html\">{p}</a>"))
            .collect();
        write(
            &format!("albums/{}.html", n + 1),
            format!("<html><body>{links}</body></html>"),
        );
        for photo in *photos {
            write(
                &format!("photos/{photo}.html"),
                format!("<html><body><main><img src=\"/img/{photo}.png\"></main></body></html>"),
            );
        }
    }
}

#[test]
fn a_refresh_looks_again_at_listings_reached_through_links_and_never_at_known_detail_pages() {
    let dir = tempfile::TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    write_albums(&root, &[&["1-1", "1-2"], &["2-1", "2-2"]]);
    let site = crate::support::Site::serve_dir(&root);
    let profile = dir.path().join("albums.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"albums\"\nstart = [\"{}/index.html\"]\nrender = \"static\"\n\n\
             [[images]]\nselector = \"main img\"\n\n\
             [[follow]]\nselector = \"a.album\"\nlevel = \"album\"\n\n\
             [levels.album]\n[[levels.album.follow]]\nselector = \"a.photo\"\nlevel = \"photo\"\n\n\
             [levels.photo]\n[[levels.photo.images]]\nselector = \"main img\"\n",
            site.origin
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let scrape_run = |extra: &[&str]| -> (BTreeMap<String, u64>, String) {
        let before = site.hits();
        let mut cmd = scrape();
        cmd.arg("--profile")
            .arg(&profile)
            .args(["--progress", "off", "--out"])
            .arg(&out)
            .args(extra);
        let output = run(&mut cmd);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        let mut asked = site.hits();
        for (path, n) in &mut asked {
            *n -= before.get(path).copied().unwrap_or_default();
        }
        asked.retain(|_, n| *n > 0);
        (asked, text(&output))
    };
    let stored = || -> Vec<String> {
        sorted(
            manifest(&out)
                .iter()
                .map(|l| {
                    let url = l["url"].as_str().unwrap_or_default();
                    url.trim_start_matches(site.origin.as_str()).to_owned()
                })
                .collect(),
        )
    };
    scrape_run(&[]);
    assert_eq!(
        stored(),
        [
            "/img/1-1.png",
            "/img/1-2.png",
            "/img/2-1.png",
            "/img/2-2.png"
        ]
    );

    // A photo is added to the first album.
    write_albums(&root, &[&["1-3", "1-1", "1-2"], &["2-1", "2-2"]]);
    let (asked, _) = scrape_run(&["--refresh"]);
    assert_eq!(stored().len(), 5, "the new photo's picture is stored");
    assert!(stored().contains(&"/img/1-3.png".to_owned()));
    let paths: Vec<&str> = asked.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "/albums/1.html",
            "/albums/2.html",
            "/img/1-3.png",
            "/index.html",
            "/photos/1-3.html"
        ],
        "the start page and every album are looked at again, the new photo page and its picture \
         fetched, and no known photo page: {asked:?}"
    );

    // Nothing new: the listings are looked at again, only if they changed (the start page in
    // full: an album that changed does not change it), and nothing else is fetched.
    let (asked, said) = scrape_run(&["--refresh"]);
    assert!(
        said.contains("2 pages checked, 2 unchanged (304)"),
        "{said}"
    );
    let paths: Vec<&str> = asked.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        ["/albums/1.html", "/albums/2.html", "/index.html"],
        "{asked:?}"
    );
    assert_eq!(stored().len(), 5);

    // Without --refresh, a finished job asks for nothing.
    assert_eq!(scrape_run(&[]).0, BTreeMap::new());
}

#[test]
fn recheck_images_asks_each_stored_picture_only_if_it_changed_and_stores_a_changed_one_anew() {
    let site = Gallery::serve(2, 3, Duration::ZERO);
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    job.run(&[]);
    let hashes = || crate::support::manifest_hashes(&job.out);
    let first = hashes();
    assert_eq!(first.len(), 6);

    site.redraw(2);
    let mut said = String::new();
    let answers = site.image_answers_to(|| {
        let output = run(&mut job.command(&["--recheck-images"]));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        said = text(&output);
    });
    let mut answers = answers;
    answers.sort();
    let expected: Vec<(String, bool, u16)> = (1..=6)
        .map(|seed| {
            (
                format!("/img/{seed}.png"),
                true,
                if seed == 2 { 200 } else { 304 },
            )
        })
        .collect();
    assert_eq!(
        answers, expected,
        "each picture asked once, only if it changed"
    );
    assert!(
        said.contains("6 stored images asked again, 1 changed and stored anew"),
        "{said}"
    );
    let second = hashes();
    let changed: Vec<&String> = first
        .keys()
        .filter(|url| first.get(*url) != second.get(*url))
        .collect();
    assert_eq!(
        changed,
        [&format!("{}/img/2.png", site.origin)],
        "only the redrawn picture has new bytes in the manifest"
    );
    let listed = std::fs::read_to_string(job.out.join("runs/00002.jsonl")).expect("run list");
    assert_eq!(
        listed.lines().count(),
        1,
        "the changed picture is new in this run: {listed}"
    );
    assert!(listed.contains("/img/2.png"), "{listed}");
    let verify = run(scrape().args(["verify", "--out"]).arg(&job.out));
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));

    // A run without the flag asks no picture again.
    let answers = site.image_answers_to(|| job.run(&[]));
    assert_eq!(answers, Vec::<(String, bool, u16)>::new());
}

#[test]
fn recheck_images_without_validators_compares_the_bytes_and_keeps_the_same_ones() {
    let site = Gallery::serve_without_validators(1, 3);
    let job = Job::new(&site, "kind = \"next_link\"\nselector = \"a.next\"");
    job.run(&[]);
    let first = crate::support::manifest_hashes(&job.out);
    let output = run(&mut job.command(&["--recheck-images"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("3 stored images asked again, 0 changed and stored anew"),
        "{}",
        text(&output)
    );
    assert_eq!(crate::support::manifest_hashes(&job.out), first);
    assert_eq!(
        std::fs::read_to_string(job.out.join("runs/00002.jsonl")).unwrap_or_default(),
        "",
        "nothing new in the second run"
    );
}

/// A gallery page that shows `api/page-1.json` and adds the next batch each time `#more` is
/// clicked; the button goes once the last batch is shown.
const LOAD_MORE: &str = r#"<!doctype html><html><body><div id="gallery"></div>
<button id="more">More</button>
<script>
let next = 1;
const more = document.getElementById("more");
async function load() {
  const page = await (await fetch(`api/page-${next}.json`)).json();
  for (const item of page.items) {
    const img = document.createElement("img");
    img.className = "lazy";
    img.src = item.src;
    img.srcset = item.srcset;
    document.getElementById("gallery").appendChild(img);
  }
  next = page.next;
  if (next === null) more.remove();
}
more.addEventListener("click", load);
load();
</script></body></html>"#;

/// Writes a feed into `root`: `page` (a gallery page, under `infinite/`) loading
/// `api/page-N.json` a batch of 4 at a time, over `ids` (newest first), each picture
/// `/img/feed-{id}-640x480.jpg` with a smaller candidate in its `srcset`.
fn write_feed(root: &std::path::Path, page: &[u8], ids: &[String]) {
    write_changed(&root.join("infinite/index.html"), page);
    let batches: Vec<&[String]> = ids.chunks(4).collect();
    for (n, batch) in batches.iter().enumerate() {
        let items: Vec<serde_json::Value> = batch
            .iter()
            .map(|id| {
                serde_json::json!({
                    "title": format!("Picture {id}"),
                    "src": format!("/img/feed-{id}-640x480.jpg"),
                    "srcset": format!("/img/feed-{id}-320x240.jpg 320w, /img/feed-{id}-640x480.jpg 640w"),
                })
            })
            .collect();
        let next = (n + 1 < batches.len()).then_some(n + 2);
        let json = serde_json::json!({ "page": n + 1, "items": items, "next": next });
        write_changed(
            &root.join(format!("infinite/api/page-{}.json", n + 1)),
            json.to_string().as_bytes(),
        );
    }
}

/// Runs a feed of 32 pictures (`page`, read by `browser`, the profile's `[browser]` body) once,
/// publishes 3 pictures at its top, and refreshes it: the batches each run asked for, the
/// refresh's output, and the pictures then stored.
fn refresh_feed(test: &str, page: &[u8], browser: &str) -> Option<(u64, u64, String, Vec<String>)> {
    if !crate::support::chromium_available(test) {
        return None;
    }
    let dir = tempfile::TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    let old: Vec<String> = (1..=32).rev().map(|n| n.to_string()).collect();
    write_feed(&root, page, &old);
    let site = crate::support::Site::serve_dir(&root);
    let profile = dir.path().join("feed.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"feed\"\nstart = [\"{}/infinite/\"]\nrender = \"browser\"\n\n\
             [browser]\n{browser}\n\n\
             [[images]]\nselector = \"#gallery img.lazy\"\npick = \"largest\"\n",
            site.origin
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let feed_run = |extra: &[&str]| -> (u64, String) {
        let batches = |hits: &BTreeMap<String, u64>| -> u64 {
            hits.iter()
                .filter(|(path, _)| path.starts_with("/infinite/api/"))
                .map(|(_, n)| n)
                .sum()
        };
        let before = batches(&site.hits());
        let mut cmd = scrape();
        cmd.arg("--profile")
            .arg(&profile)
            .args(["--progress", "off", "--out"])
            .arg(&out)
            .args(extra);
        let output = run(&mut cmd);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        (batches(&site.hits()) - before, text(&output))
    };
    let (first, said) = feed_run(&[]);
    assert_eq!(manifest(&out).len(), 32, "{said}");

    let mut grown: Vec<String> = ["new-1", "new-2", "new-3"].map(str::to_owned).to_vec();
    grown.extend(old);
    write_feed(&root, page, &grown);
    let (asked, said) = feed_run(&["--refresh"]);
    let stored = manifest(&out)
        .iter()
        .map(|l| l["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    Some((first, asked, said, stored))
}

/// What a refresh of a feed must have done: every picture stored, the 3 new ones too, having
/// asked for `asked` of the 9 batches: the first comes with the page, then two rounds of known
/// pictures (batches 2 and 3, a fourth at most while the third was on its way) end it.
fn assert_refreshed(first: u64, asked: u64, said: &str, stored: &[String]) {
    assert_eq!(first, 8, "the first run loads every batch: {said}");
    let new = stored
        .iter()
        .filter(|u| u.contains("/img/feed-new-"))
        .count();
    assert_eq!(new, 3, "the new pictures are stored: {said}");
    assert_eq!(stored.len(), 35, "{said}");
    assert!(
        (3..=4).contains(&asked),
        "the refresh asked for {asked} batches of 9: {said}"
    );
}

#[test]
fn a_refresh_of_an_infinite_scroll_stops_scrolling_once_it_meets_only_known_pictures() {
    let page = std::fs::read(crate::support::repo(
        "fixtures/js-sites/infinite/index.html",
    ))
    .expect("the infinite gallery's page");
    let Some((first, asked, said, stored)) = refresh_feed(
        "a_refresh_of_an_infinite_scroll_stops_scrolling_once_it_meets_only_known_pictures",
        &page,
        "wait_for = \"#gallery img\"\nscroll = 30\nsettle = \"1s\"",
    ) else {
        return;
    };
    assert_refreshed(first, asked, &said, &stored);
}

#[test]
fn a_refresh_of_a_load_more_gallery_stops_clicking_once_it_meets_only_known_pictures() {
    let Some((first, asked, said, stored)) = refresh_feed(
        "a_refresh_of_a_load_more_gallery_stops_clicking_once_it_meets_only_known_pictures",
        LOAD_MORE.as_bytes(),
        "wait_for = \"#gallery img\"\nclick = \"#more\"\nmax_clicks = 30\nsettle = \"1s\"",
    ) else {
        return;
    };
    assert_refreshed(first, asked, &said, &stored);
}
