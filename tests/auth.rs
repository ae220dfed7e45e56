//! Authentication and roles, with real processes: three beacons that require a token (over
//! loopback, where plain TCP is allowed) or a client certificate (over TLS). A client
//! without a token, with a wrong one, a `read` identity registering, a `service` identity
//! creating a sequence: each is refused with its code, and nothing changed; each role does
//! what it may. (A token over plain TCP to a beacon listening off loopback is refused: every
//! address these tests can bind is loopback, so `auth`'s unit tests cover that rule.)

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions, Token};
use beacon::machines::registry::RegistryCmd;
use beacon::machines::tasks::TasksCmd;
use beacon::pb;
use beacon::wire::{Code as _, ErrorCode};
use beacon_testkit::certs::Ca;
use beacon_testkit::*;
use support::report_of;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn opts(token: Option<&str>) -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        token: token.map(Token::new),
        ..ConnectOptions::default()
    }
}

fn leader(addrs: &[SocketAddr], opts: ConnectOptions) -> Leader {
    let beacons = addrs.iter().map(ToString::to_string).collect();
    Leader::new(beacons, opts, Duration::from_secs(5))
}

async fn register(l: &mut Leader, addr: &str) -> Result<pb::registry::RegisterReply, ClientError> {
    let req = pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    };
    l.call(RegistryCmd::Register, &req, "register").await
}

fn auth_keys() -> serde_json::Value {
    serde_json::json!({
        // Beacons prove themselves to each other with it (no TLS here).
        "peer_token": "beacons-only",
        "tokens": [
            { "name": "ops", "token": "ops-secret", "role": "admin" },
            { "name": "billing", "token": "billing-secret", "role": "service" },
            { "name": "shipping", "token": "shipping-secret", "role": "service" },
            // "viewer-secret", given as its SHA-256.
            { "name": "viewer", "token_sha256": sha256_hex("viewer-secret"), "role": "read" },
        ],
    })
}

