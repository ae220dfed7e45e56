//! The sequence issuer against real beacon processes: bad input, the double-buffered client
//! (threads, prefetch, adaptive size, hand-back, an outage), snowflake IDs on registrations
//! (lease, clock reservations, the previous holder's last timestamp), and segments kept
//! unique while leaders are killed and the whole cluster restarts.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beacon::client::{ClientError, Cluster as Leader, ConnectOptions};
use beacon::machines::registry::{RegisterOptions, Registration};
use beacon::machines::sequence::SequenceErrorCode;
use beacon::machines::sequence::client::{
    Clock, Layout, Sequence, SequenceClientError, SequenceOptions, Snowflake, SnowflakeError,
    SnowflakeOptions,
};
use beacon::wire::ErrorCode;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

fn names(c: &Cluster) -> Vec<String> {
    c.beacons.iter().map(|b| b.addr.to_string()).collect()
}

fn leader_of(c: &Cluster) -> Leader {
    Leader::new(names(c), opts(), Duration::from_secs(10))
}

fn sequence_opts() -> SequenceOptions {
    SequenceOptions {
        connect: opts(),
        ..SequenceOptions::default()
    }
}

/// `per` values from `next` on each of `threads` threads, sorted; none may come twice.
fn on_threads(
    threads: usize,
    per: usize,
    next: impl Fn() -> u64 + Clone + Send + 'static,
) -> Vec<u64> {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let next = next.clone();
            std::thread::spawn(move || (0..per).map(|_| next()).collect::<Vec<u64>>())
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "a value came twice");
    all
}

