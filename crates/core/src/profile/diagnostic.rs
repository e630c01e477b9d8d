//! Diagnostics for profiles: `path:line:col: message`, the source line and a caret.
//!
//! Pure: positions come from byte spans that the TOML parser keeps for every value.

use std::fmt;
use std::ops::Range;

/// How bad a diagnostic is: errors make the profile unusable, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found in a profile, located by a byte span of its source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// Byte range in the profile source; `None` for problems of the file as a whole.
    pub span: Option<Range<usize>>,
    pub hint: Option<String>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            message: message.into(),
            span,
            hint: None,
        }
    }

    /// A warning at `span`.
    pub fn warning(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(span, message)
        }
    }

    /// The same diagnostic with a hint line (`= help: ...`).
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Whether this diagnostic makes the profile unusable.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders the diagnostic against the profile's `source`, named `path`.
    pub fn render<'a>(&'a self, path: &'a str, source: &'a str) -> Rendered<'a> {
        Rendered {
            diagnostic: self,
            path,
            source,
        }
    }
}

/// A diagnostic ready to print: `path:line:col: error: message`, the line, a caret and a hint.
pub struct Rendered<'a> {
    diagnostic: &'a Diagnostic,
    path: &'a str,
    source: &'a str,
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.diagnostic;
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let Some(span) = d.span.clone() else {
            writeln!(f, "{}: {level}: {}", self.path, d.message)?;
            return write_hint(f, d, "");
        };
        let (line_no, col, line) = locate(self.source, span.start);
        writeln!(f, "{}:{line_no}:{col}: {level}: {}", self.path, d.message)?;
        let gutter = " ".repeat(line_no.to_string().len());
        writeln!(f, "{gutter} |")?;
        writeln!(f, "{line_no} | {line}")?;
        let start_chars = col - 1;
        let span_chars = self.source[span.start
            ..span
                .end
                .min(span.start + line_len_from(self.source, span.start))]
            .chars()
            .count()
            .max(1);
        writeln!(
            f,
            "{gutter} | {}{}",
            " ".repeat(start_chars),
            "^".repeat(span_chars)
        )?;
        write_hint(f, d, &gutter)
    }
}

fn write_hint(f: &mut fmt::Formatter<'_>, d: &Diagnostic, gutter: &str) -> fmt::Result {
    match &d.hint {
        Some(hint) => writeln!(f, "{gutter} = help: {hint}"),
        None => Ok(()),
    }
}

/// 1-based line and column (in characters) of byte `offset`, and the text of that line.
fn locate(source: &str, offset: usize) -> (usize, usize, &str) {
    let offset = floor_char_boundary(source, offset.min(source.len()));
    let line_start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i);
    let line_no = source[..line_start].matches('\n').count() + 1;
    let col = source[line_start..offset].chars().count() + 1;
    (
        line_no,
        col,
        source[line_start..line_end].trim_end_matches('\r'),
    )
}

fn line_len_from(source: &str, offset: usize) -> usize {
    let offset = floor_char_boundary(source, offset.min(source.len()));
    source[offset..].find('\n').unwrap_or(source.len() - offset)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The closest of `candidates` to `word`, if one is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_line_column_source_and_caret() {
        let source = "name = \"x\"\nselecter = \"img\"\n";
        let d = Diagnostic::error(Some(11..19), "unknown key `selecter`")
            .with_hint("did you mean `selector`?");
        let text = d.render("p.toml", source).to_string();
        assert_eq!(
            text,
            "p.toml:2:1: error: unknown key `selecter`\n  |\n2 | selecter = \"img\"\n  | ^^^^^^^^\n  = help: did you mean `selector`?\n"
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let source = "title = \"é\" x";
        let d = Diagnostic::error(Some(13..14), "m");
        assert!(
            d.render("p", source)
                .to_string()
                .starts_with("p:1:13: error: m")
        );
    }

    #[test]
    fn did_you_mean_finds_close_keys_only() {
        let keys = ["selector", "attributes", "pick"];
        assert_eq!(did_you_mean("selecter", keys), Some("selector"));
        assert_eq!(did_you_mean("attribute", keys), Some("attributes"));
        assert_eq!(did_you_mean("zzzz", keys), None);
    }
}
