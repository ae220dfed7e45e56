//! The driver task: owns the sans-IO [`Coordinator`], feeds it time, ticks, peer messages and
//! service requests, and carries out its outputs (messages to peer links, replies to waiting
//! requests, notices to watchers, term persistence, logs).
//!
//! Everything that touches the replicated state goes through this one task's channel, so the
//! state needs no lock and events are applied in the order they arrived.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::load::Loaded;
use crate::config::Config;
use crate::coordinator::{
    Coordinator, Input, NodeFilter, Output, Request, RequestError, Response, Token,
};
use crate::data_dir::DataDir;
use crate::pb;
use crate::registry::Change;
use crate::replication::{Entry, PeerMessage, Snapshot};
use crate::storage::Storage;
use crate::wire::convert::{message_to_pb, record_to_pb};

/// Identifies one connection with a peer (either direction).
pub(crate) type ConnId = u64;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id.
pub(crate) fn next_conn_id() -> ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// A message to a peer, stamped with the driver round that sent it. A link that comes up
/// greets its peer with the state of some round (see [`Driver::current`]) and then drops
/// what was queued in that round or before: the greeting already said it.
pub(crate) type Outgoing = (u64, pb::Election);

/// Notices queued per watcher; a watcher that falls this far behind is dropped (it resyncs).
const WATCH_QUEUE: usize = 4096;
/// Most events handled before their log changes are stored together (one fsync).
const BATCH: usize = 256;

pub(crate) type RequestReply = oneshot::Sender<Result<Response, RequestError>>;
/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A watch's initial state and the stream of notices that follows it.
pub(crate) type WatchStart = (pb::WatchReply, mpsc::Receiver<pb::NodeNotice>);

pub(crate) enum Event {
    Peer {
        from: SocketAddr,
        msg: PeerMessage,
        greeting: bool,
    },
    PeerConnected {
        peer: SocketAddr,
        conn: ConnId,
    },
    PeerDisconnected {
        peer: SocketAddr,
        conn: ConnId,
    },
    Status(oneshot::Sender<pb::BeaconStatus>),
    Request {
        request: Request,
        reply: RequestReply,
    },
    Nodes {
        filter: NodeFilter,
        reply: oneshot::Sender<pb::NodesReply>,
    },
    Ids(oneshot::Sender<pb::IdsReply>),
    Watch {
        types: BTreeSet<String>,
        reply: oneshot::Sender<Result<WatchStart, RequestError>>,
    },
}

/// Cheap handle for talking to the driver task. Every call returns `None` once the driver
/// has stopped (shutdown).
#[derive(Clone)]
pub(crate) struct DriverHandle {
    tx: mpsc::Sender<Event>,
}

impl DriverHandle {
    pub(crate) async fn peer_message(&self, from: SocketAddr, msg: PeerMessage) {
        let _ = self
            .tx
            .send(Event::Peer {
                from,
                msg,
                greeting: false,
            })
            .await;
    }

    /// A peer's state from its answer to our handshake (see [`Input::Greeting`]).
    pub(crate) async fn peer_greeting(&self, from: SocketAddr, msg: PeerMessage) {
        let _ = self
            .tx
            .send(Event::Peer {
                from,
                msg,
                greeting: true,
            })
            .await;
    }

    pub(crate) async fn peer_connected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerConnected { peer, conn }).await;
    }

    pub(crate) async fn peer_disconnected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerDisconnected { peer, conn }).await;
    }

    async fn ask<T>(&self, event: impl FnOnce(oneshot::Sender<T>) -> Event) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(event(tx)).await.ok()?;
        rx.await.ok()
    }

    pub(crate) async fn status(&self) -> Option<pb::BeaconStatus> {
        self.ask(Event::Status).await
    }

    /// Submits a write or a report; the answer comes once it is committed.
    pub(crate) async fn request(&self, request: Request) -> Option<Result<Response, RequestError>> {
        self.ask(|reply| Event::Request { request, reply }).await
    }

    pub(crate) async fn nodes(&self, filter: NodeFilter) -> Option<pb::NodesReply> {
        self.ask(|reply| Event::Nodes { filter, reply }).await
    }

    pub(crate) async fn ids(&self) -> Option<pb::IdsReply> {
        self.ask(Event::Ids).await
    }

    pub(crate) async fn watch(
        &self,
        types: BTreeSet<String>,
    ) -> Option<Result<WatchStart, RequestError>> {
        self.ask(|reply| Event::Watch { types, reply }).await
    }
}

