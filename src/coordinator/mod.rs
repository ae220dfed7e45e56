//! The coordinator: everything one beacon decides, sans-IO.
//!
//! It composes the [`Election`], the replicated [`Log`], the [`Registry`] it is applied to,
//! and, while leading, each follower's [`Progress`], the services' leases and the requests
//! waiting for acknowledgement. The driver feeds it [`Input`]s with the time and carries out
//! the [`Output`]s; nothing here touches a socket, a clock or a disk.
//!
//! Writes (register, update, unregister, expire, release) go through the leader: it appends a
//! command to its log, applies it, and sends it to every follower at once inside the
//! heartbeat. A write is acknowledged to the service when it is *committed*: stored by every
//! beacon that is online and in sync with the leader. So a leader that dies right after
//! acknowledging cannot take an allocation with it: whoever takes over already has it.
//!
//! Leases are kept by the leader alone: services report to the leader, which ends a
//! registration whose reports stop (an `Expire` command, the ID going to quarantine). A new
//! leader starts every live registration's lease afresh, as etcd does, so services keep
//! their IDs across a failover as long as they reach the new leader within a lease.
//!
//! A leader acts on its own clock only while it knows it still leads. In quorum mode it
//! answers a node report only once a majority has acknowledged a confirmation round (a
//! *beat*) that it started after the report arrived: a leader deposed meanwhile (stopped,
//! cut off) cannot confirm a lease that its successor does not know about. After a gap in
//! its own steps (the process was stopped or starved) it judges no lease until a round
//! started after the gap is confirmed, and its election ages the peers' heartbeats by the
//! ticks it missed.
//!
//! Every write that acts on a registration (a report, an unregister) names it by its fencing
//! token and is refused when that registration no longer holds the ID, so a request that
//! arrives late, after its registration ended and the ID went to someone else, cannot end or
//! renew the next holder's registration.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;

use crate::election::{self, Election, Millis};
use crate::pb::LoadStats;
use crate::registry::{
    ApplyError, Change, Command as RegistryCommand, Exhausted, FencingToken, IdRange,
    InvalidRequest, NodeId, NodeRecord, Registry,
};
use crate::replication::{Append, Entry, Log, PeerMessage, Position, Progress, Snapshot};
use crate::state::{Command, Machine, State};

/// Identifies a request until its reply.
pub type Token = u64;

/// Most entries carried by one message.
const MAX_ENTRIES_PER_MESSAGE: usize = 256;
/// Least time between the starts of two confirmation rounds. Reports that arrive meanwhile
/// share the next round: at 100,000 reports a second, a round each round trip would cost
/// the leader more than the reports themselves; this adds at most this much to a report's
/// answer.
const ROUND_GAP_MS: Millis = 5;

/// How writes are made safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// NebulaBeacon's behaviour, for one or two beacons: the elected leader serves writes;
    /// a write is acknowledged once every online, in-sync beacon stored it.
    Classic,
    /// For three or more beacons: a leader serves writes only while it sees a majority, only
    /// after it took over the state of a majority, and acknowledges a write once a majority
    /// stored it.
    Quorum,
}

impl Mode {
    /// The default for a cluster of `beacons`.
    pub fn default_for(beacons: usize) -> Mode {
        if beacons >= 3 {
            Mode::Quorum
        } else {
            Mode::Classic
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Classic => "classic",
            Mode::Quorum => "quorum",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub me: SocketAddr,
    pub mode: Mode,
    pub beacons: Vec<SocketAddr>,
    pub tick_ms: u64,
    pub id_range: IdRange,
    pub lease_ms: u64,
    pub id_reuse_delay_ms: u64,
    /// Node type -> the node types it subscribes to.
    pub subscriptions: BTreeMap<String, Vec<String>>,
    /// Log entries kept for followers that fall behind; older ones cost a snapshot.
    pub log_keep: usize,
    /// Highest term seen by an earlier run.
    pub stored_term: u64,
}

/// A registration request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    pub node_type: String,
    pub addr: SocketAddr,
    pub access_addr: Option<SocketAddr>,
    pub worker_num: u32,
    pub metadata: String,
    /// Wall-clock time of the request (ms since the Unix epoch), stamped by the driver.
    pub wall_ms: u64,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unregister {
    pub target: Target,
    /// The registration meant: if the one found at `target` has another token, nothing
    /// changes.
    pub token: FencingToken,
    /// The holder gives its ID up (free at once); otherwise the ID goes to quarantine.
    pub release: bool,
}

/// A service's periodic report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub node_id: NodeId,
    pub addr: SocketAddr,
    /// The registration the report renews.
    pub token: FencingToken,
    pub node: LoadStats,
    pub workers: Vec<LoadStats>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Register(RegisterRequest),
    Unregister(Unregister),
    Report(Report),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Registered {
        record: NodeRecord,
        lease_ms: u64,
        subscribe: Vec<String>,
    },
    Unregistered(NodeRecord),
    Reported {
        node_id: NodeId,
        lease_ms: u64,
        token: FencingToken,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("this beacon is not the leader{}", leader.map(|l| format!("; the leader is {l}")).unwrap_or_else(|| "; no leader is known yet".into()))]
    NotLeader { leader: Option<SocketAddr> },
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
        "the registration named (fencing token {named}) no longer holds node ID {node_id}: it is now held by the registration {holder} at {addr}; nothing was changed"
    )]
    NotHolder {
        node_id: NodeId,
        named: FencingToken,
        holder: FencingToken,
        addr: SocketAddr,
    },
    #[error(
        "leadership changed before the write was acknowledged; its outcome is unknown, so retry it (registering the same address again is safe)"
    )]
    LeaderChanged,
    #[error(
        "no quorum: this leader sees {sees} of {of} beacons and needs {needs}; writes wait until a majority is reachable"
    )]
    NoQuorum {
        sees: usize,
        needs: usize,
        of: usize,
    },
    #[error("the new leader is still taking over the state of a majority; retry in a moment")]
    NotReady,
    #[error(
        "node ID {node_id} was registered, but the registration ended (its lease ran out or it was unregistered) before it was committed; register again"
    )]
    EndedBeforeCommit { node_id: NodeId },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Tick,
    /// The time [`Coordinator::wake_at`] asked for has come.
    Wake,
    Peer {
        from: SocketAddr,
        msg: PeerMessage,
    },
    /// `from`'s state in its answer to our handshake (see [`election::Input::Greeting`]).
    Greeting {
        from: SocketAddr,
        msg: PeerMessage,
    },
    PeerDown {
        peer: SocketAddr,
    },
    Request {
        token: Token,
        request: Request,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Store these durably before carrying out any output that follows: `snapshot` (if any)
    /// replaces the stored state, then `entries` are appended. Always the first output.
    Persist {
        snapshot: Option<Snapshot>,
        entries: Vec<Entry>,
    },
    /// Send `msg` to beacon `to`.
    Send { to: SocketAddr, msg: PeerMessage },
    /// Answer request `token`.
    Reply {
        token: Token,
        result: Result<Response, RequestError>,
    },
    /// Changes now committed, in log order (leader only), for watchers.
    Committed(Vec<(u64, Change)>),
    /// The leader this beacon follows (or is) changed.
    LeaderChanged {
        leader: Option<SocketAddr>,
        term: u64,
    },
    /// Something an operator should know about (divergence, snapshots).
    Notice(String),
}

