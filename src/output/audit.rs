//! Stored files checked against the state (`scrape verify`): each file the state says is stored
//! is read again, from the output folder or the bucket ([`Stored`]), and must have the recorded
//! size and SHA-256.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::bucket::Bucket;
use super::manifest::file_problem;
use super::shards;
use futures_util::StreamExt;

use crate::state::{ImageRecord, ImageStatus, State, StateError, StoredFile};

/// Where the stored files are read back from.
pub enum Stored<'a> {
    Folder(&'a Path),
    /// Objects of a bucket, read on `runtime` (from a thread off it); a shard is fetched into
    /// `scratch` to be read.
    Bucket {
        bucket: &'a Bucket,
        runtime: tokio::runtime::Handle,
        scratch: &'a Path,
    },
}

impl Stored<'_> {
    /// What is wrong with the stored file at `path` of a folder, which should have `bytes`
    /// bytes and SHA-256 `sha256`.
    fn file_problem(&self, path: &str, bytes: u64, sha256: &str) -> Option<String> {
        let Stored::Folder(out) = self else {
            return Some(format!("stored object `{path}` was not read"));
        };
        if let Some(problem) = file_problem(out, path, Some(bytes)) {
            return Some(problem);
        }
        let found = sha256_of(&out.join(path)).map_err(|e| e.to_string());
        compare(path, bytes, sha256, found.map(|hash| (bytes, hash)))
    }

    /// Objects of a bucket: what is wrong with each stored file of `state` (not a shard's
    /// sample), every object read back, [`OBJECTS_IN_FLIGHT`] at a time. Nothing for a folder,
    /// whose files are read one by one as they come.
    fn object_problems(
        &self,
        state: &State,
    ) -> Result<HashMap<String, Option<String>>, StateError> {
        let Stored::Bucket {
            bucket, runtime, ..
        } = self
        else {
            return Ok(HashMap::new());
        };
        let mut files: HashMap<String, (u64, String)> = HashMap::new();
        state.for_each_image(|_, record| {
            if let Some(file) = audited(record).filter(|f| shards::member_of(&f.path).is_none()) {
                files
                    .entry(file.path.clone())
                    .or_insert_with(|| (file.bytes, file.sha256.clone()));
            }
            Ok(())
        })?;
        let checks = files.into_iter().map(|(path, (bytes, sha256))| async move {
            let found = match bucket.hash(&path).await {
                Ok(Some(found)) => Ok(found),
                Ok(None) => {
                    return (
                        path.clone(),
                        Some(format!("stored object `{path}` is gone")),
                    );
                }
                Err(e) => Err(crate::failure::error_chain(&e)),
            };
            let problem = compare(&path, bytes, &sha256, found);
            (path, problem)
        });
        Ok(runtime.block_on(
            futures_util::stream::iter(checks)
                .buffer_unordered(OBJECTS_IN_FLIGHT)
                .collect(),
        ))
    }

    /// The members of shard `shard` with their sizes and hashes, or why they cannot be read.
    fn shard_members(&self, shard: &str) -> Members {
        match self {
            Stored::Folder(out) => read_members(out, shard),
            Stored::Bucket {
                bucket,
                runtime,
                scratch,
            } => {
                let copy = scratch.join(shard);
                let fetched = runtime.block_on(bucket.fetch_to(shard, &copy));
                let members = match fetched {
                    Ok(true) => shards::hash_members(&copy)
                        .map_err(|e| format!("shard `{shard}` cannot be read: {e}")),
                    Ok(false) => Err(format!("shard `{shard}` is gone")),
                    Err(e) => Err(format!(
                        "shard `{shard}` cannot be read: {}",
                        crate::failure::error_chain(&e)
                    )),
                };
                let _ = std::fs::remove_file(&copy);
                members
            }
        }
    }
}

/// Objects of a bucket read back at once.
const OBJECTS_IN_FLIGHT: usize = 16;

/// The stored file of `record` that the audit checks: a stored image's or a duplicate's. A
/// dropped near-duplicate names the earlier picture's file, audited by its own record.
fn audited(record: &ImageRecord) -> Option<&StoredFile> {
    let file = record.stored.as_ref()?;
    let stored = matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate);
    (stored && !file.is_dropped_near_duplicate()).then_some(file)
}

