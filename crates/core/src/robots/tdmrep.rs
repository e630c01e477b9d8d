//! TDMRep's site-wide file, `/.well-known/tdmrep.json` (W3C TDM Reservation Protocol, final
//! community group report, §5.3): a JSON array of rules, each a `location` (a path pattern as
//! robots.txt writes them: `*` for any run of characters, a final `$` for the end of the path),
//! a `tdm-reservation` (`1`: text and data mining rights are reserved; `0`: they are not) and
//! an optional `tdm-policy` naming where a licence may be had. The first rule whose location
//! matches a resource's path decides for it. Pure: the I/O crate fetches the file (at most
//! [`MAX_TDMREP_BYTES`]) and asks what it means for each image.

use serde_json::Value;

use super::txt::path_matches;

/// Where an origin publishes its TDMRep rules.
pub const TDMREP_PATH: &str = "/.well-known/tdmrep.json";
/// The most bytes of the file read.
pub const MAX_TDMREP_BYTES: usize = 500 * 1024;
/// Rules read at most; a site with more is unusual enough that the rest may wait.
const MAX_RULES: usize = 10_000;

/// An origin's TDMRep rules, in the order the file gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TdmRep {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    location: String,
    reserved: bool,
    policy: Option<String>,
}

/// A reservation of mining rights that applies to a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The `location` of the rule that decided.
    pub location: String,
    /// Its `tdm-policy`, when it names one.
    pub policy: Option<String>,
}

impl Reservation {
    /// The detail of the failure (class `opted_out`) of an image it reserves.
    pub fn detail(&self) -> String {
        let policy = self
            .policy
            .as_deref()
            .map(|p| format!(" (tdm-policy: {p})"))
            .unwrap_or_default();
        format!(
            "{TDMREP_PATH} reserves mining rights on `{}`{policy}",
            self.location
        )
    }
}

impl TdmRep {
    /// The rules of a `tdmrep.json` body (its first [`MAX_TDMREP_BYTES`]). A rule without a
    /// usable `location` or `tdm-reservation` is passed over; a body that is not a JSON array
    /// is an error saying why, and reserves nothing.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let body = &body[..body.len().min(MAX_TDMREP_BYTES)];
        let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Array(items) = value else {
            return Err("not a JSON array of rules".to_owned());
        };
        let rules = items
            .iter()
            .take(MAX_RULES)
            .filter_map(|item| {
                let location = item.get("location")?.as_str()?.trim();
                if !location.starts_with('/') {
                    return None;
                }
                let reserved = match item.get("tdm-reservation")? {
                    Value::Number(n) => n.as_u64()? == 1,
                    Value::String(s) => s.trim() == "1",
                    Value::Bool(b) => *b,
                    _ => return None,
                };
                let policy = item
                    .get("tdm-policy")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned);
                Some(Rule {
                    location: location.to_owned(),
                    reserved,
                    policy,
                })
            })
            .collect();
        Ok(Self { rules })
    }

    /// The reservation that applies to `url`, if the first rule matching its path (and
    /// query) reserves mining rights.
    pub fn reservation(&self, url: &url::Url) -> Option<Reservation> {
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let rule = self
            .rules
            .iter()
            .find(|r| path_matches(&r.location, &target))?;
        rule.reserved.then(|| Reservation {
            location: rule.location.clone(),
            policy: rule.policy.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(body: &str, path: &str) -> Option<String> {
        let url = url::Url::parse(&format!("http://a.test{path}")).unwrap();
        TdmRep::parse(body.as_bytes())
            .unwrap()
            .reservation(&url)
            .map(|r| r.detail())
    }

    #[test]
    fn the_first_rule_matching_the_path_decides() {
        let body = r#"[
            {"location": "/free/*", "tdm-reservation": 0},
            {"location": "/img/*.jpg$", "tdm-reservation": 1, "tdm-policy": "https://a.test/p.json"},
            {"location": "/*", "tdm-reservation": "1"}
        ]"#;
        assert_eq!(reserved(body, "/free/img/a.jpg"), None);
        assert_eq!(
            reserved(body, "/img/x/a.jpg").as_deref(),
            Some(
                "/.well-known/tdmrep.json reserves mining rights on `/img/*.jpg$` (tdm-policy: https://a.test/p.json)"
            )
        );
        assert_eq!(
            reserved(body, "/img/a.jpg?w=2").as_deref(),
            Some("/.well-known/tdmrep.json reserves mining rights on `/*`")
        );
        assert_eq!(reserved(r#"[]"#, "/a.jpg"), None);
    }

    #[test]
    fn rules_it_cannot_read_are_passed_over_and_a_broken_file_is_an_error() {
        let body = r#"[
            {"location": "img/*", "tdm-reservation": 1},
            {"location": "/a/*"},
            {"location": 7, "tdm-reservation": 1},
            {"location": "/a/*", "tdm-reservation": {"x": 1}},
            "text",
            {"location": "/a/%7Eb/*", "tdm-reservation": 1}
        ]"#;
        assert_eq!(reserved(body, "/img/a.jpg"), None);
        assert_eq!(reserved(body, "/a/b.jpg"), None);
        assert!(reserved(body, "/a/~b/c.jpg").is_some());
        assert!(
            TdmRep::parse(b"<html>")
                .unwrap_err()
                .starts_with("not JSON")
        );
        assert_eq!(
            TdmRep::parse(br#"{"location": "/"}"#).unwrap_err(),
            "not a JSON array of rules"
        );
        let mut long = b"[".to_vec();
        long.extend(std::iter::repeat_n(b' ', MAX_TDMREP_BYTES));
        long.extend(br#"{"location": "/*", "tdm-reservation": 1}]"#);
        assert!(TdmRep::parse(&long).is_err());
    }
}
