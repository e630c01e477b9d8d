//! A large state database made through the real import and the real state writer, for
//! `bench/state-open.sh`: the job `scrape download --urls LIST --out OUT` would have after
//! downloading every URL of LIST, without any network or image file.
//!
//!     cargo run --release --example state_fill -- LIST OUT [IMAGES] [STORED_PERCENT]
//!     cargo run --release --example state_fill -- --measure OUT
//!
//! Writes LIST (IMAGES URLs, default 1,000,000, on a closed loopback port), imports it into
//! OUT's state as `scrape download` does (`input::import_list`), then hands the writer one
//! result per image: STORED_PERCENT (default 90) of them stored, each with a content hash of
//! its own (the part file is never written: the placement here records the file and moves
//! nothing), the others failed with `http_404`. The run is marked finished, as a download that
//! ended would leave it. Prints how long each step took and the database's size.
//!
//! Stored images point at files that do not exist: a rerun lists them as `missing`.
//!
//! `--measure OUT` times what opening OUT's state costs: redb's open alone, then its
//! `check_integrity` (every page read and its checksum verified), which `scrape` runs at open.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use scrape::state::{
    DownloadResult, FailureRecord, Payload, Placement, Sample, State, StateError, StateWriter,
    StoredFile,
};
use tokio_util::sync::CancellationToken;

/// The job name `scrape download --urls` keeps in the state.
const LIST_JOB: &str = "download";

/// Records the stored file where it is said to be; moves nothing.
struct Nowhere;

impl Placement for Nowhere {
    fn place(
        &mut self,
        _body: Payload,
        _file: &mut StoredFile,
        _sample: Sample<'_>,
    ) -> Result<(), StateError> {
        Ok(())
    }
}

/// Times redb's open and its integrity check on the state of `out`.
fn measure(out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use redb::ReadableDatabase as _;
    let path = State::path_for(out);
    let started = Instant::now();
    let mut db = redb::Database::open(&path)?;
    let opened = started.elapsed();
    let started = Instant::now();
    let clean = db.check_integrity()?;
    let checked = started.elapsed();
    drop(db.begin_read()?);
    println!(
        "open: {:.3} s; check_integrity: {:.3} s (clean: {clean}) for {} MB",
        opened.as_secs_f64(),
        checked.as_secs_f64(),
        std::fs::metadata(&path)?.len() / 1_000_000
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let (Some("--measure"), Some(out)) = (args.first().map(String::as_str), args.get(1)) {
        return measure(Path::new(out));
    }
    let (Some(list), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("usage: state_fill LIST OUT [IMAGES] [STORED_PERCENT]");
        std::process::exit(2);
    };
    let (list, out) = (PathBuf::from(list), PathBuf::from(out));
    let images: u64 = args.get(2).map_or(Ok(1_000_000), |a| a.parse())?;
    let stored_percent: u64 = args.get(3).map_or(Ok(90), |a| a.parse())?;

    let started = Instant::now();
    let mut file = std::io::BufWriter::new(std::fs::File::create(&list)?);
    for i in 0..images {
        writeln!(file, "http://127.0.0.1:9/img/{:02x}/{i:08}.jpg", i % 256)?;
    }
    file.flush()?;
    drop(file);
    println!("list: {images} URLs in {:.1?}", started.elapsed());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        std::fs::create_dir_all(&out)?;
        let state = State::open(&out, LIST_JOB, None)?;
        let cancel = CancellationToken::new();
        let (writer, thread) = StateWriter::start(&state, Box::new(Nowhere), None, cancel.clone())?;

        let started = Instant::now();
        let checkpoint = scrape::input::import_list(&list, "url", &state, &writer, &cancel).await?;
        writer.flush().await?;
        println!(
            "import: {} images in {:.1?}",
            checkpoint.added,
            started.elapsed()
        );

        let started = Instant::now();
        let mut from = 0;
        loop {
            let pending = state.pending_from(from, 10_000)?;
            let Some((last, _)) = pending.last() else {
                break;
            };
            from = last + 1;
            for (seq, url) in pending {
                let result = if seq % 100 < stored_percent {
                    let sha256 = format!("{:064x}", u128::from(seq) * 0x9E37_79B9_7F4A_7C15);
                    DownloadResult::Stored {
                        url,
                        part: out.join(".scrape/parts/none.part"),
                        file: StoredFile {
                            path: format!("{}/{sha256}.jpg", &sha256[..3]),
                            sha256,
                            bytes: 30_000 + seq % 50_000,
                            content_type: "image/jpeg".to_owned(),
                            width: 640,
                            height: 480,
                            phash: None,
                            near_duplicate_of: None,
                            original: None,
                        },
                        held: None,
                        validators: Default::default(),
                        embedded: Default::default(),
                        attempts: 1,
                    }
                } else {
                    DownloadResult::Failed {
                        url,
                        failure: FailureRecord {
                            class: "http_404".to_owned(),
                            detail: "HTTP 404".to_owned(),
                        },
                        attempts: 1,
                    }
                };
                writer.finish_download(result).await?;
            }
        }
        writer.seal().await?;
        drop(writer);
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        state.mark_run_finished()?;
        let counters = state.counters()?;
        println!(
            "downloads: {} done, {} pending in {:.1?}",
            counters.done(),
            counters.pending(),
            started.elapsed()
        );
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    let bytes = std::fs::metadata(State::path_for(&out))?.len();
    println!(
        "state: {} MB at {}",
        bytes / 1_000_000,
        State::path_for(&out).display()
    );
    Ok(())
}