/// A connection following changes (leader only).
struct Watcher {
    /// Types followed; empty follows all.
    types: BTreeSet<String>,
    /// The log position its initial set reflects: changes up to it are not sent.
    from: u64,
    tx: mpsc::Sender<pb::NodeNotice>,
}

impl Watcher {
    fn follows(&self, node_type: &str) -> bool {
        self.types.is_empty() || self.types.contains(node_type)
    }
}

pub(crate) struct Driver {
    config: Arc<Config>,
    core: Coordinator,
    data_dir: DataDir,
    storage: Storage,
    stored_term: u64,
    /// Outputs of the events handled in this batch, carried out once their log changes are
    /// stored.
    pending: Vec<Output>,
    /// Set when storing failed: the beacon stops, since it can no longer keep its promises.
    failed: Option<String>,
    /// Outgoing message queues, one per peer link.
    links: HashMap<SocketAddr, mpsc::Sender<Outgoing>>,
    /// The latest bare heartbeat, read by handshakes, with the round it is as of. It is
    /// replaced at the end of each round, once the round's log changes are stored: a
    /// greeting never claims entries that are not on disk yet.
    current: watch::Sender<Outgoing>,
    /// Rounds carried out so far.
    round: u64,
    /// Open connections with each peer, both directions. A peer is reported down when its
    /// last one closes: either direction carries its state (inbound its heartbeats, outbound
    /// its handshake answer), and a stale connection closing while a newer one is open means
    /// nothing.
    conns: HashMap<SocketAddr, BTreeSet<ConnId>>,
    /// Requests waiting for their entry to commit.
    waiting: HashMap<Token, RequestReply>,
    next_token: Token,
    watchers: Vec<Watcher>,
    started: Instant,
    rx: mpsc::Receiver<Event>,
}

