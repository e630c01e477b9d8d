//! File placement: a verified part file gets its final name in the output folder.
//!
//! [`Files`] is the state writer's [`Placement`]: it is called in the thread that records the
//! file as stored, so a file under a final name is always complete and recorded.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::state::{Payload, Placement, STATE_DIR, Sample, StateError, StoredFile};

/// Files under the output folder, at the paths the profile's `path` template gave them.
pub struct Files {
    out: PathBuf,
    /// Where a body handed over in memory is written before it is renamed into place: one file
    /// beside the part files (the writer places one body at a time), so a kill never leaves a
    /// stray file in the output folder.
    staging: PathBuf,
    /// Folders known to exist under `out`, so each is created once, not once per file.
    folders: HashSet<PathBuf>,
}

impl Files {
    pub fn new(out: &Path) -> Self {
        Self {
            out: out.to_owned(),
            staging: out.join(STATE_DIR).join("parts").join("placing.part"),
            folders: HashSet::new(),
        }
    }
}

impl Placement for Files {
    fn place(
        &mut self,
        body: Payload,
        file: &mut StoredFile,
        _sample: Sample<'_>,
    ) -> Result<(), StateError> {
        let target = self.out.join(&file.path);
        let placed = match body {
            Payload::Part(part) => place(&part, &target, &mut self.folders),
            Payload::Memory(held) => {
                place_bytes(&held.bytes, &self.staging, &target, &mut self.folders)
            }
        };
        placed.map_err(|e| StateError::Io {
            path: e.path,
            source: e.source,
        })
    }
}

/// A part file that could not be given its final name.
#[derive(Debug, thiserror::Error)]
#[error("cannot write `{path}`")]
pub struct PlaceError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Moves a verified part file to its final name, creating its folder (remembered in
/// `folders`, so a folder is created once per run). Renaming within one file system is
/// atomic: the final name never holds a partial file. On failure the part file is removed.
pub fn place(part: &Path, target: &Path, folders: &mut HashSet<PathBuf>) -> Result<(), PlaceError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| PlaceError { path, source }
    };
    let placed = match target.parent() {
        Some(dir) if !folders.contains(dir) => {
            std::fs::create_dir_all(dir).map_err(io(dir)).map(|()| {
                folders.insert(dir.to_owned());
            })
        }
        _ => Ok(()),
    }
    .and_then(|()| std::fs::rename(part, target).map_err(io(target)));
    placed.inspect_err(|_| {
        let _ = std::fs::remove_file(part);
    })
}

/// Writes `bytes` to `target` through the part file `staging` (on the same file system),
/// renamed into place once whole, so the final name never holds a partial file.
pub fn place_bytes(
    bytes: &[u8],
    staging: &Path,
    target: &Path,
    folders: &mut HashSet<PathBuf>,
) -> Result<(), PlaceError> {
    if let Some(dir) = staging.parent().filter(|dir| !folders.contains(*dir)) {
        std::fs::create_dir_all(dir).map_err(|source| PlaceError {
            path: dir.to_owned(),
            source,
        })?;
        folders.insert(dir.to_owned());
    }
    std::fs::write(staging, bytes)
        .map_err(|source| {
            let _ = std::fs::remove_file(staging);
            PlaceError {
                path: staging.to_owned(),
                source,
            }
        })
        .and_then(|()| place(staging, target, folders))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_file_is_renamed_into_a_new_folder_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut folders = HashSet::new();
        for name in ["a", "b"] {
            let part = dir.path().join(format!("{name}.part"));
            std::fs::write(&part, name).unwrap();
            let target = dir.path().join("abc").join(format!("{name}.jpg"));
            place(&part, &target, &mut folders).unwrap();
            assert_eq!(std::fs::read_to_string(&target).unwrap(), name);
            assert!(!part.exists());
        }
        assert_eq!(folders.len(), 1);
    }

    #[test]
    fn bytes_in_memory_are_placed_whole_with_no_part_file_left() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("parts").join("placing.part");
        let target = dir.path().join("abc").join("x.jpg");
        place_bytes(b"xyz", &staging, &target, &mut HashSet::new()).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"xyz");
        assert_eq!(
            std::fs::read_dir(dir.path().join("abc")).unwrap().count(),
            1
        );
        assert_eq!(
            std::fs::read_dir(dir.path().join("parts")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_failed_rename_removes_the_part_file_and_names_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("x.part");
        std::fs::write(&part, "x").unwrap();
        // The target's folder is a file: the rename cannot succeed.
        std::fs::write(dir.path().join("taken"), "").unwrap();
        let target = dir.path().join("taken").join("x.jpg");
        let error = place(&part, &target, &mut HashSet::new()).unwrap_err();
        assert_eq!(error.path, dir.path().join("taken"));
        assert!(!part.exists());
    }
}
