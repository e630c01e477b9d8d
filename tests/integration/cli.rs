//! The command line itself: completions and manual pages generated from the flag definitions,
//! global flags accepted on either side of a subcommand, plain logs when stderr is no terminal.

use std::collections::BTreeSet;

use tempfile::TempDir;

use crate::support::{download_list, run, scrape, text};

/// The subcommand names `--help` lists.
fn subcommands() -> BTreeSet<String> {
    let output = run(scrape().arg("--help"));
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completions_are_valid_bash_and_complete_every_subcommand() {
    let dir = TempDir::new().expect("temporary folder");
    let output = run(scrape().args(["completions", "bash"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let script = String::from_utf8_lossy(&output.stdout).into_owned();
    let names = subcommands();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        assert!(script.contains(name.as_str()), "`{name}` is not completed");
    }
    let path = dir.path().join("scrape.bash");
    std::fs::write(&path, &script).expect("script written");
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .expect("bash runs");
    assert!(syntax.status.success(), "{}", text(&syntax));
}

#[test]
fn completions_for_an_unknown_shell_is_a_usage_error() {
    let output = run(scrape().args(["completions", "tcsh"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("possible values"),
        "{}",
        text(&output)
    );
}

#[test]
fn man_writes_one_page_per_subcommand_with_its_flags() {
    let dir = TempDir::new().expect("temporary folder");
    let output = run(scrape().args(["man", "--out"]).arg(dir.path()));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    for name in subcommands() {
        let page = dir.path().join(format!("scrape-{name}.1"));
        assert!(page.is_file(), "no page for `{name}`");
    }
    let main_page = std::fs::read_to_string(dir.path().join("scrape.1")).expect("scrape.1");
    assert!(main_page.starts_with(".ie"), "not roff: {main_page:.40}");
    let download = std::fs::read_to_string(dir.path().join("scrape-download.1")).expect("page");
    assert!(download.contains("per\\-host"), "{download}");

    let printed = run(scrape().arg("man"));
    assert_eq!(printed.status.code(), Some(0), "{}", text(&printed));
    assert_eq!(String::from_utf8_lossy(&printed.stdout), main_page);
}

#[test]
fn global_flags_go_before_the_subcommand_and_logs_to_a_pipe_have_no_colour_codes() {
    let dir = TempDir::new().expect("temporary folder");
    let list = dir.path().join("urls.txt");
    // Nothing listens on the discard port: the attempt logs at debug level and fails.
    std::fs::write(&list, "http://127.0.0.1:9/a.jpg\n").expect("list written");
    let out = dir.path().join("out");
    let cmd = download_list(&list, &out, &["--retries", "0"]);
    // `-v` before the subcommand, as users type it.
    let args: Vec<_> = cmd.get_args().map(ToOwned::to_owned).collect();
    let mut cmd = scrape();
    cmd.arg("-v").args(args).env_remove("NO_COLOR");
    let output = run(&mut cmd);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a pipe: {stderr:?}"
    );
}

#[test]
fn a_run_flag_before_a_subcommand_is_a_usage_error_naming_it() {
    let output = run(scrape().args(["--fresh", "status", "--out", "nowhere"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("'status' cannot be used with '--fresh'"),
        "{}",
        text(&output)
    );
}
