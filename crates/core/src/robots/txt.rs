//! robots.txt as RFC 9309 defines it: groups of rules for user agents, the longest matching rule
//! decides (`Allow` wins a tie), `*` and `$` in patterns, percent-encoding normalised on both
//! sides, and only the first 500 KiB read. `Crawl-delay` (not in the RFC, but widely used) is
//! read from the group that applies. `Sitemap` lines (of no group) are kept as written.

use std::time::Duration;

/// RFC 9309 §2.5: crawlers must read at least the first 500 kibibytes; the rest is ignored.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// The longest `Crawl-delay` honoured; a larger one is capped rather than stalling a run.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(60);

/// A parsed robots.txt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RobotsTxt {
    groups: Vec<Group>,
    /// The values of `Sitemap` lines, in file order (the URLs are not checked here).
    sitemaps: Vec<String>,
}

/// One group: the user agents it names and their rules.
#[derive(Debug, Clone, Default, PartialEq)]
struct Group {
    /// Product tokens, lowercased; `*` for any crawler.
    agents: Vec<String>,
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    allow: bool,
    /// The path pattern, percent-encoding normalised.
    pattern: String,
}

/// The rules that apply to one crawler: the groups naming its product token, or else the `*`
/// groups, merged (RFC 9309 §2.2.1).
#[derive(Debug, Clone, Copy)]
pub struct AgentRules<'a> {
    txt: &'a RobotsTxt,
    /// The token when a group names it; `None`: the `*` groups apply.
    token: Option<&'a str>,
}

impl RobotsTxt {
    /// Parses `body` (its first [`MAX_ROBOTS_BYTES`]); lines it cannot read are skipped, as the
    /// RFC asks, so this never fails.
    pub fn parse(body: &[u8]) -> Self {
        let body = &body[..body.len().min(MAX_ROBOTS_BYTES)];
        let text = String::from_utf8_lossy(body);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut groups: Vec<Group> = Vec::new();
        let mut sitemaps = Vec::new();
        // A user-agent line after a rule starts a new group; consecutive ones share a group.
        let mut open = false;
        for line in text.split(['\n', '\r']) {
            let line = line.split('#').next().unwrap_or_default();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match Key::of(key) {
                Some(Key::UserAgent) => {
                    if !open {
                        groups.push(Group::default());
                        open = true;
                    }
                    if let Some(group) = groups.last_mut() {
                        group.agents.push(product_token(value));
                    }
                }
                Some(Key::Allow | Key::Disallow) if value.is_empty() => {
                    // An empty rule matches nothing, but still ends the run of user-agent lines.
                    open = false;
                }
                Some(key @ (Key::Allow | Key::Disallow)) => {
                    open = false;
                    if let Some(group) = groups.last_mut() {
                        group.rules.push(Rule {
                            allow: key == Key::Allow,
                            pattern: collapse_stars(&normalise(value)),
                        });
                    }
                }
                Some(Key::CrawlDelay) => {
                    open = false;
                    if let (Some(group), Some(delay)) = (groups.last_mut(), crawl_delay(value)) {
                        group.crawl_delay = Some(delay);
                    }
                }
                // Sitemaps and unknown keys belong to no group and do not end one.
                Some(Key::Sitemap) if !value.is_empty() => sitemaps.push(value.to_owned()),
                Some(Key::Sitemap) | None => {}
            }
        }
        Self { groups, sitemaps }
    }

    /// A robots.txt that allows everything (as a missing one does).
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// A robots.txt that disallows everything (what an unreachable one means for a while).
    pub fn disallow_all() -> Self {
        Self {
            groups: vec![Group {
                agents: vec!["*".into()],
                rules: vec![Rule {
                    allow: false,
                    pattern: "/".into(),
                }],
                crawl_delay: None,
            }],
            sitemaps: Vec::new(),
        }
    }

    /// The values of its `Sitemap` lines, in file order.
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }

    /// The rules for the crawler whose product token is `token` (matched case-insensitively).
    pub fn for_agent<'a>(&'a self, token: &'a str) -> AgentRules<'a> {
        let named = self
            .groups
            .iter()
            .any(|g| g.agents.iter().any(|a| a.eq_ignore_ascii_case(token)));
        AgentRules {
            txt: self,
            token: named.then_some(token),
        }
    }
}

