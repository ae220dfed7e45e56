//! Bad input against a real beacon process: every kind is answered with an error that says
//! what was wrong (where the frame head was readable), logged, and the daemon keeps serving.

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Client, ConnectOptions};
use beacon::pb;
use beacon::wire::frame::{HEAD_LEN, MAGIC, VERSION};
use beacon::wire::{
    Cmd, Code, ErrorCode, FLAG_MORE, FLAG_ONEWAY, Frame, FrameCodec, PROTOCOL_VERSION,
};
use beacon_testkit::*;
use bytes::{BufMut, BytesMut};
use futures_util::{SinkExt, StreamExt};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

const MAX_FRAME: usize = 4 * 1024 * 1024;

fn start_beacon() -> (Beacon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(2);
    let (me, listed_peer) = (addr(port[0]), addr(port[1]));
    let b = Beacon::start(
        BEACON.as_ref(),
        me,
        dir.path(),
        [
            "--listen",
            &me.to_string(),
            // A second (never started) beacon, so peer handshakes have a valid identity.
            "--peers",
            &listed_peer.to_string(),
            "--cluster",
            "blue",
            "--tick-ms",
            "100",
            "--data-dir",
            &dir.path().join("{node}").display().to_string(),
        ]
        .map(String::from)
        .to_vec(),
    );
    wait_listening(me);
    (b, dir)
}

/// Reads everything until the server closes (bounded), and decodes the frames in it.
async fn read_until_closed(stream: &mut TcpStream) -> (Vec<Frame>, bool) {
    let mut buf = BytesMut::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .unwrap_or(false);
    let mut codec = FrameCodec::new(MAX_FRAME);
    let mut frames = Vec::new();
    while let Ok(Some(f)) = codec.decode(&mut buf) {
        frames.push(f);
    }
    (frames, closed)
}

fn error_of(frame: &Frame) -> (Option<ErrorCode>, String) {
    assert!(frame.is_error(), "expected an error frame, got {frame:?}");
    let e = pb::ErrorReply::decode(frame.body.as_ref()).unwrap();
    (ErrorCode::from_code(e.code), e.msg)
}

fn head(cmd: u32, seq: u32, len: u32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_slice(&MAGIC);
    b.put_u8(VERSION);
    b.put_u8(0);
    b.put_u32(cmd);
    b.put_u32(seq);
    b.put_u32(len);
    b
}

async fn assert_still_serving(b: &mut Beacon) {
    assert!(b.is_running(), "beacon died:\n{}", b.log());
    let s = status(b.addr).await.expect("beacon still answers");
    assert_eq!(s.node, b.addr.to_string());
}

async fn client_conn(addr: SocketAddr) -> Framed<TcpStream, FrameCodec> {
    let mut conn = Framed::new(
        TcpStream::connect(addr).await.unwrap(),
        FrameCodec::new(MAX_FRAME),
    );
    let hello = pb::Hello {
        role: pb::Role::Client as i32,
        version: PROTOCOL_VERSION,
        ..Default::default()
    };
    conn.send(Frame::new(1, 1, 0, &hello)).await.unwrap();
    let ack = conn.next().await.unwrap().unwrap();
    assert_eq!((ack.cmd, ack.seq, ack.is_error()), (2, 1, false));
    conn
}

async fn exchange(conn: &mut Framed<TcpStream, FrameCodec>, frame: Frame) -> Frame {
    conn.send(frame).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .expect("reply in time")
        .expect("connection open")
        .expect("a frame")
}

