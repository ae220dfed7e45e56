//! Discovery that tells the truth (beacon): how fast a failing check takes a service out of
//! every watcher and out of the DNS answer, what a flapping service costs, and how many DNS
//! queries a beacon answers per core-second.
//!
//! * **Check to discovery.** One beacon; a service whose check (a TCP connect every 100 ms,
//!   through the Rust client) fails at t0: the time until the last of N watchers hears it
//!   removed, and until the DNS answer for its type no longer has it; with a threshold of 1
//!   round and of 3 (the client's hysteresis).
//! * **Flapping.** A service whose check says up, down, up, ... every 100 ms (threshold 1):
//!   the changes watchers are told of per minute, beside the 600 a minute its check makes
//!   (the leader holds it critical while it flaps; key `health_damping`).
//! * **DNS.** Instances of one type served by DNS: answers per second from a few UDP
//!   askers, and per second of the beacon's CPU.
//! * **Leases across leader changes.** Five beacons; a service reports once and dies, and
//!   the leader is killed (and started again) N times within its lease: the time from its
//!   last answered report until the leader lists it gone, against the bound of a lease and
//!   two ticks (a new leader used to start every lease afresh).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use beacon::client::{Check, ConnectOptions, RegisterOptions, Registration, Watch, WatchEvent};
use beacon::machines::registry::{HealthFilter, Status};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use serde::Serialize;

use super::clients::service_addr;
use super::proc;
use super::systems::{BeaconSetup, Cluster, Programs};

/// How the health part is sized (the bench's `--health-*` options).
#[derive(Debug, Clone)]
pub struct HealthSizes {
    pub watchers: usize,
    pub flap_secs: u64,
    pub dns_secs: u64,
    pub dns_instances: usize,
    pub lease_ms: u64,
    pub leader_changes: usize,
}

/// A dead service while leaders die.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseRun {
    pub beacons: usize,
    pub lease_ms: u64,
    pub tick_ms: u64,
    pub leader_changes: usize,
    /// From its last answered report to the leader listing it gone.
    pub gone_after_ms: f64,
    /// A lease and two ticks.
    pub bound_ms: u64,
}

/// From a check failing to every watcher and the DNS answer leaving the service out.
#[derive(Debug, Clone, Serialize)]
pub struct DropRun {
    pub threshold: u32,
    pub interval_ms: u64,
    pub watchers: usize,
    pub last_watcher_ms: f64,
    pub dns_ms: f64,
}

/// A service whose check flips every round.
#[derive(Debug, Clone, Serialize)]
pub struct FlapRun {
    pub secs: u64,
    /// What its check said, changes per minute.
    pub check_changes_per_min: f64,
    /// What watchers were told of it, changes per minute.
    pub published_per_min: f64,
}

/// DNS answers from one beacon.
#[derive(Debug, Clone, Serialize)]
pub struct DnsRun {
    pub instances: usize,
    pub askers: usize,
    pub secs: f64,
    pub answered: u64,
    pub per_sec: f64,
    /// Answers per second of the beacon's CPU.
    pub per_core_sec: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthResults {
    pub drops: Vec<DropRun>,
    pub flap: FlapRun,
    pub dns: DnsRun,
    pub lease: LeaseRun,
}

const INTERVAL: Duration = Duration::from_millis(100);

fn query(name: &str) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(7)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .add_query(Query::query(
            Name::from_ascii(name).expect("a name"),
            RecordType::A,
        ));
    m.to_vec().expect("a query")
}

/// The A records `dns` answers for `name`, or `None` when no answer came in a second.
async fn ask(socket: &tokio::net::UdpSocket, dns: SocketAddr, q: &[u8]) -> Option<usize> {
    socket.send_to(q, dns).await.ok()?;
    let mut buf = [0u8; 2048];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Message::from_vec(&buf[..n]).ok().map(|m| m.answers().len())
}

async fn udp_socket() -> anyhow::Result<tokio::net::UdpSocket> {
    let port = beacon_testkit::free_ports(1)[0];
    Ok(tokio::net::UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?)
}

async fn register(beacons: &[String], node_type: &str, i: usize) -> anyhow::Result<Registration> {
    let mut o = RegisterOptions::new(node_type, service_addr(i));
    o.connect = ConnectOptions::default();
    o.retry_for = Duration::from_secs(10);
    Registration::register(beacons.to_vec(), o)
        .await
        .with_context(|| format!("registering {node_type} {i}"))
}

