//! The `scrape` binary: parses flags, sets up logging and Ctrl-C, runs a command, and turns its
//! result into an exit code (0 done, 1 finished with failures, 2 usage or input error,
//! 130 interrupted).

mod cli;
mod commands;

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use cli::{Cli, Command, GlobalArgs, LogFormat};
use commands::run::Stages;
use scrape::exit::{Stop, stop_of};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How a command ended, decided in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    DoneWithFailures,
    Interrupted,
}

/// An error a user can fix: bad flags, profile, URL, environment. Exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Threads of the runtime's blocking pool at most.
const BLOCKING_THREADS: usize = 32;

fn main() -> ExitCode {
    let cli = parse_cli();
    init_logging(&cli.global);
    // reqwest is built without a default crypto provider; pick ring once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Blocking work (page analysis, state reads, hashing) is CPU-bound: a thread per task
        // in flight (up to 512) only adds memory, each thread keeping a heap of its own.
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let cancel = CancellationToken::new();
    let result = runtime.block_on(async {
        watch_ctrl_c(cancel.clone());
        dispatch(cli, cancel).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::DoneWithFailures) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(e) => {
            // A usage error is the binary's own; every other error says what it is.
            let stop = if e.is::<UsageError>() {
                Stop::BadInput
            } else {
                stop_of(e.as_ref())
            };
            print_error(&e, stop);
            ExitCode::from(stop.exit_code())
        }
    }
}

/// The command line, parsed. A run's flags (`--profile`, `--fresh`, ...) before a subcommand
/// are an error, as they would be ignored; the global ones (`-v`, `-q`, `--log-format`) go
/// anywhere, as `--help` says.
fn parse_cli() -> Cli {
    use clap::parser::ValueSource;
    use clap::{Args, CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    if let Some((name, _)) = matches.subcommand() {
        let run_args = cli::RunArgs::augment_args(clap::Command::new("run"));
        let given = run_args.get_arguments().find(|arg| {
            matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine)
        });
        if let Some(arg) = given {
            let flag = arg
                .get_long()
                .map_or_else(|| arg.get_id().to_string(), |long| format!("--{long}"));
            Cli::command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("the subcommand '{name}' cannot be used with '{flag}'; put it after the subcommand if `scrape {name} --help` lists it"),
                )
                .exit();
        }
    }
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

async fn dispatch(cli: Cli, cancel: CancellationToken) -> anyhow::Result<Outcome> {
    let quiet = cli.global.quiet;
    match cli.command {
        Some(Command::Run(args)) => commands::run::run(args, Stages::All, quiet, cancel).await,
        Some(Command::Crawl(args)) => {
            commands::run::run(args, Stages::CrawlOnly, quiet, cancel).await
        }
        None => commands::run::run(cli.run, Stages::All, quiet, cancel).await,
        Some(Command::Check(args)) => commands::check::check(&args),
        Some(Command::Status(args)) if args.redis.is_some() => {
            commands::cluster::status(args).await
        }
        Some(Command::Status(args)) => commands::status::status(&args),
        Some(Command::Urls(args)) => commands::urls::urls(&args),
        Some(Command::Licenses(args)) => commands::licenses::licenses(&args),
        Some(Command::Login(args)) => commands::login::login(&args).await,
        Some(Command::Verify(args)) => commands::verify::verify(&args).await,
        Some(Command::Probe(args)) => commands::probe::probe(&args, &cancel).await,
        Some(Command::Download(args)) => commands::download::download(args, quiet, cancel).await,
        Some(Command::Retry(args)) => commands::download::retry(args, quiet, cancel).await,
        Some(Command::Demo(args)) => commands::demo::demo(args, quiet, cancel).await,
        Some(Command::Schema(args)) => commands::schema::schema(&args),
        Some(Command::Record(args)) => commands::record::record(args, quiet, cancel).await,
        Some(Command::Test(args)) => commands::test::test(args, cancel).await,
        Some(Command::NewProfile(args)) => commands::new_profile::new_profile(&args, &cancel).await,
        Some(Command::Completions(args)) => commands::docs::completions(&args),
        Some(Command::Man(args)) => commands::docs::man(&args),
        Some(Command::Worker(args)) => commands::cluster::worker(args, cancel).await,
        Some(Command::Enqueue(args)) => commands::cluster::enqueue(args).await,
        Some(Command::Export(args)) => commands::cluster::export(args).await,
    }
}

fn print_error(e: &anyhow::Error, stop: Stop) {
    // Profile errors carry their rendered diagnostics; print them as they are.
    if let Some(scrape::profile::ProfileError::Invalid { rendered, .. }) = e.downcast_ref() {
        eprint!("{rendered}");
    }
    eprintln!("error: {e}");
    for cause in e.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    if let Some(help) = stop.help() {
        eprintln!("  help: {help}");
    }
}

/// First Ctrl-C: stop taking work, commit, summarise. Second: leave at once (state stays
/// consistent: it is only ever changed by whole transactions).
fn watch_ctrl_c(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("\ninterrupted: saving progress (Ctrl-C again to quit at once)");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(130);
        }
    });
}

/// Log targets of dependencies that write secrets as they are: `cookie_store` logs every
/// cookie it stores with its value (from the cookies file and from `Set-Cookie`).
const SECRET_LOGGING_TARGETS: [&str; 4] = [
    "cookie_store",
    // The browser's protocol messages carry cookies and the localStorage of a session.
    "chromiumoxide",
    "tungstenite",
    "async_tungstenite",
];

fn init_logging(global: &GlobalArgs) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let level = match (global.quiet, global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let mut filter = EnvFilter::try_from_env("SCRAPE_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{level},html5ever=error,selectors=error,chromiumoxide=off"
        ))
    });
    // Dependencies that log secrets verbatim are silenced whatever the level asked for.
    for target in SECRET_LOGGING_TARGETS {
        if let Ok(directive) = format!("{target}=off").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: a log file or a pipe gets plain text (`NO_COLOR`
        // turns them off on a terminal too).
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false);
    match global.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.compact().init(),
    }
}
