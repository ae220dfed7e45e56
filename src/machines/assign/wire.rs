//! Work assignment on the wire (`proto/assign.proto`): its command and error codes, its part
//! of log entries and snapshots, and conversions between its messages and types. Everything
//! that comes off the wire is checked here (an address that does not parse is an error
//! naming the field, never a panic).

use prost::Message as _;

use super::state::{
    AssignSnapshot, Assignments, Command, Grant, Holder, Placement, Resource, Slot, SlotGroup,
    SlotName,
};
use crate::machines::registry::FencingToken;
use crate::pb::assign as pb;
use crate::wire::codes::codes;
use crate::wire::{MachineWire, WireError, parse_addr};

codes! {
    command;
    /// The work-assignment machine's command codes.
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
        /// Create a slot group (`CreateGroup` / `GroupReply`).
        CreateGroup = 515,
        /// Delete a slot group (`DeleteGroup` / `GroupReply`).
        DeleteGroup = 517,
        /// The slot groups (`GroupsRequest` / `GroupsReply`).
        Groups = 519,
        /// Claim a slot, compare and swap (`Claim` / `GroupReply`).
        Claim = 521,
        /// Move resources waiting out a delay window now (`Reassign` / `RebalanceReply`).
        Reassign = 523,
        /// A slot's holder lets it go (`ReleaseSlot` / `GroupReply`).
        ReleaseSlot = 525,
    }
}

codes! {
    error;
    /// The work-assignment machine's codes carried by `ErrorReply`.
    pub enum AssignErrorCode {
        /// No resource has the name given.
        UnknownResource = 40 => "UNKNOWN_RESOURCE" NotFound,
        /// A resource of that name exists with another node type, weight or labels.
        ResourceConflict = 41 => "RESOURCE_CONFLICT" AlreadyExists,
        /// A release named an assignment that is not the resource's current one.
        NotResourceHolder = 42 => "NOT_RESOURCE_HOLDER" FailedPrecondition,
        /// The cluster holds as many resources as `assign.max_resources` allows.
        TooManyResources = 43 => "TOO_MANY_RESOURCES" ResourceExhausted,
        /// No slot group has the name given, or it has no such slot.
        UnknownGroup = 44 => "UNKNOWN_GROUP" NotFound,
        /// A slot group of that name exists with another node type or count.
        GroupConflict = 45 => "GROUP_CONFLICT" AlreadyExists,
        /// A claim expected another version of the slot, or the slot is held by a live service.
        SlotTaken = 46 => "SLOT_TAKEN" Aborted,
        /// Resources are bound to the group: delete or rebind them first.
        GroupInUse = 47 => "GROUP_IN_USE" FailedPrecondition,
        /// A slot release named a grant that is not the slot's current one.
        NotSlotHolder = 48 => "NOT_SLOT_HOLDER" FailedPrecondition,
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
        slot_group: r.slot.as_ref().map(|(g, _)| g.clone()).unwrap_or_default(),
        slot: r.slot.as_ref().map_or(0, |(_, s)| *s),
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
        slot: (!r.slot_group.is_empty()).then_some((r.slot_group, r.slot)),
    })
}

pub fn group_to_pb(g: &SlotGroup) -> pb::SlotGroupInfo {
    pb::SlotGroupInfo {
        name: g.name.clone(),
        node_type: g.node_type.clone(),
        slots: g
            .slots
            .iter()
            .map(|s| pb::SlotInfo {
                holder: s.holder.as_ref().map(holder_to_pb),
                version: s.version,
                revoking: s.revoking,
            })
            .collect(),
        created_ms: g.created_ms,
    }
}

pub fn group_from_pb(g: pb::SlotGroupInfo) -> Result<SlotGroup, WireError> {
    Ok(SlotGroup {
        name: g.name,
        node_type: g.node_type,
        slots: g
            .slots
            .into_iter()
            .map(|s| {
                Ok(Slot {
                    holder: s.holder.map(holder_from_pb).transpose()?,
                    version: s.version,
                    revoking: s.revoking,
                })
            })
            .collect::<Result<_, WireError>>()?,
        created_ms: g.created_ms,
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
            Command::CreateGroup(g) => C::CreateGroup(group_to_pb(g)),
            Command::DeleteGroup(name) => C::DeleteGroup(name.clone()),
            Command::Grant(grants) => C::Grant(pb::Grants {
                grants: grants
                    .iter()
                    .map(|g| pb::Grant {
                        group: g.group.clone(),
                        slot: g.slot,
                        to: g.to.as_ref().map(holder_to_pb),
                    })
                    .collect(),
            }),
            Command::RevokeSlots(slots) => C::RevokeSlots(pb::SlotNames {
                slots: slots
                    .iter()
                    .map(|s| pb::SlotName {
                        group: s.group.clone(),
                        slot: s.slot,
                    })
                    .collect(),
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
            C::CreateGroup(g) => Command::CreateGroup(group_from_pb(g)?),
            C::DeleteGroup(name) => Command::DeleteGroup(name),
            C::Grant(g) => Command::Grant(
                g.grants
                    .into_iter()
                    .map(|g| {
                        Ok(Grant {
                            group: g.group,
                            slot: g.slot,
                            to: g.to.map(holder_from_pb).transpose()?,
                        })
                    })
                    .collect::<Result<_, WireError>>()?,
            ),
            C::RevokeSlots(s) => Command::RevokeSlots(
                s.slots
                    .into_iter()
                    .map(|s| SlotName {
                        group: s.group,
                        slot: s.slot,
                    })
                    .collect(),
            ),
        }))
    }

    fn encode_snapshot(s: &AssignSnapshot, buf: &mut Vec<u8>) {
        pb::AssignSnapshot {
            resources: s.resources.iter().map(resource_to_pb).collect(),
            groups: s.groups.iter().map(group_to_pb).collect(),
        }
        .encode_raw(buf);
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<AssignSnapshot, WireError> {
        let s = pb::AssignSnapshot::decode(bytes)?;
        Ok(AssignSnapshot {
            resources: s
                .resources
                .into_iter()
                .map(resource_from_pb)
                .collect::<Result<_, _>>()?,
            groups: s
                .groups
                .into_iter()
                .map(group_from_pb)
                .collect::<Result<_, _>>()?,
        })
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
            slot: Some(("robots".into(), 2)),
        };
        let group = SlotGroup {
            name: "robots".into(),
            node_type: "ROBOT".into(),
            slots: vec![
                Slot {
                    holder: Some(holder.clone()),
                    version: 3,
                    revoking: true,
                },
                Slot::default(),
            ],
            created_ms: 1,
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
            Command::CreateGroup(group),
            Command::DeleteGroup("robots".into()),
            Command::Grant(vec![Grant {
                group: "robots".into(),
                slot: 1,
                to: None,
            }]),
            Command::RevokeSlots(vec![SlotName {
                group: "robots".into(),
                slot: 0,
            }]),
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
