//! A rolling upgrade's mixed cluster, on the wire: a peer of the protocol version before this
//! one refuses our version in the handshake (as a beacon of that version does). The beacon
//! links to it in its version, so its heartbeats reach the old peer, and a change of
//! membership is refused while a member speaks a version that cannot read it.

use std::net::SocketAddr;
use std::time::Duration;

use beacon::pb;
use beacon::wire::{
    Cmd, Code, ErrorCode, FLAG_ERROR, Frame, FrameCodec, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use beacon_testkit::*;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_util::codec::Framed;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const CLUSTER: &str = "mixed";

/// A peer of the version before at `me`: refuses any newer handshake with
/// `UNSUPPORTED_VERSION`, as such a beacon does, and on a handshake in its version answers
/// and reports the heartbeats it is sent.
async fn older_peer(listener: TcpListener, me: SocketAddr, seen: tokio::sync::mpsc::Sender<u32>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut conn = Framed::new(stream, FrameCodec::new(1 << 20));
            let Some(Ok(frame)) = conn.next().await else {
                return;
            };
            let hello: pb::Hello = frame.decode().expect("a Hello");
            let _ = seen.send(hello.version).await;
            if hello.version > OLDEST_PROTOCOL_VERSION {
                let refusal = pb::ErrorReply {
                    code: ErrorCode::UnsupportedVersion as u32,
                    msg: format!(
                        "protocol version {} is newer than this beacon speaks (protocol versions {OLDEST_PROTOCOL_VERSION} to {OLDEST_PROTOCOL_VERSION})",
                        hello.version
                    ),
                    ..Default::default()
                };
                let reply = Frame::new(Cmd::Hello.response(), frame.seq, FLAG_ERROR, &refusal);
                let _ = conn.send(reply).await;
                return;
            }
            let ack = pb::HelloAck {
                cluster: CLUSTER.into(),
                node: me.to_string(),
                version: OLDEST_PROTOCOL_VERSION,
                ..Default::default()
            };
            let _ = conn
                .send(Frame::new(Cmd::Hello.response(), frame.seq, 0, &ack))
                .await;
            while let Some(Ok(frame)) = conn.next().await {
                if frame.cmd == Cmd::LeaderElection.code() {
                    // A heartbeat in our version: reported as 0.
                    let _ = seen.send(0).await;
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beacon_speaks_the_version_before_to_a_peer_that_knows_no_newer() {
    assert_eq!(OLDEST_PROTOCOL_VERSION + 1, PROTOCOL_VERSION);
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let (me, old, third) = (addr(ports[0]), addr(ports[1]), addr(ports[2]));
    let listener = TcpListener::bind(old).await.unwrap();
    let (tx, mut seen) = tokio::sync::mpsc::channel(64);
    tokio::spawn(older_peer(listener, old, tx));
    let keys = serde_json::from_str(r#"{"mode": "quorum"}"#).unwrap();
    let mut b = Beacon::start(
        BEACON.as_ref(),
        me,
        dir.path(),
        beacon_args(dir.path(), ports[0], &ports, 100, CLUSTER, keys),
    );
    let mut versions = Vec::new();
    let heard = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(v) = seen.recv().await {
            versions.push(v);
            if v == 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        heard,
        Ok(true),
        "no heartbeat reached the old peer: {versions:?}\n{}",
        b.log()
    );
    assert_eq!(
        versions[..2],
        [PROTOCOL_VERSION, OLDEST_PROTOCOL_VERSION],
        "tried ours, then the one before"
    );
    // A change of membership waits until every member reads it.
    let _ = third;
    let mut c = beacon::client::Client::connect(&me.to_string(), &Default::default())
        .await
        .unwrap();
    let req = pb::ChangeMembersRequest {
        action: pb::change_members_request::Action::Remove as i32,
        node: third.to_string(),
        learner: false,
    };
    let refused: Result<pb::ChangeMembersReply, _> = c
        .request(Cmd::ChangeMembers, &req, "the membership change")
        .await;
    let err = refused.expect_err("refused").to_string();
    assert!(
        err.contains(&format!(
            "{old} speaks protocol version {OLDEST_PROTOCOL_VERSION}"
        )),
        "{err}"
    );
    b.kill();
}
