//! Templates in profiles: page URLs with `{page}` and output paths with `{sha256}` and friends.

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
        if text.split('/').any(str::is_empty) {
            return Err(format!(
                "path template `{text}` has an empty folder or file name (a `/` at the end, or `//`)"
            ));
        }
        if let Some(segment) = text
            .split('/')
            .find(|segment| fixed_bytes(segment) > MAX_SEGMENT_BYTES)
        {
            return Err(format!(
                "`{segment}` in path template `{text}` is longer than a file name may be ({MAX_SEGMENT_BYTES} bytes)"
            ));
        }
        Ok(Self {
            text: text.to_owned(),
        })
    }

    /// Whether the template spreads files over shard folders.
    pub fn is_sharded(&self) -> bool {
        self.uses("shard")
    }

    /// Whether the template uses placeholder `name` (`"name"` for `{name}`).
    pub fn uses(&self, name: &str) -> bool {
        self.text.contains(&format!("{{{name}}}"))
    }

    /// The relative path for `values`; every value is made safe as one path segment.
    ///
    /// `{shard}` is the first three hex digits of the hash: 4,096 folders, so none holds more
    /// than ~10,000 files below 40 million images, while a small job creates few folders (each
    /// `mkdir` costs about as much as storing a file).
    ///
    /// No folder or file name is longer than [`MAX_SEGMENT_BYTES`]: where the text from the URL
    /// (`{name}`, `{host}`, `{profile}`) would make one longer, it is cut (at a character
    /// boundary), never the hash.
    pub fn render(&self, values: &PathValues<'_>) -> String {
        self.text
            .split('/')
            .map(|segment| render_segment(segment, values))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The longest folder or file name most file systems accept (`NAME_MAX`), in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// The longest a value from the URL or profile becomes in a path, in bytes.
const MAX_VALUE_BYTES: usize = 100;

/// Placeholders whose values come from the URL or the profile, of any length: cut to fit.
const FREE_PLACEHOLDERS: [&str; 3] = ["{name}", "{host}", "{profile}"];

/// The longest file extension of a supported format (`webp`, `avif`, `tiff`).
const MAX_EXT_BYTES: usize = 4;

/// The bytes of one segment of a path template that cannot be cut: its text, the hash, the
/// shard and the extension.
fn fixed_bytes(segment: &str) -> usize {
    let sha256 = "0".repeat(64);
    let ext = "e".repeat(MAX_EXT_BYTES);
    FREE_PLACEHOLDERS
        .iter()
        .fold(segment.to_owned(), |s, p| s.replace(p, ""))
        .replace("{sha256}", &sha256)
        .replace("{shard}", "000")
        .replace("{ext}", &ext)
        .len()
}

/// One segment of a path template filled in, its free values cut so it fits a file name.
fn render_segment(segment: &str, values: &PathValues<'_>) -> String {
    let fill = |max_bytes: usize| fill_segment(segment, values, max_bytes);
    let full = fill(MAX_VALUE_BYTES);
    if full.len() <= MAX_SEGMENT_BYTES {
        return full;
    }
    let free = FREE_PLACEHOLDERS
        .iter()
        .map(|p| segment.matches(p).count())
        .sum::<usize>()
        .max(1);
    let fixed_len = fill(0).len();
    fill(MAX_SEGMENT_BYTES.saturating_sub(fixed_len) / free)
}

/// `segment` with its placeholders filled in, in one pass (only the values it names are made
/// safe), the free ones cut to `max_bytes`.
fn fill_segment(segment: &str, values: &PathValues<'_>, max_bytes: usize) -> String {
    let mut out = String::with_capacity(segment.len() + 80);
    let mut rest = segment;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            rest = &rest[open..];
            break;
        };
        let value = match &rest[open + 1..close] {
            "sha256" => safe_segment(values.sha256),
            "shard" => safe_segment(values.sha256.get(..3).unwrap_or_default()),
            "ext" => safe_segment(values.ext),
            "host" => cut_segment(values.host, max_bytes),
            "name" => cut_segment(values.name, max_bytes),
            "profile" => cut_segment(values.profile, max_bytes),
            // Refused by `PathTemplate::parse`; kept as written.
            _ => rest[open..=close].to_owned(),
        };
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// [`safe_segment`] cut to at most `max_bytes` bytes (at a character boundary).
fn cut_segment(value: &str, max_bytes: usize) -> String {
    let mut safe = safe_segment(value);
    if safe.len() > max_bytes {
        let mut end = max_bytes;
        while !safe.is_char_boundary(end) {
            end -= 1;
        }
        safe.truncate(end);
    }
    safe
}

/// `value` as a harmless file-name segment: no separators, no dot-only names, at most
/// 100 bytes (cut at a character boundary: a file name's limit is in bytes, not characters).
pub fn safe_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_VALUE_BYTES));
    for c in value.chars() {
        let c = if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+' | '=') {
            c
        } else {
            '_'
        };
        if out.len() + c.len_utf8() > MAX_VALUE_BYTES {
            break;
        }
        out.push(c);
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
    fn a_path_is_filled_in_one_pass_and_says_which_placeholders_it_uses() {
        let template = PathTemplate::parse("{host}/{shard}/{name}-{sha256}.{ext}").unwrap();
        let values = PathValues {
            sha256: "abcdef",
            ext: "jpg",
            host: "cdn.example",
            name: "a/b {name}",
            profile: "p",
        };
        assert_eq!(
            template.render(&values),
            "cdn.example/abc/a_b__name_-abcdef.jpg"
        );
        assert!(template.uses("name") && template.uses("host"));
        assert!(!template.uses("profile") && !template.uses("nam"));
    }

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
    fn long_names_are_cut_by_bytes_to_fit_a_file_name() {
        let t = PathTemplate::parse("{host}/{name}-{profile}-{sha256}.{ext}").unwrap();
        let sha256 = "a".repeat(64);
        for name in ["中".repeat(120), "\u{20000}".repeat(90), "n".repeat(400)] {
            let host = "h".repeat(250);
            let values = PathValues {
                sha256: &sha256,
                ext: "webp",
                host: &host,
                name: &name,
                profile: &name,
            };
            let path = t.render(&values);
            for segment in path.split('/') {
                assert!(
                    segment.len() <= MAX_SEGMENT_BYTES,
                    "{} bytes",
                    segment.len()
                );
            }
            assert!(path.ends_with(&format!("-{sha256}.webp")), "{path}");
        }
        assert_eq!(safe_segment(&"中".repeat(120)).len(), 99);
    }

    #[test]
    fn path_template_without_a_file_name_or_too_long_is_refused() {
        for template in ["{sha256}/", "a//{sha256}"] {
            let error = PathTemplate::parse(template).unwrap_err();
            assert!(error.contains("empty"), "{error}");
        }
        let long = format!("{}{{sha256}}", "x".repeat(200));
        let error = PathTemplate::parse(&long).unwrap_err();
        assert!(error.contains("255 bytes"), "{error}");
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
