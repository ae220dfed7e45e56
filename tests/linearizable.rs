//! Concurrent clients against real beacon processes (3 voters and a learner, and 5 voters),
//! through leader kills, minority splits and one-way cuts, with every answer recorded and
//! the history checked for linearizability (testkit's checker): registrations,
//! unregistrations and linearizable reads of a few contended addresses, at any beacon (the
//! learner too), and segments of a sequence with reads of its max.
//!
//! A write is sent once, to the beacon believed to lead: `NOT_LEADER` means it was not
//! taken (nothing recorded); any other failure leaves its outcome unknown, and the checker
//! lets it have happened or not. A failed read has no effect and is not recorded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryErrorCode;
use beacon::machines::sequence::SequenceCmd;
use beacon::pb;
use beacon::wire::ErrorCode;
use beacon_testkit::linearizability::{Model, Operation, check};
use beacon_testkit::proxy::Mesh;
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
/// Contended service addresses: each is one register of the model.
const KEYS: u8 = 3;
const CLIENTS: usize = 6;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

fn key_addr(k: u8) -> String {
    format!("10.9.0.{}:7000", k + 1)
}

/// A registration as the model knows it: node ID and fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Reg {
    node_id: u32,
    token: (u64, u64),
}

impl Reg {
    fn of(n: &pb::registry::NodeInfo) -> Reg {
        Reg {
            node_id: n.node_id,
            token: (n.term, n.index),
        }
    }
}

/// One address's registration: none, a known one, or one taken by a register whose answer
/// never came (it holds the address, under a token no answer named yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Free,
    Held(Reg),
    Unknown,
}

#[derive(Debug, Clone)]
enum RegIn {
    Register(u8),
    Unregister(u8, Reg),
    Read(u8),
}

#[derive(Debug, Clone, PartialEq)]
enum RegOut {
    /// A register's registration, or a read's.
    Held(Reg),
    /// A read found no live registration.
    Free,
    /// An unregister ended the registration.
    Ended,
    /// An unregister was refused: the token no longer holds (`NOT_HOLDER`, `UNKNOWN_TARGET`).
    NotHolder,
    /// No answer: the write may or may not have happened.
    Unknown,
}

/// The registry, address by address.
struct Registry;

impl Model for Registry {
    type Key = u8;
    type State = Slot;
    type Input = RegIn;
    type Output = RegOut;

    fn key(input: &RegIn) -> u8 {
        match input {
            RegIn::Register(k) | RegIn::Unregister(k, _) | RegIn::Read(k) => *k,
        }
    }

    fn init() -> Slot {
        Slot::Free
    }

