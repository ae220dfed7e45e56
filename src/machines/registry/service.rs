//! The registry's leader-side service: registrations, reports, unregisters, and the leases
//! that only the leader keeps.
//!
//! Services report to the leader, which ends a registration whose reports stop (an `Expire`
//! command, the ID going to quarantine). A new leader starts every live registration's lease
//! afresh, as etcd does, so services keep their IDs across a failover as long as they reach
//! the new leader within a lease. A report is answered once the consensus core has confirmed
//! that this beacon still leads (quorum mode), and leases are judged only while it knows it
//! does.
//!
//! Every write that acts on a registration (a report, an unregister) names it by its fencing
//! token and is refused when that registration no longer holds the ID, so a request that
//! arrives late, after its registration ended and the ID went to someone else, cannot end or
//! renew the next holder's registration.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use super::damping::Damping;
pub use super::damping::DampingConfig;
pub use super::leases::Lease;
use super::leases::Leases;
use super::leases::LoadReport;
use super::state::{
    Command, Exhausted, FencingToken, Health, HealthFilter, InvalidRequest, NodeId, NodeRecord,
    Registry, Status,
};
use super::wire::LoadStats;
use crate::consensus::{Knowledge, Leader, Outcome, RenewalTable, Service};
use crate::machines::Part;
use crate::time::Millis;

/// The service's share of the configuration.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    pub lease_ms: u64,
    /// Node type -> the node types it subscribes to.
    pub subscriptions: BTreeMap<String, Vec<String>>,
    /// When a service whose status keeps changing is held at critical.
    pub damping: DampingConfig,
    /// Leases a follower installs per tick from a renewal table its leader sent (see
    /// `leases.rs`); the simulations make it small, so that their few registrations are
    /// installed over several ticks too.
    pub table_part: usize,
    /// Whether a routine report's confirmation may wait for the leader's next heartbeat
    /// (see [`super::config::RegistrySettings::routine_waits`]).
    pub routine_waits: bool,
}

/// A registration request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    pub node_type: String,
    pub addr: SocketAddr,
    pub access_addr: Option<SocketAddr>,
    pub worker_num: u32,
    pub metadata: String,
    /// Wall-clock time of the request (ms since the Unix epoch), stamped by the server.
    pub wall_ms: u64,
    /// Who asks: recorded as the owner; a restricted caller (a `service` identity) gets no
    /// other owner's registration back.
    pub caller: Caller,
}

/// Who sends a request, as far as the registry cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The identity's name (empty without authentication).
    pub name: String,
    /// A `service` identity: it may act only on registrations it owns.
    pub restricted: bool,
}

impl Caller {
    /// Refuses a restricted caller acting on another's registration.
    pub fn may_act_on(&self, record: &NodeRecord) -> Result<(), RegistryError> {
        if self.restricted && *record.owner != *self.name {
            return Err(RegistryError::NotOwner {
                node_id: record.node_id,
                owner: record.owner.to_string(),
                caller: self.name.clone(),
            });
        }
        Ok(())
    }
}

/// Where the registration to end is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Id(NodeId),
    Addr(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Id(id) => write!(f, "node ID {id}"),
            Target::Addr(addr) => write!(f, "address {addr}"),
        }
    }
}

/// A request to end a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unregister {
    pub target: Target,
    /// The registration meant: if the one found at `target` has another token, nothing
    /// changes.
    pub token: FencingToken,
    /// The holder gives its ID up (free at once); otherwise the ID goes to quarantine.
    pub release: bool,
    /// With `release`: the last timestamp the holder used in snowflake IDs (0: none).
    pub clock_ms: u64,
    pub caller: Caller,
}

/// A service's periodic report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub node_id: NodeId,
    pub addr: SocketAddr,
    /// The registration the report renews.
    pub token: FencingToken,
    /// The load it reports, its own and each worker's; `None`: none (all zeros, no
    /// workers), which most reports say.
    pub load: Option<Box<LoadReport>>,
    /// A registration generating snowflake IDs: the highest timestamp it asks to use before
    /// its next report (0: none).
    pub clock_ms: u64,
    /// The health its own checks find, if it runs any.
    pub health: Option<Box<ReportedHealth>>,
    /// Sent on the client's schedule with most of the lease left: its confirmation may wait
    /// for the leader's next heartbeat ([`Outcome::WithNextBeat`]).
    pub routine: bool,
    pub caller: Caller,
}

