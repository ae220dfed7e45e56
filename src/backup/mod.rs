//! Backups: a live cluster's state saved to one file (`nebcli snapshot save`), described
//! (`nebcli snapshot status`), and built into the data directories of a new cluster
//! (`beacon restore`).
//!
//! A backup file is every machine's state at one committed log index, the same snapshot a
//! data directory keeps, with where and when it was taken:
//!
//! | bytes | what |
//! |---|---|
//! | 0-7 | `beacon.B` |
//! | 8-11 | the file's format, big-endian (the data directory's, [`format::FORMAT`]) |
//! | 12-15 | CRC-32 of the rest, big-endian |
//! | 16- | a `BackupFile` message (proto/beacon.proto) |
//!
//! The leader writes it ([`encode`]) and streams it to nebcli, which checks it whole
//! ([`decode`]) before it writes the file.

mod restore;
mod take;

pub use restore::{RestoreError, Restored, restore};
pub use take::{TakeError, take};

use std::path::Path;

use prost::Message;

use crate::consensus::{Position, Snapshot};
use crate::machines::State;
use crate::pb;
use crate::storage::format;
use crate::wire::envelope::{snapshot_bytes, snapshot_from_bytes};

/// The first bytes of a backup file.
pub const MAGIC: [u8; 8] = *b"beacon.B";

/// Why a file is not a backup this beacon can read.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path}: {what}: {cause}")]
    Io {
        path: String,
        what: &'static str,
        cause: std::io::Error,
    },
    #[error("{path} is not a beacon backup (it does not start with `beacon.B`)")]
    NotABackup { path: String },
    #[error(
        "{path} is a backup in format {found}, newer than this beacon (version {}) reads (formats {} to {}): use the version that wrote it, or a newer one",
        crate::VERSION,
        format::FORMAT,
        format::FORMAT
    )]
    NewerFormat { path: String, found: u32 },
    #[error("{path} is damaged: {why}")]
    Damaged { path: String, why: String },
}

/// What a backup holds.
#[derive(Debug, Clone)]
pub struct Backup {
    /// The cluster it was taken from.
    pub cluster: String,
    /// The beacon that took it, and its version.
    pub node: String,
    pub version: String,
    /// Unix milliseconds.
    pub taken_at_ms: u64,
    /// The identity the cluster's data directories recorded (identity.json).
    pub identity: serde_json::Value,
    /// Every machine's state, at the log position it stands at.
    pub snapshot: Snapshot<<State as crate::consensus::Machine>::Snapshot>,
    /// The CRC-32 the file carries, and its size in bytes.
    pub crc32: u32,
    pub size: u64,
}

/// Where and when a backup is taken, beside the state.
pub struct Taken<'a> {
    pub cluster: &'a str,
    pub node: &'a str,
    pub taken_at_ms: u64,
    pub identity: &'a serde_json::Value,
}

/// The backup file of `snapshot`.
pub fn encode(
    taken: &Taken<'_>,
    snapshot: &Snapshot<<State as crate::consensus::Machine>::Snapshot>,
) -> Vec<u8> {
    let body = pb::BackupFile {
        cluster: taken.cluster.to_owned(),
        node: taken.node.to_owned(),
        version: crate::VERSION.to_owned(),
        taken_at_ms: taken.taken_at_ms,
        identity: taken.identity.to_string(),
        snapshot: snapshot_bytes::<State>(snapshot),
    }
    .encode_to_vec();
    format::sealed(&MAGIC, &body)
}

