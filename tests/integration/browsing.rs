//! The browser sees what a person sees: lazy content between the first and the last screen,
//! every row of a virtualized list, tabs that render side by side at a foreground frame rate,
//! frames that load late or never, carousels that swap their slide, nested shadow roots. Each
//! case is a small page of its own, rendered by `BrowserPool` as a run renders it.
//!
//! Needs Chromium: without it these tests print why and pass, unless `CI` is set.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use scrape::render::{Action, BrowserPool, BrowserSettings, RenderRequest, Wait};

use crate::support::{ApiServer, attribute_values, chromium_available, count, pages_site, url};

fn settings(tabs: usize) -> BrowserSettings {
    BrowserSettings {
        tabs,
        page_timeout: Duration::from_secs(45),
        ..BrowserSettings::default()
    }
}

fn scroll(max_scrolls: u32, settle: Duration) -> Action {
    Action::Scroll {
        max_scrolls,
        settle,
        element: None,
        end: None,
    }
}

fn paths(values: &BTreeSet<String>) -> BTreeSet<String> {
    values
        .iter()
        .map(|v| url::Url::parse(v).map_or_else(|_| v.clone(), |u| u.path().to_owned()))
        .collect()
}

/// 40 images whose URL an IntersectionObserver sets as each enters the view: the URLs are only
/// in script, and an image never in view never gets one.
const OBSERVED: &str = r#"<!doctype html><html><head><style>img{display:block;width:200px;height:260px;margin:8px}</style></head>
<body><div id="g"></div><script>
const io = new IntersectionObserver(es => es.forEach(e => {
  if (e.isIntersecting) { e.target.src = '/img/io-' + e.target.dataset.i + '-40x30.jpg'; io.unobserve(e.target); }
}));
for (let i = 0; i < 40; i++) { const im = document.createElement('img'); im.dataset.i = i; document.getElementById('g').appendChild(im); io.observe(im); }
</script></body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_images_between_the_first_and_the_last_screen_all_mount() {
    if !chromium_available("lazy_images_between_the_first_and_the_last_screen_all_mount") {
        return;
    }
    let (_root, site) = pages_site(&[("observed.html", OBSERVED)]).await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    let request = RenderRequest {
        actions: vec![scroll(20, Duration::from_secs(1))],
        ..RenderRequest::new(url(&site.origin(), "/observed.html"))
    };
    let snapshot = pool.render(&request).await.unwrap();
    pool.close().await;

    assert!(snapshot.partial.is_none(), "{:?}", snapshot.partial);
    let expected: BTreeSet<String> = (0..40).map(|i| format!("/img/io-{i}-40x30.jpg")).collect();
    assert_eq!(attribute_values(&snapshot, "#g img", "src"), expected);
}

/// A virtualized list of 300 rows, 20 mounted at a time around the view; scrolling back up
/// mounts rows seen before again.
const ROWS: &str = r#"<!doctype html><meta charset="utf-8">
<style>#list{position:relative}.row{position:absolute;height:110px}</style><div id="list"></div>
<script>
const N = 300, ROW = 120, list = document.getElementById('list'), mounted = new Map();
list.style.height = N * ROW + 'px';
function render() {
  const first = Math.max(0, Math.floor(scrollY / ROW) - 5), last = Math.min(N, first + 20);
  for (const [i, el] of mounted) if (i < first || i >= last) { el.remove(); mounted.delete(i); }
  for (let i = first; i < last; i++) if (!mounted.has(i)) {
    const el = document.createElement('div'); el.className = 'row'; el.style.top = i * ROW + 'px';
    const im = document.createElement('img'); im.src = '/img/row-' + (i + 1) + '-40x30.jpg'; el.appendChild(im);
    list.appendChild(el); mounted.set(i, el);
  }
}
addEventListener('scroll', () => requestAnimationFrame(render)); render();
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtualized_list_gives_all_300_rows_and_ends_by_no_growth_before_its_cap() {
    if !chromium_available(
        "a_virtualized_list_gives_all_300_rows_and_ends_by_no_growth_before_its_cap",
    ) {
        return;
    }
    let (_root, site) = pages_site(&[("rows.html", ROWS)]).await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    // Far more rounds than the list has: the end must come from "no growth", not the cap or
    // the page's time.
    let request = RenderRequest {
        actions: vec![scroll(1_000, Duration::from_millis(500))],
        ..RenderRequest::new(url(&site.origin(), "/rows.html"))
    };
    let started = Instant::now();
    let snapshot = pool.render(&request).await.unwrap();
    let took = started.elapsed();
    pool.close().await;

    assert!(snapshot.partial.is_none(), "{:?}", snapshot.partial);
    assert!(took < Duration::from_secs(40), "took {took:?}");
    let expected: BTreeSet<String> = (1..=300)
        .map(|i| format!("/img/row-{i}-40x30.jpg"))
        .collect();
    assert_eq!(attribute_values(&snapshot, "#list img", "src"), expected);
    assert!(
        count(&snapshot, "body > #list img") <= 25,
        "the live list stays virtualized"
    );
}

