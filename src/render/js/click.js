// Gets the first element matching `selector` (in the document or a shadow root) ready for a
// click, as a person would find it: present, rendered, visible and enabled (neither `disabled`
// nor `aria-disabled="true"`), then scrolled to the middle of the view. Returns
// `{ state: "none", why }` when there is nothing to click; `{ state: "point", x, y, ... }`, the
// element's centre in CSS pixels of the view, when that point hits the element (the caller
// clicks there with real mouse events); else clicks it from script (`el.click()`: it has no
// box, or another element covers its centre) and returns `{ state: "clicked", how, ... }`.
// Each also carries `base` (the page's measure before the click, for the settle wait), `seen`
// and `elements` (its content so far, see prelude.js).
({ selector }) => {
  __PRELUDE__
  const el = deep.first(selector);
  if (!el) return { state: "none", why: "gone" };
  if (el.disabled || el.getAttribute("aria-disabled") === "true") return { state: "none", why: "disabled" };
  const style = getComputedStyle(el);
  // No client rects: `display: none` on it or an ancestor.
  if (el.getClientRects().length === 0 || style.visibility === "hidden") return { state: "none", why: "hidden" };
  el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const before = { base: measure(), seen: seen(), elements: elements(), at: Date.now() };
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
    return { state: "clicked", how, ...before };
  }
  return { state: "point", x, y, ...before };
}
