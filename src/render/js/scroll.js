// Scrolls to the bottom until neither the page height nor the image count grows for two rounds
// in a row: a page whose next batch is slow to arrive (a loaded machine, a slow API) gets a
// second settle window before the scrolling stops.
async ({ maxScrolls, settleMs, quietMs, deadlineMs }) => {
  __SETTLE__
  const end = Date.now() + deadlineMs;
  const count = () => document.getElementsByTagName("*").length;
  const height = () =>
    Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);
  const images = () =>
    document.images.length + document.querySelectorAll("[data-src],[data-srcset]").length;
  let scrolls = 0;
  let lastHeight = height();
  let lastImages = images();
  let idle = 0;
  while (scrolls < maxScrolls && Date.now() < end) {
    const base = count();
    window.scrollTo(0, height());
    scrolls++;
    await settle({ base, grow: false, maxMs: Math.min(settleMs, end - Date.now()), quietMs });
    const h = height();
    const i = images();
    if (h <= lastHeight && i <= lastImages) {
      idle++;
      if (idle >= 2) break;
      continue;
    }
    idle = 0;
    lastHeight = h;
    lastImages = i;
  }
  return scrolls;
}
