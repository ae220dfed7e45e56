//! The work-assignment machine's replicated state: resources, each run by at most one live
//! service at a time, and who holds what.
//!
//! Every change of holder is a command of its own, and a holder is named by its
//! registration (node ID and the registration's fencing token), so a node ID reused by a
//! later registration never inherits its predecessor's resources. Each assignment carries
//! the log position of the command that made it as its fencing token: successive holders of
//! a resource have rising tokens, and a holder's work can be fenced by it downstream.
//!
//! A move that is not forced by the holder's end (a rebalance) happens in two steps: the
//! resource is first marked `revoking` (the holder still owns it and is told to let it go),
//! and only once the holder acknowledges the release, or its registration ends, is it
//! assigned to the next holder. So at every point of the committed state a resource has at
//! most one owner, and the next one starts only after the previous one stopped. A slot whose
//! holder is drained moves the same way: marked `revoking`, then granted on once its holder
//! releases it or its registration ends.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::consensus::Machine;
use crate::machines::registry::{FencingToken, NodeId};
use crate::time::Millis;

/// Longest resource name.
pub const MAX_NAME_LEN: usize = 128;

/// The service that runs a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub node_id: NodeId,
    pub addr: SocketAddr,
    /// The holder's registration (a later registration of the same ID is someone else).
    pub registration: FencingToken,
    /// The log position of the assignment: rises with each new holder of the resource.
    pub token: FencingToken,
    /// Wall-clock time of the assignment (ms since the Unix epoch).
    pub since_ms: u64,
}

/// A unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub name: String,
    /// Services of this node type may run it.
    pub node_type: String,
    /// Its share of a holder's load.
    pub weight: u32,
    /// Labels a service must carry in its registration metadata to be eligible.
    pub labels: BTreeMap<String, String>,
    pub holder: Option<Holder>,
    /// The holder has been asked to let it go (a rebalance); it owns it until it does.
    pub revoking: bool,
    pub created_ms: u64,
    /// Bound to a slot (group, slot number) instead of a node type: it runs wherever the
    /// slot's holder is, and moves with the slot.
    pub slot: Option<(String, u32)>,
}

/// One slot of a group: at most one holder, and a version that rises with each change (a
/// claim names the version it expects: compare and swap).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slot {
    pub holder: Option<Holder>,
    pub version: u64,
    /// The holder is draining and has been asked to let it go; it owns it until it does.
    pub revoking: bool,
}

/// M slots for services of one node type; services beyond M stand by in registration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotGroup {
    pub name: String,
    pub node_type: String,
    pub slots: Vec<Slot>,
    pub created_ms: u64,
}

/// One slot changes holder: `to` (or nobody).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub group: String,
    pub slot: u32,
    pub to: Option<Holder>,
}

/// One slot of a group, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotName {
    pub group: String,
    pub slot: u32,
}

/// One change of holder: `to` (or nobody) from the entry at `token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub name: String,
    pub to: Option<Holder>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A new resource (with its first holder, if one was eligible).
    Add(Resource),
    Delete(String),
    /// Holders change, all in one entry (a holder's end moves all of its resources at once).
    Place(Vec<Placement>),
    /// The holders of these resources are asked to let them go.
    Revoke(Vec<String>),
    CreateGroup(SlotGroup),
    DeleteGroup(String),
    /// Slots change holder, and the resources bound to them move along, in one entry.
    Grant(Vec<Grant>),
    /// The holders of these slots are asked to let them go (they are draining).
    RevokeSlots(Vec<SlotName>),
}

/// What a command changed, for watchers: each resource whose holder changed, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(Resource),
    Deleted(Resource),
    /// The resource as it was, and as it is.
    Moved {
        from: Resource,
        to: Resource,
    },
    /// A slot group as it was (`None`: just created) and as it is (`None`: deleted): a
    /// watcher tells grants from losses by this change alone, so a watch resumed from any
    /// index reads it the same.
    Group {
        name: String,
        before: Option<SlotGroup>,
        now: Option<SlotGroup>,
    },
}

/// A command that does not fit the state: the replicas have diverged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("resource `{0}` does not exist")]
    Unknown(String),
    #[error("resource `{0}` exists already")]
    Exists(String),
    #[error(
        "resource `{name}` would go to a holder with token {to}, not above its holder's {from}"
    )]
    TokenNotRising {
        name: String,
        from: FencingToken,
        to: FencingToken,
    },
    #[error("slot group `{0}` does not exist")]
    UnknownGroup(String),
    #[error("slot group `{0}` exists already")]
    GroupExists(String),
    #[error("slot group `{group}` has no slot {slot}")]
    NoSlot { group: String, slot: u32 },
}

