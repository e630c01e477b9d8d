//! `scrape schema`: the JSON Schema of profiles accepts every real profile and every example of
//! the reference, rejects what the parser rejects, and the committed copy is current.

use std::path::PathBuf;

use scrape::profile::Severity;
use serde_json::Value;

use crate::docs::{Kind, expectations, profile_text, reference, toml_examples};
use crate::support::{repo, run, scrape, text};

/// Where the schema is committed, for editors that read it from the repository.
const COMMITTED: &str = "site-profiles/profile.schema.json";

fn printed_schema() -> Value {
    let output = run(scrape().arg("schema"));
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).expect("scrape schema prints JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&printed_schema()).expect("a valid draft 2020-12 schema")
}

/// A profile's TOML as the JSON value the schema describes.
fn as_json(toml_text: &str) -> Value {
    toml::from_str(toml_text).expect("the example is TOML")
}

/// The schema's complaints about `toml_text`.
fn schema_errors(validator: &jsonschema::Validator, toml_text: &str) -> Vec<String> {
    validator
        .iter_errors(&as_json(toml_text))
        .map(|e| format!("{} at `{}`", e, e.instance_path()))
        .collect()
}

fn site_profiles() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo("site-profiles"))
        .expect("site-profiles/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn schema_is_draft_2020_12_and_closed() {
    let schema = printed_schema();
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{schema:#}"
    );
    assert_eq!(schema["additionalProperties"], false);
    // Every table of the profile denies unknown keys, as the parser does.
    for (name, def) in schema["$defs"].as_object().expect("$defs") {
        if def["type"] == "object" {
            assert_eq!(def["additionalProperties"], false, "`{name}` is open");
        }
    }
    let render = &schema["$defs"]["Render"]["enum"];
    assert_eq!(render, &serde_json::json!(["static", "browser", "auto"]));
    let kinds = &schema["$defs"]["PaginationKind"]["enum"];
    assert_eq!(
        kinds,
        &serde_json::json!(["none", "next_link", "url_template", "json_cursor"])
    );
    let description = schema["properties"]["start"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(description.contains("http"), "{schema:#}");
}

#[test]
fn schema_accepts_every_site_profile() {
    let validator = validator();
    let profiles = site_profiles();
    assert!(profiles.len() >= 5, "{profiles:?}");
    let mut failures = Vec::new();
    for path in profiles {
        let source = std::fs::read_to_string(&path).expect("readable profile");
        for e in schema_errors(&validator, &source) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_accepts_every_valid_example_and_rejects_the_type_errors_of_the_reference() {
    let validator = validator();
    let examples = toml_examples(&reference()).expect("well-formed code blocks");
    let mut failures = Vec::new();
    let mut rejected = 0;
    for example in &examples {
        let source = profile_text(example);
        let errors = schema_errors(&validator, &source);
        match example.kind {
            Kind::Complete | Kind::Fragment if !errors.is_empty() => failures.push(format!(
                "docs/profiles.md:{}: rejected: {}\n{source}",
                example.line,
                errors.join("; ")
            )),
            Kind::Invalid => {
                // Mistakes the TOML types alone show (unknown keys, wrong types, unknown
                // variants) are the schema's business too; the others are the checker's.
                let structural = expectations(&example.text).iter().any(|(s, m)| {
                    *s == Severity::Error
                        && ["unknown key", "invalid type", "unknown variant"]
                            .iter()
                            .any(|k| m.contains(k))
                });
                if structural && errors.is_empty() {
                    failures.push(format!(
                        "docs/profiles.md:{}: accepted a structural mistake\n{source}",
                        example.line
                    ));
                }
                rejected += usize::from(structural);
            }
            _ => {}
        }
    }
    assert!(
        rejected >= 3,
        "only {rejected} structural mistakes in the reference"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_rejects_an_unknown_key_a_wrong_type_and_a_duration_without_unit() {
    let validator = validator();
    let base =
        "name = \"x\"\nstart = [\"https://example.test/\"]\n[[images]]\nselector = \"img\"\n";
    assert!(schema_errors(&validator, base).is_empty());
    let cases = [
        ("unknown top-level key", "nmae = \"x\"\n"),
        ("unknown key in a table", "[download]\nconcurency = 3\n"),
        ("wrong type", "[download]\nconcurrency = \"16\"\n"),
        ("unknown variant", "render = \"chrome\"\n"),
        ("duration without unit", "[download]\ntimeout = 30\n"),
        (
            "duration with a bad unit",
            "[download]\ntimeout = \"3 fortnights\"\n",
        ),
        (
            "size with a bad unit",
            "[download]\nmax_bytes = \"5 parsecs\"\n",
        ),
    ];
    for (what, extra) in cases {
        // Top-level keys go before the first table.
        let source = if extra.starts_with('[') {
            format!("{base}{extra}")
        } else {
            format!("{extra}{base}")
        };
        assert!(
            !schema_errors(&validator, &source).is_empty(),
            "{what} accepted:\n{source}"
        );
    }
    for good in [
        "[download]\ntimeout = \"1m30s\"\nmax_bytes = \"512 KiB\"\nmin_speed = \"50KB/s\"\n",
        "[download]\nmax_bytes = 1048576\nmin_speed = 0\n",
        "[browser]\nsettle = \"500ms\"\ndelay = \"1.5s\"\n",
    ] {
        let source = format!("{base}{good}");
        let errors = schema_errors(&validator, &source);
        assert!(errors.is_empty(), "{good}: {errors:?}");
    }
}

#[test]
fn committed_schema_is_current() {
    let committed = std::fs::read_to_string(repo(COMMITTED)).unwrap_or_default();
    let committed: Value = serde_json::from_str(&committed).unwrap_or(Value::Null);
    assert!(
        committed == printed_schema(),
        "{COMMITTED} is stale or missing: run `scrape schema --out {COMMITTED}` \
         (cargo run -- schema --out {COMMITTED}) and commit it"
    );
}

#[test]
fn schema_out_writes_the_same_schema_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profile.schema.json");
    let output = run(scrape().arg("schema").arg("--out").arg(&out));
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout.is_empty(), "{}", text(&output));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("JSON in the file");
    assert_eq!(written, printed_schema());
}
