//! Replicas of beacon's machines wired through an in-memory network in lock step: exact
//! replies, replication, failover, leases, snapshots, divergence repair and the quorum
//! rules, each step carried out as the daemon does (the term stored, a leader's messages
//! sent, the entries stored through the real storage code, then the rest released).

use beacon::storage::{Memory, Outbox, carry_out};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

use beacon::consensus::election::Heartbeat;
use beacon::consensus::{
    self, ConsensusError, Input, Message, Mode, PeerMessage, Position, ReplyError, Token,
};
use beacon::machines::registry::{
    self, Caller, Change, FencingToken, IdRange, InvalidRequest, LoadStats, NodeFilter, NodeId,
    NodeRecord, NodeView, RegisterRequest, Registry, RegistryConfig, RegistryError,
    RegistryService, Report, Request, Response, Target, Unregister,
};
use beacon::machines::{self, Part, Services, State};
use beacon::time::Millis;
use beacon_testkit::sim::Disk;

const TICK: u64 = 100;
const LEASE: u64 = 1000;
const REUSE: u64 = 3000;

type Coordinator = consensus::Replica<State, Services>;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn svc(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], port))
}

const A: u16 = 16000;
const B: u16 = 17000;
const C: u16 = 18000;

/// A refusal, by the core or by the registry.
#[derive(Debug, Clone, PartialEq)]
enum RequestError {
    Core(ConsensusError),
    Registry(RegistryError),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Core(e) => e.fmt(f),
            RequestError::Registry(e) => e.fmt(f),
        }
    }
}

impl From<InvalidRequest> for RequestError {
    fn from(e: InvalidRequest) -> Self {
        RequestError::Registry(e.into())
    }
}

/// The registry's answer in a reply of the composite.
fn unwrap_reply(reply: consensus::Reply<State, Services>) -> Result<Response, RequestError> {
    match reply {
        Ok(machines::Response::Registry(r)) => Ok(r),
        Err(ReplyError::Consensus(e)) => Err(RequestError::Core(e)),
        Err(ReplyError::Machine(machines::Error::Registry(e))) => Err(RequestError::Registry(e)),
        other => panic!("only registry requests are sent here, got {other:?}"),
    }
}

fn config_in(
    mode: Mode,
    me: u16,
    beacons: &[u16],
    log_keep: usize,
    stored: consensus::Promise,
) -> consensus::Config {
    consensus::Config {
        mode,
        me: addr(me),
        beacons: beacons.iter().map(|p| addr(*p)).collect(),
        learners: Vec::new(),
        members_index: 0,
        tick_ms: TICK,
        log_keep,
        stored,
        deal_terms: true,
        promote_after_ms: None,
        stores_reported: false,
        flush_per_batch: false,
    }
}

/// An empty state and its service, as every beacon in these tests starts.
fn fresh() -> (State, Services) {
    (
        State {
            registry: Registry::for_replay(IdRange { first: 1, last: 8 }, REUSE),
            sequence: Default::default(),
            assign: Default::default(),
            tasks: Default::default(),
            configs: Default::default(),
        },
        Services {
            registry: RegistryService::new(RegistryConfig {
                lease_ms: LEASE,
                subscriptions: BTreeMap::from([("ACCESS".to_string(), vec!["LOGIC".to_string()])]),
                damping: Default::default(),
                table_part: beacon::machines::registry::TABLE_PART,
                routine_waits: true,
            }),
            sequence: Default::default(),
            assign: Default::default(),
            tasks: Default::default(),
            configs: Default::default(),
        },
    )
}

fn register_req(port: u16, node_type: &str) -> Request {
    Request::Register(Box::new(RegisterRequest {
        caller: Default::default(),
        node_type: node_type.into(),
        addr: svc(port),
        access_addr: None,
        worker_num: 2,
        metadata: String::new(),
        wall_ms: 1_700_000_000_000,
    }))
}

fn report_req(id: NodeId, port: u16, token: FencingToken) -> Request {
    Request::Report(Report {
        caller: Default::default(),
        node_id: id,
        addr: svc(port),
        token,
        load: Some(Box::new((
            LoadStats {
                load: 7,
                ..LoadStats::default()
            },
            Vec::new(),
        ))),
        clock_ms: 0,
        routine: false,
        health: None,
    })
}

/// The request a holder sends to give up the registration `token` at service `port`.
fn release_req(port: u16, token: FencingToken) -> Request {
    Request::Unregister(Unregister {
        caller: Default::default(),
        target: Target::Addr(svc(port)),
        token,
        release: true,
        clock_ms: 0,
    })
}

/// Every registration and quarantined ID as `node` lists them.
fn node_views(node: &Coordinator, now: Millis) -> Vec<NodeView> {
    registry::service::nodes(
        &node.state().registry,
        &node.service().registry,
        now,
        &NodeFilter::default(),
    )
}

/// Where a beacon's carry-out sends: the network's queue.
struct Queue<'a> {
    from: SocketAddr,
    queue: &'a mut VecDeque<(SocketAddr, SocketAddr, Message<State>)>,
}

impl Outbox<State, Services, Memory> for Queue<'_> {
    fn send(&mut self, to: SocketAddr, msg: Message<State>) {
        self.queue.push_back((self.from, to, msg));
    }
}

