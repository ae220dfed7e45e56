//! The config store on the wire (`proto/configs.proto`): its command and error codes, its
//! part of log entries and snapshots, and conversions between its messages and types.

use prost::Message as _;

use super::state::{ConfigStore, Document, Op, Past, Write};
use crate::pb::configs as pb;
use crate::wire::codes::codes;
use crate::wire::{MachineWire, WireError};

codes! {
    command;
    /// The config store's command codes.
    pub enum ConfigCmd {
        /// Checks and changes, all or nothing (`WriteRequest` / `WriteReply`).
        Write = 701,
        /// A document, or those under a prefix (`GetRequest` / `GetReply`).
        Get = 703,
        /// The values a document held (`HistoryRequest` / `HistoryReply`).
        History = 705,
        /// Follow documents: a listing, then a notice per change (`WatchRequest` /
        /// `WatchReply`).
        Watch = 707,
        /// Pushed to a watcher: one committed write's changes (`ConfigNotice`).
        Notice = 709,
    }
}

codes! {
    error;
    /// The config store's codes carried by `ErrorReply`.
    pub enum ConfigErrorCode {
        /// No document has the key given.
        UnknownDocument = 60 => "UNKNOWN_DOCUMENT" NotFound,
        /// A compare-and-set check failed: the document is at another revision.
        RevisionMismatch = 61 => "REVISION_MISMATCH" FailedPrecondition,
        /// A value over `configs.max_value_bytes`, or the store at `configs.max_documents`.
        ConfigTooLarge = 62 => "CONFIG_TOO_LARGE" ResourceExhausted,
    }
}

pub fn op_to_pb(op: &Op) -> pb::Op {
    match op {
        Op::Put {
            key,
            value,
            json,
            path,
        } => pb::Op {
            key: key.clone(),
            value: value.clone(),
            json: *json,
            path: path.clone(),
            delete: false,
        },
        Op::Delete { key } => pb::Op {
            key: key.clone(),
            delete: true,
            ..Default::default()
        },
    }
}

pub fn op_from_pb(op: pb::Op) -> Op {
    if op.delete {
        Op::Delete { key: op.key }
    } else {
        Op::Put {
            key: op.key,
            value: op.value,
            json: op.json,
            path: op.path,
        }
    }
}

pub fn past_to_pb(p: &Past) -> pb::Past {
    pb::Past {
        revision: p.revision,
        value: p.value.clone(),
        wall_ms: p.wall_ms,
    }
}

pub fn document_to_pb(d: &Document, with_history: bool) -> pb::Document {
    pb::Document {
        key: d.key.clone(),
        value: d.value.clone(),
        json: d.json,
        path: d.path.clone(),
        revision: d.revision,
        created: d.created,
        version: d.version,
        wall_ms: d.wall_ms,
        history: if with_history {
            d.history.iter().map(past_to_pb).collect()
        } else {
            Vec::new()
        },
    }
}

/// A value as JSON: the string it is when it is UTF-8, else its bytes.
pub fn value_json(value: &[u8]) -> serde_json::Value {
    match std::str::from_utf8(value) {
        Ok(text) => text.into(),
        Err(_) => value.to_vec().into(),
    }
}

/// A document as JSON (nebcli's `-w json`, the admin API): its fields, its size in `bytes`,
/// and its value when `with_value`.
pub fn document_json(d: &pb::Document, with_value: bool) -> serde_json::Value {
    let mut v = serde_json::json!({
        "key": d.key,
        "json": d.json,
        "path": d.path,
        "revision": d.revision,
        "created": d.created,
        "version": d.version,
        "wall_ms": d.wall_ms,
        "bytes": d.value.len(),
    });
    if with_value {
        v["value"] = value_json(&d.value);
    }
    v
}

/// A `GetReply` as JSON: its documents (see [`document_json`]), the index and who answered.
pub fn get_reply_json(r: &pb::GetReply, with_values: bool) -> serde_json::Value {
    let documents: Vec<serde_json::Value> = r
        .documents
        .iter()
        .map(|d| document_json(d, with_values))
        .collect();
    serde_json::json!({"documents": documents, "index": r.index, "node": r.node})
}

pub fn document_from_pb(d: pb::Document) -> Document {
    Document {
        key: d.key,
        value: d.value,
        json: d.json,
        path: d.path,
        revision: d.revision,
        created: d.created,
        version: d.version,
        wall_ms: d.wall_ms,
        history: d
            .history
            .into_iter()
            .map(|p| Past {
                revision: p.revision,
                value: p.value,
                wall_ms: p.wall_ms,
            })
            .collect(),
    }
}

impl MachineWire for ConfigStore {
    fn encode_command(w: &Write, buf: &mut Vec<u8>) {
        pb::ConfigEntry {
            write: Some(pb::ConfigWrite {
                revision: w.revision,
                wall_ms: w.wall_ms,
                checks: w
                    .checks
                    .iter()
                    .map(|(key, revision)| pb::Check {
                        key: key.clone(),
                        revision: *revision,
                    })
                    .collect(),
                ops: w.ops.iter().map(op_to_pb).collect(),
            }),
        }
        .encode_raw(buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Write>, WireError> {
        let Some(w) = pb::ConfigEntry::decode(entry)?.write else {
            return Ok(None);
        };
        Ok(Some(Write {
            revision: w.revision,
            wall_ms: w.wall_ms,
            checks: w.checks.into_iter().map(|c| (c.key, c.revision)).collect(),
            ops: w.ops.into_iter().map(op_from_pb).collect(),
        }))
    }

    fn encode_snapshot(docs: &Vec<Document>, buf: &mut Vec<u8>) {
        pb::ConfigSnapshot {
            documents: docs.iter().map(|d| document_to_pb(d, true)).collect(),
        }
        .encode_raw(buf);
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<Vec<Document>, WireError> {
        Ok(pb::ConfigSnapshot::decode(bytes)?
            .documents
            .into_iter()
            .map(document_from_pb)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Entry, Machine, Payload};
    use crate::wire::envelope::{entry_bytes, entry_from_bytes};

    #[test]
    fn a_write_and_a_snapshot_round_trip() {
        let w = Write {
            revision: 9,
            wall_ms: 1_700_000_000_000,
            checks: vec![("cluster/a".into(), 3), ("cluster/b".into(), 0)],
            ops: vec![
                Op::Put {
                    key: "file/game".into(),
                    value: b"x=1".to_vec(),
                    json: false,
                    path: "conf/game.ini".into(),
                },
                Op::Delete {
                    key: "cluster/a".into(),
                },
            ],
        };
        let e = Entry {
            index: 9,
            term: 2,
            payload: Payload::Command(w.clone()),
        };
        assert_eq!(
            entry_from_bytes::<ConfigStore>(&entry_bytes::<ConfigStore>(&e)).unwrap(),
            e
        );
        let mut s = ConfigStore::new(3);
        s.apply(
            &Write {
                checks: vec![],
                ..w.clone()
            },
            0,
        )
        .unwrap();
        let mut buf = Vec::new();
        ConfigStore::encode_snapshot(&s.snapshot(0), &mut buf);
        assert_eq!(ConfigStore::decode_snapshot(&buf).unwrap(), s.snapshot(0));
    }
}
