//! WebDataset shards written by many workers at once. Each worker appends to a shard of its
//! own, numbered by the job, so shard names never collide and no file has two writers. The job
//! records how far each shard is committed together with every image placed in it; a worker
//! finishes its shard (end blocks, synced) when it is full and when the worker stops, and only
//! then gives it its final name. A shard whose worker died is finished by whoever finds it (a
//! worker starting, or the export): cut to what was committed, ended and renamed, as a
//! one-process run cuts its open shard after a crash.

use std::path::{Path, PathBuf};

use super::shards::{OpenShard, finish_rename, io_error, tmp_path};
use crate::state::{Held, Sample, ShardRecord, StateError, StoredFile};

/// One worker's open shard, if it has one.
pub struct OwnShard {
    out: PathBuf,
    shard_size: u64,
    open: Option<OpenShard>,
}

impl OwnShard {
    pub fn new(out: &Path, shard_size: u64) -> Self {
        Self {
            out: out.to_owned(),
            shard_size,
            open: None,
        }
    }

    /// The number of the open shard.
    pub fn number(&self) -> Option<u64> {
        self.open.as_ref().map(|s| s.record.shard)
    }

    /// Opens shard `number` (new, empty) for this worker's samples.
    pub fn open(&mut self, number: u64) -> Result<(), StateError> {
        let record = ShardRecord {
            shard: number,
            samples: 0,
            tar_bytes: 0,
            index_bytes: 0,
            finished: false,
        };
        self.open = Some(OpenShard::create(&self.out, record)?);
        Ok(())
    }

    /// Appends `body` to the open shard as the sample of `file` (whose path becomes the
    /// member's): the shard's record before the sample (what [`OwnShard::undo`] goes back to)
    /// and after it (what a commit records). Nothing is appended when the write fails.
    pub async fn append(
        &mut self,
        body: Held,
        file: &mut StoredFile,
        sample: Sample<'_>,
    ) -> Result<(ShardRecord, ShardRecord), StateError> {
        let Some(shard) = self.open.as_mut() else {
            return Err(StateError::Io {
                path: self.out.clone(),
                source: std::io::Error::other("no shard is open"),
            });
        };
        let before = shard.record.clone();
        let append = shard.place(body, file, sample, self.shard_size);
        let after = shard.record.clone();
        let written = tokio::task::spawn_blocking(move || {
            append.write().map_err(|(path, source)| StateError::Io {
                path: path.to_owned(),
                source,
            })
        })
        .await
        .map_err(|_| StateError::TaskLost)?;
        if let Err(e) = written {
            self.undo(before).await?;
            return Err(e);
        }
        Ok((before, after))
    }

    /// Takes the samples after `before` out of the open shard again (they were not
    /// committed).
    pub async fn undo(&mut self, before: ShardRecord) -> Result<(), StateError> {
        let Some(shard) = self.open.as_mut() else {
            return Ok(());
        };
        let files = std::sync::Arc::clone(&shard.files);
        let (tar, index) = (before.tar_bytes, before.index_bytes);
        shard.record = before;
        tokio::task::spawn_blocking(move || {
            files.tar.set_len(tar).map_err(io_error(&files.tar_path))?;
            files
                .index
                .set_len(index)
                .map_err(io_error(&files.index_path))
        })
        .await
        .map_err(|_| StateError::TaskLost)?
    }

    /// Whether the open shard holds its `shard_size` samples.
    pub fn is_full(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|s| s.record.samples >= self.shard_size)
    }

    /// Ends the open shard with its end blocks and syncs it: its record, finished, to commit
    /// before [`rename_finished`] makes it visible. `None` when no shard is open.
    pub async fn finish(&mut self) -> Result<Option<ShardRecord>, StateError> {
        let Some(shard) = self.open.take() else {
            return Ok(None);
        };
        let mut record = shard.record;
        let files = shard.files;
        let end = record.tar_bytes;
        tokio::task::spawn_blocking(move || {
            files.finish(end).map_err(|(path, source)| StateError::Io {
                path: path.to_owned(),
                source,
            })
        })
        .await
        .map_err(|_| StateError::TaskLost)??;
        record.tar_bytes += super::shards::END_OF_ARCHIVE.len() as u64;
        record.finished = true;
        Ok(Some(record))
    }
}

/// Gives finished shard `number` in `out` its final names (done already is fine).
pub fn rename_finished(out: &Path, number: u64) -> Result<(), StateError> {
    finish_rename(out, number)
}

/// Finishes the shard a worker left open when it died, as its `record` committed it: cut to
/// that length, ended, synced and renamed. Its finished record, to commit. A shard finished
/// already only gets its final name.
pub fn finish_orphan(out: &Path, record: ShardRecord) -> Result<ShardRecord, StateError> {
    if record.finished {
        finish_rename(out, record.shard)?;
        return Ok(record);
    }
    let mut record = record;
    let shard = OpenShard::reopen(out, record.clone())?;
    shard
        .files
        .finish(record.tar_bytes)
        .map_err(|(path, source)| StateError::Io {
            path: path.to_owned(),
            source,
        })?;
    record.tar_bytes += super::shards::END_OF_ARCHIVE.len() as u64;
    record.finished = true;
    Ok(record)
}