/// What is wrong with the stored file at `path` (`bytes` bytes, SHA-256 `sha256`), as `found`
/// (size and SHA-256, or why it could not be read).
fn compare(
    path: &str,
    bytes: u64,
    sha256: &str,
    found: Result<(u64, String), String>,
) -> Option<String> {
    match found {
        Ok((size, _)) if size != bytes => Some(format!(
            "stored file `{path}` has {size} bytes, not {bytes}"
        )),
        Ok((_, hash)) if hash == sha256 => None,
        Ok((_, hash)) => Some(format!(
            "stored file `{path}` has SHA-256 {hash}, not {sha256}"
        )),
        Err(e) => Some(format!("stored file `{path}` cannot be read: {e}")),
    }
}

/// A stored image whose file is not what the state recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub url: String,
    /// Relative to the output folder.
    pub path: String,
    pub problem: String,
}

/// What [`audit`] found.
#[derive(Debug, Default)]
pub struct Audit {
    /// Images whose stored bytes were checked (duplicates included).
    pub images_checked: u64,
    /// Image files read and hashed (a file shared by duplicates once).
    pub files_checked: u64,
    /// WebDataset shards read, each member hashed.
    pub shards_checked: u64,
    pub mismatches: Vec<Mismatch>,
}

impl Audit {
    /// What was checked, for people: `20000 image(s) in 7 shard(s)`.
    pub fn checked(&self) -> String {
        let mut held = Vec::new();
        if self.files_checked > 0 || self.shards_checked == 0 {
            held.push(format!("{} file(s)", self.files_checked));
        }
        if self.shards_checked > 0 {
            held.push(format!("{} shard(s)", self.shards_checked));
        }
        format!("{} image(s) in {}", self.images_checked, held.join(" and "))
    }
}

/// Re-hashes every stored file of `state` under `out`. A file several URLs share (duplicates)
/// is read once and its verdict applies to each of them.
pub fn audit(state: &State, stored: &Stored<'_>) -> Result<Audit, StateError> {
    // A bucket's objects are read back all at once, before the pass below looks them up.
    let mut verdicts: HashMap<String, Option<String>> = stored.object_problems(state)?;
    // Each shard is read once, its members hashed: shard name -> member -> (size, SHA-256).
    let mut shard_members: HashMap<String, Members> = HashMap::new();
    let mut audit = Audit {
        files_checked: verdicts.len() as u64,
        ..Audit::default()
    };
    state.for_each_image(|url, record| {
        let Some(file) = audited(record) else {
            return Ok(());
        };
        audit.images_checked += 1;
        let verdict = verdicts.entry(file.path.clone()).or_insert_with(|| {
            if let Some((shard, member)) = shards::member_of(&file.path) {
                let members = shard_members.entry(shard.to_owned()).or_insert_with(|| {
                    audit.shards_checked += 1;
                    stored.shard_members(shard)
                });
                return member_problem(members, &file.path, member, file.bytes, &file.sha256);
            }
            audit.files_checked += 1;
            stored.file_problem(&file.path, file.bytes, &file.sha256)
        });
        if let Some(problem) = verdict {
            audit.mismatches.push(Mismatch {
                url: url.to_owned(),
                path: file.path.clone(),
                problem: problem.clone(),
            });
        }
        Ok(())
    })?;
    Ok(audit)
}

/// A shard's members with their sizes and hashes, or why it cannot be read.
type Members = Result<HashMap<String, (u64, String)>, String>;

fn read_members(out: &Path, shard: &str) -> Members {
    let path = shards::shard_file(out, shard).ok_or_else(|| format!("shard `{shard}` is gone"))?;
    shards::hash_members(&path).map_err(|e| format!("shard `{shard}` cannot be read: {e}"))
}

/// What is wrong with sample `path` (`member` of a shard whose members are `members`), which
/// should have `bytes` bytes hashing to `sha256`.
fn member_problem(
    members: &Members,
    path: &str,
    member: &str,
    bytes: u64,
    sha256: &str,
) -> Option<String> {
    match members {
        Err(problem) => Some(problem.clone()),
        Ok(members) => match members.get(member) {
            None => Some(format!("stored sample `{path}` is not in its shard")),
            Some((size, _)) if *size != bytes => Some(format!(
                "stored sample `{path}` has {size} bytes, not {bytes}"
            )),
            Some((_, hash)) if hash != sha256 => Some(format!(
                "stored sample `{path}` has SHA-256 {hash}, not {sha256}"
            )),
            Some(_) => None,
        },
    }
}

/// The hex SHA-256 of the file at `path`, read in blocks.
fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0; 256 * 1024];
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
