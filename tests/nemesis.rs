//! A nemesis on real processes: five beacons in quorum mode whose links run through a
//! fault-injecting proxy, 24 services registering, reporting, giving their IDs up or just
//! dropping them through the client library, and a probe writer, while faults follow one
//! another: the leader killed, a follower killed with the tail of its log cut off, the
//! leader or a follower stopped (SIGSTOP), the leader cut off in one direction (either
//! one; connections reset or bytes silently dropped), 3/2 and 4/1 splits, rings and
//! bridges. Requests are in flight across all of them. Beside them, clients take segments
//! of two sequences (raw, and through the double-buffered client) and services generate
//! snowflake IDs on their registrations.
//!
//! Checked from the services' side, with one clock:
//! * no node ID held by two services at once (a service holds its ID from its registration
//!   until it gives it up, drops it, or its lease is no longer confirmed);
//! * fencing tokens rise with each new holder of an ID;
//! * no service is told its registration ended while its lease rightly holds: a write that
//!   acted on a registration other than its sender's would show up so;
//! * a ring or a bridge raises the term by at most two elections' worth;
//! * no number of a sequence is handed out twice, and no snowflake ID is generated twice
//!   (across every holder of every worker ID);
//! * no resource is run by two workers at once (each ownership from the push that gave it
//!   to the push that took it, or its lease's end), and holder tokens rise;
//! * no task runs on two workers at once, attempt tokens rise, and every acknowledged task
//!   ends completed with the result of one attempt that ran to its end (see `queue`);
//! * once healed, every beacon follows one leader and holds the same registrations.
//!
//! It prints what it measured: faults by kind, writes checked, and how long writes were
//! unavailable after each kind of fault and after healing. `BEACON_NEMESIS_ROUNDS=N` runs
//! every kind of fault N times (default 1).

mod support;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::nodes;

use beacon::client::{AssignmentEvent, Assignments};
use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::machines::registry::{LeaseLost, RegisterOptions, Registration};
use beacon::machines::sequence::client::{Sequence, SequenceOptions, Snowflake, SnowflakeOptions};
use beacon::pb;
use beacon_testkit::proxy::{Cut, Mesh};
use beacon_testkit::rng::SimRng;
use beacon_testkit::*;

#[path = "nemesis/queue.rs"]
mod queue;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
const SERVICES: usize = 24;
const BEACONS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillLeader,
    KillFollowerTornLog,
    StopLeader,
    StopFollower,
    LeaderCannotSend,
    LeaderCannotHear,
    SplitThreeTwo,
    SplitFourOne,
    Ring,
    Bridge,
}

const FAULTS: [Fault; 10] = [
    Fault::KillLeader,
    Fault::LeaderCannotSend,
    Fault::Ring,
    Fault::StopLeader,
    Fault::KillFollowerTornLog,
    Fault::LeaderCannotHear,
    Fault::Bridge,
    Fault::SplitThreeTwo,
    Fault::StopFollower,
    Fault::SplitFourOne,
];

/// One service's holding of an ID, from its registration to when it stopped using it.
#[derive(Debug, Clone)]
struct Held {
    service: usize,
    id: u32,
    token: (u64, u64),
    from: Instant,
    until: Instant,
}

/// What the sequence and snowflake clients were handed.
#[derive(Default)]
struct Numbers {
    /// Per sequence: (start, end) of raw segments, and numbers served by double buffers.
    segments: BTreeMap<String, Vec<(u64, u64)>>,
    served: BTreeMap<String, Vec<u64>>,
    snowflakes: Vec<u64>,
    /// Snowflake generators started (one per registration held).
    generators: u64,
}

const SEQUENCES: [&str; 2] = ["orders", "invoices"];

/// Resources the assignment workers share.
const RESOURCES: usize = 12;

/// One worker's ownership of a resource, from the push that gave it to when it stopped.
#[derive(Debug, Clone)]
struct Owned {
    worker: usize,
    resource: String,
    token: (u64, u64),
    from: Instant,
    until: Instant,
}

