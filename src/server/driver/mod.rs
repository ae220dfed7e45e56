//! The driver: steps the sans-IO [`Replica`] on a thread of its own ([`Driver::spawn_core`])
//! and owns its [`Storage`], feeds the replica time,
//! ticks, peer messages and requests, and carries out what each batch of steps is
//! [`Ready`](crate::consensus::Ready) for, in the order its receipts allow: the term stored,
//! then a leader's messages, then the log stored, then everything else.
//!
//! Everything that changes the replicated state goes through this one task, on one of three
//! channels (peers' traffic, `peers.rs`; and request handlers' asks, `handle.rs`,
//! in two classes: what keeps things going, renewals and status, and new work), taken by
//! turns, each in the order it arrived, what keeps things going before new work. Reads do not: the replica sits in a
//! [`View`], which the driver write-locks only while it steps, and a read runs on the task
//! that asked, its answer waiting for what the driver releases after each carry-out.

mod handle;
mod peers;
mod store;
mod waiting;

pub(crate) use handle::{Ask, AskSenders, Asked, DriverHandle};
use peers::PeerEvent;
pub(crate) use peers::{Body, ConnId, Greeting, Outgoing, PeerHandle, next_conn_id};
use store::Storing;
use waiting::Waiting;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLockReadGuard;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::history::History;
use super::load::Loaded;
use super::metrics::Metrics;
use crate::config::Config;
use crate::consensus::{self, InputOf, Message, Ready, Reply, Token};
use crate::data_dir::DataDir;
use crate::machines::handle::{Committed, StartPoint, Subscriber, Subscription};
use crate::machines::view::{CLOCK_ORIGIN_MS, View};
use crate::machines::{Change, Replica, Services, State};
use crate::pb;
use crate::storage::{self, Storage, carry_out_early, carry_out_stored};
use crate::time::Millis;
use crate::wire::envelope::{
    message_annotation, message_bytes, message_bytes_annotated, message_to_pb,
};

type Input = InputOf<State, Services>;

type MembersChanged = Result<consensus::Changed, consensus::ChangeError>;

/// Starts a link task to a peer and returns its queue.
pub(crate) type LinkOpener = Box<dyn Fn(SocketAddr) -> mpsc::Sender<Outgoing> + Send>;

/// Most events handled before their log changes are stored together (one fsync).
const BATCH: usize = 256;

/// Asks that keep things going (renewals, status) taken for each ask of new work while
/// both are queued.
const KEEPS_PER_ROUND: usize = 8;

pub(crate) struct Driver {
    config: Arc<Config>,
    /// Held for its lock: no other process opens this beacon's state while it runs.
    _data_dir: DataDir,
    /// The replica, stepped here and read by the connections' tasks too.
    view: Arc<View>,
    /// The log's storage: away on the log's thread while a store is under way.
    storage: Option<Storage<State>>,
    /// The log's thread ([`store`]), started with the driver.
    writer: Option<store::Writer>,
    /// The store under way, if any.
    storing: Option<Storing>,
    /// Batches whose early half is done, waiting for the store under way to finish.
    queued: Option<storage::Early<State, Services>>,
    /// The stored log holds more than it keeps: the next batch is carried out whole, and
    /// the log compacted with it.
    compact_due: bool,
    /// What the steps of this batch ask for, carried out once it is stored.
    pending: Ready<State, Services>,
    /// Set when storing failed: the beacon stops, since it can no longer keep its promises.
    failed: Option<String>,
    /// Outgoing message queues, one per peer link: one per beacon of the membership (and
    /// beacons a change not yet committed removed), opened and closed as it changes.
    links: HashMap<SocketAddr, mpsc::Sender<Outgoing>>,
    /// Opens the link to a peer that joined (set by the server once its shared state
    /// exists; until then the links are the configured ones).
    open_link: Option<LinkOpener>,
    /// The latest bare heartbeat, read by handshakes, with the round it is as of. It is
    /// replaced at the end of each round, once the round's log changes are stored: a
    /// greeting never claims entries that are not on disk yet.
    current: watch::Sender<Greeting>,
    /// The leader this beacon knows (itself included), changed as the election says: what
    /// the relays to the leader follow (see [`DriverHandle::leader_changes`]).
    leader: watch::Sender<Option<SocketAddr>>,
    /// Whether a write sent here now would succeed, told on each change after the turn that
    /// made it: what gRPC health follows without polling the core.
    writable: watch::Sender<bool>,
    /// Rounds carried out so far.
    round: u64,
    /// Open connections with each peer, both directions. A peer is reported down when its
    /// last one closes: either direction carries its state (inbound its heartbeats, outbound
    /// its handshake answer), and a stale connection closing while a newer one is open means
    /// nothing.
    conns: HashMap<SocketAddr, BTreeSet<ConnId>>,
    /// Requests waiting for their answer.
    waiting: Waiting,
    /// Leader transfers waiting for their answer.
    transfers: HashMap<Token, oneshot::Sender<Result<SocketAddr, consensus::TransferError>>>,
    /// Changes of membership waiting for their answer.
    member_changes: HashMap<Token, oneshot::Sender<MembersChanged>>,
    /// Reads waiting for their point in the log (a confirmation round), with when each
    /// was asked.
    reads: HashMap<
        Token,
        (
            std::time::Instant,
            oneshot::Sender<Result<u64, consensus::ConsensusError>>,
        ),
    >,
    next_token: Token,
    /// Followers of committed changes (leader only).
    subscribers: Vec<Subscriber>,
    /// Cancelled once this beacon is shutting down.
    shutdown: CancellationToken,
    /// Subscriptions that arrived in the batch being handled, started after its carry-out.
    subscribing: Vec<Subscription>,
    /// The committed changes kept for watches that resume from a log index.
    history: History<Change>,
    /// Subscriptions whose first answer waits for this log index to commit (leader only).
    commit_waiters: Vec<(u64, oneshot::Sender<()>)>,
    /// What request handlers ask.
    asks: mpsc::Receiver<Asked>,
    /// What keeps things going (renewals, reads' points in the log, status), taken before
    /// `asks`: overload of new work delays no renewal.
    keeps: mpsc::Receiver<Asked>,
    /// What peers' links tell.
    peers: mpsc::Receiver<PeerEvent>,
    metrics: Arc<Metrics>,
    /// Commit index and log position as of the last metrics update, for the counters.
    counted: (u64, u64),
    /// Leader: per follower, the last entry sent while none was outstanding, and when; its
    /// acknowledgement times the replication round trip.
    in_flight: HashMap<SocketAddr, (u64, Instant)>,
    /// Each follower's replication round-trip histogram, looked up once: finding it in the
    /// metric family by its label would format the address on every acknowledgement.
    rtt: HashMap<SocketAddr, prometheus_client::metrics::histogram::Histogram>,
    /// When the core last stepped: the beat counts the gaps.
    last_step: Option<std::time::Instant>,
    /// Asks handled in this turn of the loop, and when the first was taken: admission
    /// learns what one costs the core.
    turn: Option<(usize, std::time::Instant)>,
}