#[tokio::test]
async fn garbage_oversize_and_truncation_are_refused_and_the_daemon_goes_on() {
    let (mut b, _dir) = start_beacon();

    // Garbage (an HTTP request on the cluster port): error naming the problem, then closed.
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (frames, closed) = read_until_closed(&mut s).await;
    assert!(closed);
    let (code, msg) = error_of(&frames[0]);
    assert_eq!(code, Some(ErrorCode::BadFrame));
    assert!(
        msg.contains("not a beacon frame") && msg.contains("looks like HTTP"),
        "{msg}"
    );
    assert_still_serving(&mut b).await;

    // A head announcing a body over the limit: refused from the head alone, addressed to the
    // offending request.
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    s.write_all(&head(1, 77, (MAX_FRAME + 1) as u32))
        .await
        .unwrap();
    let (frames, closed) = read_until_closed(&mut s).await;
    assert!(closed);
    assert_eq!((frames[0].cmd, frames[0].seq), (2, 77));
    let (code, msg) = error_of(&frames[0]);
    assert_eq!(code, Some(ErrorCode::FrameTooLarge));
    assert!(
        msg.contains(&format!(
            "{} bytes exceeds the limit of {MAX_FRAME} bytes (`max_frame_bytes`)",
            MAX_FRAME + 1
        )),
        "{msg}"
    );
    assert_still_serving(&mut b).await;

    // A truncated frame: the sender goes away mid-body.
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    let mut partial = head(1, 5, 100);
    partial.put_slice(&[0u8; 10]);
    s.write_all(&partial).await.unwrap();
    drop(s);
    // Wrong protocol version.
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    let mut bad_version = head(1, 6, 0);
    bad_version[2] = 9;
    s.write_all(&bad_version).await.unwrap();
    let (frames, _) = read_until_closed(&mut s).await;
    let (code, msg) = error_of(&frames[0]);
    assert_eq!(code, Some(ErrorCode::UnsupportedVersion));
    assert!(msg.contains("unsupported protocol version 9"), "{msg}");

    assert_still_serving(&mut b).await;
    // The beacon notices the truncated sender's close on its own connection task, so its log
    // line may come after the replies above: wait for it, bounded.
    let truncated = format!(
        "truncated frame: connection closed after {} of {} bytes",
        HEAD_LEN + 10,
        HEAD_LEN + 100
    );
    let logged = eventually(Duration::from_secs(5), || async {
        b.log().contains(&truncated).then_some(())
    })
    .await;
    let log = b.log();
    assert!(logged.is_some(), "{log}");
    assert!(log.contains("bad frame: not a beacon frame"), "{log}");
}

#[tokio::test]
async fn wrong_requests_get_errors_and_the_connection_stays_usable() {
    let (mut b, _dir) = start_beacon();

    // A request before the handshake: told to say Hello first, and then it can.
    let mut conn = Framed::new(
        TcpStream::connect(b.addr).await.unwrap(),
        FrameCodec::new(MAX_FRAME),
    );
    let reply = exchange(
        &mut conn,
        Frame::new(301, 1, 0, &pb::BeaconStatusRequest {}),
    )
    .await;
    let (code, msg) = error_of(&reply);
    assert_eq!(code, Some(ErrorCode::HandshakeRequired));
    assert!(msg.contains("send Hello (cmd 1) first"), "{msg}");
    let hello = pb::Hello {
        role: pb::Role::Client as i32,
        version: PROTOCOL_VERSION,
        ..Default::default()
    };
    let ack = exchange(&mut conn, Frame::new(1, 2, 0, &hello)).await;
    assert!(!ack.is_error());

    // Unknown command: error, connection goes on.
    let mut conn = client_conn(b.addr).await;
    let reply = exchange(
        &mut conn,
        Frame {
            cmd: 999,
            seq: 4,
            flags: 0,
            body: Default::default(),
        },
    )
    .await;
    assert_eq!((reply.cmd, reply.seq), (1000, 4));
    let (code, msg) = error_of(&reply);
    assert_eq!(code, Some(ErrorCode::UnknownCommand));
    assert_eq!(msg, "unknown command 999 (seq 4)");
    // A body that is not the command's message.
    let reply = exchange(
        &mut conn,
        Frame {
            cmd: 301,
            seq: 5,
            flags: 0,
            body: vec![0xff, 0xff, 0xff].into(),
        },
    )
    .await;
    let (code, msg) = error_of(&reply);
    assert_eq!(code, Some(ErrorCode::MalformedBody));
    assert!(
        msg.starts_with("frame cmd 301 seq 5: malformed body"),
        "{msg}"
    );
    // Heartbeats are for beacons only.
    let reply = exchange(
        &mut conn,
        Frame::new(
            113,
            6,
            0,
            &pb::Election {
                is_leader: 1,
                term: 99,
                ..Default::default()
            },
        ),
    )
    .await;
    let (code, msg) = error_of(&reply);
    assert_eq!(code, Some(ErrorCode::UnknownCommand));
    assert!(msg.contains("accepted from beacons only"), "{msg}");
    // The same connection still answers a good request.
    let reply = exchange(
        &mut conn,
        Frame::new(Cmd::BeaconStatus.code(), 7, 0, &pb::BeaconStatusRequest {}),
    )
    .await;
    assert!(!reply.is_error());
    let s = pb::BeaconStatus::decode(reply.body.as_ref()).unwrap();
    assert!(
        s.term <= 1,
        "the client's fake heartbeat (term 99) changed nothing: {s:?}"
    );

    assert_still_serving(&mut b).await;
}

