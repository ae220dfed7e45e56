//! The replicated state on disk: the highest term promised, a snapshot, and an append-only
//! log of the entries after it.
//!
//! Files (in a [`Backend`]: the data directory, or memory in simulations), each marked with
//! its [`format`] version:
//! - `term`: the highest term this beacon has promised, and the leader it followed in it, as
//!   text. Stored before any message announces it, so a beacon that crashes and restarts
//!   never goes back on a promise.
//! - `snapshot`: a header, then `[crc32: u32][body]`, the whole state as of one log position
//!   (a `Snapshot` message), replaced atomically.
//! - `log`: a header, then the entries that follow the snapshot, as records of
//!   `[len: u32][crc32: u32][body]` (big-endian; the body is a `LogEntry` message). Appends
//!   are made durable before anything that depends on them is sent, so an entry a beacon
//!   acknowledged survives its crash.
//!
//! On open the log is read record by record. A record cut short, one whose checksum does not
//! match, or one that does not follow its predecessor ends the readable log: the tail from
//! there is cut off (and reported, so the driver logs it), never loaded. A crash mid-append
//! leaves exactly such a tail; anything else there is damage, and the beacon recovers the
//! lost entries from its peers.
//!
//! Storing is what releases a step's outputs: [`Storage::store_term`] and [`Storage::store`]
//! issue the receipts that [`crate::consensus::Ready`] asks for.

mod backend;
mod carry;
pub mod format;

use std::marker::PhantomData;
use std::path::PathBuf;

pub use backend::{Backend, Files, Memory};
pub use carry::{
    Early, Outbox, carry_out, carry_out_early, carry_out_early_beside, carry_out_stored,
    compact_if_due, release_stored, store_beside, stores_in_background,
};

use crate::consensus::{Entry, Promise, Snapshot, Store, Stored, TermStored};
use crate::wire::MachineWire;
use crate::wire::envelope::{
    snapshot_bytes, snapshot_from_bytes, stored_entry_bytes, stored_entry_from_bytes,
};

const LOG_FILE: &str = "log";
const SNAPSHOT_FILE: &str = "snapshot";
const TERM_FILE: &str = "term";
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
    #[error("data_dir {path}: file `term` is corrupt ({content:?}); refusing to guess a term")]
    CorruptTerm { path: PathBuf, content: String },
    #[error(
        "data_dir {path}: file `{file}` is in format {found}, newer than this beacon (version {}) reads (formats {} to {}): run the beacon version that wrote it, or a newer one",
        crate::VERSION,
        format::OLDEST,
        format::FORMAT
    )]
    NewerFormat {
        path: PathBuf,
        file: &'static str,
        found: u32,
    },
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

/// The state found in storage.
#[derive(Debug)]
pub struct Restored<S: MachineWire> {
    /// The highest term promised (0 if none), and to whom.
    pub promise: Promise,
    pub snapshot: Option<Snapshot<S::Snapshot>>,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry<S::Command>>,
    /// How far the stored log was known committed when it was written (0 when no record
    /// says): the entries after it may be a tail the cluster never committed.
    pub commit: u64,
    pub truncated: Option<Truncation>,
    /// The files were in this older format, and are rewritten in [`format::FORMAT`] now.
    pub upgraded_from: Option<u32>,
}

/// The stored state of one beacon, replicating `S`, in backend `B`.
pub struct Storage<S, B = Files> {
    backend: B,
    /// Entries in the log file (since the last snapshot).
    logged: usize,
    /// Bytes of the stored snapshot (0 without one).
    snapshot_size: u64,
    promise: Promise,
    /// The log file begins with its header (an emptied log gets one with its first entry).
    log_marked: bool,
    _state: PhantomData<fn() -> S>,
}

