//! The node-ID registry's replicated state: the table of service registrations.
//!
//! Every beacon applies the same [`Command`]s in the same order and so holds the same
//! registry. Only the leader decides: it validates requests, picks IDs with
//! [`Registry::allocate`], and turns decisions into commands. Applying a command never
//! consults the clock except to note when a quarantine ends, which is local bookkeeping.
//!
//! IDs come from a configured range (default 1..=1023, so they fit a snowflake worker
//! field). Allocation advances `last_node_id`, wrapping within the range, and skips IDs held
//! by a live registration or in quarantine. An ID whose registration expired (missed lease)
//! stays in quarantine for `id_reuse_delay` so that its old holder has time to notice and stop
//! using it; only the same address may take it back early. An explicitly unregistered ID is
//! free at once: its holder said it is done with it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use compact_str::CompactString;

use super::addr_index::AddrIndex;
use super::id_slots::IdMap;
use super::thin_str::ThinStr;

use crate::consensus::Machine;
use crate::time::Millis;

/// A service's node ID.
pub type NodeId = u32;

/// Longest node type.
pub const MAX_TYPE_LEN: usize = 64;

/// The range IDs are allocated from. `first` is at least 1: 0 means "no ID" on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first: NodeId,
    pub last: NodeId,
}

impl IdRange {
    pub const DEFAULT: IdRange = IdRange {
        first: 1,
        last: 1023,
    };

    pub fn contains(&self, id: NodeId) -> bool {
        (self.first..=self.last).contains(&id)
    }

    pub fn len(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The ID after `id`, wrapping to `first`.
    fn after(&self, id: NodeId) -> NodeId {
        if id < self.first || id >= self.last {
            self.first
        } else {
            id + 1
        }
    }
}

impl std::fmt::Display for IdRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

/// A registration's fencing token: the log position of the entry that created it. It names
/// the registration in every later write that acts on it (a report, an unregister), so a
/// request that arrives after its registration ended cannot act on the ID's next holder; and
/// a later holder of the same ID always has a larger one, so downstream systems can refuse
/// an older holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FencingToken {
    pub term: u64,
    pub index: u64,
}

impl FencingToken {
    /// Whether a request named a registration at all (the wire's zero values mean "none").
    pub fn is_given(&self) -> bool {
        self.term != 0 || self.index != 0
    }
}

impl std::fmt::Display for FencingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.term, self.index)
    }
}

/// One registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub node_id: NodeId,
    /// Inline when short (every type name we know of): a String's heap copy of a name like
    /// `LOGIC` took 32 bytes more per registration, a million times over.
    pub node_type: CompactString,
    pub addr: SocketAddr,
    /// Boxed: most registrations have none, and an address inline is 32 bytes.
    pub access_addr: Option<Box<SocketAddr>>,
    pub worker_num: u32,
    /// JSON text, or empty (no allocation). One word, not a `String` (three) or a boxed
    /// `str` (two): see [`ThinStr`].
    pub metadata: ThinStr,
    /// Wall-clock time of the registration (ms since the Unix epoch), stamped by the leader.
    pub registered_ms: u64,
    /// Fencing token: the log position of the command that created it (see
    /// [`FencingToken`]); an update keeps it.
    pub term: u64,
    pub index: u64,
    /// The identity that registered it (empty when no authentication was required).
    pub owner: ThinStr,
    /// Its health when anyone said anything of it; `None` is passing, not draining, no note
    /// (boxed: most registrations never say, and a million records carry one pointer each).
    pub health: Option<Box<Health>>,
}

impl NodeRecord {
    pub fn token(&self) -> FencingToken {
        FencingToken {
            term: self.term,
            index: self.index,
        }
    }

    /// Its health ([`Health::PASSING`] when nothing was said).
    pub fn health(&self) -> &Health {
        static PASSING: Health = Health::PASSING;
        self.health.as_deref().unwrap_or(&PASSING)
    }

    /// The same registration with health `health` (`None` when it is the default).
    pub fn with_health(&self, health: Health) -> NodeRecord {
        NodeRecord {
            health: (health != Health::PASSING).then(|| Box::new(health)),
            ..self.clone()
        }
    }
}

/// The longest note a health carries, in bytes (the clients cut a check's longer words).
pub const MAX_NOTE_BYTES: usize = 256;

/// How a registration's service does, as its reports (or an operator) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub enum Status {
    /// It serves: discovery lists it, work goes to it.
    #[default]
    Passing,
    /// It serves, with something to look at: still listed and given work.
    Warning,
    /// It does not serve: left out of discovery, given no new work.
    Critical,
}

