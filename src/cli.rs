//! Command-line interface: clap structures only; the doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use scrape::telemetry::ProgressMode;

/// Turn image sites into complete, verified image collections, resumable at any point.
///
/// Run a site profile: `scrape --profile site-profiles/NAME.toml`. Interrupt it at any time
/// and run the same command again to continue where it stopped.
#[derive(Debug, Parser)]
#[command(name = "scrape", version, arg_required_else_help = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub global: GlobalArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Crawl and download a profile (the same as `scrape --profile FILE`).
    Run(RunArgs),
    /// Crawl a profile and queue the images it finds without downloading them (a run of the
    /// profile or `scrape download --out DIR` downloads them later).
    Crawl(RunArgs),
    /// Validate profiles and report every problem as FILE:LINE:COL.
    Check(CheckArgs),
    /// Show what is done, pending and failed for a profile or output folder.
    Status(StatusArgs),
    /// List the image URLs a job discovered and what became of each (pending, stored,
    /// duplicate, failed), one line each: inspect a crawl before downloading anything.
    Urls(UrlsArgs),
    /// What a dataset is made of: its images by licence and by creator, as their pages
    /// published them (read from the output folder's manifest).
    Licenses(LicensesArgs),
    /// Sign in to a site once, in a browser, and save its cookies and localStorage as the
    /// storage state file the profile's `[session] storage_state` names.
    Login(LoginArgs),
    /// Re-hash every stored file against the state and list those missing or changed
    /// (exit 1 if any); `--requeue` queues them for download again.
    Verify(VerifyArgs),
    /// Show what a profile extracts from one page, one JSON object per line.
    Probe(ProbeArgs),
    /// Download a list of image URLs (.txt, .csv, .tsv, .jsonl, optionally .gz).
    Download(DownloadArgs),
    /// Put failed images back in the queue (all, or by class) and download them again.
    Retry(RetryArgs),
    /// Serve the bundled demo gallery on loopback and run the demo profile on it.
    Demo(DemoArgs),
    /// Print the JSON Schema of profiles, for editors that complete and validate TOML.
    Schema(SchemaArgs),
    /// Crawl a few pages of a profile and record every request and response as a HAR file.
    Record(RecordArgs),
    /// Replay profiles' recordings offline and compare what they find with the expected files.
    Test(TestArgs),
    /// Draft a profile for a site from one of its pages (gallery images, next page, JSON APIs).
    NewProfile(NewProfileArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Print the manual page (roff, for `man -l -`), or write one page per command to a folder.
    Man(ManArgs),
    /// Work on a job with other workers over one Redis: pages and images from its streams,
    /// files into the shared output folder; exits when the job is finished.
    Worker(WorkerArgs),
    /// Seed a job in Redis with a profile's start pages, for `scrape worker` to run.
    Enqueue(EnqueueArgs),
    /// Write manifest.jsonl and failures.jsonl of a whole job run by workers over Redis.
    Export(ExportArgs),
}

/// Running as one worker of a job over Redis.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The job's Redis (`redis://HOST:PORT/DB`).
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The site profile (TOML); every worker of a job uses the same one.
    #[arg(short, long, value_name = "FILE")]
    pub profile: PathBuf,
    /// The output folder every worker shares (default: the profile's `download.out`).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The job (default: the profile's name).
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// This worker's name in the job (default: host name and process id).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// A task not renewed for this long (its worker died) is taken over by another worker.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lease: String,
    /// An item delivered more often than this (its workers keep dying on it) goes to the
    /// dead-letter stream.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_deliveries: u64,
    /// Keep waiting for work when the job is finished, instead of exiting.
    #[arg(long)]
    pub keep_waiting: bool,
    /// How to show the job's progress (its totals over every worker).
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Interval of plain progress lines (when stderr is not a terminal).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub progress_interval: String,
    /// Work with a Redis that can lose the job (no `appendonly`, or a `maxmemory-policy` that
    /// evicts keys), which is refused otherwise.
    #[arg(long)]
    pub allow_volatile_redis: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Seeding a job over Redis.
