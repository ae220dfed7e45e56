//! The work-assignment machine's leader-side service: it places new resources on the least
//! loaded eligible live service, moves the resources of a service whose registration ended
//! (at the tick that ends it, in one command), and runs rebalances as revoke, release, assign.
//!
//! Everything it decides on is replicated (the resources, their holders, the registry's live
//! registrations), so a new leader needs no reload. The only thing it keeps of its own is
//! where each revoked resource is meant to go; a new leader that lacks it places a released
//! resource by least load instead.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{self, Candidate};
use super::state::{
    Assignments, Command, Grant, Holder, InvalidResource, Placement, Resource, Slot, SlotGroup,
    SlotName, check_label, check_name,
};
use crate::consensus::{Leader, Outcome, Service};
use crate::machines::Part;
use crate::machines::registry::{FencingToken, NodeId, Registry, check_type};
use crate::time::Millis;

/// The configured limits and policies (config key `assign`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignLimits {
    /// Moves in flight at most (revoked, not yet released): a rebalance, asked for or
    /// automatic, begins no more, so a join does not move everything at once.
    pub max_moves: usize,
    /// How many resources a cluster may hold.
    pub max_resources: usize,
    /// Largest weight of one resource.
    pub max_weight: u32,
    /// Per node type: how long the resources of a holder whose registration ended wait for
    /// it to come back (a new registration at the same address keeps them) before they go to
    /// others. None by default: they move at once.
    pub delay_ms: BTreeMap<String, u64>,
    /// Rebalance on its own when a service of a type holds nothing while the spread of load
    /// among that type's services is over this (off when `None`).
    pub auto_rebalance_spread: Option<u64>,
}

impl Default for AssignLimits {
    fn default() -> AssignLimits {
        AssignLimits {
            max_moves: 32,
            max_resources: 100_000,
            max_weight: 1_000_000,
            delay_ms: BTreeMap::new(),
            auto_rebalance_spread: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Add {
        name: String,
        /// With `slot`: the group's type (or empty).
        node_type: String,
        weight: u32,
        labels: BTreeMap<String, String>,
        /// Bound to a slot (group, number) instead of a node type.
        slot: Option<(String, u32)>,
        wall_ms: u64,
    },
    CreateGroup {
        name: String,
        node_type: String,
        count: u32,
        wall_ms: u64,
    },
    DeleteGroup(String),
    /// Registration `node` claims `slot` of `group`, expecting it at `version`.
    Claim {
        group: String,
        slot: u32,
        version: u64,
        node: (NodeId, FencingToken),
        wall_ms: u64,
    },
    Delete(String),
    /// Rebalance the services of one node type, or all.
    Rebalance(Option<String>),
    /// Move the resources waiting out a delay window now (of one node type, or all).
    ReassignNow(Option<String>),
    /// The holder of `name` (its assignment named by `token`) lets it go.
    Release {
        name: String,
        token: FencingToken,
        wall_ms: u64,
    },
    /// The holder of `slot` (its grant named by `token`) lets it go.
    ReleaseSlot {
        slot: SlotName,
        token: FencingToken,
        wall_ms: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The resource as it is (after add or release), or as it was (after delete; `None` if
    /// there was none).
    /// Boxed, as every large answer (see the registry's `Response`).
    Resource(Option<Box<Resource>>),
    /// Moves begun: (resource, from, to).
    Moves(Vec<(String, NodeId, NodeId)>),
    /// The group as it is (after create or claim), or as it was (after delete).
    Group(Option<Box<SlotGroup>>),
}

/// Why a request was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    #[error(transparent)]
    Invalid(#[from] InvalidResource),
    #[error("{0}")]
    InvalidType(String),
    #[error("weight {weight} is over the limit of {max} (key `assign.max_weight`)")]
    WeightTooLarge { weight: u32, max: u32 },
    #[error(
        "resource `{name}` exists with node type {node_type}, weight {weight} and labels {labels:?}; delete it first to change it"
    )]
    Conflict {
        name: String,
        node_type: String,
        weight: u32,
        labels: BTreeMap<String, String>,
    },
    #[error("no resource named `{0}`")]
    Unknown(String),
    #[error(
        "resource `{name}` is not held under fencing token {named} (its holder now: {holder}); nothing was changed"
    )]
    NotHolder {
        name: String,
        named: FencingToken,
        holder: String,
    },
    #[error(
        "this cluster holds {max} resources, the most it may (key `assign.max_resources`); delete one first"
    )]
    TooMany { max: usize },
    #[error("no slot group named `{0}`")]
    UnknownGroup(String),
    #[error("slot group `{group}` has {count} slots: no slot {slot}")]
    NoSlot {
        group: String,
        slot: u32,
        count: usize,
    },
    #[error(
        "slot group `{name}` exists with node type {node_type} and {count} slots; delete it first to change it"
    )]
    GroupConflict {
        name: String,
        node_type: String,
        count: usize,
    },
    #[error("a slot group has 1 to {max} slots, not {count}")]
    SlotCount { count: u32, max: u32 },
    #[error(
        "slot {slot} of `{group}` is at version {version}{}, not the version {expected} claimed; nothing was changed",
        holder.as_ref().map(|h| format!(", held by live node {h}")).unwrap_or_default()
    )]
    SlotTaken {
        group: String,
        slot: u32,
        version: u64,
        expected: u64,
        holder: Option<NodeId>,
    },
    #[error("{count} resources are bound to slot group `{group}`: delete or rebind them first")]
    GroupInUse { group: String, count: usize },
    #[error("node {0} with that fencing token holds no live registration of the group's type")]
    NotEligible(NodeId),
    #[error(
        "resource `{name}` is bound to slot {slot} of `{group}`: it runs wherever that slot's holder is, and moves only with the slot"
    )]
    BoundToSlot {
        name: String,
        group: String,
        slot: u32,
    },
    #[error(
        "slot {slot} of `{group}` is not held under the grant {named} (its holder now: {holder}); nothing was changed"
    )]
    NotSlotHolder {
        group: String,
        slot: u32,
        named: FencingToken,
        holder: String,
    },
}