impl Driver {
    /// Creates the driver and its handle, around the state loaded at start; `gate` is what
    /// a write of new work passes before it joins the core's queue (admission's).
    pub(crate) fn new(
        config: Arc<Config>,
        loaded: Loaded,
        links: HashMap<SocketAddr, mpsc::Sender<Outgoing>>,
        metrics: Arc<Metrics>,
        gate: crate::server::admission::Gate,
    ) -> (Driver, DriverHandle, PeerHandle, watch::Receiver<Greeting>) {
        let Loaded {
            data_dir,
            storage,
            core,
            ..
        } = loaded;
        let greeting = message_to_pb::<State>(&core.greeting());
        let counted = (core.commit(), core.position().index);
        let history = History::new(
            config.watch.history,
            config.watch.history_bytes,
            <State as consensus::Machine>::change_bytes,
            // Entries applied at start were never told; those left for the leader to
            // confirm are told as they apply.
            core.applied().index,
        );
        let (current, current_rx) = watch::channel(Greeting {
            round: 0,
            election: greeting,
        });
        let (leader, leader_rx) = watch::channel(core.election().leader());
        let (writable, writable_rx) = watch::channel(core.cannot_write().is_none());
        let (ask, asks) = mpsc::channel(4096);
        let (keep, keeps) = mpsc::channel(4096);
        let (tell, peers) = mpsc::channel(4096);
        let view = View::new(core, config.ip_allow.clone());
        let driver = Driver {
            config,
            _data_dir: data_dir,
            view: view.clone(),
            storage: Some(storage),
            writer: None,
            storing: None,
            queued: None,
            compact_due: false,
            pending: Ready::default(),
            failed: None,
            links,
            open_link: None,
            current,
            leader,
            writable,
            round: 0,
            conns: HashMap::new(),
            waiting: Waiting::default(),
            transfers: HashMap::new(),
            member_changes: HashMap::new(),
            reads: HashMap::new(),
            next_token: 1,
            subscribers: Vec::new(),
            shutdown: CancellationToken::new(),
            subscribing: Vec::new(),
            history,
            commit_waiters: Vec::new(),
            asks,
            keeps,
            peers,
            counted,
            metrics,
            in_flight: HashMap::new(),
            rtt: HashMap::new(),
            last_step: None,
            turn: None,
        };
        let watchers = driver.metrics.watchers.clone();
        let peer_handle = PeerHandle::new(tell, view.clone());
        (
            driver,
            DriverHandle::new(
                AskSenders { keep, new: ask },
                gate,
                view,
                watchers,
                leader_rx,
                writable_rx,
            ),
            peer_handle,
            current_rx,
        )
    }

    fn now(&self) -> Millis {
        self.view.now()
    }

    /// Sets how links to peers that join are opened.
    pub(crate) fn open_links_with(&mut self, opener: LinkOpener) {
        self.open_link = Some(opener);
    }

    /// Opens a link to each peer of the membership that has none, and closes those of
    /// beacons no longer in it (their task ends once its queue is dropped).
    fn sync_links(&mut self, core: &Replica) {
        let Some(open) = &self.open_link else {
            return;
        };
        let election = core.election();
        // Unchanged (nearly every batch): nothing to allocate.
        if election.peers().count() == self.links.len()
            && election.peers().all(|p| self.links.contains_key(&p))
        {
            return;
        }
        let peers: BTreeSet<SocketAddr> = election.peers().collect();
        self.links.retain(|peer, _| {
            let keep = peers.contains(peer);
            if !keep {
                info!(%peer, "beacon left the membership: closing its link");
            }
            keep
        });
        for peer in peers {
            if let std::collections::hash_map::Entry::Vacant(link) = self.links.entry(peer) {
                info!(%peer, "beacon joined the membership: opening a link");
                link.insert(open(peer));
            }
        }
    }

