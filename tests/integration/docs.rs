//! The profile reference (`docs/profiles.md`): every TOML example in it is checked.
//!
//! Conventions (documented at the end of the reference itself):
//! - ```` ```toml ````: a complete profile, which must check with no diagnostic;
//! - ```` ```toml fragment ````: a table or a few keys, wrapped into a minimal profile first;
//! - ```` ```toml invalid ````: a fragment that must produce at least one error;
//! - in any block, `# error: TEXT` / `# warning: TEXT` lines expect a diagnostic of that severity
//!   whose message contains TEXT, and the block's diagnostics must be exactly the expected ones.

use scrape::profile::{self, Diagnostic, Severity};

use crate::support;

/// One fenced `toml` block of the reference.
#[derive(Debug)]
pub struct Example {
    /// 1-based line of the opening fence, for messages.
    pub line: usize,
    pub kind: Kind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Complete,
    Fragment,
    Invalid,
}

pub fn reference() -> String {
    std::fs::read_to_string(support::repo("docs/profiles.md")).expect("docs/profiles.md exists")
}

/// Every fenced block whose info string starts with `toml`; an unknown modifier is an error,
/// so a typo cannot turn a block into an unchecked one.
pub fn toml_examples(markdown: &str) -> Result<Vec<Example>, String> {
    let mut examples = Vec::new();
    let mut open: Option<(usize, Option<Kind>, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    let kind = match (words.next(), words.next(), words.next()) {
                        (Some("toml"), None, _) => Some(Kind::Complete),
                        (Some("toml"), Some("fragment"), None) => Some(Kind::Fragment),
                        (Some("toml"), Some("invalid"), None) => Some(Kind::Invalid),
                        (Some(lang), ..) if lang.starts_with("toml") => {
                            return Err(format!(
                                "line {}: unknown toml block kind `{info}`",
                                index + 1
                            ));
                        }
                        _ => None,
                    };
                    open = Some((index + 1, kind, String::new()));
                }
            }
            Some((start, kind, mut text)) => {
                if trimmed.starts_with("```") {
                    if let Some(kind) = kind {
                        examples.push(Example {
                            line: start,
                            kind,
                            text,
                        });
                    }
                } else {
                    text.push_str(line);
                    text.push('\n');
                    open = Some((start, kind, text));
                }
            }
        }
    }
    match open {
        Some((start, ..)) => Err(format!("line {start}: unclosed code block")),
        None => Ok(examples),
    }
}

/// Whether `text` sets top-level key `key` (before any table header).
fn sets_top_level(text: &str, key: &str) -> bool {
    text.lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with('['))
        .any(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
}

/// The profile an example stands for: complete blocks as they are, fragments wrapped.
pub fn profile_text(example: &Example) -> String {
    if example.kind == Kind::Complete {
        return example.text.clone();
    }
    let mut text = String::new();
    if !sets_top_level(&example.text, "name") {
        text.push_str("name = \"docs\"\n");
    }
    if !sets_top_level(&example.text, "start") {
        text.push_str("start = [\"https://example.test/\"]\n");
    }
    text.push_str(&example.text);
    if !example.text.contains("[[images]]") {
        text.push_str("\n[[images]]\nselector = \"img\"\n");
    }
    text
}

/// The `# error: ...` / `# warning: ...` expectations of an example.
pub fn expectations(text: &str) -> Vec<(Severity, String)> {
    text.lines()
        .filter_map(|line| {
            let comment = line.trim().strip_prefix('#')?.trim();
            if let Some(m) = comment.strip_prefix("error:") {
                Some((Severity::Error, m.trim().to_owned()))
            } else {
                let m = comment.strip_prefix("warning:")?;
                Some((Severity::Warning, m.trim().to_owned()))
            }
        })
        .collect()
}

/// What is wrong with `example`, if anything.
fn problems(example: &Example) -> Vec<String> {
    let source = profile_text(example);
    let checked = profile::check(&source);
    let expected = expectations(&example.text);
    let matches = |d: &Diagnostic, (severity, text): &(Severity, String)| {
        d.severity == *severity && d.message.contains(text.as_str())
    };
    let mut found = Vec::new();
    for d in &checked.diagnostics {
        if !expected.iter().any(|e| matches(d, e)) {
            found.push(format!("unexpected: {}", d.render("example", &source)));
        }
    }
    for e in &expected {
        if !checked.diagnostics.iter().any(|d| matches(d, e)) {
            found.push(format!(
                "expected {:?} containing `{}`, not found",
                e.0, e.1
            ));
        }
    }
    let has_error = checked.diagnostics.iter().any(Diagnostic::is_error);
    if example.kind == Kind::Invalid && !has_error {
        found.push("an `invalid` example must produce an error".into());
    }
    if example.kind != Kind::Invalid && checked.profile.is_none() {
        found.push("the example is not a usable profile".into());
    }
    found
}