/// A follower's replication progress, as its leader knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerView {
    pub peer: SocketAddr,
    /// The last index it is known to store, if known.
    pub matched: Option<u64>,
    /// The next index to send it.
    pub next: u64,
    /// It is outside the leader's log and gets a snapshot.
    pub wants_snapshot: bool,
    /// Classic mode: commits wait for it.
    pub in_sync: bool,
}

/// Which registrations a view shows; `None` fields match any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    pub node_type: Option<String>,
    pub addr: Option<SocketAddr>,
    pub node_id: Option<NodeId>,
}

impl NodeFilter {
    fn wants(&self, r: &NodeRecord) -> bool {
        self.node_type.as_ref().is_none_or(|t| r.node_type == *t)
            && self.addr.is_none_or(|a| r.addr == a)
            && self.node_id.is_none_or(|id| r.node_id == id)
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

#[derive(Debug, Clone)]
struct Lease {
    last_seen: Millis,
    report: Option<(LoadStats, Vec<LoadStats>)>,
}

impl Lease {
    /// A lease that starts at `now`, with no report yet.
    fn fresh(now: Millis) -> Lease {
        Lease {
            last_seen: now,
            report: None,
        }
    }
}

#[derive(Debug, Clone)]
enum Waiting {
    Registered(NodeId),
    Unregistered(NodeRecord),
}

#[derive(Debug, Clone)]
struct FollowerState {
    progress: Progress,
    /// The follower reported a position outside our history: it gets a snapshot.
    wants_snapshot: bool,
    /// Since when it has lacked entries the leader has (unknown position counts as lacking).
    behind_since: Option<Millis>,
    /// Whether commits wait for it (while online). A follower that makes no progress for two
    /// ticks is left out until it has caught up again, so one stuck beacon cannot stall
    /// every write.
    in_sync: bool,
    /// The latest confirmation round of ours it acknowledged.
    acked_beat: u64,
}

impl FollowerState {
    fn new(next: u64) -> FollowerState {
        FollowerState {
            progress: Progress::new(next),
            wants_snapshot: false,
            behind_since: None,
            in_sync: true,
            acked_beat: 0,
        }
    }
}

/// Where a leader stands in taking over.
#[derive(Debug, Clone, Default)]
enum Phase {
    /// Serving.
    #[default]
    Ready,
    /// Quorum mode, just elected: collecting the positions of followers that promised to
    /// ignore older terms (their heartbeats carry our term). With a majority, the most
    /// advanced state among them (by last entry's term, then index) is taken over, fetched
    /// from its holder if it is not ours; only then does the leader serve.
    Collecting {
        promised: BTreeMap<SocketAddr, Position>,
        /// The follower whose state is being fetched, and its position.
        fetching: Option<(SocketAddr, Position)>,
    },
}

/// Leases by node ID. Every node report looks one up (100k renewals a second at 100k
/// registrations); node IDs are small integers the leader hands out itself, so one
/// multiplication hashes them well, where the default SipHash showed in profiles.
type Leases = HashMap<NodeId, Lease, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of a node ID.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by u32 keys; kept correct for any other.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// State only the leader has.
#[derive(Debug, Clone, Default)]
struct Leading {
    /// The term this leadership began in; a new term is a new leadership.
    term: u64,
    phase: Phase,
    followers: BTreeMap<SocketAddr, FollowerState>,
    leases: Leases,
    /// Requests waiting for their entry to commit, in index order.
    waiting: VecDeque<(u64, Token, Waiting)>,
    /// Changes of entries not yet committed, in index order.
    changes: VecDeque<(u64, Change)>,
    /// Entries were appended in this step: send them.
    appended: bool,
    /// The latest confirmation round started (quorum mode): every message to a follower
    /// carries it, and a follower acknowledges each new one at once.
    beat: u64,
    /// The latest round a majority (this leader included) acknowledged.
    confirmed: u64,
    /// A round is wanted: reports wait for one, or leases wait to be judged.
    beat_wanted: bool,
    /// A round was started in this step: tell every follower.
    beat_due: bool,
    /// When the latest round started.
    round_started: Option<Millis>,
    /// Leases are judged only once this round is confirmed: a round started after the
    /// leadership was taken up or after the last gap in this beacon's steps.
    judge_after: u64,
    /// Answers to reports, each waiting for a round (the one it names) to be confirmed.
    reports: VecDeque<(u64, Token, Response)>,
}

/// The sans-IO heart of one beacon.
#[derive(Debug, Clone)]
pub struct Coordinator {
    cfg: CoordinatorConfig,
    election: Election,
    log: Log,
    state: State,
    commit: u64,
    leading: Option<Leading>,
    /// What this step changed in the log, to be stored before anything is sent.
    unsaved_snapshot: Option<Snapshot>,
    unsaved: Vec<Entry>,
    /// Follower: the latest confirmation round seen from the leader of `(term, beat)`.
    leader_beat: (u64, u64),
    /// When the previous step ran, to notice a gap (the process was stopped or starved).
    last_step: Option<Millis>,
}

/// Stored state that cannot be loaded: the beacon refuses to start rather than serve from
/// part of what it acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "the stored log does not follow on: entry {found} comes after {last}; refusing to start from part of the acknowledged state (restore the data directory, or remove it to fetch the state from the other beacons)"
    )]
    NotContiguous { found: Position, last: Position },
    #[error(
        "stored entry {position} does not fit the stored state ({cause}); refusing to start from part of the acknowledged state (restore the data directory, or remove it to fetch the state from the other beacons)"
    )]
    DoesNotFit {
        position: Position,
        cause: ApplyError,
    },
    #[error(
        "the stored state holds node IDs {ids:?} outside the configured id_range {range} (key `id_range`); start with the range the cluster was using, or with one that holds every stored ID"
    )]
    OutsideRange { ids: Vec<NodeId>, range: IdRange },
}

