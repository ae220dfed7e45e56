//! The consensus core's messages on the wire, generic over what is replicated.
//!
//! A log entry, a snapshot and a heartbeat are each one protobuf message made of parts: the
//! core writes its fields (`beacon.proto`: `LogEntry`, `Snapshot`, `Election`), and every
//! machine writes its own fields, in its own range, into the same message ([`MachineWire`]).
//! Protobuf merges concatenated messages field by field, so each side decodes its fields
//! from the whole and skips the rest; the byte layout is the one beacon has always written,
//! so stored logs and snapshots, and peers, stay readable.

use prost::Message as _;

use super::WireError;
use crate::consensus::election::Heartbeat;
use crate::consensus::{
    Append, Bridge, Entry, Horizon, Machine, Members, Message, Payload, PeerMessage, Position,
    RenewalBatch, RenewalTable, Snapshot,
};
use crate::pb;

/// A machine's part of the shared messages.
pub trait MachineWire: Machine {
    /// Writes `command` in this machine's `LogEntry` fields.
    fn encode_command(command: &Self::Command, buf: &mut Vec<u8>);
    /// The command in `entry` (a whole `LogEntry`), if this machine's fields hold one.
    fn decode_command(entry: &[u8]) -> Result<Option<Self::Command>, WireError>;
    /// Writes `snapshot` in this machine's `Snapshot` fields.
    fn encode_snapshot(snapshot: &Self::Snapshot, buf: &mut Vec<u8>);
    /// This machine's part of `snapshot` (a whole `Snapshot`); an absent part is an empty
    /// state (a snapshot written before the machine existed).
    fn decode_snapshot(snapshot: &[u8]) -> Result<Self::Snapshot, WireError>;
    /// Writes this machine's `Election` fields for a heartbeat that carries `commands`.
    fn annotate(&self, _commands: &[&Self::Command], _buf: &mut Vec<u8>) {}
}

/// A log entry as stored and sent.
pub fn entry_bytes<S: MachineWire>(e: &Entry<S::Command>) -> Vec<u8> {
    let head = pb::LogEntry {
        index: e.index,
        term: e.term,
        leader_start: matches!(e.payload, Payload::LeaderStart),
        known_commit: 0,
        members: match &e.payload {
            Payload::Members(m) => Some(members_to_pb(m)),
            _ => None,
        },
    };
    let mut buf = head.encode_to_vec();
    if let Payload::Command(c) = &e.payload {
        S::encode_command(c, &mut buf);
    }
    buf
}

/// A log entry as stored: [`entry_bytes`], and, when `known_commit` is not 0, how far the
/// writer knew the log committed (`LogEntry.known_commit`, on a stored batch's last record;
/// protobuf merges the concatenated field, and readers that predate it skip it).
pub fn stored_entry_bytes<S: MachineWire>(e: &Entry<S::Command>, known_commit: u64) -> Vec<u8> {
    let mut buf = entry_bytes::<S>(e);
    if known_commit > 0 {
        pb::LogEntry {
            known_commit,
            ..Default::default()
        }
        .encode(&mut buf)
        .expect("a Vec grows");
    }
    buf
}

pub fn entry_from_bytes<S: MachineWire>(bytes: &[u8]) -> Result<Entry<S::Command>, WireError> {
    stored_entry_from_bytes::<S>(bytes).map(|(entry, _)| entry)
}

/// A stored log entry and the commit it says was known ([`stored_entry_bytes`]; 0 if none).
pub fn stored_entry_from_bytes<S: MachineWire>(
    bytes: &[u8],
) -> Result<(Entry<S::Command>, u64), WireError> {
    let head = pb::LogEntry::decode(bytes)?;
    let payload = if head.leader_start {
        Payload::LeaderStart
    } else if let Some(m) = &head.members {
        Payload::Members(Box::new(members_from_pb(m)?))
    } else {
        let command =
            S::decode_command(bytes)?.ok_or(WireError::NoCommand { index: head.index })?;
        Payload::Command(command)
    };
    let entry = Entry {
        index: head.index,
        term: head.term,
        payload,
    };
    Ok((entry, head.known_commit))
}

/// A snapshot as stored and sent.
pub fn snapshot_bytes<S: MachineWire>(s: &Snapshot<S::Snapshot>) -> Vec<u8> {
    let head = pb::Snapshot {
        index: s.position.index,
        term: s.position.term,
        members: s.members.as_ref().map(members_to_pb),
    };
    let mut buf = head.encode_to_vec();
    S::encode_snapshot(&s.state, &mut buf);
    buf
}

