// The render benchmark's peer: a plain Playwright script that loads each page in a fresh page
// and waits for network idle, as most scraping tutorials do. Same Debian Chromium, same flags.
//
//   node bench/peer_playwright.mjs BASE_URL PAGES PATH...
//
// Prints one line: pages, seconds, pages/s.
import { chromium } from "playwright-core";

const [base, count, ...paths] = process.argv.slice(2);
const pages = Number(count);
const browser = await chromium.launch({
  executablePath: process.env.SCRAPE_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const started = performance.now();
for (let i = 0; i < pages; i++) {
  const page = await browser.newPage();
  await page.goto(base + paths[i % paths.length], { waitUntil: "networkidle" });
  await page.content();
  await page.close();
}
const seconds = (performance.now() - started) / 1000;
console.log(`playwright fresh page + networkidle: ${pages} pages in ${seconds.toFixed(1)} s, ${(pages / seconds).toFixed(2)} pages/s`);
await browser.close();