/// Beacons on an in-memory network. Messages wait in a queue until delivered.
struct Net {
    nodes: BTreeMap<SocketAddr, Coordinator>,
    queue: VecDeque<(SocketAddr, SocketAddr, Message<State>)>,
    replies: BTreeMap<Token, Result<Response, RequestError>>,
    committed: BTreeMap<SocketAddr, Vec<(u64, Change)>>,
    cut: BTreeSet<SocketAddr>,
    /// What each beacon stored, through the real storage code.
    disk: BTreeMap<SocketAddr, Disk<State>>,
    mode: Mode,
    ports: Vec<u16>,
    log_keep: usize,
    now: Millis,
    next_token: Token,
}

impl Net {
    fn new(ports: &[u16], log_keep: usize) -> Net {
        Net::new_in(Mode::Classic, ports, log_keep)
    }

    fn new_in(mode: Mode, ports: &[u16], log_keep: usize) -> Net {
        let mut net = Net {
            nodes: BTreeMap::new(),
            queue: VecDeque::new(),
            replies: BTreeMap::new(),
            committed: BTreeMap::new(),
            cut: BTreeSet::new(),
            disk: BTreeMap::new(),
            mode,
            ports: ports.to_vec(),
            log_keep,
            now: 0,
            next_token: 1,
        };
        for p in ports {
            let node = net.open(*p);
            net.nodes.insert(addr(*p), node);
        }
        // Links come up at start: every beacon greets every other before anyone ticks.
        for (from, node) in &net.nodes {
            for to in ports.iter().map(|p| addr(*p)).filter(|to| to != from) {
                net.queue.push_back((*from, to, node.greeting()));
            }
        }
        net
    }

    /// A replica of `port` from what its disk holds.
    fn open(&mut self, port: u16) -> Coordinator {
        let disk = self.disk.entry(addr(port)).or_default();
        let stored = disk.open().expect("the disk opens");
        assert!(stored.truncated.is_none());
        let config = config_in(self.mode, port, &self.ports, self.log_keep, stored.promise);
        let (state, service) = fresh();
        let (node, notices) = Coordinator::restore(
            config,
            state,
            service,
            stored.snapshot,
            stored.entries,
            stored.commit,
        )
        .expect("stored state loads");
        assert!(notices.is_empty(), "{notices:?}");
        node
    }

    /// Starts `port` again from what it stored, as the driver does after a crash.
    fn restart(&mut self, port: u16) {
        let at = addr(port);
        let node = self.open(port);
        let greeting = node.greeting();
        self.nodes.insert(at, node);
        let others: Vec<SocketAddr> = self.nodes.keys().copied().filter(|a| *a != at).collect();
        for other in others {
            let theirs = self.nodes[&other].greeting();
            self.queue.push_back((at, other, greeting.clone()));
            self.queue.push_back((other, at, theirs));
        }
    }

    /// Steps `at` and carries out what it asks, in the order its receipts allow.
    fn input(&mut self, at: SocketAddr, input: consensus::InputOf<State, Services>) {
        let now = self.now;
        let Some(node) = self.nodes.get_mut(&at) else {
            return;
        };
        let mut ready = node.step(now, input);
        ready.take_events();
        let disk = self.disk.get_mut(&at).expect("a running beacon's disk");
        let mut out = Queue {
            from: at,
            queue: &mut self.queue,
        };
        let released = carry_out(ready, node, disk.storage(), now, &mut out)
            .expect("stored")
            .expect("the queue never stops a carry-out");
        for (token, reply) in released.replies {
            assert!(
                self.replies.insert(token, unwrap_reply(reply)).is_none(),
                "one reply per request"
            );
        }
        let changes = released.committed.into_iter().filter_map(|(i, c)| match c {
            machines::Change::Registry(c) => Some((i, c)),
            machines::Change::Sequence(_)
            | machines::Change::Assign(_)
            | machines::Change::Tasks(_)
            | machines::Change::Configs(_) => None,
        });
        self.committed.entry(at).or_default().extend(changes);
    }

    fn request(&mut self, at: u16, request: Request) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        let request = machines::Request::Registry(request);
        self.input(addr(at), Input::Request { token, request });
        token
    }

    fn reply(&self, token: Token) -> Option<&Result<Response, RequestError>> {
        self.replies.get(&token)
    }
    fn registered_id(&self, token: Token) -> NodeId {
        self.registered(token).node_id
    }

    fn registered(&self, token: Token) -> &NodeRecord {
        match self.reply(token) {
            Some(Ok(Response::Registered { record, .. })) => record,
            other => panic!("expected a registration, got {other:?}"),
        }
    }

    /// The fencing token of the registration of `id` as beacon `port` holds it.
    fn token_at(&self, port: u16, id: NodeId) -> FencingToken {
        self.node(port)
            .state()
            .registry
            .get(id)
            .expect("registered")
            .token()
    }

    /// Delivers queued messages (and those they cause) until quiet; cut beacons hear nothing.
    fn deliver(&mut self) {
        for _ in 0..10_000 {
            let Some((from, to, msg)) = self.queue.pop_front() else {
                return;
            };
            if self.cut.contains(&from) || self.cut.contains(&to) {
                continue;
            }
            self.input(to, Input::Peer { from, msg });
        }
        panic!("messages never stopped");
    }

    fn tick(&mut self) {
        self.now += TICK;
        let all: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        for a in all {
            self.input(a, Input::Tick { wall_ms: self.now });
        }
        self.deliver();
    }

    fn settle(&mut self) {
        self.deliver();
        for _ in 0..3 {
            self.tick();
        }
    }

    fn node(&self, port: u16) -> &Coordinator {
        &self.nodes[&addr(port)]
    }

    fn leader(&self) -> u16 {
        let leaders: Vec<u16> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.is_leader())
            .map(|(a, _)| a.port())
            .collect();
        assert_eq!(leaders.len(), 1, "exactly one leader");
        leaders[0]
    }

    /// Kills `port`: the others see its connections drop.
    fn kill(&mut self, port: u16) {
        self.nodes.remove(&addr(port));
        if let Some(disk) = self.disk.get_mut(&addr(port)) {
            disk.close();
        }
        let all: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        for a in all {
            self.input(a, Input::PeerDown { peer: addr(port) });
        }
        self.deliver();
    }

    fn registry_ids(&self, port: u16) -> Vec<(NodeId, SocketAddr)> {
        self.node(port)
            .state()
            .registry
            .nodes()
            .map(|r| (r.node_id, r.addr))
            .collect()
    }
}