pub fn snapshot_from_bytes<S: MachineWire>(
    bytes: &[u8],
) -> Result<Snapshot<S::Snapshot>, WireError> {
    let head = pb::Snapshot::decode(bytes)?;
    Ok(Snapshot {
        position: Position {
            index: head.index,
            term: head.term,
        },
        state: S::decode_snapshot(bytes)?,
        members: head.members.as_ref().map(members_from_pb).transpose()?,
    })
}

pub fn members_to_pb(m: &Members) -> pb::Members {
    let names = |set: &std::collections::BTreeSet<std::net::SocketAddr>| {
        set.iter().map(|a| a.to_string()).collect()
    };
    pb::Members {
        voters: names(&m.voters),
        learners: names(&m.learners),
        promoting: names(&m.promoting),
    }
}

pub fn members_from_pb(m: &pb::Members) -> Result<Members, WireError> {
    let parse = |field: &'static str, names: &[String]| {
        names
            .iter()
            .map(|n| super::parse_addr(field, n))
            .collect::<Result<std::collections::BTreeSet<_>, _>>()
    };
    let members = Members {
        voters: parse("Members.voters", &m.voters)?,
        learners: parse("Members.learners", &m.learners)?,
        promoting: parse("Members.promoting", &m.promoting)?,
    };
    if !members.voters.is_disjoint(&members.learners) {
        return Err(WireError::Invalid(
            "Members lists a beacon as both voter and learner".into(),
        ));
    }
    if members.voters.is_empty() {
        return Err(WireError::Invalid(
            "Members.voters is empty: a cluster has a voter".into(),
        ));
    }
    Ok(members)
}

/// A heartbeat alone, as the election sees it.
pub fn heartbeat_of(e: &pb::Election) -> Result<Heartbeat, WireError> {
    let leader = match e.leader.as_str() {
        "" => None,
        l => Some(super::parse_addr("Election.leader", l)?),
    };
    Ok(Heartbeat {
        is_leader: e.is_leader != 0,
        term: e.term,
        leader,
        sees: e.sees,
        eligible: e.eligible,
    })
}

/// A message's core fields (handshakes carry these alone).
pub fn message_to_pb<S: MachineWire>(m: &Message<S>) -> pb::Election {
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
        log_index: m.position.index,
        log_term: m.position.term,
        commit: m.commit,
        reject: m.reject,
        need_snapshot: m.need_snapshot,
        fetch: m.fetch,
        beat: m.beat,
        ack_beat: m.ack_beat,
        transfer: m.transfer,
        snapshot: m.snapshot.as_deref().map(snapshot_bytes::<S>),
        members: m.members.as_deref().map(|(_, ms)| members_to_pb(ms)),
        members_index: m.members.as_deref().map_or(0, |(i, _)| *i),
        voters_digest: m.voters,
        renewal_base_term: m.renewal_base.map_or(0, |h| h.term),
        renewal_base_seq: m.renewal_base.map_or(0, |h| h.seq),
        heard_term: m.heard.map_or(0, |h| h.term),
        heard_seq: m.heard.map_or(0, |h| h.seq),
        tells_heard: m.heard.is_some(),
        ..Default::default()
    };
    if let Some(batch) = &m.renewals {
        e.has_renewals = true;
        e.renewals_after = batch.after;
        e.renewal_keys = batch.keys.clone();
        e.renewal_table = batch.table.as_ref().map(|t| pb::RenewalTable {
            keys: t.ages.iter().map(|(k, _)| *k).collect(),
            ages_ms: t.ages.iter().map(|(_, a)| *a).collect(),
            has_rest: t.rest_age.is_some(),
            rest_age_ms: t.rest_age.unwrap_or(0),
        });
        if let Some(bridge) = &batch.bridge {
            e.has_renewal_bridge = true;
            e.renewal_bridge_after = bridge.after;
            e.renewal_bridge_keys = bridge.keys.clone();
        }
    }
    if let Some(append) = &m.append {
        e.prev_index = append.prev.index;
        e.prev_term = append.prev.term;
        e.entries = append.entries.iter().map(entry_bytes::<S>).collect();
    }
    e
}

