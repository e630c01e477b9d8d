//! Overlays to click away before a page is read (`[browser] dismiss`): consent and cookie
//! banners, newsletter dialogs. Found by the button's text ("Accept", "Agree", "Got it",
//! "Close") and what holds it: an element named for consent, cookies or GDPR, a dialog, or one
//! the browser laid out as fixed over the page ([`super::layout::FIXED_ATTRIBUTE`]).

use scraper::{ElementRef, Selector};

use super::links::{Control, label_of, leads_elsewhere, unique_selector};

/// Texts of buttons that accept or agree: clicking them is what a person does to read on.
const ACCEPT_TEXTS: [&str; 16] = [
    "accept",
    "accept all",
    "accept all cookies",
    "accept cookies",
    "accept and close",
    "allow",
    "allow all",
    "allow cookies",
    "allow all cookies",
    "agree",
    "i agree",
    "agree and close",
    "i accept",
    "ok",
    "okay",
    "got it",
];

/// Texts of buttons that close an overlay without answering it.
const CLOSE_TEXTS: [&str; 9] = [
    "close",
    "dismiss",
    "no thanks",
    "not now",
    "maybe later",
    "×",
    "✕",
    "✖",
    "x",
];

/// Words of ids and classes of consent banners.
const CONSENT_WORDS: [&str; 6] = ["consent", "cookie", "cookies", "gdpr", "cmp", "privacy"];

/// Most overlays a draft proposes.
const MAX_OVERLAYS: usize = 3;

/// A button that clicks an overlay away, and whether the draft is sure of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub control: Control,
    /// An accepting button in a consent banner: proposed as is. Otherwise (a "Close" in a
    /// dialog, an "OK" in a fixed element) proposed commented out.
    pub sure: bool,
}

/// The overlays' buttons of `html`, the sure ones first, at most [`MAX_OVERLAYS`].
pub fn overlay_buttons(html: &str) -> Vec<Overlay> {
    let document = crate::page::parse_html(html);
    // Invariant: a constant, valid selector.
    let controls = Selector::parse(
        "button, a, [role=button], input[type=button], input[type=submit], [onclick]",
    )
    .expect("valid selector");
    let mut found: Vec<Overlay> = Vec::new();
    for element in document.select(&controls) {
        if leads_elsewhere(element) {
            continue;
        }
        let text = label_of(element);
        let lower = text.to_lowercase();
        let accepts = ACCEPT_TEXTS.contains(&lower.as_str());
        let closes = CLOSE_TEXTS.contains(&lower.as_str());
        if !accepts && !closes {
            continue;
        }
        let (consent, overlay) = holders(element);
        let (sure, convention) = match (consent, overlay) {
            (true, _) => (accepts || closes, "consent banner"),
            (false, true) => (false, "dialog or fixed overlay"),
            (false, false) => continue,
        };
        let Some(selector) = unique_selector(&document, element) else {
            continue;
        };
        if found.iter().any(|o| o.control.selector == selector) {
            continue;
        }
        found.push(Overlay {
            control: Control {
                selector,
                text,
                convention,
            },
            sure,
        });
    }
    found.sort_by_key(|o| !o.sure);
    found.truncate(MAX_OVERLAYS);
    found
}

/// Whether `element` or an ancestor is named for consent (`#cookie-banner`, `.gdpr`), and
/// whether one is a dialog or a fixed overlay.
fn holders(element: ElementRef<'_>) -> (bool, bool) {
    let mut consent = false;
    let mut overlay = false;
    for e in std::iter::once(element).chain(element.ancestors().filter_map(ElementRef::wrap)) {
        let value = e.value();
        let named = |name: &str| {
            name.split(['-', '_'])
                .any(|w| CONSENT_WORDS.contains(&w.to_ascii_lowercase().as_str()))
        };
        consent |= value.id().is_some_and(named) || value.classes().any(named);
        overlay |= value.name() == "dialog"
            || matches!(value.attr("role"), Some("dialog" | "alertdialog"))
            || value.attr("aria-modal") == Some("true")
            || value.attr(super::layout::FIXED_ATTRIBUTE).is_some();
    }
    (consent, overlay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlays_are_found_by_their_buttons_and_holders() {
        // (case, html, expected (selector, sure) of the proposals, in order).
        type Case = (&'static str, &'static str, &'static [(&'static str, bool)]);
        let cases: [Case; 7] = [
            (
                "an accept button in a cookie banner",
                r#"<div id="cookie-banner"><p>We use cookies</p><button class="btn">Accept all</button></div>"#,
                &[("button.btn", true)],
            ),
            (
                "a consent class on the button itself",
                r##"<div class="bar"><a href="#" class="consent-ok">Got it</a></div>"##,
                &[("a.consent-ok", true)],
            ),
            (
                "a close button in a dialog is proposed unsure",
                r#"<div role="dialog" class="newsletter"><button aria-label="Close">×</button></div>"#,
                &[("div.newsletter button", false)],
            ),
            (
                "an OK in a fixed element the browser marked",
                r#"<div data-scrape-fixed><span>Hi</span><button id="okay">OK</button></div>"#,
                &[("#okay", false)],
            ),
            (
                "a close button outside any overlay is not one",
                r#"<main><button class="close">Close</button></main>"#,
                &[],
            ),
            (
                "an accept link to another page is not a button",
                r#"<div class="cookie-notice"><a href="/privacy">Accept</a></div>"#,
                &[],
            ),
            (
                "the sure proposal comes first",
                r#"<dialog open><button class="x">Close</button></dialog>
                   <div class="gdpr"><button class="agree">I agree</button></div>"#,
                &[("button.agree", true), ("button.x", false)],
            ),
        ];
        let mut failures = Vec::new();
        for (case, html, expected) in cases {
            let got: Vec<(String, bool)> = overlay_buttons(html)
                .into_iter()
                .map(|o| (o.control.selector, o.sure))
                .collect();
            let expected: Vec<(String, bool)> = expected
                .iter()
                .map(|(s, b)| ((*s).to_owned(), *b))
                .collect();
            if got != expected {
                failures.push(format!("{case}: got {got:?}, expected {expected:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
