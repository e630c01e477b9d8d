// Copies each element's computed `background-image` into `data-scrape-background` (as a
// declaration, so the extractor reads it like `style`), then serialises the document.
() => {
  for (const el of document.querySelectorAll("body, body *")) {
    const image = getComputedStyle(el).backgroundImage;
    if (image && image.includes("url(")) {
      el.setAttribute("data-scrape-background", "background-image: " + image);
    }
  }
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  return { url: location.href, html: doctype + document.documentElement.outerHTML };
}