/// A worker running the resources pushed to it, registering again whenever its lease is
/// lost; every ownership is recorded, ended no later than its lease was confirmed.
async fn assignee(
    i: usize,
    beacons: Vec<String>,
    owned: Arc<Mutex<Vec<Owned>>>,
    stop: Arc<AtomicBool>,
) {
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let addr = SocketAddr::from(([10, 11, i as u8, (n % 250) as u8], 7000));
        let mut options = RegisterOptions::new("ASSIGNEE", addr);
        options.connect = opts(500);
        options.retry_for = Duration::from_secs(3);
        let Ok(reg) = Registration::register(beacons.clone(), options).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(mut mine) = Assignments::start(&reg).await else {
            continue;
        };
        let mut running: BTreeMap<String, ((u64, u64), Instant)> = BTreeMap::new();
        let close = |running: &mut BTreeMap<String, ((u64, u64), Instant)>,
                     name: &str,
                     reg: &Registration| {
            running.remove(name).map(|(token, from)| Owned {
                worker: i,
                resource: name.to_owned(),
                token,
                from,
                until: Instant::now().min(reg.confirmed_until()),
            })
        };
        let hold = Duration::from_millis(3_000 + 1_000 * u64::from(n % 4));
        let until = Instant::now() + hold;
        loop {
            let next = tokio::select! {
                e = mine.next() => e,
                _ = tokio::time::sleep_until(until.into()) => break,
            };
            let mut ended = Vec::new();
            match next {
                Ok(AssignmentEvent::Added(r)) => {
                    let h = r.holder.clone().unwrap_or_default();
                    running.insert(r.name, ((h.term, h.index), Instant::now()));
                }
                Ok(AssignmentEvent::Removed(r)) => ended.extend(close(&mut running, &r.name, &reg)),
                Ok(AssignmentEvent::Lost { .. }) | Err(_) => {
                    let names: Vec<String> = running.keys().cloned().collect();
                    for name in names {
                        ended.extend(close(&mut running, &name, &reg));
                    }
                    owned.lock().unwrap().extend(ended);
                    break;
                }
                Ok(_) => {}
            }
            owned.lock().unwrap().extend(ended);
        }
        // It stops (gives its registration up, or just drops it): all of it ends here.
        let names: Vec<String> = running.keys().cloned().collect();
        let mut ended = Vec::new();
        for name in names {
            ended.extend(close(&mut running, &name, &reg));
        }
        owned.lock().unwrap().extend(ended);
        if n.is_multiple_of(2) {
            let _ = reg.unregister().await;
        }
    }
}

