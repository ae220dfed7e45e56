//! The registry on the wire (`proto/registry.proto`): its command codes, its part of log
//! entries, snapshots and heartbeats, and conversions between its messages and its types.
//!
//! Everything that comes off the wire is checked here, so a peer that sends a record with an
//! address that does not parse gets a precise error instead of a panic or a silently dropped
//! field.

use std::sync::Arc;

use prost::Message as _;

use super::state::{
    Command, Health, HealthFilter, IdRange, NodeRecord, Registry, RegistrySnapshot, Status,
};
use crate::pb::registry as pb;
use crate::wire::codes::codes;
use crate::wire::{MachineWire, WireError, parse_addr};

pub use crate::pb::registry::LoadStats;

codes! {
    command;
    /// The registry's command codes (NebulaBeacon's where it had them).
    pub enum RegistryCmd {
        /// A service's periodic report, renewing its lease (`NodeReport` / `NodeReportReply`).
        NodeReport = 101,
        /// Register a service and get its node ID (`RegisterRequest` / `RegisterReply`).
        Register = 103,
        /// Pushed to watchers, one-way: what changed (`NodeNotice`).
        NodeNotice = 105,
        /// End a node ID's quarantine early (`FreeIdRequest` / `FreeIdReply`).
        FreeId = 111,
        /// End a registration (`UnregisterRequest` / `UnregisterReply`).
        Unregister = 115,
        /// Follow the nodes of some types (`WatchRequest` / `WatchReply`, then `NodeNotice`s).
        Watch = 117,
        /// An operator sets a registration's health or drains it (`SetHealthRequest` /
        /// `SetHealthReply`).
        SetHealth = 119,
        /// What a registration still holds in every machine (`HoldsRequest` / `HoldsReply`).
        Holds = 121,
        /// Registered services (`NodesRequest` / `NodesReply`).
        Nodes = 303,
        /// The node-ID allocator (`IdsRequest` / `IdsReply`).
        Ids = 305,
        /// Configured subscriptions (`SubscriptionsRequest` / `SubscriptionsReply`).
        Subscriptions = 307,
    }
}

codes! {
    error;
    /// The registry's codes carried by `ErrorReply` (the core's are [`crate::wire::ErrorCode`]).
    pub enum RegistryErrorCode {
        /// Every node ID of the configured range is in use or in quarantine.
        IdsExhausted = 12 => "IDS_EXHAUSTED" ResourceExhausted,
        /// The address is registered under another node type.
        Conflict = 13 => "CONFLICT" AlreadyExists,
        /// The reporting service holds no registration: it must stop using its ID.
        NoLease = 14 => "NO_LEASE" FailedPrecondition,
        /// No registration matches the node ID or address given.
        UnknownTarget = 15 => "UNKNOWN_TARGET" NotFound,
        /// The registration named by the request's fencing token no longer holds the node ID
        /// (it ended; the ID may have gone to another service): nothing was changed.
        NotHolder = 19 => "NOT_HOLDER" FailedPrecondition,
        /// The node ID is held by a live registration (an operator asked to free it).
        IdInUse = 22 => "ID_IN_USE" FailedPrecondition,
    }
}

/// The registry's part of a peer's `Hello`: the node-ID range it allocates from.
pub fn hello_part(range: IdRange) -> Vec<u8> {
    pb::RegistryHello {
        id_first: range.first,
        id_last: range.last,
    }
    .encode_to_vec()
}

/// The node-ID range a peer's `Hello` (the whole message) announces, as `(first, last)`.
pub fn hello_range(hello: &[u8]) -> Result<(u32, u32), WireError> {
    let part = pb::RegistryHello::decode(hello)?;
    Ok((part.id_first, part.id_last))
}

pub fn record_to_pb(r: &NodeRecord) -> pb::NodeInfo {
    pb::NodeInfo {
        node_id: r.node_id,
        node_type: r.node_type.to_string(),
        addr: r.addr.to_string(),
        access_addr: r
            .access_addr
            .as_ref()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        worker_num: r.worker_num,
        metadata: r.metadata.to_string(),
        registered_ms: r.registered_ms,
        term: r.term,
        index: r.index,
        owner: r.owner.to_string(),
        health: r.health.as_deref().map(health_to_pb),
    }
}

