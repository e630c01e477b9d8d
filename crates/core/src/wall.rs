//! Walls: an answer that is not the page asked for but a sign-in form, a redirect to one, or a
//! bot challenge. Such a page has no images, and taken as a page it would end its chain as if
//! the gallery were finished; found here, it fails with class `login_required` or `blocked`
//! and its chain stays where it was. Pure: the page source asks, the state records the class.

use url::Url;

use crate::failure::FailureClass;
use crate::profile::SignedOut;

/// What kind of wall a page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WallKind {
    /// The site wants a signed-in visitor: the session is missing or has ended.
    LoginRequired,
    /// The site takes the visitor for a robot (a challenge or captcha page).
    Blocked,
}

impl WallKind {
    pub fn class(self) -> FailureClass {
        match self {
            Self::LoginRequired => FailureClass::LoginRequired,
            Self::Blocked => FailureClass::Blocked,
        }
    }
}

/// A page found to be a wall, and what gave it away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wall {
    pub kind: WallKind,
    pub reason: String,
}

impl Wall {
    fn login(reason: String) -> Self {
        Self {
            kind: WallKind::LoginRequired,
            reason,
        }
    }
}

/// What a page yielded, as far as telling a wall from a page goes.
#[derive(Debug, Clone, Copy)]
pub struct Yielded {
    /// Images the profile's rules accepted.
    pub images: usize,
    /// Links its `[[follow]]` rules found.
    pub links: usize,
}

/// Words of a sign-in page's path: a redirect to a URL with one of them in a path segment is
/// taken for a login redirect.
const SIGN_IN_WORDS: &[&str] = &[
    "login",
    "log-in",
    "log_in",
    "signin",
    "sign-in",
    "sign_in",
    "logon",
    "authorize",
];

/// Path segments that are a sign-in page by themselves (too short to look for inside others).
const SIGN_IN_SEGMENTS: &[&str] = &["auth", "sso", "session", "sessions"];

/// Titles of the challenge pages of the common bot shields, lowercased.
const CHALLENGE_TITLES: &[&str] = &[
    "just a moment...",
    "attention required! | cloudflare",
    "ddos-guard",
    "checking your browser",
    "please verify you are a human",
    "human verification",
];

/// Whether the page at `landed`, asked for as `requested` and parsed as `document`, is a wall
/// by `rules` or by the defaults: a redirect to a sign-in URL, a bot challenge's title, or a
/// page that asks for a password and yields nothing.
pub fn wall_in_page(
    rules: &SignedOut,
    requested: &Url,
    landed: &Url,
    document: &scraper::Html,
    yielded: Yielded,
) -> Option<Wall> {
    let redirected = without_fragment(requested) != without_fragment(landed);
    if redirected {
        if let Some(pattern) = rules.url.iter().find(|p| {
            landed.as_str().contains(p.as_str()) && !requested.as_str().contains(p.as_str())
        }) {
            return Some(Wall::login(format!(
                "redirected to `{landed}`, which `[session.signed_out] url` names (`{pattern}`)"
            )));
        }
        if is_sign_in_url(landed) && !is_sign_in_url(requested) {
            return Some(Wall::login(format!(
                "redirected to the sign-in page `{landed}`"
            )));
        }
    }
    if let Some(selector) = &rules.selector
        && document.select(&selector.selector).next().is_some()
    {
        return Some(Wall::login(format!(
            "the page shows `{}` ([session.signed_out] selector)",
            selector.text
        )));
    }
    let nothing = yielded.images == 0 && yielded.links == 0;
    if let Some(title) = challenge_title(document) {
        return Some(Wall {
            kind: WallKind::Blocked,
            reason: format!("the page is a bot challenge (title `{title}`)"),
        });
    }
    if nothing && asks_for_password(document) {
        return Some(Wall::login(
            "the page asks for a password and shows nothing the profile's rules take".to_owned(),
        ));
    }
    None
}

/// Whether an HTTP `status` on a page is a wall: by `rules`, a 401, or a 403 where the run was
/// let in before (`let_in_before`: the host served pages this run, or a session is set up).
pub fn wall_of_status(rules: &SignedOut, status: u16, let_in_before: bool) -> Option<Wall> {
    if rules.status.contains(&status) {
        return Some(Wall::login(format!(
            "HTTP {status}, which `[session.signed_out] status` names"
        )));
    }
    match status {
        401 => Some(Wall::login(
            "HTTP 401: the site wants a signed-in visitor".to_owned(),
        )),
        403 if let_in_before => Some(Wall::login(
            "HTTP 403 where the run was let in before: the session has likely ended".to_owned(),
        )),
        _ => None,
    }
}