impl Status {
    pub const ALL: [Status; 3] = [Status::Passing, Status::Warning, Status::Critical];

    pub fn name(self) -> &'static str {
        match self {
            Status::Passing => "passing",
            Status::Warning => "warning",
            Status::Critical => "critical",
        }
    }

    /// `passing`, `warning` or `critical`, in any case.
    pub fn parse(word: &str) -> Option<Status> {
        Status::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(word))
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A registration's health: its status, whether an operator is draining it (maintenance:
/// it keeps its ID and its lease but leaves discovery and gets no new work), and what was
/// last said about it. Replicated: every beacon lists the same health, and a new leader
/// knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    pub status: Status,
    pub draining: bool,
    /// Why, as the service or the operator said (empty: nothing said).
    pub note: String,
    /// When the status or the drain last changed (ms since the Unix epoch, stamped by the
    /// leader; 0: never).
    pub since_ms: u64,
}

impl Health {
    /// What a registration that said nothing of its health has.
    pub const PASSING: Health = Health {
        status: Status::Passing,
        draining: false,
        note: String::new(),
        since_ms: 0,
    };

    /// Whether discovery lists it and work may go to it: not critical, not draining.
    pub fn serving(&self) -> bool {
        self.status != Status::Critical && !self.draining
    }
}

/// Which registrations a listing or a watch gives, by health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum HealthFilter {
    /// Every registration, whatever its health (and quarantined IDs, in listings).
    #[default]
    Any,
    /// The ones in rotation: passing or warning, not draining (discovery's default).
    Serving,
    /// Live ones with this status (draining or not).
    Only(Status),
    /// Live ones an operator is draining.
    Draining,
}

impl HealthFilter {
    pub fn admits(&self, health: &Health) -> bool {
        match self {
            HealthFilter::Any => true,
            HealthFilter::Serving => health.serving(),
            HealthFilter::Only(s) => health.status == *s,
            HealthFilter::Draining => health.draining,
        }
    }

    /// `any`, `serving`, `passing`, `warning`, `critical` or `draining`.
    pub fn parse(word: &str) -> Option<HealthFilter> {
        match word.to_ascii_lowercase().as_str() {
            "any" | "all" => Some(HealthFilter::Any),
            "serving" => Some(HealthFilter::Serving),
            "draining" => Some(HealthFilter::Draining),
            other => Status::parse(other).map(HealthFilter::Only),
        }
    }
}

/// A change to the registry, replicated through the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A new registration under `record.node_id`.
    Register(Arc<NodeRecord>),
    /// New details for a live registration (same ID, same address).
    Update(Arc<NodeRecord>),
    /// The service ended its registration: the ID is free at once.
    Unregister(NodeId),
    /// The lease was missed: the registration ends, the ID goes to quarantine.
    Expire(NodeId),
    /// A quarantine is over: the ID may be allocated again.
    Release(NodeId),
    /// The highest timestamp (ms since the Unix epoch) the holders of a node ID may have
    /// used in snowflake IDs: set by the leader as they report it.
    Clock { node_id: NodeId, ms: u64 },
}

/// What a command changed, as watchers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(Arc<NodeRecord>),
    /// New details or health; `was` is the record before, so that a watcher following only
    /// some health hears of a registration entering or leaving what it follows.
    Updated {
        record: Arc<NodeRecord>,
        was: Arc<NodeRecord>,
    },
    Removed(Arc<NodeRecord>),
}

impl Change {
    /// The record as the change leaves it (a removed one as it last was).
    pub fn record(&self) -> &NodeRecord {
        match self {
            Change::Added(r) | Change::Updated { record: r, .. } | Change::Removed(r) => r,
        }
    }
}

/// An expired registration whose ID is in quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub record: Arc<NodeRecord>,
    /// When the quarantine ends, by this beacon's clock.
    pub until: Millis,
}

/// A command that does not fit the state: the replicas have diverged. Never expected; the
/// replica that sees it asks the leader for a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("node ID {0} is outside the configured range")]
    OutOfRange(NodeId),
    #[error("node ID {0} is already registered")]
    IdInUse(NodeId),
    #[error("address {0} is already registered")]
    AddrInUse(SocketAddr),
    #[error("node ID {0} is not registered")]
    UnknownNode(NodeId),
    #[error("node ID {0} is not in quarantine")]
    NotQuarantined(NodeId),
}

