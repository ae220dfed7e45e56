//! Leader transfer on real processes (`nebcli leader transfer`): the leadership goes to the
//! beacon named (or the one furthest along) while services keep registering, none of their
//! writes fails, and the refusals (a beacon that is offline or not of the cluster) are clear.
//! A transfer asked of a leader that has only just taken over waits for it to serve.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn run(nebcli: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(nebcli)
        .args(args)
        .output()
        .expect("run nebcli");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leadership_moves_where_asked_and_no_write_fails_meanwhile() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let mut cluster = Cluster::start(BEACON.as_ref(), &free_ports(3), 100, "transfer");
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let first = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();

    // Services register all along, through whichever beacon leads.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, longest_us) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let writer = {
        let (stop, done, longest_us) = (stop.clone(), done.clone(), longest_us.clone());
        let beacons = beacons.clone();
        tokio::spawn(async move {
            let opts = ConnectOptions::default();
            let mut c = Leader::new(beacons, opts, Duration::from_secs(10));
            let mut failures = Vec::new();
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // A thousand addresses over and over (registering an address again answers
                // with its ID), so that a fast machine never runs out of the 1023 IDs.
                let n = i % 1000;
                let started = Instant::now();
                let req = pb::registry::RegisterRequest {
                    node_type: "LOGIC".into(),
                    addr: format!("10.1.{}.{}:80", n / 250, n % 250),
                    ..Default::default()
                };
                let r: Result<pb::registry::RegisterReply, _> =
                    c.call(RegistryCmd::Register, &req, "register").await;
                match r {
                    Ok(_) => {
                        done.fetch_add(1, Ordering::Relaxed);
                        let us = started.elapsed().as_micros() as u64;
                        longest_us.fetch_max(us, Ordering::Relaxed);
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
            failures
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // To a named beacon: the last in sorted order (never the one the election would pick).
    let target = addrs[2].to_string();
    assert_ne!(first, target);
    let (code, out, err) = run(&nebcli, &["-s", &beacons[0], "leader", "transfer", &target]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("to {target}")), "{out}");
    let now = eventually(Duration::from_secs(10), || agreed_leader(&addrs)).await;
    assert_eq!(now.as_deref(), Some(target.as_str()), "{}", cluster.logs());

    // With none named, to another beacon; JSON says who.
    let (code, out, err) = run(
        &nebcli,
        &["-s", &beacons[0], "-w", "json", "leader", "transfer"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["previous"], target.as_str(), "{v}");
    assert_ne!(v["leader"], target.as_str(), "{v}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let failures = writer.await.unwrap();
    assert!(
        failures.is_empty(),
        "writes failed during the transfers: {failures:?}"
    );
    println!(
        "{} registrations through two transfers, the slowest in {:.1} ms",
        done.load(Ordering::Relaxed),
        longest_us.load(Ordering::Relaxed) as f64 / 1e3
    );

    // Refusals: a beacon that is not of the cluster, a bad address, an offline one.
    let (code, _, err) = run(
        &nebcli,
        &["-s", &beacons[0], "leader", "transfer", "127.0.0.1:1"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not another beacon of this cluster"), "{err}");
    let (code, _, err) = run(
        &nebcli,
        &["-s", &beacons[0], "leader", "transfer", "banana"],
    );
    assert_eq!(code, Some(2), "{err}");
    let leader = agreed_leader(&addrs).await.unwrap();
    let victim = addrs.iter().position(|a| a.to_string() != leader).unwrap();
    cluster.beacons[victim].kill();
    let down = addrs[victim].to_string();
    let survivors: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| *a != addrs[victim])
        .collect();
    let _ = eventually(Duration::from_secs(5), || async {
        let s = status(survivors[0]).await?;
        (!row(&s, addrs[victim]).is_online).then_some(())
    })
    .await;
    let (code, _, err) = run(&nebcli, &["-s", &leader, "leader", "transfer", &down]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("offline"), "{err}");
    assert_eq!(
        agreed_leader(&survivors).await.as_deref(),
        Some(leader.as_str())
    );
}

/// A script that moves the leadership again at once (a rolling restart moving it off each
/// machine in turn) meets a leader still taking over its state, for the round trip and the
/// store that take: the transfer waits for it to serve rather than fail. Asked on
/// connections opened beforehand, each transfer reaches the new leader within a moment of
/// its taking the leadership; `nebcli` does the same, slower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_back_to_back_each_wait_for_the_last_leader_to_take_over() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let cluster = Cluster::start(BEACON.as_ref(), &free_ports(3), 100, "back-to-back");
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let mut leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let opts = ConnectOptions::default();
    let mut links = std::collections::HashMap::new();
    for a in &addrs {
        let c = beacon::net::Client::connect(&a.to_string(), &opts)
            .await
            .expect("connect");
        links.insert(a.to_string(), c);
    }
    for round in 0..10 {
        let c = links.get_mut(&leader).unwrap();
        let reply: Result<pb::TransferLeaderReply, _> = c
            .request(
                beacon::wire::Cmd::TransferLeader,
                &pb::TransferLeaderRequest::default(),
                "the leader transfer",
            )
            .await;
        let reply = reply.unwrap_or_else(|e| panic!("transfer {round} failed: {e}"));
        assert_eq!(reply.previous, leader);
        assert_ne!(reply.leader, leader);
        leader = reply.leader;
    }
    for round in 0..3 {
        let (code, out, err) = run(
            &nebcli,
            &["-s", &leader, "-w", "json", "leader", "transfer"],
        );
        assert_eq!(
            code,
            Some(0),
            "transfer {round} by nebcli failed: {out}{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["previous"], leader.as_str(), "{v}");
        leader = v["leader"].as_str().unwrap().to_string();
    }
    let now = eventually(Duration::from_secs(10), || agreed_leader(&addrs)).await;
    assert_eq!(now.as_deref(), Some(leader.as_str()), "{}", cluster.logs());
}
