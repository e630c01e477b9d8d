// Installed in every document before the page's own scripts (Page.addScriptToEvaluateOnNewDocument).
// 1. Counts the page's fetch/XHR requests in flight and when the last one started, so scrolling
//    can tell "the next batch is on its way" from "nothing more comes".
// 2. Records every element that may carry an image URL (img, source, video, an attribute whose
//    name speaks of src/lazy/original/background/image/poster, a style with url(...)) as it is
//    mounted or changed, with its ancestors, so the snapshot can add the elements a virtualized
//    list has removed since.
(() => {
  const NET = Symbol.for("scrape.net");
  const MOUNTED = Symbol.for("scrape.mounted");
  if (window[NET]) return;
  // Requests in flight by id, each with the time it started.
  const net = { pending: new Map(), next: 0, lastStart: 0 };
  Object.defineProperty(window, NET, { value: net });
  const begin = () => {
    const id = net.next++;
    net.lastStart = Date.now();
    net.pending.set(id, net.lastStart);
    return () => net.pending.delete(id);
  };
  const fetch = window.fetch;
  if (fetch) {
    window.fetch = function (...args) {
      const done = begin();
      let p;
      try { p = fetch.apply(this, args); } catch (e) { done(); throw e; }
      p.then(done, done);
      return p;
    };
  }
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...args) {
    const done = begin();
    this.addEventListener("loadend", done, { once: true });
    try { return send.apply(this, args); } catch (e) { done(); throw e; }
  };

  const LIMIT = 50000;
  const MEDIA = new Set(["IMG", "SOURCE", "VIDEO", "IMAGE"]);
  const NAMES = /src|lazy|original|background|bg|image|poster/i;
  const records = new Map(); // element -> { clone, ancestors }
  const interesting = (el) => {
    if (MEDIA.has(el.tagName)) return true;
    for (const a of el.attributes) {
      if (NAMES.test(a.name) || (a.name === "style" && a.value.includes("url("))) return true;
    }
    return false;
  };
  const keep = (el) => {
    if (!interesting(el)) return;
    if (!records.has(el) && records.size >= LIMIT) return;
    const ancestors = [];
    for (let p = el.parentElement; p && p !== document.body && p !== document.documentElement; p = p.parentElement) {
      ancestors.push(p);
    }
    records.set(el, { clone: el.cloneNode(false), ancestors: ancestors.reverse() });
  };
  const visit = (node) => {
    if (node.nodeType !== 1) return;
    keep(node);
    for (const el of node.getElementsByTagName("*")) keep(el);
  };
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      if (m.type === "attributes") {
        if (m.target.isConnected) keep(m.target);
      } else {
        m.addedNodes.forEach(visit);
      }
    }
  }).observe(document, { childList: true, subtree: true, attributes: true });

  // The recorded elements no longer in the document, each under shallow copies of the
  // ancestors it had (shared ancestors copied once), in a hidden container; `null` if none.
  Object.defineProperty(window, MOUNTED, {
    value: () => {
      const box = document.createElement("div");
      box.setAttribute("data-scrape-mounted", "");
      box.hidden = true;
      const copies = new Map();
      let added = 0;
      for (const [el, { clone, ancestors }] of records) {
        if (el.isConnected) continue;
        let parent = box;
        for (const a of ancestors) {
          let copy = copies.get(a);
          if (!copy) {
            copy = a.cloneNode(false);
            copies.set(a, copy);
            parent.appendChild(copy);
          }
          parent = copy;
        }
        parent.appendChild(clone.cloneNode(false));
        added++;
      }
      return added ? box : null;
    },
  });
  Object.defineProperty(window, Symbol.for("scrape.seen"), { value: () => records.size });
})();