#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// The job's Redis (`redis://HOST:PORT/DB`).
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The site profile (TOML) whose start pages to enqueue.
    #[arg(short, long, value_name = "FILE")]
    pub profile: PathBuf,
    /// Start URL to use instead of the profile's `start` (repeatable).
    #[arg(long, value_name = "URL")]
    pub start: Vec<String>,
    /// The job (default: the profile's name).
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// Work with a Redis that can lose the job (no `appendonly`, or a `maxmemory-policy` that
    /// evicts keys), which is refused otherwise.
    #[arg(long)]
    pub allow_volatile_redis: bool,
}

/// Exporting a job run over Redis.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The job's Redis (`redis://HOST:PORT/DB`).
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The shared output folder the workers stored the files in.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// The job (default: the only job in that Redis).
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// The job's profile: with `format = "parquet"` in its `[download]`, `images.parquet` is
    /// written too (with the image bytes when `parquet_images = true`).
    #[arg(short, long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// More log output (-v: debug, -vv: trace); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr; no progress.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Running a profile.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The site profile (TOML).
    #[arg(short, long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Output folder (default: the profile's `download.out`).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Start URL to use instead of the profile's `start` (repeatable).
    #[arg(long, value_name = "URL")]
    pub start: Vec<String>,
    /// Pages in flight at once over all chains, instead of the profile's `[crawl] concurrency`.
    #[arg(long, value_name = "N")]
    pub crawl_concurrency: Option<u64>,
    /// Forget earlier progress in the output folder and start over.
    #[arg(long)]
    pub fresh: bool,
    /// Look for what is new: every chain that ended before is walked again from its first page
    /// and stops after N known pages in a row (pages with no new image and no new link; N
    /// known items for a `json_cursor` API), then goes on from its old end. Without N: the
    /// profile's `stop_after_known`, else 2 pages (20 API items).
    #[arg(long, value_name = "N", num_args = 0..=1, conflicts_with_all = ["fresh", "redis"])]
    pub refresh: Option<Option<u64>>,
    /// Ask every stored image again, only if it changed (`If-None-Match`/`If-Modified-Since`
    /// with the validators kept when it was stored): an image whose URL now serves other
    /// bytes is stored anew and listed as new; the file it had stays. Files and Parquet
    /// output only.
    #[arg(long, conflicts_with_all = ["fresh", "redis"])]
    pub recheck_images: bool,
    /// Run offline, every request answered from this HAR file (made by `scrape record` or a
    /// browser's "Save all as HAR"); a request not in it gets a 404 and is listed at the end.
    /// The output folder defaults to the profile's with `-replay` appended.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// With --replay: a request that is not in the recording fails the run (exit 1).
    #[arg(long, requires = "replay")]
    pub replay_strict: bool,
    /// Run the job over Redis (`redis://HOST:PORT/DB`): seed it with the start pages and work
    /// on it here as one worker (`scrape enqueue`, then `scrape worker`); more machines join
    /// with `scrape worker`.
    #[arg(long, value_name = "URL", conflicts_with_all = ["replay", "fresh"])]
    pub redis: Option<String>,
    /// With --redis: work with a Redis that can lose the job (no `appendonly`, or a
    /// `maxmemory-policy` that evicts keys), which is refused otherwise.
    #[arg(long, requires = "redis")]
    pub allow_volatile_redis: bool,
    #[command(flatten)]
    pub progress: ProgressArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Recording a site.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The site profile (TOML).
    #[arg(short, long, value_name = "FILE")]
    pub profile: PathBuf,
    /// Folder for the recording: `DIR/site.har` (replaced atomically).
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Pages crawled per start URL at most (a `json_cursor` walk in the browser also takes every
    /// API page the rendered start page fetched by itself: they are in the recording).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub pages: u64,
    /// Image bodies: left out, fetched and kept, or replaced by tiny valid images of the same
    /// type (so a replay downloads something without the recording growing).
    #[arg(long, value_enum, default_value_t = ImageBodies::Omit)]
    pub images: ImageBodies,
    /// Start URL to use instead of the profile's `start` (repeatable).
    #[arg(long, value_name = "URL")]
    pub start: Vec<String>,
}

/// What `scrape record` keeps of the images it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageBodies {
    Omit,
    Keep,
    Placeholder,
}

/// Testing profiles against their recordings.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Profiles to test; each replays its `[replay] recording` (default
    /// `../fixtures/<profile stem>/site.har` from the profile's folder) and compares with
    /// `expected.jsonl` beside the recording.
    #[arg(value_name = "PROFILE", required = true, num_args = 1..)]
    pub profiles: Vec<PathBuf>,
    /// Rewrite the expected files with what the replay found.
    #[arg(long)]
    pub update: bool,
}

