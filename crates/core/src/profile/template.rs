//! Templates in profiles: page URLs with `{page}` and output paths with `{sha256}` and friends.

use std::fmt::Write as _;

/// A page-number URL template such as `/gallery?page={page}`, resolved against the start URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTemplate {
    text: String,
}

impl UrlTemplate {
    /// Checks that `text` has exactly the `{page}` placeholder.
    pub fn parse(text: &str) -> Result<Self, String> {
        let names = placeholders(text)?;
        if !names.iter().any(|n| n == "page") {
            return Err(format!(
                "URL template `{text}` has no `{{page}}` placeholder"
            ));
        }
        if let Some(other) = names.iter().find(|n| *n != "page") {
            return Err(format!(
                "unknown placeholder `{{{other}}}` in URL template (only `{{page}}` is allowed)"
            ));
        }
        Ok(Self {
            text: text.to_owned(),
        })
    }

    /// The template with `{page}` replaced by `page`.
    pub fn render(&self, page: i64) -> String {
        self.text.replace("{page}", &page.to_string())
    }
}

/// The placeholders an output path template may use.
pub const PATH_PLACEHOLDERS: [&str; 6] = ["sha256", "shard", "ext", "host", "name", "profile"];

/// An output path template such as `{shard}/{sha256}.{ext}`, relative to the output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    text: String,
}

/// What a stored image's path is made of.
#[derive(Debug, Clone, Copy)]
pub struct PathValues<'a> {
    pub sha256: &'a str,
    pub ext: &'a str,
    pub host: &'a str,
    /// The URL's file name without extension; sanitised here.
    pub name: &'a str,
    pub profile: &'a str,
}

impl PathTemplate {
    /// Checks placeholders and that the path stays inside the output folder.
    pub fn parse(text: &str) -> Result<Self, String> {
        let names = placeholders(text)?;
        if let Some(other) = names
            .iter()
            .find(|n| !PATH_PLACEHOLDERS.contains(&n.as_str()))
        {
            return Err(format!(
                "unknown placeholder `{{{other}}}` in path template (use {})",
                PATH_PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
            ));
        }
        if !names.iter().any(|n| n == "sha256") {
            return Err(format!(
                "path template `{text}` has no `{{sha256}}`: different images could get the same name"
            ));
        }
        if text.starts_with('/') || text.split('/').any(|part| part == ".." || part == ".") {
            return Err(format!(
                "path template `{text}` must stay inside the output folder"
            ));
        }
        Ok(Self {
            text: text.to_owned(),
        })
    }

    /// Whether the template spreads files over shard folders.
    pub fn is_sharded(&self) -> bool {
        self.text.contains("{shard}")
    }

    /// The relative path for `values`; every value is made safe as one path segment.
    ///
    /// `{shard}` is the first three hex digits of the hash: 4,096 folders, so none holds more
    /// than ~10,000 files below 40 million images, while a small job creates few folders (each
    /// `mkdir` costs about as much as storing a file).
    pub fn render(&self, values: &PathValues<'_>) -> String {
        let shard = values.sha256.get(..3).unwrap_or_default();
        self.text
            .replace("{sha256}", &safe_segment(values.sha256))
            .replace("{shard}", &safe_segment(shard))
            .replace("{ext}", &safe_segment(values.ext))
            .replace("{host}", &safe_segment(values.host))
            .replace("{name}", &safe_segment(values.name))
            .replace("{profile}", &safe_segment(values.profile))
    }
}

/// `value` as a harmless file-name segment: no separators, no dot-only names, bounded length.
pub fn safe_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(100));
    for c in value.chars().take(100) {
        if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+' | '=') {
            out.push(c);
        } else {
            let _ = write!(out, "_");
        }
    }
    let trimmed = out.trim_matches('.');
    if trimmed.is_empty() {
        "_".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The names inside `{...}`; an unclosed or empty brace is an error.
fn placeholders(text: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in template `{text}`"))?;
        let name = &after[..close];
        if name.is_empty() || name.contains('{') {
            return Err(format!("malformed placeholder in template `{text}`"));
        }
        names.push(name.to_owned());
        rest = &after[close + 1..];
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_template_requires_page_placeholder() {
        assert!(
            UrlTemplate::parse("/gallery?p=1")
                .unwrap_err()
                .contains("{page}")
        );
        assert!(UrlTemplate::parse("/g/{pag}").is_err());
        assert!(
            UrlTemplate::parse("/g/{page")
                .unwrap_err()
                .contains("unclosed")
        );
        assert_eq!(
            UrlTemplate::parse("/g/{page}.html").unwrap().render(3),
            "/g/3.html"
        );
    }

    #[test]
    fn path_template_shards_by_hash_prefix() {
        let t = PathTemplate::parse("{shard}/{sha256}.{ext}").unwrap();
        let values = PathValues {
            sha256: "abcdef12",
            ext: "jpg",
            host: "h",
            name: "n",
            profile: "p",
        };
        assert_eq!(t.render(&values), "abc/abcdef12.jpg");
        assert!(t.is_sharded());
    }

    #[test]
    fn path_template_cannot_escape_the_output_folder() {
        assert!(PathTemplate::parse("../{sha256}").is_err());
        assert!(PathTemplate::parse("/etc/{sha256}").is_err());
        let t = PathTemplate::parse("{name}-{sha256}").unwrap();
        let values = PathValues {
            sha256: "ab",
            ext: "",
            host: "",
            name: "../../etc/passwd",
            profile: "",
        };
        assert_eq!(t.render(&values), "_.._etc_passwd-ab");
    }

    #[test]
    fn path_template_needs_the_hash() {
        assert!(
            PathTemplate::parse("{name}.{ext}")
                .unwrap_err()
                .contains("{sha256}")
        );
        assert!(
            PathTemplate::parse("{shard}/{sha256}.{colour}")
                .unwrap_err()
                .contains("unknown placeholder")
        );
    }
}