#[test]
fn stored_state_replays_to_the_same_registry_after_a_full_restart() {
    let mut net = Net::new(&[A, B, C], 4);
    net.settle();
    let mut tokens = BTreeMap::new();
    for p in 10..17 {
        let t = net.request(A, register_req(p, "LOGIC"));
        net.deliver();
        tokens.insert(p, net.registered(t).token());
    }
    net.request(A, release_req(12, tokens[&12]));
    net.deliver();
    let before = net.registry_ids(A);
    assert_eq!(before.len(), 6);
    for p in [A, B, C] {
        assert_eq!(net.registry_ids(p), before, "replicated to {p}");
        net.nodes.remove(&addr(p));
    }
    for p in [A, B, C] {
        net.restart(p);
        assert_eq!(net.registry_ids(p), before, "{p} replays its disk");
    }
    net.settle();
    // Allocation continues past every stored ID.
    let t = net.request(net.leader(), register_req(30, "LOGIC"));
    net.deliver();
    let id = net.registered_id(t);
    assert!(before.iter().all(|(used, _)| *used != id), "{id} reissued");
}

#[test]
fn a_lone_beacon_registers_at_once_and_answers_by_the_rules() {
    let mut net = Net::new(&[A], 100);
    let t = net.request(A, register_req(1, "ACCESS"));
    match net.reply(t) {
        Some(Ok(Response::Registered {
            record,
            lease_ms,
            subscribe,
            ..
        })) => {
            assert_eq!((record.node_id, record.addr, record.index), (1, svc(1), 1));
            assert_eq!(*lease_ms, LEASE);
            assert_eq!(subscribe, &vec!["LOGIC".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    // Same address again while live: same ID, nothing appended.
    let t2 = net.request(A, register_req(1, "ACCESS"));
    assert_eq!(net.registered_id(t2), 1);
    assert_eq!(net.node(A).position().index, 1);
    // Same address, other type: refused.
    let t3 = net.request(A, register_req(1, "LOGIC"));
    assert_eq!(
        net.reply(t3),
        Some(&Err(RequestError::Registry(RegistryError::Conflict {
            addr: svc(1),
            node_type: "ACCESS".into(),
            node_id: 1
        })))
    );
    // Next address, next ID.
    let t4 = net.request(A, register_req(2, "LOGIC"));
    assert_eq!(net.registered_id(t4), 2);
    let two = net.registered(t4).token();
    // Reports keep a lease; a report for something not registered is refused, and so is
    // one that does not name the registration (its fencing token) or names another.
    let t5 = net.request(A, report_req(2, 2, two));
    assert_eq!(
        net.reply(t5),
        Some(&Ok(Response::Reported {
            node_id: 2,
            lease_ms: LEASE,
            token: two,
            clock_ms: 0,
        }))
    );
    let t6 = net.request(A, report_req(2, 3, two));
    assert!(matches!(
        net.reply(t6),
        Some(Err(RequestError::Registry(RegistryError::NoLease {
            node_id: 2,
            ..
        })))
    ));
    let t6b = net.request(A, report_req(2, 2, FencingToken::default()));
    assert_eq!(
        net.reply(t6b),
        Some(&Err(RequestError::Registry(RegistryError::Invalid(
            InvalidRequest::NoToken
        ))))
    );
    let older = FencingToken {
        term: two.term,
        index: two.index - 1,
    };
    let t6c = net.request(A, report_req(2, 2, older));
    assert!(matches!(
        net.reply(t6c),
        Some(Err(RequestError::Registry(RegistryError::NoLease {
            node_id: 2,
            ..
        })))
    ));
    // An unregister that names another registration than the one at its target changes
    // nothing; the holder's own frees the ID at once.
    let one = net.token_at(A, 1);
    let t7a = net.request(A, release_req(1, two));
    assert!(matches!(
        net.reply(t7a),
        Some(Err(RequestError::Registry(RegistryError::NotHolder {
            node_id: 1,
            ..
        })))
    ));
    let t7 = net.request(A, release_req(1, one));
    assert!(matches!(net.reply(t7), Some(Ok(Response::Unregistered(r))) if r.node_id == 1));
    let t8 = net.request(
        A,
        Request::Unregister(Unregister {
            caller: Default::default(),
            target: Target::Id(5),
            token: one,
            release: true,
            clock_ms: 0,
        }),
    );
    assert!(matches!(
        net.reply(t8),
        Some(Err(RequestError::Registry(RegistryError::UnknownTarget(what)))) if what.starts_with("node ID 5")
    ));
    // The committed changes were published in order.
    let changes: Vec<(u64, NodeId, &str)> = net.committed[&addr(A)]
        .iter()
        .map(|(i, c)| {
            let kind = match c {
                Change::Added(_) => "added",
                Change::Updated { .. } => "updated",
                Change::Removed(_) => "removed",
            };
            (*i, c.record().node_id, kind)
        })
        .collect();
    assert_eq!(
        changes,
        vec![(1, 1, "added"), (2, 2, "added"), (3, 1, "removed")]
    );
}

#[test]
fn a_write_is_acknowledged_only_once_every_online_follower_has_it() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    assert_eq!(net.leader(), A);
    let t = net.request(A, register_req(1, "LOGIC"));
    assert_eq!(net.reply(t), None, "not before the followers store it");
    // The entry went out at once, not at the next tick.
    assert_eq!(net.queue.len(), 2);
    // Deliver to B and C and their acks back: now it is acknowledged.
    net.deliver();
    assert_eq!(net.registered_id(t), 1);
    for p in [A, B, C] {
        assert_eq!(net.registry_ids(p), vec![(1, svc(1))], "beacon {p}");
        assert_eq!(net.node(p).position().index, 1);
    }
    assert_eq!(net.node(A).commit(), 1);
}

#[test]
fn followers_redirect_to_the_leader() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    let t = net.request(B, register_req(1, "LOGIC"));
    assert_eq!(
        net.reply(t),
        Some(&Err(RequestError::Core(ConsensusError::NotLeader {
            leader: Some(addr(A))
        })))
    );
    assert_eq!(
        net.reply(t).unwrap().as_ref().unwrap_err().to_string(),
        "this beacon is not the leader; the leader is 127.0.0.1:16000"
    );
}

#[test]
fn after_the_leader_dies_the_next_one_continues_without_reissuing_ids() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    let ids: Vec<NodeId> = (1..=3)
        .map(|p| {
            let t = net.request(A, register_req(p, "LOGIC"));
            net.deliver();
            net.registered_id(t)
        })
        .collect();
    assert_eq!(ids, vec![1, 2, 3]);
    net.kill(A);
    assert_eq!(net.leader(), B);
    // The new leader allocates after what the old one issued.
    let t = net.request(B, register_req(4, "LOGIC"));
    net.deliver();
    assert_eq!(net.registered_id(t), 4);
    // Services keep their IDs: their reports are accepted by the new leader.
    let two = net.token_at(B, 2);
    let t = net.request(B, report_req(2, 2, two));
    assert!(matches!(
        net.reply(t),
        Some(Ok(Response::Reported { node_id: 2, .. }))
    ));
    assert_eq!(net.registry_ids(B), net.registry_ids(C));
}

#[test]
fn a_new_leader_waits_for_followers_it_has_not_heard_from_yet() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    net.kill(A);
    assert_eq!(net.leader(), B);
    // Immediately after taking over, B knows nothing of C's position; a write must wait
    // for C rather than be acknowledged on B alone.
    net.cut.insert(addr(C));
    let t = net.request(B, register_req(1, "LOGIC"));
    assert_eq!(net.reply(t), None);
    net.deliver();
    assert_eq!(net.reply(t), None, "C has not stored it");
    // C is cut off: it goes offline after three silent ticks and then B stops waiting.
    for _ in 0..4 {
        net.tick();
    }
    assert_eq!(net.registered_id(t), 1);
}