impl<S: MachineWire, B: Backend> Storage<S, B> {
    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
        move |cause| StorageError::Io {
            path: self.backend.location(),
            what,
            cause,
        }
    }

    /// Opens the state in `backend`, cutting off a damaged log tail.
    pub fn open(mut backend: B) -> Result<(Self, Restored<S>), StorageError> {
        let path = backend.location();
        let io = |what| {
            let path = path.clone();
            move |cause| StorageError::Io { path, what, cause }
        };
        let newer = |file, found| StorageError::NewerFormat {
            path: path.clone(),
            file,
            found,
        };
        // Files of an older format, rewritten in this one below (format 1, unmarked, is the
        // only older one a beacon reads: `format::OLDEST`).
        let mut term_old = false;
        let mut snapshot_old = false;
        // The oldest format among the files, when older than this beacon's.
        let mut oldest = format::FORMAT;
        let promise = match backend.read(TERM_FILE).map_err(io("cannot read term"))? {
            None => Promise::default(),
            Some(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let Some((f, promise)) = format::parse_term(&text) else {
                    return Err(StorageError::CorruptTerm {
                        path: path.clone(),
                        content: text,
                    });
                };
                if f > format::FORMAT {
                    return Err(newer(TERM_FILE, f));
                }
                term_old = f < format::FORMAT;
                oldest = oldest.min(f);
                promise
            }
        };
        let stored = backend
            .read(SNAPSHOT_FILE)
            .map_err(io("cannot read snapshot"))?;
        let corrupt = |why: String| StorageError::CorruptSnapshot {
            path: path.clone(),
            why,
        };
        let mut snapshot_size = stored.as_ref().map_or(0, |b| b.len() as u64);
        let snapshot = match &stored {
            None => None,
            Some(bytes) => {
                let body = match format::marked(bytes, &format::SNAPSHOT_MAGIC) {
                    format::Marked::Unmarked => {
                        snapshot_old = true;
                        oldest = 1;
                        &bytes[..]
                    }
                    format::Marked::Format(f) if f > format::FORMAT => {
                        return Err(newer(SNAPSHOT_FILE, f));
                    }
                    format::Marked::Format(f) if f == format::FORMAT => &bytes[format::HEADER..],
                    // Marked in an older format: the same layout after the header.
                    format::Marked::Format(f) if f >= format::FIRST_MARKED => {
                        snapshot_old = true;
                        oldest = oldest.min(f);
                        &bytes[format::HEADER..]
                    }
                    format::Marked::Format(f) => {
                        return Err(corrupt(format!(
                            "a header naming format {f}, which no beacon writes"
                        )));
                    }
                    // It is replaced whole, never written in place.
                    format::Marked::Torn => return Err(corrupt("a header cut short".into())),
                };
                Some(decode_snapshot::<S>(body).map_err(corrupt)?)
            }
        };
        let bytes = backend
            .read(LOG_FILE)
            .map_err(io("cannot read log"))?
            .unwrap_or_default();
        // The bytes written, without the space reserved after them: a header is read from
        // them, the records end by them, and they say how much a damaged tail cut.
        let written = written(&bytes);
        // Where the records start; `None` when a header cut short (a crash during the
        // file's first write) or naming an unknown format leaves nothing readable.
        let mut log_format = format::FORMAT;
        let start = match format::marked(&bytes[..written], &format::LOG_MAGIC) {
            format::Marked::Unmarked => Some(0),
            format::Marked::Format(f) if f > format::FORMAT => return Err(newer(LOG_FILE, f)),
            format::Marked::Format(f) if (format::FIRST_MARKED..=format::FORMAT).contains(&f) => {
                log_format = f;
                Some(format::HEADER)
            }
            format::Marked::Format(_) | format::Marked::Torn => None,
        };
        let after = snapshot.as_ref().map_or(0, |s| s.position.index);
        let (entries, commit, end, bad) = match start {
            Some(start) => {
                let (entries, commit, end, bad) =
                    read_records::<S>(&bytes[start..], written.saturating_sub(start), after);
                (entries, commit, start + end, bad)
            }
            None => (
                Vec::new(),
                0,
                0,
                Some("a header cut short or naming another format".to_owned()),
            ),
        };
        let mut truncated = None;
        if let Some(why) = bad {
            truncated = Some(Truncation {
                offset: end as u64,
                bytes: (written.max(end) - end) as u64,
                why,
            });
        }
        // Cut to where the readable records end: a damaged tail, and the space reserved
        // after the last write (appends go after the whole file; it is reserved again).
        if end < bytes.len() {
            let what = if truncated.is_some() {
                "cannot truncate the damaged log tail"
            } else {
                "cannot cut the space reserved after the log"
            };
            backend.truncate(LOG_FILE, end as u64).map_err(io(what))?;
        }
        let log_unmarked = start == Some(0) && written > 0;
        let log_old = log_unmarked || (log_format < format::FORMAT && end >= format::HEADER);
        if log_unmarked {
            oldest = 1;
        } else if log_old {
            oldest = oldest.min(log_format);
        }
        let mut log_marked = start == Some(format::HEADER) && end >= format::HEADER;
        // Files of an older format are rewritten in this one (see `format`).
        if term_old {
            backend
                .replace(TERM_FILE, format::term_text(promise).as_bytes())
                .map_err(io("cannot rewrite term in the current format"))?;
        }
        if let (true, Some(old)) = (snapshot_old, &stored) {
            let mut marked = format::header(&format::SNAPSHOT_MAGIC).to_vec();
            let body = match format::marked(old, &format::SNAPSHOT_MAGIC) {
                format::Marked::Format(_) => &old[format::HEADER..],
                _ => &old[..],
            };
            marked.extend_from_slice(body);
            backend
                .replace(SNAPSHOT_FILE, &marked)
                .map_err(io("cannot rewrite snapshot in the current format"))?;
            snapshot_size = marked.len() as u64;
        }
        if log_old && end > 0 {
            let mut marked = format::header(&format::LOG_MAGIC).to_vec();
            let from = if log_unmarked { 0 } else { format::HEADER };
            marked.extend_from_slice(&bytes[from..end]);
            backend
                .replace(LOG_FILE, &marked)
                .map_err(io("cannot rewrite log in the current format"))?;
            log_marked = true;
        }
        let storage = Storage {
            backend,
            logged: entries.len(),
            snapshot_size,
            promise,
            log_marked,
            _state: PhantomData,
        };
        Ok((
            storage,
            Restored {
                promise,
                snapshot,
                entries,
                commit,
                truncated,
                upgraded_from: (term_old || snapshot_old || log_old).then_some(oldest),
            },
        ))
    }

    /// Entries in the log since the last snapshot.
    pub fn logged(&self) -> usize {
        self.logged
    }

    /// Bytes of the stored snapshot (0 without one).
    pub fn snapshot_size(&self) -> u64 {
        self.snapshot_size
    }

    /// The highest term stored.
    pub fn term(&self) -> u64 {
        self.promise.term
    }

    /// Stores the highest term promised and to whom, if that says more than what is stored,
    /// before any message can announce it.
    pub fn store_term(&mut self, promise: Option<Promise>) -> Result<TermStored, StorageError> {
        if let Some(promise) = promise.filter(|p| p.supersedes(&self.promise)) {
            self.backend
                .replace(TERM_FILE, format::term_text(promise).as_bytes())
                .map_err(self.io("cannot store term"))?;
            self.promise = promise;
        }
        Ok(TermStored::issue())
    }

    /// Replaces the stored term with `term`, even a lower one: only for `--reset-term`, on
    /// a beacon whose stored term is beyond any a beacon reaches.
    pub fn reset_term(&mut self, term: u64) -> Result<(), StorageError> {
        let promise = Promise::at(term);
        self.backend
            .replace(TERM_FILE, format::term_text(promise).as_bytes())
            .map_err(self.io("cannot store term"))?;
        self.promise = promise;
        Ok(())
    }

    /// Stores what a step asks for: its snapshot (if any) with the entries after it, or
    /// its entries appended.
    pub fn store(&mut self, store: &Store<S>) -> Result<Stored, StorageError> {
        match &store.snapshot {
            Some(s) => self.install_with(s, &store.entries, store.commit)?,
            None => self.append(&store.entries, store.commit)?,
        }
        Ok(Stored::issue())
    }

    /// Appends entries durably, the last saying the log is known committed through `commit`.
    fn append(&mut self, entries: &[Entry<S::Command>], commit: u64) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        let buf = self.records(entries, !self.log_marked, commit);
        self.backend
            .append(LOG_FILE, &buf)
            .map_err(self.io("cannot append to log"))?;
        self.log_marked = true;
        self.logged += entries.len();
        Ok(())
    }

    /// `entries` as log records, after the log's header when `header`; the last one says
    /// the log is known committed through `commit` (`LogEntry.known_commit`).
    fn records(&self, entries: &[Entry<S::Command>], header: bool, commit: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        if header {
            buf.extend_from_slice(&format::header(&format::LOG_MAGIC));
        }
        for (i, e) in entries.iter().enumerate() {
            let last = i + 1 == entries.len();
            let body = stored_entry_bytes::<S>(e, if last { commit } else { 0 });
            buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
            buf.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
            buf.extend_from_slice(&body);
        }
        buf
    }

    /// Stores `snapshot` as the new base and empties the log: after installing a leader's
    /// snapshot, or to compact.
    pub fn install(&mut self, snapshot: &Snapshot<S::Snapshot>) -> Result<(), StorageError> {
        self.install_with(snapshot, &[], 0)
    }

    /// Stores `snapshot` as the new base, and `entries` (those after it) as the whole log:
    /// a follower compacting keeps the entries it stored but has not applied yet. Crash-safe:
    /// until the snapshot is replaced the old snapshot and log stand; after it, log entries
    /// at or before the new snapshot are skipped on open, and the old log still holds
    /// every entry of `entries` it held until the new log replaces it whole.
    pub fn install_with(
        &mut self,
        snapshot: &Snapshot<S::Snapshot>,
        entries: &[Entry<S::Command>],
        commit: u64,
    ) -> Result<(), StorageError> {
        let bytes = format::sealed(&format::SNAPSHOT_MAGIC, &snapshot_bytes::<S>(snapshot));
        self.backend
            .replace(SNAPSHOT_FILE, &bytes)
            .map_err(self.io("cannot write snapshot"))?;
        self.snapshot_size = bytes.len() as u64;
        if entries.is_empty() {
            self.backend
                .truncate(LOG_FILE, 0)
                .map_err(self.io("cannot empty the log"))?;
            self.log_marked = false;
        } else {
            let log = self.records(entries, true, commit);
            self.backend
                .replace(LOG_FILE, &log)
                .map_err(self.io("cannot rewrite the log"))?;
            self.log_marked = true;
        }
        self.logged = entries.len();
        Ok(())
    }

    /// The backend, as the storage leaves it (a simulation reopens it after a crash).
    pub fn into_backend(self) -> B {
        self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }
}

