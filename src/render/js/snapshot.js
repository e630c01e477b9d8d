// Copies each element's computed `background-image` into `data-scrape-background` (as a
// declaration, so the extractor reads it like `style`), adds the image elements mounted earlier
// and removed since (virtualized lists, recorded by record.js) in a hidden container, then
// serialises the document. Also says how the document's own request was answered.
() => {
  for (const el of document.querySelectorAll("body, body *")) {
    const image = getComputedStyle(el).backgroundImage;
    if (image && image.includes("url(")) {
      el.setAttribute("data-scrape-background", "background-image: " + image);
    }
  }
  const mounted = window[Symbol.for("scrape.mounted")];
  const box = mounted && document.body ? mounted() : null;
  if (box) document.body.appendChild(box);
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  const html = doctype + document.documentElement.outerHTML;
  if (box) box.remove();
  const navigation = performance.getEntriesByType("navigation")[0];
  const status = navigation && navigation.responseStatus ? navigation.responseStatus : 0;
  return { url: location.href, html, status, removed: box ? box.childElementCount : 0 };
}