#[test]
fn a_stuck_follower_stops_holding_writes_after_the_leaders_patience() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    // C keeps heartbeating (so it stays online) but loses every entry sent to it.
    net.request(A, register_req(1, "LOGIC"));
    let to_c: Vec<_> = net
        .queue
        .iter()
        .filter(|(_, to, _)| *to == addr(C))
        .cloned()
        .collect();
    net.queue.retain(|(_, to, _)| *to != addr(C));
    assert_eq!(to_c.len(), 1);
    net.deliver();
    assert_eq!(net.node(A).commit(), 0, "waiting for C");
    // Stop C from hearing A's resends too, but let C's heartbeats reach A.
    let mut ticks = 0;
    while net.node(A).commit() == 0 {
        net.now += TICK;
        ticks += 1;
        for a in [A, B, C] {
            net.input(addr(a), Input::Tick { wall_ms: net.now });
        }
        net.queue
            .retain(|(from, to, _)| !(*from == addr(A) && *to == addr(C)));
        net.deliver();
        assert!(ticks < 40);
    }
    // Two ticks, but at least 2 s: a slow disk is not given up on at once.
    assert_eq!(ticks, 21, "left out once 2 s have passed without progress");
}

#[test]
fn missed_leases_expire_into_quarantine_and_are_released_later() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    let t1 = net.request(A, register_req(1, "LOGIC"));
    let t2 = net.request(A, register_req(2, "LOGIC"));
    net.deliver();
    let (id1, id2) = (net.registered_id(t1), net.registered_id(t2));
    let (token1, token2) = (net.registered(t1).token(), net.registered(t2).token());
    // Node 2 reports every tick, node 1 never does.
    for _ in 0..(LEASE / TICK + 1) {
        net.request(A, report_req(id2, 2, token2));
        net.tick();
    }
    for p in [A, B, C] {
        let views = node_views(net.node(p), net.now);
        let states: Vec<(NodeId, bool)> = views
            .iter()
            .map(|v| (v.record.node_id, v.is_online))
            .collect();
        assert_eq!(states, vec![(id1, false), (id2, true)], "beacon {p}");
    }
    // A page of them (the status page's) merges live and quarantined in ID order and
    // counts both by type.
    let (state, service) = (
        &net.node(A).state().registry,
        &net.node(A).service().registry,
    );
    let all = NodeFilter::default();
    let (first, next) = registry::service::first_nodes(state, service, net.now, &all, 0, 1);
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].record.node_id, first[0].is_online), (id1, false));
    // The next page starts where the first said, and says it ends the list.
    assert_eq!(next, Some(id2));
    let (second, after) = registry::service::first_nodes(state, service, net.now, &all, id2, 1);
    assert_eq!(
        second
            .iter()
            .map(|v| (v.record.node_id, v.is_online))
            .collect::<Vec<_>>(),
        vec![(id2, true)]
    );
    assert_eq!(after, None);
    let (past, none) = registry::service::first_nodes(state, service, net.now, &all, id2 + 1, 10);
    assert!(past.is_empty() && none.is_none());
    assert_eq!(registry::service::count_nodes(state, &all), 2);
    let other = NodeFilter {
        node_type: Some("OTHER".into()),
        ..NodeFilter::default()
    };
    assert_eq!(registry::service::count_nodes(state, &other), 0);
    let counts = registry::service::counts_by_type(state, &all);
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        vec![("LOGIC".to_owned(), (1, 1))]
    );
    let views = node_views(net.node(A), net.now);
    assert_eq!(views[1].report.as_ref().unwrap().0.load, 7);
    assert!(views[1].last_seen_ms.unwrap() <= TICK);
    assert!(
        node_views(net.node(B), net.now)[1].last_seen_ms.is_none(),
        "followers do not track reports"
    );
    // A report from the expired holder is refused: it must stop using the ID.
    let t = net.request(A, report_req(id1, 1, token1));
    assert!(matches!(
        net.reply(t),
        Some(Err(RequestError::Registry(RegistryError::NoLease { .. })))
    ));
    // During quarantine, new services skip ID 1...
    let t3 = net.request(A, register_req(3, "LOGIC"));
    net.deliver();
    assert_eq!(net.registered_id(t3), 3);
    // ...but the old address may take it back.
    let t1b = net.request(A, register_req(1, "LOGIC"));
    net.deliver();
    assert_eq!(net.registered_id(t1b), id1);
    assert!(
        net.registered(t1b).token() > token1,
        "a new registration of the same ID has a larger fencing token"
    );
    // The old registration's report cannot renew the new one.
    let t = net.request(A, report_req(id1, 1, token1));
    assert!(matches!(
        net.reply(t),
        Some(Err(RequestError::Registry(RegistryError::NoLease { .. })))
    ));
    // Let 1 expire again and the quarantine run out: it is released everywhere.
    let token3 = net.registered(t3).token();
    for _ in 0..((LEASE + REUSE) / TICK + 3) {
        net.request(A, report_req(id2, 2, token2));
        net.request(A, report_req(3, 3, token3));
        net.tick();
    }
    for p in [A, B, C] {
        assert_eq!(
            net.node(p).state().registry.quarantined().count(),
            0,
            "beacon {p}"
        );
        assert_eq!(net.registry_ids(p).len(), 2);
    }
}

