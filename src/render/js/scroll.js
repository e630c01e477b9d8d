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
  // Two frames (or 100 ms, where frames are throttled): IntersectionObserver computes what is
  // visible once per frame, so a sentinel must be seen out of view before a scroll brings it
  // back, or the page never hears about it.
  const frames = () =>
    new Promise((resolve) => {
      requestAnimationFrame(() => requestAnimationFrame(resolve));
      setTimeout(resolve, 100);
    });
  let scrolls = 0;
  await frames();
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
      // Nothing came: step back up a screen and let a frame pass, so the next scroll down
      // crosses the page's sentinel again, as a person scrolling would.
      window.scrollTo(0, Math.max(0, h - 2 * window.innerHeight));
      await frames();
      continue;
    }
    idle = 0;
    lastHeight = h;
    lastImages = i;
  }
  return scrolls;
}