    /// The replica, to read (never held across a step).
    fn core(&self) -> RwLockReadGuard<'_, Replica> {
        self.view.read()
    }

    /// Runs the driver on a thread of its own, with a runtime of its own for its timers
    /// and channels, until `shutdown`: stepping, storing and carrying out wait for no
    /// connection, listing page, TLS handshake or gRPC call, whatever the edges' tasks are
    /// doing on theirs. What it hands the edges and takes from them goes through its bounded
    /// channels. `tracker` waits for it to end. Returns the handle of its runtime, where
    /// the links to peers write.
    pub(crate) fn spawn_core(
        self,
        shutdown: CancellationToken,
        tracker: &tokio_util::task::TaskTracker,
    ) -> std::io::Result<tokio::runtime::Handle> {
        use tracing::Instrument;
        let span = tracing::Span::current();
        let (ended, core_ended) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("beacon-core".into())
            .spawn(move || {
                runtime.block_on(self.run(shutdown).instrument(span));
                let _ = ended.send(());
            })?;
        tracker.spawn(async move {
            let _ = core_ended.await;
        });
        Ok(handle)
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        self.shutdown = shutdown.clone();
        match store::Writer::start() {
            Ok(writer) => self.writer = Some(writer),
            Err(e) => {
                error!("stopping: cannot start the log's thread: {e}");
                shutdown.cancel();
                return;
            }
        }
        let (leads, term, promise) = {
            let core = self.core();
            let election = core.election();
            // A lone voter's election names it at once; in quorum mode its core starts
            // leading at its first step.
            (
                election.leader() == Some(self.config.node),
                election.term(),
                election.promise(),
            )
        };
        if leads {
            info!(term, "configured alone: leading");
            self.metrics.leader_changes.inc();
            self.metrics.leaders.record(Some(self.config.node), term);
            // The term taken at construction (a lone beacon leads at once) is stored before
            // anyone can hear it.
            let storage = self.storage.as_mut().expect("no store under way yet");
            if let Err(e) = storage.store_term(Some(promise)) {
                error!("stopping: cannot store the term: {e}");
                shutdown.cancel();
                return;
            }
        }
        let period = Duration::from_millis(self.config.tick_ms);
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let every = Duration::from_millis(self.config.watch.progress_ms);
        let mut progress = tokio::time::interval_at(Instant::now() + every, every);
        progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // Shutdown first: a beacon on its way out must not act on the connections its
            // own shutdown closes (it would elect itself in its last moment).
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => {
                    // Heartbeats that queued while this beacon was busy (a slow fsync) or
                    // stopped count before the tick judges who is online: a late tick must
                    // not declare silent a peer whose heartbeat is already here.
                    self.handle_queued(BATCH);
                    self.step(consensus::Input::Tick {
                        wall_ms: crate::time::wall_ms(),
                    })
                }
                _ = progress.tick() => self.tell_progress(),
                // The store under way came back: what waited for it goes, and the core
                // steps what it allows (a commit of the leader's own entries).
                done = async {
                    match self.storing.as_mut() {
                        Some(storing) => (&mut storing.done).await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.store_done(done);
                    self.handle_queued(BATCH - 1);
                }
                event = self.peers.recv() => match event {
                    Some(event) => {
                        self.heard(event);
                        // Whatever else is queued joins this batch: one fsync for all.
                        self.handle_queued(BATCH - 1);
                    }
                    None => break,
                },
                ask = self.keeps.recv() => match ask {
                    Some(ask) => {
                        self.answer(ask);
                        self.handle_queued(BATCH - 1);
                    }
                    None => break,
                },
                ask = self.asks.recv() => match ask {
                    Some(ask) => {
                        self.answer(ask);
                        self.handle_queued(BATCH - 1);
                    }
                    None => break,
                },
            }
            // A beacon that must stop carries nothing out: no message of a step that
            // found its own log broken leaves it.
            if self.failed.is_none() {
                self.carry_out().await;
            }
            let can = self.core().cannot_write().is_none();
            self.writable
                .send_if_modified(|was| std::mem::replace(was, can) != can);
            // What the turn cost, by ask, and what is left queued: new work is admitted
            // by the wait it would meet (`server/admission/pace.rs`).
            let (asks, busy) = match self.turn.take() {
                Some((asks, first)) => (asks, first.elapsed()),
                None => (0, std::time::Duration::ZERO),
            };
            self.metrics
                .beat
                .turned(asks, busy, self.asks.len() + self.keeps.len());
            if let Some(why) = self.failed.take() {
                error!("stopping: {why}");
                shutdown.cancel();
                break;
            }
        }
        // A store under way finishes before the data directory's lock is let go.
        if let Some(storing) = self.storing.take() {
            let _ = storing.done.await;
        }
        self.view.stop();
        debug!("driver stopped");
    }

    /// Handles up to `most` events that are already queued, without waiting for more (none
    /// once this beacon is shutting down).
    fn handle_queued(&mut self, most: usize) {
        let mut handled = 0;
        while handled < most && !self.shutdown.is_cancelled() {
            // A peer's message and a request by turns: neither waits for the other's queue.
            let before = handled;
            if let Ok(event) = self.peers.try_recv() {
                self.heard(event);
                handled += 1;
            }
            // What keeps things going before new work: up to eight of it to one of new
            // work (new work is slowed by a flood of renewals, not starved), and a peer's
            // message each round whatever else is queued.
            let mut kept = 0;
            while handled < most
                && kept < KEEPS_PER_ROUND
                && let Ok(ask) = self.keeps.try_recv()
            {
                self.answer(ask);
                handled += 1;
                kept += 1;
            }
            if handled < most
                && let Ok(ask) = self.asks.try_recv()
            {
                self.answer(ask);
                handled += 1;
            }
            if handled == before {
                break;
            }
        }
    }

    /// Steps what a peer's link told.
    fn heard(&mut self, event: PeerEvent) {
        match event {
            PeerEvent::Peer {
                from,
                msg,
                greeting,
            } => {
                self.count_received(from, &msg);
                let msg = *msg;
                self.step(if greeting {
                    consensus::Input::Greeting { from, msg }
                } else {
                    consensus::Input::Peer { from, msg }
                });
                // A follower's reads wait for the commit index its leader tells it: release
                // it now, not after this batch's fsync. In quorum mode a leader's commit
                // index names entries a majority has stored, the leader included (it counts
                // a follower's acknowledgement only after the carry-out that sent and stored
                // the entries; the simulation checks `check_commit_durable`), so nothing can
                // take them back, whether this beacon has stored them yet or not.
                let core = self.view.read();
                if !core.is_leader() && core.mode() == consensus::Mode::Quorum {
                    self.view.release(&core);
                }
            }
            PeerEvent::PeerConnected { peer, conn } => {
                self.conns.entry(peer).or_default().insert(conn);
            }
            PeerEvent::PeerDisconnected { peer, conn } => {
                let open = self.conns.entry(peer).or_default();
                // A beacon on its way out does not act on the connections its own shutdown
                // closes: it would elect itself in its last moment.
                if open.remove(&conn) && open.is_empty() && !self.shutdown.is_cancelled() {
                    info!(%peer, "last connection with peer closed: re-checking the leader now");
                    // What was sent to it will not be acknowledged: no round trip to time.
                    self.in_flight.remove(&peer);
                    self.step(consensus::Input::PeerDown { peer });
                }
            }
        }
    }

    /// Steps what a request handler asked.
    fn answer(&mut self, Asked { at, ask }: Asked) {
        let taken = std::time::Instant::now();
        self.metrics
            .beat
            .taken(taken, taken.saturating_duration_since(at));
        self.turn.get_or_insert((0, taken)).0 += 1;
        let now = self.now();
        match ask {
            Ask::Metrics(done) => {
                self.refresh_metrics(now);
                let _ = done.send(());
            }
            Ask::Request { request, reply } => self.request(request, reply),
            // One step for the batch: the core's bookkeeping after a step (the commit, the
            // round, the followers' messages) and the merge of its outputs are paid once.
            Ask::Requests { requests, reply } => {
                let first = self.take_tokens(requests.len());
                self.waiting.batch(first, requests.len(), reply);
                let requests = (first..).zip(requests).collect();
                self.step(consensus::Input::Requests { requests });
            }
            Ask::Transfer { to, reply } => {
                let token = self.take_token();
                self.transfers.insert(token, reply);
                self.step(consensus::Input::Transfer { token, to });
            }
            Ask::ChangeMembers { change, reply } => {
                let token = self.take_token();
                self.member_changes.insert(token, reply);
                self.step(consensus::Input::ChangeMembers { token, change });
            }
            Ask::ReadIndex { asker, reply } => {
                let token = self.take_token();
                self.reads.insert(token, (at, reply));
                self.step(consensus::Input::ReadIndex { token, asker });
            }
            // Started once this batch is carried out (see `start_subscriptions`).
            Ask::Subscribe(subscription) => self.subscribing.push(subscription),
        }
    }

    /// Steps a request, its answer to go to `reply`.
    fn request(
        &mut self,
        request: crate::machines::Request,
        reply: oneshot::Sender<Reply<State, Services>>,
    ) {
        let token = self.awaiting(reply);
        self.step(consensus::Input::Request { token, request });
    }

    /// A fresh token for a request whose answer goes to `reply`.
    fn awaiting(&mut self, reply: oneshot::Sender<Reply<State, Services>>) -> Token {
        let token = self.take_token();
        self.waiting.alone(token, reply);
        token
    }

    /// A fresh token for an input whose answer the core gives back by it.
    fn take_token(&mut self) -> Token {
        self.take_tokens(1)
    }

    /// `n` fresh tokens, one run: the first of them.
    fn take_tokens(&mut self, n: usize) -> Token {
        let first = self.next_token;
        self.next_token += n as Token;
        first
    }

    /// Starts the subscriptions that arrived in the batch just carried out. Only then does
    /// the history hold every change the core released, and say so when a snapshot
    /// replaced the state: a resume started before the carry-out would replay a history
    /// that a snapshot installed in the same batch was about to break, and miss the changes
    /// the snapshot brought.
    fn start_subscriptions(&mut self) {
        let now = self.now();
        for Subscription {
            start,
            from,
            committed,
        } in std::mem::take(&mut self.subscribing)
        {
            let since = self.history.since(from);
            // A resume is handed what the history holds from its index on, to send from its
            // own task; the subscriber hears what commits later: nothing in between, since
            // both are decided here.
            let replay = match since {
                StartPoint::Replay { from, .. } => Some(self.history.replay_from(from)),
                _ => None,
            };
            let started = start(&self.core(), now, since, replay);
            let Some(subscriber) = started else {
                // Refused, or nothing to follow: no entry to wait for.
                let _ = committed.send(());
                continue;
            };
            self.subscribers.push(subscriber);
            let index = self.core().applied().index;
            self.commit_waiters.push((index, committed));
        }
        self.release_commit_waiters();
    }

    /// Feeds one input to the core; what it asks for waits for [`Driver::carry_out`].
    fn step(&mut self, input: Input) {
        let stepped = std::time::Instant::now();
        if let Some(last) = self.last_step.replace(stepped) {
            self.metrics
                .beat
                .stepped(stepped, stepped.saturating_duration_since(last));
        }
        let now = self.now();
        let (mut ready, halted) = {
            let mut core = self.view.write();
            let ready = core.step(now, input);
            (ready, core.halted().map(str::to_owned))
        };
        for event in ready.take_events() {
            self.log_event(event);
        }
        if let Some(why) = halted {
            self.failed.get_or_insert(why);
        }
        self.pending.merge(ready);
    }

    /// Carries out the batch (see [`storage::carry_out`], the one carry-out the simulation
    /// runs too): nothing that depends on an entry (an acknowledgement to the leader, a
    /// reply to a service) leaves this beacon before the entry is on disk.
    ///
    /// Most batches are stored in the background ([`store`]): their early half (a leader's
    /// entries, a round, answers that rest on what is stored) goes at once, and their
    /// entries join the store under way or the next one, while this thread steps on. The
    /// rest waits for that store. A batch that promises a new term, installs a snapshot or
    /// rewrites the log, or that comes when the stored log is due for compaction, is
    /// carried out whole once the stores under way are done, on this thread, as a
    /// [`Replica`] that has stepped nothing since is written whole. A quiet beacon's batch
    /// is stored on this thread too ([`Driver::quiet`]).
    async fn carry_out(&mut self) {
        // A store that came back in this turn may let the core commit; its step is carried
        // out in a second pass (it stores nothing itself, but may answer).
        self.take_held();
        for _ in 0..2 {
            self.round += 1;
            let beside = storage::stores_in_background(&self.pending) && !self.compact_due;
            if beside {
                self.carry_out_beside();
                let here = self.storing.is_none() && self.quiet();
                if here {
                    // Nothing else to step: stored here, as the log's thread would, the
                    // batch saves the two threads' hand-off (on a quiet beacon a lone
                    // client's write waits for it). The links write its early messages
                    // first.
                    tokio::task::yield_now().await;
                }
                self.start_store(here);
            } else {
                self.drain().await;
                if self.failed.is_some() {
                    return;
                }
                self.carry_out_whole().await;
            }
            if self.failed.is_some() {
                return;
            }
            self.take_held();
            if self.pending.is_empty() {
                return;
            }
        }
    }

    /// The leader's messages to its followers that this batch's steps asked for, built
    /// once for the batch and joined to it ([`consensus::Config::flush_per_batch`]).
    /// Nothing held (a follower, or a leader whose steps sent nothing) takes no write lock:
    /// this runs on every turn of the core.
    fn take_held(&mut self) {
        if !self.core().messages_held() {
            return;
        }
        let now = self.now();
        let ready = self.view.write().flush_batch(now);
        self.pending.merge(ready);
    }

    /// The outbox of a carry-out of round `round`, sending with the replica `core`.
    fn outbox<'a>(&'a mut self, view: &'a View, core: &'a Replica) -> Links<'a> {
        Links {
            links: &self.links,
            in_flight: &mut self.in_flight,
            waiting: &mut self.waiting,
            metrics: &self.metrics,
            round: self.round,
            view,
            replica: core,
        }
    }

    /// The early half of the batch now, its store in the background.
    fn carry_out_beside(&mut self) {
        let ready = std::mem::take(&mut self.pending);
        let view = self.view.clone();
        // Answers wait behind those of a batch before this one still waiting for its store:
        // requests are answered in the order they were made.
        let hold = self
            .storing
            .as_ref()
            .is_some_and(|s| s.early.holds_answers())
            || self.queued.as_ref().is_some_and(|q| q.holds_answers());
        let early = {
            let core = view.read();
            self.sync_links(&core);
            let early =
                storage::carry_out_early_beside(ready, hold, &mut self.outbox(&view, &core));
            // Readers waiting for the commit may answer now: it names entries on a majority
            // of disks, this beacon's own among them where it leads (see
            // `consensus::durable`), whatever this batch's store holds.
            view.release(&core);
            early
        };
        match self.queued.as_mut() {
            Some(queued) => queued.merge(early),
            None => self.queued = Some(early),
        }
    }

    /// Whether nothing waits to be stepped (no peer's message, no ask) and no read waits
    /// for a round, which the fsync would hold up.
    fn quiet(&self) -> bool {
        self.peers.is_empty()
            && self.keeps.is_empty()
            && self.asks.is_empty()
            && self.reads.is_empty()
    }

    /// Starts storing what is queued, unless a store is under way (it starts once that one
    /// is done): on the log's thread, or on this one when `here` or when it has no entries
    /// (it is then released at once, nothing before it being under way).
    fn start_store(&mut self, here: bool) {
        if self.storing.is_some() {
            return;
        }
        let Some(mut early) = self.queued.take() else {
            return;
        };
        let Some(mut storage) = self.storage.take() else {
            unreachable!("the storage is here while no store is under way")
        };
        let (store, through) = early.take_store();
        if here || store.entries.is_empty() {
            let result = storage::store_beside(&mut storage, &store);
            self.storage = Some(storage);
            return self.stored(early, through, result);
        }
        let Some(writer) = self.writer.as_ref() else {
            unreachable!("the log's thread starts with the driver")
        };
        let done = writer.store(storage, store);
        self.storing = Some(Storing {
            early,
            through,
            done,
        });
    }

    /// The store under way came back.
    fn store_done(&mut self, done: Result<store::Done, oneshot::error::RecvError>) {
        let Some(Storing { early, through, .. }) = self.storing.take() else {
            return;
        };
        let Ok(store::Done { storage, result }) = done else {
            self.failed
                .get_or_insert_with(|| "the log's thread is gone".to_owned());
            return;
        };
        self.storage = Some(storage);
        self.stored(early, through, result);
        self.start_store(false);
    }

    /// A background store is done (or failed): what waited for it is released and the core
    /// told, and a compaction comes due once the stored log holds more than it keeps.
    fn stored(
        &mut self,
        early: storage::Early<State, Services>,
        through: Option<consensus::Position>,
        result: Result<(consensus::Stored, Duration), storage::StorageError>,
    ) {
        let stored = match result {
            Ok((stored, took)) => {
                if through.is_some() {
                    self.metrics.fsync.observe(took.as_secs_f64());
                }
                stored
            }
            Err(e) => return self.store_failed(e),
        };
        let view = self.view.clone();
        let released = {
            let core = view.read();
            let released = storage::release_stored(early, stored, &mut self.outbox(&view, &core));
            if let Some(storage) = self.storage.as_ref() {
                self.compact_due |= storage.logged() > core.entries_to_keep();
            }
            released
        };
        self.released(released, true);
        if let Some(through) = through {
            self.step(consensus::Input::Stored { through });
        }
    }

    /// Waits for the store under way, then stores what is queued, here: nothing of the
    /// log is left to store but the batch to come.
    async fn drain(&mut self) {
        if let Some(storing) = self.storing.as_mut() {
            let done = (&mut storing.done).await;
            self.store_done(done);
        }
        if self.failed.is_some() {
            return;
        }
        // `store_done` started the queued batch, if any: wait for it too.
        if let Some(storing) = self.storing.as_mut() {
            let done = (&mut storing.done).await;
            self.store_done(done);
        }
        debug_assert!(self.storing.is_none() && self.queued.is_none());
    }

    /// Stores the batch here, then carries out what it released, in the two halves of
    /// [`storage::carry_out`]: between them the links, whose writing runs on this thread,
    /// send the early messages (a leader's entries, a round) before the fsync blocks the
    /// thread. Then the core is told its whole log is stored.
    async fn carry_out_whole(&mut self) {
        let ready = std::mem::take(&mut self.pending);
        let now = self.now();
        let view = self.view.clone();
        let Some(mut storage) = self.storage.take() else {
            unreachable!("no store is under way after a drain")
        };
        let early = {
            let core = view.read();
            self.sync_links(&core);
            carry_out_early(ready, &mut storage, &mut self.outbox(&view, &core))
        };
        let early = match early {
            Ok(early) => early,
            Err(e) => {
                self.storage = Some(storage);
                return self.store_failed(e);
            }
        };
        if early.stores() {
            tokio::task::yield_now().await;
        }
        let core = view.read();
        let released = carry_out_stored(
            early,
            &core,
            &mut storage,
            now,
            &mut self.outbox(&view, &core),
        );
        let through = core.position();
        drop(core);
        self.storage = Some(storage);
        self.compact_due = false;
        match released {
            Ok(Some(released)) => self.released(released, false),
            Ok(None) => unreachable!("the driver's outbox never stops a carry-out"),
            Err(e) => return self.store_failed(e),
        }
        self.step(consensus::Input::Stored { through });
    }

    /// What a carry-out released: answers given, readers woken, changes told to watchers,
    /// and the greeting brought up to date (claiming only what is stored, when `beside`).
    fn released(&mut self, released: consensus::Released<State, Services>, beside: bool) {
        for (token, reply) in released.replies {
            give(&mut self.waiting, &self.metrics, token, reply);
        }
        let view = self.view.clone();
        let core = view.read();
        // Everything it rests on is stored: reads waiting for their entries may answer.
        view.release(&core);
        let leads = core.is_leader();
        let greeting = message_to_pb::<State>(&if beside {
            core.stored_greeting()
        } else {
            core.greeting()
        });
        drop(core);
        self.history.record(&released.committed, released.restored);
        self.publish(&released.committed);
        if !leads && !self.subscribers.is_empty() {
            // Dropping them closes their channels: each tells its follower to go to the
            // new leader.
            info!(
                subscribers = self.subscribers.len(),
                "no longer leading: watchers must resubscribe with the leader"
            );
            self.subscribers.clear();
        }
        self.start_subscriptions();
        self.release_commit_waiters();
        self.count_progress();
        self.current.send_replace(Greeting {
            round: self.round,
            election: greeting,
        });
    }

    /// The store failed: this beacon stops after this turn (see [`Driver::run`]).
    fn store_failed(&mut self, e: storage::StorageError) {
        self.failed = Some(format!("cannot store the replicated state: {e}"));
    }

    /// Counts what a peer's message says for the metrics: a snapshot received, or a
    /// follower's acknowledgement that ends a replication round trip.
    fn count_received(&mut self, from: SocketAddr, msg: &Message<State>) {
        if msg.snapshot.is_some() {
            self.metrics.snapshots_received.inc();
        }
        if let Some((index, sent)) = self.in_flight.get(&from).copied()
            && msg.position.index >= index
        {
            self.in_flight.remove(&from);
            // A follower that went silent and came back (a cut healed) acknowledges late:
            // that is an outage, not a round trip. Beyond the leader's patience with a
            // follower (at least 2 s) it no longer counts as one.
            let patience = Duration::from_millis(consensus::patience_ms(self.config.tick_ms));
            if sent.elapsed() > patience {
                return;
            }
            let metrics = &self.metrics;
            self.rtt
                .entry(from)
                .or_insert_with(|| {
                    metrics
                        .replication_rtt
                        .get_or_create(&super::metrics::PeerLabel {
                            peer: from.to_string(),
                        })
                        .clone()
                })
                .observe(sent.elapsed().as_secs_f64());
        }
    }

    /// Adds what was committed and applied since the last call to the counters.
    fn count_progress(&mut self) {
        let (commit, index) = {
            let core = self.core();
            (core.commit(), core.position().index)
        };
        let (counted_commit, counted_index) = self.counted;
        self.metrics
            .committed
            .inc_by(commit.saturating_sub(counted_commit));
        self.metrics
            .applied
            .inc_by(index.saturating_sub(counted_index));
        // A log cut back (a diverged follower) counts again what it re-applies.
        self.counted = (commit.max(counted_commit), index);
        if !self.core().is_leader() {
            self.in_flight.clear();
        }
    }

    /// Sets the state gauges, for a scrape.
    fn refresh_metrics(&mut self, now: Millis) {
        let m = &self.metrics;
        let core = self.core();
        let election = core.election();
        m.has_leader.set(i64::from(election.leader().is_some()));
        m.is_leader.set(i64::from(core.is_leader()));
        m.is_learner.set(i64::from(election.is_learner()));
        m.voters.set(core.members().voters.len() as i64);
        m.learners.set(core.members().learners.len() as i64);
        let last = core.position().index;
        m.peer_behind.clear();
        for f in core.follower_progress() {
            let behind = f.matched.map_or(last, |m| last.saturating_sub(m));
            m.peer_behind
                .get_or_create(&super::metrics::PeerLabel {
                    peer: f.peer.to_string(),
                })
                .set(behind as i64);
        }
        m.term.set(election.term() as i64);
        let rounds = core.round_counts();
        m.rounds
            .inc_by(rounds.started.saturating_sub(m.rounds.get()));
        m.with_heartbeat
            .inc_by(rounds.with_heartbeat.saturating_sub(m.with_heartbeat.get()));
        m.can_write.set(i64::from(core.cannot_write().is_none()));
        m.lag.set(core.lag() as i64);
        m.pending.set(self.waiting.len() as i64);
        // Away on the log's thread: as they were.
        if let Some(storage) = self.storage.as_ref() {
            m.log_entries.set(storage.logged() as i64);
            m.snapshot_bytes.set(storage.snapshot_size() as i64);
        }
        m.uptime
            .set(now.saturating_sub(CLOCK_ORIGIN_MS) as f64 / 1e3);
        m.watch_history.set(self.history.len() as i64);
        m.watch_history_bytes.set(self.history.bytes() as i64);
        m.watch_oldest.set(self.history.first() as i64);
        for v in election.view(now).into_iter().filter(|v| !v.is_self) {
            m.peer_online
                .get_or_create(&super::metrics::PeerLabel {
                    peer: v.node.to_string(),
                })
                .set(i64::from(v.is_online));
        }
        m.machines.set(
            core.state()
                .gauges(&self.config.machines, crate::time::wall_ms()),
        );
    }

    fn log_event(&mut self, event: consensus::Event) {
        if let consensus::Event::LeaderChanged { leader, term } = &event {
            self.leader.send_replace(*leader);
            self.metrics.leader_changes.inc();
            self.metrics.leaders.record(*leader, *term);
        }
        match event {
            consensus::Event::LeaderChanged { leader, term } => match leader {
                Some(l) if l == self.config.node => info!(term, "this beacon is now the leader"),
                Some(l) => info!(leader = %l, term, "following leader"),
                None => warn!(
                    term,
                    "no leader online; waiting for the first online beacon to take over"
                ),
            },
            consensus::Event::Notice(msg) => info!("{msg}"),
            consensus::Event::ReadIndex { token, result } => {
                if let Some((asked, waiting)) = self.reads.remove(&token) {
                    if result.is_ok() {
                        self.metrics
                            .read_index_took(super::metrics::ReadIndexVia::Round, asked.elapsed());
                    }
                    let _ = waiting.send(result);
                }
            }
            consensus::Event::Transferred { token, result } => {
                match &result {
                    Ok(to) => info!(leader = %to, "leader transfer done"),
                    Err(e) => warn!("leader transfer failed: {e}"),
                }
                if let Some(waiting) = self.transfers.remove(&token) {
                    let _ = waiting.send(result);
                }
            }
            consensus::Event::MembersChanged { token, result } => {
                match &result {
                    Ok(c) => info!(
                        index = c.index,
                        "membership change committed: {}", c.members
                    ),
                    Err(e) => warn!("membership change not made: {e}"),
                }
                if let Some(waiting) = self.member_changes.remove(&token) {
                    let _ = waiting.send(result);
                }
            }
        }
    }

    /// Lets go the subscriptions whose entries are committed; drops them all (their first
    /// answer fails: watch again at the leader) once this beacon no longer leads.
    fn release_commit_waiters(&mut self) {
        if !self.core().is_leader() {
            self.commit_waiters.clear();
            return;
        }
        let commit = self.core().commit();
        for (index, tx) in std::mem::take(&mut self.commit_waiters) {
            if index <= commit {
                let _ = tx.send(());
            } else {
                self.commit_waiters.push((index, tx));
            }
        }
    }

    /// Tells every subscriber each committed change, in log order.
    fn publish(&mut self, changes: &[(u64, Change)]) {
        for (index, change) in changes {
            self.subscribers
                .retain_mut(|s| s(Committed::Change(*index, change)));
        }
    }

    /// Tells the subscribers that heard nothing since the last time how far the log is
    /// committed (key `watch.progress_ms`).
    fn tell_progress(&mut self) {
        let commit = self.core().commit();
        self.subscribers
            .retain_mut(|s| s(Committed::Progress(commit)));
    }
}

