// Resolves `true` once the number of elements has changed from `base` (grown, if `grow`) and
// the DOM then stayed quiet for `quietMs` (it may have changed before the call); `false` when `maxMs` passes first.
const settle = ({ base, grow, maxMs, quietMs }) =>
  new Promise((resolve) => {
    const count = () => document.getElementsByTagName("*").length;
    const changed = () => (grow ? count() > base : count() !== base);
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
    observer.observe(document, { childList: true, subtree: true, attributes: true });
    const cap = setTimeout(() => done(changed()), Math.max(0, maxMs));
    // Changed already (by a click just before): quiet from now on is enough.
    if (changed()) quiet = setTimeout(() => done(true), quietMs);
  });
