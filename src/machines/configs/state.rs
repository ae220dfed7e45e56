//! The config store's replicated state: documents by key, each with its value, its revision
//! (the log index of its last change) and the last values it held.
//!
//! A key says whom a document concerns, NebulaBeacon's scopes as the first part:
//! `cluster/NAME` (every service), `type/TYPE/NAME` (the services of a node type),
//! `node/IP:PORT/NAME` (one registered service, by address), `id/NODE_ID/NAME` (one
//! registration, by node ID) and `file/NAME` (a named custom
//! file, with the relative path it is written to). A write is one log entry: its checks
//! (compare-and-set on a revision) and its changes apply together or not at all, at one
//! revision, so revisions only grow and a check on an old revision changes nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::allow::Allowlist;
use crate::consensus::Machine;
use crate::time::Millis;

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// The scope of the beacons' own settings (no service watches it).
const BEACON_SCOPE: &str = "beacon";
const IP_WHITE_NAME: &str = "ip_white";
/// The cluster's allowlist (NebulaBeacon's `ip_white`, [`crate::allow`]): networks
/// separated by spaces or commas.
pub const IP_WHITE: &str = "beacon/ip_white";

/// A value a document held, from `revision` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Past {
    pub revision: u64,
    pub value: Vec<u8>,
    pub wall_ms: u64,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub key: String,
    pub value: Vec<u8>,
    /// Declared JSON (checked when written).
    pub json: bool,
    /// A custom file's relative path (`file/` keys); empty otherwise.
    pub path: String,
    /// The log index of its last change.
    pub revision: u64,
    /// The log index that created it.
    pub created: u64,
    /// How many times it was written since it was created.
    pub version: u64,
    pub wall_ms: u64,
    /// The values it held before, newest first, at most the store's `history` of them.
    pub history: VecDeque<Past>,
}

/// One change of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        key: String,
        value: Vec<u8>,
        json: bool,
        path: String,
    },
    Delete {
        key: String,
    },
}

impl Op {
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// A write: the checks that held when the leader took it, and its changes, at `revision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub revision: u64,
    pub wall_ms: u64,
    /// `(key, revision)`: the document must be at that revision (0: must not exist).
    pub checks: Vec<(String, u64)>,
    pub ops: Vec<Op>,
}

/// What a write changed, for watchers: each key with its document now (`None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub revision: u64,
    pub changed: Vec<(String, Option<Document>)>,
}

/// A write that does not fit the state: the replicas have diverged (the leader checked it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("check failed: `{key}` is at revision {actual}, the write expected {expected}")]
    CheckFailed {
        key: String,
        expected: u64,
        actual: u64,
    },
    #[error("revision {revision} is not after the store's {last}")]
    Backward { revision: u64, last: u64 },
}

/// A key that names no scope beacon knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` is not a config key: {why}")]
pub struct InvalidKey {
    pub key: String,
    pub why: String,
}

/// Checks `key`: `cluster/NAME`, `type/TYPE/NAME`, `node/IP:PORT/NAME` or `file/NAME`,
/// each part non-empty, printable, without spaces.
pub fn check_key(key: &str) -> Result<(), InvalidKey> {
    let bad = |why: &str| InvalidKey {
        key: key.to_owned(),
        why: why.to_owned(),
    };
    if key.len() > MAX_KEY_LEN {
        return Err(bad(&format!("longer than {MAX_KEY_LEN} bytes")));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it holds a space or a control character"));
    }
    let parts: Vec<&str> = key.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad("a part between slashes is empty"));
    }
    match parts.as_slice() {
        ["cluster", _, ..] | ["file", _, ..] => Ok(()),
        [BEACON_SCOPE, name] if *name == IP_WHITE_NAME => Ok(()),
        [BEACON_SCOPE, ..] => Err(bad(&format!(
            "the beacons' own settings are `{IP_WHITE}` alone"
        ))),
        ["type", _, _, ..] => Ok(()),
        ["id", id, _, ..] => match id.parse::<u32>() {
            Ok(n) if n > 0 => Ok(()),
            _ => Err(bad(&format!("`{id}` is not a node ID (1 or more)"))),
        },
        ["node", addr, _, ..] => addr
            .parse::<std::net::SocketAddr>()
            .map(|_| ())
            .map_err(|_| bad(&format!("`{addr}` is not the IP:PORT of a service"))),
        _ => Err(bad(
            "it starts with cluster/NAME, type/TYPE/NAME, node/IP:PORT/NAME, id/NODE_ID/NAME, file/NAME or beacon/ip_white",
        )),
    }
}

