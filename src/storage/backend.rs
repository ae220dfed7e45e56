//! Where stored bytes live: files in a data directory, or memory (for simulations, which run
//! the same storage code with crashes that tear a write in half).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A place to keep a few named files durably.
pub trait Backend {
    /// The whole file `name`, if it exists.
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Appends `bytes` to `name` (creating it) and makes them durable.
    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Cuts `name` to its first `len` bytes, durably.
    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()>;
    /// Replaces `name` with `bytes` atomically and durably: a crash leaves the old content
    /// or the new, never a mix.
    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Where this is, for error messages.
    fn location(&self) -> PathBuf;
}

/// Files in a directory, fsynced.
#[derive(Debug)]
pub struct Files {
    dir: PathBuf,
    /// Files open for appending, kept open.
    open: BTreeMap<String, File>,
}

impl Files {
    pub fn new(dir: &Path) -> Files {
        Files {
            dir: dir.to_owned(),
            open: BTreeMap::new(),
        }
    }

    fn appender(&mut self, name: &str) -> io::Result<&mut File> {
        if !self.open.contains_key(name) {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(name))?;
            self.open.insert(name.to_owned(), f);
        }
        Ok(self.open.get_mut(name).expect("just opened"))
    }
}

impl Backend for Files {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.dir.join(name)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let f = self.appender(name)?;
        f.write_all(bytes)?;
        f.sync_data()
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        let f = self.appender(name)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        // A file kept open for appending would go on writing to the one replaced.
        self.open.remove(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, self.dir.join(name))?;
        File::open(&self.dir)?.sync_all()
    }

    fn location(&self) -> PathBuf {
        self.dir.clone()
    }
}

/// Files in memory, for simulations. [`Memory::tear_next_append`] makes the next append
/// write only part of its bytes and fail, as a crash in the middle of a write would.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    files: BTreeMap<String, Vec<u8>>,
    tear: Option<usize>,
}

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// The next append writes only its first `keep` bytes (fewer if it has fewer), then
    /// fails: the process is taken to have crashed mid-write.
    pub fn tear_next_append(&mut self, keep: usize) {
        self.tear = Some(keep);
    }

    /// The size of file `name`.
    pub fn len(&self, name: &str) -> usize {
        self.files.get(name).map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.files.values().all(Vec::is_empty)
    }
}

impl Backend for Memory {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        Ok(self.files.get(name).cloned())
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let file = self.files.entry(name.to_owned()).or_default();
        if let Some(keep) = self.tear.take() {
            file.extend_from_slice(&bytes[..keep.min(bytes.len())]);
            return Err(io::Error::other("crashed in the middle of the write"));
        }
        file.extend_from_slice(bytes);
        Ok(())
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        self.files
            .entry(name.to_owned())
            .or_default()
            .truncate(len as usize);
        Ok(())
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.files.insert(name.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn location(&self) -> PathBuf {
        PathBuf::from("(memory)")
    }
}