/// What `show beacon` and `endpoint status` show of this beacon's replica (read off the
/// driver's task: a status, a probe or a health check never waits behind the writes queued).
pub(crate) fn status_of(config: &Config, core: &Replica, now: Millis) -> pb::BeaconStatus {
    let election = core.election();
    let stored: BTreeMap<SocketAddr, Option<u64>> = core
        .follower_progress()
        .into_iter()
        .map(|f| (f.peer, f.matched))
        .collect();
    let position = core.position();
    pb::BeaconStatus {
        node: config.node.to_string(),
        cluster: config.cluster.clone(),
        term: election.term(),
        leader: election.leader().map(|l| l.to_string()),
        tick_ms: config.tick_ms,
        uptime_ms: now.saturating_sub(CLOCK_ORIGIN_MS),
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
                // Filled in from the handshakes by `Shared::status`.
                admin: None,
                role: if v.is_learner { "learner" } else { "voter" }.to_owned(),
                promoting: core.members().promoting.contains(&v.node),
                leaving: !core.members().contains(v.node),
            })
            .collect(),
        mode: core.mode().to_string(),
        commit: core.commit(),
        index: position.index,
        log_term: position.term,
        stale: core.staleness(),
        version: crate::VERSION.to_owned(),
        cannot_write: core.cannot_write(),
        lag: core.lag(),
        members_index: core.members_index(),
        // The core's beat is the server's to add (`Shared::core_status`).
        ..Default::default()
    }
}