/// Counts its animation frames for 1.5 s, then shows them in an image URL.
const FRAMES: &str = r#"<!doctype html><body><div id="g"></div><script>
let frames = 0; (function f() { frames++; requestAnimationFrame(f); })();
setTimeout(() => {
  const im = document.createElement('img');
  im.src = '/img/frames-' + frames + '-' + document.visibilityState + '.png';
  document.getElementById('g').appendChild(im);
}, 1500);
</script></body>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_pages_over_two_tabs_each_render_at_a_foreground_frame_rate() {
    if !chromium_available("eight_pages_over_two_tabs_each_render_at_a_foreground_frame_rate") {
        return;
    }
    let (_root, site) = pages_site(&[("frames.html", FRAMES)]).await;
    let pool = BrowserPool::launch(settings(2)).await.unwrap();
    let requests: Vec<RenderRequest> = (0..8)
        .map(|n| RenderRequest {
            wait: Wait::Selector {
                css: "#g img".into(),
            },
            ..RenderRequest::new(url(&site.origin(), &format!("/frames.html?{n}")))
        })
        .collect();
    let rendered = futures_util::future::join_all(requests.iter().map(|r| pool.render(r))).await;
    pool.close().await;

    let re = regex::Regex::new(r"/img/frames-(\d+)-(\w+)\.png").unwrap();
    let mut counts = Vec::new();
    for snapshot in rendered {
        let snapshot = snapshot.unwrap();
        let src = attribute_values(&snapshot, "#g img", "src");
        let src = src.iter().next().expect("the page showed its frame count");
        let caps = re.captures(src).expect("a frame count");
        assert_eq!(&caps[2], "visible");
        counts.push(caps[1].parse::<u32>().unwrap());
    }
    // A tab in front gets about 90 frames in 1.5 s; one starved behind another got 2 to 5.
    assert!(
        counts.iter().all(|&n| n >= 20),
        "frames per page: {counts:?}"
    );
}