async fn max_of(c: &mut beacon::client::Client, name: &str) -> u64 {
    let reply = c.sequences(name).await.expect("list");
    reply.sequences.first().map_or(0, |s| s.max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "seq-bad",
        r#"{"sequence": {"max_step": 1000, "max_sequences": 3}}"#,
    );
    let mut leader = leader_of(&cluster);
    leader.create_sequence("orders", 0, 10).await.unwrap();
    leader.next_segment("orders", 0).await.unwrap();
    let last = leader
        .next_segment("orders", 0)
        .await
        .unwrap()
        .segment
        .unwrap();
    assert_eq!((last.start, last.end), (11, 20));
    let mut c = beacon::client::Client::connect(&names(&cluster)[0], &opts())
        .await
        .unwrap();
    let before = c.sequences("").await.unwrap().sequences;

    let refused = |r: Result<(), ClientError>| -> (u32, String) {
        let e = r.expect_err("refused");
        (e.code().expect("a refusal"), e.to_string())
    };
    let (code, msg) = refused(leader.next_segment("nope", 0).await.map(|_| ()));
    assert_eq!(code, SequenceErrorCode::UnknownSequence as u32);
    assert!(msg.contains("no sequence named `nope`"), "{msg}");
    let (code, msg) = refused(leader.create_sequence("bad name", 0, 0).await.map(|_| ()));
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(msg.contains("sequence name `bad name` is invalid"), "{msg}");
    let (code, msg) = refused(
        leader
            .create_sequence(&"x".repeat(65), 0, 0)
            .await
            .map(|_| ()),
    );
    assert_eq!(code, ErrorCode::InvalidRequest as u32, "{msg}");
    let (code, msg) = refused(leader.create_sequence("big", 0, 1001).await.map(|_| ()));
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(
        msg.contains("step 1001 is over this beacon's limit of 1000"),
        "{msg}"
    );
    // A zero step: nothing to change to (the wire's 0 means "unchanged"), so say so.
    let (code, msg) = refused(leader.change_sequence("orders", 0, 0).await.map(|_| ()));
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(msg.contains("names a new step"), "{msg}");
    let (code, msg) = refused(leader.change_sequence("orders", 0, 3).await.map(|_| ()));
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(
        msg.contains("may only move forward (--start 21 or more)"),
        "{msg}"
    );
    let (code, msg) = refused(leader.create_sequence("orders", 0, 20).await.map(|_| ()));
    assert_eq!(code, SequenceErrorCode::SequenceExists as u32);
    assert!(msg.contains("already exists"), "{msg}");
    // A give-back that names another segment, or numbers not at the end.
    let (code, _) = refused(leader.give_back("orders", 5, 10, 999).await.map(|_| ()));
    assert_eq!(code, SequenceErrorCode::NotLastSegment as u32);
    let (code, _) = refused(leader.give_back("orders", 9, 3, 2).await.map(|_| ()));
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    // The last segment named right, but reaching back into the one before it: refused.
    let (code, msg) = refused(
        leader
            .give_back("orders", 5, last.end, last.index)
            .await
            .map(|_| ()),
    );
    assert_eq!(code, SequenceErrorCode::NotLastSegment as u32);
    assert!(msg.contains("nothing came back"), "{msg}");
    // The limit on the number of sequences.
    leader.create_sequence("b", 0, 0).await.unwrap();
    leader.create_sequence("c", 0, 0).await.unwrap();
    let (code, msg) = refused(leader.create_sequence("d", 0, 0).await.map(|_| ()));
    assert_eq!(code, SequenceErrorCode::TooManySequences as u32);
    assert!(msg.contains("sequence.max_sequences"), "{msg}");
    leader.delete_sequence("b").await.unwrap();
    leader.delete_sequence("c").await.unwrap();
    let after = c.sequences("").await.unwrap().sequences;
    assert_eq!(before, after, "refusals changed nothing");

    // Near the end of the number space: the last segment is what is left, then a clear
    // error, and max stays at u64::MAX.
    let start = u64::MAX - 4;
    leader.create_sequence("end", start, 3).await.unwrap();
    let s = leader
        .next_segment("end", 0)
        .await
        .unwrap()
        .segment
        .unwrap();
    assert_eq!((s.start, s.end), (start, start + 2));
    let s = leader
        .next_segment("end", 0)
        .await
        .unwrap()
        .segment
        .unwrap();
    assert_eq!((s.start, s.end), (u64::MAX - 1, u64::MAX));
    let (code, msg) = refused(leader.next_segment("end", 0).await.map(|_| ()));
    assert_eq!(code, SequenceErrorCode::SequenceExhausted as u32);
    assert!(msg.contains("exhausted"), "{msg}");
    assert_eq!(max_of(&mut c, "end").await, u64::MAX);
    // The daemon kept serving through all of it.
    assert!(leader.next_segment("orders", 0).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_double_buffer_serves_threads_prefetches_adapts_and_hands_its_tail_back() {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "seq-buffer",
        r#"{"sequence": {"max_step": 5000}}"#,
    );
    let mut leader = leader_of(&cluster);
    leader.create_sequence("ids", 0, 100).await.unwrap();
    let opts = SequenceOptions {
        target_period: Duration::from_secs(60),
        ..sequence_opts()
    };
    let seq = Arc::new(Sequence::open(names(&cluster), "ids", opts).await.unwrap());
    let s = seq.clone();
    let all = on_threads(8, 5_000, move || s.next_id().expect("numbers"));
    let status = seq.status();
    assert!(status.fetches >= 4, "{status:?}");
    // Segments used up well within the target period: the requests grew.
    assert!(status.count > 100, "{status:?}");
    assert!(status.outage.is_none(), "{status:?}");

    // A clean close hands the unused numbers back: the next segment starts right after the
    // last number used.
    let seq = Arc::into_inner(seq).expect("threads are done");
    let (start, end) = seq.close().await.unwrap().expect("a tail came back");
    assert!(end >= start);
    let next = leader
        .next_segment("ids", 1)
        .await
        .unwrap()
        .segment
        .unwrap();
    assert_eq!(next.start, start, "the tail is handed out again");
    assert!(start > *all.last().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_keep_coming_through_an_outage_then_fail_clearly_and_resume() {
    let ports = free_ports(1);
    let mut cluster = Cluster::start(BEACON.as_ref(), &ports, TICK_MS, "seq-outage");
    let mut leader = leader_of(&cluster);
    leader.create_sequence("o", 0, 1000).await.unwrap();
    // A fetch gives up on the cluster sooner than next_id() waits: the outage is known by
    // the time the wait ends.
    let opts = SequenceOptions {
        retry_for: Duration::from_millis(200),
        wait_for: Duration::from_millis(800),
        ..sequence_opts()
    };
    let seq = Sequence::open(names(&cluster), "o", opts).await.unwrap();
    let mut seen = BTreeSet::new();
    // Past the prefetch point: the next segment is fetched and held.
    for _ in 0..300 {
        assert!(seen.insert(seq.next_id_async().await.unwrap()));
    }
    eventually(Duration::from_secs(5), || async {
        (seq.status().fetches >= 2).then_some(())
    })
    .await
    .expect("the next segment is prefetched");
    cluster.beacons[0].kill();
    // Everything held is still served, with the beacon gone.
    let held = seq.status().remaining;
    assert!(held >= 1_700, "{:?}", seq.status());
    for _ in 0..held {
        assert!(seen.insert(seq.next_id_async().await.unwrap()));
    }
    let began = Instant::now();
    let err = seq.next_id_async().await.unwrap_err();
    assert!(began.elapsed() >= Duration::from_millis(750));
    let SequenceClientError::Empty { outage, .. } = &err else {
        panic!("{err}");
    };
    assert!(outage.is_some(), "the outage is reported: {err}");
    assert!(
        err.to_string().contains("both segments are used up"),
        "{err}"
    );
    assert!(seq.status().outage.is_some());

    // The beacon comes back with its stored state: numbers resume, never repeating.
    cluster.beacons[0].restart();
    let resumed = eventually(Duration::from_secs(10), || async {
        seq.next_id_async().await.ok()
    })
    .await
    .expect("numbers resume once a beacon answers");
    assert!(seen.insert(resumed));
    for _ in 0..100 {
        assert!(seen.insert(seq.next_id_async().await.unwrap()));
    }
    assert!(seq.status().outage.is_none());
}

/// A clock a test sets; sleeping advances it.
#[derive(Debug)]
struct TestClock(AtomicU64);

impl TestClock {
    fn at(ms: u64) -> Arc<TestClock> {
        Arc::new(TestClock(AtomicU64::new(ms)))
    }
    fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn sleep_ms(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

fn register_opts(port: u16) -> RegisterOptions {
    RegisterOptions {
        connect: opts(),
        retry_for: Duration::from_secs(5),
        ..RegisterOptions::new("SNOW", SocketAddr::from(([10, 9, 0, 1], port)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snowflake_ids_are_unique_start_after_the_previous_holder_and_stop_with_the_lease() {
    let ports = free_ports(1);
    // One node ID, so that every registration gets the same one.
    let mut cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "seq-snow",
        r#"{"id_range": [1, 1], "lease_ms": 1000}"#,
    );
    let beacons = names(&cluster);

    let a = Registration::register(beacons.clone(), register_opts(2))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let flake = Arc::new(
        Snowflake::new(&a, SnowflakeOptions::default())
            .await
            .unwrap(),
    );
    let f = flake.clone();
    let ids = on_threads(4, 20_000, move || f.next_id().expect("ids"));
    let layout = Layout::default();
    assert!(ids.iter().all(|id| layout.decode(*id).worker == 1));
    let last_ms = layout.decode(*ids.last().unwrap()).unix_ms;
    drop(flake);
    a.unregister().await.unwrap();

    // The next holder of ID 1 learns the last timestamp used.
    let b = Registration::register(beacons.clone(), register_opts(3))
        .await
        .unwrap();
    assert_eq!(b.node_id(), 1);
    let floor = b.reply().clock_floor_ms;
    assert!(floor >= last_ms, "floor {floor} < last used {last_ms}");
    // Its clock a second behind: it refuses rather than repeat an ID.
    let behind = SnowflakeOptions {
        clock: TestClock::at(floor - 1_000),
        start_wait: Duration::from_millis(200),
        ..SnowflakeOptions::default()
    };
    match Snowflake::new(&b, behind).await {
        Err(SnowflakeError::BehindPreviousHolder { floor_ms, .. }) => assert_eq!(floor_ms, floor),
        other => panic!("{other:?}"),
    }
    // A few milliseconds behind: it waits them out and starts after the floor.
    let clock = TestClock::at(floor - 3);
    let close = SnowflakeOptions {
        clock: clock.clone(),
        ..SnowflakeOptions::default()
    };
    let flake = Snowflake::new(&b, close)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let id = flake.next_id().unwrap();
    assert!(layout.decode(id).unix_ms > floor);
    assert!(
        id > *ids.last().unwrap(),
        "after every ID of the previous holder"
    );

    // The beacon goes away: no leader confirms the registration any more, and generation
    // stops within the reservation (well within the lease), with an error.
    cluster.beacons[0].kill();
    let began = Instant::now();
    let stopped = loop {
        clock.set(beacon::time::wall_ms());
        match flake.next_id() {
            Ok(_) => {}
            Err(e) => break e,
        }
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "generation never stopped"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(
        matches!(stopped, SnowflakeError::NotConfirmed { .. }),
        "{stopped}"
    );
}

/// One holder of numbers, for the fault test.
#[derive(Debug, Default)]
struct Taken {
    /// Per sequence: segments handed to raw clients (start, end).
    segments: BTreeMap<String, Vec<(u64, u64)>>,
    /// Per sequence: numbers handed out by double-buffered clients.
    numbers: BTreeMap<String, Vec<u64>>,
    /// Per sequence: the highest segment end acknowledged so far.
    acked: BTreeMap<String, u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_stay_unique_across_leader_kills_and_a_full_restart() {
    let ports = free_ports(3);
    let mut cluster = Cluster::start(BEACON.as_ref(), &ports, TICK_MS, "seq-faults");
    let beacons = names(&cluster);
    const SEQUENCES: [&str; 4] = ["a", "b", "c", "d"];
    let sequences = SEQUENCES;
    let mut leader = leader_of(&cluster);
    for name in sequences {
        leader.create_sequence(name, 0, 7).await.unwrap();
    }
    let taken = Arc::new(Mutex::new(Taken::default()));
    let running = Arc::new(AtomicBool::new(true));
    let progress = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    // Twelve clients take segments of random sizes (their answers count as progress); four
    // serve numbers from double buffers.
    for client in 0..12usize {
        let (taken, running, progress, beacons) = (
            taken.clone(),
            running.clone(),
            progress.clone(),
            beacons.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut leader = Leader::new(beacons, opts(), Duration::from_secs(20));
            let mut i = 0u64;
            while running.load(Ordering::Relaxed) {
                i += 1;
                let name = sequences[(client + i as usize) % sequences.len()];
                let count = 1 + (i * 7 + client as u64) % 40;
                match leader.next_segment(name, count).await {
                    Ok(reply) => {
                        let s = reply.segment.unwrap();
                        let mut t = taken.lock().unwrap();
                        t.segments
                            .entry(name.into())
                            .or_default()
                            .push((s.start, s.end));
                        let acked = t.acked.entry(name.into()).or_default();
                        *acked = (*acked).max(s.end);
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => assert!(
                        e.is_retryable() || matches!(e, ClientError::NoLeader { .. }),
                        "{e}"
                    ),
                }
            }
        }));
    }
    for (client, name) in SEQUENCES.iter().enumerate() {
        let (taken, running, beacons) = (taken.clone(), running.clone(), beacons.clone());
        let opts = SequenceOptions {
            wait_for: Duration::from_secs(20),
            ..sequence_opts()
        };
        tasks.push(tokio::spawn(async move {
            let seq = Sequence::open(beacons, name, opts).await.unwrap();
            let mut mine = Vec::new();
            while running.load(Ordering::Relaxed) {
                let n = seq
                    .next_id_async()
                    .await
                    .unwrap_or_else(|e| panic!("client {client}: {e}"));
                mine.push(n);
                if mine.len() % 64 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            taken
                .lock()
                .unwrap()
                .numbers
                .entry((*name).to_owned())
                .or_default()
                .extend(mine);
        }));
    }

    // An observer: the leader's max of each sequence is never below a segment acknowledged
    // before it asked.
    let observer = {
        let (taken, running, beacons) = (taken.clone(), running.clone(), beacons.clone());
        tokio::spawn(async move {
            let mut checks = 0u64;
            while running.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let owed = taken.lock().unwrap().acked.clone();
                for b in &beacons {
                    let Ok(mut c) = beacon::client::Client::connect(b, &opts()).await else {
                        continue;
                    };
                    let Ok(reply) = c.sequences("").await else {
                        continue;
                    };
                    if !reply.is_leader || reply.stale.is_some() {
                        continue;
                    }
                    for s in &reply.sequences {
                        let owed = owed.get(&s.name).copied().unwrap_or(0);
                        assert!(
                            s.max >= owed,
                            "leader {b} holds max {} of `{}`, below acknowledged {owed}",
                            s.max,
                            s.name
                        );
                    }
                    checks += 1;
                }
            }
            checks
        })
    };

    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let advance = |progress: Arc<AtomicU64>| {
        let from = progress.load(Ordering::Relaxed);
        async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            while progress.load(Ordering::Relaxed) < from + 300 {
                assert!(Instant::now() < deadline, "no progress after a fault");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    advance(progress.clone()).await;
    for round in 0..2 {
        // Under load a leader change can be under way just now: wait for one agreed on.
        let name = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
            .await
            .expect("a leader");
        let i = cluster
            .beacons
            .iter()
            .position(|b| b.addr.to_string() == name)
            .unwrap();
        cluster.beacons[i].kill();
        advance(progress.clone()).await;
        cluster.beacons[i].restart();
        eventually(Duration::from_secs(10), || agreed_leader(&addrs))
            .await
            .expect("the restarted beacon rejoins");
        advance(progress.clone()).await;
        println!("leader kill {} done", round + 1);
    }
    // The whole cluster goes down and comes back from its stored state.
    for b in &mut cluster.beacons {
        b.kill();
    }
    for b in &mut cluster.beacons {
        b.restart();
    }
    advance(progress.clone()).await;
    running.store(false, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let checks = observer.await.unwrap();

    let taken = std::mem::take(&mut *taken.lock().unwrap());
    let mut total_segments = 0;
    for name in sequences {
        let mut segments = taken.segments.get(name).cloned().unwrap_or_default();
        segments.sort_unstable();
        total_segments += segments.len();
        for w in segments.windows(2) {
            assert!(
                w[0].1 < w[1].0,
                "`{name}`: segments {:?} and {:?} overlap",
                w[0],
                w[1]
            );
        }
        let numbers = taken.numbers.get(name).cloned().unwrap_or_default();
        let unique: BTreeSet<u64> = numbers.iter().copied().collect();
        assert_eq!(
            unique.len(),
            numbers.len(),
            "`{name}`: a number was served twice"
        );
        for n in &numbers {
            let i = segments.partition_point(|s| s.0 <= *n);
            assert!(
                i == 0 || segments[i - 1].1 < *n,
                "`{name}`: number {n} was also in a raw segment"
            );
        }
        assert!(
            !numbers.is_empty() && !segments.is_empty(),
            "`{name}` was used"
        );
    }
    // Every beacon catches up with every acknowledged segment.
    for b in &beacons {
        let mut c = beacon::client::Client::connect(b, &opts()).await.unwrap();
        for name in sequences {
            let owed = taken.acked.get(name).copied().unwrap_or(0);
            let deadline = Instant::now() + Duration::from_secs(10);
            while max_of(&mut c, name).await < owed {
                assert!(
                    Instant::now() < deadline,
                    "{b}: `{name}` stays below acknowledged {owed}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    println!(
        "{total_segments} segments and {} numbers, all unique; {checks} leader checks of max",
        taken.numbers.values().map(Vec::len).sum::<usize>()
    );
}