/// A message carrying a snapshot, encoded on a thread of its own: at a million registrations
/// encoding it took the core thread some hundreds of milliseconds, in which no heartbeat
/// left and the other beacons took the leader for gone. The link sends it in its place in
/// the queue once it is ready; what the state adds (the machines' heartbeat fields) is taken
/// here, as of this round.
fn encode_apart(to: SocketAddr, msg: Message<State>, state: &State) -> Body {
    let annotation = message_annotation::<State>(&msg, state);
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("snapshot-encode".into())
        .spawn(move || {
            // Bulk: it goes after the core, the requests and the heartbeats.
            crate::machines::bulk::lower_priority();
            let bytes = message_bytes_annotated::<State>(&msg, &annotation);
            let _ = tx.send(bytes.into());
        });
    if let Err(e) = spawned {
        // Dropping the sender abandons the message: the leader sends another.
        warn!(peer = %to, "cannot start a thread to encode a snapshot: {e}");
    }
    Body::Encoding(rx)
}

/// Where the driver's carry-out sends: each peer's link queue, stamped with the round.
struct Links<'a> {
    links: &'a HashMap<SocketAddr, mpsc::Sender<Outgoing>>,
    in_flight: &'a mut HashMap<SocketAddr, (u64, Instant)>,
    waiting: &'a mut Waiting,
    metrics: &'a Metrics,
    round: u64,
    view: &'a View,
    replica: &'a Replica,
}