#[tokio::test]
async fn handshakes_from_the_wrong_cluster_or_an_unknown_beacon_are_refused() {
    let (mut b, _dir) = start_beacon();
    let opts = |cluster: &str| ConnectOptions {
        cluster: Some(cluster.into()),
        ..ConnectOptions::default()
    };

    // A client insisting on another cluster.
    let err = Client::connect(&b.addr.to_string(), &opts("green"))
        .await
        .unwrap_err();
    assert!(err.is(ErrorCode::WrongCluster));
    assert!(
        err.to_string()
            .contains("this beacon serves cluster `blue`, the peer is in `green`"),
        "{err}"
    );
    // The right cluster is fine.
    Client::connect(&b.addr.to_string(), &opts("blue"))
        .await
        .unwrap();

    // Beacons: wrong cluster, unlisted identity, our own identity, garbage identity.
    let peer_hello = |cluster: &str, node: String| pb::Hello {
        cluster: cluster.into(),
        role: pb::Role::Peer as i32,
        node,
        version: PROTOCOL_VERSION,
        election: Some(pb::Election {
            is_leader: 1,
            term: 50,
            ..Default::default()
        }),
        ..Default::default()
    };
    let listed = b.addr.to_string();
    let cases = [
        (
            peer_hello("green", listed.clone()),
            ErrorCode::WrongCluster,
            "wrong cluster",
        ),
        (
            peer_hello("blue", "127.0.0.1:1".into()),
            ErrorCode::UnknownBeacon,
            "is not a member of this cluster",
        ),
        (
            peer_hello("blue", b.addr.to_string()),
            ErrorCode::UnknownBeacon,
            "this beacon's own address",
        ),
        (
            peer_hello("blue", "nonsense".into()),
            ErrorCode::MalformedBody,
            "is not an ip:port address",
        ),
    ];
    for (hello, want, text) in cases {
        let mut s = TcpStream::connect(b.addr).await.unwrap();
        let mut buf = BytesMut::new();
        tokio_util::codec::Encoder::encode(
            &mut FrameCodec::new(MAX_FRAME),
            Frame::new(1, 9, 0, &hello),
            &mut buf,
        )
        .unwrap();
        s.write_all(&buf).await.unwrap();
        let (frames, closed) = read_until_closed(&mut s).await;
        assert!(closed, "a refused beacon is disconnected");
        let (code, msg) = error_of(&frames[0]);
        assert_eq!(code, Some(want), "{msg}");
        assert!(msg.contains(text), "{msg}");
    }
    // Unknown roles and bad versions.
    let bad = [
        (
            pb::Hello {
                role: 7,
                version: PROTOCOL_VERSION,
                ..Default::default()
            },
            ErrorCode::MalformedBody,
        ),
        (
            pb::Hello {
                role: 2,
                version: PROTOCOL_VERSION + 1,
                ..Default::default()
            },
            ErrorCode::UnsupportedVersion,
        ),
    ];
    for (hello, want) in bad {
        let mut conn = Framed::new(
            TcpStream::connect(b.addr).await.unwrap(),
            FrameCodec::new(MAX_FRAME),
        );
        let reply = exchange(&mut conn, Frame::new(1, 1, 0, &hello)).await;
        assert_eq!(error_of(&reply).0, Some(want));
    }

    // None of those fake leaders (term 50) got into the election.
    let s = status(b.addr).await.unwrap();
    assert!(s.term <= 1, "{s:?}");
    assert!(s.beacons.iter().all(|r| r.is_self || !r.is_online));
    assert_still_serving(&mut b).await;
    let log = b.log();
    assert!(log.contains("handshake refused: wrong cluster"), "{log}");
    assert!(log.contains("is not a member of this cluster"), "{log}");
    // A newer peer is told which protocol versions this beacon speaks.
    assert!(
        log.contains(&format!(
            "protocol version {} is newer than this beacon",
            PROTOCOL_VERSION + 1
        )) && log.contains(&format!("(protocol versions 2 to {PROTOCOL_VERSION})")),
        "{log}"
    );
}