impl Coordinator {
    pub fn new(cfg: CoordinatorConfig) -> Coordinator {
        Coordinator::restore(cfg, None, Vec::new())
            .expect("an empty state always loads")
            .0
    }

    /// A coordinator resuming from stored state: `snapshot` (if any), then `entries`
    /// replayed on it. Returns it with notices for the log. Stored state that does not load
    /// whole (entries that do not follow on or do not fit, IDs outside the configured range)
    /// is an error: a beacon never drops acknowledged state on its own.
    pub fn restore(
        cfg: CoordinatorConfig,
        snapshot: Option<Snapshot>,
        entries: Vec<Entry>,
    ) -> Result<(Coordinator, Vec<String>), RestoreError> {
        let election = Election::with_term(cfg.me, cfg.beacons.iter().copied(), cfg.stored_term)
            .with_quorum(cfg.mode == Mode::Quorum);
        // Stored state is replayed under the widest range, then checked against the
        // configured one: an ID outside it is named as such, not as a replay failure.
        let replay_range = IdRange {
            first: 1,
            last: NodeId::MAX,
        };
        let mut c = Coordinator {
            state: State::new(Registry::new(replay_range, cfg.id_reuse_delay_ms)),
            log: Log::new(cfg.log_keep),
            election,
            commit: 0,
            leading: None,
            unsaved_snapshot: None,
            unsaved: Vec::new(),
            leader_beat: (0, 0),
            last_step: None,
            cfg,
        };
        let mut notices = Vec::new();
        if let Some(snapshot) = snapshot {
            c.state.restore(snapshot.state, 0);
            c.log.reset(snapshot.position);
        }
        for entry in entries {
            if entry.index != c.log.last().index + 1 {
                return Err(RestoreError::NotContiguous {
                    found: entry.position(),
                    last: c.log.last(),
                });
            }
            if let Err(cause) = c.state.apply(&entry.command, 0) {
                return Err(RestoreError::DoesNotFit {
                    position: entry.position(),
                    cause,
                });
            }
            c.log.append(entry);
        }
        let outside = c.state.registry.outside(c.cfg.id_range);
        if !outside.is_empty() {
            return Err(RestoreError::OutsideRange {
                ids: outside,
                range: c.cfg.id_range,
            });
        }
        c.state.registry.set_range(c.cfg.id_range);
        if c.election.is_leader() {
            let mut out = Vec::new();
            c.become_leader(0, &mut out);
            notices.extend(out.into_iter().filter_map(|o| match o {
                Output::Notice(n) => Some(n),
                _ => None,
            }));
        }
        Ok((c, notices))
    }

    /// The whole state as of the last log position, for compacting storage.
    pub fn snapshot(&self, now: Millis) -> Snapshot {
        Snapshot {
            position: self.log.last(),
            state: self.state.snapshot(now),
        }
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.cfg
    }

    pub fn election(&self) -> &Election {
        &self.election
    }

    pub fn registry(&self) -> &Registry {
        &self.state.registry
    }

    pub fn is_leader(&self) -> bool {
        self.leading.is_some()
    }

    /// The last position in this beacon's log (everything up to it is applied).
    pub fn position(&self) -> Position {
        self.log.last()
    }

    pub fn commit(&self) -> u64 {
        self.commit
    }

    /// The message to greet `peer` with (handshakes): our heartbeat and position, nothing to
    /// append.
    pub fn greeting(&self) -> PeerMessage {
        self.bare_message()
    }

    /// Live registrations and quarantined IDs, by ID, optionally only those that `filter`
    /// names.
    pub fn nodes(&self, now: Millis, filter: &NodeFilter) -> Vec<NodeView> {
        let wanted = |r: &NodeRecord| filter.wants(r);
        let lease = |id: NodeId| self.leading.as_ref().and_then(|l| l.leases.get(&id));
        let mut views: Vec<NodeView> = self
            .state
            .registry
            .nodes()
            .filter(|r| wanted(r))
            .map(|r| NodeView {
                record: r.clone(),
                is_online: true,
                last_seen_ms: lease(r.node_id).map(|l| now.saturating_sub(l.last_seen)),
                report: lease(r.node_id).and_then(|l| l.report.clone()),
                quarantine_ms: None,
            })
            .collect();
        views.extend(
            self.state
                .registry
                .quarantined()
                .filter(|t| wanted(&t.record))
                .map(|t| NodeView {
                    record: t.record.clone(),
                    is_online: false,
                    last_seen_ms: None,
                    report: None,
                    quarantine_ms: Some(t.until.saturating_sub(now)),
                }),
        );
        views.sort_by_key(|v| v.record.node_id);
        views
    }

    /// Feeds one input in.
    pub fn step(&mut self, now: Millis, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.notice_gap(now, &mut out);
        match input {
            Input::Tick => self.on_tick(now, &mut out),
            Input::Wake => {} // what is due is done below
            Input::Peer { from, msg } => self.on_peer(now, from, msg, false, &mut out),
            Input::Greeting { from, msg } => self.on_peer(now, from, msg, true, &mut out),
            Input::PeerDown { peer } => {
                let actions = self
                    .election
                    .step(now, election::Input::PeerDown { peer })
                    .expect("peer down never fails");
                self.on_election(now, actions, &mut out);
                let next = self.log.last().index + 1;
                if let Some(f) = self
                    .leading
                    .as_mut()
                    .and_then(|l| l.followers.get_mut(&peer))
                {
                    *f = FollowerState::new(next);
                }
            }
            Input::Request { token, request } => self.on_request(now, token, request, &mut out),
        }
        self.advance_commit(now, &mut out);
        self.start_round(now, &mut out);
        self.flush(now, &mut out);
        self.log.set_keep(self.entries_to_keep());
        if self.unsaved_snapshot.is_some() || !self.unsaved.is_empty() {
            let persist = Output::Persist {
                snapshot: self.unsaved_snapshot.take(),
                entries: std::mem::take(&mut self.unsaved),
            };
            out.insert(0, persist);
        }
        out
    }

    /// Notices a gap in this beacon's steps: ticks come every `tick_ms`, so a step more than
    /// two ticks after the previous one means the process was stopped or starved. The
    /// peers may have taken it for gone and elected another leader; the election ages its
    /// view by the missed ticks (a leader without a majority steps down at once), and a
    /// leader judges no lease until a majority confirmed it still leads.
    fn notice_gap(&mut self, now: Millis, out: &mut Vec<Output>) {
        let last = self.last_step.replace(now);
        let tick = self.cfg.tick_ms.max(1);
        let Some(gap) = last
            .map(|l| now.saturating_sub(l))
            .filter(|g| *g > 2 * tick)
        else {
            return;
        };
        let missed = (gap / tick).saturating_sub(1).min(u64::from(u32::MAX)) as u32;
        out.push(Output::Notice(format!(
            "no step for {gap} ms (the process was stopped or starved): peers' heartbeats aged by {missed} ticks; leases are judged again once a majority confirms this leadership"
        )));
        if let Some(l) = self.leading.as_mut() {
            l.judge_after = l.beat + 1;
            l.beat_wanted = true;
        }
        let actions = self.election.catch_up(missed);
        self.on_election(now, actions, out);
    }