/// Gives `reply` to the request that waits for it (counting a consensus failure).
fn give(waiting: &mut Waiting, metrics: &Metrics, token: Token, reply: Reply<State, Services>) {
    if matches!(reply, Err(consensus::ReplyError::Consensus(_))) {
        metrics.failed.inc();
    }
    waiting.give(token, reply);
}

impl storage::Outbox<State, Services, storage::Files> for Links<'_> {
    /// The answers leave before the store's fsync, and readers waiting for the commit
    /// index as of this batch may answer: all of it rests on entries stored before.
    fn answer_early(
        &mut self,
        replies: Vec<(Token, Reply<State, Services>)>,
    ) -> Vec<(Token, Reply<State, Services>)> {
        for (token, reply) in replies {
            give(self.waiting, self.metrics, token, reply);
        }
        self.view.release(self.replica);
        Vec::new()
    }

    fn send(&mut self, to: SocketAddr, msg: Message<State>) {
        let Some(link) = self.links.get(&to) else {
            return;
        };
        if let Some(last) = msg.append.as_ref().and_then(|a| a.entries.last()) {
            self.in_flight
                .entry(to)
                .or_insert_with(|| (last.index, Instant::now()));
        }
        let body = if msg.snapshot.is_some() {
            self.metrics.snapshots_sent.inc();
            encode_apart(to, msg, self.replica.state())
        } else {
            Body::Ready(message_bytes::<State>(&msg, self.replica.state()).into())
        };
        if link
            .try_send(Outgoing {
                round: self.round,
                body,
            })
            .is_err()
        {
            // The leader resends what was lost on its next tick.
            debug!(peer = %to, "message dropped: link busy or down");
        }
    }

    fn appended(&mut self, took: std::time::Duration) {
        self.metrics.fsync.observe(took.as_secs_f64());
    }

    fn compacted(&mut self) {
        debug!("stored state compacted into a snapshot");
    }
}