/// Most slots in one group.
pub const MAX_SLOTS: u32 = 10_000;

/// What a write waits with until committed.
#[derive(Debug, Clone)]
pub enum Waiting {
    /// Answer with the group as the committed state has it (or as it was, deleted).
    Group(String, Option<SlotGroup>),
    /// Answer with the resource as the committed state has it.
    Resource(String),
    Deleted(Option<Resource>),
    Moves(Vec<(String, NodeId, NodeId)>),
}

/// The work-assignment machine's leader-side service.
#[derive(Debug, Clone, Default)]
pub struct AssignService {
    limits: AssignLimits,
    /// Where each revoked resource is meant to go once its holder lets it go.
    moving: BTreeMap<String, NodeId>,
    /// Resources whose holder ended, waiting out their type's delay window: since when.
    waiting_since: BTreeMap<String, Millis>,
    /// Node types whose waiting resources move at the next tick (`None`: every type).
    reassign_now: Option<Option<String>>,
    /// The log position (term, last index) at which the last tick found nothing to do
    /// with nothing of its own pending. The leader's state reflects every entry through
    /// its last index, and the tick reads nothing else but the pending moves and waits
    /// above and the clock (for those waits alone): while the position stays and nothing
    /// is pending, the next tick would find nothing either, and is skipped. A tick walks
    /// every resource several times over (10,000 resources on 100 workers held the leader
    /// at 11 % of a core while nothing changed); renewals are no log entries, so a
    /// cluster at rest stays at one position.
    quiet_at: Option<(u64, u64)>,
    /// What placing a new resource reads, as of a log position: kept from one add to the
    /// next while nothing but those adds was appended, so that adding many resources in a
    /// row costs each a walk of the candidates, not of every registration and resource
    /// (adding 10,000 took 25 s of the leader's core, each slower than the last).
    placing: Option<Placing>,
}

/// The live registrations of one node type and the load each holds, as of the log
/// position `at` (of one type only: a resource goes to its own type, and a copy of every
/// registration kept between adds would cost the leader memory for each).
#[derive(Debug, Clone)]
struct Placing {
    at: (u64, u64),
    node_type: String,
    candidates: Vec<Candidate>,
    loads: BTreeMap<NodeId, u64>,
}

/// The live registrations, as candidates.
fn candidates<S: Part<Registry>>(state: &S) -> Vec<Candidate> {
    state.part().nodes().map(Candidate::of).collect()
}

