//! NebulaBeacon's `ip_white`, enforced, on real processes: a client from an address the
//! allowlist does not admit is refused with why (native protocol and gRPC), a service at such
//! an address is not registered, the list changes online on every beacon (`nebcli set
//! ip_white`), deleting it brings each beacon's `ip_allow` back, and the refusals are counted
//! and logged once, not once per attempt.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use beacon::client::{Client, ConnectOptions};
use beacon::pb;
use beacon::wire::ErrorCode;
use beacon_testkit::*;
use http::uri::PathAndQuery;
use tonic::client::Grpc;
use tonic::transport::Endpoint;
use tonic_prost::ProstCodec;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

/// A loopback address the beacons (all at 127.0.0.1) are not at.
const OUTSIDE: &str = "127.0.0.2";

fn from(source: &str) -> ConnectOptions {
    ConnectOptions {
        source: Some(source.parse().unwrap()),
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

fn nebcli(nebcli: &Path, beacons: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(nebcli)
        .args(["-s", beacons])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Whether a client from `source` gets through the handshake at `at`.
async fn admitted(at: SocketAddr, source: &str) -> bool {
    Client::connect(&at.to_string(), &from(source))
        .await
        .is_ok()
}

fn register_req(addr: &str) -> pb::registry::RegisterRequest {
    pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allowlist_refuses_what_it_does_not_admit_and_changes_online() {
    let ports = free_ports(4);
    let admin = addr(ports[3]);
    let keys = |admin: Option<SocketAddr>| match admin {
        Some(a) => format!(r#"{{"ip_allow": ["127.0.0.1/32"], "admin": "{a}"}}"#),
        None => r#"{"ip_allow": ["127.0.0.1/32"]}"#.to_owned(),
    };
    let cluster = Cluster::start_each(
        BEACON.as_ref(),
        &ports[..3],
        100,
        "ip-white",
        &[keys(None), keys(Some(admin)), keys(None)],
    );
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader:\n{}", cluster.logs()));
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let list = beacons.join(",");

    // Each beacon's file admits 127.0.0.1 alone: a client from elsewhere is refused at its
    // handshake, told why, and again on each attempt.
    for _ in 0..20 {
        let err = Client::connect(&beacons[1], &from(OUTSIDE))
            .await
            .expect_err("a client outside the allowlist is refused");
        assert!(err.is(ErrorCode::PermissionDenied), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("client address 127.0.0.2") && text.contains("127.0.0.1/32"),
            "{text}"
        );
    }
    // Over gRPC too, call by call.
    let grpc_call = |at: SocketAddr| async move {
        let ch = Endpoint::from_shared(format!("http://{at}"))
            .unwrap()
            .local_address(Some(OUTSIDE.parse::<IpAddr>().unwrap()))
            .connect()
            .await
            .unwrap();
        let mut grpc = Grpc::new(ch);
        grpc.ready().await.unwrap();
        let codec = ProstCodec::<pb::registry::NodesRequest, pb::registry::NodesReply>::default();
        grpc.unary(
            tonic::Request::new(pb::registry::NodesRequest::default()),
            PathAndQuery::from_static("/beacon.v1.registry.Registry/Nodes"),
            codec,
        )
        .await
    };
    let status = grpc_call(addrs[2]).await.expect_err("refused over gRPC");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("127.0.0.2"), "{status:?}");

    // A client at an admitted address may not register a service at one that is not.
    let mut inside = Client::connect(&beacons[0], &from("127.0.0.1"))
        .await
        .unwrap();
    let err = inside
        .register(&register_req("10.0.0.5:8080"))
        .await
        .expect_err("a service outside the allowlist is not registered");
    assert!(err.is(ErrorCode::PermissionDenied), "{err}");
    assert!(
        err.to_string().contains("service address 10.0.0.5"),
        "{err}"
    );

    // The cluster's list replaces the files' on every beacon, online.
    let nebcli_bin = beacon_testkit::nebcli(BEACON.as_ref());
    let (code, out) = nebcli(
        &nebcli_bin,
        &list,
        &["set", "ip_white", "10.0.0.0/8", "nonsense"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("`nonsense` is not a network"), "{out}");
    let (code, out) = nebcli(
        &nebcli_bin,
        &list,
        &["set", "ip_white", "127.0.0.0/30,", "10.0.0.0/8"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("127.0.0.0/30, 10.0.0.0/8"), "{out}");
    for at in &addrs {
        let ok = eventually(Duration::from_secs(10), || async {
            admitted(*at, OUTSIDE).await.then_some(())
        })
        .await;
        assert!(
            ok.is_some(),
            "{at} admits {OUTSIDE} once the list is applied"
        );
    }
    let status = grpc_call(addrs[2]).await;
    assert!(status.is_ok(), "{status:?}");
    inside
        .register(&register_req("10.0.0.5:8080"))
        .await
        .expect("a service inside the list registers");
    let (code, out) = nebcli(&nebcli_bin, &list, &["-w", "json", "show", "ip_white"]);
    assert_eq!(code, Some(0), "{out}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["set"], true);
    assert_eq!(
        shown["networks"],
        serde_json::json!(["127.0.0.0/30", "10.0.0.0/8"])
    );

    // A list that leaves out the beacons' own address still lets them (and whoever is at
    // that address) through: no list cuts the cluster apart.
    let (code, out) = nebcli(&nebcli_bin, &list, &["set", "ip_white", "192.168.0.0/16"]);
    assert_eq!(code, Some(0), "{out}");
    for at in &addrs {
        let refused = eventually(Duration::from_secs(10), || async {
            (!admitted(*at, OUTSIDE).await).then_some(())
        })
        .await;
        assert!(refused.is_some(), "{at} refuses {OUTSIDE} again");
        assert!(
            admitted(*at, "127.0.0.1").await,
            "{at} admits the beacons' address"
        );
    }
    eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("the beacons still agree on a leader:\n{}", cluster.logs()));

    // Deleting the cluster's list brings each beacon's `ip_allow` back.
    let (code, out) = nebcli(&nebcli_bin, &list, &["config", "del", "beacon/ip_white"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = nebcli(&nebcli_bin, &list, &["show", "ip_white"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("not set"), "{out}");

    // Refusals are counted by reason, and logged in full once per beacon, then summed up:
    // twenty refused handshakes at one beacon did not make twenty warnings.
    let log = cluster.beacons[1].log();
    let lines = log
        .lines()
        .filter(|l| l.contains("client address 127.0.0.2 is not in"))
        .count();
    assert!((1..=3).contains(&lines), "{lines} lines:\n{log}");
    let (_, metrics) = http_get(admin, "/metrics").unwrap();
    let refused = metric(
        &metrics,
        "beacon_connections_refused_total{reason=\"ip_not_allowed\"}",
    );
    assert!(refused >= Some(20.0), "{refused:?}");
}
