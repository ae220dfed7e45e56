//! Work assignment's workload and invariants for the simulations.
//!
//! Workers register (the registry's requests), report to keep their leases, now and then die
//! (stop reporting) and come back as new registrations; an admin adds resources of random
//! weights, deletes and re-adds some, asks for rebalances, drains a worker now and then
//! (and lets the slot it is asked to give up go, as its holder would). Checked on every replica
//! after every step, in its committed states (a replica's state may also hold entries a
//! later leader overwrites; its committed states are prefixes of one history):
//!
//! * a resource or a slot changes holder only once its previous holder's registration has
//!   ended in that replica's state, or its holder was revoking it (one owner at a time);
//! * fencing tokens of successive holders of a resource rise;
//! * a resource bound to a slot is held by that slot's holder, or by nobody: never by
//!   another slot's holder or a standby;
//! * once healed and quiet, every beacon holds the same assignments, and no resource is held
//!   by a registration that has ended.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::net::SocketAddr;

use super::service::{
    AssignError, AssignService, Request as AssignRequest, Response as AssignResponse,
};
use super::state::{Assignments, Resource, SlotName};
use crate::consensus::{ReplyError, Service};
use crate::machines::registry::{
    FencingToken, NodeId, Registry, RegistryService,
    lives::{Lives, Turn},
    service::{Request as RegistryRequest, SetHealth},
};
use crate::machines::{Part, Routes};
use crate::sim::{Answer, Checked, Committed, Context, InFlight, View, Workload};
use crate::time::Millis;

/// Resources the admin keeps.
const RESOURCES: usize = 8;
/// Client index of the admin; workers are the others.
const ADMIN: usize = 0;

/// What a client sent a request for.
#[derive(Debug, Clone)]
pub enum Sent {
    Register(SocketAddr),
    Report,
    Admin,
    CreateGroup,
    /// A drain or undrain of a worker (which may have ended meanwhile).
    Drain,
    /// A revoked slot let go (by then it may have moved on).
    ReleaseSlot,
}

/// A slot as a replica showed it: its holder's registration, its version, and the grant's
/// token.
type SlotSeen = (Option<(NodeId, FencingToken)>, u64, Option<FencingToken>);

/// What one replica showed: per resource, and per slot of group `g`.
#[derive(Debug, Default)]
struct Shown {
    resources: BTreeMap<String, Seen>,
    slots: Option<Vec<SlotSeen>>,
}

/// What a replica showed of a resource at the last check.
#[derive(Debug, Clone)]
struct Seen {
    /// A resource deleted and added again is another one.
    created_ms: u64,
    registration: Option<(NodeId, FencingToken)>,
    token: Option<FencingToken>,
    revoking: bool,
}

/// The clients: workers and an admin, of work assignment's service `X` (the real one, or
/// one a test breaks on purpose to see the invariants catch it).
#[derive(Debug)]
pub struct Clients<X = AssignService> {
    clients: usize,
    lives: Lives,
    in_flight: InFlight<Sent>,
    /// What each replica showed.
    seen: Committed<Shown>,
    /// Group `g` was created (acknowledged): resources may be bound to its slots.
    group_made: bool,
    /// Live workers a replica showed, for the admin to drain.
    workers: Vec<NodeId>,
    /// Slots the leader showed being revoked, with their grant: let go by the admin.
    revoked: BTreeMap<u32, FencingToken>,
    /// Every (slot, grant) any replica showed being revoked, committed or not: a slot may
    /// leave a live holder only after the leader asked it to let go.
    asked: BTreeSet<(u32, FencingToken)>,
    pub drains: u64,
    pub slot_releases: u64,
    pub moves: u64,
    pub slot_moves: u64,
    pub registrations: u64,
    pub admin_writes: u64,
    service: PhantomData<X>,
}

impl<X> Clients<X> {
    pub fn new(clients: usize) -> Clients<X> {
        Clients {
            clients: clients.max(2),
            lives: Lives::new("WORKER", 9),
            in_flight: InFlight::default(),
            seen: Committed::default(),
            group_made: false,
            workers: Vec::new(),
            revoked: BTreeMap::new(),
            asked: BTreeSet::new(),
            drains: 0,
            slot_releases: 0,
            moves: 0,
            slot_moves: 0,
            registrations: 0,
            admin_writes: 0,
            service: PhantomData,
        }
    }

    /// The clients this workload uses (the admin and at least one worker).
    pub fn clients(&self) -> usize {
        self.clients
    }
}

fn registration_of(r: &Resource) -> Option<(NodeId, FencingToken)> {
    r.holder.as_ref().map(|h| (h.node_id, h.registration))
}

fn live(registry: &Registry, (id, token): (NodeId, FencingToken)) -> bool {
    registry.is_live(id, token)
}