/// The live registrations the tick can place anything on or must see alive: those of a node
/// type that a resource or slot group names, and every current holder. None when nothing
/// is assigned: the tick runs every `tick_ms` on the core thread, and building a candidate
/// (its labels parsed from its metadata) for each of 100k registrations there took
/// milliseconds, the writes' latency tail.
fn tick_candidates<S: Part<Registry> + Part<Assignments>>(state: &S) -> Vec<Candidate> {
    let assignments = resources(state);
    let mut types: BTreeSet<&str> = BTreeSet::new();
    let mut holders: BTreeSet<NodeId> = BTreeSet::new();
    for r in assignments.iter() {
        types.insert(&r.node_type);
        holders.extend(r.holder.as_ref().map(|h| h.node_id));
    }
    for g in assignments.groups() {
        types.insert(&g.node_type);
        holders.extend(
            g.slots
                .iter()
                .filter_map(|s| s.holder.as_ref())
                .map(|h| h.node_id),
        );
    }
    if types.is_empty() && holders.is_empty() {
        return Vec::new();
    }
    <S as Part<Registry>>::part(state)
        .nodes()
        .filter(|r| types.contains(r.node_type.as_str()) || holders.contains(&r.node_id))
        .map(Candidate::of)
        .collect()
}

/// The resources, in a state that also holds the registry.
fn resources<S: Part<Assignments>>(state: &S) -> &Assignments {
    state.part()
}

/// The holder a placement on `node` makes, at the log position `token`.
fn holder_on(
    candidates: &[Candidate],
    node: NodeId,
    token: FencingToken,
    wall_ms: u64,
) -> Option<Holder> {
    candidates
        .iter()
        .find(|c| c.node_id == node)
        .map(|c| Holder {
            node_id: c.node_id,
            addr: c.addr,
            registration: c.registration,
            token,
            since_ms: wall_ms,
        })
}

impl AssignService {
    /// The tick's work, done (see [`AssignService::quiet_at`] for when it is not).
    fn tick_now<S: Part<Registry> + Part<Assignments>>(&mut self, leader: &mut Leader<'_, S>) {
        let candidates = tick_candidates(leader.state());
        let wall_ms = leader.wall_ms();
        // Slots whose holder ended go to the oldest standbys, with their resources.
        let token = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let grants: Vec<Grant> = resources(leader.state())
            .groups()
            .flat_map(|g| {
                placement::slot_grants(g, &candidates)
                    .into_iter()
                    .map(|(slot, to)| Grant {
                        group: g.name.clone(),
                        slot,
                        to: to.and_then(|node| holder_on(&candidates, node, token, wall_ms)),
                    })
            })
            .collect();
        if !grants.is_empty() {
            leader.append(<S as Part<Assignments>>::wrap(Command::Grant(grants)));
        }
        // Slots of draining holders are revoked, as many as standbys can take.
        let revokes: Vec<SlotName> = resources(leader.state())
            .groups()
            .flat_map(|g| {
                placement::slot_drains(g, &candidates)
                    .into_iter()
                    .map(|slot| SlotName {
                        group: g.name.clone(),
                        slot,
                    })
            })
            .collect();
        if !revokes.is_empty() {
            leader.notice(format!(
                "{} slots of draining services revoked, to go to standbys once let go",
                revokes.len()
            ));
            leader.append(<S as Part<Assignments>>::wrap(Command::RevokeSlots(
                revokes,
            )));
        }
        let assignments = resources(leader.state());
        let moves = placement::orphans(assignments, &candidates);
        let moves = self.due(assignments, &candidates, moves, leader.now());
        if moves.is_empty() {
            if !self.drain(leader, &candidates) {
                self.auto_rebalance(leader, &candidates);
            }
            return;
        }
        let token = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let placements = moves
            .into_iter()
            .map(|(name, to)| {
                self.moving.remove(&name);
                Placement {
                    to: to.and_then(|node| holder_on(&candidates, node, token, wall_ms)),
                    name,
                }
            })
            .collect();
        leader.append(<S as Part<Assignments>>::wrap(Command::Place(placements)));
    }

    pub fn new(limits: AssignLimits) -> AssignService {
        AssignService {
            limits,
            moving: BTreeMap::new(),
            waiting_since: BTreeMap::new(),
            reassign_now: None,
            quiet_at: None,
            placing: None,
        }
    }