#[test]
fn an_operator_frees_a_quarantined_id_early_and_never_a_live_one() {
    let mut net = Net::new(&[A, B, C], 100);
    net.settle();
    let t1 = net.request(A, register_req(1, "LOGIC"));
    let t2 = net.request(A, register_req(2, "LOGIC"));
    net.deliver();
    let (id1, id2) = (net.registered_id(t1), net.registered_id(t2));
    let token2 = net.registered(t2).token();
    // Node 1 never reports: its ID goes to quarantine.
    for _ in 0..(LEASE / TICK + 1) {
        net.request(A, report_req(id2, 2, token2));
        net.tick();
    }
    assert_eq!(net.node(A).state().registry.quarantined().count(), 1);
    // A live ID is refused, and nothing changes.
    let t = net.request(A, Request::FreeId(id2));
    net.deliver();
    assert!(matches!(
        net.reply(t),
        Some(Err(RequestError::Registry(RegistryError::IdInUse { node_id, .. }))) if *node_id == id2
    ));
    // The quarantined one is freed on every beacon, long before its quarantine ends.
    let t = net.request(A, Request::FreeId(id1));
    net.deliver();
    match net.reply(t) {
        Some(Ok(Response::Freed(id, Some(was)))) => assert_eq!((*id, was.node_id), (id1, id1)),
        other => panic!("expected the ID freed, got {other:?}"),
    }
    net.tick();
    for p in [A, B, C] {
        assert_eq!(
            net.node(p).state().registry.quarantined().count(),
            0,
            "beacon {p}"
        );
    }
    // Freeing it again answers that it is free; a new service may get it at once.
    let t = net.request(A, Request::FreeId(id1));
    net.deliver();
    assert!(matches!(net.reply(t), Some(Ok(Response::Freed(_, None)))));
    let t3 = net.request(A, register_req(3, "LOGIC"));
    net.deliver();
    assert_eq!(
        net.registered_id(t3),
        3,
        "allocation goes on from the last ID"
    );
}

#[test]
fn a_restarted_follower_catches_up_with_a_snapshot() {
    // Keep only two log entries, so a follower that missed more needs a snapshot.
    let mut net = Net::new(&[A, B, C], 2);
    net.settle();
    net.kill(C);
    for p in 1..=5 {
        let t = net.request(A, register_req(p, "LOGIC"));
        net.deliver();
        net.registered_id(t);
    }
    let two = net.token_at(A, 2);
    net.request(
        A,
        Request::Unregister(Unregister {
            caller: Default::default(),
            target: Target::Id(2),
            token: two,
            release: true,
            clock_ms: 0,
        }),
    );
    net.deliver();
    // C comes back empty.
    let (state, service) = fresh();
    net.disk.insert(addr(C), Disk::default());
    net.disk.get_mut(&addr(C)).unwrap().open().unwrap();
    let config = config_in(
        Mode::Classic,
        C,
        &[A, B, C],
        2,
        consensus::Promise::default(),
    );
    net.nodes
        .insert(addr(C), Coordinator::new(config, state, service));
    let hello = net.node(C).greeting();
    net.input(
        addr(A),
        Input::Peer {
            from: addr(C),
            msg: hello,
        },
    );
    net.deliver();
    assert_eq!(net.registry_ids(C), net.registry_ids(A));
    assert_eq!(net.node(C).position(), net.node(A).position());
    assert_eq!(net.node(C).state().registry.last_node_id(), 5);
    // And it then follows entries normally.
    let t = net.request(A, register_req(9, "LOGIC"));
    net.deliver();
    assert_eq!(net.registered_id(t), 6);
    assert_eq!(net.registry_ids(C), net.registry_ids(A));
}

