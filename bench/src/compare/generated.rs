//! The backup the huge part restores: `n` registrations as the scale part's climb makes
//! them (type `bench`, the climb's service addresses, no metadata), in the file
//! `nebcli snapshot save` writes of a live cluster, so that `beacon restore` builds each
//! beacon's data directory from it as an operator's restore does. A live climb to ten
//! million takes too long on the machines the bench runs on; this reaches most of it.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use beacon::consensus::{Machine, Position, Snapshot};
use beacon::machines::registry::{NodeRecord, RegistrySnapshot};
use beacon::machines::{Configured, State};

use super::clients::service_addr;

/// The cluster the generated backup says it was taken from (a restored cluster needs
/// another name).
pub const FROM_CLUSTER: &str = "bench-generated";

/// Writes a backup of `n` registrations (node IDs 1 to `n`) to `path`; returns its size.
pub fn write(n: usize, path: &Path) -> anyhow::Result<u64> {
    let last = u32::try_from(n).context("more registrations than node IDs")?;
    let sections = beacon::config::Config::load(None, &Default::default())
        .context("the embedded configuration")?
        .machines;
    let mut state = State::configured(&sections).snapshot(0);
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    state.registry = RegistrySnapshot {
        last_node_id: last,
        nodes: (0..n)
            .map(|i| {
                let record = Arc::new(NodeRecord {
                    node_id: i as u32 + 1,
                    node_type: "bench".into(),
                    addr: service_addr(i),
                    access_addr: None,
                    worker_num: 0,
                    metadata: "".into(),
                    registered_ms: now_ms,
                    // Each made by the log entry at its own index, as a live climb's are.
                    term: 1,
                    index: i as u64 + 1,
                    owner: "".into(),
                    health: None,
                });
                (record.node_id, record)
            })
            .collect(),
        quarantined: Vec::new(),
        clocks: Vec::new(),
    };
    let snapshot = Snapshot {
        position: Position {
            index: n as u64 + 1,
            term: 1,
        },
        state,
        members: None,
    };
    let identity = serde_json::json!({ "cluster": FROM_CLUSTER });
    let bytes = beacon::backup::encode(
        &beacon::backup::Taken {
            cluster: FROM_CLUSTER,
            node: "beacon-bench",
            taken_at_ms: now_ms,
            identity: &identity,
        },
        &snapshot,
    );
    drop(snapshot);
    std::fs::write(path, &bytes).with_context(|| format!("write {}", path.display()))?;
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_backup_reads_back_with_every_registration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let size = write(1_000, &path).unwrap();
        let backup = beacon::backup::read(&path).unwrap();
        assert_eq!(backup.size, size);
        assert_eq!(backup.cluster, FROM_CLUSTER);
        assert_eq!(backup.position().index, 1_001);
        let nodes = &backup.snapshot.state.registry.nodes;
        assert_eq!(nodes.len(), 1_000);
        let last = nodes.get(1_000).unwrap();
        assert_eq!(last.addr, service_addr(999));
        assert!(
            backup
                .contents()
                .iter()
                .any(|c| c == "registry: 1000 registrations"),
            "{:?}",
            backup.contents()
        );
    }
}