    /// Nothing pending of this service's own: no move awaiting its release, no resource
    /// waiting out a delay, no reassignment asked for.
    fn nothing_pending(&self) -> bool {
        self.moving.is_empty() && self.waiting_since.is_empty() && self.reassign_now.is_none()
    }

    pub fn limits(&self) -> &AssignLimits {
        &self.limits
    }

    /// Of the orphans' moves, those to make now: a resource whose holder's type has a delay
    /// window goes back to a new registration at its holder's address at once, waits while
    /// the window lasts, and moves by least load after it (or when asked to now).
    fn due(
        &mut self,
        assignments: &Assignments,
        candidates: &[Candidate],
        moves: Vec<(String, Option<NodeId>)>,
        now: Millis,
    ) -> Vec<(String, Option<NodeId>)> {
        let forced = self.reassign_now.take();
        let mut due = Vec::with_capacity(moves.len());
        for (name, to) in moves {
            let Some(r) = assignments.get(&name) else {
                continue;
            };
            let delay = self.limits.delay_ms.get(&r.node_type).copied().unwrap_or(0);
            let Some(old) = r.holder.as_ref().filter(|_| delay > 0) else {
                self.waiting_since.remove(&name);
                due.push((name, to));
                continue;
            };
            let back = candidates
                .iter()
                .find(|c| c.addr == old.addr && placement::eligible(r, c));
            let now_forced = forced
                .as_ref()
                .is_some_and(|t| t.as_ref().is_none_or(|t| *t == r.node_type));
            let since = *self.waiting_since.entry(name.clone()).or_insert(now);
            match back {
                Some(c) => {
                    self.waiting_since.remove(&name);
                    due.push((name, Some(c.node_id)));
                }
                None if now_forced || now.saturating_sub(since) >= delay => {
                    self.waiting_since.remove(&name);
                    due.push((name, to));
                }
                None => {}
            }
        }
        due
    }