/// The health a service reports for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedHealth {
    pub status: Status,
    /// Why; taken when the status changes (a note alone changing costs no log entry, so a
    /// check whose output differs every time does not write on every report).
    pub note: String,
    /// Wall-clock time of the report (ms since the Unix epoch), stamped by the server.
    pub wall_ms: u64,
}

/// An operator's change to a registration's health: its status, its drain, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetHealth {
    pub node_id: NodeId,
    /// `None` leaves it.
    pub status: Option<Status>,
    /// `None` leaves it.
    pub draining: Option<bool>,
    /// Replaces the note (empty clears it).
    pub note: String,
    /// Wall-clock time of the request (ms since the Unix epoch), stamped by the server.
    pub wall_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Boxed: a registration's request is large, and every request is moved several times
    /// on its way to the core, the renewal ([`Report`]), by far the most frequent, kept
    /// small.
    Register(Box<RegisterRequest>),
    Unregister(Unregister),
    Report(Report),
    /// An operator ends an ID's quarantine early (its holder has certainly stopped using
    /// it): the ID may be allocated at once.
    FreeId(NodeId),
    /// An operator sets a registration's health or drains it.
    SetHealth(SetHealth),
}

/// Records are boxed: an answer is moved a few times on its way from the core to its
/// connection, and the answer to a renewal, the most frequent by far, is small. With a record
/// inline a registry answer was 168 bytes (and with a task inline, every machine's answer
/// 240).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Registered {
        record: Box<NodeRecord>,
        lease_ms: u64,
        subscribe: Vec<String>,
        /// The highest timestamp a previous holder of the ID may have used (snowflake).
        clock_floor_ms: u64,
        /// The live record this registration replaced (the same address registered again
        /// with other details: a registration states the whole record), if it did.
        previous: Option<Box<NodeRecord>>,
    },
    Unregistered(Box<NodeRecord>),
    /// The ID is free: the registration whose quarantine ended, or `None` if it was free.
    Freed(NodeId, Option<Box<NodeRecord>>),
    Reported {
        node_id: NodeId,
        lease_ms: u64,
        token: FencingToken,
        /// The snowflake timestamp committed as usable (0 when the report asked none).
        clock_ms: u64,
    },
    /// The registration with the health an operator set.
    HealthSet(Box<NodeRecord>),
}

/// Why the registry refused a request; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    #[error(transparent)]
    Exhausted(#[from] Exhausted),
    #[error(
        "address {addr} is already registered as type {node_type} (node {node_id}); unregister it first"
    )]
    Conflict {
        addr: SocketAddr,
        node_type: String,
        node_id: NodeId,
    },
    #[error(
        "node {node_id} at {addr} with fencing token {token} holds no lease (it expired, was unregistered, or never existed); stop using the ID and register again"
    )]
    NoLease {
        node_id: NodeId,
        addr: SocketAddr,
        token: FencingToken,
    },
    #[error("no registration for {0}")]
    UnknownTarget(String),
    #[error(
        "node ID {node_id} is held by a live registration ({node_type} at {addr}): unregister it (`unregister {node_id} --free` frees the ID at once)"
    )]
    IdInUse {
        node_id: NodeId,
        node_type: String,
        addr: SocketAddr,
    },
    #[error(
        "the registration named (fencing token {named}) no longer holds node ID {node_id}: it is now held by the registration {holder} at {addr}; nothing was changed"
    )]
    NotHolder {
        node_id: NodeId,
        named: FencingToken,
        holder: FencingToken,
        addr: SocketAddr,
    },
    #[error(
        "node ID {node_id} was registered, but the registration ended (its lease ran out or it was unregistered) before it was committed; register again"
    )]
    EndedBeforeCommit { node_id: NodeId },
    #[error(
        "node ID {node_id} was registered by `{owner}`; `{caller}` may act only on its own registrations"
    )]
    NotOwner {
        node_id: NodeId,
        owner: String,
        caller: String,
    },
}