/// Why a registration cannot be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no free node ID: all {total} IDs of range {range} are taken ({in_use} in use, {quarantined} in quarantine)"
)]
pub struct Exhausted {
    pub range: IdRange,
    pub total: u64,
    pub in_use: usize,
    pub quarantined: usize,
}

/// The registry as of some log position, for snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySnapshot {
    pub last_node_id: NodeId,
    /// Shared with the state it was taken of: taking a snapshot (on the core thread, to
    /// compact the log or catch a follower up) copies a pointer per page of IDs, not ten
    /// million records or pointers (see [`IdMap`]).
    pub nodes: IdMap<Arc<NodeRecord>>,
    /// Quarantined records with the time left in quarantine.
    pub quarantined: Vec<(Arc<NodeRecord>, Millis)>,
    /// Snowflake clock marks by node ID.
    pub clocks: Vec<(NodeId, u64)>,
}

/// The state machine.
#[derive(Debug, Clone)]
pub struct Registry {
    range: IdRange,
    /// Replaying stored state: IDs outside `range` are accepted here and judged once the
    /// replay is over (see [`Machine::restored`]).
    replaying: bool,
    reuse_delay: Millis,
    last_node_id: NodeId,
    /// Shared with the log entry that registered (or last updated) each: the log keeps
    /// about as many entries as the state has records, and a record held twice cost as
    /// much again as the registry itself.
    nodes: IdMap<Arc<NodeRecord>>,
    /// Live registrations by address.
    by_addr: AddrIndex,
    quarantine: BTreeMap<NodeId, Tombstone>,
    /// Quarantined IDs by their last holder's address: a registration looks up whether its
    /// address may take an ID back, and with heavy churn the quarantine holds many thousands.
    quarantine_by_addr: HashMap<SocketAddr, Vec<NodeId>>,
    /// Quarantined IDs by when their quarantine ends: the leader looks for the ended ones on
    /// every tick, and a scan of the whole quarantine (a hundred thousand IDs after a burst
    /// of expiries) cost more than the writes it ran beside.
    quarantine_due: BTreeSet<(Millis, NodeId)>,
    /// Per node ID, the highest timestamp its holders may have used in snowflake IDs. Kept
    /// when the ID is freed: the next holder starts after it.
    clocks: BTreeMap<NodeId, u64>,
}

impl Registry {
    pub fn new(range: IdRange, reuse_delay: Millis) -> Registry {
        Registry {
            range,
            replaying: false,
            reuse_delay,
            last_node_id: 0,
            nodes: IdMap::default(),
            by_addr: AddrIndex::default(),
            quarantine: BTreeMap::new(),
            quarantine_by_addr: HashMap::new(),
            quarantine_due: BTreeSet::new(),
            clocks: BTreeMap::new(),
        }
    }

    pub fn range(&self) -> IdRange {
        self.range
    }

    /// An empty registry that will replay stored state: IDs outside `range` are judged
    /// once the replay is over, so that they are reported as such.
    pub fn for_replay(range: IdRange, reuse_delay: Millis) -> Registry {
        Registry {
            replaying: true,
            ..Registry::new(range, reuse_delay)
        }
    }

    pub fn reuse_delay(&self) -> Millis {
        self.reuse_delay
    }

    /// The last ID handed out (0 before the first).
    pub fn last_node_id(&self) -> NodeId {
        self.last_node_id
    }

    /// The IDs of the live registrations from `from` on, in order, read without touching
    /// the records.
    pub fn ids_from(&self, from: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.range_from(from).map(|(id, _)| id)
    }