/// Takes segments of a sequence without pause, each attempt bounded.
async fn segments(
    i: usize,
    beacons: Vec<String>,
    numbers: Arc<Mutex<Numbers>>,
    stop: Arc<AtomicBool>,
) {
    let mut leader = Leader::new(beacons, opts(300), Duration::from_millis(500));
    let name = SEQUENCES[i % SEQUENCES.len()];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let attempt = tokio::time::timeout(
            Duration::from_millis(500),
            leader.next_segment(name, 1 + n % 20),
        )
        .await;
        match attempt {
            Ok(Ok(reply)) => {
                let s = reply.segment.unwrap_or_default();
                let mut h = numbers.lock().unwrap();
                h.segments
                    .entry(name.into())
                    .or_default()
                    .push((s.start, s.end));
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Serves numbers from a double buffer, at a steady pace, across every fault.
async fn served(
    i: usize,
    beacons: Vec<String>,
    numbers: Arc<Mutex<Numbers>>,
    stop: Arc<AtomicBool>,
) {
    let name = SEQUENCES[i % SEQUENCES.len()];
    let options = SequenceOptions {
        connect: opts(300),
        retry_for: Duration::from_millis(500),
        wait_for: Duration::from_millis(200),
        ..SequenceOptions::default()
    };
    let seq = loop {
        match Sequence::open(beacons.clone(), name, options.clone()).await {
            Ok(seq) => break seq,
            Err(_) if !stop.load(Ordering::Relaxed) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(_) => return,
        }
    };
    let mut mine = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // Both buffers empty through a long outage: it says so and is asked again.
        if let Ok(n) = seq.next_id_async().await {
            mine.push(n);
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    numbers
        .lock()
        .unwrap()
        .served
        .entry(name.into())
        .or_default()
        .extend(mine);
}

/// A service generating snowflake IDs while it holds its registration; it registers again
/// (maybe getting another holder's old ID) when the lease is lost or after a while.
async fn snowflakes(
    i: usize,
    beacons: Vec<String>,
    numbers: Arc<Mutex<Numbers>>,
    stop: Arc<AtomicBool>,
) {
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let addr = SocketAddr::from(([10, 7, i as u8, (n % 250) as u8], 7000));
        let mut options = RegisterOptions::new("SNOWFLAKE", addr);
        options.connect = opts(500);
        options.retry_for = Duration::from_secs(3);
        let Ok(reg) = Registration::register(beacons.clone(), options).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let flake = match Snowflake::new(&reg, SnowflakeOptions::default()).await {
            Ok(f) => f,
            Err(_) => continue,
        };
        numbers.lock().unwrap().generators += 1;
        let mut ids = Vec::new();
        let until = Instant::now() + Duration::from_millis(2_000 + 500 * (n % 5) as u64);
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            match flake.next_id() {
                Ok(id) => ids.push(id),
                // No longer confirmed: it stopped on its own; register again.
                Err(_) => break,
            }
            if ids.len() % 16 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        numbers.lock().unwrap().snowflakes.extend(ids);
        drop(flake);
        if n.is_multiple_of(2) {
            let _ = reg.unregister().await;
        }
    }
}

#[derive(Default)]
struct History {
    held: Vec<Held>,
    violations: Vec<String>,
    unregistered: u64,
    dropped: u64,
    lost: u64,
}

fn opts(timeout_ms: u64) -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_millis(timeout_ms),
        ..ConnectOptions::default()
    }
}

/// A service: registers, holds its ID for a while (the library reports in the background),
/// then gives it up or drops it, and again, until `stop`.
async fn service(
    i: usize,
    beacons: Vec<String>,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = SimRng::new(1_000 + i as u64);
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let addr = SocketAddr::from(([10, 5, i as u8, (n % 250) as u8], 7000 + (n / 250) as u16));
        let mut options = RegisterOptions::new("LOGIC", addr);
        options.connect = opts(500);
        options.retry_for = Duration::from_secs(3);
        let Ok(reg) = Registration::register(beacons.clone(), options).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let from = Instant::now();
        let (id, token) = (reg.node_id(), reg.fencing_token());
        let mut lost = reg.lease_lost();
        let hold = Duration::from_millis(1_000 + rng.below(5_000));
        let release = rng.percent(70);
        let until = tokio::select! {
            _ = tokio::time::sleep(hold) => {
                // From here the service no longer uses its ID.
                let until = Instant::now().min(reg.confirmed_until());
                if release {
                    let ended = reg.unregister().await;
                    let mut h = history.lock().unwrap();
                    match ended {
                        Ok(_) => h.unregistered += 1,
                        // Outcome unknown: its lease runs out.
                        Err(_) => h.dropped += 1,
                    }
                } else {
                    history.lock().unwrap().dropped += 1;
                    drop(reg);
                }
                until
            }
            why = async { lost.wait_for(Option::is_some).await.ok().and_then(|w| w.clone()) } => {
                let now = Instant::now();
                let confirmed = reg.confirmed_until();
                let mut h = history.lock().unwrap();
                h.lost += 1;
                if let Some(LeaseLost::Revoked(why)) = &why
                    && now < confirmed
                {
                    h.violations.push(format!(
                        "service {i}: registration {}.{} of ID {id} ended while its lease holds for {} ms more: {why}",
                        token.0,
                        token.1,
                        (confirmed - now).as_millis()
                    ));
                }
                now.min(confirmed)
            }
        };
        history.lock().unwrap().held.push(Held {
            service: i,
            id,
            token,
            from,
            until,
        });
    }
}