impl<'a> AgentRules<'a> {
    fn groups(&self) -> impl Iterator<Item = &'a Group> + use<'a> {
        let token = self.token;
        self.txt.groups.iter().filter(move |g| {
            g.agents.iter().any(|a| match token {
                Some(t) => a.eq_ignore_ascii_case(t),
                None => a == "*",
            })
        })
    }

    /// Whether the path (and query) of `url` may be fetched.
    pub fn is_allowed(&self, url: &url::Url) -> bool {
        let mut target = url.path().to_owned();
        if target.is_empty() {
            target.push('/');
        }
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        self.is_path_allowed(&target)
    }

    /// Whether `path` (path and query, as sent in the request line) may be fetched.
    pub fn is_path_allowed(&self, path: &str) -> bool {
        // RFC 9309 §2.2.2: robots.txt itself is always allowed.
        if path == "/robots.txt" {
            return true;
        }
        let path = normalise(path);
        let mut best: Option<(usize, bool)> = None;
        for rule in self.groups().flat_map(|g| &g.rules) {
            if !matches(&rule.pattern, &path) {
                continue;
            }
            let length = rule.pattern.len();
            best = match best {
                Some((l, allow)) if l > length || (l == length && allow) => Some((l, allow)),
                _ => Some((length, rule.allow)),
            };
        }
        best.is_none_or(|(_, allow)| allow)
    }

    /// The `Crawl-delay` of the groups that apply (the largest, if they differ).
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.groups().filter_map(|g| g.crawl_delay).max()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    UserAgent,
    Allow,
    Disallow,
    CrawlDelay,
    Sitemap,
}

impl Key {
    /// The key of a line, case-insensitively, accepting the common misspellings that
    /// widely used parsers accept too.
    fn of(key: &str) -> Option<Self> {
        let key = key.trim().to_ascii_lowercase();
        match key.as_str() {
            "user-agent" | "useragent" | "user agent" => Some(Self::UserAgent),
            "allow" => Some(Self::Allow),
            "disallow" | "dissallow" | "dissalow" | "disalow" | "diasllow" | "disallaw" => {
                Some(Self::Disallow)
            }
            "crawl-delay" | "crawl_delay" | "crawldelay" => Some(Self::CrawlDelay),
            "sitemap" | "site-map" => Some(Self::Sitemap),
            _ => None,
        }
    }
}

/// The product token of a `User-agent` line or a `User-Agent` header: its leading letters, `-`
/// and `_`, lowercased (`Googlebot/2.1 (+http://...)` names `googlebot`); `*` stays `*`.
pub fn product_token(value: &str) -> String {
    let value = value.trim();
    if value.starts_with('*') {
        return "*".into();
    }
    value
        .chars()
        .take_while(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '_'))
        .collect::<String>()
        .to_ascii_lowercase()
}

fn crawl_delay(value: &str) -> Option<Duration> {
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds.min(MAX_CRAWL_DELAY.as_secs_f64())))
}

/// Normalises a path or pattern for comparison (RFC 9309 §2.2.2): octets outside printable
/// ASCII are percent-encoded, `%xx` of unreserved characters is decoded, and other `%xx` get
/// upper-case hex digits. `*` and `$` are kept as they are.
fn normalise(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|c| hex(*c)),
                bytes.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            let decoded = h * 16 + l;
            if is_unreserved(decoded) {
                out.push(char::from(decoded));
            } else {
                out.push_str(&format!("%{decoded:02X}"));
            }
            i += 3;
            continue;
        }
        if b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
        i += 1;
    }
    out
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// RFC 3986 §2.3.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Whether the path pattern `pattern`, as robots.txt writes them, matches `path` (path and
/// query), both normalised as robots.txt's are: for other files that use its patterns.
pub(crate) fn path_matches(pattern: &str, path: &str) -> bool {
    matches(&collapse_stars(&normalise(pattern)), &normalise(path))
}

