//! The beacon's data directory: an exclusive lock, and the highest term seen.
//!
//! The term is stored before it is announced, so a beacon that crashes and restarts never
//! announces a term lower than one it already sent out.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "LOCK";
const TERM_FILE: &str = "term";

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("data_dir {path}: {what}: {cause}")]
    Io {
        path: PathBuf,
        what: &'static str,
        cause: std::io::Error,
    },
    #[error("data_dir {0} is in use by another beacon process (its LOCK file is held)")]
    Locked(PathBuf),
    #[error("data_dir {path}: file `term` is corrupt ({content:?}); refusing to guess a term")]
    CorruptTerm { path: PathBuf, content: String },
}

/// An opened, locked data directory. The lock is held until this is dropped.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates `path` if needed and takes its lock.
    pub fn open(path: &Path) -> Result<DataDir, DataDirError> {
        let io = |what| {
            move |cause| DataDirError::Io {
                path: path.to_owned(),
                what,
                cause,
            }
        };
        fs::create_dir_all(path).map_err(io("cannot create"))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path.join(LOCK_FILE))
            .map_err(io("cannot open LOCK"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(DataDirError::Locked(path.into())),
            Err(fs::TryLockError::Error(e)) => return Err(io("cannot lock LOCK")(e)),
        }
        Ok(DataDir {
            path: path.to_owned(),
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored term, 0 if none was ever stored.
    pub fn load_term(&self) -> Result<u64, DataDirError> {
        let file = self.path.join(TERM_FILE);
        match fs::read_to_string(&file) {
            Ok(text) => text.trim().parse().map_err(|_| DataDirError::CorruptTerm {
                path: self.path.clone(),
                content: text,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(cause) => Err(DataDirError::Io {
                path: self.path.clone(),
                what: "cannot read term",
                cause,
            }),
        }
    }

    /// Durably replaces the stored term: write a temporary file, fsync, rename over, fsync
    /// the directory, so a crash leaves either the old or the new value, never a torn one.
    pub fn store_term(&self, term: u64) -> Result<(), DataDirError> {
        let io = |what| {
            move |cause| DataDirError::Io {
                path: self.path.clone(),
                what,
                cause,
            }
        };
        let tmp = self.path.join("term.tmp");
        let mut f = File::create(&tmp).map_err(io("cannot create term.tmp"))?;
        writeln!(f, "{term}").map_err(io("cannot write term.tmp"))?;
        f.sync_all().map_err(io("cannot fsync term.tmp"))?;
        fs::rename(&tmp, self.path.join(TERM_FILE)).map_err(io("cannot rename term.tmp"))?;
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(io("cannot fsync the directory"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_survives_reopen_and_starts_at_zero() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        assert_eq!(dir.load_term().unwrap(), 0);
        dir.store_term(7).unwrap();
        drop(dir);
        let dir = DataDir::open(tmp.path()).unwrap();
        assert_eq!(dir.load_term().unwrap(), 7);
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let _held = DataDir::open(tmp.path()).unwrap();
        let err = DataDir::open(tmp.path()).unwrap_err();
        assert!(matches!(err, DataDirError::Locked(_)), "{err}");
    }

    #[test]
    fn a_corrupt_term_is_an_error_not_zero() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(TERM_FILE), "12x").unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let err = dir.load_term().unwrap_err().to_string();
        assert!(err.contains("file `term` is corrupt"), "{err}");
    }
}
