//! What an operator watches, against real beacon processes: `/health` means "a write would
//! succeed", `/livez` and `/readyz` as Kubernetes probes them, and Prometheus metrics that
//! move with a registration, a leader kill and a lost majority.

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

struct Ops {
    cluster: Cluster,
    admin: Vec<SocketAddr>,
}

impl Ops {
    fn start() -> Ops {
        let (cluster, admin) =
            cluster_with_admin(BEACON.as_ref(), 3, TICK_MS, "ops", serde_json::json!({}));
        Ops { cluster, admin }
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        self.cluster.beacons.iter().map(|b| b.addr).collect()
    }

    fn index_of(&self, node: &str) -> usize {
        self.addrs()
            .iter()
            .position(|a| a.to_string() == node)
            .expect("a beacon of the cluster")
    }

    fn get(&self, i: usize, path: &str) -> (u16, String) {
        http_get(self.admin[i], path)
            .unwrap_or_else(|| panic!("admin API of beacon {i} answers {path}"))
    }

    fn metric(&self, i: usize, name: &str) -> f64 {
        let (code, text) = self.get(i, "/metrics");
        assert_eq!(code, 200, "{text}");
        metric(&text, name).unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    }

    async fn leader(&self, among: &[SocketAddr]) -> usize {
        let leader = eventually(Duration::from_secs(10), || agreed_leader(among))
            .await
            .unwrap_or_else(|| panic!("no agreed leader:\n{}", self.cluster.logs()));
        self.index_of(&leader)
    }
}