    /// Live registrations, by ID.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values().map(|r| &**r)
    }

    /// Every live registration by ID, as a copy that shares the state's pages (a pointer per
    /// page of IDs: cheap on the core thread at any size).
    pub(crate) fn nodes_copy(&self) -> IdMap<Arc<NodeRecord>> {
        self.nodes.clone()
    }

    /// Live registrations from ID `from` on, by ID: found in the map, not by walking to it.
    pub fn nodes_from(&self, from: NodeId) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.range_from(from).map(|(_, r)| &**r)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn get(&self, id: NodeId) -> Option<&NodeRecord> {
        self.nodes.get(id).map(|r| &**r)
    }

    /// Starts loading `id`'s record into the cache, every cache line of it (a renewal reads
    /// its address, token and health; the record is not aligned to a line, so its 120
    /// bytes may span three): see [`super::id_slots::prefetch`].
    pub fn prefetch(&self, id: NodeId) {
        if let Some(record) = self.nodes.get(id) {
            let at = Arc::as_ptr(record).cast::<u8>();
            super::id_slots::prefetch(at);
            super::id_slots::prefetch(at.wrapping_add(64));
            super::id_slots::prefetch(at.wrapping_add(std::mem::size_of::<NodeRecord>() - 1));
        }
    }

    /// Whether registration `token` of `id` is live (a later registration of the same ID is
    /// someone else).
    pub fn is_live(&self, id: NodeId, token: FencingToken) -> bool {
        self.nodes.get(id).is_some_and(|n| n.token() == token)
    }

    fn address_of(&self, id: NodeId) -> Option<SocketAddr> {
        self.nodes.get(id).map(|r| r.addr)
    }

    /// The live registration at `addr`.
    pub fn by_addr(&self, addr: SocketAddr) -> Option<&NodeRecord> {
        self.by_addr
            .get(addr, |id| self.address_of(id))
            .and_then(|id| self.get(id))
    }

    /// Quarantined IDs, by ID.
    pub fn quarantined(&self) -> impl Iterator<Item = &Tombstone> {
        self.quarantine.values()
    }

    /// Quarantined IDs from `from` on, by ID.
    pub fn quarantined_from(&self, from: NodeId) -> impl Iterator<Item = &Tombstone> {
        self.quarantine.range(from..).map(|(_, t)| t)
    }

    /// How many IDs are in quarantine.
    pub fn quarantined_len(&self) -> usize {
        self.quarantine.len()
    }

    /// The quarantined ID last held by `addr` as `node_type`, which that service may take back.
    pub fn reclaimable(&self, addr: SocketAddr, node_type: &str) -> Option<NodeId> {
        self.quarantine_by_addr
            .get(&addr)?
            .iter()
            .copied()
            .find(|id| self.quarantine[id].record.node_type == node_type)
    }

    fn quarantine_insert(&mut self, tombstone: Tombstone) {
        let (id, addr) = (tombstone.record.node_id, tombstone.record.addr);
        let until = tombstone.until;
        if let Some(old) = self.quarantine.insert(id, tombstone) {
            self.quarantine_due.remove(&(old.until, id));
        }
        self.quarantine_due.insert((until, id));
        self.quarantine_by_addr.entry(addr).or_default().push(id);
    }

    fn quarantine_remove(&mut self, id: NodeId) -> Option<Tombstone> {
        let tombstone = self.quarantine.remove(&id)?;
        self.quarantine_due.remove(&(tombstone.until, id));
        let addr = tombstone.record.addr;
        if let Some(ids) = self.quarantine_by_addr.get_mut(&addr) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.quarantine_by_addr.remove(&addr);
            }
        }
        Some(tombstone)
    }

    /// Quarantines that are over by `now`.
    pub fn due_releases(&self, now: Millis) -> Vec<NodeId> {
        let mut due: Vec<NodeId> = self
            .quarantine_due
            .range(..=(now, NodeId::MAX))
            .map(|&(_, id)| id)
            .collect();
        due.sort_unstable();
        due
    }

    /// The ID the next registration gets: the first after `last_node_id` (wrapping) that is
    /// neither in use nor in quarantine.
    pub fn allocate(&self) -> Result<NodeId, Exhausted> {
        let mut id = self.last_node_id;
        for _ in 0..self.range.len() {
            id = self.range.after(id);
            if !self.nodes.contains_key(id) && !self.quarantine.contains_key(&id) {
                return Ok(id);
            }
        }
        Err(Exhausted {
            range: self.range,
            total: self.range.len(),
            in_use: self.nodes.len(),
            quarantined: self.quarantine.len(),
        })
    }

    /// Applies one command at time `now`.
    pub fn apply(&mut self, command: &Command, now: Millis) -> Result<Option<Change>, ApplyError> {
        match command {
            Command::Register(record) => {
                let id = record.node_id;
                if !self.replaying && !self.range.contains(id) {
                    return Err(ApplyError::OutOfRange(id));
                }
                if self.nodes.contains_key(id) {
                    return Err(ApplyError::IdInUse(id));
                }
                if self
                    .by_addr
                    .get(record.addr, |id| self.address_of(id))
                    .is_some()
                {
                    return Err(ApplyError::AddrInUse(record.addr));
                }
                // A quarantined ID taken back by its old address does not move the allocator.
                if self.quarantine_remove(id).is_none() {
                    self.last_node_id = id;
                }
                self.nodes.insert(id, record.clone());
                self.by_addr.insert(record.addr, id);
                Ok(Some(Change::Added(record.clone())))
            }
            Command::Update(record) => {
                let id = record.node_id;
                let was = match self.nodes.get(id) {
                    Some(old) if old.addr == record.addr => old.clone(),
                    Some(_) => return Err(ApplyError::AddrInUse(record.addr)),
                    None => return Err(ApplyError::UnknownNode(id)),
                };
                self.nodes.insert(id, record.clone());
                Ok(Some(Change::Updated {
                    record: record.clone(),
                    was,
                }))
            }
            Command::Unregister(id) => {
                let record = self.remove(*id)?;
                Ok(Some(Change::Removed(record)))
            }
            Command::Expire(id) => {
                let record = self.remove(*id)?;
                self.quarantine_insert(Tombstone {
                    record: record.clone(),
                    until: now + self.reuse_delay,
                });
                Ok(Some(Change::Removed(record)))
            }
            Command::Release(id) => {
                self.quarantine_remove(*id)
                    .ok_or(ApplyError::NotQuarantined(*id))?;
                Ok(None)
            }
            Command::Clock { node_id, ms } => {
                self.clocks.insert(*node_id, *ms);
                Ok(None)
            }
        }
    }

    /// The highest timestamp the holders of `id` may have used in snowflake IDs (0: none).
    pub fn clock(&self, id: NodeId) -> u64 {
        self.clocks.get(&id).copied().unwrap_or(0)
    }

    fn remove(&mut self, id: NodeId) -> Result<Arc<NodeRecord>, ApplyError> {
        let record = self.nodes.remove(id).ok_or(ApplyError::UnknownNode(id))?;
        self.by_addr.remove(record.addr, id);
        Ok(record)
    }

    /// The state, with quarantines as time left after `now`.
    pub fn snapshot(&self, now: Millis) -> RegistrySnapshot {
        RegistrySnapshot {
            last_node_id: self.last_node_id,
            nodes: self.nodes.clone(),
            quarantined: self
                .quarantine
                .values()
                .map(|t| (t.record.clone(), t.until.saturating_sub(now)))
                .collect(),
            clocks: self.clocks.iter().map(|(id, ms)| (*id, *ms)).collect(),
        }
    }

    /// Replaces the state with `snapshot`, taken on another beacon.
    pub fn restore(&mut self, snapshot: RegistrySnapshot, now: Millis) {
        self.last_node_id = snapshot.last_node_id;
        self.by_addr = AddrIndex::of(
            snapshot.nodes.len(),
            snapshot.nodes.values().map(|r| (r.addr, r.node_id)),
        );
        self.nodes = snapshot.nodes;
        self.quarantine.clear();
        self.quarantine_by_addr.clear();
        self.quarantine_due.clear();
        self.clocks = snapshot.clocks.into_iter().collect();
        for (record, left) in snapshot.quarantined {
            self.quarantine_insert(Tombstone {
                record,
                until: now + left,
            });
        }
    }

    /// Records the state holds: live registrations, quarantined IDs and snowflake clock
    /// marks. A snapshot writes this many.
    pub fn records(&self) -> usize {
        self.nodes.len() + self.quarantine.len() + self.clocks.len()
    }

    /// IDs this state holds (live or in quarantine) that lie outside `range`: state stored
    /// under another configuration, which this beacon must not load as if nothing happened.
    pub fn outside(&self, range: IdRange) -> Vec<NodeId> {
        self.nodes
            .keys()
            .chain(self.quarantine.keys().copied())
            .filter(|id| !range.contains(*id))
            .collect()
    }
}

