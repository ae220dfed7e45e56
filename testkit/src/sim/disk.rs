//! A beacon's disk in the simulation: the real [`Storage`] code over files in memory, which
//! outlive the process, and a write torn by a crash.

use beacon::consensus::{Snapshot, Store, Stored, TermStored};
use beacon::storage::{Memory, Restored, Storage, StorageError};
use beacon::wire::MachineWire;

/// What one beacon has stored; it survives the beacon's crashes.
pub struct Disk<S> {
    /// The storage while the beacon runs; its files alone while it is down.
    open: Option<Storage<S, Memory>>,
    files: Memory,
}

impl<S: MachineWire> Default for Disk<S> {
    fn default() -> Self {
        Disk {
            open: None,
            files: Memory::new(),
        }
    }
}

impl<S: MachineWire> Disk<S> {
    /// Opens the storage as a starting beacon does: what it finds, a torn tail cut off.
    pub fn open(&mut self) -> Result<Restored<S>, StorageError> {
        self.close();
        let (storage, restored) = Storage::open(std::mem::take(&mut self.files))?;
        self.open = Some(storage);
        Ok(restored)
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

    pub fn store_term(&mut self, term: Option<u64>) -> Result<TermStored, StorageError> {
        self.storage().store_term(term)
    }

    pub fn store(&mut self, store: &Store<S>) -> Result<Stored, StorageError> {
        self.storage().store(store)
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
        self.storage().install(snapshot)
    }
}