pub fn status_to_pb(status: Status) -> pb::HealthStatus {
    match status {
        Status::Passing => pb::HealthStatus::HealthPassing,
        Status::Warning => pb::HealthStatus::HealthWarning,
        Status::Critical => pb::HealthStatus::HealthCritical,
    }
}

pub fn status_from_pb(status: pb::HealthStatus) -> Status {
    match status {
        pb::HealthStatus::HealthPassing => Status::Passing,
        pb::HealthStatus::HealthWarning => Status::Warning,
        pb::HealthStatus::HealthCritical => Status::Critical,
    }
}

/// A status off the wire, by its number: one this beacon does not know is refused, naming
/// `field`.
pub fn status_of(field: &'static str, value: i32) -> Result<Status, WireError> {
    pb::HealthStatus::try_from(value)
        .map(status_from_pb)
        .map_err(|_| {
            WireError::Invalid(format!(
                "{field}: {value} is not a health status (0 passing, 1 warning, 2 critical)"
            ))
        })
}

fn health_to_pb(h: &Health) -> pb::Health {
    pb::Health {
        status: status_to_pb(h.status).into(),
        draining: h.draining,
        note: h.note.clone(),
        since_ms: h.since_ms,
    }
}

/// A health filter off the wire: one this beacon does not know is refused, naming `field`.
pub fn filter_of(field: &'static str, value: i32) -> Result<HealthFilter, WireError> {
    use pb::HealthFilter as F;
    Ok(match F::try_from(value) {
        Ok(F::FilterAny) => HealthFilter::Any,
        Ok(F::FilterServing) => HealthFilter::Serving,
        Ok(F::FilterPassing) => HealthFilter::Only(Status::Passing),
        Ok(F::FilterWarning) => HealthFilter::Only(Status::Warning),
        Ok(F::FilterCritical) => HealthFilter::Only(Status::Critical),
        Ok(F::FilterDraining) => HealthFilter::Draining,
        Err(_) => {
            return Err(WireError::Invalid(format!(
                "{field}: {value} is not a health filter (0 any, 1 serving, 2 passing, 3 warning, 4 critical, 5 draining)"
            )));
        }
    })
}

/// `filter` on the wire.
pub fn filter_to_pb(filter: HealthFilter) -> pb::HealthFilter {
    use pb::HealthFilter as F;
    match filter {
        HealthFilter::Any => F::FilterAny,
        HealthFilter::Serving => F::FilterServing,
        HealthFilter::Only(Status::Passing) => F::FilterPassing,
        HealthFilter::Only(Status::Warning) => F::FilterWarning,
        HealthFilter::Only(Status::Critical) => F::FilterCritical,
        HealthFilter::Draining => F::FilterDraining,
    }
}

pub fn record_from_pb(n: pb::NodeInfo) -> Result<NodeRecord, WireError> {
    let access_addr = match n.access_addr.as_str() {
        "" => None,
        a => Some(Box::new(parse_addr("NodeInfo.access_addr", a)?)),
    };
    Ok(NodeRecord {
        node_id: n.node_id,
        addr: parse_addr("NodeInfo.addr", &n.addr)?,
        node_type: n.node_type.into(),
        access_addr,
        worker_num: n.worker_num,
        metadata: n.metadata.into(),
        registered_ms: n.registered_ms,
        term: n.term,
        index: n.index,
        owner: n.owner.into(),
        health: match n.health {
            None => None,
            Some(h) => Some(Box::new(Health {
                status: status_of("NodeInfo.health.status", h.status)?,
                draining: h.draining,
                note: h.note,
                since_ms: h.since_ms,
            }))
            .filter(|h| **h != Health::PASSING),
        },
    })
}