/// One image, then a lazy iframe far below the fold, whose document has an image of its own
/// named relative to the frame's address.
const LAZY_FRAME: &str = r#"<!doctype html><body><img id="main" src="/img/main-40x30.jpg">
<div style="height:3000px"></div><iframe loading="lazy" src="/frames/inner.html"></iframe></body>"#;
const INNER_FRAME: &str =
    r#"<!doctype html><body><img class="inner" data-src="pics/inner-40x30.jpg"></body>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_iframe_below_the_fold_keeps_the_page_and_is_read_once_scrolled_to() {
    if !chromium_available(
        "a_lazy_iframe_below_the_fold_keeps_the_page_and_is_read_once_scrolled_to",
    ) {
        return;
    }
    let (_root, site) = pages_site(&[
        ("lazy-frame.html", LAZY_FRAME),
        ("frames/inner.html", INNER_FRAME),
    ])
    .await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    let page = url(&site.origin(), "/lazy-frame.html");
    let started = Instant::now();
    let unscrolled = pool
        .render(&RenderRequest::new(page.clone()))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(unscrolled.partial.is_none(), "{:?}", unscrolled.partial);
    assert_eq!(count(&unscrolled, "#main"), 1);

    let scrolled = pool
        .render(&RenderRequest {
            actions: vec![scroll(5, Duration::from_millis(500))],
            ..RenderRequest::new(page)
        })
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(count(&scrolled, "#main"), 1);
    assert_eq!(
        attribute_values(&scrolled, "div[data-scrape-frame] img.inner", "data-src"),
        BTreeSet::from([format!("{}/frames/pics/inner-40x30.jpg", site.origin())]),
        "the frame's own URLs are made absolute against the frame's address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_never_answers_leaves_the_page_complete_with_its_own_images() {
    if !chromium_available(
        "a_frame_that_never_answers_leaves_the_page_complete_with_its_own_images",
    ) {
        return;
    }
    let api = ApiServer::start().await;
    let page = format!(
        r#"<!doctype html><body><img id="main" src="/img/main-40x30.jpg"><iframe src="{}/never.js"></iframe></body>"#,
        api.origin()
    );
    let (_root, site) = pages_site(&[("hung-frame.html", &page)]).await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    // Waiting for an element waits for the document's `load`, which the frame holds up.
    let request = RenderRequest {
        wait: Wait::Selector { css: "img".into() },
        ..RenderRequest::new(url(&site.origin(), "/hung-frame.html"))
    };
    let started = Instant::now();
    let snapshot = pool.render(&request).await.unwrap();
    let took = started.elapsed();
    pool.close().await;

    assert!(snapshot.partial.is_none(), "{:?}", snapshot.partial);
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(
        attribute_values(&snapshot, "#main", "src"),
        BTreeSet::from(["/img/main-40x30.jpg".to_owned()])
    );
}

/// A carousel of 12 slides that goes round: "next" replaces the slide with the next one, and
/// after the last shows the first again. Clicks are counted in `data-clicks`.
const CAROUSEL_ROUND: &str = r#"<!doctype html><body><div id="slide"></div><button id="next">next</button>
<script>
let i = 0, clicks = 0;
function show() { const s = document.getElementById('slide'); s.innerHTML = '';
  const im = document.createElement('img'); im.src = '/img/round-' + i + '-40x30.jpg'; s.appendChild(im); }
show();
document.getElementById('next').addEventListener('click', () => {
  document.body.dataset.clicks = ++clicks; i = (i + 1) % 12; show(); });
</script></body>"#;

/// A carousel of 12 slides in one reused `<img>`, whose "next" is marked `aria-disabled` on the
/// last slide.
const CAROUSEL_LAST: &str = r#"<!doctype html><body><img id="slide" src="/img/last-0-40x30.jpg"><button id="next">next</button>
<script>
let i = 0, clicks = 0;
const next = document.getElementById('next');
next.addEventListener('click', () => {
  document.body.dataset.clicks = ++clicks;
  if (i === 11) return;
  i++; document.getElementById('slide').src = '/img/last-' + i + '-40x30.jpg';
  if (i === 11) next.setAttribute('aria-disabled', 'true');
});
</script></body>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carousels_give_every_slide_and_stop_when_a_slide_comes_back_or_next_is_disabled() {
    if !chromium_available(
        "carousels_give_every_slide_and_stop_when_a_slide_comes_back_or_next_is_disabled",
    ) {
        return;
    }
    let (_root, site) =
        pages_site(&[("round.html", CAROUSEL_ROUND), ("last.html", CAROUSEL_LAST)]).await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    let request = |path: &str| RenderRequest {
        actions: vec![Action::Click {
            selector: "#next".into(),
            max_clicks: 50,
            settle: Duration::from_millis(500),
        }],
        ..RenderRequest::new(url(&site.origin(), path))
    };
    let round = pool.render(&request("/round.html")).await.unwrap();
    let last = pool.render(&request("/last.html")).await.unwrap();
    pool.close().await;

    let slides = |name: &str| -> BTreeSet<String> {
        (0..12)
            .map(|i| format!("/img/{name}-{i}-40x30.jpg"))
            .collect()
    };
    assert_eq!(
        paths(&attribute_values(&round, "img", "src")),
        slides("round")
    );
    assert_eq!(
        attribute_values(&round, "body", "data-clicks"),
        BTreeSet::from(["12".to_owned()]),
        "the twelfth click brought the first slide back, and clicking stopped"
    );
    assert_eq!(
        paths(&attribute_values(&last, "img", "src")),
        slides("last"),
        "every state of the reused element"
    );
    assert_eq!(
        attribute_values(&last, "body", "data-clicks"),
        BTreeSet::from(["11".to_owned()]),
        "no click once next was disabled"
    );
}

