//! A client connection whose request was given up (timed out, or its future dropped) while
//! the beacon still answers it later: the late answer is never taken for the next
//! request's. Real beacon processes, stopped with SIGSTOP so that a request goes
//! unanswered on a live connection.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Client, ClientError, ConnectOptions};
use beacon::machines::registry::{RegisterOptions, Registration};
use beacon::pb;
use beacon_testkit::*;
use support::report_of;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn opts(timeout_ms: u64) -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_millis(timeout_ms),
        ..ConnectOptions::default()
    }
}

fn service(i: u8) -> SocketAddr {
    SocketAddr::from(([10, 7, 0, i], 7000))
}

async fn lone_beacon(config: &str) -> Cluster {
    let c = Cluster::start_with(BEACON.as_ref(), &free_ports(1), 100, "conn", config);
    let all = [c.beacons[0].addr];
    eventually(Duration::from_secs(10), || agreed_leader(&all))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_given_up_on_a_live_connection_never_answers_the_next_one() {
    let c = lone_beacon(r#"{"lease_ms": 60000}"#).await;
    let at = c.beacons[0].addr.to_string();
    // Each request waits up to 1.5 s: long enough for a write's fsync on a busy machine
    // once the beacon runs again, short enough to time out while it is stopped.
    let mut client = Client::connect(&at, &opts(1500)).await.unwrap();
    let node = client
        .register(&pb::registry::RegisterRequest {
            node_type: "LOGIC".into(),
            addr: service(1).to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .node
        .unwrap();
    let report = report_of(&node);

    // The beacon stops: a report times out, and another is given up by dropping it.
    c.beacons[0].pause();
    let err = client.report(&report).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    let dropped = tokio::time::timeout(Duration::from_millis(50), client.report(&report)).await;
    assert!(dropped.is_err(), "given up while the beacon is stopped");
    c.beacons[0].signal(libc::SIGCONT);

    // Both late answers arrive first; each later request gets its own answer.
    let ids = client.ids().await.unwrap();
    assert_eq!(ids.in_use, 1, "{ids:?}");
    let status = client.beacon_status().await.unwrap();
    assert_eq!(status.node, at);
    let reply = client
        .unregister(&pb::registry::UnregisterRequest {
            node_id: node.node_id,
            term: node.term,
            index: node.index,
            release: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(reply.node.unwrap().node_id, node.node_id);
    assert_eq!(client.ids().await.unwrap().in_use, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_unregisters_after_its_keepalive_was_cut_short() {
    // Reports every 250 ms; each waits at most until the lease would run out.
    let c = lone_beacon(r#"{"lease_ms": 1000}"#).await;
    let at = c.beacons[0].addr.to_string();
    let mut options = RegisterOptions::new("LOGIC", service(2));
    options.connect = opts(2000);
    let reg = Registration::register(vec![at.clone()], options)
        .await
        .unwrap();
    let id = reg.node_id();
    // Stop the beacon while a report is on its way, and let the keepalive's own deadline
    // cut that report short; then unregister on the same connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.beacons[0].pause();
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.beacons[0].signal(libc::SIGCONT);
    let freed = tokio::time::timeout(Duration::from_secs(5), reg.unregister())
        .await
        .expect("unregister answers")
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert_eq!(freed.node_id, id);
    let mut client = Client::connect(&at, &opts(2000)).await.unwrap();
    let ids = client.ids().await.unwrap();
    assert_eq!(
        (ids.in_use, ids.quarantined.len()),
        (0, 0),
        "the ID is free at once\n{}",
        c.logs()
    );
}
