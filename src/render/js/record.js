// Installed in every document before the page's own scripts (Page.addScriptToEvaluateOnNewDocument).
// 1. Counts the page's fetch/XHR requests in flight and when the last one started, so scrolling
//    can tell "the next batch is on its way" from "nothing more comes".
// 2. Records every element that may carry an image URL (img, source, video, an attribute whose
//    name speaks of src/lazy/original/background/image/poster, a style with url(...)) as it is
//    mounted or changed, with its ancestors, so the snapshot can add the elements a virtualized
//    list has removed since. An element reused for another item (a recycling list, a carousel
//    that swaps one slide's `src`) leaves a copy of each earlier state, so no URL it ever
//    showed is lost.
// 3. Counts the distinct values of those attributes ever seen: new *content*, which scrolling
//    and clicking go on for, as opposed to the same rows mounted again.
// 4. Keeps every shadow root a script attaches, open or closed, and watches it like the
//    document, so the snapshot and the selectors of waits and clicks can see into it.
// 5. Tells whether the page reacts to scrolling at all (scroll.js steps through those only).
// 6. Keeps the elements in the order they were first recorded, so a refresh can tell whether
//    what a scroll or a click brought is all known to the job (`scrape.fresh`).
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
  // Copies live in a document of their own, which never loads what they name.
  const inert = document.implementation.createHTMLDocument("");
  const records = new Map(); // element -> { clone, ancestors, sig }
  const order = []; // elements in the order they were first recorded
  const retired = []; // earlier states of elements reused for other items
  const values = new Set(); // distinct image-like attribute values ever seen
  const carries = (a) => NAMES.test(a.name) || (a.name === "style" && a.value.includes("url("));
  const interesting = (el) => {
    if (MEDIA.has(el.tagName)) return true;
    for (const a of el.attributes) if (carries(a)) return true;
    return false;
  };
  // The image-like attribute values of an element, as one string.
  const signature = (el) => {
    let out = "";
    for (const a of el.attributes) {
      if (!carries(a) || !a.value) continue;
      out += a.name + "=" + a.value + "\n";
      if (values.size < 4 * LIMIT) values.add(a.value);
    }
    return out;
  };
  const keep = (el) => {
    if (!interesting(el)) return;
    const known = records.get(el);
    if (!known && records.size >= LIMIT) return;
    const sig = signature(el);
    if (known && known.sig === sig) return;
    if (known && known.sig && retired.length < LIMIT) retired.push(known);
    const ancestors = [];
    for (let p = el.parentElement; p && p !== document.body && p !== document.documentElement; p = p.parentElement) {
      ancestors.push(p);
    }
    records.set(el, { clone: inert.importNode(el, false), ancestors: ancestors.reverse(), sig });
    if (!known) order.push(el);
  };
  const visit = (node) => {
    if (node.nodeType !== 1) return;
    keep(node);
    for (const el of node.getElementsByTagName("*")) keep(el);
  };
  const OPTIONS = { childList: true, subtree: true, attributes: true };
  const observer = new MutationObserver((mutations) => {
    for (const m of mutations) {
      if (m.type === "attributes") {
        if (m.target.isConnected) keep(m.target);
      } else {
        m.addedNodes.forEach(visit);
      }
    }
  });
  observer.observe(document, OPTIONS);

  // Shadow roots, closed ones too: a closed root is out of reach of any script but this one,
  // which runs before the page's.
  const shadows = new WeakMap();
  let shadowCount = 0;
  const attach = Element.prototype.attachShadow;
  if (attach) {
    Element.prototype.attachShadow = function (...args) {
      const root = attach.apply(this, args);
      shadows.set(this, root);
      shadowCount++;
      try { observer.observe(root, OPTIONS); } catch (e) { /* not observable: read at the end */ }
      return root;
    };
  }
  Object.defineProperty(window, Symbol.for("scrape.shadow"), {
    value: (el) => el.shadowRoot || shadows.get(el) || null,
  });
  Object.defineProperty(window, Symbol.for("scrape.shadows"), { value: () => shadowCount });

  // The recorded elements no longer in the document (and the earlier states of reused ones),
  // each under shallow copies of the ancestors it had (shared ancestors copied once), in a
  // hidden container of `doc`; `null` if none.
  Object.defineProperty(window, MOUNTED, {
    value: (doc = document) => {
      const box = doc.createElement("div");
      box.setAttribute("data-scrape-mounted", "");
      box.hidden = true;
      const copies = new Map();
      let added = 0;
      const place = ({ clone, ancestors }) => {
        let parent = box;
        for (const a of ancestors) {
          let copy = copies.get(a);
          if (!copy) {
            copy = doc.importNode(a, false);
            copies.set(a, copy);
            parent.appendChild(copy);
          }
          parent = copy;
        }
        parent.appendChild(doc.importNode(clone, false));
        added++;
      };
      for (const [el, record] of records) if (!el.isConnected) place(record);
      retired.forEach(place);
      return added ? box : null;
    },
  });
  Object.defineProperty(window, Symbol.for("scrape.seen"), { value: () => values.size });

  // The absolute http(s) URLs in an element's image-like attributes: a src, each candidate of
  // a srcset, each url(...) of a style.
  const urlsOf = (el) => {
    const urls = [];
    const add = (u) => {
      try {
        const url = new URL(u.trim(), document.baseURI);
        if (url.protocol === "http:" || url.protocol === "https:") urls.push(url.href);
      } catch (e) { /* not a URL */ }
    };
    for (const a of el.attributes) {
      if (!carries(a) || !a.value) continue;
      if (a.name === "style") {
        for (const m of a.value.matchAll(/url\(\s*(['"]?)(.*?)\1\s*\)/g)) add(m[2]);
      } else if (/srcset/i.test(a.name)) {
        for (const c of a.value.split(/,\s+/)) add(c.trim().split(/\s+/)[0] || "");
      } else {
        add(a.value);
      }
    }
    return urls;
  };
  // Of the elements recorded since the first `from`: how many carry an image URL (`total`),
  // and how many of those carry none that `known` (a Set of URLs) holds (`fresh`); `next` is
  // where the next look starts.
  Object.defineProperty(window, Symbol.for("scrape.fresh"), {
    value: (from, known) => {
      let total = 0;
      let fresh = 0;
      for (const el of order.slice(from)) {
        const urls = urlsOf(el);
        if (urls.length === 0) continue;
        total++;
        if (!urls.some((u) => known.has(u))) fresh++;
      }
      return { next: order.length, total, fresh };
    },
  });

  // Whether the page reacts to scrolling: it watches elements with an IntersectionObserver,
  // listens for scroll or wheel events, or has lazy elements (`loading="lazy"`). A page that
  // does none of these is not scrolled a screen at a time.
  let observing = 0;
  let listening = 0;
  const IO = window.IntersectionObserver;
  if (IO) {
    const observe = IO.prototype.observe;
    IO.prototype.observe = function (...args) {
      observing++;
      return observe.apply(this, args);
    };
  }
  const listen = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, ...rest) {
    if (type === "scroll" || type === "wheel" || type === "scrollend") listening++;
    return listen.call(this, type, ...rest);
  };
  Object.defineProperty(window, Symbol.for("scrape.lazy"), {
    value: (box) =>
      observing > 0 ||
      listening > 0 ||
      !!(window.onscroll || window.onwheel || document.onscroll || (box && box.onscroll)) ||
      !!document.querySelector("[loading=lazy]"),
  });
})();
