// Resolves `true` as soon as `css` matches an element (in the document or a shadow root, see
// prelude.js), `false` after `timeoutMs`.
({ css, timeoutMs }) => {
  __PRELUDE__
  if (deep.first(css)) return true;
  return new Promise((resolve) => {
    let checking = null;
    const finish = (value) => {
      observer.disconnect();
      clearTimeout(checking);
      clearTimeout(timer);
      clearInterval(poll);
      resolve(value);
    };
    const check = () => {
      checking = null;
      if (deep.first(css)) finish(true);
    };
    const soon = (ms) => { if (!checking) checking = setTimeout(check, ms); };
    // Checked at most every 50 ms: a walk of the shadow roots is not free on a busy page.
    const observer = new MutationObserver(() => soon(50));
    for (const root of deep.roots()) {
      observer.observe(root, { childList: true, subtree: true, attributes: true });
    }
    // Shadow roots attached later are not observed: look again now and then.
    const poll = setInterval(() => soon(0), 250);
    const timer = setTimeout(() => finish(false), Math.max(0, timeoutMs));
  });
}
