// What the scripts that wait, scroll and click share: the selectors that see into shadow roots
// (`deep`), the measure of the page's content and the settle wait. Put in place of
// `__PRELUDE__`.
__DEEP__
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
// Distinct image URLs (and other image-like attribute values) the page ever showed (record.js).
const seen = () => {
  const count = window[Symbol.for("scrape.seen")];
  return count ? count() : 0;
};
const elements = () => document.getElementsByTagName("*").length;
// On a refresh: whether loading more should stop, the rounds since the last look at it (what
// a scroll round or a click brought) having been, that many times in a row, only images the
// job knows (set on the page by known.js; record.js keeps what came in order).
const knownRound = () => {
  const known = window[Symbol.for("scrape.known")];
  const fresh = window[Symbol.for("scrape.fresh")];
  if (!known || !fresh) return false;
  const round = fresh(known.from, known.urls);
  known.from = round.next;
  known.inARow = round.total > 0 && round.fresh === 0 ? known.inARow + 1 : 0;
  return known.inARow >= known.rounds;
};
// One number that grows with the page: its elements and the image URLs it ever showed. A
// carousel that swaps a slide for a new one grows it; the same slide coming back does not.
const measure = () => elements() + seen();
__SETTLE__
// The page's fetch/XHR requests in flight (record.js).
const net = window[Symbol.for("scrape.net")] || { pending: new Map(), lastStart: 0 };
// A request started since `since` is in flight, or one started within `quietMs`. Requests
// older than that (a long poll, a stream) do not hold the page.
const busy = (since, quietMs) =>
  Date.now() - net.lastStart < quietMs || [...net.pending.values()].some((t) => t >= since);
// Waits while the requests started since `since` are in flight (at most 4 settle times, at
// least 10 s, so a page polling without end does not hold every step; never past `end`), then
// for the DOM to settle on what they brought.
const answered = async ({ since, quietMs, settleMs, end }) => {
  const limit = Math.min(end, Date.now() + Math.max(4 * settleMs, 10000));
  while (busy(since, quietMs) && Date.now() < limit) await sleep(Math.min(50, limit - Date.now()));
  const maxMs = Math.min(settleMs, Math.max(0, end - Date.now()));
  await settle({ base: measure(), grow: false, maxMs, quietMs });
};