    fn step(s: &Slot, input: &RegIn, out: &RegOut) -> Vec<Slot> {
        use RegOut as O;
        use Slot::*;
        match (input, out, *s) {
            // A register answers with the live registration at the address, or makes one.
            (RegIn::Register(_), O::Held(r), Free | Unknown) => vec![Held(*r)],
            (RegIn::Register(_), O::Held(r), Held(h)) if *r == h => vec![*s],
            (RegIn::Register(_), O::Unknown, Free) => vec![Free, Unknown],
            (RegIn::Register(_), O::Unknown, _) => vec![*s],
            (RegIn::Read(_), O::Held(r), Held(h)) if *r == h => vec![*s],
            (RegIn::Read(_), O::Held(r), Unknown) => vec![Held(*r)],
            (RegIn::Read(_), O::Free, Free) => vec![Free],
            (RegIn::Unregister(_, t), O::Ended, Held(h)) if h == *t => vec![Free],
            (RegIn::Unregister(_, _), O::Ended, Unknown) => vec![Free],
            (RegIn::Unregister(_, t), O::NotHolder, Held(h)) if h != *t => vec![*s],
            (RegIn::Unregister(_, _), O::NotHolder, Free | Unknown) => vec![*s],
            (RegIn::Unregister(_, t), O::Unknown, Held(h)) if h == *t => vec![*s, Free],
            (RegIn::Unregister(_, _), O::Unknown, Unknown) => vec![Unknown, Free],
            (RegIn::Unregister(_, _), O::Unknown, _) => vec![*s],
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
enum SeqIn {
    Next,
    Read,
}

/// A sequence: a lower bound on its max (numbers handed out whose answer was lost move the
/// true max past it, which every later answer may show).
struct Sequence;

impl Model for Sequence {
    type Key = ();
    type State = u64;
    type Input = SeqIn;
    /// A segment's (start, end), or a read's (max, max); `None`: no answer.
    type Output = Option<(u64, u64)>;

    fn key(_: &SeqIn) {}

    fn init() -> u64 {
        0
    }

    fn step(max: &u64, input: &SeqIn, out: &Option<(u64, u64)>) -> Vec<u64> {
        match (input, out) {
            (SeqIn::Next, Some((start, end))) if *start > *max => vec![*end],
            (SeqIn::Read, Some((m, _))) if *m >= *max => vec![*m],
            (_, None) => vec![*max],
            _ => Vec::new(),
        }
    }
}

/// The recorded histories, timed from one start.
#[derive(Default)]
struct Histories {
    registry: Vec<Operation<RegIn, RegOut>>,
    sequence: Vec<Operation<SeqIn, Option<(u64, u64)>>>,
}

/// What an unanswered write's return time is: after everything.
const NEVER: u64 = u64::MAX;

struct Recorder {
    start: Instant,
    histories: Mutex<Histories>,
    /// Registry reads answered, by the beacon that answered them.
    reads_at: Mutex<std::collections::BTreeMap<String, usize>>,
}

impl Recorder {
    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Records a registry operation of `client`, asked at `call`, answered at `ret`.
    fn registry(&self, client: usize, at: (u64, u64), input: RegIn, output: RegOut) {
        let op = Operation::new(client, at, input, output);
        self.histories.lock().unwrap().registry.push(op);
    }

    /// Records a sequence operation.
    fn sequence(&self, client: usize, at: (u64, u64), input: SeqIn, output: Option<(u64, u64)>) {
        let op = Operation::new(client, at, input, output);
        self.histories.lock().unwrap().sequence.push(op);
    }
}

/// How a write that failed counts: not taken (`None`), or of unknown outcome.
fn failed_write(e: &ClientError) -> Option<()> {
    (!e.is(ErrorCode::NotLeader)).then_some(())
}

/// One client: random operations on the contended addresses and the sequence until `stop`.
async fn client(id: usize, beacons: Vec<String>, rec: Arc<Recorder>, stop: Arc<AtomicBool>) {
    let mut rng = Rng::new(0x11AE + id as u64);
    let mut writer: Option<Client> = None;
    let mut leader_hint = beacons[id % beacons.len()].clone();
    // The registrations this client has seen, per address (for its unregisters).
    let mut seen: [Option<Reg>; KEYS as usize] = [None; KEYS as usize];
    while !stop.load(Ordering::Relaxed) {
        let k = rng.below(KEYS as u64) as u8;
        let roll = rng.below(100);
        if roll < 45 {
            // A read at any beacon: linearizable by default.
            let at = beacons[rng.below(beacons.len() as u64) as usize].clone();
            let Ok(mut c) = Client::connect(&at, &opts()).await else {
                continue;
            };
            let call = rec.now();
            if roll < 35 {
                let Ok(reply) = c.nodes("LIN", &key_addr(k)).await else {
                    continue;
                };
                let ret = rec.now();
                *rec.reads_at.lock().unwrap().entry(at.clone()).or_default() += 1;
                let live: Vec<_> = reply
                    .nodes
                    .iter()
                    .filter(|e| e.is_online)
                    .filter_map(|e| e.node.as_ref())
                    .collect();
                assert!(
                    live.len() <= 1,
                    "two live registrations at one address: {live:?}"
                );
                let output = match live.first() {
                    Some(n) => {
                        seen[k as usize] = Some(Reg::of(n));
                        RegOut::Held(Reg::of(n))
                    }
                    None => RegOut::Free,
                };
                rec.registry(id, (call, ret), RegIn::Read(k), output);
            } else {
                let Ok(reply) = c.sequences("lin").await else {
                    continue;
                };
                let ret = rec.now();
                let max = reply.sequences.first().map_or(0, |s| s.max);
                rec.sequence(id, (call, ret), SeqIn::Read, Some((max, max)));
            }
            continue;
        }
        // A write, once, at the beacon believed to lead.
        if writer.is_none() {
            writer = Client::connect(&leader_hint, &opts()).await.ok();
        }
        let Some(w) = writer.as_mut() else {
            leader_hint = beacons[rng.below(beacons.len() as u64) as usize].clone();
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let call = rec.now();
        let failure = if roll < 75 {
            let req = pb::registry::RegisterRequest {
                node_type: "LIN".into(),
                addr: key_addr(k),
                ..Default::default()
            };
            let result = w.register(&req).await;
            let ret = rec.now();
            let (output, ret, failure) = match result {
                Ok(reply) => {
                    let n = reply.node.expect("the reply carries the node");
                    seen[k as usize] = Some(Reg::of(&n));
                    (Some(RegOut::Held(Reg::of(&n))), ret, None)
                }
                Err(e) => (failed_write(&e).map(|_| RegOut::Unknown), NEVER, Some(e)),
            };
            if let Some(output) = output {
                rec.registry(id, (call, ret), RegIn::Register(k), output);
            }
            failure
        } else if roll < 85 {
            let Some(reg) = seen[k as usize] else {
                continue;
            };
            let req = pb::registry::UnregisterRequest {
                node_id: reg.node_id,
                addr: key_addr(k),
                term: reg.token.0,
                index: reg.token.1,
                release: true,
                clock_ms: 0,
            };
            let result = w.unregister(&req).await;
            let ret = rec.now();
            let (output, ret, failure) = match result {
                Ok(_) => (Some(RegOut::Ended), ret, None),
                Err(e)
                    if e.is(RegistryErrorCode::NotHolder)
                        || e.is(RegistryErrorCode::UnknownTarget) =>
                {
                    (Some(RegOut::NotHolder), ret, None)
                }
                Err(e) => (failed_write(&e).map(|_| RegOut::Unknown), NEVER, Some(e)),
            };
            if let Some(output) = output {
                rec.registry(id, (call, ret), RegIn::Unregister(k, reg), output);
            }
            failure
        } else {
            let req = pb::sequence::NextSegment {
                name: "lin".into(),
                count: 10,
            };
            let result: Result<pb::sequence::SegmentReply, _> =
                w.request(SequenceCmd::Next, &req, "a segment").await;
            let ret = rec.now();
            let (output, ret, failure) = match result {
                Ok(reply) => {
                    let s = reply.segment.expect("checked by the client");
                    (Some(Some((s.start, s.end))), ret, None)
                }
                Err(e) => (failed_write(&e).map(|_| None), NEVER, Some(e)),
            };
            if let Some(output) = output {
                rec.sequence(id, (call, ret), SeqIn::Next, output);
            }
            failure
        };
        if let Some(e) = failure {
            // Follow the leader named, or try another beacon.
            leader_hint = match &e {
                ClientError::Refused {
                    leader: Some(l), ..
                } => l.clone(),
                _ => beacons[rng.below(beacons.len() as u64) as usize].clone(),
            };
            writer = None;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn leader_of(addrs: &[SocketAddr], c: &Cluster) -> usize {
    let leader = eventually(Duration::from_secs(15), || agreed_leader(addrs))
        .await
        .unwrap_or_else(|| panic!("no agreed leader\n{}", c.logs()));
    addrs.iter().position(|a| a.to_string() == leader).unwrap()
}

/// `n` voters and `learners` learners linked through a fault-injecting mesh, clients on
/// every one, faults of each class in turn (the leader, a voter, is their target), and both
/// histories checked.
async fn run(n: usize, learners: usize, cluster: &str) {
    let ports = free_ports(n + learners);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let mesh = Mesh::start(&addrs);
    let configs: Vec<String> = (0..addrs.len())
        .map(|i| {
            serde_json::json!({"lease_ms": 600_000, "dial": mesh.dial_for(i, &addrs)}).to_string()
        })
        .collect();
    let (voters, learners) = ports.split_at(n);
    let mut c = Cluster::start_with_learners(
        BEACON.as_ref(),
        voters,
        learners,
        TICK_MS,
        cluster,
        &configs,
    );
    leader_of(&addrs, &c).await;
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut admin = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let create = pb::sequence::CreateSequence {
        name: "lin".into(),
        start: 1,
        step: 10,
    };
    admin
        .call::<_, pb::sequence::SequenceReply>(SequenceCmd::Create, &create, "create")
        .await
        .unwrap();

    let rec = Arc::new(Recorder {
        start: Instant::now(),
        histories: Mutex::default(),
        reads_at: Mutex::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(client(i, beacons.clone(), rec.clone(), stop.clone())))
        .collect();

    // Each class of fault in turn, with a quiet spell between.
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let leader = leader_of(&addrs, &c).await;
        let other = (leader + 1) % n;
        match round {
            0 => {
                c.beacons[leader].kill();
                tokio::time::sleep(Duration::from_millis(800)).await;
                c.beacons[leader].restart();
            }
            1 => {
                // The leader with a minority (alone of 3, with one of 5).
                let minority: Vec<usize> = if n >= 5 {
                    vec![leader, other]
                } else {
                    vec![leader]
                };
                mesh.isolate(&minority);
                tokio::time::sleep(Duration::from_millis(1200)).await;
                mesh.heal_all();
            }
            _ => {
                // One-way: the leader hears everyone, and nobody hears it.
                for j in (0..addrs.len()).filter(|j| *j != leader) {
                    mesh.link(leader, j).cut();
                }
                tokio::time::sleep(Duration::from_millis(1200)).await;
                mesh.heal_all();
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }

    let h = std::mem::take(&mut *rec.histories.lock().unwrap());
    let answered = |ret: u64| ret != NEVER;
    let reads = h
        .registry
        .iter()
        .filter(|o| matches!(o.input, RegIn::Read(_)))
        .count();
    let writes = h
        .registry
        .iter()
        .filter(|o| !matches!(o.input, RegIn::Read(_)) && answered(o.ret))
        .count();
    let segments = h
        .sequence
        .iter()
        .filter(|o| matches!(o.input, SeqIn::Next) && answered(o.ret))
        .count();
    let unknown = h.registry.iter().filter(|o| !answered(o.ret)).count()
        + h.sequence.iter().filter(|o| !answered(o.ret)).count();
    eprintln!(
        "{n} beacons: {} registry operations ({reads} reads, {writes} answered writes), {} sequence operations ({segments} segments), {unknown} writes of unknown outcome",
        h.registry.len(),
        h.sequence.len()
    );
    // Enough of each to mean something, at every beacon (the learners too).
    assert!(
        reads >= 100 && writes >= 50 && segments >= 10,
        "too few operations\n{}",
        c.logs()
    );
    let reads_at = std::mem::take(&mut *rec.reads_at.lock().unwrap());
    eprintln!("reads answered by beacon: {reads_at:?}");
    for b in &beacons {
        let at = reads_at.get(b).copied().unwrap_or(0);
        assert!(
            at >= 10,
            "{at} reads answered at {b}: {reads_at:?}\n{}",
            c.logs()
        );
    }
    let checked = std::time::Instant::now();
    if let Err(v) = check::<Registry>(&h.registry) {
        panic!("registry: {v}\n{}", c.logs());
    }
    if let Err(v) = check::<Sequence>(&h.sequence) {
        panic!("sequence: {v}\n{}", c.logs());
    }
    eprintln!("checked in {:?}", checked.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_beacons_and_a_learner_stay_linearizable_through_kills_splits_and_one_way_cuts() {
    run(3, 1, "lin3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_beacons_stay_linearizable_through_kills_splits_and_one_way_cuts() {
    run(5, 0, "lin5").await;
}