#[test]
fn diverged_beacons_are_repaired_by_the_winners_snapshot() {
    let mut net = Net::new(&[A, B], 100);
    net.settle();
    // Split: B is cut off, takes over on its side (term 2), and both sides register.
    net.cut.insert(addr(B));
    for _ in 0..4 {
        net.tick();
    }
    assert!(net.node(A).is_leader() && net.node(B).is_leader());
    let ta = net.request(A, register_req(1, "LOGIC"));
    let tb = net.request(B, register_req(2, "LOGIC"));
    net.deliver();
    assert_eq!(
        (net.registered_id(ta), net.registered_id(tb)),
        (1, 1),
        "classic mode: both sides allocate"
    );
    // Heal: B's term is higher, A yields and takes B's state.
    net.cut.clear();
    net.settle();
    assert_eq!(net.leader(), B);
    assert_eq!(net.registry_ids(A), vec![(1, svc(2))]);
    assert_eq!(net.registry_ids(A), net.registry_ids(B));
    // The losing side's service is told its lease is gone when it reports.
    let t = net.request(B, report_req(1, 1, net.registered(ta).token()));
    assert!(matches!(
        net.reply(t),
        Some(Err(RequestError::Registry(RegistryError::NoLease { .. })))
    ));
}

#[test]
fn pending_writes_fail_clearly_when_leadership_is_lost() {
    let mut net = Net::new(&[A, B], 100);
    net.settle();
    net.cut.insert(addr(B));
    let t = net.request(A, register_req(1, "LOGIC"));
    // A stops waiting for B after it goes offline... unless it loses leadership first:
    // B rejoins with a higher term before that.
    net.input(
        addr(A),
        Input::Peer {
            from: addr(B),
            msg: PeerMessage::bare(Heartbeat::bare(true, 9), Position::default(), 0),
        },
    );
    assert_eq!(
        net.reply(t),
        Some(&Err(RequestError::Core(ConsensusError::LeaderChanged)))
    );
}

#[test]
fn invalid_requests_change_nothing() {
    let mut net = Net::new(&[A], 100);
    let err: RequestError = InvalidRequest::EmptyType.into();
    assert_eq!(err.to_string(), "node_type is empty");
    // Exhaust the 8-ID range.
    for p in 1..=8 {
        net.request(A, register_req(p, "LOGIC"));
    }
    let before = net.node(A).position();
    let t = net.request(A, register_req(9, "LOGIC"));
    assert_eq!(
        net.reply(t).unwrap().as_ref().unwrap_err().to_string(),
        "no free node ID: all 8 IDs of range 1..=8 are taken (8 in use, 0 in quarantine)"
    );
    assert_eq!(net.node(A).position(), before);
}

#[test]
fn a_service_identity_acts_only_on_its_own_registrations() {
    let mut net = Net::new(&[A], 100);
    let service = |name: &str| Caller {
        name: name.into(),
        restricted: true,
    };
    let as_caller = |req: Request, caller: Caller| match req {
        Request::Register(r) => Request::Register(Box::new(RegisterRequest { caller, ..*r })),
        Request::Report(r) => Request::Report(Report { caller, ..r }),
        Request::Unregister(u) => Request::Unregister(Unregister { caller, ..u }),
        other => other,
    };
    let t = net.request(A, as_caller(register_req(1, "LOGIC"), service("billing")));
    let record = net.registered(t).clone();
    assert_eq!(
        &*record.owner, "billing",
        "the identity is recorded with the registration"
    );
    let token = record.token();
    let before = net.node(A).position();
    let not_owner = RequestError::Registry(RegistryError::NotOwner {
        node_id: 1,
        owner: "billing".into(),
        caller: "shipping".into(),
    });
    // Another service may not report for it, unregister it, or register its address.
    for req in [
        report_req(1, 1, token),
        release_req(1, token),
        register_req(1, "LOGIC"),
    ] {
        let t = net.request(A, as_caller(req, service("shipping")));
        assert_eq!(net.reply(t), Some(&Err(not_owner.clone())));
    }
    assert_eq!(net.node(A).position(), before, "nothing changed");
    // Its owner may; so may an admin (an unrestricted caller).
    let t = net.request(A, as_caller(report_req(1, 1, token), service("billing")));
    assert!(matches!(net.reply(t), Some(Ok(Response::Reported { .. }))));
    let admin = Caller {
        name: "ops".into(),
        restricted: false,
    };
    let t = net.request(A, as_caller(release_req(1, token), admin));
    assert!(matches!(net.reply(t), Some(Ok(Response::Unregistered(_)))));
}

// ---- quorum mode ---------------------------------------------------------------------------

