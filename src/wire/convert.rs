//! Conversions between the wire messages of `proto/beacon.proto` and the core's types.
//!
//! The core works with parsed, typed values (socket addresses, commands); the wire carries
//! strings and oneofs. Everything that comes off the wire is checked here, so a peer that sends
//! a record with an address that does not parse gets a precise error instead of a panic or a
//! silently dropped field.

use std::net::SocketAddr;

use crate::election::Heartbeat;
use crate::pb;
use crate::registry::{Command as RegistryCommand, NodeRecord, RegistrySnapshot};
use crate::replication::{Append, Entry, PeerMessage, Position, Snapshot};
use crate::state::{Command, StateSnapshot};

/// A wire message that does not describe a valid core value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("{field} `{value}` is not an ip:port address")]
    BadAddr { field: &'static str, value: String },
    #[error("log entry {index} carries no command")]
    NoCommand { index: u64 },
    #[error("{0} is missing")]
    Missing(&'static str),
}

fn parse_addr(field: &'static str, value: &str) -> Result<SocketAddr, ConvertError> {
    value.parse().map_err(|_| ConvertError::BadAddr {
        field,
        value: value.to_owned(),
    })
}

pub fn record_to_pb(r: &NodeRecord) -> pb::NodeInfo {
    pb::NodeInfo {
        node_id: r.node_id,
        node_type: r.node_type.clone(),
        addr: r.addr.to_string(),
        access_addr: r.access_addr.map(|a| a.to_string()).unwrap_or_default(),
        worker_num: r.worker_num,
        metadata: r.metadata.clone(),
        registered_ms: r.registered_ms,
        term: r.term,
        index: r.index,
    }
}

pub fn record_from_pb(n: pb::NodeInfo) -> Result<NodeRecord, ConvertError> {
    let access_addr = match n.access_addr.as_str() {
        "" => None,
        a => Some(parse_addr("NodeInfo.access_addr", a)?),
    };
    Ok(NodeRecord {
        node_id: n.node_id,
        addr: parse_addr("NodeInfo.addr", &n.addr)?,
        node_type: n.node_type,
        access_addr,
        worker_num: n.worker_num,
        metadata: n.metadata,
        registered_ms: n.registered_ms,
        term: n.term,
        index: n.index,
    })
}

pub fn entry_to_pb(e: &Entry) -> pb::LogEntry {
    use pb::log_entry::Command as C;
    let command = match &e.command {
        Command::Registry(RegistryCommand::Register(r)) => C::Register(record_to_pb(r)),
        Command::Registry(RegistryCommand::Update(r)) => C::Update(record_to_pb(r)),
        Command::Registry(RegistryCommand::Unregister(id)) => C::Unregister(*id),
        Command::Registry(RegistryCommand::Expire(id)) => C::Expire(*id),
        Command::Registry(RegistryCommand::Release(id)) => C::Release(*id),
        Command::LeaderStart => C::LeaderStart(true),
    };
    pb::LogEntry {
        index: e.index,
        term: e.term,
        command: Some(command),
    }
}

pub fn entry_from_pb(e: pb::LogEntry) -> Result<Entry, ConvertError> {
    use pb::log_entry::Command as C;
    let command = match e
        .command
        .ok_or(ConvertError::NoCommand { index: e.index })?
    {
        C::Register(r) => RegistryCommand::Register(record_from_pb(r)?).into(),
        C::Update(r) => RegistryCommand::Update(record_from_pb(r)?).into(),
        C::Unregister(id) => RegistryCommand::Unregister(id).into(),
        C::Expire(id) => RegistryCommand::Expire(id).into(),
        C::Release(id) => RegistryCommand::Release(id).into(),
        C::LeaderStart(_) => Command::LeaderStart,
    };
    Ok(Entry {
        index: e.index,
        term: e.term,
        command,
    })
}

pub fn snapshot_to_pb(s: &Snapshot) -> pb::Snapshot {
    pb::Snapshot {
        index: s.position.index,
        term: s.position.term,
        last_node_id: s.state.registry.last_node_id,
        nodes: s.state.registry.nodes.iter().map(record_to_pb).collect(),
        quarantined: s
            .state
            .registry
            .quarantined
            .iter()
            .map(|(r, remaining)| pb::Tombstone {
                node: Some(record_to_pb(r)),
                remaining_ms: *remaining,
            })
            .collect(),
    }
}

pub fn snapshot_from_pb(s: pb::Snapshot) -> Result<Snapshot, ConvertError> {
    let nodes = s
        .nodes
        .into_iter()
        .map(record_from_pb)
        .collect::<Result<_, _>>()?;
    let quarantined = s
        .quarantined
        .into_iter()
        .map(|t| {
            let node = t.node.ok_or(ConvertError::Missing("Tombstone.node"))?;
            Ok((record_from_pb(node)?, t.remaining_ms))
        })
        .collect::<Result<_, ConvertError>>()?;
    Ok(Snapshot {
        position: Position {
            index: s.index,
            term: s.term,
        },
        state: StateSnapshot {
            registry: RegistrySnapshot {
                last_node_id: s.last_node_id,
                nodes,
                quarantined,
            },
        },
    })
}

/// A heartbeat alone, as the election sees it.
pub fn heartbeat_of(e: &pb::Election) -> Result<Heartbeat, ConvertError> {
    let leader = match e.leader.as_str() {
        "" => None,
        l => Some(parse_addr("Election.leader", l)?),
    };
    Ok(Heartbeat {
        is_leader: e.is_leader != 0,
        term: e.term,
        leader,
        sees: e.sees,
        eligible: e.eligible,
    })
}

/// Encodes a peer message. The seed's fields are filled from the entries carried:
/// `added_node_id` lists the IDs they register, `removed_node_id` those they end.
pub fn message_to_pb(m: &PeerMessage) -> pb::Election {
    let mut e = pb::Election {
        is_leader: i32::from(m.heartbeat.is_leader),
        term: m.heartbeat.term,
        leader: m
            .heartbeat
            .leader
            .map(|l| l.to_string())
            .unwrap_or_default(),
        sees: m.heartbeat.sees,
        eligible: m.heartbeat.eligible,
        beat: m.beat,
        ack_beat: m.ack_beat,
        last_node_id: m.last_node_id,
        log_index: m.position.index,
        log_term: m.position.term,
        commit: m.commit,
        reject: m.reject,
        need_snapshot: m.need_snapshot,
        fetch: m.fetch,
        snapshot: m.snapshot.as_deref().map(snapshot_to_pb),
        ..Default::default()
    };
    if let Some(append) = &m.append {
        e.prev_index = append.prev.index;
        e.prev_term = append.prev.term;
        for entry in &append.entries {
            match &entry.command {
                Command::Registry(RegistryCommand::Register(r)) => e.added_node_id.push(r.node_id),
                Command::Registry(
                    RegistryCommand::Unregister(id) | RegistryCommand::Expire(id),
                ) => e.removed_node_id.push(*id),
                Command::Registry(RegistryCommand::Update(_) | RegistryCommand::Release(_))
                | Command::LeaderStart => {}
            }
            e.entries.push(entry_to_pb(entry));
        }
    }
    e
}

/// Decodes a peer message. An append is present when the sender gave a previous position or
/// entries (an empty append at a nonzero position asks the receiver where it stands).
pub fn message_from_pb(e: pb::Election) -> Result<PeerMessage, ConvertError> {
    let heartbeat = heartbeat_of(&e)?;
    let prev = Position {
        index: e.prev_index,
        term: e.prev_term,
    };
    let append = if e.prev_index != 0 || e.prev_term != 0 || !e.entries.is_empty() {
        let entries = e
            .entries
            .into_iter()
            .map(entry_from_pb)
            .collect::<Result<_, _>>()?;
        Some(Append { prev, entries })
    } else {
        None
    };
    let snapshot = e.snapshot.map(snapshot_from_pb).transpose()?.map(Box::new);
    Ok(PeerMessage {
        heartbeat,
        position: Position {
            index: e.log_index,
            term: e.log_term,
        },
        commit: e.commit,
        last_node_id: e.last_node_id,
        append,
        snapshot,
        reject: e.reject,
        need_snapshot: e.need_snapshot,
        fetch: e.fetch,
        beat: e.beat,
        ack_beat: e.ack_beat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u32) -> NodeRecord {
        NodeRecord {
            node_id: id,
            node_type: "LOGIC".into(),
            addr: SocketAddr::from(([10, 0, 0, 1], 9000 + id as u16)),
            access_addr: Some(SocketAddr::from(([1, 2, 3, 4], 80))),
            worker_num: 4,
            metadata: r#"{"zone":"a"}"#.into(),
            registered_ms: 1_700_000_000_000,
            term: 2,
            index: u64::from(id),
        }
    }

    #[test]
    fn messages_round_trip_and_fill_the_seed_fields() {
        let m = PeerMessage {
            heartbeat: Heartbeat {
                is_leader: true,
                term: 4,
                leader: Some(SocketAddr::from(([127, 0, 0, 1], 16000))),
                sees: 0b101,
                eligible: true,
            },
            position: Position { index: 9, term: 4 },
            commit: 7,
            last_node_id: 3,
            append: Some(Append {
                prev: Position { index: 5, term: 1 },
                entries: vec![
                    Entry {
                        index: 6,
                        term: 4,
                        command: RegistryCommand::Register(record(3)).into(),
                    },
                    Entry {
                        index: 7,
                        term: 4,
                        command: RegistryCommand::Expire(1).into(),
                    },
                    Entry {
                        index: 8,
                        term: 4,
                        command: RegistryCommand::Update(record(3)).into(),
                    },
                    Entry {
                        index: 9,
                        term: 4,
                        command: RegistryCommand::Unregister(2).into(),
                    },
                ],
            }),
            snapshot: Some(Box::new(Snapshot {
                position: Position { index: 5, term: 1 },
                state: StateSnapshot {
                    registry: RegistrySnapshot {
                        last_node_id: 2,
                        nodes: vec![record(2)],
                        quarantined: vec![(record(1), 500)],
                    },
                },
            })),
            reject: false,
            need_snapshot: true,
            fetch: false,
            beat: 7,
            ack_beat: 3,
        };
        let e = message_to_pb(&m);
        assert_eq!(e.added_node_id, vec![3]);
        assert_eq!(e.removed_node_id, vec![1, 2]);
        assert_eq!(e.last_node_id, 3);
        assert_eq!(message_from_pb(e).unwrap(), m);
    }

    #[test]
    fn a_bare_heartbeat_has_no_append() {
        let e = pb::Election {
            is_leader: 1,
            term: 3,
            ..Default::default()
        };
        let m = message_from_pb(e).unwrap();
        assert!(m.append.is_none() && m.snapshot.is_none());
        assert_eq!(m.heartbeat.term, 3);
    }

    #[test]
    fn bad_records_are_refused_with_the_field() {
        let mut info = record_to_pb(&record(1));
        info.addr = "nowhere".into();
        let e = pb::Election {
            prev_index: 1,
            entries: vec![pb::LogEntry {
                index: 2,
                term: 1,
                command: Some(pb::log_entry::Command::Register(info)),
            }],
            ..Default::default()
        };
        assert_eq!(
            message_from_pb(e).unwrap_err().to_string(),
            "NodeInfo.addr `nowhere` is not an ip:port address"
        );
        let e = pb::Election {
            prev_index: 1,
            entries: vec![pb::LogEntry {
                index: 2,
                term: 1,
                command: None,
            }],
            ..Default::default()
        };
        assert!(matches!(
            message_from_pb(e),
            Err(ConvertError::NoCommand { index: 2 })
        ));
    }
}
