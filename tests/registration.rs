//! Services against real beacon processes: registration, uniqueness under concurrency and
//! leader kills, replication to every beacon, leases, quarantine, watches, bad input.

mod support;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::nodes;

use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions};
use beacon::machines::registry::{HealthFilter, RegistryCmd, RegistryErrorCode};
use beacon::machines::registry::{LeaseLost, RegisterOptions, Registration, Watch, WatchEvent};
use beacon::pb;
use beacon::wire::{Code, ErrorCode};
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

fn addrs(c: &Cluster) -> Vec<SocketAddr> {
    c.beacons.iter().map(|b| b.addr).collect()
}

fn beacon_list(c: &Cluster) -> Vec<String> {
    addrs(c).iter().map(|a| a.to_string()).collect()
}

fn service(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 1, (i / 250) as u8, (i % 250) as u8 + 1], 7000))
}

fn register_req(node_type: &str, addr: SocketAddr) -> pb::registry::RegisterRequest {
    pb::registry::RegisterRequest {
        node_type: node_type.into(),
        addr: addr.to_string(),
        ..Default::default()
    }
}

/// Registers service `i` through `leader`, riding out failovers.
async fn register(leader: &mut Leader, node_type: &str, i: usize) -> pb::registry::NodeInfo {
    let reply: pb::registry::RegisterReply = leader
        .call(
            RegistryCmd::Register,
            &register_req(node_type, service(i)),
            "register",
        )
        .await
        .unwrap_or_else(|e| panic!("registration {i}: {e}"));
    reply.node.expect("the reply carries the node")
}

/// The request a holder sends to give up its registration `node` (by address).
fn release(node: &pb::registry::NodeInfo) -> pb::registry::UnregisterRequest {
    pb::registry::UnregisterRequest {
        node_id: 0,
        addr: node.addr.clone(),
        term: node.term,
        index: node.index,
        release: true,
        ..Default::default()
    }
}

/// Gives up registration `node` through `leader`, as its holder.
async fn unregister(leader: &mut Leader, node: &pb::registry::NodeInfo) {
    let _: pb::registry::UnregisterReply = leader
        .call(RegistryCmd::Unregister, &release(node), "unregister")
        .await
        .unwrap_or_else(|e| panic!("unregistration of {}: {e}", node.addr));
}

/// A linearizable read sent to a follower the moment its leader is killed (before the
/// follower has noticed) waits for the next leader and answers with what was acknowledged,
/// rather than refusing because the dead leader cannot be reached. Tried several times: the
/// moment the follower notices varies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_at_a_follower_just_after_the_leader_dies_waits_for_the_next_leader() {
    for round in 0..3 {
        let mut c = start(3, "{}").await;
        let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
        let node = register(&mut leader, "LOGIC", round).await;
        // Beacon 0 leads (the first online in sorted order); 1 and 2 relay to it.
        let follower = c.beacons[1].addr;
        let mut client = Client::connect(&follower.to_string(), &opts())
            .await
            .unwrap();
        // A first read opens the follower's relay connection to the leader.
        client.nodes("LOGIC", "").await.unwrap();
        c.beacons[0].kill();
        let read = client.nodes("LOGIC", "").await;
        let reply = read.unwrap_or_else(|e| {
            panic!(
                "round {round}: the read right after the kill was refused: {e}\n{}",
                c.logs()
            )
        });
        assert!(
            reply
                .nodes
                .iter()
                .any(|e| e.node.as_ref().is_some_and(|n| n.node_id == node.node_id)),
            "round {round}: the acknowledged registration is in the answer"
        );
    }
}

async fn start(ports: usize, config: &str) -> Cluster {
    let c = Cluster::start_with(BEACON.as_ref(), &free_ports(ports), TICK_MS, "reg", config);
    let all = addrs(&c);
    eventually(Duration::from_secs(10), || agreed_leader(&all))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    c
}

/// (node_id, addr) of every live registration `addr` holds.
async fn live_set(addr: SocketAddr) -> Option<BTreeSet<(u32, String)>> {
    let reply = nodes(addr).await?;
    Some(
        reply
            .nodes
            .into_iter()
            .filter(|e| e.is_online)
            .filter_map(|e| e.node)
            .map(|n| (n.node_id, n.addr))
            .collect(),
    )
}

