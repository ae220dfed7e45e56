//! A beacon's disk in the simulation: the real [`Storage`] code over files in memory, which
//! outlive the process, and a write torn by a crash.

use std::collections::BTreeMap;

use beacon::consensus::{Position, Snapshot, Store, Stored};
use beacon::storage::{Memory, Restored, Storage, StorageError};
use beacon::wire::MachineWire;

/// What one beacon has stored; it survives the beacon's crashes.
pub struct Disk<S> {
    /// The storage while the beacon runs; its files alone while it is down.
    open: Option<Storage<S, Memory>>,
    files: Memory,
    /// The log positions the files hold for certain: the snapshot's, and each entry's term
    /// by index. Kept beside the files (read back from them at each open, brought up to
    /// date by each store that completes), so a checker can ask what is durable where.
    base: Position,
    entries: BTreeMap<u64, u64>,
}

impl<S: MachineWire> Default for Disk<S> {
    fn default() -> Self {
        Disk {
            open: None,
            files: Memory::new(),
            base: Position::default(),
            entries: BTreeMap::new(),
        }
    }
}

impl<S: MachineWire> Disk<S> {
    /// Opens the storage as a starting beacon does: what it finds, a torn tail cut off.
    pub fn open(&mut self) -> Result<Restored<S>, StorageError> {
        self.close();
        let (storage, restored) = Storage::open(std::mem::take(&mut self.files))?;
        self.open = Some(storage);
        self.base = restored
            .snapshot
            .as_ref()
            .map_or(Position::default(), |s| s.position);
        self.entries = restored.entries.iter().map(|e| (e.index, e.term)).collect();
        Ok(restored)
    }

    /// Whether the files hold the entry at `at` for certain: in the log, or as the
    /// snapshot's last entry. An entry under a later snapshot counts too (a snapshot is
    /// the state through its position, which the entry is part of if the logs agree there).
    pub fn holds(&self, at: Position) -> bool {
        at.index == 0
            || self.entries.get(&at.index) == Some(&at.term)
            || self.base == at
            || self.base.index > at.index
    }

    fn snapshot_stored(&mut self, position: Position) {
        self.base = position;
        self.entries.clear();
    }

    /// The process is gone: the files stay as they are.
    pub fn close(&mut self) {
        if let Some(storage) = self.open.take() {
            self.files = storage.into_backend();
        }
    }

    /// The storage of the running beacon, for [`beacon::storage::carry_out`].
    pub fn storage(&mut self) -> &mut Storage<S, Memory> {
        self.open.as_mut().expect("the disk of a running beacon")
    }

    pub fn store(&mut self, store: &Store<S>) -> Result<Stored, StorageError> {
        let stored = self.storage().store(store)?;
        let (snapshot, entries) = Self::positions(store);
        self.stored(snapshot, &entries);
        Ok(stored)
    }

    /// The positions `store` writes: its snapshot's, and its entries'.
    pub fn positions(store: &Store<S>) -> (Option<Position>, Vec<Position>) {
        (
            store.snapshot.as_ref().map(|s| s.position),
            store.entries.iter().map(|e| e.position()).collect(),
        )
    }

    /// A store of these positions completed (by [`Disk::store`], or by a carry-out through
    /// [`Disk::storage`]).
    pub fn stored(&mut self, snapshot: Option<Position>, entries: &[Position]) {
        if let Some(at) = snapshot {
            self.snapshot_stored(at);
        }
        for e in entries {
            // An entry replaces the one at its index and everything after it.
            self.entries.split_off(&e.index);
            self.entries.insert(e.index, e.term);
        }
    }

    /// The log was rewritten whole (by a carry-out): a snapshot at `base`, then exactly
    /// `entries`.
    pub fn rewritten(&mut self, base: Position, entries: &[Position]) {
        self.base = base;
        self.entries = entries.iter().map(|e| (e.index, e.term)).collect();
    }

    /// The log was compacted into a snapshot through `at` (by a carry-out): the entries
    /// after it stay.
    pub fn compacted(&mut self, at: Position) {
        self.base = at;
        self.entries.retain(|index, _| *index > at.index);
    }

    /// Stores `store` as a crash in the middle of the write leaves it: the first `keep` bytes
    /// of the appended entries reach the disk. The write fails.
    pub fn store_torn(&mut self, store: &Store<S>, keep: usize) -> Result<Stored, StorageError> {
        assert!(!store.entries.is_empty(), "only an append can be torn");
        self.storage().backend_mut().tear_next_append(keep);
        self.store(store)
    }

    /// Entries in the log since the last snapshot.
    pub fn logged(&mut self) -> usize {
        self.storage().logged()
    }

    pub fn install(&mut self, snapshot: &Snapshot<S::Snapshot>) -> Result<(), StorageError> {
        self.storage().install(snapshot)?;
        self.snapshot_stored(snapshot.position);
        Ok(())
    }
}
