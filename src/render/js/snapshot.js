// Serialises the page as the extractor reads it:
// - each element's computed `background-image` copied into `data-scrape-background` (as a
//   declaration, so the extractor reads it like `style`);
// - the content of every shadow root (open ones, and those a script attached while record.js
//   watched) put inside its host, after the host's own children, so selectors of descendants
//   (`photo-card img`) match across the roots, nested to any depth;
// - the document of every same-origin frame put after its `<iframe>` in a hidden
//   `<div data-scrape-frame="URL">`, its URLs made absolute (a frame resolves them against its
//   own address); a cross-origin frame cannot be read from the page and is listed in `frames`;
// - the image elements mounted earlier and removed since (virtualized lists, recycled
//   elements; recorded by record.js), in a hidden container.
// The live page is left as it is: the copy is built in a document of its own, which loads
// nothing. Also says how the document's own request was answered.
async () => {
  __DEEP__
  // A script sent while the page navigates runs as soon as the next document exists, before
  // any of its markup is parsed (a page that reloads itself): its parsing is waited for, a
  // second at most. A document still loading at its deadline is read as far as it got.
  if (document.readyState === "loading") {
    await new Promise((parsed) => {
      document.addEventListener("DOMContentLoaded", parsed, { once: true });
      setTimeout(parsed, 1000);
    });
  }
  // Between two documents (a reload): nothing to read yet.
  if (!document.documentElement) return { url: location.href, html: "", status: 0, removed: 0, frames: [] };
  const out = document.implementation.createHTMLDocument("");
  const frames = [];
  const absolute = (value, base) => {
    try { return new URL(value, base).href; } catch (e) { return value; }
  };
  // Attributes that hold one URL, a list of candidates, or CSS.
  const URLISH = /src|href|lazy|original|background|bg|image|poster/i;
  const rebase = (copy, base) => {
    for (const a of [...copy.attributes]) {
      const value = a.value.trim();
      if (!value || /^(data:|blob:|javascript:|#|\{|\[)/i.test(value)) continue;
      if (a.name === "style" || a.name === "data-scrape-background") {
        copy.setAttribute(a.name, a.value.replace(/url\(\s*(['"]?)([^'")]+)\1\s*\)/g, (_, q, u) => `url(${q}${absolute(u, base)}${q})`));
      } else if (/srcset/i.test(a.name)) {
        copy.setAttribute(a.name, value.split(",").map((c) => {
          const [u, ...rest] = c.trim().split(/\s+/);
          return [absolute(u, base), ...rest].join(" ");
        }).join(", "));
      } else if (URLISH.test(a.name) && !/\s/.test(value)) {
        copy.setAttribute(a.name, absolute(value, base));
      }
    }
  };
  // A copy of `node` and what is below it, in `out`; `base` is set inside a frame's document.
  const copy = (node, base) => {
    if (node.nodeType !== 1) return out.importNode(node, false);
    // A template's content is not among its children: copied whole.
    if (node.tagName === "TEMPLATE") return out.importNode(node, true);
    const el = out.importNode(node, false);
    const image = node.ownerDocument.defaultView
      ? node.ownerDocument.defaultView.getComputedStyle(node).backgroundImage
      : "";
    if (image && image.includes("url(")) el.setAttribute("data-scrape-background", "background-image: " + image);
    if (base) rebase(el, base);
    if (node.tagName === "NOSCRIPT") {
      // Text in a page that runs scripts; the extractor reads it as markup (scripts off), and
      // this document, which runs none, serialises it as such once parsed.
      el.innerHTML = node.textContent;
      return el;
    }
    for (const child of node.childNodes) el.appendChild(copy(child, base));
    const shadow = deep.shadowOf(node);
    if (shadow) for (const child of shadow.childNodes) el.appendChild(copy(child, base));
    if (node.tagName === "IFRAME" || node.tagName === "FRAME") {
      const src = node.src || node.getAttribute("src") || "";
      let doc = null;
      try { doc = node.contentDocument; } catch (e) { doc = null; }
      if (doc && doc.documentElement) {
        const box = out.createElement("div");
        box.setAttribute("data-scrape-frame", doc.URL);
        box.hidden = true;
        const inner = doc.body || doc.documentElement;
        for (const child of inner.childNodes) box.appendChild(copy(child, doc.baseURI));
        el.__frame = box;
      } else if (src && !/^(about|javascript|data):/i.test(src)) {
        frames.push(src);
      }
    }
    return el;
  };
  // Frames go after their `<iframe>`, whose own content the HTML parser reads as text.
  const place = (el) => {
    for (const child of [...el.children]) place(child);
    if (el.__frame) {
      const frame = el.__frame;
      delete el.__frame;
      el.after(frame);
      place(frame);
    }
  };
  const root = copy(document.documentElement, null);
  out.replaceChild(root, out.documentElement);
  place(root);
  const mounted = window[Symbol.for("scrape.mounted")];
  const box = mounted && root.querySelector("body") ? mounted(out) : null;
  if (box) root.querySelector("body").appendChild(box);
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  const html = doctype + root.outerHTML;
  const navigation = performance.getEntriesByType("navigation")[0];
  const status = navigation && navigation.responseStatus ? navigation.responseStatus : 0;
  return { url: location.href, html, status, removed: box ? box.childElementCount : 0, frames };
}
