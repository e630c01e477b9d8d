// Gets the first element matching `selector` ready for a click, as a person would find it:
// present, rendered, visible and enabled, then scrolled to the middle of the view. Returns
// `{ state: "none" }` when there is nothing to click; `{ state: "point", x, y, base }`, the
// element's centre in CSS pixels of the view, when that point hits the element (the caller
// clicks there with real mouse events); else clicks it from script (`el.click()`: it has no
// box, or another element covers its centre) and returns `{ state: "clicked", how, base }`.
// `base` is the number of elements before the click, for the caller's settle wait.
({ selector }) => {
  const el = document.querySelector(selector);
  if (!el || el.disabled) return { state: "none" };
  const style = getComputedStyle(el);
  // No client rects: `display: none` on it or an ancestor.
  if (el.getClientRects().length === 0 || style.visibility === "hidden") return { state: "none" };
  el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const base = document.getElementsByTagName("*").length;
  const box = el.getBoundingClientRect();
  const x = box.left + box.width / 2;
  const y = box.top + box.height / 2;
  let how = null;
  if (box.width < 1 || box.height < 1) {
    how = "no box";
  } else {
    const root = el.getRootNode();
    const hit = (root.elementFromPoint ? root : document).elementFromPoint(x, y);
    if (!hit || (hit !== el && !el.contains(hit))) how = "covered";
  }
  if (how) {
    el.click();
    return { state: "clicked", how, base };
  }
  return { state: "point", x, y, base };
}