/// What a write waits with until committed.
#[derive(Debug, Clone)]
pub enum Waiting {
    /// The registration of this ID; with the record it replaced, if it updated a live one.
    Registered(NodeId, Option<Box<NodeRecord>>),
    Unregistered(Box<NodeRecord>),
    Freed(NodeId, Option<Box<NodeRecord>>),
    /// A report whose clock reservation or health is being committed.
    Reported(Response),
    /// An operator's health change for this ID.
    HealthSet(NodeId),
}

/// The registry's leader-side service.
#[derive(Debug, Clone)]
pub struct RegistryService {
    cfg: RegistryConfig,
    /// Leases of live registrations while this beacon leads; on a follower, the renewals
    /// it heard of from its leader (what it keeps if it leads next).
    leases: Leases,
    /// Whether this beacon leads: what a follower heard is no lease of its own to show.
    leading: bool,
    /// Each reporting service's recent status changes; empty unless this beacon leads.
    damping: Damping,
}

impl RegistryService {
    pub fn new(cfg: RegistryConfig) -> RegistryService {
        RegistryService {
            damping: Damping::new(cfg.damping),
            cfg,
            leases: Leases::default(),
            leading: false,
        }
    }

    pub fn config(&self) -> &RegistryConfig {
        &self.cfg
    }

    /// The lease of node `id`, while this beacon leads.
    pub fn lease(&self, id: NodeId) -> Option<&Lease> {
        self.leases.get(id).filter(|_| self.leading)
    }

    /// Node types `node_type` subscribes to.
    pub fn subscriptions_of(&self, node_type: &str) -> Vec<String> {
        self.cfg
            .subscriptions
            .get(node_type)
            .cloned()
            .unwrap_or_default()
    }

    /// Renews a lease, and tells the followers ([`Leader::renewed`]).
    fn touch<S: Part<Registry>>(&mut self, leader: &mut Leader<'_, S>, id: NodeId) {
        self.leases.renew(id, leader.now());
        leader.renewed(u64::from(id));
    }