    /// A service of a type holds nothing while the spread among that type's services is
    /// over the configured bound: revoke the moves that narrow it (no more than the cap of
    /// moves in flight).
    fn auto_rebalance<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        candidates: &[Candidate],
    ) {
        let Some(bound) = self.limits.auto_rebalance_spread else {
            return;
        };
        if !self.moving.is_empty() {
            return;
        }
        let assignments = resources(leader.state());
        let loads = assignments.loads();
        let idle_type = candidates
            .iter()
            .find(|c| {
                !loads.contains_key(&c.node_id)
                    && assignments
                        .iter()
                        .any(|r| r.node_type == c.node_type && r.slot.is_none())
            })
            .map(|c| c.node_type.clone());
        let Some(node_type) = idle_type else {
            return;
        };
        let planned = placement::rebalance(
            assignments,
            candidates,
            Some(&node_type),
            bound,
            self.limits.max_moves,
        );
        if planned.is_empty() {
            return;
        }
        for (name, to) in &planned {
            self.moving.insert(name.clone(), *to);
        }
        let names = planned.into_iter().map(|(n, _)| n).collect();
        leader.notice(format!(
            "a {node_type} service holds nothing: rebalancing (spread over {bound})"
        ));
        leader.append(<S as Part<Assignments>>::wrap(Command::Revoke(names)));
    }

    /// Revokes the resources of draining services (as many as the cap of moves in flight
    /// allows), each meant for the least loaded serving service: its holder lets it go and
    /// it moves then, as in a rebalance. Whether it began any.
    fn drain<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        candidates: &[Candidate],
    ) -> bool {
        if !candidates.iter().any(|c| c.draining) {
            return false;
        }
        let limit = self.limits.max_moves.saturating_sub(self.moving.len());
        let planned = placement::drains(resources(leader.state()), candidates, limit);
        if planned.is_empty() {
            return false;
        }
        for (name, to) in &planned {
            self.moving.insert(name.clone(), *to);
        }
        leader.notice(format!(
            "{} resources of draining services revoked, to move once let go",
            planned.len()
        ));
        let names = planned.into_iter().map(|(n, _)| n).collect();
        leader.append(<S as Part<Assignments>>::wrap(Command::Revoke(names)));
        true
    }

    fn check(
        &self,
        name: &str,
        node_type: &str,
        weight: u32,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), AssignError> {
        check_name(name)?;
        check_type(node_type).map_err(|e| AssignError::InvalidType(e.to_string()))?;
        if weight == 0 {
            return Err(InvalidResource::ZeroWeight.into());
        }
        if weight > self.limits.max_weight {
            return Err(AssignError::WeightTooLarge {
                weight,
                max: self.limits.max_weight,
            });
        }
        for key in labels.keys() {
            check_label(key)?;
        }
        Ok(())
    }

    fn add<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        resource: Resource,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Err(e) = self.check(
            &resource.name,
            &resource.node_type,
            resource.weight,
            &resource.labels,
        ) {
            return Outcome::Now(Err(e));
        }
        let assignments = resources(leader.state());
        if let Some(old) = assignments.get(&resource.name) {
            let same = old.node_type == resource.node_type
                && old.weight == resource.weight
                && old.labels == resource.labels
                && old.slot == resource.slot;
            if !same {
                return Outcome::Now(Err(AssignError::Conflict {
                    name: old.name.clone(),
                    node_type: old.node_type.clone(),
                    weight: old.weight,
                    labels: old.labels.clone(),
                }));
            }
            // Added before (a retry whose answer was lost): answered as it is, once what made
            // it so is committed.
            return Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting: Waiting::Resource(resource.name),
            };
        }
        if assignments.len() >= self.limits.max_resources {
            return Outcome::Now(Err(AssignError::TooMany {
                max: self.limits.max_resources,
            }));
        }
        let at = (leader.term(), leader.last_index());
        let mut placing = match self.placing.take() {
            Some(placing) if placing.at == at && placing.node_type == resource.node_type => placing,
            _ => {
                let candidates: Vec<Candidate> = <S as Part<Registry>>::part(leader.state())
                    .nodes()
                    .filter(|r| r.node_type == resource.node_type.as_str())
                    .map(Candidate::of)
                    .collect();
                let loads = placement::loads(assignments, &candidates);
                Placing {
                    at,
                    node_type: resource.node_type.clone(),
                    candidates,
                    loads,
                }
            }
        };
        let token = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let holder = match &resource.slot {
            // Bound to a slot: where its holder is.
            Some((group, slot)) => assignments
                .group(group)
                .and_then(|g| g.slots.get(*slot as usize))
                .and_then(|s| s.holder.clone())
                .map(|h| Holder {
                    token,
                    since_ms: resource.created_ms,
                    ..h
                }),
            None => placement::least_loaded_id(&resource, &placing.candidates, &placing.loads)
                .and_then(|node| holder_on(&placing.candidates, node, token, resource.created_ms)),
        };
        let (name, weight) = (resource.name.clone(), u64::from(resource.weight));
        let live_holder = holder
            .as_ref()
            .filter(|h| placing.candidates.iter().any(|c| c.is(h)))
            .map(|h| h.node_id);
        let resource = Resource { holder, ..resource };
        let written = write(leader, Command::Add(resource), Waiting::Resource(name));
        // Nothing but this add since `at`: what placing reads moved by its weight alone.
        if leader.last_index() == at.1 + 1 {
            if let Some(node) = live_holder {
                *placing.loads.entry(node).or_default() += weight;
            }
            placing.at = (at.0, at.1 + 1);
            self.placing = Some(placing);
        }
        written
    }

    fn create_group<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        group: SlotGroup,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Err(e) = check_name(&group.name) {
            return Outcome::Now(Err(e.into()));
        }
        if let Err(e) = check_type(&group.node_type) {
            return Outcome::Now(Err(AssignError::InvalidType(e.to_string())));
        }
        let count = group.slots.len();
        if let Some(old) = resources(leader.state()).group(&group.name) {
            if old.node_type == group.node_type && old.slots.len() == count {
                return Outcome::WhenCommitted {
                    index: leader.last_index(),
                    waiting: Waiting::Group(group.name, None),
                };
            }
            return Outcome::Now(Err(AssignError::GroupConflict {
                name: old.name.clone(),
                node_type: old.node_type.clone(),
                count: old.slots.len(),
            }));
        }
        let name = group.name.clone();
        // The slots are granted to the oldest services of the type on the next tick.
        write(
            leader,
            Command::CreateGroup(group),
            Waiting::Group(name, None),
        )
    }

    fn delete_group<S: Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        name: String,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Err(e) = check_name(&name) {
            return Outcome::Now(Err(e.into()));
        }
        let state = resources(leader.state());
        let Some(old) = state.group(&name).cloned() else {
            return Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting: Waiting::Group(name, None),
            };
        };
        let bound = state
            .iter()
            .filter(|r| r.slot.as_ref().is_some_and(|(g, _)| *g == name))
            .count();
        if bound > 0 {
            return Outcome::Now(Err(AssignError::GroupInUse {
                group: name,
                count: bound,
            }));
        }
        write(
            leader,
            Command::DeleteGroup(name.clone()),
            Waiting::Group(name, Some(old)),
        )
    }

    fn claim<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        group: String,
        slot: u32,
        version: u64,
        node: (NodeId, FencingToken),
        wall_ms: u64,
    ) -> Outcome<Response, AssignError, Waiting> {
        let candidates = candidates(leader.state());
        let state = resources(leader.state());
        let Some(g) = state.group(&group) else {
            return Outcome::Now(Err(AssignError::UnknownGroup(group)));
        };
        let Some(current) = g.slots.get(slot as usize) else {
            return Outcome::Now(Err(AssignError::NoSlot {
                group,
                slot,
                count: g.slots.len(),
            }));
        };
        let Some(claimant) = candidates
            .iter()
            .find(|c| (c.node_id, c.registration) == node && c.node_type == g.node_type)
        else {
            return Outcome::Now(Err(AssignError::NotEligible(node.0)));
        };
        let live = current
            .holder
            .as_ref()
            .filter(|h| candidates.iter().any(|c| c.is(h)));
        let holds_other =
            g.slots.iter().enumerate().any(|(i, s)| {
                i != slot as usize && s.holder.as_ref().is_some_and(|h| claimant.is(h))
            });
        if current.version != version || live.is_some_and(|h| !claimant.is(h)) || holds_other {
            return Outcome::Now(Err(AssignError::SlotTaken {
                group,
                slot,
                version: current.version,
                expected: version,
                holder: live.map(|h| h.node_id),
            }));
        }
        let token = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let to = holder_on(&candidates, claimant.node_id, token, wall_ms);
        write(
            leader,
            Command::Grant(vec![Grant {
                group: group.clone(),
                slot,
                to,
            }]),
            Waiting::Group(group, None),
        )
    }

    fn delete<S: Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        name: String,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Err(e) = check_name(&name) {
            return Outcome::Now(Err(e.into()));
        }
        self.moving.remove(&name);
        self.waiting_since.remove(&name);
        match resources(leader.state()).get(&name).cloned() {
            // Deleting what is not there: nothing to do, answered as such.
            None => Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting: Waiting::Deleted(None),
            },
            Some(old) => write(leader, Command::Delete(name), Waiting::Deleted(Some(old))),
        }
    }

    fn rebalance<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        node_type: Option<String>,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Some(t) = &node_type
            && let Err(e) = check_type(t)
        {
            return Outcome::Now(Err(AssignError::InvalidType(e.to_string())));
        }
        let assignments = resources(leader.state());
        let candidates = candidates(leader.state());
        let in_flight = self.moving.len();
        let limit = self.limits.max_moves.saturating_sub(in_flight);
        let planned =
            placement::rebalance(assignments, &candidates, node_type.as_deref(), 0, limit);
        // A move narrows the spread; one that would only swap who is heavier is not made.
        let moves: Vec<(String, NodeId, NodeId)> = planned
            .into_iter()
            .filter_map(|(name, to)| {
                let from = assignments.get(&name)?.holder.as_ref()?.node_id;
                Some((name, from, to))
            })
            .collect();
        if moves.is_empty() {
            return Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting: Waiting::Moves(Vec::new()),
            };
        }
        for (name, _, to) in &moves {
            self.moving.insert(name.clone(), *to);
        }
        let names = moves.iter().map(|(n, _, _)| n.clone()).collect();
        write(leader, Command::Revoke(names), Waiting::Moves(moves))
    }

    fn release<S: Part<Registry> + Part<Assignments>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        name: String,
        token: FencingToken,
        wall_ms: u64,
    ) -> Outcome<Response, AssignError, Waiting> {
        if let Err(e) = check_name(&name) {
            return Outcome::Now(Err(e.into()));
        }
        let assignments = resources(leader.state());
        let Some(r) = assignments.get(&name) else {
            return Outcome::Now(Err(AssignError::Unknown(name)));
        };
        let Some(h) = r.holder.as_ref().filter(|h| h.token == token) else {
            let holder = r.holder.as_ref().map_or("nobody".to_owned(), |h| {
                format!("node {} with token {}", h.node_id, h.token)
            });
            return Outcome::Now(Err(AssignError::NotHolder {
                name,
                named: token,
                holder,
            }));
        };
        if let Some((group, slot)) = &r.slot {
            return Outcome::Now(Err(AssignError::BoundToSlot {
                name,
                group: group.clone(),
                slot: *slot,
            }));
        }
        let releasing = h.node_id;
        // The next holder: where a rebalance meant it to go, else the least loaded other.
        let others: Vec<Candidate> = candidates(leader.state())
            .into_iter()
            .filter(|c| c.node_id != releasing)
            .collect();
        let target = self
            .moving
            .remove(&name)
            .filter(|to| {
                others
                    .iter()
                    .any(|c| c.node_id == *to && c.serving && placement::eligible(r, c))
            })
            .or_else(|| placement::place_new(assignments, r, &others));
        let next = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let to = target.and_then(|node| holder_on(&others, node, next, wall_ms));
        write(
            leader,
            Command::Place(vec![Placement {
                name: name.clone(),
                to,
            }]),
            Waiting::Resource(name),
        )
    }
}

