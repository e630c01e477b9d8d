//! Which image URLs a profile wants: allow/deny regexes, domains and file extensions.

use regex::RegexSet;

use crate::robots::OptOutSource;

/// The profile's `[filters]`, compiled.
#[derive(Debug, Clone)]
pub struct UrlFilter {
    allow: Option<RegexSet>,
    deny: Option<RegexSet>,
    domains: Vec<String>,
    extensions: Vec<String>,
}

/// Why a URL was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    NotAllowed,
    Denied,
    OtherDomain,
    Extension,
    /// The page opts its content out (`<meta name="robots" content="noai">` or its response's
    /// `X-Robots-Tag: noai`, see `[politeness] opt_out`).
    OptedOut(OptOutSource),
}

impl Rejection {
    /// A short stable name for output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotAllowed => "not matched by filters.allow",
            Self::Denied => "matched by filters.deny",
            Self::OtherDomain => "domain not in filters.domains",
            Self::Extension => "extension not in filters.extensions",
            Self::OptedOut(OptOutSource::MetaRobots) => "the page opts out (meta robots)",
            Self::OptedOut(OptOutSource::XRobotsTag) => "the page opts out (X-Robots-Tag)",
        }
    }
}

/// A bad entry in one of the filter lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// `allow`, `deny`, `domains` or `extensions`.
    pub list: &'static str,
    pub index: usize,
    pub message: String,
}

impl UrlFilter {
    /// Compiles the lists; every bad entry is reported.
    pub fn new(
        allow: &[String],
        deny: &[String],
        domains: &[String],
        extensions: &[String],
    ) -> Result<Self, Vec<FilterError>> {
        let mut errors = Vec::new();
        let mut compile = |list: &'static str, patterns: &[String]| {
            for (index, p) in patterns.iter().enumerate() {
                if let Err(e) = regex::Regex::new(p) {
                    let detail = e.to_string();
                    let last = detail.lines().last().unwrap_or_default().trim().to_owned();
                    errors.push(FilterError {
                        list,
                        index,
                        message: format!("invalid regex `{p}`: {last}"),
                    });
                }
            }
            (!patterns.is_empty())
                .then(|| RegexSet::new(patterns).ok())
                .flatten()
        };
        let allow = compile("allow", allow);
        let deny = compile("deny", deny);
        let mut clean_domains = Vec::new();
        for (index, d) in domains.iter().enumerate() {
            let d = d
                .trim()
                .trim_start_matches("*.")
                .trim_start_matches('.')
                .to_ascii_lowercase();
            if d.is_empty() || d.contains('/') || d.contains(':') {
                errors.push(FilterError {
                    list: "domains",
                    index,
                    message: format!("`{d}` is not a domain name (write e.g. \"example.com\")"),
                });
            }
            clean_domains.push(d);
        }
        let mut clean_ext = Vec::new();
        for (index, e) in extensions.iter().enumerate() {
            let e = e.trim().trim_start_matches('.').to_ascii_lowercase();
            if e.is_empty() || !e.chars().all(|c| c.is_ascii_alphanumeric()) {
                errors.push(FilterError {
                    list: "extensions",
                    index,
                    message: format!("`{e}` is not a file extension (write e.g. \"jpg\")"),
                });
            }
            clean_ext.push(e);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Self {
            allow,
            deny,
            domains: clean_domains,
            extensions: clean_ext,
        })
    }

    /// A filter that accepts every URL.
    pub fn accept_all() -> Self {
        Self {
            allow: None,
            deny: None,
            domains: Vec::new(),
            extensions: Vec::new(),
        }
    }

    /// Whether the profile wants `url`, and if not, why.
    pub fn check(&self, url: &url::Url) -> Result<(), Rejection> {
        if !self.domains.is_empty() {
            let host = url.host_str().unwrap_or_default();
            let inside = self.domains.iter().any(|d| {
                host == d
                    || host
                        .strip_suffix(d.as_str())
                        .is_some_and(|rest| rest.ends_with('.'))
            });
            if !inside {
                return Err(Rejection::OtherDomain);
            }
        }
        if !self.extensions.is_empty()
            && let Some(ext) = extension(url)
            && !self.extensions.contains(&ext)
        {
            return Err(Rejection::Extension);
        }
        if let Some(allow) = &self.allow
            && !allow.is_match(url.as_str())
        {
            return Err(Rejection::NotAllowed);
        }
        if let Some(deny) = &self.deny
            && deny.is_match(url.as_str())
        {
            return Err(Rejection::Denied);
        }
        Ok(())
    }
}

/// The lowercase extension of the URL path's last segment, if it has one.
pub fn extension(url: &url::Url) -> Option<String> {
    let last = url.path_segments()?.next_back()?;
    let (_, ext) = last.rsplit_once('.')?;
    (!ext.is_empty() && ext.len() <= 5).then(|| ext.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str], domains: &[&str], ext: &[&str]) -> UrlFilter {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        UrlFilter::new(&v(allow), &v(deny), &v(domains), &v(ext)).unwrap()
    }

    fn check(f: &UrlFilter, url: &str) -> Result<(), Rejection> {
        f.check(&url::Url::parse(url).unwrap())
    }

    #[test]
    fn domains_include_subdomains_but_not_lookalikes() {
        let f = filter(&[], &[], &["example.com"], &[]);
        assert_eq!(check(&f, "http://example.com/a.jpg"), Ok(()));
        assert_eq!(check(&f, "http://cdn.example.com/a.jpg"), Ok(()));
        assert_eq!(
            check(&f, "http://badexample.com/a.jpg"),
            Err(Rejection::OtherDomain)
        );
    }

    #[test]
    fn extensions_filter_only_urls_that_have_one() {
        let f = filter(&[], &[], &[], &["jpg", ".PNG"]);
        assert_eq!(check(&f, "http://a.test/x.JPG"), Ok(()));
        assert_eq!(check(&f, "http://a.test/x.png?w=3"), Ok(()));
        assert_eq!(check(&f, "http://a.test/x.gif"), Err(Rejection::Extension));
        assert_eq!(check(&f, "http://a.test/image?id=3"), Ok(()));
    }

    #[test]
    fn deny_wins_over_allow() {
        let f = filter(&["/photos/"], &["thumb"], &[], &[]);
        assert_eq!(check(&f, "http://a.test/photos/1.jpg"), Ok(()));
        assert_eq!(
            check(&f, "http://a.test/photos/thumb-1.jpg"),
            Err(Rejection::Denied)
        );
        assert_eq!(
            check(&f, "http://a.test/logo.png"),
            Err(Rejection::NotAllowed)
        );
    }

    #[test]
    fn every_bad_entry_is_reported() {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let errors = UrlFilter::new(
            &v(&["(", "ok"]),
            &v(&["[z-a]"]),
            &v(&["http://x"]),
            &v(&["j pg"]),
        )
        .unwrap_err();
        let lists: Vec<_> = errors.iter().map(|e| (e.list, e.index)).collect();
        assert_eq!(
            lists,
            [("allow", 0), ("deny", 0), ("domains", 0), ("extensions", 0)]
        );
    }
}