    // ---- election ----------------------------------------------------------------------

    /// Carries out the election's actions: role changes first (so that heartbeats built next
    /// carry the right payload), then the heartbeats.
    fn on_election(&mut self, now: Millis, actions: Vec<election::Action>, out: &mut Vec<Output>) {
        let mut broadcast = false;
        for action in actions {
            match action {
                election::Action::Broadcast(_) => broadcast = true,
                election::Action::LeaderChanged { leader, term } => {
                    out.push(Output::LeaderChanged { leader, term });
                }
            }
        }
        match (self.election.is_leader(), self.leading.is_some()) {
            (true, false) => self.become_leader(now, out),
            (false, true) => self.step_down(out),
            (true, true) if self.leading.as_ref().map(|l| l.term) != Some(self.election.term()) => {
                // Leading on in a later term: what waited was proposed in the old one.
                self.step_down(out);
                self.become_leader(now, out);
            }
            _ => {}
        }
        if broadcast {
            for peer in self.peers() {
                let msg = self.message_for(peer, now);
                out.push(Output::Send { to: peer, msg });
            }
            if let Some(l) = self.leading.as_mut() {
                l.appended = false;
            }
        }
    }

    fn peers(&self) -> Vec<SocketAddr> {
        self.election.peers().collect()
    }

    fn become_leader(&mut self, now: Millis, out: &mut Vec<Output>) {
        let followers = self.fresh_followers();
        let leases = self.fresh_leases(now);
        let phase = match self.cfg.mode {
            Mode::Classic => Phase::Ready,
            Mode::Quorum => Phase::Collecting {
                promised: BTreeMap::new(),
                fetching: None,
            },
        };
        self.leading = Some(Leading {
            term: self.election.term(),
            phase,
            followers,
            leases,
            ..Leading::default()
        });
        self.try_take_over(now, out);
    }

    /// Every follower's progress unknown, the next entry to send being the one after ours.
    fn fresh_followers(&self) -> BTreeMap<SocketAddr, FollowerState> {
        let next = self.log.last().index + 1;
        self.peers()
            .into_iter()
            .map(|p| (p, FollowerState::new(next)))
            .collect()
    }

    /// Every live registration gets a fresh lease: its holder may have been reporting to the
    /// old leader a moment ago.
    fn fresh_leases(&self, now: Millis) -> Leases {
        self.state
            .registry
            .nodes()
            .map(|r| (r.node_id, Lease::fresh(now)))
            .collect()
    }

    /// Beacons in the cluster that make a majority.
    fn majority(&self) -> usize {
        self.cfg.beacons.len() / 2 + 1
    }

    /// Beacons this one sees online, itself included.
    fn online(&self) -> usize {
        self.election.online()
    }

    /// Why this beacon cannot serve a write now, if it cannot.
    fn write_blocked(&self) -> Option<RequestError> {
        if self.leading.is_none() {
            let leader = self.election.leader();
            // A beacon on a minority side that knows no leader says why none can lead.
            if leader.is_none()
                && let Some(e) = self.no_quorum()
            {
                return Some(e);
            }
            return Some(RequestError::NotLeader { leader });
        }
        if let Some(e) = self.no_quorum() {
            return Some(e);
        }
        self.taking_over().then_some(RequestError::NotReady)
    }

    /// Quorum mode, fewer than a majority in sight: the error that says so.
    fn no_quorum(&self) -> Option<RequestError> {
        (self.cfg.mode == Mode::Quorum && self.online() < self.majority()).then(|| {
            RequestError::NoQuorum {
                sees: self.online(),
                needs: self.majority(),
                of: self.cfg.beacons.len(),
            }
        })
    }

    /// Leading, but still collecting a majority's state (quorum mode).
    fn taking_over(&self) -> bool {
        matches!(
            self.leading,
            Some(Leading {
                phase: Phase::Collecting { .. },
                ..
            })
        )
    }

