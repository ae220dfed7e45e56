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
