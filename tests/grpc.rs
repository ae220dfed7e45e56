//! The gRPC edge with real processes and a real gRPC client (tonic's): security identical to
//! the native protocol (TLS with ALPN `h2`, tokens in `authorization` metadata, client
//! certificates, the same roles and owners, also through a follower's relay), and the bounds
//! that keep one client from costing the others (a watcher that never reads, a thousand
//! streams on one connection).

use std::net::SocketAddr;
use std::time::Duration;

use beacon::pb;
use beacon_testkit::certs::Ca;
use beacon_testkit::*;
use http::uri::PathAndQuery;
use tonic::client::Grpc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

const REGISTER: &str = "/beacon.v1.registry.Registry/Register";
const UNREGISTER: &str = "/beacon.v1.registry.Registry/Unregister";
const NODES: &str = "/beacon.v1.registry.Registry/Nodes";
const WATCH: &str = "/beacon.v1.registry.Registry/Watch";

/// Calls unary method `path` with `req`, with `token` as a bearer token.
async fn unary<Req, Resp>(
    ch: &Channel,
    path: &'static str,
    req: Req,
    token: Option<&str>,
) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = Grpc::new(ch.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut request = Request::new(req);
    request.set_timeout(Duration::from_secs(10));
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    let codec = ProstCodec::<Req, Resp>::default();
    grpc.unary(request, PathAndQuery::from_static(path), codec)
        .await
        .map(|r| r.into_inner())
}

/// Opens the `Watch` stream of `types` (every type when empty).
async fn watch(
    ch: &Channel,
    types: &[&str],
    token: Option<&str>,
) -> Result<tonic::Streaming<pb::registry::NodeEvent>, Status> {
    let mut grpc = Grpc::new(ch.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut request = Request::new(pb::registry::WatchRequest {
        node_types: types.iter().map(|t| t.to_string()).collect(),
        start_index: 0,
        ..Default::default()
    });
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    let codec = ProstCodec::<pb::registry::WatchRequest, pb::registry::NodeEvent>::default();
    grpc.server_streaming(request, PathAndQuery::from_static(WATCH), codec)
        .await
        .map(|r| r.into_inner())
}

fn register(addr: &str) -> pb::registry::RegisterRequest {
    pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    }
}