/// The scopes a key starts with (see [`check_key`]).
const SCOPES: [&str; 6] = ["cluster/", "type/", "node/", "id/", "file/", "beacon/"];

/// Checks that some key could start with `prefix` (a watch or a listing by prefix): it is
/// empty, starts one of the scopes, or starts with one. A prefix no key can have would
/// follow nothing, silently.
pub fn check_prefix(prefix: &str) -> Result<(), InvalidKey> {
    let possible = prefix.is_empty()
        || SCOPES
            .iter()
            .any(|scope| scope.starts_with(prefix) || prefix.starts_with(scope));
    if possible {
        return Ok(());
    }
    Err(InvalidKey {
        key: prefix.to_owned(),
        why: "no key starts with this prefix: keys start with cluster/, type/, node/, id/, file/ or beacon/".to_owned(),
    })
}

/// The documents.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    docs: BTreeMap<String, Document>,
    /// How many earlier values each document keeps (key `configs.history`).
    keep: usize,
    /// The revision of the last write (0 before the first).
    last: u64,
    /// `IP_WHITE`, parsed once per change (read at every connection a beacon accepts).
    allowlist: Option<Arc<Allowlist>>,
}

impl ConfigStore {
    pub fn new(keep: usize) -> ConfigStore {
        ConfigStore {
            docs: BTreeMap::new(),
            keep,
            last: 0,
            allowlist: None,
        }
    }

    /// The cluster's allowlist (`beacon/ip_white`), if it is set. One that does not parse
    /// (the leader checks each write, so never) counts as not set.
    pub fn allowlist(&self) -> Option<&Arc<Allowlist>> {
        self.allowlist.as_ref()
    }

    fn parse_allowlist(&mut self) {
        self.allowlist = self.docs.get(IP_WHITE).and_then(|d| {
            let text = std::str::from_utf8(&d.value).ok()?;
            Allowlist::parse(text).ok().map(Arc::new)
        });
    }

    pub fn get(&self, key: &str) -> Option<&Document> {
        self.docs.get(key)
    }

    /// The documents whose key starts with `prefix`, in key order.
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Document> {
        self.docs
            .range(prefix.to_owned()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(_, d)| d)
    }

    /// The revision `key` is at (0: it does not exist).
    pub fn revision(&self, key: &str) -> u64 {
        self.docs.get(key).map_or(0, |d| d.revision)
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The revision of the last write.
    pub fn last_revision(&self) -> u64 {
        self.last
    }

    /// The first of `checks` that does not hold, as `(key, expected, actual)`.
    pub fn failed_check<'a>(&self, checks: &'a [(String, u64)]) -> Option<(&'a str, u64, u64)> {
        checks
            .iter()
            .map(|(k, want)| (k.as_str(), *want, self.revision(k)))
            .find(|(_, want, actual)| want != actual)
    }

