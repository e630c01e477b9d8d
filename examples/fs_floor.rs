//! The file-system floor of the download stage: how many image files per second this machine
//! can create with the layout `scrape download` uses, without any network or hashing.
//!
//!     cargo run --release --example fs_floor -- [FILES] [BYTES] [THREADS] [DIR]
//!
//! Two passes over fresh folders under DIR (default: a temporary folder):
//! - `direct`: create `{shard}/{name}.jpg` and write the body (the least any tool must do);
//! - `part+rename`: write `parts/{xx}/{n}.part`, then rename it to `{shard}/{name}.jpg` (what
//!   scrape does, so a final name never holds a partial file).
//!
//! Threads stand in for the blocking pool; the rename is done by the writing thread here.
//! Compare its rate with `bench/download.sh` to see how much of the stage's time is the
//! file system's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const PART_FOLDERS: u64 = 64;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| -> u64 {
        args.get(i)
            .map(|a| {
                a.parse()
                    .unwrap_or_else(|_| panic!("`{a}` is not a number"))
            })
            .unwrap_or(default)
    };
    let files = number(0, 20_000);
    let bytes = number(1, 31_000) as usize;
    let threads = number(2, 2);
    let temp = tempfile::tempdir_in(args.get(3).map_or_else(std::env::temp_dir, PathBuf::from))?;
    let body: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
    println!(
        "{files} files of {bytes} bytes, {threads} threads, in {}",
        temp.path().display()
    );
    for (label, way) in [("direct", Way::Direct), ("part+rename", Way::PartRename)] {
        let root = temp.path().join(label.replace('+', "-"));
        for folder in 0..PART_FOLDERS {
            std::fs::create_dir_all(root.join("parts").join(format!("{folder:02x}")))?;
        }
        let started = Instant::now();
        std::thread::scope(|scope| -> std::io::Result<()> {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (root, body) = (&root, &body);
                    scope.spawn(move || write_files(root, body, t, threads, files, way))
                })
                .collect();
            for worker in workers {
                worker.join().expect("writer thread panicked")?;
            }
            Ok(())
        })?;
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{label:>12}: {:.0} files/s ({seconds:.2} s)",
            files as f64 / seconds
        );
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Way {
    Direct,
    PartRename,
}

/// Writes every `threads`-th file starting at `first`.
fn write_files(
    root: &Path,
    body: &[u8],
    first: u64,
    threads: u64,
    files: u64,
    way: Way,
) -> std::io::Result<()> {
    let mut made = std::collections::HashSet::new();
    for n in (first..files).step_by(threads as usize) {
        // A name spread like a content hash: shard folders fill evenly.
        let name = format!("{:016x}{:048x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15), n);
        let shard = root.join(&name[..3]);
        if made.insert(shard.clone()) {
            std::fs::create_dir_all(&shard)?;
        }
        let target = shard.join(format!("{name}.jpg"));
        match way {
            Way::Direct => std::fs::File::create(&target)?.write_all(body)?,
            Way::PartRename => {
                let part = root
                    .join("parts")
                    .join(format!("{:02x}", n % PART_FOLDERS))
                    .join(format!("{n}.part"));
                std::fs::File::create(&part)?.write_all(body)?;
                std::fs::rename(&part, &target)?;
            }
        }
    }
    Ok(())
}