/// A file's bytes up to the last that is not zero: what was written, without the space an
/// appended file has reserved after its writes, which reads as zeros (see `backend`). A
/// record may end in zeros of its own, so this can end inside the last record, never
/// before a record starts (a record's head holds its length, never 0).
pub fn written(bytes: &[u8]) -> usize {
    bytes.len() - bytes.iter().rev().take_while(|b| **b == 0).count()
}

fn decode_snapshot<S: MachineWire>(bytes: &[u8]) -> Result<Snapshot<S::Snapshot>, String> {
    let (_, body) = format::unseal(bytes)?;
    snapshot_from_bytes::<S>(body).map_err(|e| e.to_string())
}

/// Reads log records from `bytes`, of which the first `written` were written ([`written`]).
/// Entries at or before `after` (already in the snapshot) are skipped. Returns the entries,
/// how far the records say the log was known committed, where the written records end, and
/// why, if the log does not end cleanly there: a clean end is the end of the bytes or of
/// what was written (zeros to the end are reserved space: a record never starts with eight
/// zeros, its length is never 0).
#[allow(clippy::type_complexity)]
fn read_records<S: MachineWire>(
    bytes: &[u8],
    written: usize,
    after: u64,
) -> (Vec<Entry<S::Command>>, u64, usize, Option<String>) {
    let mut entries: Vec<Entry<S::Command>> = Vec::new();
    let mut commit = 0;
    let mut at = 0;
    let mut last = after;
    while at < bytes.len() {
        if at >= written {
            return (entries, commit, at, None);
        }
        let rest = &bytes[at..];
        if rest.len() < RECORD_HEAD || rest[..RECORD_HEAD] == [0; RECORD_HEAD] {
            let why = if rest.len() < RECORD_HEAD {
                "a record head cut short"
            } else {
                "zeros where a record should start, and written bytes after them"
            };
            return (entries, commit, at, Some(why.into()));
        }
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let start = at + RECORD_HEAD;
        if len > MAX_RECORD || bytes.len() - start < len {
            return (
                entries,
                commit,
                at,
                Some(format!("a record of {len} bytes cut short")),
            );
        }
        let body = &bytes[start..start + len];
        if crc32fast::hash(body) != crc {
            return (
                entries,
                commit,
                at,
                Some("a record whose checksum does not match".into()),
            );
        }
        let (entry, known_commit) = match stored_entry_from_bytes::<S>(body) {
            Ok(e) => e,
            Err(e) => {
                return (
                    entries,
                    commit,
                    at,
                    Some(format!("a record that does not decode: {e}")),
                );
            }
        };
        if entry.index > after {
            if entry.index != last + 1 {
                return (
                    entries,
                    commit,
                    at,
                    Some(format!("entry {} where {} was due", entry.index, last + 1)),
                );
            }
            last = entry.index;
            entries.push(entry);
        }
        // A batch's last record says how far the log was known committed when it was
        // stored (`LogEntry.known_commit`; absent before beacons wrote it).
        commit = commit.max(known_commit);
        at = start + len;
    }
    (entries, commit, at, None)
}