/// Registers a LOGIC service through whichever beacon leads.
async fn register(beacons: &[SocketAddr]) {
    let beacons = beacons.iter().map(|a| a.to_string()).collect();
    let mut client = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    let _: pb::registry::RegisterReply = client
        .call(
            RegistryCmd::Register,
            &pb::registry::RegisterRequest {
                node_type: "LOGIC".into(),
                addr: "10.0.0.1:7000".into(),
                ..Default::default()
            },
            "register",
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_probes_and_metrics_follow_the_cluster() {
    let mut ops = Ops::start();
    let all = ops.addrs();
    let leader = ops.leader(&all).await;

    // Every beacon of a healthy cluster can write: the leader itself, the followers by
    // forwarding. Each is alive and ready, and says which version it runs.
    for i in 0..3 {
        let ok = eventually(Duration::from_secs(5), || async {
            let (code, body) = ops.get(i, "/health");
            (code == 200).then_some(body)
        })
        .await
        .unwrap_or_else(|| panic!("beacon {i} healthy: {:?}", ops.get(i, "/health")));
        let v: serde_json::Value = serde_json::from_str(&ok).unwrap();
        assert_eq!(v["health"], true, "{ok}");
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{ok}");
        assert_eq!(ops.get(i, "/livez"), (200, "ok\n".into()));
        assert_eq!(ops.get(i, "/readyz"), (200, "ok\n".into()));
    }
    let (_, beacon) = ops.get(leader, "/v1/beacon");
    let v: serde_json::Value = serde_json::from_str(&beacon).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{beacon}");
    assert!(
        v.get("cannot_write").is_none_or(|c| c.is_null()),
        "{beacon}"
    );

    // A registration shows in the leader's metrics: the request, its entry, the node type.
    let committed = ops.metric(leader, "beacon_server_proposals_committed_total");
    assert_eq!(ops.metric(leader, "beacon_server_is_leader"), 1.0);
    assert_eq!(ops.metric(leader, "beacon_server_has_leader"), 1.0);
    // The leader times each follower's acknowledgement of the entries it sent, by follower
    // (the term's first entry may have been timed already).
    let timed = |ops: &Ops| -> f64 {
        let (_, text) = ops.get(leader, "/metrics");
        all.iter()
            .filter(|a| **a != all[leader])
            .filter_map(|a| {
                let name =
                    format!(r#"beacon_network_replication_round_trip_seconds_count{{peer="{a}"}}"#);
                metric(&text, &name)
            })
            .sum()
    };
    let timed_before = timed(&ops);
    register(&all).await;
    let more = eventually(Duration::from_secs(5), || async {
        (timed(&ops) > timed_before).then_some(())
    })
    .await;
    assert!(
        more.is_some(),
        "the registration's entry timed to a follower and back: {} then {}",
        timed_before,
        timed(&ops)
    );
    assert_eq!(
        ops.metric(leader, r#"beacon_registrations{node_type="LOGIC"}"#),
        1.0
    );
    assert_eq!(
        ops.metric(
            leader,
            r#"beacon_requests_total{command="Register",code="OK"}"#
        ),
        1.0
    );
    assert!(ops.metric(leader, "beacon_server_proposals_committed_total") > committed);
    assert_eq!(ops.metric(leader, "beacon_ids_in_use"), 1.0);
    assert!(ops.metric(leader, "beacon_disk_wal_fsync_duration_seconds_count") >= 1.0);
    // The registration is a change kept for watches that resume; a fresh cluster keeps
    // every change since its first entry.
    assert!(ops.metric(leader, "beacon_server_watch_history_changes") >= 1.0);
    assert!(ops.metric(leader, "beacon_server_watch_history_bytes") > 0.0);
    assert_eq!(ops.metric(leader, "beacon_server_watch_oldest_index"), 1.0);

    // A linearizable read (the default) counts its wait for a read index: at the leader of
    // three a follower's word that it still follows it, at a follower a request to its
    // leader. A serializable one needs neither.
    let follower = (0..3).find(|i| *i != leader).unwrap();
    let rounds = r#"beacon_read_index_duration_seconds_count{via="vouch"}"#;
    let asked = r#"beacon_read_index_duration_seconds_count{via="leader"}"#;
    for (at, name) in [(leader, rounds), (follower, asked)] {
        let before = ops.metric(at, name);
        let mut reader =
            beacon::client::Client::connect(&all[at].to_string(), &ConnectOptions::default())
                .await
                .unwrap();
        reader.sequences("").await.unwrap();
        assert_eq!(ops.metric(at, name), before + 1.0, "beacon {at}");
        let serializable = ConnectOptions {
            consistency: beacon::wire::Consistency::Serializable,
            ..ConnectOptions::default()
        };
        let mut reader = beacon::client::Client::connect(&all[at].to_string(), &serializable)
            .await
            .unwrap();
        reader.sequences("").await.unwrap();
        assert_eq!(
            ops.metric(at, name),
            before + 1.0,
            "beacon {at}: a serializable read"
        );
    }

    // The leader is killed: a survivor counts the change, the new leader shows the
    // registration it took over.
    let survivor = (0..3).find(|i| *i != leader).unwrap();
    let changes = ops.metric(survivor, "beacon_server_leader_changes_seen_total");
    ops.cluster.beacons[leader].kill();
    let left: Vec<SocketAddr> = (0..3).filter(|i| *i != leader).map(|i| all[i]).collect();
    let next = ops.leader(&left).await;
    assert_ne!(next, leader);
    assert!(ops.metric(survivor, "beacon_server_leader_changes_seen_total") > changes);
    assert_eq!(ops.metric(next, "beacon_server_is_leader"), 1.0);
    assert_eq!(
        ops.metric(next, r#"beacon_registrations{node_type="LOGIC"}"#),
        1.0
    );

    // Down to one of three: it runs (live) but cannot write, and says why.
    let last = (0..3).find(|i| *i != leader && *i != next).unwrap();
    ops.cluster.beacons[next].kill();
    let (code, body) = eventually(Duration::from_secs(5), || async {
        let (code, body) = ops.get(last, "/health");
        (code == 503).then_some((code, body))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "a lone beacon of three is unhealthy: {:?}",
            ops.get(last, "/health")
        )
    });
    assert_eq!(code, 503);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["health"], false, "{body}");
    assert!(
        v["reason"].as_str().unwrap().contains("sees 1 of 3"),
        "{body}"
    );
    assert_eq!(ops.get(last, "/livez"), (200, "ok\n".into()));
    let (code, why) = ops.get(last, "/readyz");
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("sees 1 of 3"), "{why}");
    assert_eq!(ops.metric(last, "beacon_server_can_write"), 0.0);
    assert_eq!(ops.metric(last, "beacon_server_is_leader"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_admin_paths_name_the_endpoints_and_a_client_there_is_sent_on() {
    let ops = Ops::start();
    let (code, body) = ops.get(0, "/nope");
    assert_eq!(code, 404);
    assert!(
        body.contains("/metrics") && body.contains("/readyz"),
        "{body}"
    );
    // nebcli pointed at the admin port is told it speaks HTTP, at once, and the beacon
    // serves on.
    let nebcli_bin = nebcli(BEACON.as_ref());
    let admin = ops.admin[0].to_string();
    let (ok, said) = run_nebcli(&nebcli_bin, &["-s", &admin, "show", "beacon"]);
    assert!(!ok);
    assert!(
        said.contains(&format!("{admin} speaks HTTP, not beacon's protocol"))
            && said.contains("admin HTTP API")
            && !said.contains("no leader answered"),
        "{said}"
    );
    let (code, _) = ops.get(0, "/health");
    assert_eq!(code, 200);
}

/// The metric names the example alerting rules and dashboard in `conf/` use, each with the
/// file that uses it.
fn names_used_in_conf() -> Vec<(String, &'static str)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut names = Vec::new();
    for file in [
        "conf/prometheus/beacon-alerts.yml",
        "conf/grafana/beacon-dashboard.json",
    ] {
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        if file.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("beacon_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.push((name, file));
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_alerts_and_dashboard_use_metrics_a_beacon_serves() {
    let ops = Ops::start();
    let all = ops.addrs();
    let leader = ops.leader(&all).await;
    // One write, so that request and replication histograms have a sample, and one thing
    // of each machine, so that its gauges exist.
    register(&all).await;
    machines_in_use(&all).await;
    let (_, text) = ops.get(leader, "/metrics");
    // Families are named on their TYPE lines, without the _total of counters' samples or
    // the _bucket/_count/_sum of histograms'.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let used = names_used_in_conf();
    assert!(used.len() > 10, "{used:?}");
    for (name, file) in used {
        let family = ["_total", "_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        assert!(
            families.contains(&family),
            "{file} uses {name}, which no beacon serves; served: {families:?}"
        );
    }
}

/// A queue with a pending task and no worker, a sequence, an unassigned resource and a slot
/// group without holders.
async fn machines_in_use(beacons: &[SocketAddr]) {
    let beacons = beacons.iter().map(|a| a.to_string()).collect();
    let mut c = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    c.create_queue("thumbs", 0, 0).await.unwrap();
    c.submit_task("thumbs", "t1", b"x", &Default::default())
        .await
        .unwrap();
    c.create_sequence("orders", 0, 0).await.unwrap();
    c.next_segment("orders", 100).await.unwrap();
    c.add_resource("site-1", "CRAWLER", 1, Default::default())
        .await
        .unwrap();
    c.create_slots("robots", "ROBOT", 2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_machine_shows_its_state_on_the_metrics() {
    let ops = Ops::start();
    let all = ops.addrs();
    let leader = ops.leader(&all).await;
    machines_in_use(&all).await;
    for (name, want) in [
        (
            "beacon_queue_tasks{queue=\"thumbs\",state=\"pending\"}",
            1.0,
        ),
        ("beacon_queue_tasks{queue=\"thumbs\",state=\"dead\"}", 0.0),
        ("beacon_queue_workers{queue=\"thumbs\"}", 0.0),
        ("beacon_sequences", 1.0),
        ("beacon_sequence_max{sequence=\"orders\"}", 100.0),
        (
            "beacon_resources{node_type=\"CRAWLER\",state=\"unassigned\"}",
            1.0,
        ),
        ("beacon_slots{group=\"robots\",state=\"free\"}", 2.0),
        ("beacon_slots{group=\"robots\",state=\"held\"}", 0.0),
    ] {
        assert_eq!(ops.metric(leader, name), want, "{name}");
    }
    // A pending task ages.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let age = ops.metric(
        leader,
        "beacon_queue_oldest_pending_age_seconds{queue=\"thumbs\"}",
    );
    assert!(age >= 1.0, "{age}");
}
