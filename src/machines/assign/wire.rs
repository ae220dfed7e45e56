//! Work assignment on the wire (`proto/assign.proto`): its command and error codes, its part
//! of log entries and snapshots, and conversions between its messages and types. Everything
//! that comes off the wire is checked here (an address that does not parse is an error
//! naming the field, never a panic).

use prost::Message as _;

use super::state::{Assignments, Command, Holder, Placement, Resource};
use crate::machines::registry::FencingToken;
use crate::pb::assign as pb;
use crate::wire::{Code, MachineWire, WireError, parse_addr};

/// The work-assignment machine's command codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum AssignCmd {
    /// Add a resource (`AddResource` / `ResourceReply`).
    Add = 501,
    /// Delete a resource (`DeleteResource` / `ResourceReply`).
    Delete = 503,
    /// The resources (`ResourcesRequest` / `ResourcesReply`).
    List = 505,
    /// Rebalance (`Rebalance` / `RebalanceReply`).
    Rebalance = 507,
    /// A holder lets a resource go (`Release` / `ResourceReply`).
    Release = 509,
    /// Follow one registration's assignments (`WatchAssignments` / `WatchAssignmentsReply`,
    /// then `AssignmentNotice`s).
    Watch = 511,
    /// Pushed to watchers, one-way: what changed (`AssignmentNotice`).
    Notice = 513,
}

impl AssignCmd {
    pub const ALL: [AssignCmd; 7] = [
        AssignCmd::Add,
        AssignCmd::Delete,
        AssignCmd::List,
        AssignCmd::Rebalance,
        AssignCmd::Release,
        AssignCmd::Watch,
        AssignCmd::Notice,
    ];

    pub fn from_code(code: u32) -> Option<AssignCmd> {
        AssignCmd::ALL.into_iter().find(|c| *c as u32 == code)
    }
}

impl Code for AssignCmd {
    fn code(self) -> u32 {
        self as u32
    }
}

/// The work-assignment machine's codes carried by `ErrorReply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum AssignErrorCode {
    /// No resource has the name given.
    UnknownResource = 40,
    /// A resource of that name exists with another node type, weight or labels.
    ResourceConflict = 41,
    /// A release named an assignment that is not the resource's current one.
    NotResourceHolder = 42,
    /// The cluster holds as many resources as `assign.max_resources` allows.
    TooManyResources = 43,
}

impl AssignErrorCode {
    pub const ALL: [AssignErrorCode; 4] = [
        AssignErrorCode::UnknownResource,
        AssignErrorCode::ResourceConflict,
        AssignErrorCode::NotResourceHolder,
        AssignErrorCode::TooManyResources,
    ];

    pub fn from_code(code: u32) -> Option<AssignErrorCode> {
        AssignErrorCode::ALL.into_iter().find(|c| *c as u32 == code)
    }
}

impl From<AssignErrorCode> for u32 {
    fn from(code: AssignErrorCode) -> u32 {
        code as u32
    }
}

pub fn holder_to_pb(h: &Holder) -> pb::HolderInfo {
    pb::HolderInfo {
        node_id: h.node_id,
        addr: h.addr.to_string(),
        registration_term: h.registration.term,
        registration_index: h.registration.index,
        term: h.token.term,
        index: h.token.index,
        since_ms: h.since_ms,
    }
}

pub fn holder_from_pb(h: pb::HolderInfo) -> Result<Holder, WireError> {
    Ok(Holder {
        node_id: h.node_id,
        addr: parse_addr("HolderInfo.addr", &h.addr)?,
        registration: FencingToken {
            term: h.registration_term,
            index: h.registration_index,
        },
        token: FencingToken {
            term: h.term,
            index: h.index,
        },
        since_ms: h.since_ms,
    })
}

