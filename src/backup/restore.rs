//! `beacon restore`: a new cluster's data directory built from a backup.
//!
//! Every beacon of the new cluster is restored from the same file, each into its own
//! data directory, then started. The new cluster has its own name: its beacons refuse the
//! old cluster's peers and clients (and theirs), so the two can never mix, even on the same
//! hosts. The state is the saved one exactly (node IDs, quarantines, sequences, slots,
//! resources, tasks); services' leases start afresh on the new leader's clock, so a service
//! that does not report to the new cluster loses its registration as it would after a
//! failover.

use std::path::PathBuf;

use super::Backup;
use crate::config::Config;
use crate::consensus::Machine;
use crate::data_dir::{DataDir, DataDirError, identity_of};
use crate::machines::{Configured, State};
use crate::storage::{Files, Storage, StorageError};

/// Why a restore did not happen. Nothing is written unless it succeeds (the data
/// directory is left as it was found).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(
        "data_dir {0} is not empty: restore into an empty directory (a restore never overwrites state)"
    )]
    NotEmpty(PathBuf),
    #[error(
        "the backup was taken from cluster `{0}`: the restored cluster needs a name of its own (--cluster), so that its beacons and the old cluster's never mix"
    )]
    SameCluster(String),
    #[error("the backup does not fit this beacon's configuration: {0}")]
    DoesNotFit(String),
}

/// What a restore wrote.
#[derive(Debug, Clone)]
pub struct Restored {
    pub data_dir: PathBuf,
    pub index: u64,
    pub term: u64,
    /// What each machine holds now, in a few words.
    pub contents: String,
}

/// Builds `config`'s data directory from `backup`: the identity `config` gives it, the
/// backup's state as its snapshot, and the backup's term as its term.
pub fn restore(backup: &Backup, config: &Config) -> Result<Restored, RestoreError> {
    if backup.cluster == config.cluster {
        return Err(RestoreError::SameCluster(backup.cluster.clone()));
    }
    // The state must fit this configuration (every node ID inside its range), as a
    // beacon starting on it would judge.
    let mut state = State::configured(&config.machines);
    state.restore(backup.snapshot.state.clone(), 0);
    state.restored().map_err(RestoreError::DoesNotFit)?;
    let dir = DataDir::open(&config.data_dir)?;
    // Empty but for the lock just taken: checked before the storage is opened, since opening
    // a directory of an older format rewrites its files.
    let held = std::fs::read_dir(dir.path())
        .map_err(|cause| DataDirError::Io {
            path: config.data_dir.clone(),
            what: "cannot list",
            cause,
        })?
        .filter_map(Result::ok)
        .any(|e| e.file_name() != "LOCK");
    if held {
        return Err(RestoreError::NotEmpty(config.data_dir.clone()));
    }
    let (mut storage, _) = Storage::<State>::open(Files::new(dir.path()))?;
    let position = backup.position();
    // The new cluster's members are its configuration's (`--peers`), not the old one's.
    let snapshot = crate::consensus::Snapshot {
        members: None,
        ..backup.snapshot.clone()
    };
    storage.install(&snapshot)?;
    storage.store_term(Some(crate::consensus::Promise::at(position.term)))?;
    // Last: a directory with an identity is one a beacon starts on.
    dir.store_identity(&identity_of(config))?;
    Ok(Restored {
        data_dir: config.data_dir.clone(),
        index: position.index,
        term: position.term,
        contents: state.summary(),
    })
}