    /// Why reads from this beacon may be stale, if they may: no leader known, or (quorum
    /// mode) this beacon cannot see a majority, or its leader has not taken over yet.
    pub fn staleness(&self) -> Option<String> {
        if let Some(RequestError::NoQuorum { sees, needs, of }) = self.no_quorum() {
            return Some(format!(
                "this beacon sees {sees} of {of} beacons; a majority is {needs}"
            ));
        }
        if self.election.leader().is_none() {
            return Some("no leader is known".into());
        }
        self.taking_over()
            .then(|| "this leader is still taking over the state of a majority".into())
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// How far each follower is known to have stored the log (leader only).
    pub fn follower_progress(&self) -> Vec<FollowerView> {
        let Some(leading) = &self.leading else {
            return Vec::new();
        };
        leading
            .followers
            .iter()
            .map(|(peer, f)| FollowerView {
                peer: *peer,
                matched: f.progress.matched,
                next: f.progress.next,
                wants_snapshot: f.wants_snapshot,
                in_sync: f.in_sync,
            })
            .collect()
    }

    /// Log entries worth keeping: `log_keep`, or as many as the state has records when that
    /// is more. A follower further behind gets a snapshot, which writes every record; keeping
    /// at least as many entries as records means a lagging follower never costs more than
    /// one record per entry it missed, and compacting the log on disk (which writes a
    /// snapshot too) costs at most one record per entry appended.
    pub fn entries_to_keep(&self) -> usize {
        self.cfg.log_keep.max(self.state.records())
    }

    /// Whether this beacon leads and has taken over (quorum mode) the state of a majority:
    /// its registry then holds every acknowledged write of earlier terms.
    pub fn has_taken_over(&self) -> bool {
        self.leading.is_some() && !self.taking_over()
    }

    /// Quorum mode, collecting: with promises from a majority, takes over the most advanced
    /// state among them (asking its holder for it if it is not ours).
    fn try_take_over(&mut self, now: Millis, out: &mut Vec<Output>) {
        let majority = self.majority();
        let mine = self.log.last();
        let Some(Leading {
            phase: Phase::Collecting { promised, fetching },
            ..
        }) = self.leading.as_mut()
        else {
            return;
        };
        if fetching.is_some() || promised.len() + 1 < majority {
            return;
        }
        // Ties go to our own state (last in the chain).
        let (best, holder) = promised
            .iter()
            .map(|(p, pos)| (*pos, Some(*p)))
            .chain(std::iter::once((mine, None)))
            .max_by_key(|(pos, _)| (pos.term, pos.index))
            .expect("at least our own position");
        match holder {
            None => self.become_ready(now, out),
            Some(peer) => {
                *fetching = Some((peer, best));
                out.push(Output::Notice(format!(
                    "taking over: follower {peer} holds the most advanced state ({best}, ours {mine}); fetching it"
                )));
                let msg = self.message_for(peer, now);
                out.push(Output::Send { to: peer, msg });
            }
        }
    }

    /// The leader has taken over: it serves from here, starting its term with an entry of
    /// its own (committing it commits everything before it) and every lease afresh.
    fn become_ready(&mut self, now: Millis, out: &mut Vec<Output>) {
        let position = self.log.last();
        let followers = self.fresh_followers();
        let leases = self.fresh_leases(now);
        let leading = self.leading();
        leading.phase = Phase::Ready;
        leading.followers = followers;
        leading.leases = leases;
        // No lease is judged before a majority confirmed this leadership.
        leading.judge_after = leading.beat + 1;
        leading.beat_wanted = true;
        out.push(Output::Notice(format!(
            "took over the state of a majority at {position}: serving"
        )));
        self.append(now, Command::LeaderStart, out);
    }

    fn step_down(&mut self, out: &mut Vec<Output>) {
        if let Some(leading) = self.leading.take() {
            let waiting = leading.waiting.into_iter().map(|(_, token, _)| token);
            let reports = leading.reports.into_iter().map(|(_, token, _)| token);
            for token in waiting.chain(reports) {
                out.push(Output::Reply {
                    token,
                    result: Err(RequestError::LeaderChanged),
                });
            }
        }
    }

    // ---- ticks ---------------------------------------------------------------------------

    fn on_tick(&mut self, now: Millis, out: &mut Vec<Output>) {
        // Resend whatever followers have not acknowledged (a message may have been dropped).
        if let Some(l) = self.leading.as_mut() {
            for f in l.followers.values_mut() {
                if let Some(m) = f.progress.matched {
                    f.progress.next = m + 1;
                }
            }
        }
        let actions = self.election.tick(now);
        self.on_election(now, actions, out);
        if self.leading.is_some() {
            self.maintain_leases(now, out);
        }
    }

    /// Expires missed leases and releases ended quarantines (leader only), once this
    /// leadership is confirmed (see [`Leading::judge_after`]).
    fn maintain_leases(&mut self, now: Millis, out: &mut Vec<Output>) {
        if self.write_blocked().is_some() {
            // Nothing can be written; leases are judged again once it can.
            return;
        }
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        if self.cfg.mode == Mode::Quorum && l.confirmed < l.judge_after {
            // Not confirmed since it took up leadership or since a gap in its steps: it may
            // have been deposed, and must not act on its own clock until it knows.
            l.beat_wanted = true;
            return;
        }
        let lease_ms = self.cfg.lease_ms;
        let mut expired: Vec<NodeId> = l
            .leases
            .iter()
            .filter(|(_, lease)| now.saturating_sub(lease.last_seen) > lease_ms)
            .map(|(id, _)| *id)
            .collect();
        expired.sort_unstable();
        for id in expired {
            out.push(Output::Notice(format!(
                "node {id} missed its lease of {lease_ms} ms: registration ended, ID in quarantine"
            )));
            if let Some(l) = self.leading.as_mut() {
                l.leases.remove(&id);
            }
            self.append(now, RegistryCommand::Expire(id).into(), out);
        }
        for id in self.state.registry.due_releases(now) {
            self.append(now, RegistryCommand::Release(id).into(), out);
        }
    }

    // ---- requests ------------------------------------------------------------------------

    fn on_request(&mut self, now: Millis, token: Token, request: Request, out: &mut Vec<Output>) {
        if let Some(e) = self.write_blocked() {
            out.push(Output::Reply {
                token,
                result: Err(e),
            });
            return;
        }
        let result = match request {
            Request::Register(req) => self.register(now, token, req, out),
            Request::Unregister(req) => self.unregister(now, token, req, out),
            Request::Report(report) => self.report(now, token, report),
        };
        match result {
            Ok(None) => {} // waits for its entry to commit
            Ok(Some(response)) => out.push(Output::Reply {
                token,
                result: Ok(response),
            }),
            Err(e) => out.push(Output::Reply {
                token,
                result: Err(e),
            }),
        }
    }

    fn leading(&mut self) -> &mut Leading {
        self.leading.as_mut().expect("leader")
    }

    fn register(
        &mut self,
        now: Millis,
        token: Token,
        req: RegisterRequest,
        out: &mut Vec<Output>,
    ) -> Result<Option<Response>, RequestError> {
        let term = self.election.term();
        let index = self.log.last().index + 1;
        if let Some(existing) = self.state.registry.by_addr(req.addr).cloned() {
            if existing.node_type != req.node_type {
                return Err(RequestError::Conflict {
                    addr: req.addr,
                    node_type: existing.node_type,
                    node_id: existing.node_id,
                });
            }
            self.touch(existing.node_id, now);
            let same = existing.access_addr == req.access_addr
                && existing.worker_num == req.worker_num
                && existing.metadata == req.metadata;
            if same {
                // Registering again while live returns the same ID, once everything that
                // made the record what it is now is committed.
                return self.when_committed(
                    self.log.last().index,
                    token,
                    Waiting::Registered(existing.node_id),
                );
            }
            // New details, same registration: the fencing token stays.
            let updated = NodeRecord {
                access_addr: req.access_addr,
                worker_num: req.worker_num,
                metadata: req.metadata,
                ..existing
            };
            let id = updated.node_id;
            self.append(now, RegistryCommand::Update(updated).into(), out);
            return self.when_committed(index, token, Waiting::Registered(id));
        }
        let id = match self.state.registry.reclaimable(req.addr, &req.node_type) {
            Some(id) => id,
            None => self.state.registry.allocate()?,
        };
        let record = NodeRecord {
            node_id: id,
            node_type: req.node_type,
            addr: req.addr,
            access_addr: req.access_addr,
            worker_num: req.worker_num,
            metadata: req.metadata,
            registered_ms: req.wall_ms,
            term,
            index,
        };
        self.append(now, RegistryCommand::Register(record).into(), out);
        self.touch(id, now);
        self.when_committed(index, token, Waiting::Registered(id))
    }

    /// Ends the registration the request names, if it is still the one at its target: the
    /// holder's own release frees the ID at once; anyone else's unregister sends it to
    /// quarantine, as a missed lease does, since its holder may still be using it.
    fn unregister(
        &mut self,
        now: Millis,
        token: Token,
        req: Unregister,
        out: &mut Vec<Output>,
    ) -> Result<Option<Response>, RequestError> {
        if !req.token.is_given() {
            return Err(InvalidRequest::NoToken.into());
        }
        let record = match req.target {
            Target::Id(id) => self.state.registry.get(id),
            Target::Addr(addr) => self.state.registry.by_addr(addr),
        }
        .cloned()
        .ok_or_else(|| {
            RequestError::UnknownTarget(format!(
                "{} (the registration named, {}, has ended)",
                req.target, req.token
            ))
        })?;
        if record.token() != req.token {
            return Err(RequestError::NotHolder {
                node_id: record.node_id,
                named: req.token,
                holder: record.token(),
                addr: record.addr,
            });
        }
        let index = self.log.last().index + 1;
        self.leading().leases.remove(&record.node_id);
        let command = if req.release {
            RegistryCommand::Unregister(record.node_id)
        } else {
            RegistryCommand::Expire(record.node_id)
        };
        self.append(now, command.into(), out);
        self.when_committed(index, token, Waiting::Unregistered(record))
    }

    /// Renews the lease of the registration the report names. In quorum mode the answer
    /// waits for a confirmation round started after the report arrived (see the module
    /// documentation).
    fn report(
        &mut self,
        now: Millis,
        token: Token,
        report: Report,
    ) -> Result<Option<Response>, RequestError> {
        if !report.token.is_given() {
            return Err(InvalidRequest::NoToken.into());
        }
        let live = self
            .state
            .registry
            .get(report.node_id)
            .is_some_and(|r| r.addr == report.addr && r.token() == report.token);
        if !live {
            return Err(RequestError::NoLease {
                node_id: report.node_id,
                addr: report.addr,
                token: report.token,
            });
        }
        let quorum = self.cfg.mode == Mode::Quorum;
        let leading = self.leading();
        let lease = leading
            .leases
            .entry(report.node_id)
            .or_insert(Lease::fresh(now));
        lease.last_seen = now;
        lease.report = Some((report.node, report.workers));
        let response = Response::Reported {
            node_id: report.node_id,
            lease_ms: self.cfg.lease_ms,
            token: report.token,
        };
        if !quorum {
            return Ok(Some(response));
        }
        let leading = self.leading();
        leading
            .reports
            .push_back((leading.beat + 1, token, response));
        leading.beat_wanted = true;
        Ok(None)
    }

    /// Renews a lease.
    fn touch(&mut self, id: NodeId, now: Millis) {
        self.leading()
            .leases
            .entry(id)
            .and_modify(|l| l.last_seen = now)
            .or_insert(Lease::fresh(now));
    }

    /// The response now if `index` is committed, else `None` and the request waits.
    fn when_committed(
        &mut self,
        index: u64,
        token: Token,
        waiting: Waiting,
    ) -> Result<Option<Response>, RequestError> {
        if index <= self.commit {
            return self.respond(waiting).map(Some);
        }
        let leading = self.leading();
        let at = leading.waiting.partition_point(|(i, _, _)| *i <= index);
        leading.waiting.insert(at, (index, token, waiting));
        Ok(None)
    }

    fn respond(&self, waiting: Waiting) -> Result<Response, RequestError> {
        match waiting {
            Waiting::Registered(id) => {
                // Gone before it committed (its lease ran out while commits were slow, or it
                // was unregistered meanwhile): say so; registering again is the answer.
                let record = self
                    .state
                    .registry
                    .get(id)
                    .cloned()
                    .ok_or(RequestError::EndedBeforeCommit { node_id: id })?;
                let subscribe = self
                    .cfg
                    .subscriptions
                    .get(&record.node_type)
                    .cloned()
                    .unwrap_or_default();
                Ok(Response::Registered {
                    record,
                    lease_ms: self.cfg.lease_ms,
                    subscribe,
                })
            }
            Waiting::Unregistered(record) => Ok(Response::Unregistered(record)),
        }
    }

    // ---- the log -------------------------------------------------------------------------

    /// Appends and applies a command (leader only). The leader only appends commands it has
    /// checked against its registry, so applying cannot fail; if it does, nothing is appended.
    fn append(&mut self, now: Millis, command: Command, out: &mut Vec<Output>) {
        let entry = Entry {
            index: self.log.last().index + 1,
            term: self.election.term(),
            command,
        };
        match self.state.apply(&entry.command, now) {
            Ok(change) => {
                let index = entry.index;
                self.unsaved.push(entry.clone());
                self.log.append(entry);
                let leading = self.leading();
                leading.appended = true;
                if let Some(change) = change {
                    leading.changes.push_back((index, change));
                }
            }
            Err(e) => out.push(Output::Notice(format!(
                "leader refused its own command {:?}: {e}",
                entry.command
            ))),
        }
    }

    /// Commits what every online, in-sync follower has stored, answers the requests that
    /// were waiting for it, and publishes the committed changes.
    ///
    /// An online follower whose position is not known yet (just after an election, or after
    /// it reconnected) counts as having nothing: a write is never acknowledged on the hope
    /// that a beacon has it.
    /// Classic mode: what every online, in-sync follower has stored.
    fn classic_commit(&mut self, now: Millis, out: &mut Vec<Output>) -> Option<u64> {
        let leading = self.leading.as_mut()?;
        let last = self.log.last().index;
        let stall_after = self.cfg.tick_ms * 2;
        let mut commit = last;
        for (peer, f) in leading.followers.iter_mut() {
            let matched = f.progress.matched.unwrap_or(0);
            if matched >= last {
                f.behind_since = None;
                if !f.in_sync {
                    f.in_sync = true;
                    out.push(Output::Notice(format!("follower {peer} caught up")));
                }
                continue;
            }
            if !self.election.is_online(*peer) || !f.in_sync {
                continue;
            }
            let since = *f.behind_since.get_or_insert(now);
            if now.saturating_sub(since) > stall_after {
                f.in_sync = false;
                out.push(Output::Notice(format!(
                    "follower {peer} has made no progress for {} ms (at {matched}, leader at {last}): writes no longer wait for it",
                    now - since
                )));
                continue;
            }
            commit = commit.min(matched);
        }
        Some(commit)
    }

    /// Quorum mode: the highest index stored by a majority (the leader included), once the
    /// entry there is of the leader's own term. An older entry on a majority is not yet safe:
    /// a leader that took over a more advanced state could still replace it; an entry of the
    /// current term on a majority is in the state any later leader takes over.
    fn quorum_commit(&self) -> Option<u64> {
        if self.taking_over() {
            return None;
        }
        let leading = self.leading.as_ref()?;
        let mut stored: Vec<u64> = leading
            .followers
            .values()
            .map(|f| f.progress.matched.unwrap_or(0))
            .collect();
        stored.push(self.log.last().index);
        stored.sort_unstable_by(|a, b| b.cmp(a));
        let candidate = stored[self.majority() - 1];
        (self.log.term_at(candidate) == Some(self.election.term())).then_some(candidate)
    }

    fn advance_commit(&mut self, now: Millis, out: &mut Vec<Output>) {
        let commit = match self.cfg.mode {
            Mode::Classic => self.classic_commit(now, out),
            Mode::Quorum => self.quorum_commit(),
        };
        let Some(commit) = commit else {
            return;
        };
        let Some(leading) = self.leading.as_mut() else {
            return;
        };
        if commit <= self.commit {
            return;
        }
        self.commit = commit;
        let mut ready = Vec::new();
        while leading
            .waiting
            .front()
            .is_some_and(|(i, _, _)| *i <= commit)
        {
            ready.push(leading.waiting.pop_front().expect("non-empty"));
        }
        let mut committed = Vec::new();
        while leading.changes.front().is_some_and(|(i, _)| *i <= commit) {
            committed.push(leading.changes.pop_front().expect("non-empty"));
        }
        for (_, token, waiting) in ready {
            out.push(Output::Reply {
                token,
                result: self.respond(waiting),
            });
        }
        if !committed.is_empty() {
            out.push(Output::Committed(committed));
        }
    }

    /// Sends newly appended entries, and a newly started confirmation round, to every
    /// follower at once.
    fn flush(&mut self, now: Millis, out: &mut Vec<Output>) {
        let Some((appended, beat_due)) = self.leading.as_ref().map(|l| (l.appended, l.beat_due))
        else {
            return;
        };
        if !appended && !beat_due {
            return;
        }
        for peer in self.peers() {
            let msg = self.message_for(peer, now);
            if msg.replicates() || beat_due {
                out.push(Output::Send { to: peer, msg });
            }
        }
        let leading = self.leading();
        leading.appended = false;
        leading.beat_due = false;
    }

    /// Starts a confirmation round when one is wanted and none is under way (quorum mode,
    /// serving).
    fn start_round(&mut self, now: Millis, out: &mut Vec<Output>) {
        if self.cfg.mode != Mode::Quorum || self.taking_over() {
            return;
        }
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        if !l.beat_wanted || l.confirmed < l.beat {
            return;
        }
        if l.round_started.is_some_and(|at| now < at + ROUND_GAP_MS) {
            return; // see wake_at
        }
        l.round_started = Some(now);
        l.beat += 1;
        l.beat_wanted = false;
        l.beat_due = true;
        // A lone beacon confirms its own round.
        self.advance_confirmed(out);
    }

    /// When this beacon wants a step ([`Input::Wake`]) even if nothing else happens: a
    /// confirmation round is wanted but waits for [`ROUND_GAP_MS`] to pass.
    pub fn wake_at(&self) -> Option<Millis> {
        let l = self.leading.as_ref()?;
        (l.beat_wanted && l.confirmed >= l.beat)
            .then(|| l.round_started.map_or(0, |at| at + ROUND_GAP_MS))
    }

    /// The latest round a majority acknowledged (this leader acknowledges its own at once);
    /// answers the reports that waited for it.
    fn advance_confirmed(&mut self, out: &mut Vec<Output>) {
        let majority = self.majority();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let mut acked: Vec<u64> = l.followers.values().map(|f| f.acked_beat).collect();
        acked.push(l.beat);
        acked.sort_unstable_by(|a, b| b.cmp(a));
        let confirmed = acked[majority - 1];
        if confirmed <= l.confirmed {
            return;
        }
        l.confirmed = confirmed;
        while l.reports.front().is_some_and(|(b, _, _)| *b <= confirmed) {
            let (_, token, response) = l.reports.pop_front().expect("non-empty");
            out.push(Output::Reply {
                token,
                result: Ok(response),
            });
        }
    }

    fn bare_message(&self) -> PeerMessage {
        let (beat_term, beat) = self.leader_beat;
        PeerMessage {
            heartbeat: self.election.heartbeat(),
            position: self.log.last(),
            commit: self.commit,
            last_node_id: self.state.registry.last_node_id(),
            append: None,
            snapshot: None,
            reject: false,
            need_snapshot: false,
            fetch: false,
            beat: self.leading.as_ref().map_or(0, |l| l.beat),
            ack_beat: if beat_term == self.election.term() {
                beat
            } else {
                0
            },
        }
    }

    /// The next message for `peer`: a heartbeat, plus (from a leader) what it lacks.
    fn message_for(&mut self, peer: SocketAddr, now: Millis) -> PeerMessage {
        let mut msg = self.bare_message();
        let resend_after = self.cfg.tick_ms * 2;
        let last = self.log.last();
        if let Some(Leading {
            phase: Phase::Collecting { fetching, .. },
            ..
        }) = &self.leading
        {
            // Taking over: nothing to send but our heartbeat, and the fetch.
            msg.fetch = fetching.is_some_and(|(p, _)| p == peer);
            return msg;
        }
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(&peer))
        else {
            return msg;
        };
        if f.wants_snapshot {
            let due = f
                .progress
                .snapshot_sent
                .is_none_or(|at| now.saturating_sub(at) >= resend_after);
            if due {
                f.progress.snapshot_sent = Some(now);
                msg.snapshot = Some(Box::new(Snapshot {
                    position: last,
                    state: self.state.snapshot(now),
                }));
            }
            return msg;
        }
        if f.progress.matched.is_none() {
            // Unknown follower: an empty append asks it for its position at once.
            msg.append = Some(Append {
                prev: last,
                entries: Vec::new(),
            });
            return msg;
        }
        let from = f.progress.next - 1;
        if from >= last.index {
            return msg;
        }
        match self.log.after(from, MAX_ENTRIES_PER_MESSAGE) {
            Some(entries) => {
                let prev = Position {
                    index: from,
                    term: self.log.term_at(from).expect("retained"),
                };
                f.progress.next = entries.last().map_or(from, |e| e.index) + 1;
                msg.append = Some(Append { prev, entries });
            }
            None => {
                // What it needs was compacted away.
                f.wants_snapshot = true;
                f.progress.matched = None;
                return self.message_for(peer, now);
            }
        }
        msg
    }

