// Clicks `selector` while it is there, visible and enabled, and each click adds elements.
async ({ selector, maxClicks, settleMs, quietMs, deadlineMs }) => {
  __SETTLE__
  const end = Date.now() + deadlineMs;
  const count = () => document.getElementsByTagName("*").length;
  const visible = (el) => {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return box.width > 0 && box.height > 0 && style.visibility !== "hidden" && style.display !== "none";
  };
  let clicks = 0;
  while (clicks < maxClicks && Date.now() < end) {
    const el = document.querySelector(selector);
    if (!el || !visible(el) || el.disabled) break;
    const base = count();
    el.scrollIntoView({ block: "center" });
    const grew = settle({ base, grow: true, maxMs: Math.min(settleMs, end - Date.now()), quietMs });
    el.click();
    clicks++;
    if (!(await grew)) break;
  }
  return clicks;
}