/// The state as a snapshot holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignSnapshot {
    pub resources: Vec<Resource>,
    pub groups: Vec<SlotGroup>,
}

/// The work-assignment state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignments {
    resources: BTreeMap<String, Resource>,
    groups: BTreeMap<String, SlotGroup>,
}

impl Assignments {
    pub fn get(&self, name: &str) -> Option<&Resource> {
        self.resources.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.resources.values()
    }

    pub fn len(&self) -> usize {
        self.resources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    pub fn group(&self, name: &str) -> Option<&SlotGroup> {
        self.groups.get(name)
    }

    pub fn groups(&self) -> impl Iterator<Item = &SlotGroup> {
        self.groups.values()
    }

    /// Total weight each registration holds, by node ID.
    pub fn loads(&self) -> BTreeMap<NodeId, u64> {
        let mut loads = BTreeMap::new();
        for r in self.resources.values() {
            if let Some(h) = &r.holder {
                *loads.entry(h.node_id).or_default() += u64::from(r.weight);
            }
        }
        loads
    }

    pub fn apply(&mut self, command: &Command) -> Result<Option<Vec<Change>>, ApplyError> {
        match command {
            Command::Add(resource) => {
                if self.resources.contains_key(&resource.name) {
                    return Err(ApplyError::Exists(resource.name.clone()));
                }
                self.resources
                    .insert(resource.name.clone(), resource.clone());
                Ok(Some(vec![Change::Added(resource.clone())]))
            }
            Command::Delete(name) => {
                let gone = self
                    .resources
                    .remove(name)
                    .ok_or_else(|| ApplyError::Unknown(name.clone()))?;
                Ok(Some(vec![Change::Deleted(gone)]))
            }
            Command::Place(placements) => {
                // Checked whole before anything changes: a command applies entirely or not.
                for p in placements {
                    let r = self
                        .resources
                        .get(&p.name)
                        .ok_or_else(|| ApplyError::Unknown(p.name.clone()))?;
                    if let (Some(from), Some(to)) = (&r.holder, &p.to)
                        && to.token <= from.token
                    {
                        return Err(ApplyError::TokenNotRising {
                            name: p.name.clone(),
                            from: from.token,
                            to: to.token,
                        });
                    }
                }
                let mut changes = Vec::with_capacity(placements.len());
                for p in placements {
                    let r = self.resources.get_mut(&p.name).expect("checked above");
                    let from = r.clone();
                    r.holder = p.to.clone();
                    r.revoking = false;
                    changes.push(Change::Moved {
                        from,
                        to: r.clone(),
                    });
                }
                Ok(Some(changes))
            }
            Command::Revoke(names) => {
                for name in names {
                    if !self.resources.contains_key(name) {
                        return Err(ApplyError::Unknown(name.clone()));
                    }
                }
                let mut changes = Vec::new();
                for name in names {
                    let r = self.resources.get_mut(name).expect("checked above");
                    if r.holder.is_some() && !r.revoking {
                        let from = r.clone();
                        r.revoking = true;
                        changes.push(Change::Moved {
                            from,
                            to: r.clone(),
                        });
                    }
                }
                Ok(Some(changes))
            }
            Command::CreateGroup(group) => {
                if self.groups.contains_key(&group.name) {
                    return Err(ApplyError::GroupExists(group.name.clone()));
                }
                self.groups.insert(group.name.clone(), group.clone());
                Ok(Some(vec![Change::Group {
                    name: group.name.clone(),
                    before: None,
                    now: Some(group.clone()),
                }]))
            }
            Command::DeleteGroup(name) => {
                let before = self
                    .groups
                    .remove(name)
                    .ok_or_else(|| ApplyError::UnknownGroup(name.clone()))?;
                Ok(Some(vec![Change::Group {
                    name: name.clone(),
                    before: Some(before),
                    now: None,
                }]))
            }
            Command::Grant(grants) => {
                for g in grants {
                    let group = self
                        .groups
                        .get(&g.group)
                        .ok_or_else(|| ApplyError::UnknownGroup(g.group.clone()))?;
                    if g.slot as usize >= group.slots.len() {
                        return Err(ApplyError::NoSlot {
                            group: g.group.clone(),
                            slot: g.slot,
                        });
                    }
                }
                let mut changes = Vec::new();
                let mut touched = Vec::new();
                for g in grants {
                    let group = self.groups.get_mut(&g.group).expect("checked above");
                    if !touched.iter().any(|(n, _)| n == &g.group) {
                        touched.push((g.group.clone(), group.clone()));
                    }
                    let slot = &mut group.slots[g.slot as usize];
                    slot.holder = g.to.clone();
                    slot.version += 1;
                    slot.revoking = false;
                    // The resources bound to the slot move with it.
                    for r in self.resources.values_mut() {
                        if r.slot.as_ref() == Some(&(g.group.clone(), g.slot)) {
                            let from = r.clone();
                            r.holder = g.to.clone();
                            r.revoking = false;
                            changes.push(Change::Moved {
                                from,
                                to: r.clone(),
                            });
                        }
                    }
                }
                for (name, before) in touched {
                    changes.push(Change::Group {
                        now: self.groups.get(&name).cloned(),
                        before: Some(before),
                        name,
                    });
                }
                Ok(Some(changes))
            }
            Command::RevokeSlots(slots) => {
                for s in slots {
                    self.slot(s)?;
                }
                let mut changes: Vec<Change> = Vec::new();
                for s in slots {
                    let group = self.groups.get_mut(&s.group).expect("checked above");
                    let before = group.clone();
                    let slot = &mut group.slots[s.slot as usize];
                    if slot.holder.is_none() || slot.revoking {
                        continue;
                    }
                    slot.revoking = true;
                    let now = Some(group.clone());
                    match changes.iter_mut().find_map(|c| match c {
                        Change::Group { name, now, .. } if *name == s.group => Some(now),
                        _ => None,
                    }) {
                        // A second slot of a group already changed by this command.
                        Some(seen) => *seen = now,
                        None => changes.push(Change::Group {
                            name: s.group.clone(),
                            before: Some(before),
                            now,
                        }),
                    }
                }
                Ok(Some(changes))
            }
        }
    }

    /// Slot `s`, or why a command naming it does not fit.
    fn slot(&self, s: &SlotName) -> Result<&Slot, ApplyError> {
        let group = self
            .groups
            .get(&s.group)
            .ok_or_else(|| ApplyError::UnknownGroup(s.group.clone()))?;
        group.slots.get(s.slot as usize).ok_or(ApplyError::NoSlot {
            group: s.group.clone(),
            slot: s.slot,
        })
    }

    /// What registration `node` holds: its resources and its slots, one line each
    /// (`resource site-1`, `slot robots/0`).
    pub fn held_by(&self, node: (NodeId, FencingToken)) -> Vec<String> {
        let is = |h: &Holder| (h.node_id, h.registration) == node;
        let resources = self
            .resources
            .values()
            .filter(|r| r.slot.is_none() && r.holder.as_ref().is_some_and(is))
            .map(|r| format!("resource {}", r.name));
        let slots = self.groups.values().flat_map(|g| {
            g.slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.holder.as_ref().is_some_and(is))
                .map(|(i, _)| format!("slot {}/{i}", g.name))
        });
        resources.chain(slots).collect()
    }
}

