// Resolves `true` as soon as `css` matches an element, `false` after `timeoutMs`.
({ css, timeoutMs }) =>
  new Promise((resolve) => {
    if (document.querySelector(css)) return resolve(true);
    const observer = new MutationObserver(() => {
      if (document.querySelector(css)) {
        observer.disconnect();
        clearTimeout(timer);
        resolve(true);
      }
    });
    observer.observe(document, { childList: true, subtree: true, attributes: true });
    const timer = setTimeout(() => {
      observer.disconnect();
      resolve(false);
    }, Math.max(0, timeoutMs));
  })