impl Machine for Registry {
    type Command = Command;
    type Change = Change;
    type Snapshot = RegistrySnapshot;
    type ApplyError = ApplyError;

    fn apply(&mut self, command: &Command, now: Millis) -> Result<Option<Change>, ApplyError> {
        Registry::apply(self, command, now)
    }

    fn snapshot(&self, now: Millis) -> RegistrySnapshot {
        Registry::snapshot(self, now)
    }

    fn restore(&mut self, snapshot: RegistrySnapshot, now: Millis) {
        Registry::restore(self, snapshot, now)
    }

    fn records(&self) -> usize {
        Registry::records(self)
    }

    fn summary(&self) -> String {
        format!("{} registrations", self.len())
    }

    fn restored(&mut self) -> Result<(), String> {
        self.replaying = false;
        let outside = self.outside(self.range);
        if outside.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the stored state holds node IDs {outside:?} outside the configured id_range {} (key `id_range`); start with the range the cluster was using, or with one that holds every stored ID",
            self.range
        ))
    }
}

/// Why a registration request was refused before anything changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRequest {
    #[error("node_type is empty")]
    EmptyType,
    #[error(
        "node_type `{0}` is invalid: use 1 to {MAX_TYPE_LEN} characters from A-Z a-z 0-9 . _ -"
    )]
    BadType(String),
    #[error("{field} `{value}` is not an ip:port address (for example 10.0.0.5:8080)")]
    BadAddr { field: &'static str, value: String },
    #[error("{field} `{value}` cannot be used: {why}")]
    UnusableAddr {
        field: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("metadata is {len} bytes, over the limit of {max} bytes")]
    MetadataTooLarge { len: usize, max: usize },
    #[error("metadata is not valid JSON: {0}")]
    MetadataNotJson(String),
    #[error("metadata must be a JSON object (`{{\"zone\": \"b\"}}`), not {0}")]
    MetadataNotObject(&'static str),
    #[error("give a node_id or an addr")]
    NoTarget,
    #[error(
        "name the registration: give its fencing token (term and index, as `show node_detail` prints it, term.index)"
    )]
    NoToken,
    #[error(
        "{field} {ms} is more than an hour ahead of this beacon's clock ({now} ms since the Unix epoch): check the service's clock"
    )]
    ClockAhead {
        field: &'static str,
        ms: u64,
        now: u64,
    },
}