/// The holder of `slot`, its grant named by `token`, lets it go: it goes at once to the
/// oldest standby in rotation other than that holder (or to nobody), with the resources
/// bound to it, and any other free slot of the group is granted in the same entry.
fn release_slot<S: Part<Registry> + Part<Assignments>>(
    leader: &mut Leader<'_, S>,
    slot: SlotName,
    token: FencingToken,
    wall_ms: u64,
) -> Outcome<Response, AssignError, Waiting> {
    if let Err(e) = check_name(&slot.group) {
        return Outcome::Now(Err(e.into()));
    }
    let Some(group) = resources(leader.state()).group(&slot.group) else {
        return Outcome::Now(Err(AssignError::UnknownGroup(slot.group)));
    };
    let Some(current) = group.slots.get(slot.slot as usize) else {
        return Outcome::Now(Err(AssignError::NoSlot {
            count: group.slots.len(),
            group: slot.group,
            slot: slot.slot,
        }));
    };
    let Some(releasing) = current.holder.as_ref().filter(|h| h.token == token) else {
        let holder = current.holder.as_ref().map_or("nobody".to_owned(), |h| {
            format!("node {} with grant {}", h.node_id, h.token)
        });
        return Outcome::Now(Err(AssignError::NotSlotHolder {
            group: slot.group,
            slot: slot.slot,
            named: token,
            holder,
        }));
    };
    let others: Vec<Candidate> = candidates(leader.state())
        .into_iter()
        .filter(|c| !c.is(releasing))
        .collect();
    let mut freed = group.clone();
    freed.slots[slot.slot as usize].holder = None;
    let next = FencingToken {
        term: leader.term(),
        index: leader.next_index(),
    };
    let mut grants: Vec<Grant> = placement::slot_grants(&freed, &others)
        .into_iter()
        .map(|(number, to)| Grant {
            group: slot.group.clone(),
            slot: number,
            to: to.and_then(|node| holder_on(&others, node, next, wall_ms)),
        })
        .collect();
    if !grants.iter().any(|g| g.slot == slot.slot) {
        grants.push(Grant {
            group: slot.group.clone(),
            slot: slot.slot,
            to: None,
        });
    }
    write(
        leader,
        Command::Grant(grants),
        Waiting::Group(slot.group, None),
    )
}

