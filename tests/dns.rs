//! DNS against real beacon processes, over real UDP and TCP: every beacon answers from its
//! replica, a service that goes critical or is drained leaves the answer, names are
//! case-insensitive, what is not known is NXDOMAIN, an answer too large for UDP is
//! truncated and comes whole over TCP, and every query is counted by its result.

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// A UDP socket to ask from, on a port of the test kit's.
async fn client_socket() -> tokio::net::UdpSocket {
    tokio::net::UdpSocket::bind(addr(free_ports(1)[0]))
        .await
        .unwrap()
}

/// Asks `server` over UDP, as a stub resolver does.
async fn udp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let socket = client_socket().await;
    socket.send_to(&query(name, qtype), server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("a DNS answer over UDP")
        .unwrap();
    let m = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(m.id(), 0x4242);
    m
}

/// Asks `server` over TCP (two-byte length, then the message).
async fn tcp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut stream = tokio::net::TcpStream::connect(server).await.unwrap();
    let q = query(name, qtype);
    let mut out = (q.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(&q);
    stream.write_all(&out).await.unwrap();
    let mut len = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut len))
        .await
        .expect("a DNS answer over TCP")
        .unwrap();
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.unwrap();
    Message::from_vec(&body).unwrap()
}

fn addresses(m: &Message) -> Vec<String> {
    let mut v: Vec<String> = m.answers().iter().map(|r| r.data().to_string()).collect();
    v.sort();
    v
}

async fn register(leader: &mut Leader, node_type: &str, addr: &str) -> u32 {
    let req = pb::registry::RegisterRequest {
        node_type: node_type.into(),
        addr: addr.into(),
        ..Default::default()
    };
    let reply: pb::registry::RegisterReply = leader
        .call(RegistryCmd::Register, &req, "register")
        .await
        .unwrap();
    reply.node.unwrap().node_id
}