fn reply_error(net: &Net, token: Token) -> RequestError {
    match net.reply(token) {
        Some(Err(e)) => e.clone(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn quorum_writes_need_a_majority_and_a_minority_leader_refuses_them() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    assert_eq!(net.leader(), A);
    assert_eq!(net.node(A).staleness(), None);
    // With C cut off, A and B are a majority: writes go on.
    net.cut.insert(addr(C));
    let t = net.request(A, register_req(10, "LOGIC"));
    net.deliver();
    let id = net.registered_id(t);
    // With B cut off too, A is alone: once it sees them offline, it refuses writes and
    // reports, and its reads are marked stale.
    net.cut.insert(addr(B));
    for _ in 0..4 {
        net.tick();
    }
    let t = net.request(A, register_req(11, "LOGIC"));
    net.deliver();
    assert_eq!(
        reply_error(&net, t),
        RequestError::Core(ConsensusError::NoQuorum {
            sees: 1,
            needs: 2,
            of: 3
        })
    );
    let t = net.request(A, report_req(id, 10, net.token_at(A, id)));
    net.deliver();
    assert!(matches!(
        reply_error(&net, t),
        RequestError::Core(ConsensusError::NoQuorum { .. })
    ));
    assert!(net.node(A).staleness().unwrap().contains("sees 1 of 3"));
    // Its lease is not ended while nothing can be written.
    for _ in 0..20 {
        net.tick();
    }
    assert_eq!(net.registry_ids(A).len(), 1);
}

/// A routine report is confirmed by the round the leader's next heartbeat carries, not by
/// one of its own; a leader cut off from its followers before that heartbeat never confirms
/// it (it says there is no quorum once it sees them gone).
#[test]
fn a_routine_report_waits_for_the_next_heartbeats_round() {
    let routine = |id, port, token| {
        let mut req = report_req(id, port, token);
        if let Request::Report(r) = &mut req {
            r.routine = true;
        }
        req
    };
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    assert_eq!(net.leader(), A);
    let t = net.request(A, register_req(10, "LOGIC"));
    net.deliver();
    let id = net.registered_id(t);
    let token = net.token_at(A, id);

    let t = net.request(A, routine(id, 10, token));
    net.deliver();
    assert_eq!(net.reply(t), None, "no round of its own");
    // A prompt report starts a round at once, which answers both.
    let prompt = net.request(A, report_req(id, 10, token));
    net.deliver();
    assert!(matches!(
        net.reply(prompt),
        Some(Ok(Response::Reported { .. }))
    ));
    assert!(matches!(net.reply(t), Some(Ok(Response::Reported { .. }))));

    let t = net.request(A, routine(id, 10, token));
    net.deliver();
    assert_eq!(net.reply(t), None);
    net.tick();
    assert!(
        matches!(net.reply(t), Some(Ok(Response::Reported { .. }))),
        "the tick's heartbeat carried its round"
    );

    // Cut off before the heartbeat: unconfirmed, then refused when the leader steps down.
    let t = net.request(A, routine(id, 10, token));
    net.deliver();
    net.cut.insert(addr(B));
    net.cut.insert(addr(C));
    net.tick();
    assert_eq!(net.reply(t), None, "no majority acknowledged its round");
    for _ in 0..4 {
        net.tick();
    }
    assert_eq!(
        reply_error(&net, t),
        RequestError::Core(ConsensusError::LeaderChanged)
    );
}

#[test]
fn a_write_on_a_majority_survives_a_leader_elected_with_a_stale_state() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    // B misses a registration that A and C (a majority) store and acknowledge.
    net.cut.insert(addr(B));
    let t = net.request(A, register_req(10, "LOGIC"));
    net.deliver();
    let id = net.registered_id(t);
    // A dies; B comes back and, first online, is elected with a stale state.
    net.kill(A);
    net.cut.clear();
    for _ in 0..5 {
        net.tick();
    }
    assert_eq!(net.leader(), B);
    assert!(
        net.registry_ids(B).contains(&(id, svc(10))),
        "B took over C's more advanced state"
    );
    // And allocates past it.
    let t = net.request(B, register_req(11, "LOGIC"));
    net.deliver();
    assert_ne!(net.registered_id(t), id);
    assert_eq!(net.registry_ids(B), net.registry_ids(C));
}

#[test]
fn a_leader_serves_only_once_it_has_taken_over() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    // C is silent: B, leading once A is gone, hears no promise from it.
    net.cut.insert(addr(C));
    net.kill(A);
    for _ in 0..2 {
        net.tick();
    }
    if net.node(B).is_leader() {
        let t = net.request(B, register_req(10, "LOGIC"));
        net.deliver();
        let e = reply_error(&net, t);
        assert!(
            matches!(
                e,
                RequestError::Core(ConsensusError::NotReady)
                    | RequestError::Core(ConsensusError::NoQuorum { .. })
            ),
            "{e:?}"
        );
    }
    net.cut.clear();
    for _ in 0..3 {
        net.tick();
    }
    let t = net.request(B, register_req(10, "LOGIC"));
    net.deliver();
    net.registered_id(t);
}