/// Cards in shadow roots inside the shadow root of a grid, nested two deep; a "more" button in
/// the grid's shadow root adds four cards per click, twice, then is disabled; one card keeps
/// its image in a closed shadow root.
const SHADOWS: &str = r#"<!doctype html><meta charset="utf-8"><photo-grid></photo-grid><sealed-card></sealed-card>
<script>
customElements.define('photo-card', class extends HTMLElement {
  connectedCallback() {
    const r = this.attachShadow({mode: 'open'});
    r.innerHTML = '<figure><img src="/img/card-' + this.getAttribute('n') + '-40x30.jpg"></figure>';
  }
});
customElements.define('sealed-card', class extends HTMLElement {
  connectedCallback() {
    const r = this.attachShadow({mode: 'closed'});
    r.innerHTML = '<img src="/img/sealed-40x30.jpg">';
  }
});
customElements.define('photo-grid', class extends HTMLElement {
  connectedCallback() {
    const r = this.attachShadow({mode: 'open'});
    r.innerHTML = '<div class="cards"></div><button id="more">more</button>';
    let n = 0;
    const add = (k) => { for (let i = 0; i < k; i++) { const c = document.createElement('photo-card');
      c.setAttribute('n', ++n); r.querySelector('.cards').appendChild(c); } };
    setTimeout(() => add(12), 300);
    let clicks = 0;
    r.getElementById('more').addEventListener('click', (e) => {
      add(4); if (++clicks === 2) e.target.disabled = true; });
  }
});
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_clicks_and_image_selectors_see_into_nested_shadow_roots() {
    if !chromium_available("waits_clicks_and_image_selectors_see_into_nested_shadow_roots") {
        return;
    }
    let (_root, site) = pages_site(&[("shadows.html", SHADOWS)]).await;
    let pool = BrowserPool::launch(settings(1)).await.unwrap();
    let request = RenderRequest {
        // A selector of descendants across two shadow roots.
        wait: Wait::Selector {
            css: "photo-grid photo-card img".into(),
        },
        actions: vec![Action::Click {
            selector: "#more".into(),
            max_clicks: 10,
            settle: Duration::from_millis(500),
        }],
        ..RenderRequest::new(url(&site.origin(), "/shadows.html"))
    };
    let snapshot = pool.render(&request).await.unwrap();
    pool.close().await;

    assert!(snapshot.partial.is_none(), "{:?}", snapshot.partial);
    let expected: BTreeSet<String> = (1..=20)
        .map(|n| format!("/img/card-{n}-40x30.jpg"))
        .collect();
    assert_eq!(
        attribute_values(&snapshot, "photo-card img", "src"),
        expected
    );
    assert_eq!(
        attribute_values(&snapshot, "sealed-card img", "src"),
        BTreeSet::from(["/img/sealed-40x30.jpg".to_owned()]),
        "a closed root attached by the page's script is read too"
    );
}