    fn write(&mut self, w: &Write) -> Result<Change, ApplyError> {
        if w.revision <= self.last {
            return Err(ApplyError::Backward {
                revision: w.revision,
                last: self.last,
            });
        }
        if let Some((key, expected, actual)) = self.failed_check(&w.checks) {
            return Err(ApplyError::CheckFailed {
                key: key.to_owned(),
                expected,
                actual,
            });
        }
        self.last = w.revision;
        let mut changed = Vec::with_capacity(w.ops.len());
        for op in &w.ops {
            match op {
                Op::Put {
                    key,
                    value,
                    json,
                    path,
                } => {
                    let doc = match self.docs.remove(key) {
                        Some(mut old) => {
                            old.history.push_front(Past {
                                revision: old.revision,
                                value: std::mem::take(&mut old.value),
                                wall_ms: old.wall_ms,
                            });
                            old.history.truncate(self.keep);
                            Document {
                                value: value.clone(),
                                json: *json,
                                path: path.clone(),
                                revision: w.revision,
                                version: old.version + 1,
                                wall_ms: w.wall_ms,
                                ..old
                            }
                        }
                        None => Document {
                            key: key.clone(),
                            value: value.clone(),
                            json: *json,
                            path: path.clone(),
                            revision: w.revision,
                            created: w.revision,
                            version: 1,
                            wall_ms: w.wall_ms,
                            history: VecDeque::new(),
                        },
                    };
                    changed.push((key.clone(), Some(doc.clone())));
                    self.docs.insert(key.clone(), doc);
                }
                Op::Delete { key } => {
                    if self.docs.remove(key).is_some() {
                        changed.push((key.clone(), None));
                    }
                }
            }
        }
        if changed.iter().any(|(key, _)| key == IP_WHITE) {
            self.parse_allowlist();
        }
        Ok(Change {
            revision: w.revision,
            changed,
        })
    }
}

impl Default for ConfigStore {
    fn default() -> ConfigStore {
        ConfigStore::new(super::ConfigLimits::default().history)
    }
}

impl Machine for ConfigStore {
    type Command = Write;
    type Change = Change;
    type Snapshot = Vec<Document>;
    type ApplyError = ApplyError;

    fn apply(&mut self, w: &Write, _now: Millis) -> Result<Option<Change>, ApplyError> {
        let change = self.write(w)?;
        Ok((!change.changed.is_empty()).then_some(change))
    }

    fn snapshot(&self, _now: Millis) -> Vec<Document> {
        self.docs.values().cloned().collect()
    }

    fn restore(&mut self, snapshot: Vec<Document>, _now: Millis) {
        self.last = snapshot.iter().map(|d| d.revision).max().unwrap_or(0);
        self.docs = snapshot.into_iter().map(|d| (d.key.clone(), d)).collect();
        self.parse_allowlist();
    }

    fn records(&self) -> usize {
        self.docs.len()
    }