pub async fn run(
    programs: &Programs,
    sizes: &HealthSizes,
    keep: bool,
) -> anyhow::Result<HealthResults> {
    let dns_port = beacon_testkit::free_ports(1)[0];
    let dns = SocketAddr::from(([127, 0, 0, 1], dns_port));
    let setup = BeaconSetup {
        tick_ms: 100,
        config: serde_json::json!({"dns": dns.to_string(), "lease_ms": 10_000}),
        restore: None,
    };
    let cluster = Cluster::start_beacon(programs, 1, &setup);
    let (pid, at) = cluster.leader_process().await?;
    let beacons = vec![at.to_string()];
    let mut drops = Vec::new();
    for (round, threshold) in [1u32, 3].into_iter().enumerate() {
        drops.push(drop_run(&beacons, dns, sizes.watchers, threshold, round).await?);
    }
    let flap = flap_run(&beacons, sizes.flap_secs).await?;
    let dns_run = dns_run(&beacons, dns, pid, sizes).await?;
    if keep {
        println!("  kept: {}", cluster.dir.path().display());
        std::mem::forget(cluster);
    } else {
        drop(cluster);
    }
    let lease = lease_run(programs, sizes.lease_ms, sizes.leader_changes, keep).await?;
    Ok(HealthResults {
        drops,
        flap,
        dns: dns_run,
        lease,
    })
}

/// Whether the agreed leader of `cluster` lists `id` live, or `None` while no leader is
/// agreed on (a member is down or restarting).
async fn lists(cluster: &Cluster, id: u32) -> Option<bool> {
    let leader = cluster.leader().await?;
    let mut client = beacon::client::Client::connect(
        &cluster.members[leader].client.to_string(),
        &ConnectOptions::default(),
    )
    .await
    .ok()?;
    let reply = client.nodes("DEAD", "").await.ok()?;
    Some(
        reply
            .nodes
            .iter()
            .any(|e| e.is_online && e.node.as_ref().is_some_and(|n| n.node_id == id)),
    )
}