/// Writes without pause, each attempt at most 150 ms, and records (sent, answered) of every
/// one that succeeded: the measure of availability.
async fn probe(
    beacons: Vec<String>,
    done: Arc<Mutex<Vec<(Instant, Instant)>>>,
    stop: Arc<AtomicBool>,
) {
    let mut leader = Leader::new(beacons, opts(150), Duration::ZERO);
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let req = pb::registry::RegisterRequest {
            node_type: "PROBE".into(),
            addr: SocketAddr::from(([10, 6, (n / 250 % 250) as u8, (n % 250) as u8], 9000))
                .to_string(),
            ..Default::default()
        };
        let sent = Instant::now();
        let attempt = tokio::time::timeout(
            Duration::from_millis(150),
            leader.call::<_, pb::registry::RegisterReply>(
                RegistryCmd::Register,
                &req,
                "the probe registration",
            ),
        )
        .await;
        match attempt {
            Ok(Ok(reply)) => {
                done.lock().unwrap().push((sent, Instant::now()));
                let node = reply.node.unwrap_or_default();
                let release = pb::registry::UnregisterRequest {
                    node_id: node.node_id,
                    term: node.term,
                    index: node.index,
                    release: true,
                    ..Default::default()
                };
                let _ = tokio::time::timeout(
                    Duration::from_millis(150),
                    leader.call::<_, pb::registry::UnregisterReply>(
                        RegistryCmd::Unregister,
                        &release,
                        "the probe release",
                    ),
                )
                .await;
            }
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Milliseconds from `t` to the answer of the first write sent after it, if any.
fn unavailable_after(done: &[(Instant, Instant)], t: Instant) -> Option<u64> {
    done.iter()
        .filter(|(sent, _)| *sent >= t)
        .map(|(_, answered)| (*answered - t).as_millis() as u64)
        .min()
}

/// The highest term any beacon reports, and the leader all agree on, if they do.
async fn terms_and_leader(addrs: &[SocketAddr]) -> (u64, Option<usize>) {
    let mut top = 0;
    for a in addrs {
        if let Some(s) = status(*a).await {
            top = top.max(s.term);
        }
    }
    let leader = agreed_leader(addrs)
        .await
        .and_then(|l| addrs.iter().position(|a| a.to_string() == l));
    (top, leader)
}

struct Outcome {
    fault: Fault,
    after_fault: Option<u64>,
    after_heal: Option<u64>,
    term_rise: u64,
}

fn percentile(values: &mut [u64], p: f64) -> u64 {
    values.sort_unstable();
    if values.is_empty() {
        return 0;
    }
    values[((values.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_keep_their_guarantees_through_a_nemesis_of_real_faults() {
    let rounds: usize = std::env::var("BEACON_NEMESIS_ROUNDS")
        .map(|s| s.parse().expect("BEACON_NEMESIS_ROUNDS is a number"))
        .unwrap_or(1);
    let ports = free_ports(BEACONS);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let mesh = Mesh::start(&addrs);
    let configs: Vec<String> = (0..BEACONS)
        .map(|i| {
            serde_json::json!({
                "lease_ms": 2_000,
                "id_reuse_delay_ms": 3_000,
                "id_range": [1, 64],
                "dial": mesh.dial_for(i, &addrs),
            })
            .to_string()
        })
        .collect();
    let mut c = Cluster::start_each(BEACON.as_ref(), &ports, TICK_MS, "nemesis", &configs);
    eventually(Duration::from_secs(15), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::default()));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..SERVICES {
        tasks.push(tokio::spawn(service(
            i,
            beacons.clone(),
            history.clone(),
            stop.clone(),
        )));
    }
    tasks.push(tokio::spawn(probe(
        beacons.clone(),
        writes.clone(),
        stop.clone(),
    )));
    let numbers = Arc::new(Mutex::new(Numbers::default()));
    let mut leader = Leader::new(beacons.clone(), opts(500), Duration::from_secs(10));
    for name in SEQUENCES {
        leader.create_sequence(name, 0, 10).await.expect("create");
    }
    for i in 0..4 {
        let (b, n, s) = (beacons.clone(), numbers.clone(), stop.clone());
        tasks.push(tokio::spawn(segments(i, b, n, s)));
        let (b, n, s) = (beacons.clone(), numbers.clone(), stop.clone());
        tasks.push(tokio::spawn(snowflakes(i, b, n, s)));
    }
    let owned = Arc::new(Mutex::new(Vec::new()));
    for i in 0..RESOURCES {
        leader
            .add_resource(&format!("job-{i}"), "ASSIGNEE", 1, BTreeMap::new())
            .await
            .expect("add a resource");
    }
    for i in 0..4 {
        let (b, o, s) = (beacons.clone(), owned.clone(), stop.clone());
        tasks.push(tokio::spawn(assignee(i, b, o, s)));
    }
    for i in 0..2 {
        let (b, n, s) = (beacons.clone(), numbers.clone(), stop.clone());
        tasks.push(tokio::spawn(served(i, b, n, s)));
    }
    // Task workers outlive the faults: they finish the backlog before the check.
    let task_log = Arc::new(Mutex::new(queue::TaskLog::default()));
    let workers_stop = Arc::new(AtomicBool::new(false));
    queue::create_queue(&mut leader).await;
    let mut workers = Vec::new();
    for i in 0..4 {
        let (b, l, s) = (beacons.clone(), task_log.clone(), workers_stop.clone());
        workers.push(tokio::spawn(queue::worker(i, b, l, s)));
    }
    for i in 0..2 {
        let (b, l, s) = (beacons.clone(), task_log.clone(), stop.clone());
        tasks.push(tokio::spawn(queue::submitter(i, b, l, s)));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let mut rng = SimRng::new(42);
    let mut outcomes = Vec::new();
    for round in 0..rounds {
        for fault in FAULTS {
            let (term_before, leader) = terms_and_leader(&addrs).await;
            let leader = leader.unwrap_or(0);
            let follower = (leader + 1 + rng.below(BEACONS as u64 - 1) as usize) % BEACONS;
            let how = if rng.percent(50) {
                Cut::Silent
            } else {
                Cut::Reset
            };
            let started = Instant::now();
            let mut healed = None;
            match fault {
                Fault::KillLeader => {
                    c.beacons[leader].kill();
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    healed = Some(Instant::now());
                    c.beacons[leader].restart();
                }
                Fault::KillFollowerTornLog => {
                    c.beacons[follower].kill();
                    let log = c
                        .dir
                        .path()
                        .join(format!("127.0.0.1_{}", ports[follower]))
                        .join("log");
                    // The last bytes written never reached the disk: zeros in their place
                    // (the log has space reserved after its writes, which reads as zeros).
                    if let Ok(mut bytes) = std::fs::read(&log) {
                        let written = beacon::storage::written(&bytes);
                        let cut = (3 + rng.below(40) as usize).min(written);
                        bytes[written - cut..written].fill(0);
                        std::fs::write(&log, &bytes).unwrap();
                    }
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    healed = Some(Instant::now());
                    c.beacons[follower].restart();
                }
                Fault::StopLeader | Fault::StopFollower => {
                    let victim = if fault == Fault::StopLeader {
                        leader
                    } else {
                        follower
                    };
                    c.beacons[victim].signal(libc::SIGSTOP);
                    tokio::time::sleep(Duration::from_millis(3_000 + rng.below(3_000))).await;
                    healed = Some(Instant::now());
                    c.beacons[victim].signal(libc::SIGCONT);
                }
                Fault::LeaderCannotSend | Fault::LeaderCannotHear => {
                    for j in (0..BEACONS).filter(|j| *j != leader) {
                        let (from, to) = if fault == Fault::LeaderCannotSend {
                            (leader, j)
                        } else {
                            (j, leader)
                        };
                        mesh.link(from, to).cut_as(how);
                    }
                }
                Fault::SplitThreeTwo => mesh.isolate_as(&[leader, follower], how),
                Fault::SplitFourOne => mesh.isolate_as(&[leader], how),
                Fault::Ring => {
                    let mut order: Vec<usize> = (0..BEACONS).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    let keep: Vec<(usize, usize)> = (0..BEACONS)
                        .map(|i| (order[i], order[(i + 1) % BEACONS]))
                        .collect();
                    mesh.keep_only(&keep, how);
                }
                Fault::Bridge => {
                    // The leader on one side with one other; the bridge hears both sides.
                    let others: Vec<usize> = (0..BEACONS).filter(|j| *j != leader).collect();
                    let bridge = others[rng.below(others.len() as u64) as usize];
                    let rest: Vec<usize> =
                        others.iter().copied().filter(|j| *j != bridge).collect();
                    let left = [leader, rest[0]];
                    let keep: Vec<(usize, usize)> = (0..BEACONS)
                        .flat_map(|a| (0..BEACONS).map(move |b| (a, b)))
                        .filter(|(a, b)| {
                            a != b
                                && (*a == bridge
                                    || *b == bridge
                                    || left.contains(a) == left.contains(b))
                        })
                        .collect();
                    mesh.keep_only(&keep, how);
                }
            }
            if healed.is_none() {
                tokio::time::sleep(Duration::from_millis(3_000 + rng.below(1_000))).await;
                healed = Some(Instant::now());
                mesh.heal_all();
            }
            let healed = healed.expect("healed");
            let settled = eventually(Duration::from_secs(10), || agreed_leader(&addrs)).await;
            assert!(
                settled.is_some(),
                "round {round}, {fault:?}: no agreed leader 10 s after healing\n{}",
                c.logs()
            );
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let (term_after, _) = terms_and_leader(&addrs).await;
            let done = writes.lock().unwrap().clone();
            let outcome = Outcome {
                fault,
                after_fault: unavailable_after(&done, started),
                after_heal: unavailable_after(&done, healed),
                term_rise: term_after.saturating_sub(term_before),
            };
            if matches!(fault, Fault::Ring | Fault::Bridge) {
                // Terms are dealt round-robin: one election raises it by at most 5.
                assert!(
                    outcome.term_rise <= 2 * BEACONS as u64,
                    "round {round}, {fault:?}: term rose by {} (from {term_before})\n{}",
                    outcome.term_rise,
                    c.logs()
                );
            }
            outcomes.push(outcome);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
    }

    // Every beacon follows one leader and holds the same registrations.
    mesh.heal_all();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no agreed leader at the end\n{}", c.logs()));
    let leader_addr: SocketAddr = leader.parse().unwrap();
    let live = |reply: pb::registry::NodesReply| -> Vec<(u32, String)> {
        reply
            .nodes
            .into_iter()
            .filter(|e| e.is_online)
            .filter_map(|e| e.node.map(|n| (n.node_id, n.addr)))
            .collect()
    };
    for a in &addrs {
        let same = eventually(Duration::from_secs(10), || async {
            let at_leader = live(nodes(leader_addr).await?);
            let here = live(nodes(*a).await?);
            (here == at_leader).then_some(())
        })
        .await;
        assert!(same.is_some(), "{a} differs from the leader\n{}", c.logs());
    }

    // Every acknowledged task completes once the faults are over; none ran twice at once.
    let summary = queue::check_completed(beacons.clone(), &task_log, Duration::from_secs(60)).await;
    workers_stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = tokio::time::timeout(Duration::from_secs(15), w).await;
    }
    queue::check_attempts(&task_log);
    println!("{summary}");

    let h = history.lock().unwrap();
    assert!(
        h.violations.is_empty(),
        "{}\n{}",
        h.violations.join("\n"),
        c.logs()
    );
    // No ID held by two services at once, and fencing tokens rise with each holder.
    let mut by_id: BTreeMap<u32, Vec<&Held>> = BTreeMap::new();
    for held in &h.held {
        by_id.entry(held.id).or_default().push(held);
    }
    for (id, holders) in &mut by_id {
        holders.sort_by_key(|x| x.from);
        for pair in holders.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(
                b.from >= a.until,
                "ID {id}: service {} held it ({:?}) until {:?} after service {} got it ({:?})",
                a.service,
                a.token,
                a.until - b.from,
                b.service,
                b.token
            );
            assert!(
                b.token > a.token,
                "ID {id}: fencing token {:?} after {:?}",
                b.token,
                a.token
            );
        }
    }
    // No number of a sequence handed out twice, by segments or by double buffers; no
    // snowflake ID generated twice.
    let nums = numbers.lock().unwrap();
    let mut handed = 0;
    for name in SEQUENCES {
        let mut ranges: Vec<(u64, u64)> = nums.segments.get(name).cloned().unwrap_or_default();
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            assert!(
                pair[0].1 < pair[1].0,
                "`{name}`: segments {:?} and {:?} overlap",
                pair[0],
                pair[1]
            );
        }
        let served = nums.served.get(name).cloned().unwrap_or_default();
        let unique: std::collections::BTreeSet<u64> = served.iter().copied().collect();
        assert_eq!(
            unique.len(),
            served.len(),
            "`{name}`: a number served twice"
        );
        for n in &served {
            let i = ranges.partition_point(|r| r.0 <= *n);
            assert!(
                i == 0 || ranges[i - 1].1 < *n,
                "`{name}`: {n} served and in a segment"
            );
        }
        assert!(
            !ranges.is_empty() && !served.is_empty(),
            "`{name}` was used"
        );
        handed += ranges.len();
    }
    let mut flakes = nums.snowflakes.clone();
    flakes.sort_unstable();
    let generated = flakes.len();
    flakes.dedup();
    assert_eq!(flakes.len(), generated, "a snowflake ID generated twice");
    assert!(nums.generators >= 4, "snowflake services got through");
    println!(
        "sequences: {handed} segments and {} served numbers, none twice; snowflake: {generated} IDs from {} generators, none twice",
        nums.served.values().map(Vec::len).sum::<usize>(),
        nums.generators
    );

    // No resource run by two workers at once; holder tokens rise.
    let owned = owned.lock().unwrap().clone();
    let mut by_resource: BTreeMap<&str, Vec<&Owned>> = BTreeMap::new();
    for o in &owned {
        by_resource.entry(o.resource.as_str()).or_default().push(o);
    }
    for (name, list) in &mut by_resource {
        list.sort_by_key(|o| o.from);
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.worker != b.worker || a.token != b.token {
                assert!(
                    b.from >= a.until,
                    "{name}: worker {} ran it (token {:?}) {:?} past worker {} starting it (token {:?})",
                    a.worker,
                    a.token,
                    a.until - b.from,
                    b.worker,
                    b.token
                );
                assert!(
                    b.token > a.token,
                    "{name}: token {:?} after {:?}",
                    b.token,
                    a.token
                );
            }
        }
    }
    assert!(
        owned.len() >= RESOURCES,
        "assignments got through: {}",
        owned.len()
    );
    println!(
        "assignment: {} ownerships of {RESOURCES} resources by 4 workers checked, none overlapping",
        owned.len()
    );

    let registrations = h.held.len();
    assert!(
        registrations >= 100,
        "services got through: {registrations}"
    );

    // The figures.
    let mut kinds: BTreeMap<Fault, Vec<&Outcome>> = BTreeMap::new();
    for o in &outcomes {
        kinds.entry(o.fault).or_default().push(o);
    }
    println!(
        "nemesis: {} faults, {registrations} registrations held and checked ({} given up, {} dropped, {} lost their lease), {} probe writes, 0 IDs held twice, 0 writes on another's registration",
        outcomes.len(),
        h.unregistered,
        h.dropped,
        h.lost,
        writes.lock().unwrap().len()
    );
    println!(
        "| fault | count | writes unavailable after the fault, median / max | after healing, median / max | term rise, max |"
    );
    println!("|---|---|---|---|---|");
    for (kind, list) in &kinds {
        let mut fault: Vec<u64> = list
            .iter()
            .map(|o| o.after_fault.unwrap_or(u64::MAX))
            .collect();
        let mut heal: Vec<u64> = list
            .iter()
            .map(|o| o.after_heal.unwrap_or(u64::MAX))
            .collect();
        let rise = list.iter().map(|o| o.term_rise).max().unwrap_or(0);
        println!(
            "| {kind:?} | {} | {} / {} ms | {} / {} ms | {rise} |",
            list.len(),
            percentile(&mut fault, 0.5),
            percentile(&mut fault, 1.0),
            percentile(&mut heal, 0.5),
            percentile(&mut heal, 1.0),
        );
    }
}