    // ---- messages from peers -------------------------------------------------------------

    fn on_peer(
        &mut self,
        now: Millis,
        from: SocketAddr,
        msg: PeerMessage,
        greeting: bool,
        out: &mut Vec<Output>,
    ) {
        let hb = msg.heartbeat;
        let input = if greeting {
            election::Input::Greeting { from, hb }
        } else {
            election::Input::Heartbeat { from, hb }
        };
        match self.election.step(now, input) {
            Ok(actions) => self.on_election(now, actions, out),
            Err(e) => {
                out.push(Output::Notice(format!("message from {from} ignored: {e}")));
                return;
            }
        }
        if self.leading.is_some() {
            self.on_follower_report(now, from, msg, out);
        } else if self.election.leader() == Some(from) {
            self.on_leader_message(now, from, msg, out);
        }
    }

    /// Leader: a follower told us its position.
    fn on_follower_report(
        &mut self,
        now: Millis,
        from: SocketAddr,
        msg: PeerMessage,
        out: &mut Vec<Output>,
    ) {
        if msg.heartbeat.is_leader {
            return; // a rival claim, settled by the election; its log is not ours to track
        }
        let me = self.election.me();
        let term = self.election.term();
        if msg.heartbeat.term == term
            && msg.heartbeat.leader == Some(me)
            && let Some(f) = self
                .leading
                .as_mut()
                .and_then(|l| l.followers.get_mut(&from))
            && msg.ack_beat > f.acked_beat
        {
            f.acked_beat = msg.ack_beat;
            self.advance_confirmed(out);
        }
        if let Some(Leading {
            phase: Phase::Collecting { promised, fetching },
            ..
        }) = self.leading.as_mut()
        {
            if msg.heartbeat.term < self.election.term() {
                return; // it has not heard of our term yet: no promise
            }
            promised.insert(from, msg.position);
            if let Some((peer, wanted)) = *fetching {
                match msg.snapshot {
                    Some(snapshot) if peer == from && snapshot.position == wanted => {
                        self.install(*snapshot, now);
                        self.become_ready(now, out);
                    }
                    _ if peer == from && msg.position != wanted => {
                        // It moved on meanwhile: choose again.
                        *fetching = None;
                        self.try_take_over(now, out);
                    }
                    _ => {}
                }
                return;
            }
            self.try_take_over(now, out);
            return;
        }
        let log = &self.log;
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(&from))
        else {
            return;
        };
        let lost = msg.need_snapshot || f.progress.observe(log, msg.position, msg.reject);
        if lost && !f.wants_snapshot {
            f.wants_snapshot = true;
            f.progress.matched = None;
            out.push(Output::Notice(format!(
                "follower {from} is at {} outside this leader's log (base {}): sending a snapshot",
                msg.position,
                log.base()
            )));
        } else if !lost {
            f.wants_snapshot = false;
        }
        let behind = f.wants_snapshot || f.progress.next <= self.log.last().index;
        if behind {
            let reply = self.message_for(from, now);
            if reply.replicates() {
                out.push(Output::Send {
                    to: from,
                    msg: reply,
                });
            }
        }
    }

    /// Replaces the whole state with `snapshot`, to be stored before anything is sent.
    fn install(&mut self, snapshot: Snapshot, now: Millis) {
        self.state.restore(snapshot.state.clone(), now);
        self.log.reset(snapshot.position);
        self.unsaved.clear();
        self.unsaved_snapshot = Some(snapshot);
    }

    /// Whether `position` is in this beacon's history: its log holds it, or an entry of the
    /// same term at or after it (one leader per term, and a follower only appends what
    /// continues its leader's log, so an entry of that term implies everything before it).
    fn holds(&self, position: Position) -> bool {
        let last = self.log.last();
        self.log.contains(position) || (last.term == position.term && last.index >= position.index)
    }

    /// Follower: the leader sent us entries or a snapshot.
    fn on_leader_message(
        &mut self,
        now: Millis,
        from: SocketAddr,
        msg: PeerMessage,
        out: &mut Vec<Output>,
    ) {
        if msg.heartbeat.term < self.election.max_seen_term() {
            // We promised a newer term: an older leader's entries are not taken.
            return;
        }
        if msg.fetch {
            // A new leader takes over the most advanced state of a majority: ours.
            let mut reply = self.bare_message();
            reply.snapshot = Some(Box::new(self.snapshot(now)));
            out.push(Output::Send {
                to: from,
                msg: reply,
            });
            return;
        }
        // A new confirmation round of our leader's is acknowledged at once (below, with the
        // answer to what it carries, or alone).
        let term = msg.heartbeat.term;
        let new_beat = if self.leader_beat.0 == term {
            msg.beat > self.leader_beat.1
        } else {
            msg.beat > 0
        };
        if new_beat {
            self.leader_beat = (term, msg.beat);
        }
        let mut reject = false;
        let mut need_snapshot = false;
        let replicates = msg.replicates();
        // The last index known to match the leader's log.
        let mut verified = if self.holds(msg.position) {
            msg.position.index
        } else {
            0
        };
        if let Some(snapshot) = msg.snapshot {
            let snapshot = *snapshot;
            if self.holds(snapshot.position) {
                // A late copy of a state we already have (and have built on): installing
                // it would take back entries this beacon acknowledged.
                verified = verified.max(snapshot.position.index);
            } else {
                verified = snapshot.position.index;
                out.push(Output::Notice(format!(
                    "installed a snapshot from leader {from} at {}",
                    snapshot.position
                )));
                self.install(snapshot, now);
            }
        }
        if let Some(append) = &msg.append {
            if !self.holds(append.prev) {
                reject = true;
            } else {
                verified = verified.max(append.prev.index);
                for entry in &append.entries {
                    if self.holds(entry.position()) {
                        verified = verified.max(entry.index); // already have it
                        continue;
                    }
                    match self.log.term_at(entry.index) {
                        Some(_) => {
                            // We hold different entries past `prev`: our state diverged and
                            // cannot be rolled back entry by entry.
                            need_snapshot = true;
                            break;
                        }
                        None if entry.index != self.log.last().index + 1 => {
                            reject = true;
                            break;
                        }
                        None => {}
                    }
                    if let Err(e) = self.state.apply(&entry.command, now) {
                        out.push(Output::Notice(format!(
                            "entry {} from leader {from} does not fit this beacon's state ({e}): asking for a snapshot",
                            entry.position()
                        )));
                        need_snapshot = true;
                        break;
                    }
                    self.unsaved.push(entry.clone());
                    self.log.append(entry.clone());
                    verified = verified.max(entry.index);
                }
            }
        }
        self.commit = self.commit.max(msg.commit.min(verified));
        if replicates || new_beat {
            let mut ack = self.bare_message();
            ack.reject = reject;
            ack.need_snapshot = need_snapshot;
            out.push(Output::Send { to: from, msg: ack });
        }
    }
}

#[cfg(test)]
mod tests;
