//! The core keeps its beat whatever the edges do: a herd of watchers that stopped reading
//! while thousands of large registrations arrived, then all resume at once, while a writer
//! goes on. The core steps on a thread of its own, so the herd's catching up (history
//! replayed or listings sent, on the edges' threads) neither stops its steps nor holds the
//! writes: every write is answered within a bound, and the beacon's own record of its beat
//! (`show beacon`'s longest gap between steps over the last minute, the
//! `beacon_step_gap_seconds` histogram) stays below a bound loose enough for a shared
//! machine. The benchmark's `gray` part holds the tight figures.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const WATCHERS: usize = 160;
const REGISTRATIONS: u32 = 6_000;
const WRITERS: u32 = 4;
/// Loose: a tick is 100 ms here, and a core starved by the herd went 2.5 s without a step.
const STEP_GAP_BOUND: Duration = Duration::from_millis(1_000);
const WRITE_BOUND: Duration = Duration::from_millis(2_000);

/// A client of the beacon at `at` that rides out a busy moment.
fn client(at: std::net::SocketAddr) -> Leader {
    Leader::new(
        vec![at.to_string()],
        ConnectOptions::default(),
        Duration::from_secs(30),
    )
}

/// Registers service `i` with `metadata`, or panics saying which.
async fn register(leader: &mut Leader, i: u32, metadata: &str) {
    let request = pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: format!("10.{}.{}.{}:1", i / 65536, (i / 256) % 256, i % 256),
        metadata: metadata.to_owned(),
        ..Default::default()
    };
    leader
        .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &request, "register")
        .await
        .unwrap_or_else(|e| panic!("registration {i}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_herd_of_watchers_resuming_at_once_leaves_the_core_its_beat_and_the_writes_answered() {
    let ports = free_ports(1);
    let c = Cluster::start_with(
        Path::new(BEACON),
        &ports,
        100,
        "beat",
        r#"{"lease_ms": 600000, "id_range": [1, 100000]}"#,
    );
    let at = c.beacons[0].addr;
    eventually(Duration::from_secs(10), || status(at))
        .await
        .expect("the beacon answers");
    let nebcli_bin = nebcli(Path::new(BEACON));
    let dir = tempfile::tempdir().expect("a directory for the watchers' output");

    // The watchers, at the lowest priority: their own decoding costs the beacon nothing.
    let watchers: Vec<Process> = (0..WATCHERS)
        .map(|i| {
            Process::start(
                Path::new("nice"),
                vec![
                    "-n".into(),
                    "19".into(),
                    nebcli_bin.display().to_string(),
                    "-s".into(),
                    at.to_string(),
                    "watch".into(),
                    "nodes".into(),
                ],
                vec![],
                dir.path().join(format!("watcher-{i}.log")),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // They stop reading while the registrations arrive.
    for w in &watchers {
        w.pause();
    }
    let metadata = format!(r#"{{"pad": "{}"}}"#, "x".repeat(880));
    let next = Arc::new(AtomicU32::new(0));
    let mut loaders = Vec::new();
    for _ in 0..WRITERS {
        let (next, metadata) = (next.clone(), metadata.clone());
        loaders.push(tokio::spawn(async move {
            let mut leader = client(at);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= REGISTRATIONS {
                    return;
                }
                register(&mut leader, i, &metadata).await;
            }
        }));
    }
    for l in loaders {
        l.await.expect("a loader");
    }

    // All resume at once while a writer goes on.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let (stop, metadata) = (stop.clone(), metadata.clone());
        async move {
            let mut leader = client(at);
            let mut took = Vec::new();
            let mut i = REGISTRATIONS;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                register(&mut leader, i, &metadata).await;
                took.push(started.elapsed());
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            took
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for w in &watchers {
        w.signal(libc::SIGCONT);
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    stop.store(true, Ordering::Relaxed);
    let took = writer.await.expect("the writer");
    let slowest = took.iter().max().copied().unwrap_or_default();
    let beat = status(at).await.expect("the beacon's status");
    println!(
        "{} writes during the herd, slowest {slowest:?}; longest gap between steps over the last minute {} ms, longest wait for the core {} ms",
        took.len(),
        beat.step_gap_worst_ms,
        beat.queue_wait_worst_ms
    );
    assert!(
        took.len() > 10,
        "the writer made only {} writes in 8 s",
        took.len()
    );
    assert!(
        slowest < WRITE_BOUND,
        "a write during the herd took {slowest:?}\n{}",
        c.logs()
    );
    assert!(
        beat.step_gap_worst_ms > 0,
        "the beacon keeps no record of its beat"
    );
    assert!(
        Duration::from_millis(beat.step_gap_worst_ms) < STEP_GAP_BOUND,
        "the core went {} ms without a step during the herd (tick 100 ms)\n{}",
        beat.step_gap_worst_ms,
        c.logs()
    );
    drop(watchers);
}