#[cfg(test)]
mod tally;

#[cfg(test)]
mod tests {
    use super::tally::Tally;
    use super::*;
    use crate::consensus::{Payload, Position};

    type Disk = Storage<Tally, Files>;

    fn entry(index: u64) -> Entry<u64> {
        Entry {
            index,
            term: 1,
            payload: Payload::Command(index * 10),
        }
    }

    fn snapshot(index: u64) -> Snapshot<u64> {
        Snapshot {
            position: Position { index, term: 1 },
            state: index * 100,
            members: None,
        }
    }

    fn store(entries: Vec<Entry<u64>>) -> Store<Tally> {
        Store {
            snapshot: None,
            entries,
            commit: 0,
        }
    }

    fn open(dir: &std::path::Path) -> (Disk, Restored<Tally>) {
        Disk::open(Files::new(dir)).unwrap()
    }

    /// The bytes of the file at `path` up to the last that is not zero: what was written
    /// into it (a record's last byte is its checksummed body's, not zero in these tests).
    fn written_in(path: &std::path::Path) -> usize {
        written(&std::fs::read(path).unwrap())
    }

    /// Zeros the last `n` bytes written to the file at `path`, keeping its size: a crash
    /// before they reached the disk, inside the space reserved for them.
    fn tear(path: &std::path::Path, n: usize) {
        use std::os::unix::fs::FileExt;
        let end = written_in(path);
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .write_all_at(&vec![0; n], (end - n) as u64)
            .unwrap();
    }