    fn summary(&self) -> String {
        format!("{} config documents", self.docs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_must_be_one_some_key_could_have() {
        for ok in [
            "",
            "c",
            "cluster",
            "cluster/",
            "cluster/log",
            "type/WEB/",
            "id/",
            "be",
        ] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["demo/", "x", "clusters/", "/cluster/"] {
            let e = check_prefix(bad).unwrap_err().to_string();
            assert!(e.contains("no key starts with this prefix"), "{bad}: {e}");
        }
    }

    fn put(key: &str, value: &str) -> Op {
        Op::Put {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            json: false,
            path: String::new(),
        }
    }

    fn write(revision: u64, checks: &[(&str, u64)], ops: Vec<Op>) -> Write {
        Write {
            revision,
            wall_ms: revision * 10,
            checks: checks.iter().map(|(k, r)| ((*k).into(), *r)).collect(),
            ops,
        }
    }

    #[test]
    fn the_allowlist_follows_its_document_through_writes_and_snapshots() {
        let mut s = ConfigStore::new(3);
        assert!(s.allowlist().is_none());
        s.apply(&write(1, &[], vec![put(IP_WHITE, "10.0.0.0/8")]), 0)
            .unwrap();
        let list = s.allowlist().expect("set").clone();
        assert!(list.admits("10.1.1.1".parse().unwrap()));
        assert!(!list.admits("11.1.1.1".parse().unwrap()));
        s.apply(&write(2, &[], vec![put("cluster/a", "1")]), 0)
            .unwrap();
        assert!(Arc::ptr_eq(s.allowlist().unwrap(), &list), "parsed once");
        let mut restored = ConfigStore::new(3);
        restored.restore(s.snapshot(0), 0);
        assert_eq!(
            restored.allowlist().map(|l| l.to_string()),
            Some("10.0.0.0/8".into())
        );
        s.apply(
            &write(
                3,
                &[],
                vec![Op::Delete {
                    key: IP_WHITE.into(),
                }],
            ),
            0,
        )
        .unwrap();
        assert!(
            s.allowlist().is_none(),
            "deleted: each beacon's own list applies"
        );
    }

    #[test]
    fn keys_name_a_scope() {
        for good in [
            "cluster/log_level",
            "type/LOGIC/node_config",
            "node/10.0.0.1:80/node_config",
            "file/game.ini",
            "cluster/a/b/c",
            "id/7/log_level",
            "beacon/ip_white",
        ] {
            check_key(good).unwrap();
        }
        for (bad, says) in [
            ("log_level", "it starts with cluster/NAME"),
            ("type/LOGIC", "it starts with"),
            ("node/host/x", "not the IP:PORT"),
            ("cluster//x", "empty"),
            ("cluster/a b", "space"),
            ("id/0/x", "not a node ID"),
            ("id/seven/x", "not a node ID"),
        ] {
            let e = check_key(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_write_applies_whole_at_its_revision_and_keeps_history() {
        let mut s = ConfigStore::new(2);
        let c = s
            .apply(
                &write(3, &[], vec![put("cluster/a", "1"), put("cluster/b", "x")]),
                0,
            )
            .unwrap()
            .unwrap();
        assert_eq!(c.changed.len(), 2);
        assert_eq!(s.revision("cluster/a"), 3);
        for (rev, v) in [(5, "2"), (7, "3"), (9, "4")] {
            s.apply(
                &write(
                    rev,
                    &[("cluster/a", s.revision("cluster/a"))],
                    vec![put("cluster/a", v)],
                ),
                0,
            )
            .unwrap();
        }
        let a = s.get("cluster/a").unwrap();
        assert_eq!((a.revision, a.created, a.version), (9, 3, 4));
        let kept: Vec<u64> = a.history.iter().map(|p| p.revision).collect();
        assert_eq!(
            kept,
            vec![7, 5],
            "the last two earlier values, newest first"
        );
        assert_eq!(s.with_prefix("cluster/").count(), 2);
        assert_eq!(s.with_prefix("cluster/b").count(), 1);
    }

    #[test]
    fn a_failed_check_or_an_old_revision_changes_nothing() {
        let mut s = ConfigStore::new(5);
        s.apply(&write(3, &[], vec![put("cluster/a", "1")]), 0)
            .unwrap();
        let before = s.snapshot(0);
        let e = s
            .apply(
                &write(
                    4,
                    &[("cluster/a", 2)],
                    vec![put("cluster/a", "x"), put("cluster/z", "y")],
                ),
                0,
            )
            .unwrap_err();
        assert!(
            matches!(e, ApplyError::CheckFailed { actual: 3, .. }),
            "{e}"
        );
        let e = s
            .apply(
                &write(4, &[("cluster/new", 1)], vec![put("cluster/z", "y")]),
                0,
            )
            .unwrap_err();
        assert!(
            matches!(e, ApplyError::CheckFailed { actual: 0, .. }),
            "{e}"
        );
        let e = s
            .apply(&write(3, &[], vec![put("cluster/z", "y")]), 0)
            .unwrap_err();
        assert!(matches!(e, ApplyError::Backward { .. }), "{e}");
        assert_eq!(s.snapshot(0), before);
        // Absent means revision 0; a delete of a missing key changes nothing.
        s.apply(
            &write(4, &[("cluster/z", 0)], vec![put("cluster/z", "y")]),
            0,
        )
        .unwrap();
        assert!(
            s.apply(
                &write(
                    5,
                    &[],
                    vec![Op::Delete {
                        key: "cluster/q".into()
                    }]
                ),
                0
            )
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn a_snapshot_restores_the_documents_and_the_last_revision() {
        let mut s = ConfigStore::new(3);
        s.apply(&write(3, &[], vec![put("cluster/a", "1")]), 0)
            .unwrap();
        s.apply(&write(6, &[], vec![put("cluster/a", "2")]), 0)
            .unwrap();
        let mut other = ConfigStore::new(3);
        other.restore(s.snapshot(0), 0);
        assert_eq!(other.snapshot(0), s.snapshot(0));
        assert_eq!(other.last_revision(), 6);
    }
}