async fn lease_run(
    programs: &Programs,
    lease_ms: u64,
    changes: usize,
    keep: bool,
) -> anyhow::Result<LeaseRun> {
    const TICK_MS: u64 = 100;
    let setup = BeaconSetup {
        tick_ms: TICK_MS,
        config: serde_json::json!({"lease_ms": lease_ms}),
        restore: None,
    };
    let mut cluster = Cluster::start_beacon(programs, 5, &setup);
    cluster.ready(Duration::from_secs(60)).await?;
    let beacons: Vec<String> = cluster
        .members
        .iter()
        .map(|m| m.client.to_string())
        .collect();
    let mut leader = beacon::client::Cluster::new(
        beacons.clone(),
        ConnectOptions::default(),
        Duration::from_secs(20),
    );
    let registered: beacon::pb::registry::RegisterReply = leader
        .call(
            beacon::machines::registry::RegistryCmd::Register,
            &beacon::pb::registry::RegisterRequest {
                node_type: "DEAD".into(),
                addr: service_addr(3_000).to_string(),
                worker_num: 1,
                ..Default::default()
            },
            "the registration",
        )
        .await?;
    let node = registered.node.context("the registration's node")?;
    let report = beacon::pb::registry::NodeReport {
        node_id: node.node_id,
        addr: node.addr.clone(),
        term: node.term,
        index: node.index,
        ..Default::default()
    };
    let sent = Instant::now();
    let _: beacon::pb::registry::NodeReportReply = leader
        .call(
            beacon::machines::registry::RegistryCmd::NodeReport,
            &report,
            "the last report",
        )
        .await?;
    // The leader dies every `lease / (changes + 1)`, from half that on; each comes back
    // 300 ms later.
    let every = lease_ms / (changes as u64 + 1);
    let mut killed: Vec<(usize, Instant)> = Vec::new();
    let deadline = sent + Duration::from_millis(4 * lease_ms);
    let gone = loop {
        if Instant::now() > deadline {
            return Err(anyhow!(
                "a dead service still listed {} ms after its last report",
                4 * lease_ms
            ));
        }
        let due = Duration::from_millis(every / 2 + every * killed.len() as u64);
        if killed.len() < changes
            && sent.elapsed() >= due
            && let Some(l) = cluster.leader().await
        {
            cluster.members[l].kill();
            killed.push((l, Instant::now()));
        }
        for (i, at) in &killed {
            if at.elapsed() >= Duration::from_millis(300) && !cluster.members[*i].is_running() {
                cluster.members[*i].restart();
            }
        }
        if lists(&cluster, node.node_id).await == Some(false) {
            break sent.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    if keep {
        println!("  kept: {}", cluster.dir.path().display());
        std::mem::forget(cluster);
    }
    Ok(LeaseRun {
        beacons: 5,
        lease_ms,
        tick_ms: TICK_MS,
        leader_changes: killed.len(),
        gone_after_ms: gone.as_secs_f64() * 1000.0,
        bound_ms: lease_ms + 2 * TICK_MS,
    })
}

async fn drop_run(
    beacons: &[String],
    dns: SocketAddr,
    watchers: usize,
    threshold: u32,
    round: usize,
) -> anyhow::Result<DropRun> {
    let node_type = format!("CHECKED{round}");
    let listener = beacon_testkit::free_listener();
    let port = listener.local_addr()?;
    let reg = register(beacons, &node_type, 1_000 + round).await?;
    let check = Check::Tcp {
        addr: port,
        timeout: Duration::from_millis(200),
    };
    reg.run_checks(vec![check], INTERVAL, threshold);
    let mut waits = Vec::new();
    for _ in 0..watchers {
        let mut w = Watch::start(
            beacons.to_vec(),
            vec![node_type.clone()],
            ConnectOptions::default(),
            Duration::from_secs(10),
        )
        .await?;
        waits.push(tokio::spawn(async move {
            loop {
                match w.next().await {
                    Ok(WatchEvent::Removed(_)) => return Some(Instant::now()),
                    Ok(_) => {}
                    Err(_) => return None,
                }
            }
        }));
    }
    let name = format!("{}.service.beacon.", node_type.to_ascii_lowercase());
    let q = query(&name);
    let socket = udp_socket().await?;
    if ask(&socket, dns, &q).await != Some(1) {
        return Err(anyhow!(
            "DNS does not list the checked service before its check fails"
        ));
    }
    let failed_at = Instant::now();
    drop(listener);
    let deadline = failed_at + Duration::from_secs(20);
    let dns_gone = loop {
        if ask(&socket, dns, &q).await == Some(0) {
            break Instant::now();
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "DNS still lists a service whose check failed 20 s ago"
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let mut last = failed_at;
    for w in waits {
        let heard = tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .context("a watcher heard nothing in 20 s")?
            .context("a watcher task")?
            .ok_or_else(|| anyhow!("a watch ended"))?;
        last = last.max(heard);
    }
    let ms = |t: Instant| t.duration_since(failed_at).as_secs_f64() * 1000.0;
    drop(reg);
    Ok(DropRun {
        threshold,
        interval_ms: INTERVAL.as_millis() as u64,
        watchers,
        last_watcher_ms: ms(last),
        dns_ms: ms(dns_gone),
    })
}

async fn flap_run(beacons: &[String], secs: u64) -> anyhow::Result<FlapRun> {
    let reg = register(beacons, "FLAPPY", 2_000).await?;
    let mut watch = Watch::start_with(
        beacons.to_vec(),
        vec!["FLAPPY".into()],
        HealthFilter::Any,
        ConnectOptions::default(),
        Duration::from_secs(10),
    )
    .await?;
    let up = Arc::new(AtomicBool::new(true));
    let flips = Arc::new(AtomicU64::new(0));
    let (up2, flips2) = (up.clone(), flips.clone());
    let check = Check::Callback {
        name: "flip".into(),
        check: Arc::new(move || {
            let now_up = !up2.fetch_xor(true, Ordering::Relaxed);
            flips2.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                if now_up {
                    (Status::Passing, String::new())
                } else {
                    (Status::Critical, "flip".to_owned())
                }
            })
        }),
    };
    reg.run_checks(vec![check], INTERVAL, 1);
    let started = Instant::now();
    let window = Duration::from_secs(secs);
    let mut published = 0u64;
    while let Some(left) = window.checked_sub(started.elapsed()) {
        match tokio::time::timeout(left, watch.next()).await {
            Ok(Ok(WatchEvent::Updated(_))) => published += 1,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => break,
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let flipped = flips.load(Ordering::Relaxed) as f64;
    drop(reg);
    Ok(FlapRun {
        secs,
        check_changes_per_min: flipped / minutes,
        published_per_min: published as f64 / minutes,
    })
}

async fn dns_run(
    beacons: &[String],
    dns: SocketAddr,
    pid: u32,
    sizes: &HealthSizes,
) -> anyhow::Result<DnsRun> {
    let mut regs = Vec::new();
    for i in 0..sizes.dns_instances {
        regs.push(register(beacons, "WEB", 3_000 + i).await?);
    }
    let q = Arc::new(query("web.service.beacon."));
    let askers = 4;
    let answered = Arc::new(AtomicU64::new(0));
    let cpu_before = proc::cpu_seconds(pid).unwrap_or(0.0);
    let started = Instant::now();
    let until = started + Duration::from_secs(sizes.dns_secs);
    let mut tasks = Vec::new();
    for _ in 0..askers {
        let (q, answered) = (q.clone(), answered.clone());
        let socket = udp_socket().await?;
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                if ask(&socket, dns, &q).await.is_some() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = proc::cpu_seconds(pid).unwrap_or(0.0) - cpu_before;
    let answered = answered.load(Ordering::Relaxed);
    drop(regs);
    Ok(DnsRun {
        instances: sizes.dns_instances,
        askers,
        secs,
        answered,
        per_sec: answered as f64 / secs,
        per_core_sec: if cpu > 0.0 {
            answered as f64 / cpu
        } else {
            0.0
        },
    })
}