    fn register<S: Part<Registry>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        req: RegisterRequest,
    ) -> Outcome<Response, RegistryError, Waiting> {
        let registry = leader.state().part();
        if let Some(existing) = registry.by_addr(req.addr).cloned() {
            if existing.node_type != req.node_type {
                return Outcome::Now(Err(RegistryError::Conflict {
                    addr: req.addr,
                    node_type: existing.node_type.to_string(),
                    node_id: existing.node_id,
                }));
            }
            if let Err(e) = req.caller.may_act_on(&existing) {
                return Outcome::Now(Err(e));
            }
            self.touch(leader, existing.node_id);
            let same = existing.access_addr.as_deref() == req.access_addr.as_ref()
                && existing.worker_num == req.worker_num
                && *existing.metadata == *req.metadata;
            if same {
                // Registering again while live returns the same ID, once everything that
                // made the record what it is now is committed.
                return Outcome::WhenCommitted {
                    index: leader.last_index(),
                    waiting: Waiting::Registered(existing.node_id, None),
                };
            }
            // New details, same registration: the fencing token stays.
            let previous = existing.clone();
            let updated = NodeRecord {
                access_addr: req.access_addr.map(Box::new),
                worker_num: req.worker_num,
                metadata: req.metadata.into(),
                ..existing
            };
            let id = updated.node_id;
            return match leader.append(S::wrap(Command::Update(Arc::new(updated)))) {
                Some(index) => Outcome::WhenCommitted {
                    index,
                    waiting: Waiting::Registered(id, Some(Box::new(previous))),
                },
                None => Outcome::Now(Err(RegistryError::EndedBeforeCommit { node_id: id })),
            };
        }
        let id = match registry.reclaimable(req.addr, &req.node_type) {
            Some(id) => id,
            None => match registry.allocate() {
                Ok(id) => id,
                Err(e) => return Outcome::Now(Err(e.into())),
            },
        };
        let record = NodeRecord {
            node_id: id,
            node_type: req.node_type.into(),
            addr: req.addr,
            access_addr: req.access_addr.map(Box::new),
            worker_num: req.worker_num,
            metadata: req.metadata.into(),
            registered_ms: req.wall_ms,
            term: leader.term(),
            index: leader.next_index(),
            owner: req.caller.name.into(),
            health: None,
        };
        let Some(index) = leader.append(S::wrap(Command::Register(Arc::new(record)))) else {
            return Outcome::Now(Err(RegistryError::EndedBeforeCommit { node_id: id }));
        };
        self.touch(leader, id);
        Outcome::WhenCommitted {
            index,
            waiting: Waiting::Registered(id, None),
        }
    }

    /// Ends the registration the request names, if it is still the one at its target: the
    /// holder's own release frees the ID at once; anyone else's unregister sends it to
    /// quarantine, as a missed lease does, since its holder may still be using it.
    fn unregister<S: Part<Registry>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        req: Unregister,
    ) -> Outcome<Response, RegistryError, Waiting> {
        if !req.token.is_given() {
            return Outcome::Now(Err(InvalidRequest::NoToken.into()));
        }
        let registry = leader.state().part();
        let record = match req.target {
            Target::Id(id) => registry.get(id),
            Target::Addr(addr) => registry.by_addr(addr),
        };
        let Some(record) = record.cloned() else {
            return Outcome::Now(Err(RegistryError::UnknownTarget(format!(
                "{} (the registration named, {}, has ended)",
                req.target, req.token
            ))));
        };
        if record.token() != req.token {
            return Outcome::Now(Err(RegistryError::NotHolder {
                node_id: record.node_id,
                named: req.token,
                holder: record.token(),
                addr: record.addr,
            }));
        }
        if let Err(e) = req.caller.may_act_on(&record) {
            return Outcome::Now(Err(e));
        }
        self.leases.remove(record.node_id);
        self.damping.forget(record.node_id);
        if req.release && req.clock_ms > 0 {
            // The holder has stopped: its last timestamp replaces its reservation, so its
            // successor need not wait out a reservation it never used.
            leader.append(S::wrap(Command::Clock {
                node_id: record.node_id,
                ms: req.clock_ms,
            }));
        }
        let command = if req.release {
            Command::Unregister(record.node_id)
        } else {
            Command::Expire(record.node_id)
        };
        match leader.append(S::wrap(command)) {
            Some(index) => Outcome::WhenCommitted {
                index,
                waiting: Waiting::Unregistered(Box::new(record)),
            },
            None => Outcome::Now(Err(RegistryError::UnknownTarget(format!("{}", req.target)))),
        }
    }

    /// Renews the lease of the registration the report names; answered once the core has
    /// confirmed this beacon still leads: a routine report by the round the next heartbeat
    /// carries (see [`Report::routine`]), any other by a round started at once.
    fn report<S: Part<Registry>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        report: Report,
    ) -> Outcome<Response, RegistryError, Waiting> {
        if !report.token.is_given() {
            return Outcome::Now(Err(InvalidRequest::NoToken.into()));
        }
        let live = leader
            .state()
            .part()
            .get(report.node_id)
            .filter(|r| r.addr == report.addr && r.token() == report.token);
        let Some(record) = live else {
            // Told only once this beacon is confirmed to lead: a deposed leader that does
            // not know it yet must not tell a service that a registration its successor
            // made is gone.
            return Outcome::WhenConfirmed(Err(RegistryError::NoLease {
                node_id: report.node_id,
                addr: report.addr,
                token: report.token,
            }));
        };
        if let Err(e) = report.caller.may_act_on(record) {
            return Outcome::Now(Err(e));
        }
        let now = leader.now();
        let lease = self.leases.renew(report.node_id, now);
        lease.set_report(report.load);
        let mut reply = Response::Reported {
            node_id: report.node_id,
            lease_ms: self.cfg.lease_ms,
            token: report.token,
            clock_ms: 0,
        };
        // A health that changed is committed before the report is answered, so the service
        // knows, once answered, that discovery tells of it.
        let was = record.health();
        let changed = report
            .health
            .and_then(|h| {
                let (status, note) =
                    self.damping
                        .reported(report.node_id, h.status, h.note, was.status, now)?;
                let changed = status != was.status || note != was.note;
                changed.then_some(Health {
                    status,
                    draining: was.draining,
                    note,
                    since_ms: h.wall_ms,
                })
            })
            .map(|health| Command::Update(Arc::new(record.with_health(health))));
        let clock = (report.clock_ms > 0).then(|| {
            // A snowflake reservation: committed before it is confirmed, so that a later
            // leader tells the ID's next holder about it. Its commit also confirms the
            // leadership.
            let ms = report
                .clock_ms
                .max(leader.state().part().clock(report.node_id));
            if let Response::Reported { clock_ms, .. } = &mut reply {
                *clock_ms = ms;
            }
            Command::Clock {
                node_id: report.node_id,
                ms,
            }
        });
        leader.renewed(u64::from(report.node_id));
        let mut last = None;
        for command in changed.into_iter().chain(clock) {
            match leader.append(S::wrap(command)) {
                Some(index) => last = Some(index),
                None => {
                    return Outcome::Now(Err(RegistryError::NoLease {
                        node_id: report.node_id,
                        addr: report.addr,
                        token: report.token,
                    }));
                }
            }
        }
        match last {
            Some(index) => Outcome::WhenCommitted {
                index,
                waiting: Waiting::Reported(reply),
            },
            None if report.routine && self.cfg.routine_waits => Outcome::WithNextBeat(Ok(reply)),
            None => Outcome::WhenConfirmed(Ok(reply)),
        }
    }

    /// Sets the health an operator asks for; a request that changes nothing costs no entry.
    fn set_health<S: Part<Registry>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        req: SetHealth,
    ) -> Outcome<Response, RegistryError, Waiting> {
        let Some(record) = leader.state().part().get(req.node_id).cloned() else {
            return Outcome::Now(Err(RegistryError::UnknownTarget(format!(
                "node ID {}",
                req.node_id
            ))));
        };
        let was = record.health();
        let mut health = Health {
            status: req.status.unwrap_or(was.status),
            draining: req.draining.unwrap_or(was.draining),
            note: req.note,
            since_ms: was.since_ms,
        };
        if (health.status, health.draining) != (was.status, was.draining) {
            health.since_ms = req.wall_ms;
        }
        let waiting = Waiting::HealthSet(req.node_id);
        if health == *was {
            return Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting,
            };
        }
        let command = Command::Update(Arc::new(record.with_health(health)));
        match leader.append(S::wrap(command)) {
            Some(index) => Outcome::WhenCommitted { index, waiting },
            None => Outcome::Now(Err(RegistryError::EndedBeforeCommit {
                node_id: req.node_id,
            })),
        }
    }
}

