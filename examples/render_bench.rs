//! Render-stage benchmark: pages/s and peak PSS of the Chromium process tree, for 1, 2 and 4
//! tabs, with and without request blocking. Run through `bench/render.sh`.
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
    println!("tabs  blocking  pages/s  peak PSS MiB  image requests");
    for blocking in [true, false] {
        for tabs in [1, 2, 4] {
            let before = image_requests(&site);
            let (rate, peak) = run(&site, &paths, pages, tabs, blocking).await;
            let images = image_requests(&site) - before;
            println!(
                "{tabs:>4}  {:>8}  {rate:>7.1}  {:>12.0}  {images:>14}",
                if blocking { "on" } else { "off" },
                peak as f64 / 1024.0
            );
        }
    }
    site.stop().await;
}

async fn run(
    site: &DemoSite,
    paths: &[String],
    pages: usize,
    tabs: usize,
    blocking: bool,
) -> (f64, u64) {
    let settings = BrowserSettings {
        tabs,
        recycle_after: 1000,
        block: if blocking {
            Blocking::default()
        } else {
            Blocking::NONE
        },
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
    let start = Instant::now();
    futures_util::stream::iter(&requests)
        .for_each_concurrent(tabs, |r| async {
            pool.render(r).await.expect("page renders");
        })
        .await;
    let rate = pages as f64 / start.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    pool.close().await;
    (rate, peak.load(Ordering::Relaxed))
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