/// Appends `command`; answered with `waiting` once committed.
fn write<S: Part<Assignments>>(
    leader: &mut Leader<'_, S>,
    command: Command,
    waiting: Waiting,
) -> Outcome<Response, AssignError, Waiting> {
    match leader.append(S::wrap(command)) {
        Some(index) => Outcome::WhenCommitted { index, waiting },
        // Checked against the state just before: a bug, and the leader's notice says so.
        None => Outcome::Now(Err(AssignError::Unknown(
            "(the leader refused its own command; see its log)".into(),
        ))),
    }
}

impl<S: Part<Registry> + Part<Assignments>> Service<S> for AssignService {
    type Request = Request;
    type Response = Response;
    type Error = AssignError;
    type Waiting = Waiting;

    /// A new leader starts the delay windows afresh (waiting longer, never less).
    fn lead(&mut self, _state: &S, _now: Millis, _renewals: crate::consensus::Knowledge) {
        self.moving.clear();
        self.waiting_since.clear();
        self.quiet_at = None;
        self.placing = None;
    }

    fn step_down(&mut self) {
        self.moving.clear();
        self.waiting_since.clear();
        self.quiet_at = None;
        self.placing = None;
    }

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, AssignError, Waiting> {
        match request {
            Request::Add {
                name,
                node_type,
                weight,
                labels,
                slot,
                wall_ms,
            } => {
                // A resource bound to a slot is of its group's type.
                let node_type = match &slot {
                    Some((group, number)) => {
                        let Some(g) = resources(leader.state()).group(group) else {
                            return Outcome::Now(Err(AssignError::UnknownGroup(group.clone())));
                        };
                        if *number as usize >= g.slots.len() {
                            return Outcome::Now(Err(AssignError::NoSlot {
                                group: group.clone(),
                                slot: *number,
                                count: g.slots.len(),
                            }));
                        }
                        g.node_type.clone()
                    }
                    None => node_type,
                };
                let resource = Resource {
                    name,
                    node_type,
                    weight,
                    labels,
                    holder: None,
                    revoking: false,
                    created_ms: wall_ms,
                    slot,
                };
                self.add(leader, resource)
            }
            Request::CreateGroup {
                name,
                node_type,
                count,
                wall_ms,
            } => {
                if count == 0 || count > MAX_SLOTS {
                    return Outcome::Now(Err(AssignError::SlotCount {
                        count,
                        max: MAX_SLOTS,
                    }));
                }
                let group = SlotGroup {
                    name,
                    node_type,
                    slots: vec![Slot::default(); count as usize],
                    created_ms: wall_ms,
                };
                self.create_group(leader, group)
            }
            Request::DeleteGroup(name) => self.delete_group(leader, name),
            Request::Claim {
                group,
                slot,
                version,
                node,
                wall_ms,
            } => self.claim(leader, group, slot, version, node, wall_ms),
            Request::Delete(name) => self.delete(leader, name),
            Request::Rebalance(node_type) => self.rebalance(leader, node_type),
            Request::ReassignNow(node_type) => {
                if let Some(t) = &node_type
                    && let Err(e) = check_type(t)
                {
                    return Outcome::Now(Err(AssignError::InvalidType(e.to_string())));
                }
                self.reassign_now = Some(node_type);
                Outcome::WhenCommitted {
                    index: leader.last_index(),
                    waiting: Waiting::Moves(Vec::new()),
                }
            }
            Request::Release {
                name,
                token,
                wall_ms,
            } => self.release(leader, name, token, wall_ms),
            Request::ReleaseSlot {
                slot,
                token,
                wall_ms,
            } => release_slot(leader, slot, token, wall_ms),
        }
    }

    /// Resources whose holder's registration has ended (this very tick, or by an unregister
    /// since the last) go to the least loaded eligible live services, all in one command.
    fn tick(&mut self, leader: &mut Leader<'_, S>) {
        let at = (leader.term(), leader.last_index());
        if self.quiet_at == Some(at) && self.nothing_pending() {
            return;
        }
        self.quiet_at = None;
        self.tick_now(leader);
        if leader.last_index() == at.1 && self.nothing_pending() {
            self.quiet_at = Some(at);
        }
    }

    fn answer(&self, state: &S, waiting: Waiting) -> Result<Response, AssignError> {
        Ok(match waiting {
            Waiting::Group(name, None) => {
                Response::Group(resources(state).group(&name).cloned().map(Box::new))
            }
            Waiting::Group(_, gone) => Response::Group(gone.map(Box::new)),
            Waiting::Resource(name) => {
                Response::Resource(resources(state).get(&name).cloned().map(Box::new))
            }
            Waiting::Deleted(old) => Response::Resource(old.map(Box::new)),
            Waiting::Moves(moves) => Response::Moves(moves),
        })
    }
}