#[tokio::test]
async fn a_one_way_frame_with_a_bad_body_is_logged_not_answered() {
    let (mut b, _dir) = start_beacon();
    let mut conn = client_conn(b.addr).await;
    // One-way unknown command: the sender expects no reply, so none comes; the next request's
    // reply is the next frame on the wire.
    conn.send(Frame {
        cmd: 555,
        seq: 2,
        flags: FLAG_ONEWAY,
        body: Default::default(),
    })
    .await
    .unwrap();
    let reply = exchange(
        &mut conn,
        Frame::new(301, 3, 0, &pb::BeaconStatusRequest {}),
    )
    .await;
    assert_eq!((reply.cmd, reply.seq, reply.is_error()), (302, 3, false));
    assert!(b.log().contains("unknown command 555"));
    assert_still_serving(&mut b).await;
}

#[tokio::test]
async fn a_fragment_from_a_client_is_refused_and_the_connection_goes_on() {
    let (mut b, _dir) = start_beacon();
    let mut conn = client_conn(b.addr).await;
    let fragment = Frame::new(301, 5, FLAG_MORE, &pb::BeaconStatusRequest {});
    let (code, msg) = error_of(&exchange(&mut conn, fragment).await);
    assert_eq!(code, Some(ErrorCode::FrameTooLarge));
    assert!(
        msg.contains("frame cmd 301 seq 5 is a fragment") && msg.contains("only beacons"),
        "{msg}"
    );
    // The same connection still serves whole requests.
    let reply = exchange(
        &mut conn,
        Frame::new(301, 6, 0, &pb::BeaconStatusRequest {}),
    )
    .await;
    assert!(!reply.is_error(), "{reply:?}");
    assert_still_serving(&mut b).await;
}

/// Random and mutated frames at a beacon's port, as fast as one client sends them for 12 s
/// (more than one summary period): every refused connection is counted in the metrics, but
/// the log gets each kind once in full and then one summary line per period, not a line per
/// connection; the beacon serves throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_connections_logs_a_bounded_number_of_lines() {
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let (me, listed_peer, admin) = (addr(ports[0]), addr(ports[1]), addr(ports[2]));
    let mut b = Beacon::start(
        BEACON.as_ref(),
        me,
        dir.path(),
        [
            "--listen",
            &me.to_string(),
            "--peers",
            &listed_peer.to_string(),
            "--cluster",
            "blue",
            "--admin",
            &admin.to_string(),
            "--data-dir",
            &dir.path().join("{node}").display().to_string(),
        ]
        .map(String::from)
        .to_vec(),
    );
    wait_listening(me);
    let warnings_before = b.log().matches(" WARN ").count();
    let mut rng = beacon_testkit::rng::SimRng::new(7);
    let until = std::time::Instant::now() + Duration::from_secs(12);
    let mut sent = 0u64;
    while std::time::Instant::now() < until {
        let Ok(mut s) = TcpStream::connect(me).await else {
            continue;
        };
        let bytes: Vec<u8> = match rng.below(4) {
            // Garbage.
            0 => (0..64).map(|_| rng.below(256) as u8).collect(),
            // An old protocol version.
            1 => {
                let mut h = head(1, 1, 0);
                h[2] = VERSION.wrapping_sub(1);
                h.to_vec()
            }
            // An oversized body.
            2 => head(1, 1, (MAX_FRAME + 1) as u32).to_vec(),
            // A Hello for another cluster.
            _ => {
                let hello = pb::Hello {
                    cluster: "green".into(),
                    role: 2,
                    version: PROTOCOL_VERSION,
                    ..Default::default()
                };
                let mut h = head(1, 1, hello.encoded_len() as u32);
                hello.encode(&mut h).unwrap();
                h.to_vec()
            }
        };
        let _ = s.write_all(&bytes).await;
        let _ = tokio::time::timeout(Duration::from_millis(200), s.read(&mut [0u8; 256])).await;
        sent += 1;
    }
    assert!(sent > 200, "the flood went through: {sent}");
    assert_still_serving(&mut b).await;
    let log = b.log();
    let warnings = log.matches(" WARN ").count() - warnings_before;
    assert!(
        warnings <= 12,
        "{sent} refused connections made {warnings} warnings:\n{log}"
    );
    assert!(
        log.contains("connections refused since the last such warning"),
        "{log}"
    );
    let (_, metrics) = http_get(admin, "/metrics").unwrap();
    let counted: f64 = [
        "bad_magic",
        "unsupported_version",
        "frame_too_large",
        "wrong_cluster",
    ]
    .iter()
    .filter_map(|r| {
        metric(
            &metrics,
            &format!("beacon_connections_refused_total{{reason=\"{r}\"}}"),
        )
    })
    .sum();
    assert!(
        counted >= sent as f64 * 0.9,
        "{counted} of {sent} counted:\n{metrics}"
    );
}
