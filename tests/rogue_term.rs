//! A process posing as a configured beacon (no peer authentication configured) claims the
//! leadership in term u64::MAX: the beacons refuse its messages, log it once with the
//! sender, never adopt the term, and writes go on as before.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::wire::{Cmd, Code, FLAG_ONEWAY, Frame, FrameCodec, PROTOCOL_VERSION};
use beacon_testkit::*;
use futures_util::{SinkExt, StreamExt};
use prost::Message;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

/// The `Hello` a beacon of this test's clusters sends, claiming to be `node`, with the
/// registry's part (the default id range).
fn hello(
    cluster: &str,
    node: SocketAddr,
    beacons: &[SocketAddr],
    election: pb::Election,
) -> Vec<u8> {
    let mut names: Vec<String> = beacons.iter().map(|b| b.to_string()).collect();
    names.sort();
    let mut buf = pb::Hello {
        cluster: cluster.into(),
        role: pb::Role::Peer as i32,
        node: node.to_string(),
        version: PROTOCOL_VERSION,
        election: Some(election),
        mode: "quorum".into(),
        beacons: names,
        ..Default::default()
    }
    .encode_to_vec();
    pb::registry::RegistryHello {
        id_first: 1,
        id_last: 1023,
    }
    .encode(&mut buf)
    .unwrap();
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rogue_claiming_term_u64_max_is_refused_and_writes_go_on() {
    let ports = free_ports(3);
    let cluster = Cluster::start(BEACON.as_ref(), &ports, 100, "rogue");
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let leader_addr: SocketAddr = leader.parse().unwrap();
    let term_before = status(leader_addr).await.unwrap().term;
    // The rogue poses as the last beacon, at every beacon, claiming leadership in u64::MAX.
    let posing_as = addrs[2];
    let claim = pb::Election {
        is_leader: 1,
        term: u64::MAX,
        leader: posing_as.to_string(),
        sees: u64::MAX,
        eligible: true,
        ..Default::default()
    };
    let mut conns = Vec::new();
    for target in addrs.iter().filter(|a| **a != posing_as) {
        let tcp = tokio::net::TcpStream::connect(target).await.unwrap();
        let mut conn = tokio_util::codec::Framed::new(tcp, FrameCodec::new(1 << 20));
        let body = hello("rogue", posing_as, &addrs, claim.clone());
        let frame = Frame {
            cmd: Cmd::Hello.code(),
            seq: 1,
            flags: 0,
            body: body.into(),
        };
        conn.send(frame).await.unwrap();
        let ack = conn.next().await.unwrap().unwrap();
        assert!(
            !ack.is_error(),
            "a beacon without peer authentication takes the Hello"
        );
        conns.push(conn);
    }
    // Heartbeats for two seconds while a service registers through the cluster.
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut client = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(5));
    let until = Instant::now() + Duration::from_secs(2);
    let mut i = 0u32;
    while Instant::now() < until {
        for conn in &mut conns {
            let _ = conn
                .send(Frame::new(
                    Cmd::LeaderElection.code(),
                    0,
                    FLAG_ONEWAY,
                    &claim,
                ))
                .await;
        }
        i += 1;
        let req = pb::registry::RegisterRequest {
            node_type: "LOGIC".into(),
            addr: format!("10.3.0.{i}:80"),
            ..Default::default()
        };
        let r: Result<pb::registry::RegisterReply, _> =
            client.call(RegistryCmd::Register, &req, "register").await;
        r.unwrap_or_else(|e| {
            panic!(
                "a write failed while the rogue claimed: {e}\n{}",
                cluster.logs()
            )
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // No beacon took the term; the leader is the same, in the same term.
    for a in &addrs {
        let s = status(*a).await.unwrap();
        assert!(s.term < 1 << 48, "{a} took term {}", s.term);
    }
    assert_eq!(agreed_leader(&addrs).await, Some(leader.clone()));
    assert_eq!(status(leader_addr).await.unwrap().term, term_before);
    // Each beacon warned at start that its peers are not authenticated.
    assert_eq!(
        cluster
            .logs()
            .matches("peers are not authenticated")
            .count(),
        3,
        "{}",
        cluster.logs()
    );
    // Said once per beacon, naming the sender.
    for (b, a) in cluster.beacons.iter().zip(&addrs) {
        if *a == posing_as {
            continue;
        }
        let log = b.log();
        let said = log.matches("is beyond 281474976710656").count();
        assert_eq!(said, 1, "{a} said it {said} times:\n{log}");
        assert!(
            log.contains(&format!("refused a message from {posing_as}")),
            "{log}"
        );
    }
}

/// A beacon's link to another is read on the core's thread, which hands back to the edges
/// what is not a whole heartbeat of modest size. Over one link posing as a beacon: a
/// heartbeat that does not decode is refused with an error, a request is answered, a
/// heartbeat in fragments is put together, and after each the link carries the next frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beacons_link_refuses_a_bad_heartbeat_answers_a_request_and_takes_fragments() {
    let ports = free_ports(3);
    let cluster = Cluster::start(BEACON.as_ref(), &ports, 100, "rogue");
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let (posing_as, target) = (addrs[2], addrs[0]);
    // A stale state (term 1): taken from the link and ignored by the core.
    let stale = pb::Election {
        term: 1,
        leader: posing_as.to_string(),
        ..Default::default()
    };
    let tcp = tokio::net::TcpStream::connect(target).await.unwrap();
    let mut conn = tokio_util::codec::Framed::new(tcp, FrameCodec::new(1 << 20));
    let body = hello("rogue", posing_as, &addrs, stale.clone());
    conn.send(Frame {
        cmd: Cmd::Hello.code(),
        seq: 1,
        flags: 0,
        body: body.into(),
    })
    .await
    .unwrap();
    let ack = conn.next().await.unwrap().unwrap();
    assert!(!ack.is_error(), "the Hello is taken");
    let status_of = |frame: Frame, seq: u32| {
        assert!(!frame.is_error(), "the request on the link is answered");
        assert_eq!(frame.seq, seq);
        let status: pb::BeaconStatus = frame.decode().unwrap();
        assert_eq!(status.node, target.to_string());
    };

    // Not a heartbeat's body, sent expecting an answer: refused, the link goes on.
    conn.send(Frame {
        cmd: Cmd::LeaderElection.code(),
        seq: 5,
        flags: 0,
        body: vec![0xff, 0xff, 0xff].into(),
    })
    .await
    .unwrap();
    let refused = answer(&mut conn).await;
    assert!(refused.is_error(), "a malformed heartbeat is refused");
    assert_eq!(refused.seq, 5);
    conn.send(status_request(6)).await.unwrap();
    status_of(answer(&mut conn).await, 6);

    // A heartbeat in fragments of 16 bytes, then a request: both through, in order.
    let whole = bytes::Bytes::from(stale.encode_to_vec());
    let parts =
        beacon::wire::fragment::split(Cmd::LeaderElection.code(), 7, FLAG_ONEWAY, whole, 16);
    assert!(parts.len() > 1, "the heartbeat is sent in fragments");
    for part in parts {
        conn.send(part).await.unwrap();
    }
    conn.send(status_request(8)).await.unwrap();
    status_of(answer(&mut conn).await, 8);
    // Fragments of a body that does not decode, expecting an answer: refused once, whole.
    let garbage = bytes::Bytes::from(vec![0xff; 40]);
    let parts = beacon::wire::fragment::split(Cmd::LeaderElection.code(), 11, 0, garbage, 16);
    assert_eq!(parts.len(), 3);
    for part in parts {
        conn.send(part).await.unwrap();
    }
    let refused = answer(&mut conn).await;
    assert!(
        refused.is_error(),
        "a malformed heartbeat in fragments is refused"
    );
    assert_eq!(refused.seq, 11);
    conn.send(status_request(12)).await.unwrap();
    status_of(answer(&mut conn).await, 12);

    // A whole heartbeat (read on the core's thread), then a request once more.
    conn.send(Frame::new(
        Cmd::LeaderElection.code(),
        9,
        FLAG_ONEWAY,
        &stale,
    ))
    .await
    .unwrap();
    conn.send(status_request(10)).await.unwrap();
    status_of(answer(&mut conn).await, 10);
}

/// The next frame on `conn`, within 5 s.
async fn answer(conn: &mut Link) -> Frame {
    tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .expect("an answer within 5 s")
        .expect("the link stays open")
        .expect("a frame")
}

/// A request for the beacon's status, as `seq`.
fn status_request(seq: u32) -> Frame {
    Frame::new(
        Cmd::BeaconStatus.code(),
        seq,
        0,
        &pb::BeaconStatusRequest::default(),
    )
}

type Link = tokio_util::codec::Framed<tokio::net::TcpStream, FrameCodec>;
