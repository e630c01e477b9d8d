//! Files on a folder many workers share: a verified part file is moved to a temporary name in
//! its final folder, then linked to its final name without ever replacing a file there.
//!
//! Names are content-addressed by default (`{shard}/{sha256}.{ext}`), so two workers storing
//! the same bytes race for one name: the first link wins and the second finds the same bytes
//! under it. A file under a final name is always complete (a hard link is atomic).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What became of a part file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Linked to its final name.
    New,
    /// The final name already held these bytes (another worker, or an earlier delivery).
    AlreadyThere,
}

/// Why a part file could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The final name holds other bytes: the path template does not name files by content.
    #[error("`{path}` already holds other bytes")]
    Taken { path: PathBuf },
}

/// Stores `part` (whose SHA-256 is `sha256`) as `out/path`, create-only; `part` is gone after.
/// `temp_tag` makes the temporary name unique to the caller (worker and entry).
pub fn store_create_only(
    part: &Path,
    out: &Path,
    path: &str,
    sha256: &str,
    temp_tag: &str,
) -> Result<Stored, StoreError> {
    let target = out.join(path);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| StoreError::Io { path, source }
    };
    let folder = target.parent().unwrap_or(out);
    std::fs::create_dir_all(folder).map_err(io(folder))?;
    // Same folder as the target: the link never crosses file systems, even when the parts
    // folder is on another mount of a network share.
    let temp = folder.join(format!(".{temp_tag}.tmp"));
    let moved = std::fs::rename(part, &temp).map_err(io(&temp));
    if let Err(e) = moved {
        let _ = std::fs::remove_file(part);
        return Err(e);
    }
    let linked = std::fs::hard_link(&temp, &target);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(Stored::New),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match file_sha256(&target) {
            Ok(existing) if existing == sha256 => Ok(Stored::AlreadyThere),
            Ok(_) => Err(StoreError::Taken { path: target }),
            Err(source) => Err(StoreError::Io {
                path: target,
                source,
            }),
        },
        Err(source) => Err(StoreError::Io {
            path: target,
            source,
        }),
    }
}

/// The SHA-256 of a file, in lowercase hex.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn a_part_file_is_linked_to_its_final_name_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("1.part");
        std::fs::write(&part, b"abc").unwrap();
        let stored = store_create_only(&part, dir.path(), "a/b.jpg", &sha(b"abc"), "w1-1").unwrap();
        assert_eq!(stored, Stored::New);
        assert_eq!(std::fs::read(dir.path().join("a/b.jpg")).unwrap(), b"abc");
        assert!(!part.exists());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("a")).unwrap().collect();
        assert_eq!(left.len(), 1, "only the final file stays");
    }

    #[test]
    fn the_same_bytes_stored_twice_keep_the_first_file() {
        let dir = tempfile::tempdir().unwrap();
        for (tag, expected) in [("w1-1", Stored::New), ("w2-1", Stored::AlreadyThere)] {
            let part = dir.path().join(format!("{tag}.part"));
            std::fs::write(&part, b"same").unwrap();
            let stored = store_create_only(&part, dir.path(), "x.jpg", &sha(b"same"), tag).unwrap();
            assert_eq!(stored, expected);
            assert!(!part.exists());
        }
        assert_eq!(std::fs::read(dir.path().join("x.jpg")).unwrap(), b"same");
    }

    #[test]
    fn other_bytes_never_replace_a_stored_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.jpg"), b"first").unwrap();
        let part = dir.path().join("p.part");
        std::fs::write(&part, b"second").unwrap();
        let error =
            store_create_only(&part, dir.path(), "x.jpg", &sha(b"second"), "w").unwrap_err();
        assert!(matches!(error, StoreError::Taken { .. }), "{error}");
        assert_eq!(std::fs::read(dir.path().join("x.jpg")).unwrap(), b"first");
    }
}
