// Scrolls to the bottom until neither the page height nor the image count grows.
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
  while (scrolls < maxScrolls && Date.now() < end) {
    const base = count();
    window.scrollTo(0, height());
    scrolls++;
    await settle({ base, grow: false, maxMs: Math.min(settleMs, end - Date.now()), quietMs });
    const h = height();
    const i = images();
    if (h <= lastHeight && i <= lastImages) break;
    lastHeight = h;
    lastImages = i;
  }
  return scrolls;
}
