//! The layering the folder listing promises: within each crate, the top-level modules import
//! one another without a cycle (the crate boundary already keeps the core from importing the
//! I/O crate). Read from the sources, so an arrow that closes a cycle fails here by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::repo;

/// Top-level module → the top-level modules of the same crate it names as `crate::NAME`,
/// outside comments. The binary's own modules (`main`, `cli`, `commands`) and the crate root
/// are left out: they sit above everything.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.to_owned()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_str().unwrap().trim_end_matches(".rs").to_owned();
        if ["main", "lib", "cli", "commands"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let named = graph.entry(module.clone()).or_default();
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let target = &rest[..end];
                if !target.is_empty() && target != module {
                    named.insert(target.to_owned());
                }
            }
        }
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut found = path[at..].to_vec();
            found.push(module.to_owned());
            return Some(found);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(graph, module, &mut Vec::new(), &mut done))
}

#[test]
fn the_modules_of_each_crate_import_one_another_without_a_cycle() {
    for src in ["src", "crates/core/src"] {
        let graph = imports(&repo(src));
        assert!(graph.len() > 5, "{src}: {graph:?}");
        assert_eq!(
            cycle(&graph),
            None,
            "{src}: a cycle of imports between top-level modules"
        );
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("net", vec!["state", "redact"]),
        ("state", vec!["paginate", "net"]),
        ("paginate", vec![]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        cycle(&graph),
        Some(vec!["net".to_owned(), "state".to_owned(), "net".to_owned()])
    );
}
