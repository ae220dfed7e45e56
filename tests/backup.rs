//! Backup and restore on real processes: `nebcli snapshot save` takes a backup of a live
//! cluster (asked of a follower, answered by the leader), `snapshot status` says what it
//! holds, and `beacon restore` builds a new cluster that holds exactly the saved node IDs
//! and sequences; damaged files, an existing target and the old cluster's name are refused.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use beacon::client::{Client, Cluster as Leader, ConnectOptions, config_put};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn run(program: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .expect("run it");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// nebcli against `servers`, which must succeed: its standard output.
fn nebcli_ok(nebcli: &Path, servers: &str, args: &[&str]) -> String {
    let mut all = vec!["-s", servers];
    all.extend_from_slice(args);
    let (code, out, err) = run(nebcli, &all);
    assert_eq!(code, Some(0), "nebcli {args:?}: {out}{err}");
    out
}

/// The registrations a cluster holds, as (node ID, type, address), sorted.
fn nodes(nebcli: &Path, servers: &str) -> Vec<(u64, String, String)> {
    let out = nebcli_ok(nebcli, servers, &["-w", "json", "show", "nodes"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let list = json["nodes"].as_array().expect("a node list");
    let mut nodes: Vec<(u64, String, String)> = list
        .iter()
        .map(|n| {
            let n = &n["node"];
            (
                n["node_id"].as_u64().expect("node_id"),
                n["node_type"].as_str().expect("node_type").to_owned(),
                n["addr"].as_str().expect("addr").to_owned(),
            )
        })
        .collect();
    nodes.sort();
    nodes
}

fn servers(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_live_cluster_restores_into_a_new_one_exactly() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    // A long lease, so that no registration runs out between the two lists compared.
    let keys = r#"{"lease_ms": 600000}"#;
    let old = Cluster::start_with(BEACON.as_ref(), &free_ports(3), TICK_MS, "old", keys);
    let addrs: Vec<SocketAddr> = old.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader:\n{}", old.logs()));
    let all = servers(&addrs);

    // State in two machines: 40 registrations, and a sequence with segments handed out.
    let beacons = addrs.iter().map(|a| a.to_string()).collect();
    let mut client = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    for i in 0..40 {
        let _: pb::registry::RegisterReply = client
            .call(
                RegistryCmd::Register,
                &pb::registry::RegisterRequest {
                    node_type: if i % 2 == 0 { "LOGIC" } else { "ACCESS" }.into(),
                    addr: format!("10.0.0.{i}:7000"),
                    ..Default::default()
                },
                "register",
            )
            .await
            .unwrap();
    }
    nebcli_ok(
        &nebcli,
        &all,
        &["sequence", "create", "orders", "--step", "100"],
    );
    for _ in 0..3 {
        nebcli_ok(&nebcli, &all, &["sequence", "next", "orders"]);
    }
    // And config documents large enough that the backup comes in several chunks (at most
    // 1 MiB each): 40 of 60 KB.
    for i in 0..40u8 {
        let value = vec![b'a' + i % 26; 60_000];
        client
            .config_write(
                vec![],
                vec![config_put(&format!("cluster/blob-{i:02}"), value, false)],
            )
            .await
            .unwrap();
    }
    let saved_nodes = nodes(&nebcli, &all);
    assert_eq!(saved_nodes.len(), 40);

    // Asked of a follower first: the backup is taken at the leader.
    let follower = addrs
        .iter()
        .find(|a| a.to_string() != leader)
        .expect("a follower")
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.backup");
    let file_s = file.display().to_string();
    let out = nebcli_ok(
        &nebcli,
        &format!("{follower},{all}"),
        &["snapshot", "save", &file_s],
    );
    assert!(out.contains("backup of cluster old at index"), "{out}");
    let (code, _, err) = run(&nebcli, &["-s", &all, "snapshot", "save", &file_s]);
    assert_eq!(
        code,
        Some(1),
        "an existing file is never overwritten: {err}"
    );
    assert!(err.contains("exists"), "{err}");

    let status = nebcli_ok(
        &nebcli,
        &all,
        &["-w", "json", "snapshot", "status", &file_s],
    );
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["cluster"], "old");
    assert_eq!(status["taken_by"], leader.as_str());
    assert!(status["index"].as_u64().unwrap() > 40, "{status}");
    assert_eq!(
        status["size"].as_u64().unwrap(),
        std::fs::metadata(&file).unwrap().len()
    );
    let contents = status["contents"].to_string();
    assert!(
        contents.contains("registry: 40 registrations"),
        "{contents}"
    );
    assert!(contents.contains("sequence: 1 sequences"), "{contents}");
    assert!(
        contents.contains("configs: 40 config documents"),
        "{contents}"
    );
    assert!(status["size"].as_u64().unwrap() > 2_400_000, "{status}");

    // A damaged copy is refused, by status and by restore alike.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    let damaged = dir.path().join("damaged.backup");
    std::fs::write(&damaged, &bytes).unwrap();
    let damaged_s = damaged.display().to_string();
    let (code, _, err) = run(&nebcli, &["snapshot", "status", &damaged_s]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is damaged: its checksum"), "{err}");

    // The old cluster goes on; a new one is built beside it on other ports.
    let ports = free_ports(3);
    let new_dir = tempfile::tempdir().unwrap();
    let args_of = |port: u16, cluster: &str| {
        beacon_args(
            new_dir.path(),
            port,
            &ports,
            TICK_MS,
            cluster,
            serde_json::from_str(keys).unwrap(),
        )
    };
    let restore = |args: Vec<String>, from: &str| {
        let mut all: Vec<&str> = vec!["restore", from];
        all.extend(args.iter().map(String::as_str));
        run(BEACON.as_ref(), &all)
    };
    let (code, _, err) = restore(args_of(ports[0], "old"), &file_s);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs a name of its own"), "{err}");
    let (code, _, err) = restore(args_of(ports[0], "new"), &damaged_s);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("damaged"), "{err}");
    for &port in &ports {
        let (code, out, err) = restore(args_of(port, "new"), &file_s);
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("40 registrations"), "{out}");
    }
    let (code, _, err) = restore(args_of(ports[0], "new"), &file_s);
    assert_eq!(code, Some(2), "a restore never overwrites state: {err}");
    assert!(err.contains("is not empty"), "{err}");

    let new: Vec<Beacon> = ports
        .iter()
        .map(|&p| {
            let b = Beacon::start(BEACON.as_ref(), addr(p), new_dir.path(), args_of(p, "new"));
            wait_listening(addr(p));
            b
        })
        .collect();
    let new_addrs: Vec<SocketAddr> = new.iter().map(|b| b.addr).collect();
    let logs = || {
        new.iter()
            .map(|b| format!("==== {} ====\n{}", b.addr, b.log()))
            .collect::<String>()
    };
    eventually(Duration::from_secs(10), || agreed_leader(&new_addrs))
        .await
        .unwrap_or_else(|| panic!("no leader in the restored cluster:\n{}", logs()));
    let new_all = servers(&new_addrs);
    assert_eq!(nodes(&nebcli, &new_all), saved_nodes, "{}", logs());
    // The sequence goes on after what the old cluster handed out: nothing twice.
    let next = nebcli_ok(
        &nebcli,
        &new_all,
        &["-w", "json", "sequence", "next", "orders"],
    );
    let next: serde_json::Value = serde_json::from_str(&next).unwrap();
    assert_eq!(next["segment"]["start"].as_u64(), Some(301), "{next}");
    // The documents came whole, across the chunks.
    let mut c = Client::connect(&new_addrs[1].to_string(), &ConnectOptions::default())
        .await
        .unwrap();
    let docs = c.config_get("cluster/blob-", true).await.unwrap().documents;
    assert_eq!(docs.len(), 40);
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(d.value, vec![b'a' + (i % 26) as u8; 60_000], "{}", d.key);
    }
    // The two clusters do not mix: the old one's beacons are refused by the new.
    let status = status_with(new_addrs[0], &ConnectOptions::default())
        .await
        .expect("status");
    assert!(
        status
            .beacons
            .iter()
            .all(|b| !addrs.iter().any(|a| a.to_string() == b.node))
    );
    drop(old);
}