/// Reads backup file `bytes` (named `path` in errors), checking its format and checksum.
pub fn decode(path: &str, bytes: &[u8]) -> Result<Backup, BackupError> {
    let damaged = |why: String| BackupError::Damaged {
        path: path.to_owned(),
        why,
    };
    let found = match format::marked(bytes, &MAGIC) {
        format::Marked::Format(f) => f,
        format::Marked::Torn => return Err(damaged("its header is cut short".into())),
        format::Marked::Unmarked => {
            return Err(BackupError::NotABackup {
                path: path.to_owned(),
            });
        }
    };
    if found > format::FORMAT {
        return Err(BackupError::NewerFormat {
            path: path.to_owned(),
            found,
        });
    }
    // Backups were first written in format 2; the layout has not changed since.
    if found < format::FIRST_MARKED {
        return Err(damaged(format!(
            "its header names format {found}, in which no beacon wrote backups"
        )));
    }
    let (crc, body) = format::unseal(&bytes[format::HEADER..]).map_err(damaged)?;
    let file = pb::BackupFile::decode(body).map_err(|e| damaged(e.to_string()))?;
    let snapshot = snapshot_from_bytes::<State>(&file.snapshot)
        .map_err(|e| damaged(format!("its state does not decode: {e}")))?;
    let identity = serde_json::from_str(&file.identity)
        .map_err(|e| damaged(format!("its identity is not JSON: {e}")))?;
    Ok(Backup {
        cluster: file.cluster,
        node: file.node,
        version: file.version,
        taken_at_ms: file.taken_at_ms,
        identity,
        snapshot,
        crc32: crc,
        size: bytes.len() as u64,
    })
}

/// Reads the backup file at `path`.
pub fn read(path: &Path) -> Result<Backup, BackupError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|cause| BackupError::Io {
        path: shown.clone(),
        what: "cannot read the backup",
        cause,
    })?;
    decode(&shown, &bytes)
}

impl Backup {
    /// The log position the state stands at.
    pub fn position(&self) -> Position {
        self.snapshot.position
    }

    /// What each machine holds, in a few words ("registry: 12 registrations", ...), from a
    /// state built under the default configuration (counting needs no cluster's settings).
    pub fn contents(&self) -> Vec<String> {
        use crate::consensus::Machine;
        use crate::machines::Configured;
        let sections = crate::config::Config::load(None, &Default::default())
            .expect("the embedded configuration loads")
            .machines;
        let mut state = State::configured(&sections);
        state.restore(self.snapshot.state.clone(), 0);
        state
            .summaries()
            .into_iter()
            .map(|(machine, summary)| format!("{machine}: {summary}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        use crate::consensus::Machine;
        use crate::machines::Configured;
        let sections = crate::config::Config::load(None, &Default::default())
            .unwrap()
            .machines;
        let state = State::configured(&sections);
        let snapshot = Snapshot {
            position: Position { index: 7, term: 3 },
            state: state.snapshot(0),
            members: None,
        };
        let identity = serde_json::json!({"cluster": "old"});
        encode(
            &Taken {
                cluster: "old",
                node: "127.0.0.1:16000",
                taken_at_ms: 1_700_000_000_000,
                identity: &identity,
            },
            &snapshot,
        )
    }

    #[test]
    fn a_backup_reads_back_as_written() {
        let b = decode("f", &sample()).unwrap();
        assert_eq!(b.cluster, "old");
        assert_eq!(b.position(), Position { index: 7, term: 3 });
        assert_eq!(b.identity["cluster"], "old");
        assert_eq!(b.taken_at_ms, 1_700_000_000_000);
        assert!(
            b.contents()
                .iter()
                .any(|c| c == "registry: 0 registrations")
        );
    }

    #[test]
    fn a_changed_cut_or_foreign_file_is_refused_with_what_is_wrong() {
        let good = sample();
        let mut changed = good.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        let e = decode("f", &changed).unwrap_err().to_string();
        assert!(e.contains("f is damaged: its checksum"), "{e}");
        let e = decode("f", &good[..good.len() - 3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum"), "{e}");
        let e = decode("f", &good[..10]).unwrap_err().to_string();
        assert!(e.contains("header is cut short"), "{e}");
        let e = decode("f", b"{\"json\": 1}").unwrap_err().to_string();
        assert!(e.contains("not a beacon backup"), "{e}");
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&(format::FORMAT + 1).to_be_bytes());
        let e = decode("f", &newer).unwrap_err().to_string();
        assert!(e.contains("newer than this beacon"), "{e}");
    }
}