/// Waits until every beacon of `addrs` holds exactly `expected`.
async fn assert_replicated(c: &Cluster, addrs: &[SocketAddr], expected: &BTreeSet<(u32, String)>) {
    for a in addrs {
        let same = eventually(Duration::from_secs(10), || async {
            live_set(*a).await.filter(|s| s == expected)
        })
        .await;
        if same.is_none() {
            let got = live_set(*a).await.unwrap_or_default();
            panic!(
                "beacon {a} holds {} registrations, expected {}; missing {:?}, extra {:?}\n{}",
                got.len(),
                expected.len(),
                expected.difference(&got).take(5).collect::<Vec<_>>(),
                got.difference(expected).take(5).collect::<Vec<_>>(),
                c.logs()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_registrations_are_unique_and_on_every_beacon() {
    let c = start(3, r#"{"lease_ms": 60000}"#).await;
    let beacons = beacon_list(&c);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in 0..16 {
        // Clients enter through every beacon: followers redirect them to the leader.
        let entry = vec![beacons[client % beacons.len()].clone()];
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut leader = Leader::new(entry, opts(), Duration::from_secs(10));
            let mut got = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= 1000 {
                    return got;
                }
                let reply: pb::registry::RegisterReply = leader
                    .call(
                        RegistryCmd::Register,
                        &register_req("LOGIC", service(i)),
                        "register",
                    )
                    .await
                    .unwrap();
                let node = reply.node.unwrap();
                assert_eq!(node.addr, service(i).to_string());
                assert_eq!(reply.beacons.len(), 3, "the reply lists every beacon");
                assert_eq!(reply.lease_ms, 60000);
                got.push((node.node_id, node.addr));
            }
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    assert_eq!(acked.len(), 1000);
    let ids: BTreeSet<u32> = acked.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 1000, "every acknowledged ID is distinct");
    assert!(ids.iter().all(|id| (1..=1023).contains(id)));
    let expected: BTreeSet<(u32, String)> = acked.into_iter().collect();
    assert_replicated(&c, &addrs(&c), &expected).await;

    // The allocator agrees everywhere too.
    for a in addrs(&c) {
        let mut client = Client::connect(&a.to_string(), &opts()).await.unwrap();
        let ids = client.ids().await.unwrap();
        assert_eq!((ids.in_use, ids.last_node_id), (1000, 1000), "at {a}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_mid_run_duplicates_and_loses_nothing() {
    let mut c = start(3, r#"{"lease_ms": 60000}"#).await;
    let beacons = beacon_list(&c);
    let next = Arc::new(AtomicUsize::new(0));
    let acked_count = Arc::new(AtomicUsize::new(0));
    const TOTAL: usize = 600;
    let mut tasks = Vec::new();
    for client in 0..8 {
        let mut list = beacons.clone();
        list.rotate_left(client % 3);
        let next = next.clone();
        let acked_count = acked_count.clone();
        tasks.push(tokio::spawn(async move {
            let mut leader = Leader::new(list, opts(), Duration::from_secs(15));
            let mut got = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= TOTAL {
                    return got;
                }
                // Retried across the failover by the client; re-registering the same address
                // is safe, so an unknown outcome is retried until acknowledged.
                let node = register(&mut leader, "LOGIC", i).await;
                got.push((node.node_id, service(i).to_string()));
                acked_count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Kill the leader (the first beacon) once a third is acknowledged.
    let waited = eventually(Duration::from_secs(20), || async {
        (acked_count.load(Ordering::Relaxed) >= TOTAL / 3).then_some(())
    })
    .await;
    assert!(waited.is_some(), "registrations stalled\n{}", c.logs());
    c.beacons[0].kill();
    let at_kill = acked_count.load(Ordering::Relaxed);
    assert!(
        at_kill < TOTAL,
        "the leader died mid-run ({at_kill} of {TOTAL} acknowledged)"
    );

    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    assert_eq!(acked.len(), TOTAL);
    let mut by_id: HashMap<u32, String> = HashMap::new();
    for (id, addr) in &acked {
        if let Some(other) = by_id.insert(*id, addr.clone()) {
            assert_eq!(&other, addr, "node ID {id} acknowledged to two services");
        }
    }
    assert_eq!(by_id.len(), TOTAL, "one ID per service");

    // The survivors agree, and hold every acknowledged registration.
    let survivors = &addrs(&c)[1..];
    let dead = addrs(&c)[0].to_string();
    let leader = eventually(Duration::from_secs(10), || next_leader(survivors, &dead)).await;
    assert!(
        leader.is_some(),
        "survivors agree on a leader\n{}",
        c.logs()
    );
    let expected: BTreeSet<(u32, String)> = acked.into_iter().collect();
    assert_replicated(&c, survivors, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_keeps_its_id_across_a_failover_and_a_restarted_beacon_catches_up() {
    // A short log forces the restarted beacon to catch up from a snapshot.
    let mut c = start(3, r#"{"lease_ms": 2000, "log_keep": 5}"#).await;
    let mut options = RegisterOptions::new("LOGIC", service(1));
    options.connect = opts();
    let reg = Registration::register(beacon_list(&c), options)
        .await
        .unwrap();
    let id = reg.node_id();
    assert!(reg.is_live());
    let (term, index) = reg.fencing_token();
    assert!(term > 0 && index > 0);

    // A follower goes down; registrations continue without it.
    c.beacons[2].kill();
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let mut expected: BTreeSet<(u32, String)> = BTreeSet::from([(id, service(1).to_string())]);
    let mut held = Vec::new();
    for i in 2..30 {
        let node = register(&mut leader, "LOGIC", i).await;
        expected.insert((node.node_id, service(i).to_string()));
        held.push(node);
    }
    // Unregister them again so leases do not matter, except the live service's.
    for node in &held {
        unregister(&mut leader, node).await;
    }
    expected.retain(|(i, _)| *i == id);
    c.beacons[2].restart();
    assert_replicated(&c, &addrs(&c), &expected).await;
    let installed = eventually(Duration::from_secs(5), || async {
        c.beacons[2]
            .log()
            .contains("installed a snapshot")
            .then_some(())
    })
    .await;
    assert!(
        installed.is_some(),
        "the restarted beacon was further behind than the log keeps\n{}",
        c.logs()
    );

    // The leader dies; the service keeps its ID through the new leader, past its lease.
    c.beacons[0].kill();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(reg.is_live(), "lease kept across the failover");
    let survivors = &addrs(&c)[1..];
    let dead = addrs(&c)[0].to_string();
    let new_leader = eventually(Duration::from_secs(5), || next_leader(survivors, &dead))
        .await
        .unwrap();
    let seen = nodes(new_leader.parse().unwrap()).await.unwrap();
    let entry = seen
        .nodes
        .iter()
        .find(|e| e.node.as_ref().is_some_and(|n| n.node_id == id))
        .expect("the new leader holds the registration");
    assert!(entry.is_online);
    assert!(
        entry.last_seen_ms.unwrap() < 2000,
        "the service reports to the new leader"
    );
    let freed = reg.unregister().await.unwrap();
    assert_eq!(freed.node_id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_larger_than_a_frame_reaches_a_restarted_beacon_in_fragments() {
    // 300 registrations with 700 bytes of metadata each make a snapshot of over 200 KiB, more
    // than ten times the 16 KiB frame limit. A beacon keeps as many log entries as its state
    // has records (300 here); churn beyond that forces a snapshot.
    let config = r#"{"max_frame_bytes": 16384, "log_keep": 20, "lease_ms": 600000}"#;
    let mut c = start(3, config).await;
    c.beacons[2].kill();
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    for i in 0..300 {
        let mut req = register_req("LOGIC", service(i));
        req.metadata = format!("{{\"pad\": \"{i:0>690}\"}}");
        let _: pb::registry::RegisterReply = leader
            .call(RegistryCmd::Register, &req, "register")
            .await
            .unwrap_or_else(|e| panic!("registration {i}: {e}"));
    }
    for i in 1000..1200 {
        let node = register(&mut leader, "LOGIC", i).await;
        unregister(&mut leader, &node).await;
    }
    c.beacons[2].restart();
    let ids = |a: SocketAddr| async move {
        let mut client = Client::connect(&a.to_string(), &opts()).await.ok()?;
        let ids = client.ids().await.ok()?;
        Some((ids.in_use, ids.last_node_id, ids.index))
    };
    let on_leader = ids(c.beacons[0].addr).await.unwrap();
    assert_eq!(on_leader.0, 300);
    let caught_up = eventually(Duration::from_secs(15), || async {
        ids(c.beacons[2].addr).await.filter(|got| *got == on_leader)
    })
    .await;
    assert!(
        caught_up.is_some(),
        "restarted beacon has {:?}, the leader {on_leader:?}\n{}",
        ids(c.beacons[2].addr).await,
        c.logs()
    );
    assert!(c.beacons[2].log().contains("installed a snapshot"));
    assert!(!c.logs().contains("exceeds the limit"), "{}", c.logs());

    // All of it is more than a client frame: the listing is refused with a reason, and the
    // connection and the beacon go on.
    let mut client = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    let err = client.nodes("", "").await.unwrap_err();
    assert!(err.is(ErrorCode::FrameTooLarge), "{err}");
    assert!(
        err.to_string().contains("over max_frame_bytes (16384)"),
        "{err}"
    );
    let one = client
        .nodes("LOGIC", &service(7).to_string())
        .await
        .unwrap();
    assert_eq!(one.nodes.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_reports_are_answered_in_order_each_with_its_own_result() {
    use beacon::wire::Frame;
    use futures_util::{SinkExt, StreamExt};

    let c = start(1, "{}").await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let mut live = Vec::new();
    for i in 0..20 {
        live.push(register(&mut leader, "LOGIC", i).await);
    }
    let client = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    let mut conn = client.into_framed();
    // 200 reports sent back to back without waiting; every fifth names an ID that is not
    // registered (or the wrong address), and must be refused on its own, as must every
    // 37th, whose address does not parse (refused before the rest reach the core).
    let mut expect_ok = Vec::new();
    for seq in 1..=200u32 {
        let node = &live[seq as usize % live.len()];
        let unparsable = seq % 37 == 0;
        let bad = seq % 5 == 0 || unparsable;
        let req = pb::registry::NodeReport {
            node_id: if bad && seq % 10 == 0 {
                999
            } else {
                node.node_id
            },
            addr: if unparsable {
                "not an address".into()
            } else if bad && seq % 10 != 0 {
                service(500).to_string()
            } else {
                node.addr.clone()
            },
            term: node.term,
            index: node.index,
            ..Default::default()
        };
        conn.feed(Frame::new(RegistryCmd::NodeReport.code(), seq, 0, &req))
            .await
            .unwrap();
        expect_ok.push((seq, !bad, unparsable));
    }
    conn.flush().await.unwrap();
    for (seq, ok, unparsable) in expect_ok {
        let reply = tokio::time::timeout(Duration::from_secs(5), conn.next())
            .await
            .expect("replies in time")
            .expect("connection open")
            .expect("a frame");
        assert_eq!(reply.seq, seq, "replies come in request order");
        assert_eq!(!reply.is_error(), ok, "seq {seq}: {reply:?}");
        if ok {
            let r: pb::registry::NodeReportReply = reply.decode().unwrap();
            assert_eq!(r.node_id, live[seq as usize % live.len()].node_id);
        } else {
            let e: pb::ErrorReply = reply.decode().unwrap();
            let want = if unparsable {
                beacon::wire::ErrorCode::InvalidRequest as u32
            } else {
                RegistryErrorCode::NoLease as u32
            };
            assert_eq!(e.code, want, "seq {seq}: {e:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_registration_tells_the_service_to_stop() {
    let c = start(1, r#"{"lease_ms": 1000}"#).await;
    let mut options = RegisterOptions::new("LOGIC", service(7));
    options.connect = opts();
    let reg = Registration::register(beacon_list(&c), options)
        .await
        .unwrap();
    // An operator unregisters it behind its back.
    let mut admin = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    let (term, index) = reg.fencing_token();
    admin
        .unregister(&pb::registry::UnregisterRequest {
            node_id: reg.node_id(),
            term,
            index,
            ..Default::default()
        })
        .await
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), reg.lost())
        .await
        .expect("the keepalive notices within a lease");
    assert!(
        matches!(lost, LeaseLost::Revoked(ref why) if why.contains("holds no lease")),
        "{lost}"
    );
    assert!(!reg.is_live());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_lease_quarantines_the_id_before_reuse() {
    let c = start(
        1,
        r#"{"lease_ms": 1000, "id_reuse_delay_ms": 1500, "id_range": [1, 3]}"#,
    )
    .await;
    let at = c.beacons[0].addr.to_string();
    let mut client = Client::connect(&at, &opts()).await.unwrap();
    // Registered once and never reported: the lease runs out.
    let first = client
        .register(&register_req("LOGIC", service(1)))
        .await
        .unwrap()
        .node
        .unwrap();
    assert_eq!(first.node_id, 1);
    let quarantined = eventually(Duration::from_secs(5), || async {
        let mut c = Client::connect(&at, &opts()).await.ok()?;
        let ids = c.ids().await.ok()?;
        (ids.quarantined == vec![1] && ids.in_use == 0).then_some(ids)
    })
    .await;
    assert!(
        quarantined.is_some(),
        "ID 1 went to quarantine\n{}",
        c.logs()
    );
    let entry = &client.nodes("", "").await.unwrap().nodes[0];
    assert!(!entry.is_online && entry.quarantine_ms.is_some());
    // A report now is refused: the service must stop using the ID.
    let err = client
        .report(&pb::registry::NodeReport {
            node_id: 1,
            addr: service(1).to_string(),
            term: first.term,
            index: first.index,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.is(RegistryErrorCode::NoLease));

    // Allocation skips the quarantined ID; with the range full, a clear error.
    let mut got = Vec::new();
    for i in 2..=3 {
        let n = client
            .register(&register_req("LOGIC", service(i)))
            .await
            .unwrap()
            .node
            .unwrap();
        got.push(n.node_id);
    }
    assert_eq!(got, vec![2, 3]);
    let err = client
        .register(&register_req("LOGIC", service(4)))
        .await
        .unwrap_err();
    assert!(err.is(RegistryErrorCode::IdsExhausted), "{err}");
    assert!(err.to_string().contains("no free node ID"), "{err}");

    // Once the quarantine ends, ID 1 is free again. (2 and 3 expire meanwhile too.)
    let reused = eventually(Duration::from_secs(10), || async {
        let mut c = Client::connect(&at, &opts()).await.ok()?;
        c.register(&register_req("LOGIC", service(5))).await.ok()
    })
    .await
    .expect("an ID is released after the quarantine");
    assert!((1..=3).contains(&reused.node.unwrap().node_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_every_change_once_even_across_a_failover() {
    let mut c = start(3, r#"{"lease_ms": 60000}"#).await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let before = register(&mut leader, "LOGIC", 1).await;

    // Enter through a follower: the watch follows the redirect to the leader.
    let list = vec![c.beacons[2].addr.to_string(), c.beacons[1].addr.to_string()];
    let mut watch = Watch::start(list, vec!["LOGIC".into()], opts(), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(watch.nodes().cloned().collect::<Vec<_>>(), vec![before]);

    let a = register(&mut leader, "LOGIC", 2).await;
    let _other_type = register(&mut leader, "ACCESS", 3).await;
    let b = register(&mut leader, "LOGIC", 4).await;
    let again = register(&mut leader, "LOGIC", 2).await; // same address, still live: no change
    assert_eq!(again.node_id, a.node_id);
    let mut admin = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    admin.unregister(&release(&a)).await.unwrap();

    let mut events = Vec::new();
    for _ in 0..3 {
        let e = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("a notice arrives")
            .unwrap();
        events.push(e);
    }
    assert_eq!(
        events,
        vec![
            WatchEvent::Added(a.clone()),
            WatchEvent::Added(b.clone()),
            WatchEvent::Removed(a.clone())
        ]
    );

    // The leader dies (every beacon holds what it committed); while the watch finds the
    // new leader, a service comes and goes and another comes. The watch resumes there from
    // the index after the last it heard: it hears all three changes, once, in order, where
    // listing the set again would have missed the one that came and went.
    let all = addrs(&c);
    eventually(Duration::from_secs(10), || level(&all))
        .await
        .expect("the beacons agree");
    let heard = watch.index();
    c.beacons[0].kill();
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let d = register(&mut leader, "LOGIC", 5).await;
    let brief = register(&mut leader, "LOGIC", 6).await;
    leader
        .call::<_, pb::registry::UnregisterReply>(
            RegistryCmd::Unregister,
            &release(&brief),
            "unregister",
        )
        .await
        .unwrap();
    let mut events = Vec::new();
    for _ in 0..3 {
        let e = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("the watch resumes at the new leader")
            .unwrap();
        events.push(e);
    }
    assert_eq!(
        events,
        vec![
            WatchEvent::Added(d.clone()),
            WatchEvent::Added(brief.clone()),
            WatchEvent::Removed(brief.clone())
        ]
    );
    assert_eq!(
        (watch.resumes(), watch.resyncs()),
        (1, 0),
        "resumed, never listed again"
    );
    assert!(watch.index() > heard);
    let nothing_more = tokio::time::timeout(Duration::from_millis(500), watch.next()).await;
    assert!(nothing_more.is_err(), "no duplicate: {nothing_more:?}");
    let known: BTreeMap<u32, String> = watch.nodes().map(|n| (n.node_id, n.addr.clone())).collect();
    assert_eq!(known.len(), 3, "1, b and d: {known:?}");
}

/// Some, once every beacon of `addrs` is up and at the same log position.
async fn level(addrs: &[SocketAddr]) -> Option<()> {
    let mut positions = BTreeSet::new();
    for a in addrs {
        positions.insert(status(*a).await?.index);
    }
    (positions.len() == 1).then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_from_a_kept_index_is_refused_compacted_before_it_and_hears_progress() {
    // Three changes kept; an idle watch hears progress every 200 ms.
    let c = start(
        1,
        r#"{"lease_ms": 60000, "watch": {"history": 3, "progress_ms": 200}}"#,
    )
    .await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let mut client = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    let at_start = client.watch(&[]).await.unwrap().index;
    let mut nodes = Vec::new();
    for i in 1..=5 {
        nodes.push(register(&mut leader, "LOGIC", i).await);
    }
    let last = nodes[4].index;

    // Resumed at an index still kept (registration 4's): the changes from it on, and
    // nothing before.
    let types = vec!["LOGIC".to_owned()];
    let from = nodes[3].index;
    let mut resumed = Watch::resume(
        beacon_list(&c),
        types.clone(),
        HealthFilter::Serving,
        from,
        opts(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(resumed.nodes().count(), 0, "a resume lists nothing");
    let mut heard = Vec::new();
    while heard.len() < 2 {
        let e = tokio::time::timeout(Duration::from_secs(5), resumed.next())
            .await
            .expect("the kept changes replay")
            .unwrap();
        heard.push(e);
    }
    assert_eq!(
        heard,
        vec![
            WatchEvent::Added(nodes[3].clone()),
            WatchEvent::Added(nodes[4].clone())
        ],
        "registrations 4 and 5, each once"
    );

    // Resumed before the oldest change kept: COMPACTED, naming the oldest index.
    let mut old = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    let e = old.watch_from(&types, at_start + 1).await.unwrap_err();
    assert!(e.is(ErrorCode::Compacted), "{e}");
    assert!(
        e.to_string()
            .contains("the oldest index a watch can resume from is"),
        "{e}"
    );
    assert!(
        Watch::resume(
            beacon_list(&c),
            types.clone(),
            HealthFilter::Serving,
            1,
            opts(),
            Duration::from_secs(5)
        )
        .await
        .is_err_and(|e| e.is(ErrorCode::Compacted))
    );

    // An idle watch hears how far the log is committed: an empty notice.
    let mut idle = Client::connect(&c.beacons[0].addr.to_string(), &opts())
        .await
        .unwrap();
    idle.watch(&types).await.unwrap();
    let progress = tokio::time::timeout(Duration::from_secs(5), idle.next_notice())
        .await
        .expect("a progress notice within a few periods")
        .unwrap();
    assert!(progress.add_nodes.is_empty() && progress.del_nodes.is_empty());
    assert!(progress.index >= last, "{} < {last}", progress.index);
}

/// A watch that resumes far behind (a herd coming back after a stall) is owed a replay
/// longer than its live queue could hold while the replay is sent: it is replayed with no
/// live queue behind it, then subscribed again from after the replay, so it is never
/// dropped for what committed meanwhile, and hears every change once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_replay_with_writes_behind_it_is_sent_whole_and_the_watch_goes_on_live() {
    const REPLAYED: usize = 1_200;
    const MEANWHILE: usize = 100;
    // A live queue of 16 notices: the writes made while the replay is read would overflow it.
    let c = start(
        1,
        r#"{"lease_ms": 600000, "max_metadata_bytes": 16384, "id_range": [1, 100000],
            "watch": {"queue_notices": 16}}"#,
    )
    .await;
    let at = c.beacons[0].addr.to_string();
    let big = format!(r#"{{"pad": "{}"}}"#, "x".repeat(8 << 10));
    let next = Arc::new(AtomicUsize::new(0));
    let mut loaders = Vec::new();
    for _ in 0..4 {
        let (next, at, big) = (next.clone(), at.clone(), big.clone());
        loaders.push(tokio::spawn(async move {
            let mut leader = Leader::new(vec![at], opts(), Duration::from_secs(10));
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= REPLAYED {
                    return made;
                }
                let request = pb::registry::RegisterRequest {
                    metadata: big.clone(),
                    ..register_req("LOGIC", service(i))
                };
                let reply: pb::registry::RegisterReply = leader
                    .call(RegistryCmd::Register, &request, "register")
                    .await
                    .unwrap_or_else(|e| panic!("registration {i}: {e}"));
                made.push(reply.node.expect("the reply carries the node"));
            }
        }));
    }
    let mut made = Vec::new();
    for l in loaders {
        made.extend(l.await.expect("a loader"));
    }
    let from = made.iter().map(|n| n.index).min().expect("registrations");

    let mut watch = Client::connect(&at, &opts()).await.unwrap();
    watch.watch_from(&["LOGIC".to_owned()], from).await.unwrap();
    let writer = tokio::spawn({
        let at = at.clone();
        async move {
            let mut leader = Leader::new(vec![at], opts(), Duration::from_secs(10));
            let mut made = Vec::new();
            for i in REPLAYED..REPLAYED + MEANWHILE {
                made.push(register(&mut leader, "LOGIC", i).await);
            }
            made
        }
    });
    // Read slowly at first: the writes commit while the replay is still being sent.
    let mut heard: Vec<(u64, u32)> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while heard.len() < REPLAYED + MEANWHILE {
        let notice = tokio::time::timeout_at(deadline, watch.next_notice())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} of {} changes heard in 60 s",
                    heard.len(),
                    REPLAYED + MEANWHILE
                )
            })
            .unwrap_or_else(|e| {
                panic!(
                    "the watch ended after {} of {} changes: {e}\n{}",
                    heard.len(),
                    REPLAYED + MEANWHILE,
                    c.logs()
                )
            });
        heard.extend(notice.add_nodes.iter().map(|n| (n.index, n.node_id)));
        if heard.len() < REPLAYED / 2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    made.extend(writer.await.expect("the writer"));
    let indexes: Vec<u64> = heard.iter().map(|(i, _)| *i).collect();
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "every change once, in log order"
    );
    let heard: BTreeSet<u32> = heard.iter().map(|(_, id)| *id).collect();
    let made: BTreeSet<u32> = made.iter().map(|n| n.node_id).collect();
    assert_eq!(heard, made, "every registration heard");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_told_about_the_types_its_type_subscribes_to() {
    let c = start(
        3,
        r#"{"node_type": [{"node_type": "ACCESS", "subscribe": ["LOGIC", "LOGGER"]}]}"#,
    )
    .await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let logic = register(&mut leader, "LOGIC", 1).await;
    let _unrelated = register(&mut leader, "OTHER", 2).await;
    let mut options = RegisterOptions::new("ACCESS", service(3));
    options.connect = opts();
    let access = Registration::register(beacon_list(&c), options)
        .await
        .unwrap();
    assert_eq!(access.subscribe(), ["LOGIC", "LOGGER"]);
    let mut watch = access.watch_subscriptions().await.unwrap();
    assert_eq!(watch.nodes().cloned().collect::<Vec<_>>(), vec![logic]);
    let logger = register(&mut leader, "LOGGER", 4).await;
    let _ignored = register(&mut leader, "ACCESS", 5).await;
    let e = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("a notice arrives")
        .unwrap();
    assert_eq!(e, WatchEvent::Added(logger));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_registrations_get_clear_errors_and_change_nothing() {
    let c = start(1, r#"{"max_metadata_bytes": 64}"#).await;
    let at = c.beacons[0].addr.to_string();
    let mut client = Client::connect(&at, &opts()).await.unwrap();
    // Taken once the leadership's first entry is committed (its store reported a moment
    // after the beacon serves): from then on only the requests below move the index.
    let mut before = client.ids().await.unwrap();
    for _ in 0..100 {
        if before.index >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        before = client.ids().await.unwrap();
    }
    assert!(
        before.index >= 1,
        "the first entry never committed: {before:?}"
    );

    let bad = |node_type: &str, addr: &str, metadata: &str| pb::registry::RegisterRequest {
        node_type: node_type.into(),
        addr: addr.into(),
        metadata: metadata.into(),
        ..Default::default()
    };
    let cases = [
        (
            bad("LOGIC", "not-an-address", ""),
            "addr `not-an-address` is not an ip:port",
        ),
        (
            bad("LOGIC", "10.0.0.1", ""),
            "addr `10.0.0.1` is not an ip:port",
        ),
        (bad("LOGIC", "10.0.0.1:0", ""), "port 0"),
        (bad("LOGIC", "0.0.0.0:80", ""), "wildcard"),
        (bad("", "10.0.0.1:80", ""), "node_type is empty"),
        (
            bad("has space", "10.0.0.1:80", ""),
            "node_type `has space` is invalid",
        ),
        (
            bad(
                "LOGIC",
                "10.0.0.1:80",
                &format!(r#"{{"x":"{}"}}"#, "y".repeat(100)),
            ),
            "metadata is 108 bytes, over the limit of 64 bytes",
        ),
        (
            bad("LOGIC", "10.0.0.1:80", "{oops"),
            "metadata is not valid JSON",
        ),
    ];
    for (req, want) in cases {
        let err = client.register(&req).await.unwrap_err();
        assert!(err.is(ErrorCode::InvalidRequest), "{err}");
        assert!(err.to_string().contains(want), "{err} should say {want}");
    }
    // The same address under another type is a conflict, not a second ID.
    client
        .register(&register_req("LOGIC", service(1)))
        .await
        .unwrap();
    let err = client
        .register(&register_req("ACCESS", service(1)))
        .await
        .unwrap_err();
    assert!(err.is(RegistryErrorCode::Conflict), "{err}");
    // Unregistering what does not exist, or nothing.
    let err = client
        .unregister(&pb::registry::UnregisterRequest {
            node_id: 999,
            term: 1,
            index: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.is(RegistryErrorCode::UnknownTarget), "{err}");
    // Without naming the registration (its fencing token), nothing is ended.
    let err = client
        .unregister(&pb::registry::UnregisterRequest {
            addr: service(1).to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.is(ErrorCode::InvalidRequest), "{err}");
    assert!(err.to_string().contains("fencing token"), "{err}");
    let err = client
        .unregister(&pb::registry::UnregisterRequest::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("give a node_id or an addr"),
        "{err}"
    );

    // Nothing but the one good registration changed, and the connection still serves.
    let after = client.ids().await.unwrap();
    assert_eq!(after.in_use, before.in_use + 1);
    assert_eq!(after.index, before.index + 1);
    assert!(client.beacon_status().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_at_a_follower_redirect_to_the_leader() {
    let c = start(3, "{}").await;
    let follower = c.beacons[1].addr.to_string();
    let mut client = Client::connect(&follower, &opts()).await.unwrap();
    let err = client
        .register(&register_req("LOGIC", service(1)))
        .await
        .unwrap_err();
    assert!(err.is(ErrorCode::NotLeader));
    let ClientError::Refused { leader, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        leader.as_deref(),
        Some(c.beacons[0].addr.to_string().as_str())
    );
    // Reads are served by any beacon.
    assert!(client.nodes("", "").await.unwrap().nodes.is_empty());
    let mut watch_conn = Client::connect(&follower, &opts()).await.unwrap();
    let err = watch_conn.watch(&[]).await.unwrap_err();
    assert!(err.is(ErrorCode::NotLeader));
}

/// Two beacons whose configs differ in `extra_a` / `extra_b`: each must refuse the other
/// with a log line containing `complaint`.
async fn assert_config_mismatch_refused(extra_a: &str, extra_b: &str, complaint: &str) {
    let ports = free_ports(2);
    let dir = tempfile::tempdir().unwrap();
    let peers = format!("{},{}", addr(ports[0]), addr(ports[1]));
    let start = |port: u16, extra: &str| {
        let file = dir.path().join(format!("{port}.json"));
        std::fs::write(&file, format!(r#"{{"node": "{}", {extra}}}"#, addr(port))).unwrap();
        let args = vec![
            "--config".into(),
            file.display().to_string(),
            "--peers".into(),
            peers.clone(),
            "--tick-ms".into(),
            "100".into(),
            "--data-dir".into(),
            dir.path().join("{node}").display().to_string(),
        ];
        Beacon::start(BEACON.as_ref(), addr(port), dir.path(), args)
    };
    let a = start(ports[0], extra_a);
    let b = start(ports[1], extra_b);
    let refused = eventually(Duration::from_secs(5), || async {
        (a.log().contains(complaint) && b.log().contains(complaint)).then_some(())
    })
    .await;
    assert!(refused.is_some(), "{}\n{}", a.log(), b.log());
}

#[tokio::test]
async fn beacons_with_different_id_ranges_refuse_each_other() {
    assert_config_mismatch_refused(
        r#""id_range": [1, 1023]"#,
        r#""id_range": [1, 100]"#,
        "every beacon of a cluster needs the same `id_range`",
    )
    .await;
}

#[tokio::test]
async fn beacons_in_different_modes_refuse_each_other() {
    assert_config_mismatch_refused(
        r#""mode": "classic""#,
        r#""mode": "quorum""#,
        "every beacon of a cluster needs the same `mode`",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_cluster_restart_keeps_every_allocation() {
    // log_keep 10: the stored logs are compacted into snapshots along the way.
    let mut c = start(3, r#"{"lease_ms": 60000, "log_keep": 10}"#).await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let mut expected = BTreeSet::new();
    for i in 0..40 {
        let node = register(&mut leader, "LOGIC", i).await;
        expected.insert((node.node_id, node.addr));
    }
    assert_replicated(&c, &addrs(&c), &expected).await;
    for b in &mut c.beacons {
        b.kill();
    }
    for b in &mut c.beacons {
        b.restart();
        wait_listening(b.addr);
    }
    assert_replicated(&c, &addrs(&c), &expected).await;
    for b in &c.beacons {
        assert!(
            b.log().contains("state restored from data_dir"),
            "{}",
            b.log()
        );
    }
    // Allocation goes on past every stored ID.
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let next = register(&mut leader, "LOGIC", 100).await;
    assert!(
        expected.iter().all(|(id, _)| *id != next.node_id),
        "{} reissued",
        next.node_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_cut_off_with_a_log_line_and_refetched() {
    let mut c = start(3, r#"{"lease_ms": 60000}"#).await;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(10));
    let mut expected = BTreeSet::new();
    for i in 0..10 {
        let node = register(&mut leader, "LOGIC", i).await;
        expected.insert((node.node_id, node.addr));
    }
    assert_replicated(&c, &addrs(&c), &expected).await;
    // A follower crashes mid-append: its last record is cut short.
    c.beacons[2].kill();
    let dir = c
        .dir
        .path()
        .join(format!("127.0.0.1_{}", c.beacons[2].addr.port()));
    let log = dir.join("log");
    let (_, intact) = beacon::storage::Storage::<beacon::machines::State>::open(
        beacon::storage::Files::new(&dir),
    )
    .unwrap();
    let logged = intact.entries.len();
    assert!(logged >= 10, "{logged} entries logged");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.truncate(bytes.len() - 5);
    std::fs::write(&log, &bytes).unwrap();
    c.beacons[2].restart();
    assert_replicated(&c, &addrs(&c), &expected).await;
    let text = c.beacons[2].log();
    assert!(
        text.contains("cut short") && text.contains("cut off from there"),
        "{text}"
    );
    let loaded = format!("{} entries after it", logged - 1);
    assert!(
        text.contains(&loaded),
        "all but the cut entry were loaded ({loaded}): {text}"
    );
}

/// The registrations of `node_type` beacon `at` lists, with their health, by node ID.
async fn health_at(at: SocketAddr, node_type: &str) -> BTreeMap<u32, pb::registry::NodeInfo> {
    let mut c = Client::connect(&at.to_string(), &opts()).await.unwrap();
    let reply = c.nodes(node_type, "").await.unwrap();
    reply
        .nodes
        .into_iter()
        .filter(|e| e.is_online)
        .filter_map(|e| e.node)
        .map(|n| (n.node_id, n))
        .collect()
}

fn status_of(n: &pb::registry::NodeInfo) -> (i32, bool, &str) {
    n.health
        .as_ref()
        .map_or((0, false, ""), |h| (h.status, h.draining, h.note.as_str()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_from_reports_and_a_drain_leave_discovery_reach_every_beacon_and_survive_a_failover()
{
    use beacon::machines::registry::Status;
    let mut c = start(3, r#"{"lease_ms": 2000}"#).await;
    let beacons = beacon_list(&c);
    let live = |addr: SocketAddr| {
        let mut o = RegisterOptions::new("HEALTH", addr);
        o.connect = opts();
        o.retry_for = Duration::from_secs(10);
        Registration::register(beacons.clone(), o)
    };
    let db = live(service(1)).await.unwrap();
    let web = live(service(2)).await.unwrap();
    let mut watch = Watch::start(
        beacons.clone(),
        vec!["HEALTH".into()],
        opts(),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(watch.nodes().count(), 2);
    // A watcher of every registration, whatever its health, beside it: the same change is
    // an update to it and a removal to the other.
    let mut every = Watch::start_with(
        beacons.clone(),
        vec!["HEALTH".into()],
        HealthFilter::Any,
        opts(),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let next = async |watch: &mut Watch| {
        tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("a change arrives")
            .unwrap()
    };

    // The service's checks find it failing: its next report carries it, the leader commits
    // it, and the discovery watch (serving: passing or warning, not draining) drops it.
    db.set_health(Status::Critical, "database unreachable");
    let WatchEvent::Removed(gone) = next(&mut watch).await else {
        panic!("a critical service leaves discovery")
    };
    assert_eq!(gone.node_id, db.node_id());
    assert_eq!(status_of(&gone), (2, false, "database unreachable"));
    let WatchEvent::Updated(seen) = next(&mut every).await else {
        panic!("a watcher of every health hears an update")
    };
    assert_eq!((seen.node_id, status_of(&seen).0), (db.node_id(), 2));
    let all = addrs(&c);
    eventually(Duration::from_secs(10), || level(&all))
        .await
        .expect("the beacons agree");
    for at in &all {
        let listed = health_at(*at, "HEALTH").await;
        assert_eq!(status_of(&listed[&db.node_id()]).0, 2, "at {at}");
        assert_eq!(status_of(&listed[&web.node_id()]).0, 0, "at {at}");
    }

    // The same status reported again writes nothing: a report costs a log entry only when
    // the health changes.
    let index = status(all[0]).await.unwrap().index;
    db.set_health(Status::Critical, "still unreachable");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(status(all[0]).await.unwrap().index, index, "no entry");

    // An operator drains the other (role admin): it keeps its ID and its lease.
    let mut admin = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let req = pb::registry::SetHealthRequest {
        node_id: web.node_id(),
        draining: Some(true),
        note: "kernel upgrade".into(),
        ..Default::default()
    };
    let reply: pb::registry::SetHealthReply = admin
        .call(RegistryCmd::SetHealth, &req, "drain")
        .await
        .unwrap();
    assert_eq!(status_of(&reply.node.unwrap()), (0, true, "kernel upgrade"));
    let WatchEvent::Removed(drained) = next(&mut watch).await else {
        panic!("a drained service leaves discovery")
    };
    assert_eq!(drained.node_id, web.node_id());
    assert_eq!(watch.nodes().count(), 0);

    // The leader dies: health is replicated state, so the next leader lists it as it was,
    // and the service's recovery goes through the new leader to the watch.
    let leader = agreed_leader(&all).await.unwrap();
    let dead = c
        .beacons
        .iter()
        .position(|b| b.addr.to_string() == leader)
        .unwrap();
    c.beacons[dead].kill();
    let rest: Vec<SocketAddr> = all
        .iter()
        .copied()
        .filter(|a| a.to_string() != leader)
        .collect();
    eventually(Duration::from_secs(10), || next_leader(&rest, &leader))
        .await
        .expect("a new leader");
    let listed = health_at(rest[0], "HEALTH").await;
    assert_eq!(status_of(&listed[&db.node_id()]).0, 2);
    assert!(status_of(&listed[&web.node_id()]).1, "still draining");
    db.set_health(Status::Passing, "");
    let WatchEvent::Added(back) = next(&mut watch).await else {
        panic!("a service that passes again comes back")
    };
    assert_eq!((back.node_id, status_of(&back).0), (db.node_id(), 0));
    assert!(db.is_live() && web.is_live(), "no lease was lost");

    // What makes no sense is refused, naming what was wrong; nothing changes.
    let bad = pb::registry::SetHealthRequest {
        node_id: web.node_id(),
        status: Some(7),
        ..Default::default()
    };
    let e = admin
        .call::<_, pb::registry::SetHealthReply>(RegistryCmd::SetHealth, &bad, "bad")
        .await
        .unwrap_err();
    assert!(e.is(ErrorCode::InvalidRequest), "{e}");
    assert!(e.to_string().contains("7 is not a health status"), "{e}");
    let nobody = pb::registry::SetHealthRequest {
        node_id: 999,
        status: Some(2),
        ..Default::default()
    };
    let e = admin
        .call::<_, pb::registry::SetHealthReply>(RegistryCmd::SetHealth, &nobody, "nobody")
        .await
        .unwrap_err();
    assert!(e.is(RegistryErrorCode::UnknownTarget), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_service_is_held_critical_until_it_holds_still() {
    use beacon::machines::registry::Status;
    let c = start(
        3,
        r#"{"lease_ms": 5000, "health_damping": {"max_flaps": 2, "window_ms": 20000, "stable_ms": 1500}}"#,
    )
    .await;
    let beacons = beacon_list(&c);
    let mut o = RegisterOptions::new("FLAPPY", service(1));
    o.connect = opts();
    let flappy = Registration::register(beacons.clone(), o).await.unwrap();
    let at = c.beacons[0].addr;
    let shown = async |want: &dyn Fn(i32, &str) -> bool| {
        eventually(Duration::from_secs(10), || async {
            let listed = health_at(at, "FLAPPY").await;
            let (status, _, note) = status_of(&listed[&flappy.node_id()]);
            want(status, note).then(|| (status, note.to_owned()))
        })
        .await
    };
    // Two changes go through as reported.
    flappy.set_health(Status::Critical, "db down");
    shown(&|s, n| s == 2 && n == "db down")
        .await
        .expect("critical");
    flappy.set_health(Status::Passing, "");
    shown(&|s, _| s == 0).await.expect("passing");
    // The third within the window holds it critical, said to be flapping, and a report
    // of passing while held publishes nothing.
    flappy.set_health(Status::Critical, "db down again");
    let (_, note) = shown(&|s, n| s == 2 && n.starts_with("flapping"))
        .await
        .expect("held critical as flapping");
    assert!(note.contains("3 status changes"), "{note}");
    flappy.set_health(Status::Passing, "");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = health_at(at, "FLAPPY").await;
    assert_eq!(status_of(&listed[&flappy.node_id()]).0, 2, "still held");
    // Once its reports have kept one status for stable_ms, that status is published.
    shown(&|s, _| s == 0)
        .await
        .expect("published passing once it held still");
    assert!(flappy.is_live());
}

/// A one-line HTTP server on loopback answering every GET with `code`.
async fn http_answering(code: std::sync::Arc<std::sync::atomic::AtomicU16>) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let std_listener = free_listener();
    std_listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let code = code.load(Ordering::Relaxed);
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_beside_the_service_report_its_health_once_it_held_for_the_threshold() {
    use beacon::machines::registry::Status;
    use beacon::machines::registry::client::Check;
    use std::sync::atomic::AtomicU16;
    let code = Arc::new(AtomicU16::new(200));
    let web = http_answering(code.clone()).await;
    let http = Check::Http {
        addr: web,
        path: "/health".into(),
        timeout: Duration::from_secs(1),
    };
    assert_eq!(http.run().await.0, Status::Passing);
    code.store(429, Ordering::Relaxed);
    assert_eq!(http.run().await.0, Status::Warning);
    code.store(503, Ordering::Relaxed);
    let (status, note) = http.run().await;
    assert_eq!(status, Status::Critical);
    assert!(note.contains("503"), "{note}");
    code.store(200, Ordering::Relaxed);

    let c = start(1, r#"{"lease_ms": 5000}"#).await;
    let beacons = beacon_list(&c);
    let db = std::net::TcpListener::bind(addr(free_ports(1)[0])).unwrap();
    let db_addr = db.local_addr().unwrap();
    let mut o = RegisterOptions::new("CHECKED", service(1));
    o.connect = opts();
    let reg = Registration::register(beacons.clone(), o).await.unwrap();
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let told = failing.clone();
    let callback = Check::Callback {
        name: "queue".into(),
        check: Arc::new(move || {
            let bad = told.load(Ordering::Relaxed);
            Box::pin(async move {
                if bad {
                    (Status::Warning, "backlog 5000".to_owned())
                } else {
                    (Status::Passing, String::new())
                }
            })
        }),
    };
    let tcp = Check::Tcp {
        addr: db_addr,
        timeout: Duration::from_millis(500),
    };
    reg.run_checks(vec![tcp, http, callback], Duration::from_millis(100), 3);
    let at = c.beacons[0].addr;
    let health = async || {
        let listed = health_at(at, "CHECKED").await;
        let (status, _, note) = status_of(&listed[&reg.node_id()]);
        (status, note.to_owned())
    };
    failing.store(true, Ordering::Relaxed);
    let warned = eventually(Duration::from_secs(10), || async {
        let (status, note) = health().await;
        (status == 1).then_some(note)
    })
    .await
    .expect("the callback's warning is reported");
    assert_eq!(warned, "backlog 5000");
    // The database goes away: critical, the worst of the round, with the check's words.
    drop(db);
    let note = eventually(Duration::from_secs(10), || async {
        let (status, note) = health().await;
        (status == 2).then_some(note)
    })
    .await
    .expect("the failed connection is reported");
    assert!(note.contains(&format!("tcp {db_addr}")), "{note}");
    assert!(reg.is_live());

    // A note longer than a beacon takes is cut by the client (a refused report would not
    // renew the lease); an operator's is refused, naming the limit.
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let long = pb::registry::SetHealthRequest {
        node_id: reg.node_id(),
        note: "x".repeat(300),
        ..Default::default()
    };
    let e = leader
        .call::<_, pb::registry::SetHealthReply>(RegistryCmd::SetHealth, &long, "long note")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("over the limit of 256 bytes"), "{e}");
}

/// The built-in gRPC check asks a real gRPC server (a beacon's own `grpc.health.v1.Health`):
/// passing while it serves, critical with the status it gives once it cannot (its majority
/// is gone), for a service it does not know, and for a port where nothing listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_check_reports_what_a_grpc_health_service_answers() {
    use beacon::machines::registry::Status;
    use beacon::machines::registry::client::Check;
    let mut c = start(3, r#"{"lease_ms": 3000}"#).await;
    let at = c.beacons[0].addr;
    let grpc = |service: &str| Check::Grpc {
        addr: at,
        service: service.into(),
        timeout: Duration::from_secs(2),
    };
    eventually(Duration::from_secs(10), || async {
        (grpc("").run().await == (Status::Passing, String::new())).then_some(())
    })
    .await
    .expect("SERVING once it follows a leader with a majority");
    assert_eq!(
        grpc("beacon.v1.registry.Registry").run().await.0,
        Status::Passing
    );
    let (status, note) = grpc("no.such.Service").run().await;
    assert_eq!(status, Status::Critical);
    assert!(note.contains("NotFound"), "{note}");
    let nobody = Check::Grpc {
        addr: addr(free_ports(1)[0]),
        service: String::new(),
        timeout: Duration::from_secs(2),
    };
    let (status, note) = nobody.run().await;
    assert_eq!(status, Status::Critical);
    assert!(note.starts_with("grpc 127.0.0.1:"), "{note}");
    // The other two beacons go: this one cannot answer writes, and says so.
    c.beacons[1].kill();
    c.beacons[2].kill();
    let note = eventually(Duration::from_secs(15), || async {
        let (status, note) = grpc("").run().await;
        (status == Status::Critical).then_some(note)
    })
    .await
    .expect("NOT_SERVING once the majority is gone");
    assert!(note.contains("NOT_SERVING"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_note_from_a_service_is_cut_and_its_lease_holds() {
    use beacon::machines::registry::Status;
    let c = start(1, r#"{"lease_ms": 3000}"#).await;
    let mut o = RegisterOptions::new("NOTED", service(1));
    o.connect = opts();
    let reg = Registration::register(beacon_list(&c), o).await.unwrap();
    reg.set_health(Status::Warning, "é".repeat(600));
    let at = c.beacons[0].addr;
    let note = eventually(Duration::from_secs(10), || async {
        let listed = health_at(at, "NOTED").await;
        let (status, _, note) = status_of(&listed[&reg.node_id()]);
        (status == 1).then(|| note.to_owned())
    })
    .await
    .expect("the warning is published");
    assert_eq!(
        note,
        "é".repeat(128),
        "cut at 256 bytes, on a character's edge"
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(reg.is_live(), "reports went on renewing the lease");
}

/// How a test takes its leader away.
#[derive(Clone, Copy, Debug)]
enum LeaderFault {
    /// SIGKILL, and started again 300 ms later.
    Kill,
    /// SIGSTOP (hung: its sockets stay open, it answers nothing), and SIGCONT a second later,
    /// when the others have long chosen another leader.
    Stop,
}

/// A service killed at once (its reports stop) is gone a lease after its last acknowledged
/// report, while the leader is killed every half lease: each new leader keeps the lease's
/// remaining time, where it used to start it afresh and so kept the dead service listed as
/// long as leaders kept changing. A service that goes on reporting keeps its registration
/// through every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_service_is_gone_a_lease_after_its_last_report_while_leaders_die() {
    dead_service_gone_while_leaders_go(LeaderFault::Kill).await;
}

/// The same while each leader hangs instead: the hung leader comes back still holding the
/// lease times of its term, and neither it nor the leader that replaced it keeps the dead
/// service past the bound or ends the live one's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_service_is_gone_a_lease_after_its_last_report_while_leaders_hang() {
    dead_service_gone_while_leaders_go(LeaderFault::Stop).await;
}

async fn dead_service_gone_while_leaders_go(fault: LeaderFault) {
    const LEASE_MS: u64 = 4_000;
    let mut c = start(5, &format!(r#"{{"lease_ms": {LEASE_MS}}}"#)).await;
    let all = addrs(&c);
    let first_term = status(all[0]).await.expect("a status").term;
    let mut leader = Leader::new(beacon_list(&c), opts(), Duration::from_secs(20));
    let mut options = RegisterOptions::new("LOGIC", service(2));
    options.connect = opts();
    options.retry_for = Duration::from_secs(20);
    let alive = Registration::register(beacon_list(&c), options)
        .await
        .unwrap();
    // The dead one registers and reports; its last report is answered, then nothing.
    let dead = register(&mut leader, "LOGIC", 1).await;
    let sent = std::time::Instant::now();
    let _: pb::registry::NodeReportReply = leader
        .call(
            RegistryCmd::NodeReport,
            &support::report_of(&dead),
            "report",
        )
        .await
        .unwrap();
    // Live (an expired registration stays listed, offline, while its ID is in quarantine).
    let listed = |reply: &pb::registry::NodesReply, id: u32| {
        reply
            .nodes
            .iter()
            .any(|e| e.is_online && e.node.as_ref().is_some_and(|n| n.node_id == id))
    };
    // The leader goes a quarter lease and three quarters of a lease after the last report
    // (every half lease); each comes back a moment later.
    let back_after = match fault {
        LeaderFault::Kill => Duration::from_millis(300),
        LeaderFault::Stop => Duration::from_millis(1_000),
    };
    /// A leader taken away: which beacon, when, and whether it is back.
    struct Taken {
        beacon: usize,
        at: std::time::Instant,
        back: bool,
    }
    let mut faults: Vec<Taken> = Vec::new();
    let mut gone_after = None;
    let limit = Duration::from_millis(3 * LEASE_MS);
    while sent.elapsed() < limit && gone_after.is_none() {
        // Asked only of the beacons that answer: a hung one would hold every probe up.
        let up: Vec<SocketAddr> = (0..all.len())
            .filter(|i| !faults.iter().any(|f| f.beacon == *i && !f.back))
            .map(|i| all[i])
            .collect();
        let due = LEASE_MS / 4 + LEASE_MS / 2 * faults.len() as u64;
        if faults.len() < 2
            && sent.elapsed() >= Duration::from_millis(due)
            && let Some(l) = agreed_leader(&up).await
        {
            let i = all.iter().position(|a| a.to_string() == l).unwrap();
            match fault {
                LeaderFault::Kill => c.beacons[i].kill(),
                LeaderFault::Stop => c.beacons[i].pause(),
            }
            faults.push(Taken {
                beacon: i,
                at: std::time::Instant::now(),
                back: false,
            });
            continue;
        }
        for f in faults.iter_mut().filter(|f| !f.back) {
            if f.at.elapsed() > back_after {
                match fault {
                    LeaderFault::Kill => c.beacons[f.beacon].restart(),
                    LeaderFault::Stop => c.beacons[f.beacon].signal(libc::SIGCONT),
                }
                f.back = true;
            }
        }
        if let Some(l) = agreed_leader(&up).await
            && let Some(reply) = nodes(l.parse().unwrap()).await
            && !listed(&reply, dead.node_id)
        {
            gone_after = Some(sent.elapsed());
            assert!(
                listed(&reply, alive.node_id()),
                "the service that reports is listed\n{}",
                c.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(faults.len(), 2, "two leaders taken away\n{}", c.logs());
    let gone = gone_after.unwrap_or_else(|| panic!("never gone\n{}", c.logs()));
    eprintln!("{fault:?}: gone {gone:?} after its last report");
    // The bound is a lease and two ticks; the rest is this test's polling on a shared
    // machine. A new leader that started the lease afresh would have kept it past
    // 3 / 4 + 1 lease.
    let bound = Duration::from_millis(LEASE_MS + 2 * TICK_MS + 400);
    assert!(
        gone <= bound,
        "{fault:?}: gone {gone:?} after its last report, over {bound:?}\n{}",
        c.logs()
    );
    assert!(
        gone >= Duration::from_millis(LEASE_MS),
        "{fault:?}: gone {gone:?} after its last report: before its lease ran out"
    );
    // Each fault cost its leader the leadership: two elections at least.
    let terms = eventually(Duration::from_secs(10), || async {
        let l = agreed_leader(&all).await?;
        status(l.parse().unwrap()).await.map(|s| s.term)
    })
    .await
    .unwrap_or_else(|| panic!("no leader all agree on\n{}", c.logs()));
    assert!(
        terms >= first_term + 2,
        "{fault:?}: term {first_term} -> {terms}: a fault did not move the leadership\n{}",
        c.logs()
    );
    assert!(alive.is_live(), "the reporting service kept its lease");
}
