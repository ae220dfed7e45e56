//! Membership changes on real processes, under a continuous registration load: one beacon
//! grows to three and five by `beacon --join` (each joins as a learner and is promoted once it
//! has kept up), shrinks to three by `nebcli member remove` (the leader among those removed
//! hands its leadership over first), a SIGKILLed voter is replaced by a new machine, and the
//! cluster shrinks to one. No acknowledged registration is lost: the last beacon holds every
//! one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;

mod support;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
const CLUSTER: &str = "grow";
/// Registrations outlive the test: a lost one is a lost write, not an expired lease.
const CONFIG: &str = r#"{"mode": "quorum", "lease_ms": 600000, "id_range": [1, 60000], "members": {"promote_after_ms": 500}}"#;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(3),
        ..ConnectOptions::default()
    }
}

fn nebcli_run(nebcli: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(nebcli)
        .args(args)
        .output()
        .expect("run nebcli");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `nebcli -s VIA member remove NODE`: what it printed, or why it failed.
fn remove(nebcli: &Path, via: SocketAddr, node: SocketAddr) -> Result<String, String> {
    let (via, node) = (via.to_string(), node.to_string());
    let (code, out, err) = nebcli_run(nebcli, &["-s", &via, "member", "remove", &node]);
    eprint!("member remove {node}: {out}{err}");
    (code == Some(0))
        .then_some(out.clone())
        .ok_or(format!("member remove {node} exited {code:?}: {out}{err}"))
}

/// The config file and flags of a beacon at `me` that joins through `via`.
fn join_args(dir: &Path, me: SocketAddr, via: &[SocketAddr]) -> Vec<String> {
    let mut keys: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(CONFIG).unwrap();
    keys.insert("node".into(), me.to_string().into());
    let file = dir.join(format!("beacon-{}.json", me.port()));
    std::fs::write(&file, serde_json::Value::Object(keys).to_string()).unwrap();
    let via: Vec<String> = via.iter().map(|a| a.to_string()).collect();
    vec![
        "--config".into(),
        file.display().to_string(),
        "--listen".into(),
        me.to_string(),
        "--tick-ms".into(),
        TICK_MS.to_string(),
        "--cluster".into(),
        CLUSTER.into(),
        "--data-dir".into(),
        dir.join("{node}").display().to_string(),
        "--join".into(),
        via.join(","),
    ]
}

/// A beacon at `me` started with `--join` through `via`.
fn joiner(dir: &Path, me: SocketAddr, via: &[SocketAddr]) -> Beacon {
    Beacon::start(BEACON.as_ref(), me, dir, join_args(dir, me, via))
}

/// The voters and learners as `at` sees them, once it knows a leader.
async fn roles(at: SocketAddr) -> Option<(Vec<String>, Vec<String>, String)> {
    let s = status(at).await?;
    let leader = s.leader.clone()?;
    let of = |role: &str| {
        let mut v: Vec<String> = s
            .beacons
            .iter()
            .filter(|b| b.role == role && !b.leaving)
            .map(|b| b.node.clone())
            .collect();
        v.sort();
        v
    };
    Some((of("voter"), of("learner"), leader))
}

/// Waits until the leader (asked through `via`) has exactly `voters` as voters and no
/// learner, every one of them following it; returns the leader.
async fn settle(via: &[SocketAddr], voters: &[SocketAddr], logs: &dyn Fn() -> String) -> String {
    let mut want: Vec<String> = voters.iter().map(|a| a.to_string()).collect();
    want.sort();
    let found = eventually(Duration::from_secs(30), || async {
        for at in via {
            let Some((v, l, leader)) = roles(*at).await else {
                continue;
            };
            if v != want || !l.is_empty() {
                continue;
            }
            let leader_addr: SocketAddr = leader.parse().ok()?;
            let agreed = agreed_leader(voters).await?;
            if agreed == leader && voters.contains(&leader_addr) {
                return Some(leader);
            }
        }
        None
    })
    .await;
    found.unwrap_or_else(|| panic!("the cluster did not settle on voters {want:?}\n{}", logs()))
}

/// Every beacon's log, each under its address.
fn logs_of(beacons: &BTreeMap<SocketAddr, Beacon>) -> String {
    beacons
        .values()
        .map(|b| format!("--- {}\n{}", b.addr, b.log()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A new cluster of one beacon, settled, at the first of `n` addresses drawn for the test
/// (the rest are for beacons it starts later): its directory, the addresses, the beacons.
async fn one_beacon(
    n: usize,
) -> (
    tempfile::TempDir,
    Vec<SocketAddr>,
    BTreeMap<SocketAddr, Beacon>,
) {
    let ports = free_ports(n);
    let all: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let dir = tempfile::tempdir().unwrap();
    let keys: serde_json::Map<String, serde_json::Value> = serde_json::from_str(CONFIG).unwrap();
    let first = Beacon::start(
        BEACON.as_ref(),
        all[0],
        dir.path(),
        beacon_args(dir.path(), ports[0], &ports[..1], TICK_MS, CLUSTER, keys),
    );
    let beacons = BTreeMap::from([(all[0], first)]);
    settle(&all[..1], &all[..1], &|| logs_of(&beacons)).await;
    (dir, all, beacons)
}

/// Asserts that `at` holds every acknowledged registration (address -> node ID).
async fn assert_holds(at: SocketAddr, acked: &BTreeMap<String, u32>, logs: &dyn Fn() -> String) {
    let held: BTreeMap<String, u32> = support::nodes(at)
        .await
        .unwrap_or_else(|| panic!("{at} lists its nodes"))
        .nodes
        .into_iter()
        .filter_map(|e| e.node.map(|n| (n.addr, n.node_id)))
        .collect();
    for (service, id) in acked {
        assert_eq!(
            held.get(service),
            Some(id),
            "acknowledged {service} -> {id} missing on {at}\n{}",
            logs()
        );
    }
}

/// A writer that registers services one after another through whichever beacons it is
/// given, recording each acknowledged registration (address -> node ID).
struct Load {
    acked: Arc<Mutex<BTreeMap<String, u32>>>,
    beacons: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Load {
    fn start(beacons: &[SocketAddr]) -> Load {
        let acked = Arc::new(Mutex::new(BTreeMap::new()));
        let list = Arc::new(Mutex::new(
            beacons.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
        ));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, l, s) = (acked.clone(), list.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut failed = 0u64;
            let mut i = 0u32;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let service = format!("10.9.{}.{}:7000", i / 250, i % 250 + 1);
                let servers = l.lock().unwrap().clone();
                let mut cluster = Leader::new(servers, opts(), Duration::from_secs(2));
                let req = pb::registry::RegisterRequest {
                    node_type: "LOGIC".into(),
                    addr: service.clone(),
                    ..Default::default()
                };
                let reply: Result<pb::registry::RegisterReply, _> = cluster
                    .call(RegistryCmd::Register, &req, "the registration")
                    .await;
                match reply.ok().and_then(|r| r.node) {
                    Some(node) => {
                        a.lock().unwrap().insert(service, node.node_id);
                    }
                    None => failed += 1,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            failed
        });
        Load {
            acked,
            beacons: list,
            stop,
            task,
        }
    }

    /// The beacons the writer asks from now on.
    fn ask(&self, beacons: &[SocketAddr]) {
        *self.beacons.lock().unwrap() = beacons.iter().map(|b| b.to_string()).collect();
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    async fn stop(self) -> (BTreeMap<String, u32>, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let failed = self.task.await.expect("the writer ends");
        let acked = self.acked.lock().unwrap().clone();
        (acked, failed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_beacon_grows_to_five_and_back_to_one_under_load_losing_no_write() {
    let nebcli = nebcli(BEACON.as_ref());
    let (dir, all, mut beacons) = one_beacon(7).await;
    let load = Load::start(&all[..1]);

    // 1 -> 3 -> 5: each joins through the first beacon and is promoted once it kept up.
    for n in 1..5 {
        let me = all[n];
        let b = joiner(dir.path(), me, &all[..1]);
        beacons.insert(me, b);
        if n == 2 || n == 4 {
            let leader = settle(&all[..=n], &all[..=n], &|| logs_of(&beacons)).await;
            load.ask(&all[..=n]);
            eprintln!(
                "{} voters, leader {leader}, {} writes acknowledged",
                n + 1,
                load.acked()
            );
        }
    }
    // The new members show in `member list`, each a voter.
    let (code, out, err) = nebcli_run(&nebcli, &["-s", &all[0].to_string(), "member", "list"]);
    assert_eq!(code, Some(0), "{out}{err}");
    for b in &all[..5] {
        assert!(out.contains(&b.to_string()), "{b} listed: {out}");
    }
    assert_eq!(out.matches(" voter ").count(), 5, "five voters: {out}");

    // 5 -> 3: remove two, the leader among them if it is one of the last two.
    let leader: SocketAddr = agreed_leader(&all[..5]).await.unwrap().parse().unwrap();
    let mut gone = vec![all[3], all[4]];
    if !gone.contains(&leader) {
        gone[0] = leader;
    }
    for g in &gone {
        let out =
            remove(&nebcli, all[0], *g).unwrap_or_else(|e| panic!("{e}\n{}", logs_of(&beacons)));
        if *g == leader {
            assert!(out.contains("handed its leadership"), "{out}");
        }
    }
    let three: Vec<SocketAddr> = all[..5]
        .iter()
        .copied()
        .filter(|a| !gone.contains(a))
        .collect();
    load.ask(&three);
    settle(&three, &three, &|| logs_of(&beacons)).await;
    // A removed beacon still running hears no leader any more: a write sent to it is sent
    // on to a member, saying why.
    let sent_on = eventually(Duration::from_secs(10), || async {
        let mut c = beacon::client::Client::connect(&gone[0].to_string(), &opts())
            .await
            .ok()?;
        let req = pb::registry::RegisterRequest {
            node_type: "LOGIC".into(),
            addr: "10.9.255.1:7000".into(),
            ..Default::default()
        };
        let refused: Result<pb::registry::RegisterReply, _> = c
            .request(RegistryCmd::Register, &req, "a registration")
            .await;
        match refused {
            Err(beacon::client::ClientError::Refused {
                code, leader, msg, ..
            }) if code == beacon::wire::ErrorCode::NotLeader as u32
                && msg.contains("was removed from the cluster") =>
            {
                leader
            }
            _ => None,
        }
    })
    .await;
    let hint: SocketAddr = sent_on
        .unwrap_or_else(|| {
            panic!(
                "the removed {} sends a write on\n{}",
                gone[0],
                logs_of(&beacons)
            )
        })
        .parse()
        .unwrap();
    assert!(
        three.contains(&hint),
        "sent on to {hint}, a member of {three:?}"
    );
    for g in &gone {
        beacons.remove(g).unwrap().kill();
    }

    // A voter dies (SIGKILL) and a new machine takes its place.
    let dead = three[2];
    beacons.get_mut(&dead).unwrap().kill();
    remove(&nebcli, three[0], dead).unwrap_or_else(|e| panic!("{e}\n{}", logs_of(&beacons)));
    let new = all[5];
    let b = joiner(dir.path(), new, &three[..2]);
    beacons.insert(new, b);
    let replaced = vec![three[0], three[1], new];
    load.ask(&replaced);
    settle(&replaced, &replaced, &|| logs_of(&beacons)).await;
    beacons.remove(&dead);

    // 3 -> 1.
    for g in &replaced[1..] {
        remove(&nebcli, replaced[0], *g).unwrap_or_else(|e| panic!("{e}\n{}", logs_of(&beacons)));
    }
    let last = [replaced[0]];
    load.ask(&last);
    settle(&last, &last, &|| logs_of(&beacons)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (acked, failed) = load.stop().await;
    eprintln!(
        "{} writes acknowledged, {failed} failed or unanswered",
        acked.len()
    );
    assert!(acked.len() > 50, "the writer got through: {}", acked.len());

    // Every acknowledged registration is on the last beacon, with its ID.
    assert_holds(last[0], &acked, &|| logs_of(&beacons)).await;
}

/// The operator's answer to a hung voter (SIGSTOP: its sockets stay open, it answers
/// nothing) is the one to a dead one: remove it and join a replacement, with writes in
/// flight. Here the hung voter is the leader. When it wakes up it still believes it leads
/// the old membership; it must not take the cluster back, lose a write, or make the
/// leadership move again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_leader_is_removed_and_replaced_and_harms_nothing_when_it_wakes() {
    let nebcli = nebcli(BEACON.as_ref());
    let (dir, all, mut beacons) = one_beacon(4).await;
    for &me in &all[1..3] {
        let b = joiner(dir.path(), me, &all[..1]);
        beacons.insert(me, b);
    }
    let hung: SocketAddr = settle(&all[..3], &all[..3], &|| logs_of(&beacons))
        .await
        .parse()
        .unwrap();
    let load = Load::start(&all[..3]);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The leader hangs; the other two elect one of themselves.
    beacons[&hung].pause();
    let others: Vec<SocketAddr> = all[..3].iter().copied().filter(|a| *a != hung).collect();
    load.ask(&others);
    let hung_at = hung.to_string();
    let elected = eventually(Duration::from_secs(10), || next_leader(&others, &hung_at)).await;
    assert!(
        elected.is_some(),
        "no leader among {others:?}\n{}",
        logs_of(&beacons)
    );

    // Removed while hung, and replaced by a new machine.
    remove(&nebcli, others[0], hung).unwrap_or_else(|e| panic!("{e}\n{}", logs_of(&beacons)));
    let new = all[3];
    let b = joiner(dir.path(), new, &others);
    beacons.insert(new, b);
    let replaced = vec![others[0], others[1], new];
    load.ask(&replaced);
    let leader = settle(&replaced, &replaced, &|| logs_of(&beacons)).await;
    let term = status(leader.parse().unwrap())
        .await
        .expect("a status")
        .term;

    // It wakes up, still holding the old membership and believing it leads.
    let led = || {
        beacons[&hung]
            .log()
            .matches("this beacon is now the leader")
            .count()
    };
    let led_before = led();
    beacons[&hung].signal(libc::SIGCONT);
    let before = load.acked();
    // Its links are closed, and each member's handshake tells it why.
    let told = eventually(Duration::from_secs(10), || async {
        let log = beacons[&hung].log();
        others
            .iter()
            .all(|o| {
                log.lines().any(|l| {
                    l.contains("refused our handshake")
                        && l.contains(&format!("peer={o}"))
                        && l.contains(&format!("beacon `{hung}` is no longer a member"))
                })
            })
            .then_some(())
    })
    .await;
    assert!(
        told.is_some(),
        "the woken beacon is told by each member that it was removed\n{}",
        logs_of(&beacons)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = settle(&replaced, &replaced, &|| logs_of(&beacons)).await;
    let now = status(after.parse().unwrap()).await.expect("a status").term;
    // It never led again, nor did it make the members elect anew (at most one election's
    // worth, for a busy machine's missed heartbeats).
    assert_eq!(
        led(),
        led_before,
        "the woken beacon led again\n{}",
        logs_of(&beacons)
    );
    assert!(
        now <= term + 1,
        "term {term} -> {now} after it woke (leader {leader} -> {after})\n{}",
        logs_of(&beacons)
    );
    assert!(
        load.acked() > before,
        "writes went on after it woke\n{}",
        logs_of(&beacons)
    );

    // Every acknowledged registration is on every member, with its ID.
    let (acked, failed) = load.stop().await;
    eprintln!(
        "{} writes acknowledged, {failed} failed or unanswered",
        acked.len()
    );
    for at in &replaced {
        assert_holds(*at, &acked, &|| logs_of(&beacons)).await;
    }
}
