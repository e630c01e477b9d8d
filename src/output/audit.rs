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
use crate::state::{ImageStatus, State, StateError};

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
    /// What is wrong with the stored file at `path`, which should have `bytes` bytes and
    /// SHA-256 `sha256`.
    fn file_problem(&self, path: &str, bytes: u64, sha256: &str) -> Option<String> {
        let found = match self {
            Stored::Folder(out) => {
                if let Some(problem) = file_problem(out, path, Some(bytes)) {
                    return Some(problem);
                }
                sha256_of(&out.join(path)).map(|hash| (bytes, hash))
            }
            Stored::Bucket {
                bucket, runtime, ..
            } => match runtime.block_on(bucket.hash(path)) {
                Ok(Some(found)) => Ok(found),
                Ok(None) => return Some(format!("stored object `{path}` is gone")),
                Err(e) => Err(std::io::Error::other(crate::failure::error_chain(&e))),
            },
        };
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
    let mut verdicts: HashMap<String, Option<String>> = HashMap::new();
    // Each shard is read once, its members hashed: shard name -> member -> (size, SHA-256).
    let mut shard_members: HashMap<String, Members> = HashMap::new();
    let mut audit = Audit::default();
    state.for_each_image(|url, record| {
        let Some(file) = &record.stored else {
            return Ok(());
        };
        // A dropped near-duplicate names the earlier picture's file, audited by its own record.
        if !matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate)
            || file.is_dropped_near_duplicate()
        {
            return Ok(());
        }
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