/// Checking profiles.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Profiles to check.
    #[arg(short, long = "profile", value_name = "FILE", required = true, num_args = 1..)]
    pub profiles: Vec<PathBuf>,
}

/// Showing a job's state.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["profile", "out", "redis"]))]
pub struct StatusArgs {
    /// The profile whose output folder to inspect.
    #[arg(short, long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The output folder to inspect (overrides the profile's).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// The whole job its workers run over this Redis (`redis://HOST:PORT/DB`).
    #[arg(long, value_name = "URL", conflicts_with = "out")]
    pub redis: Option<String>,
    /// With --redis: the job (default: the profile's name, or the only job in that Redis).
    #[arg(long, value_name = "NAME", requires = "redis")]
    pub job: Option<String>,
}

/// Checking the stored files of a job.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The output folder whose files to check.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Queue the images whose files are missing or changed for download again (the next
    /// `scrape download --out DIR`, or run of the profile, fetches them).
    #[arg(long)]
    pub requeue: bool,
}

/// Signing in once and keeping the browser's state for the runs after.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The site profile: where to sign in (`[session.login] url`, else its first start URL)
    /// and where the state goes (`[session] storage_state`).
    #[arg(short, long, value_name = "FILE")]
    pub profile: PathBuf,
    /// No window: the browser fills and sends the `[session.login]` fields by itself.
    #[arg(long)]
    pub headless: bool,
    /// Write the state here instead of the profile's `storage_state` file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Counting a dataset's images by licence and creator.
#[derive(Debug, Args)]
pub struct LicensesArgs {
    /// The output folder whose `manifest.jsonl` to read.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// One JSON object (images, licenses, creators) instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Listing a job's image URLs.
#[derive(Debug, Args)]
pub struct UrlsArgs {
    /// The output folder whose state to list.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only the images in this state.
    #[arg(long, value_enum, default_value_t = UrlState::All)]
    pub state: UrlState,
    /// One JSON object per line (url, state, page, rule, attribute, metadata, run, found_at;
    /// path, sha256, bytes for stored and duplicate images; class, detail, attempts for failed
    /// ones) instead of `STATE<TAB>URL`.
    #[arg(long)]
    pub json: bool,
    /// Only the images the last run found (first found: new to the job then).
    #[arg(long)]
    pub new: bool,
}

/// Which images `scrape urls` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UrlState {
    /// Found, not downloaded yet.
    Pending,
    /// Downloaded, verified and stored.
    Stored,
    /// Failed (see `failures.jsonl`; `scrape retry` queues them again).
    Failed,
    /// The same bytes as an image stored under another URL.
    Duplicate,
    /// Every image.
    All,
}

/// Probing one page.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The site profile (TOML).
    #[arg(short, long, value_name = "FILE")]
    pub profile: PathBuf,
    /// The page to fetch; with --html, the URL the saved page came from (its base). For
    /// `json_cursor` profiles: the start URL whose API is asked (default: the first).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// `json_cursor` profiles paged by cursor: ask the API for the page after this cursor (a
    /// `next` line's) instead of the first. Page-numbered APIs take --page.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Apply the rules of level NAME (`[levels.NAME]`: its render mode, `[[images]]` and
    /// `[[follow]]` rules) to the page, as a run does to the pages a `[[follow]]` rule leads
    /// to, instead of the start pages' rules.
    #[arg(long, value_name = "NAME")]
    pub level: Option<String>,
    /// Read the page from this saved HTML file instead of fetching it (no network).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Page N of a numbered chain. `url_template` pagination: the number of the page at --url
    /// (default: the template's first). A page-numbered `json_cursor` API (`{page}` or
    /// `{offset}` in its request or body): ask for page N, with the offset the pages before it
    /// give.
    #[arg(long, value_name = "N", value_parser = page_number)]
    pub page: Option<i64>,
    /// Also save a PNG of the page as the browser rendered it (browser and auto profiles; for
    /// `json_cursor` ones, of the rendered start page).
    #[arg(long, value_name = "FILE", conflicts_with = "html")]
    pub screenshot: Option<PathBuf>,
    /// Also save the page's HTML as the run would read it: for a rendered page, the DOM after
    /// the profile's waits and actions (for `json_cursor` profiles, of the rendered start page).
    #[arg(long, value_name = "FILE", conflicts_with = "html")]
    pub save_html: Option<PathBuf>,
    /// Also save each JSON response of the rendered page that an `[[api]]` rule matches, as
    /// `DIR/001.json`, `DIR/002.json`, ... in request order; each is listed on stdout (one
    /// `{"kind":"captured"}` line). Browser and auto profiles.
    #[arg(long, value_name = "DIR", conflicts_with = "html")]
    pub save_json: Option<PathBuf>,
    /// The screenshot's height limit, in CSS pixels; a longer page is cut there.
    #[arg(
        long,
        value_name = "PX",
        default_value_t = 10_000,
        requires = "screenshot"
    )]
    pub screenshot_max_height: u32,
}