/// The shards of workers in `out` that are still open (`NNNNN.tar.tmp`), by number.
pub fn open_shards(out: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut numbers: Vec<u64> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?.strip_suffix(".tar.tmp")?.to_owned();
            (name.len() >= 5 && name.bytes().all(|b| b.is_ascii_digit()))
                .then(|| name.parse().ok())
                .flatten()
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

/// Removes open shard `number`'s files (a shard nothing was ever committed to).
pub fn remove_open(out: &Path, number: u64) -> Result<(), StateError> {
    for ext in ["tar", "jsonl"] {
        let path = tmp_path(out, number, ext);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StateError::Io { path, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ImageRecord, ImageStatus};

    fn file(n: u8) -> StoredFile {
        StoredFile {
            path: format!("ab/{n}.jpg"),
            sha256: format!("{n:064x}"),
            bytes: 600,
            content_type: "image/jpeg".into(),
            width: 1,
            height: 1,
            phash: None,
            near_duplicate_of: None,
            original: None,
        }
    }

    fn record() -> ImageRecord {
        ImageRecord {
            seq: 0,
            page: "http://a.test/".into(),
            rule: "r".into(),
            attribute: "src".into(),
            metadata: Default::default(),
            caption: None,
            rights: None,
            status: ImageStatus::Pending,
            attempts: 1,
            stored: None,
            failure: None,
            run: 0,
            stored_run: 0,
            validators: Default::default(),
            recheck: false,
        }
    }

    /// The names of the members of the tar at `path`, read to its end blocks.
    fn members(path: &Path) -> Vec<String> {
        let mut archive = tar::Archive::new(std::fs::File::open(path).unwrap());
        archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    async fn append(shard: &mut OwnShard, n: u8) -> (ShardRecord, ShardRecord, String) {
        let mut file = file(n);
        let body = Held {
            bytes: vec![n; 600].into(),
            permit: None,
        };
        let record = record();
        let sample = Sample {
            url: "http://a.test/i.jpg",
            record: &record,
        };
        let (before, after) = shard.append(body, &mut file, sample).await.unwrap();
        (before, after, file.path)
    }

    #[tokio::test]
    async fn a_sample_taken_back_leaves_the_shard_as_it_was_and_a_full_shard_finishes_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = OwnShard::new(dir.path(), 2);
        shard.open(4).unwrap();
        let (_, first, path) = append(&mut shard, 1).await;
        assert_eq!(path, "00004.tar/000040000.jpg");
        let (before, _, _) = append(&mut shard, 2).await;
        assert_eq!(before, first);
        shard.undo(before).await.unwrap();
        let tmp = dir.path().join("00004.tar.tmp");
        assert_eq!(std::fs::metadata(&tmp).unwrap().len(), first.tar_bytes);
        assert!(!shard.is_full());
        let (_, second, path) = append(&mut shard, 3).await;
        assert_eq!(
            path, "00004.tar/000040001.jpg",
            "the key taken back is given again"
        );
        assert!(shard.is_full());

        let finished = shard.finish().await.unwrap().unwrap();
        assert!(finished.finished);
        assert_eq!(finished.tar_bytes, second.tar_bytes + 1024);
        assert_eq!(shard.number(), None);
        rename_finished(dir.path(), 4).unwrap();
        let tar = dir.path().join("00004.tar");
        assert_eq!(std::fs::metadata(&tar).unwrap().len(), finished.tar_bytes);
        assert_eq!(
            members(&tar),
            [
                "000040000.jpg",
                "000040000.json",
                "000040001.jpg",
                "000040001.json"
            ]
        );
        let index = std::fs::read_to_string(dir.path().join("00004.jsonl")).unwrap();
        assert_eq!(index.lines().count(), 2);
    }

    #[tokio::test]
    async fn the_shard_of_a_worker_that_died_is_cut_to_its_commit_and_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = OwnShard::new(dir.path(), 10);
        shard.open(0).unwrap();
        let (_, committed, _) = append(&mut shard, 1).await;
        // Appended, never committed: the worker died before its commit.
        append(&mut shard, 2).await;
        drop(shard);
        // Another shard opened and left before anything was committed to it.
        let mut empty = OwnShard::new(dir.path(), 10);
        empty.open(1).unwrap();
        drop(empty);
        assert_eq!(open_shards(dir.path()), [0, 1]);

        let finished = finish_orphan(dir.path(), committed.clone()).unwrap();
        assert_eq!(finished.tar_bytes, committed.tar_bytes + 1024);
        rename_finished(dir.path(), 0).unwrap();
        remove_open(dir.path(), 1).unwrap();
        assert_eq!(open_shards(dir.path()), Vec::<u64>::new());
        assert_eq!(
            members(&dir.path().join("00000.tar")),
            ["000000000.jpg", "000000000.json"]
        );
        // Finishing it again (the export after a worker) changes nothing.
        assert_eq!(
            finish_orphan(dir.path(), finished.clone()).unwrap(),
            finished
        );
    }
}