/// An age gate and a welcome note: `confirm` then `alert` while the page loads; the gallery
/// shows only when the visitor confirmed.
const DIALOGS: &str = r#"<!doctype html><body><div id="g"></div><script>
if (confirm('Are you 18 or older?')) {
  alert('Welcome! This site uses cookies.');
  const im = document.createElement('img'); im.src = '/img/gated-40x30.jpg';
  document.getElementById('g').appendChild(im);
}
</script></body>"#;

/// A gallery that sends the visitor on by script, and a page that reloads itself for ever.
const REDIRECTS: &str = r#"<!doctype html><body><img src="/img/first-40x30.jpg">
<script>setTimeout(() => { location.href = '/landed.html'; }, 100);</script></body>"#;
const LANDED: &str = r#"<!doctype html><body><div id="g"><img src="/img/landed-0-40x30.jpg"><img src="/img/landed-1-40x30.jpg"></div></body>"#;
const RELOADING: &str = r#"<!doctype html><body><img id="r" src="/img/reload-40x30.jpg">
<script>setTimeout(() => location.reload(), 50);</script></body>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_are_answered_and_pages_that_navigate_by_themselves_are_taken_once() {
    if !chromium_available(
        "dialogs_are_answered_and_pages_that_navigate_by_themselves_are_taken_once",
    ) {
        return;
    }
    let (_root, site) = pages_site(&[
        ("dialogs.html", DIALOGS),
        ("redirects.html", REDIRECTS),
        ("landed.html", LANDED),
        ("reloading.html", RELOADING),
    ])
    .await;
    let pool = BrowserPool::launch(BrowserSettings {
        page_timeout: Duration::from_secs(20),
        ..settings(1)
    })
    .await
    .unwrap();
    let started = Instant::now();
    let gated = pool
        .render(&RenderRequest::new(url(&site.origin(), "/dialogs.html")))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(gated.partial.is_none(), "{:?}", gated.partial);
    assert_eq!(
        attribute_values(&gated, "#g img", "src"),
        BTreeSet::from(["/img/gated-40x30.jpg".to_owned()]),
        "the age gate was confirmed and the welcome note closed"
    );

    let redirected = pool
        .render(&RenderRequest::new(url(&site.origin(), "/redirects.html")))
        .await
        .unwrap();
    assert!(redirected.partial.is_none(), "{:?}", redirected.partial);
    assert_eq!(redirected.url.path(), "/landed.html");
    assert_eq!(count(&redirected, "#g img"), 2);

    let started = Instant::now();
    let reloading = pool
        .render(&RenderRequest::new(url(&site.origin(), "/reloading.html")))
        .await
        .unwrap();
    pool.close().await;
    assert!(
        reloading.partial.is_none(),
        "taken as it is, not retried by every run: {:?}",
        reloading.partial
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(count(&reloading, "#r"), 1, "{}", reloading.html);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_never_answers_leaves_the_page_partial_even_past_the_protocol_timeout() {
    if !chromium_available(
        "a_script_that_never_answers_leaves_the_page_partial_even_past_the_protocol_timeout",
    ) {
        return;
    }
    let api = ApiServer::start().await;
    // Longer than the 30 s the browser protocol gives one command, which navigation waited
    // for before: the page then failed with a protocol error and nothing of it was kept.
    let timeout = Duration::from_secs(33);
    let pool = BrowserPool::launch(BrowserSettings {
        page_timeout: timeout,
        ..settings(1)
    })
    .await
    .unwrap();
    let snapshot = pool
        .render(&RenderRequest::new(url(&api.origin(), "/hang")))
        .await
        .unwrap();
    pool.close().await;
    assert!(snapshot.html.contains("<p>almost</p>"), "{}", snapshot.html);
    let reason = snapshot.partial.expect("the page is marked partial");
    assert!(reason.contains("timed out while loading"), "{reason}");
}
