//! Watchers that stop reading cost the beacon bounded memory and the others nothing: a
//! watcher's queue is bounded in bytes (`watch.queue_bytes`), a notice every watcher of the
//! same kind gets is encoded once and shared, and the drops are summed up in the log, not
//! logged one by one.
//!
//! Twenty watchers of every node on connections whose receive buffers hold 4 KiB stop
//! reading after their first answer; 6,000 registrations of 900 bytes of metadata follow
//! (5.4 MB of notices for each watcher, more than the kernel's send buffer of a connection
//! holds, 4 MiB here). Every stalled watcher is dropped once its queue
//! holds 256 KiB, the deepest queue never holds more than that and one notice, nothing is
//! left queued after, the notices were shared, and a watcher that reads heard every change.

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{ConnectOptions, Watch, WatchEvent};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::wire::{Cmd, Code, Frame, FrameCodec};
use beacon_testkit::*;
use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::Framed;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const QUEUE_BYTES: u64 = 256 << 10;
const STALLED: usize = 20;
const REGISTRATIONS: u32 = 6_000;

/// A watch of every node over a connection whose receive buffer holds 4 KiB, which reads
/// its first answer and nothing more: the connection, to keep it open.
async fn stalled_watcher(at: SocketAddr) -> Framed<tokio::net::TcpStream, FrameCodec> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(at).await.unwrap();
    let mut conn = Framed::new(tcp, FrameCodec::default());
    let hello = pb::Hello {
        role: pb::Role::Client as i32,
        version: beacon::wire::PROTOCOL_VERSION,
        ..Default::default()
    };
    conn.send(Frame::new(Cmd::Hello.code(), 1, 0, &hello))
        .await
        .unwrap();
    let ack = conn.next().await.unwrap().unwrap();
    assert!(!ack.is_error(), "handshake refused");
    let req = pb::registry::WatchRequest::default();
    conn.send(Frame::new(RegistryCmd::Watch.code(), 2, 0, &req))
        .await
        .unwrap();
    let first = conn.next().await.unwrap().unwrap();
    assert!(!first.is_error(), "watch refused");
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_watchers_are_bounded_in_bytes_and_share_their_notices() {
    let (c, admin) = cluster_with_admin(
        BEACON.as_ref(),
        1,
        100,
        "slow-watchers",
        serde_json::json!({
            "lease_ms": 600000,
            "id_range": [1, 100000],
            "watch": {"queue_bytes": QUEUE_BYTES},
        }),
    );
    let at = c.beacons[0].addr;
    wait_listening(at);
    eventually(Duration::from_secs(10), || status(at))
        .await
        .unwrap();
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(stalled_watcher(at).await);
    }
    let mut reader = Watch::start(
        vec![at.to_string()],
        Vec::new(),
        ConnectOptions::default(),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let reading = tokio::spawn(async move {
        let mut added = 0;
        while added < REGISTRATIONS {
            match tokio::time::timeout(Duration::from_secs(30), reader.next()).await {
                Ok(Ok(WatchEvent::Added(_))) => added += 1,
                Ok(Ok(_)) => {}
                other => panic!("the reading watcher: {other:?}"),
            }
        }
        added
    });
    let metadata = format!("{{\"pad\": \"{}\"}}", "x".repeat(880));
    let mut leader = beacon::client::Cluster::new(
        vec![at.to_string()],
        ConnectOptions::default(),
        Duration::from_secs(10),
    );
    for i in 0..REGISTRATIONS {
        let req = pb::registry::RegisterRequest {
            node_type: "LOGIC".into(),
            addr: format!("10.0.{}.{}:1", i / 256, i % 256),
            metadata: metadata.clone(),
            ..Default::default()
        };
        leader
            .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &req, "register")
            .await
            .unwrap_or_else(|e| panic!("registration {i}: {e}\n{}", c.logs()));
    }
    assert_eq!(
        reading.await.unwrap(),
        REGISTRATIONS,
        "the reader missed changes"
    );

    let metrics = || {
        let (code, text) = http_get(admin[0], "/metrics").expect("metrics");
        assert_eq!(code, 200);
        text
    };
    let text = metrics();
    let value = |name: &str| metric(&text, name).unwrap_or_else(|| panic!("no {name}"));
    // Every stalled watcher fell behind and was dropped.
    assert!(
        value("beacon_watchers_dropped_total") >= STALLED as f64,
        "dropped: {}\n{text}",
        value("beacon_watchers_dropped_total")
    );
    // No queue held more than its limit and one notice (about 1 KiB).
    let deepest = value("beacon_watch_backlog_deepest_bytes");
    assert!(
        deepest > 0.0 && deepest <= (QUEUE_BYTES + 2048) as f64,
        "the deepest queue held {deepest} bytes"
    );
    // What waits for the stalled watchers is bounded by their limits while their clients
    // keep the connections open (what their connections were writing when they were
    // dropped), and nothing once they close.
    let backlog = value("beacon_watch_backlog_bytes");
    assert!(
        backlog <= (STALLED as u64 * (QUEUE_BYTES + 2048)) as f64,
        "{backlog} bytes queued for {STALLED} stalled watchers"
    );
    drop(stalled);
    let gone = eventually(Duration::from_secs(10), || async {
        let text = metrics();
        let left = metric(&text, "beacon_watch_backlog_bytes")?;
        // The reader is done too: no watcher is left.
        let open = metric(&text, "beacon_watchers")?;
        (left == 0.0 && open == 0.0).then_some(())
    })
    .await;
    assert!(gone.is_some(), "bytes left queued:\n{}", metrics());
    // The watchers of one kind shared each notice: made once, handed out to the others
    // while the stalled ones were still there.
    let (encoded, shared) = (
        value("beacon_watch_notices_encoded_total"),
        value("beacon_watch_notices_shared_total"),
    );
    assert!(
        shared >= 5.0 * encoded,
        "encoded {encoded}, shared {shared}: notices were not shared"
    );
    // The drops are summed up, not one line each.
    let log = c.logs();
    let lines = log.lines().filter(|l| l.contains("fell behind")).count();
    assert!(
        (1..=5).contains(&lines),
        "{lines} log lines about watchers falling behind"
    );
    // The beacon serves on.
    assert!(status(at).await.is_some());
}