fn sha256_hex(s: &str) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    digest.as_ref().iter().fold(String::new(), |mut out, b| {
        write!(out, "{b:02x}").unwrap();
        out
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_does_what_it_may_and_nothing_else() {
    let ports = free_ports(3);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let config = serde_json::json!({ "auth": auth_keys() }).to_string();
    let c = Cluster::start_with(BEACON.as_ref(), &ports, TICK_MS, "auth", &config);
    let admin = opts(Some("ops-secret"));
    eventually(Duration::from_secs(15), || {
        agreed_leader_with(&addrs, &admin)
    })
    .await
    .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    let at = addrs[0].to_string();

    // No token, a wrong token: refused at the handshake.
    for (token, what) in [(None, "no token"), (Some("guess"), "a wrong token")] {
        let e = Client::connect(&at, &opts(token)).await.unwrap_err();
        assert!(e.is(ErrorCode::Unauthenticated), "{what}: {e}");
        assert!(!e.is_retryable(), "{what}: {e}");
    }
    // The reader reads, and may not register.
    let mut reader = leader(&addrs, opts(Some("viewer-secret")));
    let e = register(&mut reader, "10.0.0.1:7000").await.unwrap_err();
    assert!(e.is(ErrorCode::PermissionDenied), "{e}");
    assert!(
        e.to_string().contains("`viewer`") && e.to_string().contains("service"),
        "{e}"
    );
    assert!(
        e.to_string().contains("may not send Register (cmd 103)"),
        "the refusal names the command: {e}"
    );
    let mut reading = Client::connect(&at, &opts(Some("viewer-secret")))
        .await
        .unwrap();
    assert!(
        reading.nodes("", "").await.unwrap().nodes.is_empty(),
        "nothing registered"
    );
    // The service registers, and may not create a sequence.
    let mut service = leader(&addrs, opts(Some("billing-secret")));
    let node = register(&mut service, "10.0.0.2:7000")
        .await
        .unwrap_or_else(|e| panic!("a service registers: {e}\n{}", c.logs()))
        .node
        .unwrap();
    assert!(node.node_id > 0);
    let e = service.create_sequence("orders", 0, 100).await.unwrap_err();
    assert!(e.is(ErrorCode::PermissionDenied), "{e}");
    // The admin does.
    let mut ops = leader(&addrs, admin.clone());
    ops.create_sequence("orders", 0, 100)
        .await
        .unwrap_or_else(|e| panic!("the admin creates a sequence: {e}"));
    // Another service may not end billing's registration, nor renew it.
    let mut shipping = leader(&addrs, opts(Some("shipping-secret")));
    let unregister = pb::registry::UnregisterRequest {
        node_id: node.node_id,
        term: node.term,
        index: node.index,
        ..Default::default()
    };
    let e = shipping
        .call::<_, pb::registry::UnregisterReply>(
            RegistryCmd::Unregister,
            &unregister,
            "unregister",
        )
        .await
        .unwrap_err();
    assert!(e.is(ErrorCode::PermissionDenied), "{e}");
    assert!(e.to_string().contains("`billing`"), "{e}");
    // Nor renew it, nor may the reader: reports pipelined in one write, as a client that
    // renews many registrations sends them, are each refused, in order.
    let leader_at = agreed_leader_with(&addrs, &admin).await.expect("a leader");
    // The reader for its role, before the core; the other service by the core, for whose
    // registration it is.
    let refusals = [
        (
            "viewer-secret",
            "may not send NodeReport (cmd 101): it needs role `service`",
        ),
        ("shipping-secret", "`billing`"),
    ];
    for (token, refused_by) in refusals {
        let conn = Client::connect(&leader_at, &opts(Some(token)))
            .await
            .unwrap();
        let refusals = pipelined_reports(conn, &node, 20).await;
        assert_eq!(refusals.len(), 20, "{token}: every report answered");
        for (i, (seq, e)) in refusals.iter().enumerate() {
            assert_eq!(*seq, i as u32 + 1, "{token}: answered in order");
            assert_eq!(
                e.code,
                ErrorCode::PermissionDenied as u32,
                "{token}: {}",
                e.msg
            );
            assert!(e.msg.contains(refused_by), "{token}: {}", e.msg);
        }
    }
    // Nor serve task queues as billing's registration.
    ops.create_queue("jobs", 0, 0)
        .await
        .expect("the admin creates a queue");
    let work = pb::tasks::Work {
        node_id: node.node_id,
        term: node.term,
        index: node.index,
        queues: vec!["jobs".into()],
        capacity: 1,
    };
    let e = shipping
        .call::<_, pb::tasks::WorkReply>(TasksCmd::Work, &work, "work")
        .await
        .unwrap_err();
    assert!(e.is(ErrorCode::PermissionDenied), "{e}");
    // The registration names its owner.
    let listed = reading.nodes("", "").await.unwrap().nodes;
    assert_eq!(
        listed[0].node.as_ref().map(|n| n.owner.as_str()),
        Some("billing")
    );
    // What was refused changed nothing: one registration, the one sequence.
    let nodes = reading.nodes("", "").await.unwrap().nodes;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    // Something that says it is a beacon of the cluster, without the peer token, as a
    // script that knows the cluster's name and a beacon's address would: refused.
    let tcp = tokio::net::TcpStream::connect(addrs[0]).await.unwrap();
    let err = claim_to_be_a_beacon(tcp, "auth", addrs[1])
        .await
        .expect("a refusal");
    assert_eq!(err.code, ErrorCode::Unauthenticated as u32, "{}", err.msg);
    assert!(err.msg.contains("peer_token"), "{}", err.msg);
    // The refusals are in the audit trail with the remote address.
    let logs = c.logs();
    assert!(
        logs.contains("access refused") && logs.contains("audit"),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_need_tls_off_loopback_and_certificates_name_identities() {
    let dir = tempfile::tempdir().unwrap();
    // A lone TLS beacon whose clients authenticate by certificate or by token.
    let ca = Ca::new(dir.path(), "ca").unwrap();
    let server = ca.issue(dir.path(), "beacon").unwrap();
    let dashboard = ca.issue(dir.path(), "dashboard").unwrap();
    let stranger = ca.issue(dir.path(), "stranger").unwrap();
    let ports = free_ports(1);
    let at = addr(ports[0]);
    let config = serde_json::json!({
        "tls": { "cert": server.cert, "key": server.key, "ca": ca.pem },
        "auth": {
            "tokens": [{ "name": "ops", "token": "ops-secret", "role": "admin" }],
            "certs": [{ "name": "dashboard", "role": "read" }],
        },
    })
    .to_string();
    let c = Cluster::start_with(BEACON.as_ref(), &ports, TICK_MS, "certs", &config);
    let with_cert = |who: &beacon_testkit::certs::Issued, token: Option<&str>| {
        opts(token)
            .with_tls(&ca.pem, Some((who.cert.as_path(), who.key.as_path())))
            .unwrap()
    };
    // The dashboard's certificate is its identity: it reads, and may not register.
    let dash = with_cert(&dashboard, None);
    assert!(
        eventually(Duration::from_secs(10), || status_with(at, &dash))
            .await
            .is_some(),
        "{}",
        c.logs()
    );
    let mut reader = leader(&[at], dash);
    let e = register(&mut reader, "10.0.0.3:7000").await.unwrap_err();
    assert!(e.is(ErrorCode::PermissionDenied), "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    // A certificate the CA signed but auth.certs does not name: refused, by name.
    let e = Client::connect(&at.to_string(), &with_cert(&stranger, None))
        .await
        .unwrap_err();
    assert!(e.is(ErrorCode::Unauthenticated), "{e}");
    assert!(e.to_string().contains("stranger"), "{e}");
    // A token over TLS: its own identity, whatever the certificate.
    let mut ops = leader(&[at], with_cert(&stranger, Some("ops-secret")));
    register(&mut ops, "10.0.0.4:7000")
        .await
        .unwrap_or_else(|e| panic!("the admin token over TLS: {e}\n{}", c.logs()));
}

/// Whether `token` gets a `show beacon` answer from `addr`.
async fn accepted(addr: SocketAddr, token: &str) -> bool {
    match Client::connect(&addr.to_string(), &opts(Some(token))).await {
        Ok(mut c) => c.beacon_status().await.is_ok(),
        Err(_) => false,
    }
}

/// Waits (bounded by 10 s) until `token` is accepted or refused as `want`.
async fn until_accepted(addr: SocketAddr, token: &str, want: bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while accepted(addr, token).await != want {
        assert!(
            std::time::Instant::now() < deadline,
            "token `{token}` still {}",
            if want { "refused" } else { "accepted" }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_reloaded_when_their_file_changes_and_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("app.token");
    std::fs::write(&token_file, "first-secret\n").unwrap();
    let keys = serde_json::json!({"auth": {"tokens": [
        {"name": "app", "token_file": token_file.display().to_string(), "role": "admin"},
    ]}});
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &free_ports(1),
        TICK_MS,
        "reload",
        &keys.to_string(),
    );
    let b = cluster.beacons[0].addr;
    assert!(accepted(b, "first-secret").await);
    assert!(!accepted(b, "second-secret").await);

    // The token file is rotated: the new token works, the old one no longer, no restart.
    std::fs::write(&token_file, "second-secret\n").unwrap();
    until_accepted(b, "second-secret", true).await;
    assert!(!accepted(b, "first-secret").await);

    // A token added to the configuration file is taken on SIGHUP.
    let config = cluster.dir.path().join(format!("beacon-{}.json", b.port()));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    v["auth"]["tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "ops", "token": "ops-secret", "role": "admin"}));
    std::fs::write(&config, v.to_string()).unwrap();
    cluster.beacons[0].signal(libc::SIGHUP);
    until_accepted(b, "ops-secret", true).await;

    // A broken file is reported, and the tokens in use stay.
    std::fs::write(&config, "{ not json").unwrap();
    cluster.beacons[0].signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cluster.beacons[0].log().contains("tokens not reloaded") {
        assert!(std::time::Instant::now() < deadline, "{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(accepted(b, "ops-secret").await && accepted(b, "second-secret").await);
    let log = cluster.beacons[0].log();
    assert!(log.contains("tokens reloaded on a changed file"), "{log}");
    assert!(log.contains("tokens reloaded on SIGHUP"), "{log}");
}

/// Beacons that share `auth.peer_token` over plain TCP prove it to each other by challenge
/// and response: the token never crosses the wire, yet the cluster forms; a beacon with
/// another token is kept out, and refuses the cluster in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_token_is_proven_without_crossing_the_wire() {
    use beacon_testkit::proxy::Mesh;
    let ports = free_ports(3);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let mesh = Mesh::start(&addrs);
    for i in 0..3 {
        for j in 0..3 {
            if i != j {
                mesh.link(i, j).tap();
            }
        }
    }
    let token = |i: usize| {
        if i < 2 {
            "shared-peer-secret"
        } else {
            "another-secret"
        }
    };
    let configs: Vec<String> = (0..3)
        .map(|i| {
            serde_json::json!({
                "dial": mesh.dial_for(i, &addrs),
                "auth": {"peer_token": token(i)},
            })
            .to_string()
        })
        .collect();
    let c = Cluster::start_each(BEACON.as_ref(), &ports, TICK_MS, "proof", &configs);
    // The two that share the token form the cluster (a majority of three).
    let pair = [addrs[0], addrs[1]];
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&pair))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    assert!(pair.iter().any(|a| a.to_string() == leader));
    let s = status(addrs[0]).await.unwrap();
    assert!(
        !row(&s, addrs[2]).is_online,
        "the other token is kept out: {s:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Neither token was ever on the wire, though the links carried handshakes both ways.
    let mut carried = 0;
    for i in 0..3 {
        for j in 0..3 {
            if i == j {
                continue;
            }
            let bytes = mesh.link(i, j).tapped();
            carried += bytes.len();
            for secret in ["shared-peer-secret", "another-secret"] {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{secret} crossed the link {i} -> {j}"
                );
            }
        }
    }
    assert!(
        carried > 1000,
        "the links carried the cluster's traffic: {carried} bytes"
    );
    let logs = c.logs();
    assert!(!logs.contains("peers are not authenticated"), "{logs}");
    assert!(
        logs.contains("did not prove it knows this cluster's `auth.peer_token`")
            || logs.contains("did not prove it knows this cluster's auth.peer_token"),
        "{logs}"
    );
}

/// Sends `count` node reports for `node` back to back over `conn` in one write, and returns
/// each answer's sequence number and refusal (a report that went through fails the test).
async fn pipelined_reports(
    conn: Client,
    node: &pb::registry::NodeInfo,
    count: u32,
) -> Vec<(u32, pb::ErrorReply)> {
    use futures_util::{SinkExt, StreamExt};
    let mut conn = conn.into_framed();
    for seq in 1..=count {
        let report = report_of(node);
        let frame = beacon::wire::Frame::new(RegistryCmd::NodeReport.code(), seq, 0, &report);
        conn.feed(frame).await.unwrap();
    }
    conn.flush().await.unwrap();
    let mut out = Vec::new();
    for _ in 0..count {
        let reply = tokio::time::timeout(Duration::from_secs(5), conn.next())
            .await
            .expect("an answer in time")
            .expect("the connection open")
            .expect("a frame");
        assert!(reply.is_error(), "a refused report went through: {reply:?}");
        out.push((reply.seq, reply.decode().unwrap()));
    }
    out
}