fn report(examples: &[Example]) -> Vec<String> {
    examples
        .iter()
        .flat_map(|example| {
            problems(example).into_iter().map(move |p| {
                format!(
                    "docs/profiles.md:{} ({:?}): {p}\n{}",
                    example.line, example.kind, example.text
                )
            })
        })
        .collect()
}

#[test]
fn every_toml_example_in_the_reference_checks_as_labelled() {
    let examples = toml_examples(&reference()).expect("well-formed code blocks");
    for kind in [Kind::Complete, Kind::Fragment, Kind::Invalid] {
        assert!(
            examples.iter().any(|e| e.kind == kind),
            "no {kind:?} example"
        );
    }
    let failures = report(&examples);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_broken_example_is_caught() {
    // The checks above must be able to fail: mislabelled and broken examples are reported.
    let markdown = "```toml\nname = \"x\"\n```\n\
                    ```toml fragment\n[download]\nconcurency = 3\n```\n\
                    ```toml invalid\n[download]\nconcurrency = 3\n```\n\
                    ```toml fragment\n[download]\npath = \"{sha256}\"\n```\n\
                    ```toml invalid\n[download]\nconcurrency = 0\n# error: no such text\n```\n";
    let examples = toml_examples(markdown).unwrap();
    assert_eq!(examples.len(), 5);
    for example in &examples {
        assert!(!problems(example).is_empty(), "not caught: {example:?}");
    }
    assert!(toml_examples("```toml fragmnet\nx = 1\n```\n").is_err());
    assert!(toml_examples("```toml\nname = \"x\"\n").is_err());
}

/// Every key a table accepts, from the checker itself: an unknown key's hint lists them.
fn accepted_keys(table_header: &str) -> Vec<String> {
    let source = format!(
        "name = \"k\"\nstart = [\"https://example.test/\"]\n{table_header}\nzzzzzz = 1\n\
         [[images]]\nselector = \"img\"\n"
    );
    let hint = profile::check(&source)
        .diagnostics
        .into_iter()
        .find(|d| d.message.contains("zzzzzz"))
        .and_then(|d| d.hint)
        .unwrap_or_else(|| panic!("no hint for an unknown key in `{table_header}`"));
    let list = hint
        .strip_prefix("expected one of: ")
        .unwrap_or_else(|| panic!("unexpected hint `{hint}`"));
    list.split(", ").map(str::to_owned).collect()
}

/// The keys set in `table` (`""` for the top level) by the examples, as written.
fn keys_in_examples(examples: &[Example], table: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for example in examples {
        let mut current = String::new();
        for line in profile_text(example).lines().map(str::trim) {
            if line.starts_with('[') {
                current = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            } else if let Some((key, _)) = line.split_once('=')
                && !line.starts_with('#')
                && current == table
            {
                keys.push(key.trim().to_owned());
            }
        }
    }
    keys
}

#[test]
fn every_profile_key_has_an_example_and_a_heading() {
    let markdown = reference();
    let examples = toml_examples(&markdown).expect("well-formed code blocks");
    let mut missing = Vec::new();
    for (header, table) in [
        ("", ""),
        ("[pagination]\nkind = \"none\"", "pagination"),
        ("[crawl]", "crawl"),
        ("[[follow]]\nselector = \"a\"\nlevel = \"x\"", "follow"),
        ("[[images]]\nselector = \"img\"", "images"),
        ("[filters]", "filters"),
        ("[download]", "download"),
        ("[browser]", "browser"),
        ("[[api]]\nurl = \"x\"\nitems = \"$\"\nimage = \"$\"", "api"),
        ("[session]", "session"),
        ("[replay]", "replay"),
        ("[proxy]", "proxy"),
        ("[politeness]", "politeness"),
        (
            "[session.token]\nurl = \"x\"\ntoken = \"$\"",
            "session.token",
        ),
        ("[download.resize]\nsize = 1", "download.resize"),
        ("[session.signed_out]", "session.signed_out"),
        (
            "[session.login]\nurl = \"x\"\nfields = { a = \"env:A\" }",
            "session.login",
        ),
    ] {
        let written = keys_in_examples(&examples, table);
        let tables = [
            "pagination",
            "crawl",
            "follow",
            "levels",
            "images",
            "filters",
            "download",
            "browser",
            "api",
            "session",
            "replay",
            "proxy",
            "politeness",
        ];
        for key in accepted_keys(header) {
            if table.is_empty() && tables.contains(&key.as_str()) {
                continue; // Written as `[table]` headers, each with its own section.
            }
            // A key holding a table is written as its `[table.key]` header.
            let sub_table = format!("[{table}.{key}]");
            let as_table = examples.iter().any(|e| e.text.contains(&sub_table));
            if !written.contains(&key) && !as_table {
                missing.push(format!("`{key}` in [{table}] has no example"));
            }
            if !markdown.contains(&format!("### `{key}`"))
                && !markdown.contains(&format!("### `{key}` ({table})"))
            {
                missing.push(format!("`{key}` in [{table}] has no `### `{key}`` heading"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
