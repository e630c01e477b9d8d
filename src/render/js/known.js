// On a refresh: puts on the page the image URLs the job knows on it (`urls`) and after how many
// rounds in a row of only those loading more stops (`rounds`), for scroll.js and the click
// loop (`knownRound` in prelude.js). What the page shows already is not a round.
({ urls, rounds }) => {
  const fresh = window[Symbol.for("scrape.fresh")];
  const from = fresh ? fresh(Number.MAX_SAFE_INTEGER, new Set()).next : 0;
  const known = { urls: new Set(urls), rounds, from, inARow: 0 };
  Object.defineProperty(window, Symbol.for("scrape.known"), { value: known, configurable: true });
  return !!fresh;
}