impl Machine for Assignments {
    type Command = Command;
    type Change = Vec<Change>;
    type Snapshot = AssignSnapshot;
    type ApplyError = ApplyError;

    fn apply(
        &mut self,
        command: &Command,
        _now: Millis,
    ) -> Result<Option<Vec<Change>>, ApplyError> {
        Assignments::apply(self, command)
    }

    fn snapshot(&self, _now: Millis) -> AssignSnapshot {
        AssignSnapshot {
            resources: self.resources.values().cloned().collect(),
            groups: self.groups.values().cloned().collect(),
        }
    }

    fn restore(&mut self, snapshot: AssignSnapshot, _now: Millis) {
        self.resources = snapshot
            .resources
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        self.groups = snapshot
            .groups
            .into_iter()
            .map(|g| (g.name.clone(), g))
            .collect();
    }

    fn records(&self) -> usize {
        self.resources.len() + self.groups.values().map(|g| g.slots.len()).sum::<usize>()
    }

    fn summary(&self) -> String {
        let held = self
            .resources
            .values()
            .filter(|r| r.holder.is_some())
            .count();
        format!("{} resources ({held} held)", self.resources.len())
    }
}

/// A request field that is not acceptable; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResource {
    #[error(
        "resource name `{0}` is invalid: use 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 . _ - : /"
    )]
    Name(String),
    #[error("weight 0 carries no load: use a weight of at least 1")]
    ZeroWeight,
    #[error("label `{0}` is invalid: use key=value, the key from A-Z a-z 0-9 . _ -")]
    Label(String),
}

/// Checks a resource name.
pub fn check_name(name: &str) -> Result<(), InvalidResource> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-:/".contains(c);
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok) {
        return Err(InvalidResource::Name(name.to_owned()));
    }
    Ok(())
}