/// `--page`: an integer (which numbers a profile's pages is for probe to check).
fn page_number(text: &str) -> Result<i64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a page number"))
}

/// Printing the profile schema.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Write the schema to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Drafting a profile.
#[derive(Debug, Args)]
pub struct NewProfileArgs {
    /// A page of the site showing the images (a gallery page), `http://` or `https://`.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Write the draft to this file (default: stdout).
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The draft's `render` (default: `static` when the plain page already shows the images,
    /// else `browser`); `static` drafts without a browser.
    #[arg(long, value_enum, value_name = "MODE")]
    pub render: Option<DraftRender>,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Render the page until an element matching this CSS selector exists (as `[browser]
    /// wait_for`), instead of network idle; a browser draft keeps it.
    #[arg(long, value_name = "SELECTOR")]
    pub wait_for: Option<String>,
    /// The longest a render of the page may take, e.g. `90s` (as `[browser] page_timeout`;
    /// default 30s); a browser draft keeps it.
    #[arg(long, value_name = "DURATION")]
    pub page_timeout: Option<String>,
}

/// `render` for `new-profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DraftRender {
    Static,
    Browser,
    Auto,
}

/// Running the demo.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Output folder for the demo's images.
    #[arg(short, long, value_name = "DIR", default_value = "demo-output")]
    pub out: PathBuf,
    /// The demo site's files.
    #[arg(long, value_name = "DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo-site"))]
    pub site: PathBuf,
    /// The demo profile.
    #[arg(long, value_name = "FILE", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/site-profiles/demo.toml"))]
    pub profile: PathBuf,
    /// Forget earlier progress and start over.
    #[arg(long)]
    pub fresh: bool,
    /// Only serve the demo site (until Ctrl-C), for trying `probe` or a profile by hand.
    #[arg(long)]
    pub serve: bool,
    /// How to show progress.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Serve the run's Prometheus metrics at `http://ADDR/metrics`, e.g. `127.0.0.1:9898`
    /// (port 0: a free port; the address is printed at start).
    #[arg(long, value_name = "ADDR", conflicts_with = "serve")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// Downloading a URL list.
#[derive(Debug, Args)]
pub struct DownloadArgs {
    /// The URL list: .txt (one per line), .csv/.tsv (header row), .jsonl; .gz is read through.
    /// Without it, the images already queued in the output folder (by `scrape crawl`, or by an
    /// earlier run) are downloaded.
    #[arg(short = 'i', long, value_name = "FILE")]
    pub urls: Option<std::path::PathBuf>,
    /// Output folder (images, manifest.jsonl, failures.jsonl, .scrape/ state).
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// The URL column of a CSV/TSV list, or the URL field of a JSONL list.
    #[arg(long, value_name = "NAME", default_value = "url")]
    pub url_column: String,
    /// Take download settings from this profile's `[download]` table (flags still override).
    #[arg(short, long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Forget earlier progress in the output folder and start over.
    #[arg(long)]
    pub fresh: bool,
    #[command(flatten)]
    pub progress: ProgressArgs,
}

