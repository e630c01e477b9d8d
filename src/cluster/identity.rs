//! Which profile a job runs: a digest of what in a profile changes the job's result, recorded
//! by the first `scrape enqueue` or `scrape worker` of the job and compared by every later one,
//! so a second profile that happens to have the same `name` is refused instead of being run
//! with the first one's rules.

use sha2::{Digest, Sha256};

/// Keys left out of the digest: the job's name and start pages (an enqueue may add start
/// pages, `--job` may name the job), where a worker writes, and how fast it goes. A profile
/// that differs only in these runs the same job.
const IGNORED: [&[&str]; 13] = [
    &["name"],
    &["start"],
    &["download", "out"],
    &["crawl", "concurrency"],
    &["crawl", "per_host"],
    &["crawl", "adaptive"],
    &["crawl", "per_host_rps"],
    &["download", "concurrency"],
    &["download", "per_host"],
    &["download", "adaptive"],
    &["download", "per_host_rps"],
    &["download", "connect_timeout"],
    &["download", "timeout"],
];

/// The digest (SHA-256, hex) of profile `source` (TOML) without the [`IGNORED`] keys; the
/// same for the same settings however they are written (order, spacing, comments).
pub fn profile_digest(source: &str) -> Result<String, toml::de::Error> {
    let mut value: serde_json::Value = toml::from_str(source)?;
    for path in IGNORED {
        remove(&mut value, path);
    }
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    Ok(format!("{:x}", Sha256::digest(canonical.as_bytes())))
}

fn remove(value: &mut serde_json::Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut table = value;
    for key in parents {
        match table.get_mut(*key) {
            Some(inner) => table = inner,
            None => return,
        }
    }
    if let Some(map) = table.as_object_mut() {
        map.remove(*last);
    }
}

/// `value` as JSON with the keys of every table in order, whatever order the map keeps.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "name = \"gallery\"\nstart = [\"http://a.test/1\"]\n\n\
                           [[images]]\nselector = \".gallery img\"\n\n\
                           [download]\nout = \"out\"\nconcurrency = 4\npath = \"{name}\"\n";

    #[test]
    fn a_profile_differing_in_name_start_out_or_pace_runs_the_same_job() {
        let same = [
            ("name", PROFILE.replace("\"gallery\"", "\"other\"")),
            ("start", PROFILE.replace("a.test/1", "a.test/2")),
            ("out", PROFILE.replace("\"out\"", "\"elsewhere\"")),
            (
                "concurrency",
                PROFILE.replace("concurrency = 4", "concurrency = 9"),
            ),
            (
                "spacing and comments",
                PROFILE.replace("[download]", "# where\n[download]  "),
            ),
            (
                "order of keys",
                PROFILE.replace(
                    "concurrency = 4\npath = \"{name}\"",
                    "path = \"{name}\"\nconcurrency = 4",
                ),
            ),
        ];
        let digest = profile_digest(PROFILE).unwrap();
        for (name, profile) in same {
            assert_eq!(profile_digest(&profile).unwrap(), digest, "{name}");
        }
    }

    #[test]
    fn a_profile_with_other_rules_runs_another_job() {
        let other = [
            ("selector", PROFILE.replace(".gallery img", ".other img")),
            ("path", PROFILE.replace("{name}", "b/{name}")),
            (
                "a new table",
                format!("{PROFILE}\n[filters]\ndeny = [\"x\"]\n"),
            ),
        ];
        let digest = profile_digest(PROFILE).unwrap();
        for (name, profile) in other {
            assert_ne!(profile_digest(&profile).unwrap(), digest, "{name}");
        }
    }
}