pub fn resource_to_pb(r: &Resource) -> pb::ResourceInfo {
    pb::ResourceInfo {
        name: r.name.clone(),
        node_type: r.node_type.clone(),
        weight: r.weight,
        labels: r.labels.clone().into_iter().collect(),
        holder: r.holder.as_ref().map(holder_to_pb),
        revoking: r.revoking,
        created_ms: r.created_ms,
    }
}

pub fn resource_from_pb(r: pb::ResourceInfo) -> Result<Resource, WireError> {
    Ok(Resource {
        name: r.name,
        node_type: r.node_type,
        weight: r.weight,
        labels: r.labels.into_iter().collect(),
        holder: r.holder.map(holder_from_pb).transpose()?,
        revoking: r.revoking,
        created_ms: r.created_ms,
    })
}

impl MachineWire for Assignments {
    fn encode_command(command: &Command, buf: &mut Vec<u8>) {
        use pb::assign_entry::Command as C;
        let command = match command {
            Command::Add(r) => C::Add(resource_to_pb(r)),
            Command::Delete(name) => C::Delete(name.clone()),
            Command::Place(placements) => C::Place(pb::Placements {
                placements: placements
                    .iter()
                    .map(|p| pb::Placement {
                        name: p.name.clone(),
                        to: p.to.as_ref().map(holder_to_pb),
                    })
                    .collect(),
            }),
            Command::Revoke(names) => C::Revoke(pb::Names {
                names: names.clone(),
            }),
        };
        pb::AssignEntry {
            command: Some(command),
        }
        .encode_raw(buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Command>, WireError> {
        use pb::assign_entry::Command as C;
        let Some(command) = pb::AssignEntry::decode(entry)?.command else {
            return Ok(None);
        };
        Ok(Some(match command {
            C::Add(r) => Command::Add(resource_from_pb(r)?),
            C::Delete(name) => Command::Delete(name),
            C::Place(p) => Command::Place(
                p.placements
                    .into_iter()
                    .map(|p| {
                        Ok(Placement {
                            name: p.name,
                            to: p.to.map(holder_from_pb).transpose()?,
                        })
                    })
                    .collect::<Result<_, WireError>>()?,
            ),
            C::Revoke(names) => Command::Revoke(names.names),
        }))
    }

    fn encode_snapshot(resources: &Vec<Resource>, buf: &mut Vec<u8>) {
        pb::AssignSnapshot {
            resources: resources.iter().map(resource_to_pb).collect(),
        }
        .encode_raw(buf);
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<Vec<Resource>, WireError> {
        pb::AssignSnapshot::decode(bytes)?
            .resources
            .into_iter()
            .map(resource_from_pb)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use super::*;
    use crate::consensus::{Entry, Payload};
    use crate::wire::envelope::{entry_bytes, entry_from_bytes};

    #[test]
    fn every_command_round_trips_in_a_log_entry() {
        let holder = Holder {
            node_id: 3,
            addr: SocketAddr::from(([10, 0, 0, 3], 80)),
            registration: FencingToken { term: 1, index: 2 },
            token: FencingToken { term: 2, index: 9 },
            since_ms: 1_700_000_000_000,
        };
        let resource = Resource {
            name: "site-1".into(),
            node_type: "CRAWLER".into(),
            weight: 3,
            labels: BTreeMap::from([("zone".into(), "b".into())]),
            holder: Some(holder.clone()),
            revoking: true,
            created_ms: 5,
        };
        for command in [
            Command::Add(resource),
            Command::Delete("site-1".into()),
            Command::Place(vec![
                Placement {
                    name: "site-1".into(),
                    to: Some(holder),
                },
                Placement {
                    name: "site-2".into(),
                    to: None,
                },
            ]),
            Command::Revoke(vec!["site-1".into()]),
        ] {
            let e = Entry {
                index: 9,
                term: 2,
                payload: Payload::Command(command),
            };
            let bytes = entry_bytes::<Assignments>(&e);
            assert_eq!(entry_from_bytes::<Assignments>(&bytes).unwrap(), e);
        }
    }
}