/// Retrying failed images.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The output folder of the job.
    #[arg(short, long, value_name = "DIR", required_unless_present = "redis")]
    pub out: Option<PathBuf>,
    /// Only failures of this class (repeatable), e.g. `timeout`, `http_503`, `not_an_image`;
    /// with --redis, `dead_letter` for the items its workers kept dying on.
    #[arg(long, value_name = "CLASS")]
    pub class: Vec<String>,
    /// A job run by workers over this Redis (`redis://HOST:PORT/DB`): its failed images and
    /// dead letters go back in its streams for its workers (`scrape worker`) to do again.
    #[arg(long, value_name = "URL", conflicts_with = "out")]
    pub redis: Option<String>,
    /// With --redis: the job (default: the only job this Redis holds).
    #[arg(long, value_name = "NAME", requires = "redis")]
    pub job: Option<String>,
    /// Take download settings from this profile's `[download]` table (flags still override).
    #[arg(short, long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub progress: ProgressArgs,
}

/// Download limits that override the profile's (or the defaults).
#[derive(Debug, Args, Clone, Default)]
pub struct LimitArgs {
    /// Parallel downloads in all, at most (default 256).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u64>,
    /// Parallel downloads per host, at most: the cap of each host's adaptive window (default 256).
    #[arg(long, value_name = "N")]
    pub per_host: Option<u64>,
    /// Time limit for connecting, e.g. `10s`.
    #[arg(long, value_name = "DURATION")]
    pub connect_timeout: Option<String>,
    /// Time limit for a whole download, e.g. `60s`.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Time limit until the response headers arrive, e.g. `30s`.
    #[arg(long, value_name = "DURATION")]
    pub first_byte_timeout: Option<String>,
    /// Slowest transfer accepted, per second over 10-second windows, e.g. `1KB` (0: any).
    #[arg(long, value_name = "SIZE")]
    pub min_speed: Option<String>,
    /// Request starts per second per host at most.
    #[arg(long, value_name = "RATE")]
    pub per_host_rps: Option<f64>,
    /// Attempts after the first for transient failures.
    #[arg(long, value_name = "N")]
    pub retries: Option<u64>,
    /// Largest file accepted, e.g. `50MB`.
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<String>,
    /// User-Agent header (replaces the profile's, contact included; its first word is the
    /// robots.txt token).
    #[arg(long, value_name = "TEXT")]
    pub user_agent: Option<String>,
    /// `obey` robots.txt (the default) or `ignore` it (with a warning), whatever the profile's
    /// `[politeness] robots` says.
    #[arg(long, value_name = "MODE")]
    pub robots: Option<RobotsArg>,
    /// Extra request header `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Image formats accepted, comma-separated (default: every raster format).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub formats: Vec<String>,
    /// Smallest width accepted, in pixels.
    #[arg(long, value_name = "PX")]
    pub min_width: Option<u32>,
    /// Smallest height accepted, in pixels.
    #[arg(long, value_name = "PX")]
    pub min_height: Option<u32>,
    /// Largest width x height accepted (decompression bombs).
    #[arg(long, value_name = "N")]
    pub max_pixels: Option<u64>,
    /// Output path template, e.g. `{shard}/{sha256}.{ext}`.
    #[arg(long, value_name = "TEMPLATE")]
    pub path: Option<String>,
    /// How images are laid out: `files` (the default), `webdataset` (tar shards with an index
    /// each) or `parquet` (files and `images.parquet`).
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Samples per WebDataset shard (default 10000).
    #[arg(long, value_name = "N")]
    pub shard_size: Option<u64>,
    /// Proxy for every request and the browser (repeatable, rotated): `http://host:port`,
    /// `https://`, `socks5://`, `socks5h://`. Replaces the profile's `[proxy]` list.
    #[arg(long = "proxy", value_name = "URL")]
    pub proxies: Vec<String>,
}

/// How progress is shown and reported, for the commands that run jobs.
#[derive(Debug, Args, Clone)]
pub struct ProgressArgs {
    /// How to show progress.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Interval of plain progress lines (when stderr is not a terminal).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub progress_interval: String,
    /// Serve the run's Prometheus metrics at `http://ADDR/metrics`, e.g. `127.0.0.1:9898`
    /// (port 0: a free port; the address is printed at start).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// `--robots`: obey robots.txt or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RobotsArg {
    Obey,
    Ignore,
}

/// Shell completions.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for, e.g. `scrape completions bash > /etc/bash_completion.d/scrape`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Manual pages.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `scrape.1` and one `scrape-COMMAND.1` per command into this folder instead of
    /// printing `scrape.1`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}