impl Driver {
    /// Creates the driver and its handle, around the state loaded at start.
    pub(crate) fn new(
        config: Arc<Config>,
        loaded: Loaded,
        links: HashMap<SocketAddr, mpsc::Sender<Outgoing>>,
    ) -> (Driver, DriverHandle, watch::Receiver<Outgoing>) {
        let Loaded {
            data_dir,
            stored_term,
            storage,
            core,
            ..
        } = loaded;
        let (current, current_rx) = watch::channel((0, message_to_pb(&core.greeting())));
        let (tx, rx) = mpsc::channel(4096);
        let driver = Driver {
            config,
            core,
            data_dir,
            storage,
            stored_term,
            pending: Vec::new(),
            failed: None,
            links,
            current,
            round: 0,
            conns: HashMap::new(),
            waiting: HashMap::new(),
            next_token: 1,
            watchers: Vec::new(),
            started: Instant::now(),
            rx,
        };
        (driver, DriverHandle { tx }, current_rx)
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        if self.core.is_leader() {
            info!(
                term = self.core.election().term(),
                "configured alone: leading"
            );
        }
        // A term taken at construction (a lone beacon leads at once) is stored before anyone
        // can hear it.
        if let Err(why) = self.persist_term() {
            error!("stopping: {why}");
            shutdown.cancel();
            return;
        }
        let period = Duration::from_millis(self.config.tick_ms);
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // The core may want a step before the next event (a confirmation round due).
            let wake = self
                .core
                .wake_at()
                .map(|at| self.started + Duration::from_millis(at));
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => self.step(Input::Tick),
                _ = sleep_until_some(wake) => self.step(Input::Wake),
                event = self.rx.recv() => match event {
                    Some(event) => {
                        self.handle(event);
                        // Whatever else is queued joins this batch: one fsync for all.
                        for _ in 1..BATCH {
                            match self.rx.try_recv() {
                                Ok(event) => self.handle(event),
                                Err(_) => break,
                            }
                        }
                    }
                    None => break,
                },
            }
            self.carry_out();
            if let Some(why) = self.failed.take() {
                error!("stopping: {why}");
                shutdown.cancel();
                break;
            }
        }
        debug!("driver stopped");
    }

    fn handle(&mut self, event: Event) {
        let now = self.now();
        match event {
            Event::Peer {
                from,
                msg,
                greeting,
            } => self.step(if greeting {
                Input::Greeting { from, msg }
            } else {
                Input::Peer { from, msg }
            }),
            Event::PeerConnected { peer, conn } => {
                self.conns.entry(peer).or_default().insert(conn);
            }
            Event::PeerDisconnected { peer, conn } => {
                let open = self.conns.entry(peer).or_default();
                if open.remove(&conn) && open.is_empty() {
                    info!(%peer, "last connection with peer closed: re-checking the leader now");
                    self.step(Input::PeerDown { peer });
                }
            }
            Event::Status(reply) => {
                let _ = reply.send(self.status(now));
            }
            Event::Request { request, reply } => {
                let token = self.next_token;
                self.next_token += 1;
                self.waiting.insert(token, reply);
                self.step(Input::Request { token, request });
            }
            Event::Nodes { filter, reply } => {
                let _ = reply.send(self.nodes(now, &filter));
            }
            Event::Ids(reply) => {
                let _ = reply.send(self.ids());
            }
            Event::Watch { types, reply } => {
                let _ = reply.send(self.watch(types));
            }
        }
    }

    /// Feeds one input to the core; its outputs wait for [`Driver::carry_out`].
    fn step(&mut self, input: Input) {
        let now = self.now();

        let outputs = self.core.step(now, input);
        self.pending.extend(outputs);
    }

    /// Stores the batch's log changes, then carries out its outputs: nothing that depends on
    /// an entry (an acknowledgement to the leader, a reply to a service) leaves this beacon
    /// before the entry is on disk.
    fn carry_out(&mut self) {
        self.round += 1;
        // A new term is stored before any message can announce it.
        if let Err(why) = self.persist_term() {
            self.failed = Some(why);
            return;
        }
        let outputs = std::mem::take(&mut self.pending);
        let mut snapshot: Option<Snapshot> = None;
        let mut entries: Vec<Entry> = Vec::new();
        for output in &outputs {
            if let Output::Persist {
                snapshot: s,
                entries: e,
            } = output
            {
                if let Some(s) = s {
                    snapshot = Some(s.clone());
                    entries.clear();
                }
                entries.extend(e.iter().cloned());
            }
        }
        // A leader's entries go to its followers while it stores them itself: they count
        // towards a commit only once acknowledged, and the leader's own acknowledgement (a
        // reply) waits below. A follower's messages are acknowledgements and wait.
        let mut rest = Vec::with_capacity(outputs.len());
        for output in outputs {
            match output {
                Output::Send { to, msg } if msg.heartbeat.is_leader => self.send(to, &msg),
                other => rest.push(other),
            }
        }
        if let Err(e) = self.store(snapshot.as_ref(), &entries) {
            self.failed = Some(format!("cannot store the replicated state: {e}"));
            return;
        }
        for output in rest {
            match output {
                Output::Persist { .. } => {}
                Output::Send { to, msg } => self.send(to, &msg),
                Output::Reply { token, result } => {
                    if let Some(reply) = self.waiting.remove(&token) {
                        let _ = reply.send(result);
                    }
                }
                Output::Committed(changes) => self.publish(changes),
                Output::LeaderChanged { leader, term } => self.leader_changed(leader, term),
                Output::Notice(msg) => info!("{msg}"),
            }
        }
        if !self.core.is_leader() && !self.watchers.is_empty() {
            // Closing their channels tells each watcher to follow the new leader.
            info!(
                watchers = self.watchers.len(),
                "no longer leading: watchers must resubscribe with the leader"
            );
            self.watchers.clear();
        }
        self.current
            .send_replace((self.round, message_to_pb(&self.core.greeting())));
    }

    fn store(
        &mut self,
        snapshot: Option<&Snapshot>,
        entries: &[Entry],
    ) -> Result<(), crate::storage::StorageError> {
        if let Some(s) = snapshot {
            self.storage.install(s)?;
        }
        self.storage.append(entries)?;
        if self.storage.logged() > self.core.entries_to_keep() {
            // Compact: the current state replaces the log.
            let now = self.now();
            self.storage.install(&self.core.snapshot(now))?;
            debug!(position = %self.core.position(), "stored state compacted into a snapshot");
        }
        Ok(())
    }

    fn send(&self, to: SocketAddr, msg: &PeerMessage) {
        let Some(link) = self.links.get(&to) else {
            return;
        };
        if link.try_send((self.round, message_to_pb(msg))).is_err() {
            // The leader resends what was lost on its next tick.
            debug!(peer = %to, "message dropped: link busy or down");
        }
    }

    fn leader_changed(&self, leader: Option<SocketAddr>, term: u64) {
        match leader {
            Some(l) if l == self.config.node => info!(term, "this beacon is now the leader"),
            Some(l) => info!(leader = %l, term, "following leader"),
            None => warn!(
                term,
                "no leader online; waiting for the first online beacon to take over"
            ),
        }
    }

    /// Sends each committed change once to every watcher that follows its type.
    fn publish(&mut self, changes: Vec<(u64, Change)>) {
        for (index, change) in changes {
            let mut notice = pb::NodeNotice {
                index,
                ..Default::default()
            };
            let info = record_to_pb(change.record());
            match &change {
                Change::Added(_) => notice.add_nodes.push(info),
                Change::Updated(_) => notice.update_nodes.push(info),
                Change::Removed(_) => notice.del_nodes.push(info),
            }
            let node_type = &change.record().node_type;
            self.watchers.retain(|w| {
                if index <= w.from || !w.follows(node_type) {
                    return !w.tx.is_closed();
                }
                match w.tx.try_send(notice.clone()) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        warn!("a watcher fell {WATCH_QUEUE} notices behind: dropped (it resyncs)");
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            });
        }
    }

    /// Starts a watch: the current nodes of `types` as of the last log position, then every
    /// change after it. Changes up to that position are already in the initial set, so none
    /// is told twice.
    fn watch(&mut self, types: BTreeSet<String>) -> Result<WatchStart, RequestError> {
        if !self.core.is_leader() {
            return Err(RequestError::NotLeader {
                leader: self.core.election().leader(),
            });
        }
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        // Changes are published when committed, in log order; the initial set reflects every
        // entry applied so far, so this watcher skips changes up to the last position.
        let from = self.core.position().index;
        let watcher = Watcher { types, from, tx };
        let nodes = self
            .core
            .registry()
            .nodes()
            .filter(|r| watcher.follows(&r.node_type))
            .map(record_to_pb)
            .collect();
        self.watchers.push(watcher);
        Ok((pb::WatchReply { index: from, nodes }, rx))
    }

    /// Stores a new term before any heartbeat can announce it.
    ///
    /// A beacon that cannot store its term stops: its heartbeats promise to ignore older
    /// terms, and a promise forgotten across a restart could let an old leader's write in.
    fn persist_term(&mut self) -> Result<(), String> {
        let term = self.core.election().max_seen_term();
        if term == self.stored_term {
            return Ok(());
        }
        self.data_dir
            .store_term(term)
            .map_err(|e| format!("cannot store term {term}: {e}"))?;
        self.stored_term = term;
        Ok(())
    }

    fn status(&self, now: u64) -> pb::BeaconStatus {
        let election = self.core.election();
        let stored: BTreeMap<SocketAddr, Option<u64>> = self
            .core
            .follower_progress()
            .into_iter()
            .map(|f| (f.peer, f.matched))
            .collect();
        let position = self.core.position();
        pb::BeaconStatus {
            node: self.config.node.to_string(),
            cluster: self.config.cluster.clone(),
            term: election.term(),
            leader: election.leader().map(|l| l.to_string()),
            tick_ms: self.config.tick_ms,
            uptime_ms: now,
            beacons: election
                .view(now)
                .into_iter()
                .map(|v| pb::BeaconEntry {
                    node: v.node.to_string(),
                    is_leader: v.is_leader,
                    is_online: v.is_online,
                    term: v.term,
                    last_seen_ms: v.last_seen_ms,
                    is_self: v.is_self,
                    stored: if v.is_self {
                        Some(position.index)
                    } else {
                        stored.get(&v.node).copied().flatten()
                    },
                    follows: v.follows.map(|f| f.to_string()),
                })
                .collect(),
            mode: self.core.mode().to_string(),
            commit: self.core.commit(),
            index: position.index,
            log_term: position.term,
            stale: self.core.staleness(),
        }
    }

    fn nodes(&self, now: u64, filter: &NodeFilter) -> pb::NodesReply {
        pb::NodesReply {
            node: self.config.node.to_string(),
            is_leader: self.core.is_leader(),
            index: self.core.position().index,
            nodes: self
                .core
                .nodes(now, filter)
                .into_iter()
                .map(|v| {
                    let (report, workers) = match v.report {
                        Some((node, workers)) => (Some(node), workers),
                        None => (None, Vec::new()),
                    };
                    pb::NodeEntry {
                        node: Some(record_to_pb(&v.record)),
                        is_online: v.is_online,
                        last_seen_ms: v.last_seen_ms,
                        report,
                        workers,
                        quarantine_ms: v.quarantine_ms,
                    }
                })
                .collect(),
            stale: self.core.staleness(),
        }
    }

    fn ids(&self) -> pb::IdsReply {
        let registry = self.core.registry();
        let range = registry.range();
        let mut quarantined: Vec<u32> = registry.quarantined().map(|t| t.record.node_id).collect();
        quarantined.sort_unstable();
        pb::IdsReply {
            first: range.first,
            last: range.last,
            last_node_id: registry.last_node_id(),
            in_use: registry.len() as u32,
            quarantined,
            index: self.core.position().index,
            stale: self.core.staleness(),
        }
    }
}