/// Ends `id`'s quarantine now; an ID that is free already is answered as free (idempotent),
/// one held by a live registration is refused.
fn free_id<S: Part<Registry>>(
    leader: &mut Leader<'_, S>,
    id: NodeId,
) -> Outcome<Response, RegistryError, Waiting> {
    let registry = leader.state().part();
    if let Some(live) = registry.get(id) {
        return Outcome::Now(Err(RegistryError::IdInUse {
            node_id: id,
            node_type: live.node_type.to_string(),
            addr: live.addr,
        }));
    }
    let was = registry
        .quarantined()
        .find(|t| t.record.node_id == id)
        .map(|t| NodeRecord::clone(&t.record));
    if was.is_some() {
        leader.append(S::wrap(Command::Release(id)));
    }
    Outcome::WhenCommitted {
        index: leader.last_index(),
        waiting: Waiting::Freed(id, was.map(Box::new)),
    }
}

impl<S: Part<Registry>> Service<S> for RegistryService {
    type Request = Request;
    type Response = Response;
    type Error = RegistryError;
    type Waiting = Waiting;

    /// Each live registration keeps the lease it had, from the last renewal this beacon
    /// heard of as a follower, when it heard every renewal a leader answered; otherwise
    /// (and any it heard nothing of) a fresh lease: its holder may have been reporting to
    /// the old leader a moment ago.
    fn lead(&mut self, _state: &S, now: Millis, renewals: Knowledge) {
        self.leases = match renewals {
            Knowledge::Complete => std::mem::take(&mut self.leases).known(now),
            Knowledge::Incomplete => Leases::fresh(now),
        };
        self.leading = true;
        self.damping.clear();
    }

    /// The leases stay, as what this beacon knows of the renewals when it follows.
    fn step_down(&mut self) {
        self.leading = false;
        self.damping.clear();
    }

    fn hear_renewals(&mut self, keys: &[u64], now: Millis) {
        for id in keys.iter().filter_map(|k| NodeId::try_from(*k).ok()) {
            self.leases.renew(id, now);
        }
    }

