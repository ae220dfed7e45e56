//! The driver task: owns the sans-IO [`Election`], feeds it time, ticks and network events,
//! and carries out its actions (heartbeats to peer links, term persistence, logs).
//!
//! Everything that touches election state goes through this one task's channel, so the
//! state needs no lock and events are applied in the order they arrived.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::data_dir::DataDir;
use crate::election::{Action, Election, Heartbeat, Input};
use crate::pb;

/// Identifies one connection with a peer (either direction).
pub(crate) type ConnId = u64;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id.
pub(crate) fn next_conn_id() -> ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

pub(crate) enum Event {
    Heartbeat { from: SocketAddr, hb: pb::Election },
    PeerConnected { peer: SocketAddr, conn: ConnId },
    PeerDisconnected { peer: SocketAddr, conn: ConnId },
    Status(oneshot::Sender<pb::BeaconStatus>),
}

/// Cheap handle for talking to the driver task.
#[derive(Clone)]
pub(crate) struct DriverHandle {
    tx: mpsc::Sender<Event>,
}

impl DriverHandle {
    pub(crate) async fn heartbeat(&self, from: SocketAddr, hb: pb::Election) {
        let _ = self.tx.send(Event::Heartbeat { from, hb }).await;
    }

    pub(crate) async fn peer_connected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerConnected { peer, conn }).await;
    }

    pub(crate) async fn peer_disconnected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerDisconnected { peer, conn }).await;
    }

    /// `None` once the driver has stopped (shutdown).
    pub(crate) async fn status(&self) -> Option<pb::BeaconStatus> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Event::Status(tx)).await.ok()?;
        rx.await.ok()
    }
}

pub(crate) fn heartbeat_to_pb(hb: Heartbeat) -> pb::Election {
    pb::Election {
        is_leader: i32::from(hb.is_leader),
        term: hb.term,
        ..Default::default()
    }
}

fn heartbeat_from_pb(hb: &pb::Election) -> Heartbeat {
    Heartbeat {
        is_leader: hb.is_leader != 0,
        term: hb.term,
    }
}

pub(crate) struct Driver {
    config: Arc<Config>,
    election: Election,
    data_dir: DataDir,
    stored_term: u64,
    /// Outgoing heartbeat queues, one per peer link.
    links: Vec<(SocketAddr, mpsc::Sender<pb::Election>)>,
    /// The latest heartbeat, read by handshakes.
    current: watch::Sender<pb::Election>,
    /// Open connections with each peer, both directions. A peer is reported down when its
    /// last one closes: either direction carries its state (inbound its heartbeats, outbound
    /// its handshake answer), and a stale connection closing while a newer one is open means
    /// nothing.
    conns: HashMap<SocketAddr, BTreeSet<ConnId>>,
    started: Instant,
    rx: mpsc::Receiver<Event>,
}

impl Driver {
    /// Creates the driver and its handle. The election resumes from the stored term.
    pub(crate) fn new(
        config: Arc<Config>,
        data_dir: DataDir,
        stored_term: u64,
        links: Vec<(SocketAddr, mpsc::Sender<pb::Election>)>,
    ) -> (Driver, DriverHandle, watch::Receiver<pb::Election>) {
        let election =
            Election::with_term(config.node, config.beacons.iter().copied(), stored_term);
        let (current, current_rx) = watch::channel(heartbeat_to_pb(election.heartbeat()));
        let (tx, rx) = mpsc::channel(1024);
        let driver = Driver {
            config,
            election,
            data_dir,
            stored_term,
            links,
            current,
            conns: HashMap::new(),
            started: Instant::now(),
            rx,
        };
        (driver, DriverHandle { tx }, current_rx)
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        if self.election.is_leader() {
            info!(term = self.election.term(), "configured alone: leading");
        }
        // A term taken at construction (a lone beacon leads at once) is stored before anyone
        // can hear it.
        self.persist_term();
        let period = Duration::from_millis(self.config.tick_ms);
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => {
                    let now = self.now();
                    let actions = self.election.tick(now);
                    self.apply(actions);
                }
                event = self.rx.recv() => match event {
                    Some(event) => self.handle(event),
                    None => break,
                },
            }
        }
        debug!("driver stopped");
    }

    fn handle(&mut self, event: Event) {
        let now = self.now();
        match event {
            Event::Heartbeat { from, hb } => {
                let input = Input::Heartbeat {
                    from,
                    hb: heartbeat_from_pb(&hb),
                };
                match self.election.step(now, input) {
                    Ok(actions) => self.apply(actions),
                    Err(e) => warn!(peer = %from, "heartbeat ignored: {e}"),
                }
            }
            Event::PeerConnected { peer, conn } => {
                self.conns.entry(peer).or_default().insert(conn);
            }
            Event::PeerDisconnected { peer, conn } => {
                let open = self.conns.entry(peer).or_default();
                if open.remove(&conn) && open.is_empty() {
                    info!(%peer, "last connection with peer closed: re-checking the leader now");
                    let actions = self
                        .election
                        .step(now, Input::PeerDown { peer })
                        .expect("peer down never fails");
                    self.apply(actions);
                }
            }
            Event::Status(reply) => {
                let _ = reply.send(self.status(now));
            }
        }
    }

    /// Stores a new term before any heartbeat can announce it.
    fn persist_term(&mut self) {
        let term = self.election.max_seen_term();
        if term == self.stored_term {
            return;
        }
        match self.data_dir.store_term(term) {
            Ok(()) => self.stored_term = term,
            // The beacon keeps serving; the next change retries. A restart may then resume
            // from an older term, which the cluster corrects as soon as it hears its peers.
            Err(e) => error!("cannot store term {term}: {e}"),
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        self.persist_term();
        for action in actions {
            match action {
                Action::Broadcast(hb) => {
                    let msg = heartbeat_to_pb(hb);
                    self.current.send_replace(msg.clone());
                    for (peer, link) in &self.links {
                        if link.try_send(msg.clone()).is_err() {
                            debug!(%peer, "heartbeat dropped: link busy or down");
                        }
                    }
                }
                Action::LeaderChanged { leader, term } => match leader {
                    Some(l) if l == self.config.node => {
                        info!(term, "this beacon is now the leader")
                    }
                    Some(l) => info!(leader = %l, term, "following leader"),
                    None => warn!(
                        term,
                        "no leader online; waiting for the first online beacon to take over"
                    ),
                },
            }
        }
    }

    fn status(&self, now: u64) -> pb::BeaconStatus {
        pb::BeaconStatus {
            node: self.config.node.to_string(),
            cluster: self.config.cluster.clone(),
            term: self.election.term(),
            leader: self.election.leader().map(|l| l.to_string()),
            tick_ms: self.config.tick_ms,
            uptime_ms: now,
            beacons: self
                .election
                .view(now)
                .into_iter()
                .map(|v| pb::BeaconEntry {
                    node: v.node.to_string(),
                    is_leader: v.is_leader,
                    is_online: v.is_online,
                    term: v.term,
                    last_seen_ms: v.last_seen_ms,
                    is_self: v.is_self,
                })
                .collect(),
        }
    }
}