#[test]
fn an_older_terms_entry_on_a_majority_commits_only_with_the_new_leaders_own_entry() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    assert_eq!(net.leader(), A);
    // A appends a registration; only B stores it, and A never hears back.
    let t = net.request(A, register_req(1, "LOGIC"));
    let to_b = net
        .queue
        .iter()
        .position(|(_, to, _)| *to == addr(B))
        .unwrap();
    let (from, to, msg) = net.queue.remove(to_b).unwrap();
    net.queue.clear();
    net.input(to, Input::Peer { from, msg });
    net.queue.clear();
    assert_eq!(net.reply(t), None);
    let old = net.node(B).position();
    let committed = net.node(B).commit();
    assert!(committed < old.index);
    // A dies. B takes over (it holds the most advanced state) and appends its own first entry;
    // C gets the old entry but not B's: the old entry is on a majority (B and C) now.
    net.nodes.remove(&addr(A));
    for p in [B, C] {
        net.input(addr(p), Input::PeerDown { peer: addr(A) });
    }
    for _ in 0..5 {
        net.now += TICK;
        for p in [B, C] {
            net.input(addr(p), Input::Tick { wall_ms: net.now });
        }
        for _ in 0..1000 {
            let Some((from, to, mut msg)) = net.queue.pop_front() else {
                break;
            };
            if to == addr(A) {
                continue;
            }
            if from == addr(B) && to == addr(C) {
                // C hears B's heartbeats but never gets past the old entry.
                if let Some(append) = msg.append.as_mut() {
                    append.entries.retain(|e| e.index <= old.index);
                }
            }
            net.input(to, Input::Peer { from, msg });
        }
    }
    assert!(net.node(B).has_taken_over());
    assert!(net.node(B).position().index > old.index);
    assert_eq!(net.node(C).position(), old);
    assert_eq!(
        net.node(B).commit(),
        committed,
        "an older term's entry is not committed by being on a majority"
    );
    // Once C stores B's own entry, both commit.
    net.settle();
    assert_eq!(net.node(B).commit(), net.node(B).position().index);
    assert!(net.registry_ids(C).contains(&(1, svc(1))));
}

/// A report carrying a snowflake clock reservation is answered only once the reservation is
/// stored by the followers, with the value committed; the next leader holds it, and the next
/// holder of the ID learns it at registration. A holder's own release replaces its
/// reservation with the last timestamp it used.
#[test]
fn clock_reservations_commit_before_they_are_confirmed_and_pass_to_the_next_holder() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    let t = net.request(A, register_req(1, "LOGIC"));
    net.deliver();
    let one = net.registered(t).clone();
    assert!(matches!(
        net.reply(t),
        Some(Ok(Response::Registered {
            clock_floor_ms: 0,
            ..
        }))
    ));
    let mut report = report_req(one.node_id, 1, one.token());
    if let Request::Report(r) = &mut report {
        r.clock_ms = 5_000;
    }
    let t = net.request(A, report.clone());
    assert_eq!(
        net.reply(t),
        None,
        "not before a majority stores the reservation"
    );
    net.deliver();
    assert!(matches!(
        net.reply(t),
        Some(Ok(Response::Reported {
            clock_ms: 5_000,
            ..
        }))
    ));
    // A lower one later does not lower it.
    if let Request::Report(r) = &mut report {
        r.clock_ms = 4_000;
    }
    let t = net.request(A, report);
    net.deliver();
    assert!(matches!(
        net.reply(t),
        Some(Ok(Response::Reported {
            clock_ms: 5_000,
            ..
        }))
    ));
    // The leader dies; the next one holds the reservation.
    net.kill(A);
    let leader = net.leader();
    for p in [B, C] {
        let registry = <State as Part<Registry>>::part(net.node(p).state());
        assert_eq!(registry.clock(one.node_id), 5_000, "beacon {p}");
    }
    // The holder gives its ID up, saying it used up to 4,200: that is what the next holder
    // waits for.
    let t = net.request(
        leader,
        Request::Unregister(Unregister {
            caller: Default::default(),
            target: Target::Id(one.node_id),
            token: one.token(),
            release: true,
            clock_ms: 4_200,
        }),
    );
    net.deliver();
    assert!(matches!(net.reply(t), Some(Ok(Response::Unregistered(_)))));
    // The allocator moves on; once it wraps, ID 1 goes to a new service, told the floor.
    for port in 2..=8 {
        let t = net.request(leader, register_req(port, "LOGIC"));
        net.deliver();
        assert!(matches!(
            net.reply(t),
            Some(Ok(Response::Registered {
                clock_floor_ms: 0,
                ..
            }))
        ));
    }
    let t = net.request(leader, register_req(9, "LOGIC"));
    net.deliver();
    assert_eq!(net.registered_id(t), one.node_id);
    assert!(matches!(
        net.reply(t),
        Some(Ok(Response::Registered {
            clock_floor_ms: 4_200,
            ..
        }))
    ));
}

#[test]
fn a_restarted_follower_keeps_its_promise_of_the_term_to_its_leader() {
    let mut net = Net::new_in(Mode::Quorum, &[A, B, C], 100);
    net.settle();
    assert_eq!(net.leader(), A);
    let term = net.node(A).election().term();
    let promised_a = consensus::Promise {
        term,
        leader: Some(addr(A)),
    };
    assert_eq!(net.node(B).election().promise(), promised_a);
    // B restarts from its disk: the promise comes back with the term.
    net.kill(B);
    net.restart(B);
    assert_eq!(net.node(B).election().promise(), promised_a);
    // A claim of the same term by another beacon (two that came to one term) is not
    // followed; B rejoins A.
    let forged = Heartbeat {
        is_leader: true,
        term,
        leader: Some(addr(C)),
        sees: 0b111,
        eligible: true,
    };
    let position = net.node(C).position();
    net.input(
        addr(B),
        Input::Peer {
            from: addr(C),
            msg: PeerMessage::bare(forged, position, 0),
        },
    );
    assert_ne!(net.node(B).election().leader(), Some(addr(C)));
    net.settle();
    assert_eq!(net.node(B).election().leader(), Some(addr(A)));
}
