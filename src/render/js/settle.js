// Resolves `true` once the page's measure (prelude.js) has changed from `base` (grown, if
// `grow`) and the DOM then stayed quiet for `quietMs` (it may have changed before the call);
// `false` when `maxMs` passes first. Changes inside shadow roots count too.
const settle = ({ base, grow, maxMs, quietMs }) =>
  new Promise((resolve) => {
    const changed = () => (grow ? measure() > base : measure() !== base);
    let quiet = null;
    const done = (value) => {
      observer.disconnect();
      clearTimeout(quiet);
      clearTimeout(cap);
      resolve(value);
    };
    const observer = new MutationObserver(() => {
      clearTimeout(quiet);
      if (changed()) quiet = setTimeout(() => done(true), quietMs);
    });
    for (const root of deep.roots()) {
      observer.observe(root, { childList: true, subtree: true, attributes: true });
    }
    const cap = setTimeout(() => done(changed()), Math.max(0, maxMs));
    // Changed already (by a click just before): quiet from now on is enough.
    if (changed()) quiet = setTimeout(() => done(true), quietMs);
  });