impl MachineWire for Registry {
    fn encode_command(command: &Command, buf: &mut Vec<u8>) {
        use pb::registry_entry::Command as C;
        let command = match command {
            Command::Register(r) => C::Register(record_to_pb(r)),
            Command::Update(r) => C::Update(record_to_pb(r)),
            Command::Unregister(id) => C::Unregister(*id),
            Command::Expire(id) => C::Expire(*id),
            Command::Release(id) => C::Release(*id),
            Command::Clock { node_id, ms } => C::Clock(pb::ClockMark {
                node_id: *node_id,
                ms: *ms,
            }),
        };
        pb::RegistryEntry {
            command: Some(command),
        }
        .encode_raw(buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Command>, WireError> {
        use pb::registry_entry::Command as C;
        let Some(command) = pb::RegistryEntry::decode(entry)?.command else {
            return Ok(None);
        };
        Ok(Some(match command {
            C::Register(r) => Command::Register(record_from_pb(r)?.into()),
            C::Update(r) => Command::Update(record_from_pb(r)?.into()),
            C::Unregister(id) => Command::Unregister(id),
            C::Expire(id) => Command::Expire(id),
            C::Release(id) => Command::Release(id),
            C::Clock(mark) => Command::Clock {
                node_id: mark.node_id,
                ms: mark.ms,
            },
        }))
    }

    /// `pb::RegistrySnapshot`, field by field as prost writes it, each record encoded as
    /// it is walked: collected whole first, the records' messages (with a copy of every
    /// string) held 187 bytes a registration at once beside the state, on every compaction
    /// and catch-up, two gigabytes at ten million.
    fn encode_snapshot(s: &RegistrySnapshot, buf: &mut Vec<u8>) {
        use prost::encoding::{message, uint32};
        if s.last_node_id != 0 {
            uint32::encode(3, &s.last_node_id, buf);
        }
        for r in s.nodes.values() {
            message::encode(4, &record_to_pb(r), buf);
        }
        for (r, remaining) in &s.quarantined {
            let tombstone = pb::Tombstone {
                node: Some(record_to_pb(r)),
                remaining_ms: *remaining,
            };
            message::encode(5, &tombstone, buf);
        }
        for (node_id, ms) in &s.clocks {
            let mark = pb::ClockMark {
                node_id: *node_id,
                ms: *ms,
            };
            message::encode(6, &mark, buf);
        }
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<RegistrySnapshot, WireError> {
        let s = pb::RegistrySnapshot::decode(bytes)?;
        let nodes = s
            .nodes
            .into_iter()
            .map(|r| record_from_pb(r).map(|r| (r.node_id, Arc::new(r))))
            .collect::<Result<_, _>>()?;
        let quarantined = s
            .quarantined
            .into_iter()
            .map(|t| {
                let node = t.node.ok_or(WireError::Missing("Tombstone.node"))?;
                Ok((Arc::new(record_from_pb(node)?), t.remaining_ms))
            })
            .collect::<Result<_, WireError>>()?;
        Ok(RegistrySnapshot {
            last_node_id: s.last_node_id,
            nodes,
            quarantined,
            clocks: s.clocks.into_iter().map(|m| (m.node_id, m.ms)).collect(),
        })
    }

    /// NebulaBeacon's heartbeat fields: the allocator position after the entries carried,
    /// and the IDs those entries allocate and free.
    fn annotate(&self, commands: &[&Command], buf: &mut Vec<u8>) {
        let mut hb = pb::RegistryHeartbeat {
            last_node_id: self.last_node_id(),
            ..Default::default()
        };
        for command in commands {
            match command {
                Command::Register(r) => hb.added_node_id.push(r.node_id),
                Command::Unregister(id) | Command::Expire(id) => hb.removed_node_id.push(*id),
                Command::Update(_) | Command::Release(_) | Command::Clock { .. } => {}
            }
        }
        hb.encode_raw(buf);
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::consensus::election::Heartbeat;
    use crate::consensus::{Append, Entry, Payload, PeerMessage, Position, Snapshot};
    use crate::wire::envelope::{
        entry_bytes, entry_from_bytes, message_bytes, message_from_pb, snapshot_bytes,
        snapshot_from_bytes,
    };

    /// The snapshot written record by record is byte for byte what prost writes for the
    /// whole message, and reads back the same.
    #[test]
    fn a_snapshot_encoded_as_walked_is_the_whole_messages_bytes() {
        let quarantined = {
            let mut r = record(9);
            r.owner = "billing".into();
            vec![(Arc::new(r), 1_500)]
        };
        for last_node_id in [0, 12] {
            let s = RegistrySnapshot {
                last_node_id,
                nodes: (1..=3).map(|id| (id, Arc::new(record(id)))).collect(),
                quarantined: quarantined.clone(),
                clocks: vec![(3, 1_700_000_000_123), (9, 5)],
            };
            let whole = pb::RegistrySnapshot {
                last_node_id: s.last_node_id,
                nodes: s.nodes.values().map(|r| record_to_pb(r)).collect(),
                quarantined: s
                    .quarantined
                    .iter()
                    .map(|(r, remaining)| pb::Tombstone {
                        node: Some(record_to_pb(r)),
                        remaining_ms: *remaining,
                    })
                    .collect(),
                clocks: s
                    .clocks
                    .iter()
                    .map(|(node_id, ms)| pb::ClockMark {
                        node_id: *node_id,
                        ms: *ms,
                    })
                    .collect(),
            }
            .encode_to_vec();
            let mut walked = Vec::new();
            <Registry as MachineWire>::encode_snapshot(&s, &mut walked);
            assert_eq!(walked, whole);
            assert_eq!(
                <Registry as MachineWire>::decode_snapshot(&walked).unwrap(),
                s
            );
        }
    }

    fn record(id: u32) -> NodeRecord {
        NodeRecord {
            owner: "".into(),
            health: None,
            node_id: id,
            node_type: "LOGIC".into(),
            addr: SocketAddr::from(([10, 0, 0, 1], 9000 + id as u16)),
            access_addr: Some(Box::new(SocketAddr::from(([1, 2, 3, 4], 80)))),
            worker_num: 4,
            metadata: r#"{"zone":"a"}"#.into(),
            registered_ms: 1_700_000_000_000,
            term: 2,
            index: u64::from(id),
        }
    }

    fn entry(index: u64, command: Command) -> Entry<Command> {
        Entry {
            index,
            term: 4,
            payload: Payload::Command(command),
        }
    }

    /// A log entry as NebulaBeacon-era beacons wrote it, with the registry's fields inline.
    #[derive(Clone, PartialEq, prost::Message)]
    struct OldLogEntry {
        #[prost(uint64, tag = "1")]
        index: u64,
        #[prost(uint64, tag = "2")]
        term: u64,
        #[prost(message, optional, tag = "3")]
        register: Option<pb::NodeInfo>,
        #[prost(uint32, optional, tag = "6")]
        expire: Option<u32>,
        #[prost(bool, tag = "8")]
        leader_start: bool,
    }

    #[test]
    fn entries_read_and_write_the_bytes_beacon_always_wrote() {
        let old = OldLogEntry {
            index: 6,
            term: 4,
            register: Some(record_to_pb(&record(3))),
            expire: None,
            leader_start: false,
        };
        let bytes = old.encode_to_vec();
        let e = entry_from_bytes::<Registry>(&bytes).unwrap();
        assert_eq!(e, entry(6, Command::Register(record(3).into())));
        assert_eq!(
            OldLogEntry::decode(&entry_bytes::<Registry>(&e)[..]).unwrap(),
            old
        );
        let start = OldLogEntry {
            index: 7,
            term: 4,
            register: None,
            expire: None,
            leader_start: true,
        };
        let e = entry_from_bytes::<Registry>(&start.encode_to_vec()).unwrap();
        assert_eq!(e.payload, Payload::LeaderStart);
        let empty = OldLogEntry { index: 8, ..start };
        let mut none = empty.clone();
        none.leader_start = false;
        assert_eq!(
            entry_from_bytes::<Registry>(&none.encode_to_vec()),
            Err(WireError::NoCommand { index: 8 })
        );
    }

    #[test]
    fn messages_round_trip_and_fill_the_seed_fields() {
        let mut registry = Registry::new(super::super::state::IdRange::DEFAULT, 100);
        registry
            .apply(&Command::Register(record(3).into()), 0)
            .unwrap();
        let snapshot = Snapshot {
            members: None,
            position: Position { index: 5, term: 1 },
            state: RegistrySnapshot {
                last_node_id: 2,
                nodes: [(2, healthy(2).into())].into_iter().collect(),
                quarantined: vec![(record(1).into(), 500)],
                clocks: vec![(1, 1_700_000_000_123)],
            },
        };
        let mut m: PeerMessage<Command, RegistrySnapshot> = PeerMessage::bare(
            Heartbeat {
                is_leader: true,
                term: 4,
                leader: Some(SocketAddr::from(([127, 0, 0, 1], 16000))),
                sees: 0b101,
                eligible: true,
            },
            Position { index: 9, term: 4 },
            7,
        );
        m.append = Some(Append {
            prev: Position { index: 5, term: 1 },
            entries: vec![
                entry(6, Command::Register(record(3).into())),
                entry(7, Command::Expire(1)),
                entry(8, Command::Update(healthy(3).into())),
                entry(9, Command::Unregister(2)),
            ],
        });
        m.snapshot = Some(Box::new(snapshot.clone()));
        m.need_snapshot = true;
        m.beat = 7;
        m.ack_beat = 3;
        // The renewals: a batch with the table, the base, and how far the sender heard
        // (term 0: nothing it can vouch for, told apart from a beacon that tells nothing).
        m.renewals = Some(Box::new(crate::consensus::RenewalBatch {
            after: 4,
            keys: vec![3, 1, 3],
            table: Some(crate::consensus::RenewalTable {
                ages: std::sync::Arc::new(vec![(1, 20), (3, 0)]),
                rest_age: Some(700),
            }),
            bridge: Some(crate::consensus::Bridge {
                after: 8,
                keys: vec![5, 6, 5],
            }),
        }));
        m.renewal_base = Some(crate::consensus::Horizon { term: 2, seq: 11 });
        m.heard = Some(crate::consensus::Horizon::default());
        let bytes = message_bytes::<Registry>(&m, &registry);
        let seed = pb::RegistryHeartbeat::decode(&bytes[..]).unwrap();
        assert_eq!(seed.added_node_id, vec![3]);
        assert_eq!(seed.removed_node_id, vec![1, 2]);
        assert_eq!(seed.last_node_id, 3);
        let decoded = crate::pb::Election::decode(&bytes[..]).unwrap();
        assert_eq!(message_from_pb::<Registry>(decoded).unwrap(), m);
        let s = snapshot_bytes::<Registry>(&snapshot);
        assert_eq!(snapshot_from_bytes::<Registry>(&s).unwrap(), snapshot);
    }

    /// `record(id)` drained and critical, with a note: health rides in entries and snapshots.
    fn healthy(id: u32) -> NodeRecord {
        record(id).with_health(Health {
            status: super::super::state::Status::Critical,
            draining: true,
            note: "disk full".into(),
            since_ms: 1_700_000_000_500,
        })
    }

    #[test]
    fn bad_records_are_refused_with_the_field() {
        let mut info = record_to_pb(&record(1));
        info.addr = "nowhere".into();
        let bytes = OldLogEntry {
            index: 2,
            term: 1,
            register: Some(info),
            expire: None,
            leader_start: false,
        }
        .encode_to_vec();
        assert_eq!(
            entry_from_bytes::<Registry>(&bytes)
                .unwrap_err()
                .to_string(),
            "NodeInfo.addr `nowhere` is not an ip:port address"
        );
        // A status this beacon does not know (a newer peer's) is refused, naming it.
        let mut info = record_to_pb(&healthy(1));
        info.health.as_mut().unwrap().status = 9;
        assert_eq!(
            record_from_pb(info).unwrap_err().to_string(),
            "NodeInfo.health.status: 9 is not a health status (0 passing, 1 warning, 2 critical)"
        );
    }
}
