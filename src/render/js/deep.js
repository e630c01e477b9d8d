// Selectors that see into shadow roots, nested to any depth, as a person sees the page. A
// selector matches inside each root (the document and every shadow root, open ones and those a
// script attached while record.js watched), and a selector of descendants (`photo-card img`,
// `#gallery .card img`) also matches across the roots: an element in a shadow root is a
// descendant of its host. Used by the waits, clicks and scrolls of a page.
const deep = (() => {
  const shadowOf = window[Symbol.for("scrape.shadow")] || ((el) => el.shadowRoot);
  const shadowsAttached = window[Symbol.for("scrape.shadows")] || (() => 0);
  // Whether the page has a shadow root at all: declarative ones are found by a walk, which
  // is done at most once a second while none is found.
  let lastWalk = -Infinity;
  let walked = false;
  const roots = () => {
    const out = [document];
    const now = Date.now();
    if (!shadowsAttached() && walked && now - lastWalk < 1000) return out;
    lastWalk = now;
    for (let i = 0; i < out.length; i++) {
      for (const el of out[i].querySelectorAll("*")) {
        const root = shadowOf(el);
        if (root) out.push(root);
      }
    }
    walked = out.length === 1;
    return out;
  };
  // Splits `text` at the top-level occurrences of the characters in `at` (outside brackets,
  // parentheses and quotes); with `keep`, the separators are returned too.
  const split = (text, at) => {
    const parts = [];
    let depth = 0, quote = null, start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quote) { if (c === "\\") i++; else if (c === quote) quote = null; continue; }
      if (c === '"' || c === "'") quote = c;
      else if (c === "(" || c === "[") depth++;
      else if (c === ")" || c === "]") depth--;
      else if (depth === 0 && at.includes(c)) { parts.push(text.slice(start, i)); start = i + 1; }
    }
    parts.push(text.slice(start));
    return parts.map((p) => p.trim()).filter((p) => p);
  };
  // The compounds of a selector of descendants only (`a b c`), or null when it uses another
  // combinator, which then matches inside one root only.
  const descendants = (selector) => {
    if (split(selector, ">+~").length > 1) return null;
    const parts = split(selector, " \t\n");
    return parts.length > 1 ? parts : null;
  };
  // The element's parent in the composed tree: its parent, or the host of its shadow root.
  const up = (el) => el.parentElement || (el.getRootNode && el.getRootNode().host) || null;
  const matchesAcross = (el, compounds) => {
    let i = compounds.length - 2;
    for (let p = up(el); p && i >= 0; p = up(p)) if (p.matches(compounds[i])) i--;
    return i < 0;
  };
  // Every element matching `selector`, in the document first, then in each shadow root.
  const all = (selector, limit = Infinity) => {
    const found = new Set();
    const chains = split(selector, ",").map(descendants).filter((c) => c);
    for (const root of roots()) {
      for (const el of root.querySelectorAll(selector)) {
        found.add(el);
        if (found.size >= limit) return [...found];
      }
      for (const chain of chains) {
        for (const el of root.querySelectorAll(chain[chain.length - 1])) {
          if (!found.has(el) && matchesAcross(el, chain)) {
            found.add(el);
            if (found.size >= limit) return [...found];
          }
        }
      }
    }
    return [...found];
  };
  const first = (selector) => document.querySelector(selector) || all(selector, 1)[0] || null;
  return { roots, all, first, shadowOf };
})();