/// The beacon's own code a status carries (`beacon-code`).
fn beacon_code(status: &Status) -> Option<u32> {
    status
        .metadata()
        .get("beacon-code")?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_api_takes_the_native_identities_roles_and_owners_through_a_follower() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca").unwrap();
    let server = ca.issue(dir.path(), "beacon").unwrap();
    let dashboard = ca.issue_client(dir.path(), "dashboard").unwrap();
    let ports = free_ports(3);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let config = serde_json::json!({
        "tls": { "cert": server.cert, "key": server.key, "ca": ca.pem },
        "auth": {
            "tokens": [
                { "name": "ops", "token": "ops-secret", "role": "admin" },
                { "name": "billing", "token": "billing-secret", "role": "service" },
                { "name": "shipping", "token": "shipping-secret", "role": "service" },
                { "name": "viewer", "token": "viewer-secret", "role": "read" },
            ],
            "certs": [{ "name": "dashboard", "role": "read" }],
        },
    })
    .to_string();
    let c = Cluster::start_with(BEACON.as_ref(), &ports, TICK_MS, "grpc-tls", &config);
    let native = beacon::client::ConnectOptions::default()
        .with_token("ops-secret")
        .with_tls(&ca.pem, None)
        .unwrap();
    let leader = eventually(Duration::from_secs(15), || {
        agreed_leader_with(&addrs, &native)
    })
    .await
    .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    let follower = *addrs.iter().find(|a| a.to_string() != leader).unwrap();

    let ca_pem = std::fs::read_to_string(&ca.pem).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca_pem))
        .domain_name("127.0.0.1");
    let ch = Endpoint::from_shared(format!("https://{follower}"))
        .unwrap()
        .tls_config(tls.clone())
        .unwrap()
        .connect()
        .await
        .unwrap_or_else(|e| panic!("gRPC over TLS to {follower}: {e}\n{}", c.logs()));

    // No credential, or an unknown one: UNAUTHENTICATED, as at a native handshake.
    for token in [None, Some("guess")] {
        let e = unary::<_, pb::registry::NodesReply>(
            &ch,
            NODES,
            pb::registry::NodesRequest::default(),
            token,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{token:?}: {e:?}");
        assert_eq!(beacon_code(&e), Some(20));
    }
    // A read identity reads, and may not register.
    unary::<_, pb::registry::NodesReply>(
        &ch,
        NODES,
        pb::registry::NodesRequest::default(),
        Some("viewer-secret"),
    )
    .await
    .unwrap();
    let e = unary::<_, pb::registry::RegisterReply>(
        &ch,
        REGISTER,
        register("10.0.0.1:1"),
        Some("viewer-secret"),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("viewer"), "{}", e.message());

    // A service registers through the follower; the leader records it as the owner.
    let mine = unary::<_, pb::registry::RegisterReply>(
        &ch,
        REGISTER,
        register("10.0.0.2:1"),
        Some("billing-secret"),
    )
    .await
    .unwrap_or_else(|e| panic!("register through the follower: {e:?}\n{}", c.logs()));
    let node = mine.node.unwrap();
    assert_eq!(node.owner, "billing");
    // Another service may not end it, through the follower either; its owner may.
    let end = pb::registry::UnregisterRequest {
        node_id: node.node_id,
        term: node.term,
        index: node.index,
        release: true,
        ..Default::default()
    };
    let e = unary::<_, pb::registry::UnregisterReply>(
        &ch,
        UNREGISTER,
        end.clone(),
        Some("shipping-secret"),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("billing"), "{}", e.message());
    unary::<_, pb::registry::UnregisterReply>(&ch, UNREGISTER, end, Some("billing-secret"))
        .await
        .unwrap();

    // A client certificate is an identity too.
    let cert = std::fs::read_to_string(&dashboard.cert).unwrap();
    let key = std::fs::read_to_string(&dashboard.key).unwrap();
    let with_cert = Endpoint::from_shared(format!("https://{follower}"))
        .unwrap()
        .tls_config(tls.identity(Identity::from_pem(cert, key)))
        .unwrap()
        .connect()
        .await
        .unwrap();
    unary::<_, pb::registry::NodesReply>(
        &with_cert,
        NODES,
        pb::registry::NodesRequest::default(),
        None,
    )
    .await
    .unwrap();
    let e =
        unary::<_, pb::registry::RegisterReply>(&with_cert, REGISTER, register("10.0.0.3:1"), None)
            .await
            .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

    // Plaintext gRPC to the TLS port goes nowhere, and the beacon serves on.
    let plain = Endpoint::from_shared(format!("http://{follower}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2))
        .connect()
        .await;
    if let Ok(plain) = plain {
        unary::<_, pb::registry::NodesReply>(
            &plain,
            NODES,
            pb::registry::NodesRequest::default(),
            Some("ops-secret"),
        )
        .await
        .unwrap_err();
    }
    unary::<_, pb::registry::NodesReply>(
        &ch,
        NODES,
        pb::registry::NodesRequest::default(),
        Some("ops-secret"),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_and_a_thousand_streams_cost_the_others_nothing() {
    let ports = free_ports(1);
    let at = addr(ports[0]);
    let c = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "grpc-bounds",
        r#"{"lease_ms": 60000, "id_range": [1, 100000]}"#,
    );
    eventually(Duration::from_secs(10), || status(at))
        .await
        .unwrap();
    let endpoint = Endpoint::from_shared(format!("http://{at}")).unwrap();
    let others = endpoint.connect().await.unwrap();

    // A watcher that never reads past its first event, on a connection of its own whose
    // flow-control windows hold 64 KiB (the HTTP/2 default; hyper's client asks for MBs).
    let stuck = endpoint
        .clone()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    let mut never_read = watch(&stuck, &[], None).await.unwrap();
    let first = never_read.message().await.unwrap().unwrap();
    assert!(matches!(
        first.event,
        Some(pb::registry::node_event::Event::Start(_))
    ));

    // A thousand streams more on one connection (the limit is 1,024 at once), of a type
    // nobody registers, and one that reads everything on a connection of its own.
    let many = endpoint.connect().await.unwrap();
    let mut streams = Vec::new();
    for _ in 0..1000 {
        streams.push(watch(&many, &["IDLE"], None).await.unwrap());
    }
    // The reader reads as a service does, while the registrations go on.
    let reader = endpoint.connect().await.unwrap();
    let mut reading = watch(&reader, &[], None).await.unwrap();
    let read_all = tokio::spawn(async move {
        let mut added = 0;
        while added < 5000 {
            let event = tokio::time::timeout(Duration::from_secs(30), reading.message())
                .await
                .expect("a notice within 30 s")
                .unwrap()
                .unwrap();
            if let Some(pb::registry::node_event::Event::Notice(n)) = event.event {
                added += n.add_nodes.len();
            }
        }
        added
    });

    // Meanwhile 5,000 registrations of 900 bytes of metadata each (4.5 MB of notices, more
    // than the connection's buffers hold): every watcher is told of each; the one that never
    // reads falls behind its queue's limit (1 MiB) and is dropped.
    let metadata = format!("{{\"pad\": \"{}\"}}", "x".repeat(880));
    for i in 0..5000u32 {
        let addr = format!("10.{}.{}.{}:1", i / 65536, (i / 256) % 256, i % 256);
        let mut request = register(&addr);
        request.metadata = metadata.clone();
        unary::<_, pb::registry::RegisterReply>(&others, REGISTER, request, None)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "registration {i} while the watchers wait: {e:?}\n{}",
                    c.logs()
                )
            });
    }
    // The watcher that reads has every change, once.
    assert_eq!(read_all.await.unwrap(), 5000);
    // The idle streams are all open: each has its first answer and nothing more.
    for s in streams.iter_mut() {
        let event = s.message().await.unwrap().unwrap();
        assert!(matches!(
            event.event,
            Some(pb::registry::node_event::Event::Start(_))
        ));
    }
    // The stuck watcher, read at last, ends with a status that says it fell behind.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match never_read.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => break None,
                Err(status) => break Some(status),
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        let logs = c.logs();
        let behind: Vec<&str> = logs.lines().filter(|l| l.contains("behind")).collect();
        panic!("the stuck watcher's stream did not end; log lines: {behind:?}")
    });
    let status = ended.expect("an error status, not a clean end");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("this watcher fell behind"),
        "{}",
        status.message()
    );
    assert!(
        c.logs().contains("fell behind (")
            && c.logs().contains("bytes queued, the limit is 1048576"),
        "no warning in the log"
    );
    // And the beacon serves on.
    unary::<_, pb::registry::NodesReply>(
        &others,
        NODES,
        pb::registry::NodesRequest {
            node_type: "NOBODY".into(),
            ..Default::default()
        },
        None,
    )
    .await
    .unwrap();
}