    fn install_renewals(&mut self, table: &RenewalTable, now: Millis) {
        self.leases = Leases::from_table(table, now, self.cfg.table_part);
    }

    fn follow_tick(&mut self, _now: Millis) {
        self.leases.install_more(self.cfg.table_part);
    }

    fn renewal_table(&self, state: &S, now: Millis) -> RenewalTable {
        let registry: &Registry = state.part();
        self.leases.table(now, |id| registry.get(id).is_some())
    }

    /// A report reads its registration's record and lease: in a batch of renewals of
    /// registrations made at different times, each is a cache miss or two.
    fn prefetch(&self, state: &S, request: &Request) {
        if let Request::Report(report) = request {
            state.part().prefetch(report.node_id);
            self.leases.prefetch(report.node_id);
        }
    }

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, RegistryError, Waiting> {
        match request {
            Request::Register(req) => self.register(leader, *req),
            Request::Unregister(req) => self.unregister(leader, req),
            Request::Report(report) => self.report(leader, report),
            Request::FreeId(id) => free_id(leader, id),
            Request::SetHealth(req) => self.set_health(leader, req),
        }
    }

    /// Expires missed leases and releases ended quarantines.
    fn tick(&mut self, leader: &mut Leader<'_, S>) {
        let now = leader.now();
        let lease_ms = self.cfg.lease_ms;
        let registry = leader.state().part();
        let expired = self
            .leases
            .expire(now, lease_ms, |from| registry.ids_from(from));
        // A lease heard of as a follower may be of a registration that ended since.
        let expired: Vec<NodeId> = expired
            .into_iter()
            .filter(|id| registry.get(*id).is_some())
            .collect();
        for id in expired {
            leader.notice(format!(
                "node {id} missed its lease of {lease_ms} ms: registration ended, ID in quarantine"
            ));
            self.damping.forget(id);
            leader.append(S::wrap(Command::Expire(id)));
        }
        // Flapping services that held still long enough: what their reports kept.
        let wall_ms = leader.wall_ms();
        for (id, status, note) in self.damping.due(now) {
            let Some(record) = leader.state().part().get(id).cloned() else {
                continue;
            };
            let was = record.health();
            if (status, &note) == (was.status, &was.note) {
                continue;
            }
            let health = Health {
                status,
                draining: was.draining,
                note,
                since_ms: wall_ms,
            };
            leader.append(S::wrap(Command::Update(Arc::new(
                record.with_health(health),
            ))));
        }
        for id in leader.state().part().due_releases(now) {
            leader.append(S::wrap(Command::Release(id)));
        }
    }

    fn answer(&self, state: &S, waiting: Waiting) -> Result<Response, RegistryError> {
        match waiting {
            Waiting::Registered(id, previous) => {
                // Gone before it committed (its lease ran out while commits were slow, or
                // it was unregistered meanwhile): say so; registering again is the answer.
                let record = state
                    .part()
                    .get(id)
                    .cloned()
                    .map(Box::new)
                    .ok_or(RegistryError::EndedBeforeCommit { node_id: id })?;
                let subscribe = self.subscriptions_of(&record.node_type);
                Ok(Response::Registered {
                    record,
                    lease_ms: self.cfg.lease_ms,
                    subscribe,
                    clock_floor_ms: state.part().clock(id),
                    previous,
                })
            }
            Waiting::Unregistered(record) => Ok(Response::Unregistered(record)),
            Waiting::Freed(id, was) => Ok(Response::Freed(id, was)),
            Waiting::Reported(reply) => Ok(reply),
            Waiting::HealthSet(id) => state
                .part()
                .get(id)
                .cloned()
                .map(|r| Response::HealthSet(Box::new(r)))
                .ok_or(RegistryError::EndedBeforeCommit { node_id: id }),
        }
    }
}

/// Which registrations a view shows; `None` fields match any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    pub node_type: Option<String>,
    pub addr: Option<SocketAddr>,
    pub node_id: Option<NodeId>,
    /// Any health (the default) lists quarantined IDs too; any other filter live
    /// registrations alone.
    pub health: HealthFilter,
}