/// Collapses each run of `*` in a pattern into one: they mean the same, and a rule made of
/// thousands of stars then costs no more to match than a rule with one.
fn collapse_stars(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if c != '*' || !out.ends_with('*') {
            out.push(c);
        }
    }
    out
}

/// Whether `pattern` matches a prefix of `path`: `*` matches any run of characters, a final
/// `$` anchors the pattern at the end of the path; a `$` elsewhere is an ordinary character.
///
/// The pieces between stars are looked for left to right, each at its leftmost place after
/// the one before: the leftmost place leaves the most path to the pieces after it, so no
/// choice needs to be undone, and a check is one pass over the path per piece at most.
fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = path.strip_prefix(first) else {
        return false;
    };
    let Some(last) = pieces.next_back() else {
        // No star: the pattern is a prefix of the path, or all of it when anchored.
        return !anchored || rest.is_empty();
    };
    for piece in pieces {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    if anchored {
        rest.ends_with(last)
    } else {
        rest.contains(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case of the conformance table: a robots.txt, a crawler, a path, the verdict.
    struct Case {
        name: &'static str,
        txt: &'static str,
        agent: &'static str,
        path: &'static str,
        allowed: bool,
    }

    const CASES: &[Case] = &[
        Case {
            name: "an empty file allows everything",
            txt: "",
            agent: "scrape",
            path: "/x",
            allowed: true,
        },
        Case {
            name: "a group for the crawler applies",
            txt: "user-agent: scrape\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "agents match case-insensitively",
            txt: "User-Agent: ScRaPe\nDisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "keys match case-insensitively",
            txt: "USER-AGENT: scrape\nDISALLOW: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a group for another crawler does not apply",
            txt: "user-agent: otherbot\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: true,
        },
        Case {
            name: "the star group applies to crawlers not named",
            txt: "user-agent: *\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a named group replaces the star group",
            txt: "user-agent: *\ndisallow: /\n\nuser-agent: scrape\ndisallow: /private\n",
            agent: "scrape",
            path: "/x",
            allowed: true,
        },
        Case {
            name: "groups naming the same crawler are merged",
            txt: "user-agent: scrape\ndisallow: /a\n\nuser-agent: otherbot\ndisallow: /\n\nuser-agent: scrape\ndisallow: /b\n",
            agent: "scrape",
            path: "/b/1",
            allowed: false,
        },
        Case {
            name: "consecutive user-agent lines share a group",
            txt: "user-agent: otherbot\nuser-agent: scrape\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a user-agent line after rules starts a new group",
            txt: "user-agent: scrape\ndisallow: /a\nuser-agent: otherbot\ndisallow: /b\n",
            agent: "scrape",
            path: "/b",
            allowed: true,
        },
        Case {
            name: "the product token ignores a version and comments",
            txt: "user-agent: Scrape/1.0 (+https://example.test)\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "rules before any user-agent line are ignored",
            txt: "disallow: /\nuser-agent: scrape\nallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: true,
        },
        Case {
            name: "rules match path prefixes",
            txt: "user-agent: *\ndisallow: /fish\n",
            agent: "scrape",
            path: "/fish.html",
            allowed: false,
        },
        Case {
            name: "rules are case-sensitive",
            txt: "user-agent: *\ndisallow: /fish\n",
            agent: "scrape",
            path: "/Fish.asp",
            allowed: true,
        },
        Case {
            name: "the longest match wins",
            txt: "user-agent: *\ndisallow: /\nallow: /gallery/\n",
            agent: "scrape",
            path: "/gallery/1",
            allowed: true,
        },
        Case {
            name: "the longest match wins whatever the order",
            txt: "user-agent: *\nallow: /gallery/\ndisallow: /gallery/private\n",
            agent: "scrape",
            path: "/gallery/private/1",
            allowed: false,
        },
        Case {
            name: "allow wins a tie",
            txt: "user-agent: *\ndisallow: /page\nallow: /page\n",
            agent: "scrape",
            path: "/page",
            allowed: true,
        },
        Case {
            name: "allow wins a tie between wildcard patterns of equal length",
            txt: "user-agent: *\ndisallow: /*1.jpg\nallow: /a*.jpg\n",
            agent: "scrape",
            path: "/a1.jpg",
            allowed: true,
        },
        Case {
            name: "an empty disallow allows everything",
            txt: "user-agent: *\ndisallow:\n",
            agent: "scrape",
            path: "/x",
            allowed: true,
        },
        Case {
            name: "a star matches any run of characters",
            txt: "user-agent: *\ndisallow: /*.php\n",
            agent: "scrape",
            path: "/folder/filename.php?parameters",
            allowed: false,
        },
        Case {
            name: "a star matches nothing too",
            txt: "user-agent: *\ndisallow: /fish*\n",
            agent: "scrape",
            path: "/fish",
            allowed: false,
        },
        Case {
            name: "a dollar anchors the end",
            txt: "user-agent: *\ndisallow: /*.php$\n",
            agent: "scrape",
            path: "/filename.php",
            allowed: false,
        },
        Case {
            name: "a dollar-anchored rule misses longer paths",
            txt: "user-agent: *\ndisallow: /*.php$\n",
            agent: "scrape",
            path: "/filename.php?parameters",
            allowed: true,
        },
        Case {
            name: "the query is part of the path",
            txt: "user-agent: *\ndisallow: /search?q=\n",
            agent: "scrape",
            path: "/search?q=cats",
            allowed: false,
        },
        Case {
            name: "robots.txt itself is always allowed",
            txt: "user-agent: *\ndisallow: /\n",
            agent: "scrape",
            path: "/robots.txt",
            allowed: true,
        },
        Case {
            name: "non-ASCII in a pattern matches its percent-encoded form",
            txt: "user-agent: *\ndisallow: /foo/bar/ツ\n",
            agent: "scrape",
            path: "/foo/bar/%E3%83%84",
            allowed: false,
        },
        Case {
            name: "percent-encoding matches whatever the hex case",
            txt: "user-agent: *\ndisallow: /foo/bar/%e3%83%84\n",
            agent: "scrape",
            path: "/foo/bar/%E3%83%84",
            allowed: false,
        },
        Case {
            name: "encoded unreserved characters match their plain form",
            txt: "user-agent: *\ndisallow: /foo/bar/%62%61%7A\n",
            agent: "scrape",
            path: "/foo/bar/baz",
            allowed: false,
        },
        Case {
            name: "an encoded slash is not a slash",
            txt: "user-agent: *\ndisallow: /a/b\n",
            agent: "scrape",
            path: "/a%2Fb",
            allowed: true,
        },
        Case {
            name: "comments and blank lines are ignored",
            txt: "# hello\nuser-agent: scrape # us\n\n  disallow: /x # no\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "CR line endings are lines",
            txt: "user-agent: scrape\rdisallow: /\r",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a byte-order mark is skipped",
            txt: "\u{feff}user-agent: scrape\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "common misspellings of disallow count",
            txt: "user-agent: scrape\ndissallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a sitemap line does not end a group",
            txt: "user-agent: scrape\nsitemap: https://a.test/s.xml\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "lines without a colon are skipped",
            txt: "user-agent: scrape\nfoo bar\ndisallow: /\n",
            agent: "scrape",
            path: "/x",
            allowed: false,
        },
        Case {
            name: "a dollar inside a pattern is an ordinary character",
            txt: "user-agent: *\ndisallow: /a$b\n",
            agent: "scrape",
            path: "/a$b/c",
            allowed: false,
        },
    ];

    #[test]
    fn the_conformance_table_holds() {
        let mut wrong = Vec::new();
        for case in CASES {
            let txt = RobotsTxt::parse(case.txt.as_bytes());
            if txt.for_agent(case.agent).is_path_allowed(case.path) != case.allowed {
                wrong.push(case.name);
            }
        }
        assert!(wrong.is_empty(), "cases that failed: {wrong:#?}");
    }

    #[test]
    fn sitemap_lines_are_kept_in_order_wherever_they_are() {
        let txt = RobotsTxt::parse(
            b"Sitemap: https://a.test/s1.xml\nuser-agent: *\nSITEMAP:https://a.test/s2.xml.gz # c\ndisallow: /x\nsitemap:\n",
        );
        assert_eq!(
            txt.sitemaps(),
            ["https://a.test/s1.xml", "https://a.test/s2.xml.gz"]
        );
        assert!(
            !txt.for_agent("scrape").is_path_allowed("/x"),
            "the group still holds"
        );
        assert!(RobotsTxt::disallow_all().sitemaps().is_empty());
    }

    #[test]
    fn a_url_is_checked_by_its_path_and_query() {
        let txt = RobotsTxt::parse(b"user-agent: *\ndisallow: /*?sort=\n");
        let rules = txt.for_agent("scrape");
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert!(!rules.is_allowed(&url("http://a.test/list?sort=new")));
        assert!(rules.is_allowed(&url("http://a.test/list")));
        assert!(rules.is_allowed(&url("http://a.test")));
    }

    #[test]
    fn only_the_first_500_kib_are_read() {
        let mut body = b"user-agent: *\ndisallow: /early\n".to_vec();
        body.resize(MAX_ROBOTS_BYTES, b'\n');
        body.extend_from_slice(b"disallow: /late\n");
        let txt = RobotsTxt::parse(&body);
        let rules = txt.for_agent("scrape");
        assert!(!rules.is_path_allowed("/early"));
        assert!(rules.is_path_allowed("/late"));
    }

    #[test]
    fn crawl_delay_comes_from_the_group_that_applies() {
        let txt = RobotsTxt::parse(
            b"user-agent: *\ncrawl-delay: 10\n\nuser-agent: scrape\ncrawl-delay: 0.5\ndisallow:\n",
        );
        assert_eq!(
            txt.for_agent("scrape").crawl_delay(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            txt.for_agent("otherbot").crawl_delay(),
            Some(Duration::from_secs(10))
        );
        let huge = RobotsTxt::parse(b"user-agent: *\ncrawl-delay: 86400\n");
        assert_eq!(
            huge.for_agent("scrape").crawl_delay(),
            Some(MAX_CRAWL_DELAY)
        );
        let bad = RobotsTxt::parse(b"user-agent: *\ncrawl-delay: soon\n");
        assert_eq!(bad.for_agent("scrape").crawl_delay(), None);
    }

    #[test]
    fn disallow_all_refuses_everything_but_robots_txt() {
        let txt = RobotsTxt::disallow_all();
        assert!(!txt.for_agent("scrape").is_path_allowed("/"));
        assert!(txt.for_agent("scrape").is_path_allowed("/robots.txt"));
        assert!(
            RobotsTxt::allow_all()
                .for_agent("scrape")
                .is_path_allowed("/")
        );
    }

    #[test]
    fn matching_is_linear_enough_for_hostile_patterns() {
        let pattern = format!("/{}x", "*a".repeat(200));
        let path = format!("/{}", "a".repeat(5_000));
        let started = std::time::Instant::now();
        assert!(!matches(&normalise(&pattern), &path));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn a_rule_of_many_stars_matches_like_one_star() {
        let mut body = b"user-agent: *\ndisallow: /".to_vec();
        body.resize(MAX_ROBOTS_BYTES - 2, b'*');
        body.extend_from_slice(b"b\n");
        let txt = RobotsTxt::parse(&body);
        assert_eq!(txt.groups[0].rules[0].pattern, "/*b");
        let rules = txt.for_agent("scrape");
        let long = "a".repeat(30_000);
        assert!(rules.is_path_allowed(&format!("/{long}")));
        assert!(!rules.is_path_allowed(&format!("/{long}b{long}")));
    }

    #[test]
    fn pieces_between_stars_match_in_order() {
        let cases = [
            ("/a*b*c", "/axbxc", true),
            ("/a*b*c", "/acxb", false),
            ("/*.jpg$", "/a.jpg.jpg", true),
            ("/*.jpg$", "/a.jpg?x", false),
            ("/a*a$", "/a", false),
            ("/a*a$", "/aa", true),
            ("/*$", "/anything", true),
            ("/x$", "/x", true),
            ("/x$", "/xy", false),
            ("/*ab*ab$", "/abab", true),
            ("/*ab*ab$", "/aba", false),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(matches(pattern, path), expected, "{pattern} against {path}");
        }
    }
}