/// A message as sent between beacons: the core's fields, then each machine's heartbeat
/// fields for the entries carried (the registry fills NebulaBeacon's `last_node_id`,
/// `added_node_id`, `removed_node_id`).
pub fn message_bytes<S: MachineWire>(m: &Message<S>, state: &S) -> Vec<u8> {
    let mut buf = message_to_pb::<S>(m).encode_to_vec();
    annotate(m, state, &mut buf);
    buf
}

/// The machines' heartbeat fields of a message ([`message_bytes`] appends them to the core's
/// encoded fields): what the state says of the entries carried. Taken apart so that the
/// core's fields of a large message (a snapshot) can be encoded away from the state, by
/// [`message_bytes_annotated`].
pub fn message_annotation<S: MachineWire>(m: &Message<S>, state: &S) -> Vec<u8> {
    let mut buf = Vec::new();
    annotate(m, state, &mut buf);
    buf
}

/// [`message_bytes`], with the machines' fields taken earlier by [`message_annotation`].
pub fn message_bytes_annotated<S: MachineWire>(m: &Message<S>, annotation: &[u8]) -> Vec<u8> {
    let mut buf = message_to_pb::<S>(m).encode_to_vec();
    buf.extend_from_slice(annotation);
    buf
}

/// Appends to `buf` what the state says of the entries `m` carries.
fn annotate<S: MachineWire>(m: &Message<S>, state: &S, buf: &mut Vec<u8>) {
    let commands: Vec<&S::Command> = m
        .append
        .iter()
        .flat_map(|a| a.entries.iter())
        .filter_map(Entry::command)
        .collect();
    state.annotate(&commands, buf);
}

/// A horizon on the wire (term 0: none).
fn horizon(term: u64, seq: u64) -> Option<Horizon> {
    (term > 0).then_some(Horizon { term, seq })
}

/// Decodes a peer message. An append is present when the sender gave a previous position or
/// entries (an empty append at a nonzero position asks the receiver where it stands).
pub fn message_from_pb<S: MachineWire>(e: pb::Election) -> Result<Message<S>, WireError> {
    let heartbeat = heartbeat_of(&e)?;
    let prev = Position {
        index: e.prev_index,
        term: e.prev_term,
    };
    let append = if e.prev_index != 0 || e.prev_term != 0 || !e.entries.is_empty() {
        let entries = e
            .entries
            .iter()
            .map(|b| entry_from_bytes::<S>(b))
            .collect::<Result<_, _>>()?;
        Some(Append { prev, entries })
    } else {
        None
    };
    let snapshot = e
        .snapshot
        .as_deref()
        .map(snapshot_from_bytes::<S>)
        .transpose()?
        .map(Box::new);
    let mut m = PeerMessage::bare(
        heartbeat,
        Position {
            index: e.log_index,
            term: e.log_term,
        },
        e.commit,
    );
    m.append = append;
    m.snapshot = snapshot;
    m.reject = e.reject;
    m.need_snapshot = e.need_snapshot;
    m.fetch = e.fetch;
    m.beat = e.beat;
    m.ack_beat = e.ack_beat;
    m.transfer = e.transfer;
    m.voters = e.voters_digest;
    m.renewal_base = horizon(e.renewal_base_term, e.renewal_base_seq);
    m.heard = e.tells_heard.then_some(Horizon {
        term: e.heard_term,
        seq: e.heard_seq,
    });
    if e.has_renewals {
        let table = e
            .renewal_table
            .map(|t| {
                if t.keys.len() != t.ages_ms.len() {
                    return Err(WireError::Invalid(format!(
                        "Election.renewal_table: {} keys but {} ages",
                        t.keys.len(),
                        t.ages_ms.len()
                    )));
                }
                Ok(RenewalTable {
                    ages: std::sync::Arc::new(t.keys.into_iter().zip(t.ages_ms).collect()),
                    rest_age: t.has_rest.then_some(t.rest_age_ms),
                })
            })
            .transpose()?;
        m.renewals = Some(Box::new(RenewalBatch {
            after: e.renewals_after,
            keys: e.renewal_keys,
            table,
            bridge: e.has_renewal_bridge.then_some(Bridge {
                after: e.renewal_bridge_after,
                keys: e.renewal_bridge_keys,
            }),
        }));
    }
    m.members = e
        .members
        .as_ref()
        .map(|ms| members_from_pb(ms).map(|ms| Box::new((e.members_index, ms))))
        .transpose()?;
    Ok(m)
}