    #[test]
    fn entries_snapshots_and_the_term_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, r) = open(dir.path());
        assert!(r.snapshot.is_none() && r.entries.is_empty() && r.truncated.is_none());
        assert_eq!(r.promise, Promise::default());
        s.store_term(Some(Promise::at(7))).unwrap();
        s.store(&store(vec![entry(1), entry(2)])).unwrap();
        // Following a leader in the term it knows adds the leader to the promise.
        let followed = Promise {
            term: 7,
            leader: Some("127.0.0.1:16002".parse().unwrap()),
        };
        s.store_term(Some(followed)).unwrap();
        s.store(&store(vec![entry(3)])).unwrap();
        // A promise that says no more than the stored one (an earlier term, or the same
        // term without its leader) changes nothing.
        s.store_term(Some(Promise::at(7))).unwrap();
        s.store_term(Some(Promise::at(6))).unwrap();
        drop(s);
        let (mut s, r) = open(dir.path());
        assert_eq!(r.entries, vec![entry(1), entry(2), entry(3)]);
        assert_eq!((r.promise, s.logged()), (followed, 3));
        s.install(&snapshot(3)).unwrap();
        s.store(&store(vec![entry(4)])).unwrap();
        drop(s);
        let (s, r) = open(dir.path());
        assert_eq!(r.snapshot, Some(snapshot(3)));
        assert_eq!(r.entries, vec![entry(4)]);
        assert_eq!(s.logged(), 1);
    }

    /// Each stored batch says how far the log was known committed; the highest a whole
    /// record says comes back on open, through appends, a rewrite and a torn tail.
    #[test]
    fn the_known_commit_is_stored_with_the_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, r) = open(dir.path());
        assert_eq!(r.commit, 0);
        let with = |entries: Vec<Entry<u64>>, commit| Store {
            commit,
            ..store(entries)
        };
        s.store(&with(vec![entry(1), entry(2)], 1)).unwrap();
        s.store(&with(vec![entry(3)], 2)).unwrap();
        drop(s);
        let (mut s, r) = open(dir.path());
        assert_eq!((r.entries.len(), r.commit), (3, 2));
        // A rewrite (a snapshot and the tail beside it) says it too.
        s.install_with(&snapshot(2), &[entry(3), entry(4)], 3)
            .unwrap();
        drop(s);
        let (mut s, r) = open(dir.path());
        assert_eq!((r.entries, r.commit), (vec![entry(3), entry(4)], 3));
        // A batch torn by a crash says nothing: its last record, which says it, is cut off.
        s.store(&with(vec![entry(5), entry(6)], 5)).unwrap();
        drop(s);
        tear(&dir.path().join(LOG_FILE), 3);
        let (_, r) = open(dir.path());
        assert_eq!((r.entries.len(), r.commit), (3, 3));
        assert!(r.truncated.is_some());
    }

    /// A follower compacting keeps the entries it has stored but not applied: the snapshot
    /// and the log holding just them, and later appends go to that log.
    #[test]
    fn a_snapshot_keeps_the_entries_stored_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        s.store(&store((1..=5).map(entry).collect())).unwrap();
        s.install_with(&snapshot(3), &[entry(4), entry(5)], 0)
            .unwrap();
        assert_eq!(s.logged(), 2);
        s.store(&store(vec![entry(6)])).unwrap();
        drop(s);
        let (s, r) = open(dir.path());
        assert_eq!(r.snapshot, Some(snapshot(3)));
        assert_eq!(r.entries, vec![entry(4), entry(5), entry(6)]);
        assert_eq!(s.logged(), 3);
    }

    /// A crash after the new snapshot is written and before the log is replaced: the old
    /// log still holds the entries after the snapshot, and nothing stored is lost.
    #[test]
    fn a_crash_between_the_snapshot_and_its_log_loses_no_entry() {
        let (mut s, _) = Storage::<Tally, Memory>::open(Memory::new()).unwrap();
        s.store(&store((1..=5).map(entry).collect())).unwrap();
        let mut mem = s.into_backend();
        let sealed = format::sealed(
            &format::SNAPSHOT_MAGIC,
            &snapshot_bytes::<Tally>(&snapshot(3)),
        );
        mem.replace(SNAPSHOT_FILE, &sealed).unwrap();
        let (_, r) = Storage::<Tally, Memory>::open(mem).unwrap();
        assert_eq!(r.snapshot, Some(snapshot(3)));
        assert_eq!(r.entries, vec![entry(4), entry(5)]);
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_reported() {
        let mut mem = Memory::new();
        let (mut s, _) = Storage::<Tally, Memory>::open(mem).unwrap();
        s.store(&store(vec![entry(1), entry(2)])).unwrap();
        mem = s.into_backend();
        let good = mem.len(LOG_FILE);
        // A crash mid-append: half a record.
        mem.tear_next_append(7);
        let (mut s, _) = Storage::<Tally, Memory>::open(mem).unwrap();
        assert!(s.store(&store(vec![entry(3)])).is_err());
        let mem = s.into_backend();
        let (mut s, r) = Storage::<Tally, Memory>::open(mem).unwrap();
        assert_eq!(r.entries.len(), 2);
        let t = r.truncated.unwrap();
        assert_eq!((t.offset, t.bytes), (good as u64, 7));
        // Appending goes on after the good part.
        s.store(&store(vec![entry(3)])).unwrap();
        let (_, r) = Storage::<Tally, Memory>::open(s.into_backend()).unwrap();
        assert_eq!(r.entries.len(), 3);
        assert!(r.truncated.is_none());
    }

    /// Appends go into space reserved ahead of them; a reopen reads up to the zeros, cuts
    /// them without calling anything damaged, and later appends follow the entries.
    #[test]
    fn appends_go_into_reserved_space_which_a_reopen_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_FILE);
        let size = || std::fs::metadata(&log).unwrap().len() as usize;
        let mut next = 1;
        for round in 1..=3 {
            let (mut s, r) = open(dir.path());
            assert_eq!(r.entries, (1..next).map(entry).collect::<Vec<_>>());
            assert!(r.truncated.is_none(), "round {round}: {:?}", r.truncated);
            assert!(r.upgraded_from.is_none());
            if round > 1 {
                assert_eq!(
                    size(),
                    written_in(&log),
                    "round {round}: the reserve is cut"
                );
            }
            for _ in 0..round {
                s.store(&store(vec![entry(next), entry(next + 1)])).unwrap();
                next += 2;
            }
            assert!(
                size() > written_in(&log) && size() >= backend::RESERVE as usize,
                "round {round}: {} bytes, {} written",
                size(),
                written_in(&log)
            );
        }
    }

    /// A crash can leave a record's head unwritten (zeros) while its body reached the disk:
    /// the log ends before it, and what is after is cut off and reported.
    #[test]
    fn zeros_where_a_record_starts_before_written_bytes_end_the_log_there() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        s.store(&store(vec![entry(1), entry(2), entry(3)])).unwrap();
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let one = RECORD_HEAD + crate::wire::envelope::entry_bytes::<Tally>(&entry(1)).len();
        let third = format::HEADER + 2 * one;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0; RECORD_HEAD], third as u64).unwrap();
        let end = written_in(&path);
        let (_, r) = open(dir.path());
        assert_eq!(r.entries, vec![entry(1), entry(2)]);
        let t = r.truncated.unwrap();
        assert!(t.why.contains("zeros where a record should start"), "{t:?}");
        assert_eq!((t.offset, t.bytes), (third as u64, (end - third) as u64));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), third as u64);
    }

    #[test]
    fn a_flipped_bit_ends_the_log_there() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        s.store(&store(vec![entry(1), entry(2), entry(3)])).unwrap();
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = format::HEADER
            + RECORD_HEAD
            + crate::wire::envelope::entry_bytes::<Tally>(&entry(1)).len();
        bytes[second + RECORD_HEAD + 2] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let (_, r) = open(dir.path());
        assert_eq!(r.entries, vec![entry(1)]);
        let t = r.truncated.unwrap();
        assert!(t.why.contains("checksum"), "{t:?}");
        assert_eq!(t.offset, second as u64);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            second as u64,
            "cut off on disk"
        );
    }

    #[test]
    fn a_corrupt_snapshot_or_term_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SNAPSHOT_FILE), b"\0\0\0\0garbage").unwrap();
        let err = Disk::open(Files::new(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(
                "file `snapshot` is corrupt (its checksum is 00000000 but its contents sum to"
            ),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TERM_FILE), "12x").unwrap();
        let err = Disk::open(Files::new(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("file `term` is corrupt"), "{err}");
        std::fs::write(dir.path().join(TERM_FILE), "format 2\nterm 3\nleader ?\n").unwrap();
        let err = Disk::open(Files::new(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("file `term` is corrupt"), "{err}");
    }

    /// `entries` as a format-1 log: records from byte 0.
    fn format_1_log(entries: &[Entry<u64>]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in entries {
            let body = crate::wire::envelope::entry_bytes::<Tally>(e);
            out.extend_from_slice(&(body.len() as u32).to_be_bytes());
            out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
            out.extend_from_slice(&body);
        }
        out
    }

    #[test]
    fn format_1_files_are_read_and_rewritten_in_this_format() {
        let dir = tempfile::tempdir().unwrap();
        let body = snapshot_bytes::<Tally>(&snapshot(2));
        let mut snap = crc32fast::hash(&body).to_be_bytes().to_vec();
        snap.extend_from_slice(&body);
        std::fs::write(dir.path().join(SNAPSHOT_FILE), &snap).unwrap();
        std::fs::write(
            dir.path().join(LOG_FILE),
            format_1_log(&[entry(3), entry(4)]),
        )
        .unwrap();
        std::fs::write(dir.path().join(TERM_FILE), "7\n").unwrap();
        let (mut s, r) = open(dir.path());
        assert_eq!(r.upgraded_from, Some(1));
        assert_eq!(
            (r.promise, r.snapshot, r.entries.clone()),
            (Promise::at(7), Some(snapshot(2)), vec![entry(3), entry(4)])
        );
        assert!(r.truncated.is_none());
        let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
        assert_eq!(
            read(LOG_FILE)[..format::HEADER],
            format::header(&format::LOG_MAGIC)
        );
        assert_eq!(
            read(SNAPSHOT_FILE)[..format::HEADER],
            format::header(&format::SNAPSHOT_MAGIC)
        );
        assert_eq!(
            read(TERM_FILE),
            format::term_text(Promise::at(7)).into_bytes()
        );
        // Appends follow the rewritten log; nothing is upgraded twice.
        s.store(&store(vec![entry(5)])).unwrap();
        drop(s);
        let (_, r) = open(dir.path());
        assert_eq!(r.upgraded_from, None);
        assert_eq!(r.promise, Promise::at(7));
        assert_eq!(r.snapshot, Some(snapshot(2)));
        assert_eq!(r.entries, vec![entry(3), entry(4), entry(5)]);
    }

    #[test]
    fn files_of_a_newer_format_are_refused_naming_the_file_and_the_formats_read() {
        let next = format::FORMAT + 1;
        let newer = |magic: &[u8; 8]| {
            let mut h = format::header(magic).to_vec();
            h[8..12].copy_from_slice(&next.to_be_bytes());
            h
        };
        for (file, bytes) in [
            (LOG_FILE, newer(&format::LOG_MAGIC)),
            (SNAPSHOT_FILE, newer(&format::SNAPSHOT_MAGIC)),
            (TERM_FILE, format!("format {next}\nterm 9\n").into_bytes()),
        ] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(file), &bytes).unwrap();
            let err = Disk::open(Files::new(dir.path()))
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.contains(&format!("file `{file}` is in format {next}")),
                "{err}"
            );
            assert!(
                err.contains(&format!("reads (formats 1 to {})", format::FORMAT)),
                "{err}"
            );
            assert_eq!(
                std::fs::read(dir.path().join(file)).unwrap(),
                bytes,
                "left as it was"
            );
        }
    }

    #[test]
    fn a_log_header_torn_by_a_crash_is_cut_off() {
        let mut mem = Memory::new();
        // The log's first write, cut inside its header.
        mem.tear_next_append(5);
        let (mut s, _) = Storage::<Tally, Memory>::open(mem).unwrap();
        assert!(s.store(&store(vec![entry(1)])).is_err());
        let (mut s, r) = Storage::<Tally, Memory>::open(s.into_backend()).unwrap();
        assert!(r.entries.is_empty());
        assert_eq!(r.truncated.map(|t| (t.offset, t.bytes)), Some((0, 5)));
        s.store(&store(vec![entry(1)])).unwrap();
        let (_, r) = Storage::<Tally, Memory>::open(s.into_backend()).unwrap();
        assert_eq!(r.entries, vec![entry(1)]);
        assert!(r.truncated.is_none());
    }
}
