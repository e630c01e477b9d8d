// Run in the page `scrape new-profile` drafts from, just before its DOM is read: marks what only
// the layout shows, for the draft (scrape_core::draft::layout) to read from the HTML.
// - data-scrape-scrolls: an element whose content scrolls inside it;
// - data-scrape-fixed: a visible element laid out fixed over the page (a banner, a dialog);
// - data-scrape-shadow-images: on the host of an open shadow root, the images its shadow trees
//   hold (nested roots included).
(() => {
  const inShadow = (root) => {
    let count = root.querySelectorAll("img, picture source, [style*='url(']").length;
    for (const el of root.querySelectorAll("*")) {
      if (el.shadowRoot) count += inShadow(el.shadowRoot);
    }
    return count;
  };
  const mark = (el) => {
    const style = getComputedStyle(el);
    const overflows = /(auto|scroll)/.test(style.overflowY);
    if (overflows && el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 8) {
      el.setAttribute("data-scrape-scrolls", "");
    }
    if (style.position === "fixed" && el.offsetWidth > 0 && el.offsetHeight > 0) {
      el.setAttribute("data-scrape-fixed", "");
    }
    if (el.shadowRoot) {
      el.setAttribute("data-scrape-shadow-images", String(inShadow(el.shadowRoot)));
    }
  };
  // Only `body *`: a body that scrolls is the window scrolling.
  for (const el of document.querySelectorAll("body *")) {
    try {
      mark(el);
    } catch (e) {
      // A mark missed leaves the draft with less to propose, never without a draft.
    }
  }
  return true;
})()
