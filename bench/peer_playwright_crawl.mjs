// The crawl benchmark's plain Playwright peer: playwright-core (npm registry, under /tmp) driving
// Debian's Chromium, one page at a time, each in a fresh page of one context, images, media and
// fonts blocked by a route. (bench/peer_playwright.mjs, the render benchmark's peer, blocks
// nothing and takes a list of paths; this one renders the crawl server's gallery.)
//
//   node peer_playwright_crawl.mjs BASE_URL PAGES [WAIT]
//
// Renders BASE_URL/t/1.html .. /t/PAGES.html; WAIT is `networkidle` (default, as the render
// peer and scrape's default wait) or `load`. Reads the `src` of every `main img`.
// Prints `RESULT {"pages": P, "images": I}`.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [base, count, wait = "networkidle"] = process.argv.slice(2);
const pages = Number(count);
const userDataDir = mkdtempSync(join(tmpdir(), "pw-bench-profile-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.SCRAPE_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const blocked = new Set(["image", "media", "font"]);
await context.route("**/*", (route) =>
  blocked.has(route.request().resourceType()) ? route.abort() : route.continue());
let images = 0;
let done = 0;
for (let i = 1; i <= pages; i++) {
  const page = await context.newPage();
  const res = await page.goto(`${base}/t/${i}.html`, { waitUntil: wait });
  const srcs = await page.$$eval("main img", (els) => els.map((e) => e.getAttribute("src")));
  if (res && res.ok()) done += 1;
  images += srcs.length;
  await page.close();
}
await context.close();
rmSync(userDataDir, { recursive: true, force: true });
console.log(`RESULT ${JSON.stringify({ pages: done, images })}`);
