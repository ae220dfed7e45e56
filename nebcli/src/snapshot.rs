//! `snapshot save FILE` and `snapshot status FILE`: a backup of a live cluster, and what a
//! backup file holds (etcdctl's `snapshot save` and `snapshot status`). `beacon restore`
//! builds a new cluster from one.

use std::path::{Path, PathBuf};

use beacon::backup::{self, Backup, TakeError};
use beacon::cli::table;
use beacon::cli::{Commands, Failure, Session, UsageError, usage};

/// `snapshot save FILE` or `snapshot status FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    Save(PathBuf),
    Status(PathBuf),
}

/// What `snapshot save` and `snapshot status` print (`-w json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SnapshotView {
    pub file: String,
    pub cluster: String,
    /// The beacon that took it, and its version.
    pub taken_by: String,
    pub version: String,
    pub taken_at_ms: u64,
    pub index: u64,
    pub term: u64,
    pub size: u64,
    /// CRC-32, hex.
    pub checksum: String,
    /// What each machine holds, in a few words.
    pub contents: Vec<String>,
}

impl SnapshotView {
    fn of(file: &Path, b: &Backup) -> SnapshotView {
        SnapshotView {
            file: file.display().to_string(),
            cluster: b.cluster.clone(),
            taken_by: b.node.clone(),
            version: b.version.clone(),
            taken_at_ms: b.taken_at_ms,
            index: b.position().index,
            term: b.position().term,
            size: b.size,
            checksum: format!("{:08x}", b.crc32),
            contents: b.contents(),
        }
    }
}

const USAGE: &str = "usage: `snapshot save FILE` or `snapshot status FILE`";

impl Commands for Snapshot {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "snapshot save FILE",
            "write a backup of the running cluster to FILE: every machine's state at one committed index, checksummed, taken at the leader without stopping it (role admin); `beacon restore FILE` builds a new cluster from it",
        ),
        (
            "snapshot status FILE",
            "what backup FILE holds: cluster, index, term, size, checksum, what each machine holds",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &[];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        match head {
            ["snapshot", "save"] => Some(match &words[2..] {
                [file] => Ok(Snapshot::Save(PathBuf::from(file))),
                _ => Err(usage(USAGE)),
            }),
            ["snapshot", "status"] => Some(match &words[2..] {
                [file] => Ok(Snapshot::Status(PathBuf::from(file))),
                _ => Err(usage(USAGE)),
            }),
            ["snapshot", ..] => Some(Err(usage(USAGE))),
            _ => None,
        }
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        match self {
            Snapshot::Save(file) => {
                let mut cluster = session.cluster();
                let (bytes, backup) = backup::take(&mut cluster).await.map_err(|e| match e {
                    TakeError::Client(e) => Failure::Beacon(e),
                    other => Failure::Check(other.to_string()),
                })?;
                write_new(file, &bytes).map_err(Failure::Check)?;
                let view = SnapshotView::of(file, &backup);
                Ok(session.print(&view, |v| {
                    format!(
                        "backup of cluster {} at index {} written to {} ({} bytes, checksum {})\n",
                        v.cluster, v.index, v.file, v.size, v.checksum
                    )
                }))
            }
            Snapshot::Status(file) => {
                let backup = backup::read(file).map_err(|e| Failure::Check(e.to_string()))?;
                Ok(session.print(&SnapshotView::of(file, &backup), render))
            }
        }
    }
}

/// Writes `bytes` to a new file at `path`, whole or not at all: a temporary file beside
/// it, synced, renamed into place. An existing file is never overwritten.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    if path.exists() {
        return Err(format!(
            "{} exists: give a new file (a backup never overwrites one)",
            path.display()
        ));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

fn render(v: &SnapshotView) -> String {
    let rows = vec![vec![
        v.cluster.clone(),
        v.index.to_string(),
        v.term.to_string(),
        v.size.to_string(),
        v.checksum.clone(),
        v.taken_by.clone(),
        v.version.clone(),
    ]];
    let mut out = table::render(
        &[
            "cluster", "index", "term", "size", "checksum", "taken_by", "version",
        ],
        &rows,
    );
    for c in &v.contents {
        out.push_str(&format!("  {c}\n"));
    }
    out
}