async fn set_health(leader: &mut Leader, node_id: u32, req: pb::registry::SetHealthRequest) {
    let req = pb::registry::SetHealthRequest { node_id, ..req };
    let _: pb::registry::SetHealthReply = leader
        .call(RegistryCmd::SetHealth, &req, "set health")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_beacon_answers_dns_from_its_replica_and_health_takes_a_service_out() {
    let ports = free_ports(9);
    let (beacons, rest) = ports.split_at(3);
    let (dns, admin) = rest.split_at(3);
    let configs: Vec<String> = (0..3)
        .map(|i| {
            serde_json::json!({
                "lease_ms": 60_000,
                "dns": format!("127.0.0.1:{}", dns[i]),
                "admin": format!("127.0.0.1:{}", admin[i]),
            })
            .to_string()
        })
        .collect();
    let c = Cluster::start_each(BEACON.as_ref(), beacons, 100, "dns", &configs);
    let all: Vec<SocketAddr> = c.beacons.iter().map(|b| b.addr).collect();
    eventually(Duration::from_secs(10), || agreed_leader(&all))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    let dns: Vec<SocketAddr> = dns.iter().map(|p| addr(*p)).collect();
    let list: Vec<String> = all.iter().map(|a| a.to_string()).collect();
    let mut leader = Leader::new(list, opts(), Duration::from_secs(10));

    let a = register(&mut leader, "Web", "10.0.0.1:8001").await;
    let b = register(&mut leader, "Web", "10.0.0.2:8002").await;
    let v6 = register(&mut leader, "Web", "[fd00::7]:8003").await;
    let gone = register(&mut leader, "DB", "10.0.0.9:5432").await;

    // Every beacon answers, in any case, once it has applied the registrations. A replica
    // applies them in order, so the last one answering means all four are in.
    for server in &dns {
        eventually(Duration::from_secs(10), || async {
            let m = udp(*server, &format!("{gone}.node.beacon."), RecordType::A).await;
            (addresses(&m) == ["10.0.0.9"]).then_some(())
        })
        .await
        .expect("every beacon applies the last registration");
        let m = udp(*server, "WEB.Service.Beacon.", RecordType::A).await;
        assert_eq!(m.response_code(), ResponseCode::NoError);
        assert!(m.authoritative());
        assert_eq!(addresses(&m), ["10.0.0.1", "10.0.0.2"]);
        assert!(m.answers().iter().all(|r| r.ttl() == 0), "TTL 0 by default");
    }
    let follower = dns[2];
    let m = udp(follower, "web.service.beacon.", RecordType::AAAA).await;
    assert_eq!(addresses(&m), ["fd00::7"]);
    let m = udp(follower, "web.service.beacon.", RecordType::SRV).await;
    let mut srv = addresses(&m);
    srv.sort();
    assert_eq!(
        srv,
        [
            format!("1 1 8001 {a}.node.beacon."),
            format!("1 1 8002 {b}.node.beacon."),
            format!("1 1 8003 {v6}.node.beacon."),
        ]
    );
    assert_eq!(
        m.additionals().len(),
        3,
        "each target's address comes along"
    );
    let m = udp(follower, &format!("{gone}.node.beacon."), RecordType::A).await;
    assert_eq!(addresses(&m), ["10.0.0.9"]);

    // Unknown names and types.
    let m = udp(follower, "cache.service.beacon.", RecordType::A).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    let m = udp(follower, "999.node.beacon.", RecordType::A).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    // A name outside the zone is not beacon's to deny: REFUSED, never a cached NXDOMAIN.
    let m = udp(follower, "example.com.", RecordType::A).await;
    assert_eq!(m.response_code(), ResponseCode::Refused);
    assert!(!m.authoritative());
    let m = udp(follower, "web.service.beacon.", RecordType::MX).await;
    assert_eq!(
        (m.response_code(), m.answers().len()),
        (ResponseCode::NoError, 0)
    );

    // Critical and draining services leave the answer (an ID lookup still finds them).
    let critical = pb::registry::SetHealthRequest {
        status: Some(pb::registry::HealthStatus::HealthCritical.into()),
        ..Default::default()
    };
    set_health(&mut leader, a, critical).await;
    let draining = pb::registry::SetHealthRequest {
        draining: Some(true),
        ..Default::default()
    };
    set_health(&mut leader, b, draining).await;
    eventually(Duration::from_secs(10), || async {
        let m = udp(follower, "web.service.beacon.", RecordType::A).await;
        m.answers().is_empty().then_some(())
    })
    .await
    .expect("the follower's answer drops both");
    let m = udp(follower, &format!("{a}.node.beacon."), RecordType::A).await;
    assert_eq!(addresses(&m), ["10.0.0.1"]);
    let back = pb::registry::SetHealthRequest {
        status: Some(pb::registry::HealthStatus::HealthPassing.into()),
        ..Default::default()
    };
    set_health(&mut leader, a, back).await;
    eventually(Duration::from_secs(10), || async {
        let m = udp(follower, "web.service.beacon.", RecordType::A).await;
        (addresses(&m) == ["10.0.0.1"]).then_some(())
    })
    .await
    .expect("a service back to passing is back in the answer");

    // Many instances: too large for a plain UDP answer, so TC and no records; TCP has all.
    for i in 0..60 {
        register(&mut leader, "MANY", &format!("10.1.0.{}:80", i + 1)).await;
    }
    let m = eventually(Duration::from_secs(10), || async {
        let m = tcp(follower, "many.service.beacon.", RecordType::A).await;
        (m.answers().len() == 60).then_some(m)
    })
    .await
    .expect("TCP answers in full");
    assert!(!m.truncated());
    let m = udp(follower, "many.service.beacon.", RecordType::A).await;
    assert!(m.truncated() && m.answers().is_empty());

    // Garbage is answered FORMERR (to its id) and the beacon answers on.
    let socket = client_socket().await;
    socket.send_to(&[0x12, 0x34, 0xff], follower).await.unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("an answer to garbage")
        .unwrap();
    let m = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!((m.id(), m.response_code()), (0x1234, ResponseCode::FormErr));
    let m = udp(follower, "web.service.beacon.", RecordType::A).await;
    assert_eq!(m.response_code(), ResponseCode::NoError);

    // Each query is counted by its result.
    let (_, text) = http_get(addr(admin[2]), "/metrics").expect("metrics");
    for result in ["answered", "no_data", "nxdomain", "truncated", "refused"] {
        let n = metric(
            &text,
            &format!("beacon_dns_queries_total{{result=\"{result}\"}}"),
        );
        assert!(n.is_some_and(|n| n >= 1.0), "{result}: {n:?}\n{text}");
    }
}
