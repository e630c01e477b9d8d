// The crawl benchmark's Crawlee peer: PlaywrightCrawler (crawlee + playwright-core from the npm
// registry, installed under /tmp) driving Debian's Chromium, never a downloaded browser.
//
//   node peer_crawlee.mjs BASE_URL PAGES CONCURRENCY
//
// Renders BASE_URL/t/1.html .. /t/PAGES.html (independent start URLs), headless, with images,
// media and fonts blocked (Crawlee's blockRequests: CDP Network.setBlockedURLs, before each
// navigation), and reads the `src` of every `main img`. maxConcurrency = CONCURRENCY, and the
// autoscaled pool starts there (desiredConcurrency; its default of 1 would scale up by 5% every
// 10 s, so a short run would measure the autoscaler, not the crawler). Everything else is
// Crawlee's default (navigation waits for `load`, browser retired after 100 pages,
// fingerprints on). Storage in memory only.
// Prints `RESULT {"pages": P, "images": I, "failed": F}`.
import { chromium } from "playwright-core";
import { Configuration, PlaywrightCrawler, log, playwrightUtils } from "crawlee";

const [base, count, conc] = process.argv.slice(2);
const pages = Number(count);
const concurrency = Number(conc);
log.setLevel(log.LEVELS.WARNING);
let images = 0;
let done = 0;
let failed = 0;
const crawler = new PlaywrightCrawler({
  launchContext: {
    launcher: chromium,
    // No userDataDir: each browser Crawlee launches (it retires one after 100 pages) gets a
    // fresh temporary profile from Playwright, removed when it closes.
    launchOptions: {
      executablePath: process.env.SCRAPE_CHROMIUM || "/usr/bin/chromium",
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    },
  },
  maxConcurrency: concurrency,
  autoscaledPoolOptions: { desiredConcurrency: concurrency },
  preNavigationHooks: [
    async ({ page }) => {
      await playwrightUtils.blockRequests(page, {
        extraUrlPatterns: [".webp", ".avif", ".mp4", ".webm", ".woff2", ".ttf", ".otf"],
      });
    },
  ],
  async requestHandler({ page }) {
    const srcs = await page.$$eval("main img", (els) => els.map((e) => e.getAttribute("src")));
    images += srcs.length;
    done += 1;
  },
  failedRequestHandler() {
    failed += 1;
  },
}, new Configuration({ persistStorage: false, purgeOnStart: true }));

const urls = [];
for (let i = 1; i <= pages; i++) urls.push(`${base}/t/${i}.html`);
await crawler.run(urls);
console.log(`RESULT ${JSON.stringify({ pages: done, images, failed })}`);