#[cfg(test)]
/// The view as readers use it (see [`View`]), with no driver running.
mod view_tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use std::sync::Arc;

    use super::{AskSenders, Asked, DriverHandle};
    use crate::config::{Config, Overrides};
    use crate::consensus::{self, Mode};
    use crate::machines::handle::CoreExt;
    use crate::machines::view::{ReadError, View};
    use crate::machines::{Configured, Replica, Services, State};
    use crate::server::admission::Gate;

    /// A lone beacon's replica in a view, and a handle whose driver never runs: whatever
    /// is answered below is answered without it.
    fn lone() -> (Arc<View>, DriverHandle, mpsc::Receiver<Asked>) {
        let config = Config::load(None, &Overrides::default()).unwrap();
        let core = consensus::Config {
            me: config.node,
            mode: Mode::Classic,
            beacons: vec![config.node],
            learners: Vec::new(),
            members_index: 0,
            tick_ms: config.tick_ms,
            log_keep: config.log_keep,
            stored: consensus::Promise::default(),
            deal_terms: true,
            promote_after_ms: None,
            stores_reported: false,
            flush_per_batch: false,
        };
        let replica = Replica::new(
            core,
            State::configured(&config.machines),
            Services::configured(&config.machines),
        );
        let view = View::new(replica, config.ip_allow.clone());
        let (tx, rx) = mpsc::channel(1);
        let watchers = Arc::new(crate::machines::watchers::Watchers::new(Default::default()));
        let (keep, _) = mpsc::channel(1);
        let senders = AskSenders { keep, new: tx };
        let gate: Gate = Arc::new(|| Ok(()));
        (
            view.clone(),
            DriverHandle::new(
                senders,
                gate,
                view,
                watchers,
                tokio::sync::watch::channel(None).1,
                tokio::sync::watch::channel(true).1,
            ),
            rx,
        )
    }

    // Two threads: the read below blocks its thread until the test lets go of the lock.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_serializable_read_needs_no_driver() {
        let (view, handle, _queue) = lone();
        let read = handle.read(|replica, _| replica.is_leader());
        let leads = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("answered without the driver")
            .unwrap();
        assert!(leads, "a lone beacon leads");
        // So does the status (`show beacon`, probes, health), read the same way.
        let config = Config::load(None, &Overrides::default()).unwrap();
        let status = handle
            .read(move |replica, now| super::status_of(&config, replica, now))
            .await
            .unwrap();
        assert_eq!(status.leader, Some(status.node.clone()), "{status:?}");
        assert_eq!(status.beacons.len(), 1);
        // The driver holds the replica only while it steps: a read waits for that, no more.
        let stepping = view.write();
        let read = tokio::spawn({
            let handle = handle.clone();
            async move { handle.read(|replica, _| replica.commit()).await }
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !read.is_finished(),
            "a read must not see the replica mid-step"
        );
        drop(stepping);
        assert_eq!(read.await.unwrap().unwrap(), 0);
    }

    #[tokio::test]
    async fn a_read_at_an_index_waits_until_the_driver_releases_it() {
        let (view, handle, _queue) = lone();
        let read = tokio::spawn({
            let handle = handle.clone();
            async move {
                handle
                    .read_after(0, None, |replica, _| replica.commit())
                    .await
            }
        });
        // Index 0 is released from the start.
        let answered = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("answered without the driver");
        assert_eq!(answered.unwrap().unwrap(), 0);

        let waiting = tokio::spawn({
            let view = view.clone();
            async move { view.applied(1).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "index 1 is not released yet");
        // A release that moves nothing wakes no one for good.
        view.release(&view.read());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        // The driver stops: the reader is told, not left waiting.
        view.stop();
        assert_eq!(waiting.await.unwrap(), Err(ReadError::Stopped));
    }
}