/// Whether a path segment of `url` names a sign-in page.
pub fn is_sign_in_url(url: &Url) -> bool {
    let Some(segments) = url.path_segments() else {
        return false;
    };
    segments.map(str::to_ascii_lowercase).any(|segment| {
        SIGN_IN_SEGMENTS.contains(&segment.as_str())
            || SIGN_IN_WORDS.iter().any(|word| segment.contains(word))
    })
}

fn without_fragment(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

fn challenge_title(document: &scraper::Html) -> Option<String> {
    static TITLE: std::sync::LazyLock<scraper::Selector> =
        std::sync::LazyLock::new(|| scraper::Selector::parse("title").expect("valid selector"));
    let title = document.select(&TITLE).next()?.text().collect::<String>();
    let title = title.trim();
    CHALLENGE_TITLES
        .contains(&title.to_ascii_lowercase().as_str())
        .then(|| title.to_owned())
}

fn asks_for_password(document: &scraper::Html) -> bool {
    static PASSWORD: std::sync::LazyLock<scraper::Selector> = std::sync::LazyLock::new(|| {
        scraper::Selector::parse("input[type=password i]").expect("valid selector")
    });
    document.select(&PASSWORD).next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::CssRule;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn page(html: &str) -> scraper::Html {
        scraper::Html::parse_document(html)
    }

    const NOTHING: Yielded = Yielded {
        images: 0,
        links: 0,
    };

    #[test]
    fn every_kind_of_wall_is_told_from_a_page() {
        let none = SignedOut::default();
        let rules = SignedOut {
            selector: Some(CssRule::parse("form.join").unwrap()),
            url: vec!["/members-only".into()],
            status: vec![402],
        };
        let asked = url("http://a.test/gallery/page/2");
        let form = r#"<form><input name="u"><input type="PASSWORD" name="p"></form>"#;
        let cases: [(&SignedOut, &str, &str, Yielded, Option<WallKind>); 10] = [
            (
                &none,
                "http://a.test/gallery/page/2",
                "<img src=a.jpg>",
                NOTHING,
                None,
            ),
            (
                &none,
                "http://a.test/login?next=/gallery/page/2",
                "",
                NOTHING,
                Some(WallKind::LoginRequired),
            ),
            (
                &none,
                "http://a.test/users/sign_in",
                "",
                NOTHING,
                Some(WallKind::LoginRequired),
            ),
            (
                &none,
                "http://a.test/auth/",
                "",
                NOTHING,
                Some(WallKind::LoginRequired),
            ),
            (&none, "http://a.test/gallery/page/2#top", "", NOTHING, None),
            (
                &none,
                "http://a.test/gallery/page/2",
                "<title> Just a moment... </title>",
                NOTHING,
                Some(WallKind::Blocked),
            ),
            (
                &none,
                "http://a.test/gallery/page/2",
                form,
                NOTHING,
                Some(WallKind::LoginRequired),
            ),
            // A header's sign-in form on a page with pictures is a page.
            (
                &none,
                "http://a.test/gallery/page/2",
                form,
                Yielded {
                    images: 3,
                    links: 0,
                },
                None,
            ),
            (
                &rules,
                "http://a.test/members-only?r=1",
                "",
                NOTHING,
                Some(WallKind::LoginRequired),
            ),
            (
                &rules,
                "http://a.test/gallery/page/2",
                "<form class=join></form><img src=a.jpg>",
                Yielded {
                    images: 1,
                    links: 0,
                },
                Some(WallKind::LoginRequired),
            ),
        ];
        for (rules, landed, html, yielded, expected) in cases {
            let wall = wall_in_page(rules, &asked, &url(landed), &page(html), yielded);
            assert_eq!(wall.map(|w| w.kind), expected, "{landed} {html}");
        }
    }

    #[test]
    fn a_chain_of_sign_in_pages_is_no_redirect_to_one() {
        let login = url("http://a.test/login/step2");
        let wall = wall_in_page(
            &SignedOut::default(),
            &url("http://a.test/login/step1"),
            &login,
            &page(""),
            NOTHING,
        );
        assert_eq!(wall, None);
    }

    #[test]
    fn statuses_are_walls_where_the_run_was_let_in_or_the_profile_says() {
        let rules = SignedOut {
            status: vec![402],
            ..SignedOut::default()
        };
        let cases = [
            (401, false, Some(WallKind::LoginRequired)),
            (403, false, None),
            (403, true, Some(WallKind::LoginRequired)),
            (402, false, Some(WallKind::LoginRequired)),
            (404, true, None),
            (429, true, None),
        ];
        for (status, let_in, expected) in cases {
            let wall = wall_of_status(&rules, status, let_in);
            assert_eq!(wall.map(|w| w.kind), expected, "{status} {let_in}");
        }
    }
}