/// How far ahead of the beacon's wall clock a snowflake timestamp may be: more is a broken
/// clock, which would make the node ID unusable for its next holders.
pub const MAX_CLOCK_AHEAD_MS: u64 = 3_600_000;

/// Checks a snowflake timestamp a service sent (0: none) against the beacon's clock `now`.
pub fn check_clock(field: &'static str, ms: u64, now: u64) -> Result<u64, InvalidRequest> {
    if ms > now.saturating_add(MAX_CLOCK_AHEAD_MS) {
        return Err(InvalidRequest::ClockAhead { field, ms, now });
    }
    Ok(ms)
}

/// Checks a node type.
pub fn check_type(node_type: &str) -> Result<(), InvalidRequest> {
    if node_type.is_empty() {
        return Err(InvalidRequest::EmptyType);
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if node_type.len() > MAX_TYPE_LEN || !node_type.chars().all(valid) {
        return Err(InvalidRequest::BadType(node_type.to_owned()));
    }
    Ok(())
}

/// Parses a service address: a concrete ip:port other services can reach.
pub fn parse_service_addr(field: &'static str, value: &str) -> Result<SocketAddr, InvalidRequest> {
    let addr: SocketAddr = value.parse().map_err(|_| InvalidRequest::BadAddr {
        field,
        value: value.to_owned(),
    })?;
    let unusable = |why| InvalidRequest::UnusableAddr {
        field,
        value: value.to_owned(),
        why,
    };
    if addr.port() == 0 {
        return Err(unusable("port 0 is not a port others can connect to"));
    }
    if addr.ip().is_unspecified() {
        return Err(unusable(
            "a wildcard address is not one others can connect to",
        ));
    }
    Ok(addr)
}

/// Checks metadata: at most `max` bytes of JSON, or empty.
pub fn check_metadata(metadata: &str, max: usize) -> Result<(), InvalidRequest> {
    if metadata.len() > max {
        return Err(InvalidRequest::MetadataTooLarge {
            len: metadata.len(),
            max,
        });
    }
    if !metadata.is_empty() {
        let value = serde_json::from_str::<serde_json::Value>(metadata)
            .map_err(|e| InvalidRequest::MetadataNotJson(e.to_string()))?;
        let kind = match value {
            serde_json::Value::Object(_) => return Ok(()),
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Null => "null",
        };
        return Err(InvalidRequest::MetadataNotObject(kind));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record and its `Arc` counts fit a 144-byte heap chunk (glibc rounds a request up
    /// to 16 bytes past the 8 of its header): a record of 121 bytes or more takes 160.
    #[test]
    fn a_record_is_120_bytes() {
        assert_eq!(std::mem::size_of::<NodeRecord>(), 120);
    }

    #[test]
    fn a_snowflake_timestamp_far_ahead_of_the_beacon_is_refused() {
        let now = 1_800_000_000_000;
        assert_eq!(check_clock("clock_ms", 0, now), Ok(0));
        assert_eq!(check_clock("clock_ms", now + 5_000, now), Ok(now + 5_000));
        let e = check_clock("clock_ms", now + MAX_CLOCK_AHEAD_MS + 1, now).unwrap_err();
        assert!(e.to_string().contains("more than an hour ahead"), "{e}");
    }

    fn record(id: NodeId, port: u16) -> NodeRecord {
        NodeRecord {
            health: None,
            owner: "".into(),
            node_id: id,
            node_type: "LOGIC".into(),
            addr: SocketAddr::from(([10, 0, 0, 1], port)),
            access_addr: None,
            worker_num: 0,
            metadata: "".into(),
            registered_ms: 0,
            term: 1,
            index: u64::from(id),
        }
    }

    fn small(first: NodeId, last: NodeId) -> Registry {
        Registry::new(IdRange { first, last }, 1000)
    }

    /// Allocates and applies a registration for `port`; returns the ID.
    fn register(reg: &mut Registry, port: u16) -> NodeId {
        let id = reg.allocate().unwrap();
        reg.apply(&Command::Register(record(id, port).into()), 0)
            .unwrap();
        id
    }

    #[test]
    fn allocation_advances_and_skips_ids_in_use() {
        let mut reg = small(1, 5);
        assert_eq!(register(&mut reg, 1), 1);
        assert_eq!(register(&mut reg, 2), 2);
        assert_eq!(reg.last_node_id(), 2);
        // Freeing ID 1 does not make it next: allocation keeps advancing.
        reg.apply(&Command::Unregister(1), 0).unwrap();
        assert_eq!(register(&mut reg, 3), 3);
        assert_eq!(register(&mut reg, 4), 4);
        assert_eq!(register(&mut reg, 5), 5);
        // Wraps: 1 is free again, 2 is in use.
        assert_eq!(register(&mut reg, 6), 1);
        assert_eq!(
            reg.allocate(),
            Err(Exhausted {
                range: IdRange { first: 1, last: 5 },
                total: 5,
                in_use: 5,
                quarantined: 0
            })
        );
    }

    #[test]
    fn expired_ids_stay_in_quarantine_until_released() {
        let mut reg = small(1, 3);
        register(&mut reg, 1);
        register(&mut reg, 2);
        register(&mut reg, 3);
        let change = reg.apply(&Command::Expire(2), 500).unwrap();
        assert_eq!(change, Some(Change::Removed(record(2, 2).into())));
        let err = reg.allocate().unwrap_err();
        assert_eq!((err.in_use, err.quarantined), (2, 1));
        assert_eq!(
            err.to_string(),
            "no free node ID: all 3 IDs of range 1..=3 are taken (2 in use, 1 in quarantine)"
        );
        assert_eq!(reg.due_releases(1499), Vec::<NodeId>::new());
        assert_eq!(reg.due_releases(1500), vec![2]);
        assert_eq!(reg.apply(&Command::Release(2), 1500).unwrap(), None);
        assert_eq!(reg.allocate(), Ok(2));
    }

    #[test]
    fn only_the_old_address_takes_a_quarantined_id_back_and_the_allocator_stays() {
        let mut reg = small(1, 10);
        register(&mut reg, 1);
        register(&mut reg, 2);
        reg.apply(&Command::Expire(1), 0).unwrap();
        let old = record(1, 1).addr;
        assert_eq!(reg.reclaimable(old, "LOGIC"), Some(1));
        assert_eq!(reg.reclaimable(old, "ACCESS"), None);
        reg.apply(&Command::Register(record(1, 1).into()), 0)
            .unwrap();
        assert_eq!(
            reg.last_node_id(),
            2,
            "taking an ID back does not move the allocator"
        );
        assert_eq!(reg.quarantined().count(), 0);
        assert_eq!(reg.due_releases(u64::MAX), Vec::<NodeId>::new());
        assert_eq!(reg.allocate(), Ok(3));
    }

    /// The quarantines found ended are those whose time is up, in ID order, however they
    /// were made and ended.
    #[test]
    fn due_releases_follow_each_quarantine_in_and_out() {
        let mut reg = small(1, 10);
        for id in 1..=6 {
            register(&mut reg, id);
        }
        for (id, at) in [(5, 300), (1, 100), (3, 100), (6, 200)] {
            reg.apply(&Command::Expire(id), at).unwrap();
        }
        let due = |reg: &Registry, now| reg.due_releases(now);
        assert_eq!(due(&reg, 1099), Vec::<NodeId>::new());
        assert_eq!(due(&reg, 1100), vec![1, 3]);
        assert_eq!(due(&reg, 1250), vec![1, 3, 6]);
        reg.apply(&Command::Release(3), 1250).unwrap();
        // Address 1 takes its ID back.
        reg.apply(&Command::Register(record(1, 1).into()), 1250)
            .unwrap();
        assert_eq!(due(&reg, 5000), vec![5, 6]);
        let mut other = small(1, 10);
        other.restore(reg.snapshot(1250), 0);
        // 6's time was up when the snapshot was taken; 5 had 50 ms left.
        assert_eq!(due(&other, 49), vec![6]);
        assert_eq!(due(&other, 50), vec![5, 6]);
    }

    #[test]
    fn commands_that_do_not_fit_are_refused_without_change() {
        let mut reg = small(1, 3);
        register(&mut reg, 1);
        let before = reg.snapshot(0);
        assert_eq!(
            reg.apply(&Command::Register(record(1, 9).into()), 0),
            Err(ApplyError::IdInUse(1))
        );
        assert_eq!(
            reg.apply(&Command::Register(record(2, 1).into()), 0),
            Err(ApplyError::AddrInUse(record(2, 1).addr))
        );
        assert_eq!(
            reg.apply(&Command::Register(record(7, 7).into()), 0),
            Err(ApplyError::OutOfRange(7))
        );
        assert_eq!(
            reg.apply(&Command::Expire(3), 0),
            Err(ApplyError::UnknownNode(3))
        );
        assert_eq!(
            reg.apply(&Command::Release(1), 0),
            Err(ApplyError::NotQuarantined(1))
        );
        assert_eq!(reg.snapshot(0), before);
    }

    #[test]
    fn update_keeps_the_id_and_address() {
        let mut reg = small(1, 3);
        register(&mut reg, 1);
        let mut newer = record(1, 1);
        newer.metadata = r#"{"zone":"b"}"#.into();
        assert_eq!(
            reg.apply(&Command::Update(newer.clone().into()), 0)
                .unwrap(),
            Some(Change::Updated {
                record: newer.clone().into(),
                was: record(1, 1).into()
            })
        );
        assert_eq!(reg.get(1), Some(&newer));
        let moved = record(1, 2);
        assert_eq!(
            reg.apply(&Command::Update(moved.clone().into()), 0),
            Err(ApplyError::AddrInUse(moved.addr))
        );
    }

    #[test]
    fn snapshot_round_trips_with_quarantine_time_left() {
        let mut reg = small(1, 10);
        register(&mut reg, 1);
        register(&mut reg, 2);
        reg.apply(&Command::Expire(1), 100).unwrap();
        let snap = reg.snapshot(400);
        assert_eq!(snap.quarantined, vec![(record(1, 1).into(), 700)]);
        let mut other = small(1, 10);
        other.restore(snap, 5000);
        assert_eq!(other.last_node_id(), 2);
        assert_eq!(other.by_addr(record(2, 2).addr), Some(&record(2, 2)));
        assert_eq!(other.due_releases(5699), Vec::<NodeId>::new());
        assert_eq!(other.due_releases(5700), vec![1]);
        assert_eq!(other.allocate(), Ok(3));
        // The restored quarantine is found by address, and released from it.
        let r1 = record(1, 1);
        assert_eq!(other.reclaimable(r1.addr, &r1.node_type), Some(1));
        assert_eq!(other.reclaimable(r1.addr, "OTHER"), None);
        assert_eq!(other.records(), 2);
        other.apply(&Command::Release(1), 5700).unwrap();
        assert_eq!(other.reclaimable(r1.addr, &r1.node_type), None);
        assert_eq!(other.records(), 1);
    }

    #[test]
    fn request_checks_say_what_is_wrong() {
        assert_eq!(check_type(""), Err(InvalidRequest::EmptyType));
        assert!(check_type("LOGIC").is_ok());
        assert!(matches!(
            check_type("has space"),
            Err(InvalidRequest::BadType(_))
        ));
        assert_eq!(
            parse_service_addr("addr", "nope").unwrap_err().to_string(),
            "addr `nope` is not an ip:port address (for example 10.0.0.5:8080)"
        );
        assert!(
            parse_service_addr("addr", "0.0.0.0:80")
                .unwrap_err()
                .to_string()
                .contains("wildcard")
        );
        assert!(parse_service_addr("addr", "10.0.0.1:0").is_err());
        assert_eq!(
            check_metadata(&"x".repeat(11), 10),
            Err(InvalidRequest::MetadataTooLarge { len: 11, max: 10 })
        );
        assert!(matches!(
            check_metadata("{", 10),
            Err(InvalidRequest::MetadataNotJson(_))
        ));
        assert!(check_metadata(r#"{"a":1}"#, 10).is_ok());
        assert_eq!(
            check_metadata("[1]", 10).unwrap_err().to_string(),
            r#"metadata must be a JSON object (`{"zone": "b"}`), not an array"#
        );
        assert!(check_metadata("", 10).is_ok());
    }
}