impl<S, V, X> Workload<S, V> for Clients<X>
where
    S: Part<Registry> + Part<Assignments>,
    X: Service<S, Request = AssignRequest, Response = AssignResponse, Error = AssignError>,
    V: Routes<S, RegistryService> + Routes<S, X>,
{
    type Sent = Sent;

    fn in_flight(&mut self) -> &mut InFlight<Sent> {
        &mut self.in_flight
    }

    fn act(&mut self, cx: &mut dyn Context<V::Request>) -> Checked {
        let now = cx.now();
        for client in 0..self.clients {
            if self.in_flight.waiting(client, now) {
                continue;
            }
            let (request, sent) = if client == ADMIN {
                let i = cx.below(RESOURCES as u64);
                let name = format!("r{i}");
                let mut sent = Sent::Admin;
                let revoked = self.revoked.pop_first();
                let request = if let Some((slot, token)) = revoked {
                    sent = Sent::ReleaseSlot;
                    AssignRequest::ReleaseSlot {
                        slot: SlotName {
                            group: "g".into(),
                            slot,
                        },
                        token,
                        wall_ms: now,
                    }
                } else if !self.workers.is_empty() && cx.chance(0.03) {
                    let node_id = self.workers[cx.below(self.workers.len() as u64) as usize];
                    let request = RegistryRequest::SetHealth(SetHealth {
                        node_id,
                        status: None,
                        draining: Some(cx.chance(0.6)),
                        note: String::new(),
                        wall_ms: now,
                    });
                    let request = <V as Routes<S, RegistryService>>::request(request);
                    self.in_flight.send(cx, client, request, Sent::Drain, 300);
                    continue;
                } else if cx.chance(0.05) {
                    sent = Sent::CreateGroup;
                    AssignRequest::CreateGroup {
                        name: "g".into(),
                        node_type: "WORKER".into(),
                        count: 2,
                        wall_ms: now,
                    }
                } else if self.group_made && cx.chance(0.1) {
                    // Bound to a slot: runs wherever the slot's holder is, never elsewhere.
                    let slot = (i % 2) as u32;
                    AssignRequest::Add {
                        name: format!("bound{slot}"),
                        node_type: String::new(),
                        weight: 1,
                        labels: BTreeMap::new(),
                        slot: Some(("g".into(), slot)),
                        wall_ms: now,
                    }
                } else if cx.chance(0.05) {
                    AssignRequest::Rebalance(None)
                } else if cx.chance(0.05) {
                    AssignRequest::Delete(name)
                } else {
                    AssignRequest::Add {
                        // Always the same for a name: adding it again is idempotent.
                        weight: 1 + (i % 3) as u32,
                        name,
                        node_type: "WORKER".into(),
                        labels: BTreeMap::new(),
                        slot: None,
                        wall_ms: now,
                    }
                };
                (<V as Routes<S, X>>::request(request), sent)
            } else {
                match self.lives.turn(client, cx) {
                    Turn::Register(addr, request) => (
                        <V as Routes<S, RegistryService>>::request(request),
                        Sent::Register(addr),
                    ),
                    Turn::Up(worker) => {
                        if !worker.report_due(now) {
                            continue;
                        }
                        let request = self.lives.report(client, worker, now);
                        (
                            <V as Routes<S, RegistryService>>::request(request),
                            Sent::Report,
                        )
                    }
                    Turn::Idle => continue,
                }
            };
            self.in_flight.send(cx, client, request, sent, 300);
        }
        Ok(())
    }

    fn answered(&mut self, cx: &mut dyn Context<V::Request>, a: Answer<S, V, Sent>) -> Checked {
        let (client, sent, reply) = (a.client, a.sent, a.reply);
        let now = cx.now();
        match sent {
            Sent::Register(addr) => {
                let registered = match reply {
                    Ok(r) => <V as Routes<S, RegistryService>>::response(r),
                    Err(_) => None,
                };
                if self.lives.registered(client, addr, registered, now) {
                    self.registrations += 1;
                }
            }
            Sent::Report => {
                if let Err(ReplyError::Machine(_)) = reply {
                    // The lease is gone: a new life.
                    self.lives.lost(client, now);
                }
            }
            // The worker may have ended, the slot moved on: neither is a failure.
            Sent::Drain => self.drains += u64::from(reply.is_ok()),
            Sent::ReleaseSlot => self.slot_releases += u64::from(reply.is_ok()),
            Sent::Admin | Sent::CreateGroup => match reply {
                Ok(_) => {
                    self.admin_writes += 1;
                    if matches!(sent, Sent::CreateGroup) {
                        self.group_made = true;
                    }
                }
                Err(ReplyError::Consensus(_)) => {}
                Err(ReplyError::Machine(e)) => {
                    let e = <V as Routes<S, X>>::error(e);
                    return Err(format!("the admin's request was refused: {e:?}"));
                }
            },
        }
        Ok(())
    }

    fn check(&mut self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        for v in replicas {
            let state = v.replica.state();
            let registry: &Registry = state.part();
            let assignments: &Assignments = state.part();
            if v.replica.is_leader() {
                self.workers = registry
                    .nodes()
                    .filter(|n| n.node_type == "WORKER")
                    .map(|n| n.node_id)
                    .collect();
            }
            for (i, s) in assignments
                .group("g")
                .iter()
                .flat_map(|g| g.slots.iter().enumerate())
            {
                if let Some(h) = s.holder.as_ref().filter(|_| s.revoking) {
                    self.asked.insert((i as u32, h.token));
                    // As a holder hears of it: from the leader.
                    if v.replica.is_leader() {
                        self.revoked.insert(i as u32, h.token);
                    }
                }
            }
            let Some(shown) = self.seen.of(v) else {
                continue;
            };
            if let Some(g) = assignments.group("g") {
                let now: Vec<SlotSeen> = g
                    .slots
                    .iter()
                    .map(|s| {
                        (
                            s.holder.as_ref().map(|h| (h.node_id, h.registration)),
                            s.version,
                            s.holder.as_ref().map(|h| h.token),
                        )
                    })
                    .collect();
                for (i, (holder, _, _)) in now.iter().enumerate() {
                    if holder.is_some() && now[..i].iter().any(|(other, _, _)| other == holder) {
                        return Err(format!(
                            "{}: registration {holder:?} holds two slots of group g",
                            v.addr
                        ));
                    }
                }
                if let Some(before) = &shown.slots
                    && before.len() == now.len()
                {
                    for (i, ((old, old_version, grant), (new, version, _))) in
                        before.iter().zip(&now).enumerate()
                    {
                        if version < old_version {
                            return Err(format!(
                                "{}: slot {i} of g went back from version {old_version} to {version}",
                                v.addr
                            ));
                        }
                        if old != new {
                            self.slot_moves += 1;
                        }
                        if old != new
                            && let Some(old) = old
                            && !grant.is_some_and(|g| self.asked.contains(&(i as u32, g)))
                            && live(registry, *old)
                        {
                            return Err(format!(
                                "{}: slot {i} of g moved from node {} to {new:?} while its registration is live and had not been asked to let it go",
                                v.addr, old.0
                            ));
                        }
                    }
                }
                shown.slots = Some(now);
            }
            let mut now_seen = BTreeMap::new();
            for r in assignments.iter() {
                if let Some((group, slot)) = &r.slot {
                    let slot_holder = assignments
                        .group(group)
                        .and_then(|g| g.slots.get(*slot as usize))
                        .and_then(|s| s.holder.as_ref())
                        .map(|h| (h.node_id, h.registration));
                    if let Some(held) = registration_of(r)
                        && Some(held) != slot_holder
                    {
                        return Err(format!(
                            "{}: resource {} is bound to slot {slot} of {group} (held by {slot_holder:?}) but runs on node {} (registration {})",
                            v.addr, r.name, held.0, held.1
                        ));
                    }
                }
                let current = Seen {
                    created_ms: r.created_ms,
                    registration: registration_of(r),
                    token: r.holder.as_ref().map(|h| h.token),
                    revoking: r.revoking,
                };
                if let Some(before) = shown
                    .resources
                    .get(&r.name)
                    .filter(|b| b.created_ms == r.created_ms)
                {
                    let moved = before.registration != current.registration;
                    // A bound resource moves with its slot, checked as the slot above.
                    if moved
                        && r.slot.is_none()
                        && let Some(old) = before.registration
                        && !before.revoking
                        && live(registry, old)
                    {
                        return Err(format!(
                            "{}: resource {} moved from node {} (registration {}) to {:?} while that registration is live and was not revoking it",
                            v.addr, r.name, old.0, old.1, current.registration
                        ));
                    }
                    if moved && let (Some(a), Some(b)) = (before.token, current.token) {
                        if b <= a {
                            return Err(format!(
                                "{}: resource {} went to a holder with token {b}, not above its previous holder's {a}",
                                v.addr, r.name
                            ));
                        }
                        self.moves += 1;
                    }
                }
                now_seen.insert(r.name.clone(), current);
            }
            shown.resources = now_seen;
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        <V as Routes<S, X>>::request(AssignRequest::Add {
            name: "probe".into(),
            node_type: "PROBE".into(),
            weight: 1,
            labels: BTreeMap::new(),
            slot: None,
            wall_ms: 0,
        })
    }

    fn converged(&self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        let first = replicas.first().map(|v| {
            let a: &Assignments = v.replica.state().part();
            a
        });
        for v in replicas {
            let assignments: &Assignments = v.replica.state().part();
            if Some(assignments) != first {
                return Err(format!(
                    "{} holds {assignments:?}, another beacon {first:?}",
                    v.addr
                ));
            }
            if v.replica.is_leader() {
                let registry: &Registry = v.replica.state().part();
                for r in assignments.iter() {
                    if let Some(reg) = registration_of(r)
                        && !live(registry, reg)
                    {
                        return Err(format!(
                            "leader {}: resource {} is held by node {} whose registration has ended",
                            v.addr, r.name, reg.0
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("moves", self.moves),
            ("slot_moves", self.slot_moves),
            ("drains", self.drains),
            ("slot_releases", self.slot_releases),
            ("registrations", self.registrations),
            ("admin_writes", self.admin_writes),
        ]
    }
}
