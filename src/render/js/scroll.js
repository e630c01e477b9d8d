// Scrolls the window (or the scroll container `element`) as a person does: a screen at a time,
// each step held long enough for the page's observers to run and the requests they start to be
// answered, so lazy content between the first and the last screen mounts, and a virtualized list
// shows every row on its way. At the bottom it waits up to `settleMs` for more (the page grows,
// or a request of the page starts and is answered); more content means another round, at most
// `maxScrolls` of them. The end is decided by new content (distinct image URLs ever seen, the
// most elements the page ever had, its height) with the network quiet, never by rows mounted
// again. A page that reacts to nothing (no IntersectionObserver, no scroll listener, no lazy
// element) is not stepped through: it goes to the bottom at once and ends as soon as it is
// quiet. Stops early when an element matches `end`, and on a refresh once rounds in a row
// brought only images the job knows (`knownRound`). Returns the rounds (`scrolls`), the steps
// and why it stopped: "no growth", "cap", "time", "end marker", "known" or "no element".
async ({ maxScrolls, settleMs, quietMs, deadlineMs, element, end: endMarker }) => {
  __PRELUDE__
  const end = Date.now() + deadlineMs;
  const lazyFn = window[Symbol.for("scrape.lazy")];
  let box = null;
  if (element) {
    box = deep.first(element);
    if (!box) return { scrolls: 0, steps: 0, stop: "no element" };
  }
  const height = () =>
    box
      ? box.scrollHeight
      : Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);
  const view = () => (box ? box.clientHeight : window.innerHeight);
  const top = () => (box ? box.scrollTop : window.scrollY);
  const scrollTo = (y) => (box || window).scrollTo({ top: y, behavior: "instant" });
  const atBottom = () => top() + view() >= height() - 2;
  const lazy = () => !!(lazyFn && lazyFn(box));
  const ended = () => !!(endMarker && deep.first(endMarker));
  const left = () => Math.max(0, end - Date.now());
  const pending = (since) => busy(since, quietMs);
  const network = (since) => answered({ since, quietMs, settleMs, end });
  // The most content seen so far; `grew()` says whether there is more now, and keeps it.
  const high = { urls: seen(), elements: elements(), height: height() };
  const grew = () => {
    const now = { urls: seen(), elements: elements(), height: height() };
    let more = false;
    for (const k in now) if (now[k] > high[k]) { high[k] = now[k]; more = true; }
    return more;
  };
  // One step's wait: frames for the observers, then the requests they started, or a short
  // quiet for what they changed.
  const react = async (since) => {
    await frames();
    if (pending(since)) await network(since);
    else await settle({ base: measure(), grow: false, maxMs: Math.min(quietMs, 100, left()), quietMs: 50 });
  };
  // At the bottom: up to `ms` for the page to grow or start a request (then answered).
  const more = async (since, ms) => {
    await frames();
    const until = Math.min(end, Date.now() + ms);
    while (Date.now() < until) {
      if (grew()) return true;
      if (pending(since)) { await network(since); return grew(); }
      await settle({ base: measure(), grow: true, maxMs: Math.min(100, until - Date.now()), quietMs: 50 });
    }
    return grew();
  };

  let scrolls = 0;
  let steps = 0;
  let stop = "cap";
  // Set when a scroll did not move: the bottom for all that can be scrolled.
  let stuck = false;
  await frames();
  // What the page asked for while it loaded (its first batch) is answered before the first
  // step: scrolled past before it came, the page would look finished.
  const born = performance.timeOrigin || 0;
  if (busy(born, quietMs)) await network(born);
  // When the view last moved: a request started since then is the page's answer to it, even
  // one that started after a step's own wait had ended.
  let moved = born;
  const move = (y) => { moved = Date.now(); scrollTo(y); };
  while (true) {
    if (ended()) { stop = "end marker"; break; }
    if (Date.now() >= end) { stop = "time"; break; }
    if (!atBottom() && !stuck) {
      const since = Date.now();
      const before = height();
      const from = top();
      // A page that reacts to nothing is not stepped through.
      move(lazy() ? from + Math.max(50, Math.floor(view() * 0.85)) : height());
      stuck = top() === from;
      steps++;
      await react(since);
      // A batch that came before the bottom was reached counts as a round.
      if (grew() && height() > before) {
        if (knownRound()) { scrolls++; stop = "known"; break; }
        if (++scrolls >= maxScrolls) { stop = "cap"; break; }
      }
      continue;
    }
    if (!lazy() && !pending(0)) {
      await frames();
      if (!grew() && !pending(0)) { stop = "no growth"; break; }
    }
    if (scrolls >= maxScrolls) { stop = "cap"; break; }
    const since = moved;
    stuck = false;
    if (await more(since, settleMs)) {
      scrolls++;
      if (knownRound()) { stop = "known"; break; }
      continue;
    }
    if (Date.now() >= end) { stop = "time"; break; }
    // Nothing came: a screen back up and down again, as a person would, so a sentinel the
    // page watches leaves the view and enters it again. Its observer asks within frames, so
    // a shorter wait does.
    move(Math.max(0, top() - view()));
    await frames();
    move(height());
    if (await more(since, Math.min(settleMs, Math.max(2 * quietMs, 500)))) {
      scrolls++;
      if (knownRound()) { stop = "known"; break; }
      continue;
    }
    stop = Date.now() >= end ? "time" : "no growth";
    break;
  }
  return { scrolls, steps, stop };
}
