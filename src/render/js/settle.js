// Resolves `true` once the number of elements has changed from `base` (grown, if `grow`) and
// the DOM then stayed quiet for `quietMs`; `false` when `maxMs` passes first.
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
  });