/// Checks a label key.
pub fn check_label(key: &str) -> Result<(), InvalidResource> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if key.is_empty() || key.len() > 64 || !key.chars().all(ok) {
        return Err(InvalidResource::Label(key.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(node_id: NodeId, index: u64) -> Holder {
        Holder {
            node_id,
            addr: SocketAddr::from(([10, 0, 0, node_id as u8], 80)),
            registration: FencingToken {
                term: 1,
                index: u64::from(node_id),
            },
            token: FencingToken { term: 1, index },
            since_ms: 0,
        }
    }

    fn resource(name: &str, holder: Option<Holder>) -> Resource {
        Resource {
            name: name.into(),
            node_type: "CRAWLER".into(),
            weight: 2,
            labels: BTreeMap::new(),
            holder,
            revoking: false,
            created_ms: 0,
            slot: None,
        }
    }

    #[test]
    fn holders_change_whole_commands_at_a_time_with_rising_tokens() {
        let mut s = Assignments::default();
        s.apply(&Command::Add(resource("a", Some(holder(1, 5)))))
            .unwrap();
        s.apply(&Command::Add(resource("b", None))).unwrap();
        assert!(matches!(
            s.apply(&Command::Add(resource("a", None))),
            Err(ApplyError::Exists(_))
        ));
        assert_eq!(s.loads(), BTreeMap::from([(1, 2)]));
        // A token not above the holder's is refused, and the whole command with it.
        let bad = Command::Place(vec![
            Placement {
                name: "b".into(),
                to: Some(holder(2, 6)),
            },
            Placement {
                name: "a".into(),
                to: Some(holder(2, 5)),
            },
        ]);
        assert!(matches!(
            s.apply(&bad),
            Err(ApplyError::TokenNotRising { .. })
        ));
        assert_eq!(s.get("b").unwrap().holder, None, "nothing applied");
        s.apply(&Command::Revoke(vec!["a".into()])).unwrap();
        assert!(s.get("a").unwrap().revoking);
        let moved = s
            .apply(&Command::Place(vec![Placement {
                name: "a".into(),
                to: Some(holder(2, 7)),
            }]))
            .unwrap()
            .unwrap();
        assert!(matches!(&moved[0], Change::Moved { from, to }
            if from.holder.as_ref().unwrap().node_id == 1 && to.holder.as_ref().unwrap().node_id == 2));
        assert!(!s.get("a").unwrap().revoking);
        assert_eq!(s.loads(), BTreeMap::from([(2, 2)]));
        s.apply(&Command::Delete("a".into())).unwrap();
        assert!(s.apply(&Command::Delete("a".into())).is_err());
    }

    #[test]
    fn a_revoked_slot_stays_its_holders_until_granted_on() {
        let mut s = Assignments::default();
        s.apply(&Command::CreateGroup(SlotGroup {
            name: "g".into(),
            node_type: "ROBOT".into(),
            slots: vec![Slot::default(); 2],
            created_ms: 0,
        }))
        .unwrap();
        s.apply(&Command::Grant(vec![Grant {
            group: "g".into(),
            slot: 0,
            to: Some(holder(1, 5)),
        }]))
        .unwrap();
        let slot = |n| SlotName {
            group: "g".into(),
            slot: n,
        };
        // Slot 1 has no holder: nothing to revoke there.
        let changes = s
            .apply(&Command::RevokeSlots(vec![slot(0), slot(1)]))
            .unwrap()
            .unwrap();
        assert_eq!(changes.len(), 1, "one change of the group: {changes:?}");
        let g = s.group("g").unwrap();
        assert!(g.slots[0].revoking && !g.slots[1].revoking);
        assert_eq!(g.slots[0].holder, Some(holder(1, 5)), "still its holder's");
        assert_eq!(g.slots[0].version, 1, "no change of holder yet");
        assert_eq!(s.held_by((1, holder(1, 5).registration)), ["slot g/0"]);
        // Revoked again: no change.
        let again = s.apply(&Command::RevokeSlots(vec![slot(0)])).unwrap();
        assert_eq!(again, Some(vec![]));
        s.apply(&Command::Grant(vec![Grant {
            group: "g".into(),
            slot: 0,
            to: Some(holder(2, 9)),
        }]))
        .unwrap();
        let g = s.group("g").unwrap();
        assert!(!g.slots[0].revoking, "a new holder starts afresh");
        assert!(s.held_by((1, holder(1, 5).registration)).is_empty());
        assert_eq!(
            s.apply(&Command::RevokeSlots(vec![slot(2)])),
            Err(ApplyError::NoSlot {
                group: "g".into(),
                slot: 2
            })
        );
    }

    #[test]
    fn names_and_labels_are_checked() {
        assert!(check_name("crawler/site-1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_label("gpu").is_ok());
        assert!(check_label("g=pu").is_err());
    }
}
