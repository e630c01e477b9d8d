// Scrolls the window (or the scroll container `element`) to the bottom until nothing grows for
// two rounds in a row while the network is quiet: the page height, the image count and the
// elements ever mounted (record.js; a virtualized list unmounts old items as new ones come)
// stay put, and no fetch/XHR of the page is in flight or was started within the quiet window.
// A batch on its way (a slow API, a loaded machine) is waited for, up to the page's deadline.
// Stops early when an element matches `end`. Returns how many scrolls and why it stopped:
// "no growth", "cap", "time", "end marker" or "no element".
async ({ maxScrolls, settleMs, quietMs, deadlineMs, element, end: endMarker }) => {
  __SETTLE__
  const end = Date.now() + deadlineMs;
  const net = window[Symbol.for("scrape.net")] || { pending: new Map(), lastStart: 0 };
  const seenFn = window[Symbol.for("scrape.seen")];
  const seen = () => (seenFn ? seenFn() : 0);
  const count = () => document.getElementsByTagName("*").length;
  let box = null;
  if (element) {
    box = document.querySelector(element);
    if (!box) return { scrolls: 0, stop: "no element" };
  }
  const height = () =>
    box
      ? box.scrollHeight
      : Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);
  const view = () => (box ? box.clientHeight : window.innerHeight);
  const scrollTo = (y) => (box ? box.scrollTo(0, y) : window.scrollTo(0, y));
  const images = () =>
    document.images.length + document.querySelectorAll("[data-src],[data-srcset]").length;
  const ended = () => !!(endMarker && document.querySelector(endMarker));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
  // Two frames (or 1 s, where frames are throttled): IntersectionObserver computes what is
  // visible once per frame, so a sentinel must be seen out of view before a scroll brings it
  // back, or the page never hears about it. On a loaded machine a frame can take far longer
  // than a timer: waiting for real frames is what keeps a busy page scrolling.
  const frames = () =>
    new Promise((resolve) => {
      requestAnimationFrame(() => requestAnimationFrame(resolve));
      setTimeout(resolve, 1000);
    });
  // A request started since `since` is in flight, or one started within `quietMs`. Requests
  // older than the scrolls since the last growth (a long poll, a stream) do not count.
  const busy = (since) =>
    Date.now() - net.lastStart < quietMs || [...net.pending.values()].some((t) => t >= since);
  // Waits while the requests since `since` are in flight (at most 4 settle times, at least
  // 10 s, so a page polling without end does not hold every scroll), then for the DOM to settle
  // on what they brought.
  const network = async (since) => {
    if (!busy(since)) return;
    const limit = Math.min(end, Date.now() + Math.max(4 * settleMs, 10000));
    while (busy(since) && Date.now() < limit) await sleep(Math.min(50, limit - Date.now()));
    await settle({ base: count(), grow: false, maxMs: Math.min(settleMs, end - Date.now()), quietMs });
  };
  let scrolls = 0;
  let stop = "cap";
  await frames();
  let last = [height(), images(), seen()];
  let idle = 0;
  // The first scroll since the page last grew: a request any scroll since then started is
  // awaited, even one whose frame came too late for the round that caused it (a loaded machine
  // runs the page's observer long after the scroll).
  let since = null;
  let graced = false;
  while (true) {
    if (ended()) { stop = "end marker"; break; }
    if (scrolls >= maxScrolls) { stop = "cap"; break; }
    if (Date.now() >= end) { stop = "time"; break; }
    // What the last round brought is laid out, and the sentinel seen out of view, first.
    await frames();
    const base = count();
    if (since === null) since = Date.now();
    scrollTo(height());
    scrolls++;
    await settle({ base, grow: false, maxMs: Math.min(settleMs, end - Date.now()), quietMs });
    await network(since);
    const now = [height(), images(), seen()];
    if (now.every((v, i) => v <= last[i])) {
      if (Date.now() >= end) { stop = "time"; break; }
      idle++;
      if (idle >= 2 && !graced) {
        // Once per quiet streak: a frame that comes late may only now run the observer that
        // asks for more; if it did, that request is awaited like any other.
        graced = true;
        await frames();
        if (busy(since)) { idle = 1; continue; }
      }
      if (idle >= 2) { stop = "no growth"; break; }
      // Nothing came: step back up a screen and let a frame pass, so the next scroll down
      // crosses the page's sentinel again, as a person scrolling would.
      scrollTo(Math.max(0, now[0] - 2 * view()));
      await frames();
      continue;
    }
    idle = 0;
    since = null;
    graced = false;
    last = now.map((v, i) => Math.max(v, last[i]));
  }
  return { scrolls, stop };
}