impl NodeFilter {
    /// Whether it names live registration `r`.
    fn wants(&self, r: &NodeRecord) -> bool {
        self.node_type.as_ref().is_none_or(|t| r.node_type == *t)
            && self.addr.is_none_or(|a| r.addr == a)
            && self.node_id.is_none_or(|id| r.node_id == id)
            && self.health.admits(r.health())
    }

    /// Whether it names the quarantined ID whose last holder was `r`.
    fn wants_gone(&self, r: &NodeRecord) -> bool {
        self.health == HealthFilter::Any && self.wants(r)
    }
}

/// One live (or quarantined) registration as seen from here.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub record: NodeRecord,
    pub is_online: bool,
    /// Since its last report, on the leader.
    pub last_seen_ms: Option<u64>,
    pub report: Option<(LoadStats, Vec<LoadStats>)>,
    /// Time left in quarantine (offline entries).
    pub quarantine_ms: Option<u64>,
}

/// Live registrations and quarantined IDs, by ID, optionally only those that `filter`
/// names; with lease details where `service` holds them (at the leader).
pub fn nodes(
    registry: &Registry,
    service: &RegistryService,
    now: Millis,
    filter: &NodeFilter,
) -> Vec<NodeView> {
    first_nodes(registry, service, now, filter, 0, usize::MAX).0
}

/// The first `limit` (by ID, from ID `from` on) of what [`nodes`] shows, copying none of
/// the others, and the ID the next page starts at (`None`: this page ends the list). The
/// start is found in the maps, so a page of a large registry costs what the page holds.
pub fn first_nodes(
    registry: &Registry,
    service: &RegistryService,
    now: Millis,
    filter: &NodeFilter,
    from: NodeId,
    limit: usize,
) -> (Vec<NodeView>, Option<NodeId>) {
    let mut live = registry
        .nodes_from(from)
        .filter(|r| filter.wants(r))
        .peekable();
    let mut gone = registry
        .quarantined_from(from)
        .filter(|t| filter.wants_gone(&t.record))
        .peekable();
    let mut views = Vec::new();
    // Both are in ID order, and an ID is live or quarantined, never both: merge them.
    loop {
        let take_live = match (live.peek(), gone.peek()) {
            (Some(r), Some(t)) => r.node_id < t.record.node_id,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return (views, None),
        };
        if views.len() == limit {
            let next = if take_live {
                live.peek().map(|r| r.node_id)
            } else {
                gone.peek().map(|t| t.record.node_id)
            };
            return (views, next);
        }
        let view = if take_live {
            let r = live.next().expect("peeked");
            let lease = service.lease(r.node_id);
            NodeView {
                record: r.clone(),
                is_online: true,
                last_seen_ms: lease.map(|l| now.saturating_sub(l.last_seen)),
                report: lease.and_then(|l| l.report.as_deref().cloned()),
                quarantine_ms: None,
            }
        } else {
            let t = gone.next().expect("peeked");
            NodeView {
                record: NodeRecord::clone(&t.record),
                is_online: false,
                last_seen_ms: None,
                report: None,
                quarantine_ms: Some(t.until.saturating_sub(now)),
            }
        };
        views.push(view);
    }
}

/// How many registrations (live and quarantined) `filter` names: without a filter, the
/// maps' sizes; with one, counted in place, nothing copied.
pub fn count_nodes(registry: &Registry, filter: &NodeFilter) -> usize {
    if *filter == NodeFilter::default() {
        return registry.len() + registry.quarantined_len();
    }
    registry.nodes().filter(|r| filter.wants(r)).count()
        + registry
            .quarantined()
            .filter(|t| filter.wants_gone(&t.record))
            .count()
}

/// How many of the registrations `filter` names are live and how many quarantined, by node
/// type; counted in place, nothing copied.
pub fn counts_by_type(
    registry: &Registry,
    filter: &NodeFilter,
) -> BTreeMap<String, (usize, usize)> {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in registry.nodes().filter(|r| filter.wants(r)) {
        counts.entry(r.node_type.as_str()).or_default().0 += 1;
    }
    for t in registry
        .quarantined()
        .filter(|t| filter.wants_gone(&t.record))
    {
        counts.entry(t.record.node_type.as_str()).or_default().1 += 1;
    }
    counts.into_iter().map(|(t, c)| (t.to_owned(), c)).collect()
}
