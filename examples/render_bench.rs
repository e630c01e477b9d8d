//! Render-stage benchmark: pages/s, CPU time per page and peak PSS of the Chromium process
//! tree, for 1, 2 and 4 tabs, with images, media and fonts blocked by resource type in the Fetch
//! domain (images answered with a 1x1 GIF: `fetch`), blocked by URL pattern only (`url`), and
//! not blocked (`off`). Run through `bench/render.sh`.
//!
//! CPU per page: the Chromium tree's (every process below this one, with the children they
//! reaped, so renderers that exited during the run count too) and this process's own (the
//! fixture server and the pool), over the timed pages.
//!
//!     cargo run --release --example render_bench -- [PAGES]
//!
//! Pages: the demo gallery (`fixtures/demo-site/gallery/*.html`, many `<img>`) and the
//! background fixture, round robin, each waited for with `Wait::Selector("body")` (the load
//! event), so the numbers measure the browser, not a fixed idle delay.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use scrape::demo::DemoSite;
use scrape::render::{Blocking, BrowserPool, BrowserSettings, RenderRequest, Wait};

/// The ways of blocking compared, by name.
const MODES: [(&str, Blocking); 3] = [
    (
        "fetch",
        Blocking {
            images: true,
            media: true,
            fonts: true,
            stylesheets: false,
            by_url_only: false,
        },
    ),
    (
        "url",
        Blocking {
            images: true,
            media: true,
            fonts: true,
            stylesheets: false,
            by_url_only: true,
        },
    ),
    ("off", Blocking::NONE),
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pages: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let site = DemoSite::start(&root, 0).await.expect("fixture server");
    let mut paths: Vec<String> = std::fs::read_dir(root.join("demo-site/gallery"))
        .expect("demo gallery")
        .flatten()
        .map(|e| format!("/demo-site/gallery/{}", e.file_name().to_string_lossy()))
        .collect();
    paths.sort();
    paths.push("/js-sites/background/".into());
    println!("{pages} pages per run, {} distinct", paths.len());
    println!(
        "tabs  blocking  pages/s  chromium CPU ms/page  bench CPU ms/page  peak PSS MiB  image requests"
    );
    for (name, blocking) in MODES {
        for tabs in [1, 2, 4] {
            let before = image_requests(&site);
            let m = run(&site, &paths, pages, tabs, blocking).await;
            let images = image_requests(&site) - before;
            println!(
                "{tabs:>4}  {name:>8}  {:>7.1}  {:>20.0}  {:>17.0}  {:>12.0}  {images:>14}",
                m.rate,
                m.chromium_ms_per_page,
                m.own_ms_per_page,
                m.peak_pss_kib as f64 / 1024.0
            );
        }
    }
    site.stop().await;
}

/// What one run measured.
struct Measured {
    rate: f64,
    chromium_ms_per_page: f64,
    own_ms_per_page: f64,
    peak_pss_kib: u64,
}

async fn run(
    site: &DemoSite,
    paths: &[String],
    pages: usize,
    tabs: usize,
    blocking: Blocking,
) -> Measured {
    let settings = BrowserSettings {
        tabs,
        recycle_after: 1000,
        block: blocking,
        page_timeout: Duration::from_secs(30),
        ..BrowserSettings::default()
    };
    let pool = BrowserPool::launch(settings)
        .await
        .expect("chromium starts");
    let profile = pool.browser_process().await.expect("running").profile_dir;
    let requests: Vec<RenderRequest> = (0..pages)
        .map(|i| RenderRequest {
            wait: Wait::Selector { css: "body".into() },
            ..RenderRequest::new(
                url::Url::parse(&format!("{}{}", site.origin(), paths[i % paths.len()])).unwrap(),
            )
        })
        .collect();
    // Warm-up: one page per tab, so tab creation is not timed.
    futures_util::stream::iter(&requests[..tabs])
        .for_each_concurrent(tabs, |r| async {
            pool.render(r).await.expect("page renders");
        })
        .await;

    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        tokio::task::spawn_blocking(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(pss_kib(&profile), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let (tree_before, own_before) = (tree_ticks(), own_ticks());
    let start = Instant::now();
    futures_util::stream::iter(&requests)
        .for_each_concurrent(tabs, |r| async {
            pool.render(r).await.expect("page renders");
        })
        .await;
    let rate = pages as f64 / start.elapsed().as_secs_f64();
    let (tree_after, own_after) = (tree_ticks(), own_ticks());
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    pool.close().await;
    let ms_per_page = |ticks: u64| ticks as f64 * 1000.0 / USER_HZ as f64 / pages as f64;
    Measured {
        rate,
        chromium_ms_per_page: ms_per_page(tree_after.saturating_sub(tree_before)),
        own_ms_per_page: ms_per_page(own_after.saturating_sub(own_before)),
        peak_pss_kib: peak.load(Ordering::Relaxed),
    }
}

/// The unit of `/proc/*/stat` times (`USER_HZ`, 100 on Linux whatever the kernel's HZ).
const USER_HZ: u64 = 100;

/// `pid` → (parent, utime + stime, cutime + cstime) from `/proc/*/stat`, in clock ticks.
fn proc_times() -> Vec<(u32, u32, u64, u64)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
            let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
            let ppid = field(4)? as u32;
            Some((pid, ppid, field(14)? + field(15)?, field(16)? + field(17)?))
        })
        .collect()
}

/// CPU ticks of every process below this one, with those of the children each reaped.
fn tree_ticks() -> u64 {
    let all = proc_times();
    let mut tree = vec![std::process::id()];
    let mut ticks = 0;
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(pid, ppid, own, reaped) in &all {
            if ppid == parent {
                tree.push(pid);
                ticks += own + reaped;
            }
        }
        i += 1;
    }
    ticks
}

/// CPU ticks of this process itself (all its threads, not its children).
fn own_ticks() -> u64 {
    let me = std::process::id();
    proc_times()
        .into_iter()
        .find(|&(pid, ..)| pid == me)
        .map_or(0, |(_, _, own, _)| own)
}

/// Sum of PSS (KiB) of every process whose command line names the browser's profile folder.
fn pss_kib(profile: &Path) -> u64 {
    let needle = profile.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("smaps_rollup")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

fn image_requests(site: &DemoSite) -> u64 {
    site.hits()
        .iter()
        .filter(|(p, _)| p.starts_with("/img/"))
        .map(|(_, n)| n)
        .sum()
}
