//! A registry larger than a frame can be watched, and a herd of watchers that all list it at
//! once costs the writes little: the leader lists pointers to the registrations as of one
//! index, the watchers' connections encode the pages as they send them, a few listings at a
//! time, and the core encodes nothing.
//!
//! 5,000 registrations of 900 bytes of metadata (4.5 MB, over the 4 MiB frame): one watch
//! lists them all; then 60 watches start at once while a writer keeps registering, and
//! every write is answered within a bound far under what a core that encoded 60 registries
//! in a row would cost, and every watch gets every registration.

use std::time::{Duration, Instant};

use beacon::client::{Cluster as Leader, ConnectOptions, Watch};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const REGISTRATIONS: u32 = 5_000;
const HERD: usize = 60;

async fn register(leader: &mut Leader, i: u32, metadata: &str) -> Duration {
    let req = pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: format!("10.{}.{}.{}:1", i / 65536, (i / 256) % 256, i % 256),
        metadata: metadata.to_owned(),
        ..Default::default()
    };
    let t = Instant::now();
    leader
        .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &req, "register")
        .await
        .unwrap_or_else(|e| panic!("registration {i}: {e}"));
    t.elapsed()
}

/// A watch of every node at `at`, given a minute to find its leader and list.
async fn watch_all(at: std::net::SocketAddr) -> Result<Watch, beacon::client::ClientError> {
    Watch::start(
        vec![at.to_string()],
        Vec::new(),
        ConnectOptions::default(),
        Duration::from_secs(60),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_over_a_frame_is_watched_and_a_herd_of_listings_leaves_writes_answered() {
    let ports = free_ports(1);
    let c = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        100,
        "herd",
        r#"{"lease_ms": 600000, "id_range": [1, 100000]}"#,
    );
    let at = c.beacons[0].addr;
    eventually(Duration::from_secs(10), || status(at))
        .await
        .unwrap();
    let metadata = format!("{{\"pad\": \"{}\"}}", "x".repeat(880));
    let mut leader = Leader::new(
        vec![at.to_string()],
        ConnectOptions::default(),
        Duration::from_secs(10),
    );
    for i in 0..REGISTRATIONS {
        register(&mut leader, i, &metadata).await;
    }
    let one = watch_all(at)
        .await
        .unwrap_or_else(|e| panic!("a watch of 4.5 MB of registrations: {e}\n{}", c.logs()));
    assert_eq!(one.nodes().count(), REGISTRATIONS as usize);

    // The herd lists at once; a writer goes on meanwhile.
    let herd: Vec<_> = (0..HERD)
        .map(|_| tokio::spawn(async move { watch_all(at).await.map(|w| w.nodes().count()) }))
        .collect();
    let writer = tokio::spawn(async move {
        let metadata = format!("{{\"pad\": \"{}\"}}", "y".repeat(880));
        let mut slowest = Duration::ZERO;
        let mut i = REGISTRATIONS;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            slowest = slowest.max(register(&mut leader, i, &metadata).await);
            i += 1;
        }
        (slowest, i - REGISTRATIONS)
    });
    for listed in herd {
        let count = listed
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("a watch of the herd: {e}\n{}", c.logs()));
        assert!(count >= REGISTRATIONS as usize, "{count}");
    }
    let (slowest, written) = writer.await.unwrap();
    assert!(written > 0);
    // Encoding the registry sixty times over on the core would hold a write for seconds; a
    // slow machine stays well under this.
    assert!(
        slowest < Duration::from_secs(2),
        "a write waited {slowest:?} while the herd listed"
    );
}
