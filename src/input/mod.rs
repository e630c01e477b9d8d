//! Import: a URL list read into the state in batches, each batch committed with the list's
//! checkpoint, so an interrupted import continues at the next unread line.

pub mod urllist;

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::state::{ImportCheckpoint, ImportCommit, NewImage, State, StateError, WriterHandle};
use urllist::{ListError, SkipReason, UrlList};

/// URLs committed per transaction, at most.
const BATCH: usize = 5_000;
/// The first batch's size; each next one is twice as large, up to [`BATCH`]: downloads start
/// as soon as the first few URLs are stored, not after a whole batch.
const FIRST_BATCH: usize = 256;

/// Why a list could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    List(#[from] ListError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// Reads `path` (URLs in `column` for CSV/TSV/JSONL) into the state, from where an earlier
/// import of the same, unchanged file stopped. Returns the list's final checkpoint.
pub async fn import_list(
    path: &Path,
    column: &str,
    state: &State,
    writer: &WriterHandle,
    cancel: &CancellationToken,
) -> Result<ImportCheckpoint, ImportError> {
    let key = path.display().to_string();
    let (file_bytes, file_modified) = file_identity(path)?;
    let previous = {
        let (state, key) = (state.clone(), key.clone());
        tokio::task::spawn_blocking(move || state.import(&key))
            .await
            .map_err(|_| StateError::TaskLost)??
    };
    let mut checkpoint = match previous {
        Some(c) if c.file_bytes == file_bytes && c.file_modified == file_modified => c,
        // A new or changed list is read from the top; URLs already known count as duplicates.
        _ => ImportCheckpoint {
            file_bytes,
            file_modified,
            ..ImportCheckpoint::default()
        },
    };
    if checkpoint.complete {
        return Ok(checkpoint);
    }
    let list = UrlList::open(path, column)?;
    let skip = checkpoint.lines_done;
    let (tx, mut rx) = mpsc::channel::<Result<Batch, ListError>>(2);
    let reader = tokio::task::spawn_blocking(move || read_batches(list, skip, tx));
    while let Some(batch) = rx.recv().await {
        if cancel.is_cancelled() {
            break;
        }
        let batch = batch?;
        let offered = batch.images.len() as u64;
        checkpoint.lines_done = batch.last_line;
        for reason in batch.skipped {
            *checkpoint.skipped.entry(reason.to_owned()).or_default() += 1;
        }
        checkpoint.complete = batch.last;
        // The writer counts this batch into the checkpoint it commits; count it here too.
        let new = writer
            .commit_import(ImportCommit {
                list: key.clone(),
                images: batch.images,
                checkpoint: checkpoint.clone(),
            })
            .await?;
        checkpoint.count_batch(offered, new);
    }
    drop(rx);
    let _ = reader.await;
    Ok(checkpoint)
}

struct Batch {
    images: Vec<NewImage>,
    skipped: Vec<&'static str>,
    last_line: u64,
    last: bool,
}

fn read_batches(list: UrlList, skip: u64, tx: mpsc::Sender<Result<Batch, ListError>>) {
    let mut size = FIRST_BATCH;
    let mut batch = Batch {
        images: Vec::with_capacity(size),
        skipped: Vec::new(),
        last_line: skip,
        last: false,
    };
    let mut count = 0u64;
    for item in list {
        count += 1;
        if count <= skip {
            continue;
        }
        match item {
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
            Ok(Ok(entry)) => batch.images.push(NewImage {
                url: entry.url,
                rule: "list".into(),
                attribute: format!("line {}", entry.line),
                // A list's `caption` column, as img2dataset's `caption_col` reads it.
                caption: entry
                    .metadata
                    .get("caption")
                    .and_then(|c| crate::extract::caption_text(c)),
                rights: None,
                metadata: entry.metadata,
            }),
            Ok(Err(skipped)) => {
                match skipped.reason {
                    // Damage to the list itself: said once each, where it is.
                    SkipReason::NotUtf8 | SkipReason::TooLong | SkipReason::OpenQuote => {
                        tracing::warn!(line = skipped.line, reason = skipped.reason.as_str(), text = %skipped.text, "skipped list line");
                    }
                    _ => {
                        tracing::debug!(line = skipped.line, reason = skipped.reason.as_str(), text = %skipped.text, "skipped list line");
                    }
                }
                batch.skipped.push(skipped.reason.as_str());
            }
        }
        batch.last_line = count;
        if batch.images.len() + batch.skipped.len() >= size {
            size = (size * 2).min(BATCH);
            let full = std::mem::replace(
                &mut batch,
                Batch {
                    images: Vec::with_capacity(size),
                    skipped: Vec::new(),
                    last_line: count,
                    last: false,
                },
            );
            if tx.blocking_send(Ok(full)).is_err() {
                return;
            }
        }
    }
    batch.last = true;
    let _ = tx.blocking_send(Ok(batch));
}

fn file_identity(path: &Path) -> Result<(u64, u64), ListError> {
    let meta = std::fs::metadata(path).map_err(|source| ListError::Io {
        path: PathBuf::from(path),
        source,
    })?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    Ok((meta.len(), modified))
}
