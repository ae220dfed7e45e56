//! The replicated state on disk: a snapshot plus an append-only log of the entries after it.
//!
//! Files in the data directory:
//! - `snapshot`: the whole state as of one log position, replaced atomically (write a
//!   temporary file, fsync, rename, fsync the directory).
//! - `log`: the entries that follow the snapshot, as records of `[len: u32][crc32: u32][body]`
//!   (big-endian; the body is a protobuf `LogEntry`). Appends are fsynced before anything
//!   that depends on them is sent, so an entry a beacon acknowledged survives its crash.
//!
//! On open the log is read record by record. A record cut short, one whose checksum does not
//! match, or one that does not follow its predecessor ends the readable log: the tail from
//! there is cut off (and reported, so the driver logs it), never loaded. A crash mid-append
//! leaves exactly such a tail; anything else there is damage, and the beacon recovers the
//! lost entries from its peers.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::pb;
use crate::replication::{Entry, Snapshot};
use crate::wire::convert::{entry_from_pb, entry_to_pb, snapshot_from_pb, snapshot_to_pb};

const LOG_FILE: &str = "log";
const SNAPSHOT_FILE: &str = "snapshot";
const RECORD_HEAD: usize = 8;
/// A record larger than this is treated as damage rather than allocated.
const MAX_RECORD: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("data_dir {path}: {what}: {cause}")]
    Io {
        path: PathBuf,
        what: &'static str,
        cause: std::io::Error,
    },
    #[error("data_dir {path}: file `snapshot` is corrupt ({why}); refusing to start from a guess")]
    CorruptSnapshot { path: PathBuf, why: String },
}

/// What was cut off the end of the log when it was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Byte offset of the first record not loaded.
    pub offset: u64,
    /// Bytes cut off.
    pub bytes: u64,
    pub why: String,
}

/// The state found on disk.
#[derive(Debug, Default)]
pub struct Restored {
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
    pub truncated: Option<Truncation>,
}

/// The open log and snapshot files of one data directory.
#[derive(Debug)]
pub struct Storage {
    dir: PathBuf,
    log: File,
    /// Entries in the log file (since the last snapshot).
    logged: usize,
}

impl Storage {
    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
        move |cause| StorageError::Io {
            path: self.dir.clone(),
            what,
            cause,
        }
    }

    /// Opens (creating if needed) the state in `dir`, cutting off a damaged log tail.
    pub fn open(dir: &Path) -> Result<(Storage, Restored), StorageError> {
        let io = |what| {
            move |cause| StorageError::Io {
                path: dir.to_owned(),
                what,
                cause,
            }
        };
        let snapshot = match fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(bytes) => {
                Some(
                    decode_snapshot(&bytes).map_err(|why| StorageError::CorruptSnapshot {
                        path: dir.to_owned(),
                        why,
                    })?,
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("cannot read snapshot")(e)),
        };
        let mut log = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(dir.join(LOG_FILE))
            .map_err(io("cannot open log"))?;
        let mut bytes = Vec::new();
        log.read_to_end(&mut bytes).map_err(io("cannot read log"))?;
        let after = snapshot.as_ref().map_or(0, |s| s.position.index);
        let (entries, good) = read_records(&bytes, after);
        let mut truncated = None;
        if let Some((offset, why)) = good {
            log.set_len(offset as u64)
                .and_then(|()| log.sync_all())
                .map_err(io("cannot truncate the damaged log tail"))?;
            truncated = Some(Truncation {
                offset: offset as u64,
                bytes: (bytes.len() - offset) as u64,
                why,
            });
        }
        let storage = Storage {
            dir: dir.to_owned(),
            log,
            logged: entries.len(),
        };
        Ok((
            storage,
            Restored {
                snapshot,
                entries,
                truncated,
            },
        ))
    }

    /// Entries in the log file since the last snapshot.
    pub fn logged(&self) -> usize {
        self.logged
    }

    /// Appends entries and fsyncs them.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for e in entries {
            let body = entry_to_pb(e).encode_to_vec();
            buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
            buf.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
            buf.extend_from_slice(&body);
        }
        self.log
            .write_all(&buf)
            .map_err(self.io("cannot append to log"))?;
        self.log.sync_data().map_err(self.io("cannot fsync log"))?;
        self.logged += entries.len();
        Ok(())
    }

    /// Stores `snapshot` as the new base and empties the log: after installing a leader's
    /// snapshot, or to compact. Crash-safe: until the rename the old snapshot and log stand;
    /// after it, log entries at or before the new snapshot are skipped on open.
    pub fn install(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        let tmp = self.dir.join("snapshot.tmp");
        let body = snapshot_to_pb(snapshot).encode_to_vec();
        let mut f = File::create(&tmp).map_err(self.io("cannot create snapshot.tmp"))?;
        f.write_all(&crc32fast::hash(&body).to_be_bytes())
            .and_then(|()| f.write_all(&body))
            .and_then(|()| f.sync_all())
            .map_err(self.io("cannot write snapshot.tmp"))?;
        fs::rename(&tmp, self.dir.join(SNAPSHOT_FILE))
            .map_err(self.io("cannot rename snapshot.tmp"))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(self.io("cannot fsync the directory"))?;
        self.log
            .set_len(0)
            .and_then(|()| self.log.sync_all())
            .map_err(self.io("cannot empty the log"))?;
        self.logged = 0;
        Ok(())
    }
}

fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, String> {
    if bytes.len() < 4 {
        return Err(format!("{} bytes, shorter than its checksum", bytes.len()));
    }
    let (crc, body) = bytes.split_at(4);
    let crc = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch".into());
    }
    let pb = pb::Snapshot::decode(body).map_err(|e| e.to_string())?;
    snapshot_from_pb(pb).map_err(|e| e.to_string())
}

/// Reads log records. Entries at or before `after` (already in the snapshot) are skipped.
/// Returns the entries and, if the log does not end cleanly, the offset where the readable
/// part ends and why.
fn read_records(bytes: &[u8], after: u64) -> (Vec<Entry>, Option<(usize, String)>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut at = 0;
    let mut last = after;
    while at < bytes.len() {
        let bad = |why: String| Some((at, why));
        if bytes.len() - at < RECORD_HEAD {
            return (entries, bad("a record head cut short".into()));
        }
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let start = at + RECORD_HEAD;
        if len > MAX_RECORD || bytes.len() - start < len {
            return (entries, bad(format!("a record of {len} bytes cut short")));
        }
        let body = &bytes[start..start + len];
        if crc32fast::hash(body) != crc {
            return (
                entries,
                bad("a record whose checksum does not match".into()),
            );
        }
        let entry = match pb::LogEntry::decode(body)
            .map_err(|e| e.to_string())
            .and_then(|e| entry_from_pb(e).map_err(|e| e.to_string()))
        {
            Ok(e) => e,
            Err(e) => return (entries, bad(format!("a record that does not decode: {e}"))),
        };
        if entry.index > after {
            if entry.index != last + 1 {
                return (
                    entries,
                    bad(format!("entry {} where {} was due", entry.index, last + 1)),
                );
            }
            last = entry.index;
            entries.push(entry);
        }
        at = start + len;
    }
    (entries, None)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::registry::{Command, NodeRecord, RegistrySnapshot};
    use crate::replication::Position;
    use crate::state::StateSnapshot;

    fn entry(index: u64) -> Entry {
        Entry {
            index,
            term: 1,
            command: Command::Register(NodeRecord {
                node_id: index as u32,
                node_type: "LOGIC".into(),
                addr: SocketAddr::from(([10, 0, 0, 1], index as u16)),
                access_addr: None,
                worker_num: 0,
                metadata: String::new(),
                registered_ms: 0,
                term: 1,
                index,
            })
            .into(),
        }
    }

    fn snapshot(index: u64) -> Snapshot {
        Snapshot {
            position: Position { index, term: 1 },
            state: StateSnapshot {
                registry: RegistrySnapshot {
                    last_node_id: index as u32,
                    nodes: vec![],
                    quarantined: vec![],
                },
            },
        }
    }

    #[test]
    fn entries_and_snapshots_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, r) = Storage::open(dir.path()).unwrap();
        assert!(r.snapshot.is_none() && r.entries.is_empty() && r.truncated.is_none());
        s.append(&[entry(1), entry(2)]).unwrap();
        s.append(&[entry(3)]).unwrap();
        drop(s);
        let (mut s, r) = Storage::open(dir.path()).unwrap();
        assert_eq!(r.entries, vec![entry(1), entry(2), entry(3)]);
        assert_eq!(s.logged(), 3);
        s.install(&snapshot(3)).unwrap();
        s.append(&[entry(4)]).unwrap();
        drop(s);
        let (s, r) = Storage::open(dir.path()).unwrap();
        assert_eq!(r.snapshot, Some(snapshot(3)));
        assert_eq!(r.entries, vec![entry(4)]);
        assert_eq!(s.logged(), 1);
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Storage::open(dir.path()).unwrap();
        s.append(&[entry(1), entry(2)]).unwrap();
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let good = fs::metadata(&path).unwrap().len();
        // A crash mid-append: half a record.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 40, 1, 2, 3]).unwrap();
        drop(f);
        let (mut s, r) = Storage::open(dir.path()).unwrap();
        assert_eq!(r.entries.len(), 2);
        let t = r.truncated.unwrap();
        assert_eq!((t.offset, t.bytes), (good, 7));
        assert_eq!(fs::metadata(&path).unwrap().len(), good, "cut off on disk");
        // Appending goes on after the good part.
        s.append(&[entry(3)]).unwrap();
        drop(s);
        let (_, r) = Storage::open(dir.path()).unwrap();
        assert_eq!(r.entries.len(), 3);
        assert!(r.truncated.is_none());
    }

    #[test]
    fn a_flipped_bit_ends_the_log_there() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Storage::open(dir.path()).unwrap();
        s.append(&[entry(1), entry(2), entry(3)]).unwrap();
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = fs::read(&path).unwrap();
        let second = RECORD_HEAD + entry_to_pb(&entry(1)).encode_to_vec().len();
        bytes[second + RECORD_HEAD + 2] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        let (_, r) = Storage::open(dir.path()).unwrap();
        assert_eq!(r.entries, vec![entry(1)]);
        let t = r.truncated.unwrap();
        assert!(t.why.contains("checksum"), "{t:?}");
        assert_eq!(t.offset, second as u64);
    }

    #[test]
    fn a_corrupt_snapshot_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SNAPSHOT_FILE), b"\0\0\0\0garbage").unwrap();
        let err = Storage::open(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("file `snapshot` is corrupt (checksum mismatch)"),
            "{err}"
        );
    }
}
