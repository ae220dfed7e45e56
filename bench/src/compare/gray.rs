//! Gray failures and overload: what a hung beacon, stalled watchers and ten times the load a
//! cluster can take cost its services.
//!
//! * **Hung beacons.** Three beacons, registrations kept alive by the Rust client (each
//!   service with its own beacon list, rotated so that every beacon is first for a third of
//!   them) with 3 s leases; a follower, then the leader, is stopped (SIGSTOP) for 10 s each.
//!   Leases lost (target 0) and the longest time a service went without a confirmed
//!   renewal (target 2 s).
//! * **A fresh client past a hung first beacon.** While each of those is stopped, clients
//!   made afresh with it first in their list (the Rust client, nebcli, the Python client)
//!   make one write each: the time to its answer (target 250 ms).
//! * **Watchers.** One beacon; watchers of every node, a tenth of them stalled (they stop
//!   reading after their first answer, on connections whose receive buffers hold 4 KiB),
//!   while registrations with 1 KB of metadata arrive: the leader's resident memory above
//!   what the same registrations cost with no watcher (target 64 MB). Then the stalled ones
//!   all list again at once (they were dropped, and away longer than the history covers)
//!   while a writer registers on: the writes' p99 during the herd against before it (target
//!   2x), through one connection and through a new connection for every write.
//! * **A herd that resumes.** Watchers of every node, all stalled, while registrations with
//!   1 KB of metadata arrive, each then kept alive by its service's reports at the default
//!   lease; then all read on at once, a watcher the beacon dropped resuming from the index
//!   after the last notice it read (the history is sized to hold the registrations, so that
//!   they resume rather than list). At one beacon and at the leader of three: the writes'
//!   p99 against idle, leader changes (target 0) and leases lost (target 0).
//! * **Overload.** Three beacons; the allocation rate the cluster sustains with 16 closed-
//!   loop clients, then ten times that rate offered open-loop over many connections: the
//!   goodput (target 90 % of the peak), the p99 of the calls admitted, the refusals, the
//!   leader's memory, and the registrations acknowledged then lost (target 0).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use beacon::client::{Cluster as Leader, ConnectOptions, RegisterOptions, Registration};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::wire::{Cmd, Code, Frame, FrameCodec};
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio_util::codec::Framed;

use super::alloc::percentile;
use super::clients::service_addr;
use super::proc;
use super::scrape::{Histogram, Metrics};
use super::systems::{BeaconSetup, Cluster, Programs};

/// How the gray part is sized (the bench's `--gray-*` options).
#[derive(Debug, Clone)]
pub struct GraySizes {
    pub registrations: usize,
    pub lease_ms: u64,
    pub stop_secs: u64,
    pub watchers: usize,
    pub watch_registrations: usize,
    /// The herd that resumes: watchers, all stalled, and the registrations they miss.
    pub resume_watchers: usize,
    pub resume_registrations: usize,
    pub overload_secs: u64,
}

/// How a herd comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Herd {
    /// A tenth of the watchers stall and are dropped; they come back as new watches, each
    /// listing every registration again.
    Relist,
    /// Every watcher stalls while the registrations arrive, then all read on at once: a
    /// watcher the beacon dropped resumes from the index after the last notice it read (as
    /// the clients do), or lists again if the history no longer reaches back to it.
    Resume,
}

/// A beacon stopped while services renew through the cluster.
#[derive(Debug, Clone, Serialize)]
pub struct HungRun {
    /// `follower` or `leader`.
    pub stopped: String,
    pub registrations: usize,
    pub lease_ms: u64,
    pub stopped_ms: u64,
    pub leases_lost: usize,
    /// The longest a registration went without a confirmed renewal, over the run.
    pub longest_gap_ms: f64,
    /// The same, median over the registrations.
    pub median_gap_ms: f64,
    /// The longest gap between two steps of the cores of the beacons that were not
    /// stopped, the worst of the minute that ends with the case.
    pub step_gap_ms: Option<f64>,
    /// The p99 of their step gaps over the case, the highest of theirs.
    pub step_gap_p99_ms: Option<f64>,
}

/// Watchers, some stalled, while registrations arrive; then the stalled come back at once.
#[derive(Debug, Clone, Serialize)]
pub struct WatchersRun {
    pub herd: Herd,
    pub watchers: usize,
    pub stalled: usize,
    pub registrations: usize,
    pub metadata_bytes: usize,
    /// The leader's resident memory after the registrations with no watcher, and with them
    /// (the most it held).
    pub rss_state_bytes: u64,
    pub rss_watched_bytes: u64,
    pub idle_p99_ms: f64,
    pub herd_p99_ms: f64,
    pub herd_writes: usize,
    /// The same through a new connection for every write.
    pub idle_fresh_p99_ms: f64,
    pub herd_fresh_p99_ms: f64,
    /// From the herd's start until every one of it has its listing (relist), or has read
    /// through the last registration (resume).
    pub herd_listed_ms: f64,
    /// Resume: the watchers the beacon had dropped, which resumed from their index, and
    /// those of them refused `COMPACTED`, which listed again.
    pub resumed: usize,
    pub relisted: usize,
    /// Registrations, kept alive by their services' reports through the run, whose lease
    /// lapsed (`None`: the case's leases are an hour, and not renewed).
    pub leases_lost: Option<usize>,
    /// Beacons in the cluster (the herd is at the leader).
    pub beacons: usize,
    /// Terms the leader's went up by over the herd: each an election.
    pub leader_changes: u64,
    /// The leader's longest gap between two steps, the worst of the minute ending with it.
    pub step_gap_ms: Option<f64>,
    /// The p99 of the leader's step gaps over the case.
    pub step_gap_p99_ms: Option<f64>,
}

/// Ten times the load the cluster takes.
#[derive(Debug, Clone, Serialize)]
pub struct OverloadRun {
    pub peak_per_sec: f64,
    pub peak_p99_ms: f64,
    pub offered_per_sec: f64,
    pub goodput_per_sec: f64,
    pub admitted_p99_ms: f64,
    pub refused: usize,
    pub failed: usize,
    pub first_failure: Option<String>,
    /// Calls the generator did not send, holding [`GENERATOR_IN_FLIGHT`] already: the
    /// machine's two cores run the load and the cluster both.
    pub shed: usize,
    pub leader_rss_bytes: u64,
    /// The leader's RSS after the peak run, before the overload.
    pub unloaded_rss_bytes: u64,
    pub lost: usize,
    /// Terms the leader's went up by over the overload: each an election.
    pub leader_changes: u64,
    /// The longest an ask waited for the leader's core, the worst of the minute ending
    /// with the overload: what admission by delay bounds.
    pub core_wait_ms: Option<f64>,
    /// The leader's longest gap between two steps, the worst of the minute ending with it.
    pub step_gap_ms: Option<f64>,
    /// The p99 of the leader's step gaps over the overload.
    pub step_gap_p99_ms: Option<f64>,
}

/// Calls the overload generator keeps under way at most.
pub const GENERATOR_IN_FLIGHT: usize = 4_000;

/// How long clients made afresh, with a stopped beacon first in their list, took to their
/// first answer.
#[derive(Debug, Clone, Serialize)]
pub struct FirstAnswer {
    /// `follower` or `leader`.
    pub stopped: String,
    /// `Rust client`, `nebcli`, `Python client`.
    pub client: String,
    /// Each fresh client's time to its answer, in order; empty when not measured.
    pub samples_ms: Vec<f64>,
    /// Why not, when not measured.
    pub not_measured: Option<String>,
}

/// The first answer's target past a hung first beacon.
pub const FIRST_ANSWER_TARGET_MS: f64 = 250.0;

/// Fresh clients of each kind per stopped beacon.
const FRESH_CLIENTS: usize = 5;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Gray {
    pub hung: Vec<HungRun>,
    pub first_answers: Vec<FirstAnswer>,
    pub watchers: Option<WatchersRun>,
    /// The herd that resumes, at one beacon and at the leader of three.
    pub resume: Vec<WatchersRun>,
    pub overload: Option<OverloadRun>,
}

/// The longest gap between two steps of the core of the beacon at `at`, the worst of the
/// last minute, as its status says.
async fn step_gap_ms(at: SocketAddr, opts: &ConnectOptions) -> Option<f64> {
    beacon_testkit::status_with(at, opts)
        .await
        .map(|s| s.step_gap_worst_ms as f64)
}

/// Every member's step gaps, as its `/metrics` counts them now.
async fn scrape_all(cluster: &Cluster) -> Vec<Option<Histogram>> {
    let mut all = Vec::new();
    for m in &cluster.members {
        all.push(step_gaps(m.admin).await);
    }
    all
}

/// The step gap's target: two ticks of the gray part's clusters.
pub const STEP_GAP_TARGET_MS: f64 = 200.0;

/// Runs the three cases.
pub async fn run(programs: &Programs, sizes: &GraySizes, keep: bool) -> anyhow::Result<Gray> {
    let mut gray = Gray::default();
    let setup = BeaconSetup {
        tick_ms: 100,
        config: serde_json::json!({"id_range": [1, 4_000_000], "lease_ms": sizes.lease_ms}),
        restore: None,
    };
    let mut cluster = Cluster::start_beacon(programs, 3, &setup);
    let fresh = FreshClients::find(programs);
    (gray.hung, gray.first_answers) = hung(&mut cluster, sizes, &fresh)
        .await
        .context("hung beacons")?;
    super::keep(cluster, keep);

    let lone = BeaconSetup {
        tick_ms: 100,
        config: serde_json::json!({"id_range": [1, 4_000_000], "lease_ms": 3_600_000}),
        restore: None,
    };
    gray.watchers = Some(
        watchers(programs, &lone, sizes, Herd::Relist, 1, keep)
            .await
            .context("watchers")?,
    );
    // The resuming herd's registrations are kept alive by reports, at the default lease.
    let renewed = BeaconSetup {
        tick_ms: 100,
        config: serde_json::json!({
            "id_range": [1, 4_000_000],
            "lease_ms": RESUME_LEASE_MS,
            "watch": {"history": 4 * sizes.resume_registrations.max(10_000)},
        }),
        restore: None,
    };
    for beacons in [1, 3] {
        gray.resume.push(
            watchers(programs, &renewed, sizes, Herd::Resume, beacons, keep)
                .await
                .with_context(|| format!("a resuming herd at the leader of {beacons}"))?,
        );
    }

    let cluster = Cluster::start_beacon(programs, 3, &lone);
    gray.overload = Some(overload(&cluster, sizes).await.context("overload")?);
    super::keep(cluster, keep);
    Ok(gray)
}

/// Registers `n` services through lists rotated over the cluster's beacons, then stops a
/// follower and the leader in turn while a monitor notes every renewal's confirmation; while
/// each is stopped, fresh clients with it first in their list make a write each.
async fn hung(
    cluster: &mut Cluster,
    sizes: &GraySizes,
    fresh: &FreshClients,
) -> anyhow::Result<(Vec<HungRun>, Vec<FirstAnswer>)> {
    cluster.ready(Duration::from_secs(60)).await?;
    let all: Vec<String> = cluster
        .members
        .iter()
        .map(|m| m.client.to_string())
        .collect();
    let n = sizes.registrations;
    let regs: Arc<Vec<Registration>> = Arc::new({
        let mut regs = Vec::with_capacity(n);
        let mut made = futures_util::stream::iter((0..n).map(|i| {
            let mut list = all.clone();
            list.rotate_left(i % all.len());
            async move {
                Registration::register(list, RegisterOptions::new("GRAY", service_addr(i))).await
            }
        }))
        .buffer_unordered(32);
        while let Some(reg) = made.next().await {
            regs.push(reg.context("register a service")?);
        }
        regs
    });
    println!(
        "  {n} services registered, each renewing every {} ms",
        sizes.lease_ms / 4
    );
    let mut runs = Vec::new();
    let mut answers = Vec::new();
    let mut stopped_so_far = Vec::new();
    for which in ["follower", "leader"] {
        let leader = cluster.ready(Duration::from_secs(60)).await?;
        let stopped = match which {
            "leader" => leader,
            _ => (leader + 1) % cluster.members.len(),
        };
        let (stop, gaps) = monitor(regs.clone());
        let gaps_before = scrape_all(cluster).await;
        // Half a lease before, the stop, and two leases after it.
        tokio::time::sleep(Duration::from_millis(sizes.lease_ms / 2)).await;
        cluster.members[stopped].pause();
        let paused = Instant::now();
        // The others elect a new leader within half a second when it was the leader.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut list = vec![all[stopped].clone()];
        list.extend(all.iter().filter(|a| **a != all[stopped]).cloned());
        for measured in fresh.measure(&list, which).await {
            let shown: Vec<String> = measured
                .samples_ms
                .iter()
                .map(|t| format!("{t:.0}"))
                .collect();
            println!(
                "  {which} stopped, listed first: {} answered in {} ms{}",
                measured.client,
                shown.join(", "),
                measured
                    .not_measured
                    .as_deref()
                    .map(|w| format!(" (not measured: {w})"))
                    .unwrap_or_default()
            );
            answers.push(measured);
        }
        let stop_for = Duration::from_secs(sizes.stop_secs);
        tokio::time::sleep(stop_for.saturating_sub(paused.elapsed())).await;
        cluster.members[stopped].resume();
        tokio::time::sleep(Duration::from_millis(2 * sizes.lease_ms)).await;
        stop.store(true, Ordering::Relaxed);
        let mut gaps = gaps.await?;
        gaps.sort_by(f64::total_cmp);
        let lost = regs.iter().filter(|r| !r.is_live()).count();
        // The beacons that ran through it, the leader that served among them: a stopped
        // one's own gap is its stop, and the worst of its minute still holds it in the
        // next case.
        stopped_so_far.push(stopped);
        let mut step_gap = None::<f64>;
        let mut step_gap_p99 = None::<f64>;
        let gaps_after = scrape_all(cluster).await;
        for (i, m) in cluster.members.iter().enumerate() {
            if stopped_so_far.contains(&i) {
                continue;
            }
            if let Some(gap) = step_gap_ms(m.client, &cluster.beacon_client).await {
                step_gap = Some(step_gap.map_or(gap, |g| g.max(gap)));
            }
            if let (Some(after), Some(before)) = (&gaps_after[i], &gaps_before[i])
                && let Some(p99) = after.since(before).quantile_ms(0.99)
            {
                step_gap_p99 = Some(step_gap_p99.map_or(p99, |g| g.max(p99)));
            }
        }
        let run = HungRun {
            stopped: which.into(),
            registrations: n,
            lease_ms: sizes.lease_ms,
            stopped_ms: sizes.stop_secs * 1000,
            leases_lost: lost,
            longest_gap_ms: gaps.last().copied().unwrap_or(0.0),
            median_gap_ms: gaps.get(gaps.len() / 2).copied().unwrap_or(0.0),
            step_gap_ms: step_gap,
            step_gap_p99_ms: step_gap_p99,
        };
        println!(
            "  {which} stopped {} s: {lost} of {n} leases lost; longest time without a confirmed renewal {:.0} ms (median {:.0} ms)",
            sizes.stop_secs, run.longest_gap_ms, run.median_gap_ms
        );
        runs.push(run);
    }
    drop(regs);
    Ok((runs, answers))
}

/// The clients a fresh first answer is measured with: the Rust client in this process,
/// nebcli beside the beacon binary, and the Python client in the interpreter the tests use
/// (`BEACON_PYTHON`, else `target/python-venv`, which the Python client's test makes).
struct FreshClients {
    nebcli: std::path::PathBuf,
    python: Result<std::path::PathBuf, String>,
}

/// The Python side: a fresh `Client` with the list given, one write, its time in ms.
const PYTHON_FIRST_ANSWER: &str = r#"
import sys, time
from beacon_client import Client
started = time.monotonic()
with Client(sys.argv[1].split(","), retry_for=10) as client:
    client.config_put("cluster/gray-first-answer", sys.argv[2])
print((time.monotonic() - started) * 1000)
"#;

impl FreshClients {
    fn find(programs: &Programs) -> FreshClients {
        let nebcli = programs.beacon.with_file_name("nebcli");
        let python = std::env::var_os("BEACON_PYTHON")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let venv = std::path::PathBuf::from("target/python-venv/bin/python");
                venv.exists().then_some(venv)
            })
            .ok_or_else(|| {
                "no interpreter with the Python client: set BEACON_PYTHON, or run the Python client's tests once (target/python-venv)".to_owned()
            });
        FreshClients { nebcli, python }
    }

    /// One fresh client of each kind after another, [`FRESH_CLIENTS`] times, with `list`
    /// (its first beacon stopped) as their beacons.
    async fn measure(&self, list: &[String], stopped: &str) -> Vec<FirstAnswer> {
        let servers = list.join(",");
        let mut rust = Vec::new();
        let mut nebcli = Vec::new();
        let mut python = Vec::new();
        let mut failed: [Option<String>; 3] = Default::default();
        for n in 0..FRESH_CLIENTS {
            let mut fresh = Leader::new(
                list.to_vec(),
                ConnectOptions::default(),
                Duration::from_secs(10),
            );
            let req = pb::registry::RegisterRequest {
                node_type: "FRESH".into(),
                addr: format!("10.9.{}.{n}:80", usize::from(stopped == "leader")),
                ..Default::default()
            };
            let started = Instant::now();
            match fresh
                .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &req, "register")
                .await
            {
                Ok(_) => rust.push(ms(started.elapsed())),
                Err(e) => failed[0] = Some(e.to_string()),
            }
            let addr = format!("10.9.{}.{}:81", usize::from(stopped == "leader"), n);
            let started = Instant::now();
            let out = tokio::process::Command::new(&self.nebcli)
                .args([
                    "-s", &servers, "register", "--type", "FRESH", "--addr", &addr,
                ])
                .output()
                .await;
            match out {
                Ok(o) if o.status.success() => nebcli.push(ms(started.elapsed())),
                Ok(o) => failed[1] = Some(String::from_utf8_lossy(&o.stderr).trim().to_owned()),
                Err(e) => failed[1] = Some(format!("{}: {e}", self.nebcli.display())),
            }
            match &self.python {
                Ok(py) => {
                    let out = tokio::process::Command::new(py)
                        .args(["-c", PYTHON_FIRST_ANSWER, &servers, &n.to_string()])
                        .output()
                        .await;
                    match out {
                        Ok(o) if o.status.success() => {
                            match String::from_utf8_lossy(&o.stdout).trim().parse::<f64>() {
                                Ok(t) => python.push(t),
                                Err(e) => failed[2] = Some(format!("unreadable time: {e}")),
                            }
                        }
                        Ok(o) => {
                            failed[2] = Some(String::from_utf8_lossy(&o.stderr).trim().to_owned())
                        }
                        Err(e) => failed[2] = Some(format!("{}: {e}", py.display())),
                    }
                }
                Err(why) => failed[2] = Some(why.clone()),
            }
        }
        [
            ("Rust client", rust),
            ("nebcli", nebcli),
            ("Python client", python),
        ]
        .into_iter()
        .zip(failed)
        .map(|((client, samples_ms), failed)| FirstAnswer {
            stopped: stopped.into(),
            client: client.into(),
            samples_ms,
            not_measured: failed,
        })
        .collect()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Watches every registration's confirmations every 10 ms until stopped; yields, for each,
/// the longest time between two confirmations (or since the last one).
fn monitor(regs: Arc<Vec<Registration>>) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Vec<f64>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let task = tokio::spawn(async move {
        let start = Instant::now();
        let mut last: Vec<(std::time::Instant, Instant)> =
            regs.iter().map(|r| (r.confirmed_until(), start)).collect();
        let mut gaps = vec![0f64; regs.len()];
        while !done.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let now = Instant::now();
            for (i, r) in regs.iter().enumerate() {
                let until = r.confirmed_until();
                if until != last[i].0 {
                    last[i] = (until, now);
                }
                let gap = now.duration_since(last[i].1).as_secs_f64() * 1000.0;
                gaps[i] = gaps[i].max(gap);
            }
        }
        gaps
    });
    (stop, task)
}

/// A watch of every node over a raw connection: `buffer`, the receive buffer asked for;
/// `start_index`, the log index to resume from (0: list).
async fn raw_watch(
    at: SocketAddr,
    buffer: Option<u32>,
    start_index: u64,
) -> anyhow::Result<Framed<tokio::net::TcpStream, FrameCodec>> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    if let Some(b) = buffer {
        socket.set_recv_buffer_size(b)?;
    }
    let tcp = socket.connect(at).await?;
    let mut conn = Framed::new(tcp, FrameCodec::new(64 << 20));
    let hello = pb::Hello {
        role: pb::Role::Client as i32,
        version: beacon::wire::PROTOCOL_VERSION,
        ..Default::default()
    };
    conn.send(Frame::new(Cmd::Hello.code(), 1, 0, &hello))
        .await?;
    let ack = conn.next().await.ok_or_else(|| anyhow!("closed"))??;
    anyhow::ensure!(!ack.is_error(), "handshake refused");
    send_watch(&mut conn, 2, start_index).await?;
    Ok(conn)
}

/// Asks for a watch of every node on `conn`, from `start_index` (0: list).
async fn send_watch(
    conn: &mut Framed<tokio::net::TcpStream, FrameCodec>,
    seq: u32,
    start_index: u64,
) -> anyhow::Result<()> {
    let request = pb::registry::WatchRequest {
        start_index,
        ..Default::default()
    };
    conn.send(Frame::new(RegistryCmd::Watch.code(), seq, 0, &request))
        .await?;
    Ok(())
}

/// Reads a raw watch's first answer and its pages; returns the log index the listing is
/// as of, once it is whole.
async fn read_listing(conn: &mut Framed<tokio::net::TcpStream, FrameCodec>) -> anyhow::Result<u64> {
    let first = conn.next().await.ok_or_else(|| anyhow!("closed"))??;
    anyhow::ensure!(!first.is_error(), "watch refused");
    let reply: pb::registry::WatchReply = first.decode()?;
    let mut more = reply.more;
    while more {
        let page = conn.next().await.ok_or_else(|| anyhow!("closed"))??;
        // Whether another page follows, read off the page's last field (`more`, field 6,
        // encoded last, and only when set) rather than by decoding its registrations: the
        // herd runs on the cores it measures, and its own decoding is not the beacon's cost.
        more = page.body.ends_with(&[0x30, 0x01]);
    }
    Ok(reply.index)
}

/// A client of the beacon at `at` alone, calls retried for up to 30 s.
fn leader_at(at: SocketAddr) -> Leader {
    Leader::new(
        vec![at.to_string()],
        ConnectOptions::default(),
        Duration::from_secs(30),
    )
}

/// Registers `from..to` through `writers` connections, `metadata` on each; gives the report
/// that renews each.
async fn register_range(
    at: SocketAddr,
    from: usize,
    to: usize,
    metadata: &str,
    writers: usize,
    reports: Option<Reports>,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(from));
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let (next, metadata, reports) = (next.clone(), metadata.to_owned(), reports.clone());
        tasks.push(tokio::spawn(async move {
            let mut leader = leader_at(at);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    return anyhow::Ok(());
                }
                let req = pb::registry::RegisterRequest {
                    node_type: "WATCHED".into(),
                    addr: service_addr(i).to_string(),
                    metadata: metadata.clone(),
                    ..Default::default()
                };
                let reply = leader
                    .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &req, "register")
                    .await?;
                if let Some(reports) = &reports {
                    let node = reply.node.unwrap_or_default();
                    reports.lock().unwrap().push(pb::registry::NodeReport {
                        node_id: node.node_id,
                        addr: node.addr,
                        term: node.term,
                        index: node.index,
                        ..Default::default()
                    });
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// A writer that registers one service every `every` until stopped, through one
/// connection or (`fresh`) a new one for every write; the latencies, a fresh write's with
/// its connection's handshake.
fn paced_writer(
    at: SocketAddr,
    from: usize,
    every: Duration,
    fresh: bool,
) -> (
    Arc<AtomicBool>,
    tokio::task::JoinHandle<anyhow::Result<Vec<Duration>>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let task = tokio::spawn(async move {
        let mut leader = leader_at(at);
        let mut took = Vec::new();
        let mut i = from;
        let mut tick = tokio::time::interval(every);
        while !done.load(Ordering::Relaxed) {
            tick.tick().await;
            let req = pb::registry::RegisterRequest {
                node_type: "PACED".into(),
                addr: service_addr(i).to_string(),
                ..Default::default()
            };
            let t = Instant::now();
            if fresh {
                leader = leader_at(at);
            }
            leader
                .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &req, "register")
                .await?;
            took.push(t.elapsed());
            i += 1;
        }
        Ok(took)
    });
    (stop, task)
}

/// The lease of the resuming herd's registrations (beacon's default), renewed by reports
/// every quarter of it.
pub const RESUME_LEASE_MS: u64 = 10_000;

/// Stalled watchers and their herd: `herd` says how many stall and how they come back.
async fn watchers(
    programs: &Programs,
    setup: &BeaconSetup,
    sizes: &GraySizes,
    herd: Herd,
    beacons: usize,
    keep: bool,
) -> anyhow::Result<WatchersRun> {
    let (watchers_n, n, stalled_n) = match herd {
        Herd::Relist => (
            sizes.watchers,
            sizes.watch_registrations,
            sizes.watchers / 10,
        ),
        Herd::Resume => (
            sizes.resume_watchers,
            sizes.resume_registrations,
            sizes.resume_watchers,
        ),
    };
    let renewing = herd == Herd::Resume;
    let metadata = format!("{{\"pad\": \"{}\"}}", "m".repeat(1000));
    // What the registrations cost with nobody watching.
    let control = Cluster::start_beacon(programs, 1, setup);
    let (pid, at) = control.leader_process().await?;
    register_range(at, 0, n, &metadata, 16, None).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_state = proc::rss_bytes(pid).context("RSS")?;
    super::keep(control, keep);
    println!(
        "  {n} registrations with 1 KB of metadata, no watcher: leader RSS {:.1} MiB",
        rss_state as f64 / 1048576.0
    );

    let cluster = Cluster::start_beacon(programs, beacons, setup);
    let (pid, at) = cluster.leader_process().await?;
    let admin = cluster.admin_of(at);
    let gaps_before = step_gaps(admin).await;
    let reading_n = watchers_n - stalled_n;
    // Readers read every frame (without decoding notices: the beacon's cost is what counts).
    let mut readers = Vec::new();
    for _ in 0..reading_n {
        let mut conn = raw_watch(at, None, 0).await?;
        readers.push(tokio::spawn(async move {
            while let Some(Ok(_)) = conn.next().await {}
        }));
    }
    let mut stalled = Vec::new();
    for _ in 0..stalled_n {
        let mut conn = raw_watch(at, Some(4096), 0).await?;
        let index = read_listing(&mut conn).await?;
        stalled.push((conn, index));
    }
    let peak = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Some(rss) = proc::rss_bytes(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // The services report as beacon's clients do, each every quarter of its lease, from
    // its registration until the end of the case.
    let reports: Reports = Default::default();
    let renewer = renewing.then(|| renew(at, reports.clone(), RESUME_LEASE_MS / 4));
    register_range(at, 0, n, &metadata, 16, renewing.then_some(reports)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_watched = peak.load(Ordering::Relaxed);
    println!(
        "  {watchers_n} watchers ({stalled_n} stalled) while they arrive: leader RSS at most {:.1} MiB, {:.1} MiB above the registrations' own",
        rss_watched as f64 / 1048576.0,
        rss_watched.saturating_sub(rss_state) as f64 / 1048576.0
    );

    // Writes before the herd, then while the stalled watchers come back at once.
    let every = Duration::from_millis(2);
    let fresh_every = Duration::from_millis(20);
    let (stop, idle) = paced_writer(at, 10_000_000, every, false);
    let (stop_fresh, idle_fresh) = paced_writer(at, 15_000_000, fresh_every, true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    stop_fresh.store(true, Ordering::Relaxed);
    let mut idle = idle.await??;
    idle.sort_unstable();
    let mut idle_fresh = idle_fresh.await??;
    idle_fresh.sort_unstable();
    let term = cluster.leader_term().await.unwrap_or(0);
    // What a resuming watcher must read through: everything committed so far.
    let through = match beacon_testkit::status_with(at, &cluster.beacon_client).await {
        Some(s) => s.commit,
        None => anyhow::bail!("the leader at {at} did not answer its status"),
    };
    let (stop, during) = paced_writer(at, 20_000_000, every, false);
    let (stop_fresh, during_fresh) = paced_writer(at, 25_000_000, fresh_every, true);
    let t = Instant::now();
    let came_back: Vec<_> = match herd {
        Herd::Relist => {
            drop(stalled);
            (0..stalled_n)
                .map(|_| {
                    tokio::spawn(async move {
                        let mut conn = raw_watch(at, None, 0).await?;
                        read_listing(&mut conn).await?;
                        anyhow::Ok(Caught::default())
                    })
                })
                .collect()
        }
        Herd::Resume => stalled
            .into_iter()
            .map(|(conn, index)| tokio::spawn(catch_up(at, conn, index, through)))
            .collect(),
    };
    let mut caught = Caught::default();
    for h in came_back {
        let c = h.await??;
        caught.resumed += c.resumed;
        caught.relisted += c.relisted;
    }
    let herd_listed_ms = t.elapsed().as_secs_f64() * 1000.0;
    stop.store(true, Ordering::Relaxed);
    stop_fresh.store(true, Ordering::Relaxed);
    let mut during = during.await??;
    during.sort_unstable();
    let mut during_fresh = during_fresh.await??;
    during_fresh.sort_unstable();
    let leader_changes = cluster
        .leader_term()
        .await
        .unwrap_or(term)
        .saturating_sub(term);
    let step_gap = step_gap_ms(at, &cluster.beacon_client).await;
    let step_gap_p99 = step_gap_p99_since(admin, gaps_before.as_ref()).await;
    sampling.store(false, Ordering::Relaxed);
    sampler.await?;
    for r in readers {
        r.abort();
    }
    let leases_lost = match renewer {
        Some((stop, task)) => {
            stop.store(true, Ordering::Relaxed);
            let refused = task.await??;
            // A registration whose lease lapsed is gone from the registry, and its report
            // was refused.
            let listed = listed(at, "WATCHED").await?;
            Some(n.saturating_sub(listed.len()).max(refused))
        }
        None => None,
    };
    let run = WatchersRun {
        herd,
        watchers: watchers_n,
        stalled: stalled_n,
        registrations: n,
        metadata_bytes: 1000,
        rss_state_bytes: rss_state,
        rss_watched_bytes: rss_watched,
        idle_p99_ms: percentile(&idle, 0.99),
        herd_p99_ms: percentile(&during, 0.99),
        herd_writes: during.len(),
        idle_fresh_p99_ms: percentile(&idle_fresh, 0.99),
        herd_fresh_p99_ms: percentile(&during_fresh, 0.99),
        herd_listed_ms,
        resumed: caught.resumed,
        relisted: caught.relisted,
        leases_lost,
        beacons,
        leader_changes,
        step_gap_ms: step_gap,
        step_gap_p99_ms: step_gap_p99,
    };
    let came = match herd {
        Herd::Relist => format!("{stalled_n} watchers list {n} registrations again at once"),
        Herd::Resume => format!(
            "{stalled_n} watchers read on at once ({} had been dropped and resumed, {} of them listing again)",
            run.resumed, run.relisted
        ),
    };
    println!(
        "  {came} at the leader of {beacons}: all through in {herd_listed_ms:.0} ms; writes p99 {:.2} ms ({} writes), idle {:.2} ms; through a new connection each {:.2} ms, idle {:.2} ms; {leader_changes} leader changes; longest step gap {:?} ms (p99 {:?} ms); leases lost {:?}",
        run.herd_p99_ms,
        run.herd_writes,
        run.idle_p99_ms,
        run.herd_fresh_p99_ms,
        run.idle_fresh_p99_ms,
        run.step_gap_ms,
        run.step_gap_p99_ms,
        run.leases_lost,
    );
    super::keep(cluster, keep);
    Ok(run)
}

/// What a watcher of a resuming herd went through.
#[derive(Debug, Default)]
struct Caught {
    /// Dropped by the beacon, and resumed from its index.
    resumed: usize,
    /// Of those, refused `COMPACTED` and listed again.
    relisted: usize,
}

/// A stalled watcher reads on until it has read through log index `through`: a notice's
/// index is read off its first field (`index`, field 1), not by decoding it. Dropped, it
/// resumes on the same connection from the index after the last notice it read, as the
/// clients do, or lists again if that is compacted.
async fn catch_up(
    at: SocketAddr,
    mut conn: Framed<tokio::net::TcpStream, FrameCodec>,
    mut last: u64,
    through: u64,
) -> anyhow::Result<Caught> {
    let mut caught = Caught::default();
    let mut seq = 2;
    let deadline = Instant::now() + Duration::from_secs(300);
    while last < through {
        let frame = tokio::time::timeout_at(deadline.into(), conn.next())
            .await
            .map_err(|_| anyhow!("a resuming watcher at {at} did not reach index {through} (at {last}) within 300 s"))?;
        let frame = match frame {
            Some(Ok(frame)) if !frame.is_error() => frame,
            Some(Ok(_)) => {
                // Dropped (it fell behind): resume from the next index.
                caught.resumed += 1;
                seq += 1;
                send_watch(&mut conn, seq, last + 1).await?;
                let first = conn.next().await.ok_or_else(|| anyhow!("closed"))??;
                if first.is_error() {
                    caught.relisted += 1;
                    seq += 1;
                    send_watch(&mut conn, seq, 0).await?;
                    last = read_listing(&mut conn).await?;
                }
                continue;
            }
            Some(Err(e)) => return Err(e.into()),
            None => anyhow::bail!("the beacon at {at} closed a resuming watcher's connection"),
        };
        if let Some(index) = notice_index(&frame.body) {
            last = last.max(index);
        }
    }
    Ok(caught)
}

/// A notice's log index, its first field when set (`index`, field 1, a varint).
fn notice_index(body: &[u8]) -> Option<u64> {
    let mut rest = body.strip_prefix(&[0x08])?;
    prost::encoding::decode_varint(&mut rest).ok()
}

/// Registrations of `node_type` listed at `at`, by address, a thousand to a page (with
/// 1 KB of metadata each, ten thousand would pass the frame limit).
async fn listed(at: SocketAddr, node_type: &str) -> anyhow::Result<HashSet<String>> {
    let mut listed = HashSet::new();
    let mut client =
        beacon::client::Client::connect(&at.to_string(), &ConnectOptions::default()).await?;
    let mut from = 0;
    loop {
        let page = client
            .nodes_matching(&pb::registry::NodesRequest {
                node_type: node_type.into(),
                limit: 1_000,
                from_node_id: from,
                ..Default::default()
            })
            .await?;
        for e in &page.nodes {
            if let Some(n) = &e.node {
                listed.insert(n.addr.clone());
            }
        }
        if page.next_node_id == 0 {
            return Ok(listed);
        }
        from = page.next_node_id;
    }
}

/// The reports that keep registrations alive, added to as each registration is made.
type Reports = Arc<std::sync::Mutex<Vec<pb::registry::NodeReport>>>;

/// Sends each of `reports` (those made so far, each time round) every `every_ms` until
/// stopped, through 16 connections to `at`; gives how many were refused because their
/// lease had lapsed (each stops being renewed then).
fn renew(
    at: SocketAddr,
    reports: Reports,
    every_ms: u64,
) -> (
    Arc<AtomicBool>,
    tokio::task::JoinHandle<anyhow::Result<usize>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let task = tokio::spawn(async move {
        let connections = 16;
        let mut tasks = Vec::new();
        for c in 0..connections {
            let (reports, done) = (reports.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let mut leader = leader_at(at);
                let mut tick = tokio::time::interval(Duration::from_millis(every_ms));
                let mut lapsed = HashSet::new();
                while !done.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let mine: Vec<pb::registry::NodeReport> = {
                        let all = reports.lock().unwrap();
                        all.iter().skip(c).step_by(connections).cloned().collect()
                    };
                    for report in &mine {
                        if lapsed.contains(&report.node_id) {
                            continue;
                        }
                        let answer = leader
                            .call::<_, pb::registry::NodeReportReply>(
                                RegistryCmd::NodeReport,
                                report,
                                "report",
                            )
                            .await;
                        if let Err(e) = answer {
                            let why = format!("{e:#}");
                            anyhow::ensure!(
                                why.contains("holds no lease"),
                                "renew node {}: {why}",
                                report.node_id
                            );
                            lapsed.insert(report.node_id);
                        }
                    }
                }
                anyhow::Ok(lapsed.len())
            }));
        }
        let mut lapsed = 0;
        for t in tasks {
            lapsed += t.await??;
        }
        Ok(lapsed)
    });
    (stop, task)
}

/// One registration over gRPC (each call a new registration): `Ok(Some(took))` answered
/// (how long from the moment the call could go out), `Ok(None)` refused `BUSY`.
async fn grpc_register(
    ch: &tonic::transport::Channel,
    i: usize,
) -> anyhow::Result<Option<Duration>> {
    use tonic::client::Grpc;
    let mut grpc = Grpc::new(ch.clone());
    grpc.ready().await?;
    let t = Instant::now();
    let req = pb::registry::RegisterRequest {
        node_type: "OVERLOAD".into(),
        addr: service_addr(i).to_string(),
        ..Default::default()
    };
    let codec = tonic_prost::ProstCodec::<pb::registry::RegisterRequest, pb::registry::RegisterReply>::default();
    let path = http::uri::PathAndQuery::from_static("/beacon.v1.registry.Registry/Register");
    match grpc.unary(tonic::Request::new(req), path, codec).await {
        Ok(_) => Ok(Some(t.elapsed())),
        Err(s) if s.code() == tonic::Code::ResourceExhausted => Ok(None),
        Err(s) => Err(anyhow!("{}: {}", s.code(), s.message())),
    }
}

async fn overload(cluster: &Cluster, sizes: &GraySizes) -> anyhow::Result<OverloadRun> {
    let (pid, at) = cluster.leader_process().await?;
    let next = Arc::new(AtomicUsize::new(30_000_000));
    let peak = super::alloc::run(
        cluster.kind,
        cluster.via,
        &[at],
        &cluster.beacon_client,
        16,
        Duration::from_secs(5),
        &next,
    )
    .await?;
    println!(
        "  peak: {:.0} registrations/s with 16 clients, p99 {:.2} ms",
        peak.per_sec, peak.p99_ms
    );
    let offered = peak.per_sec * 10.0;
    let admin = cluster.admin_of(at);
    let gaps_before = step_gaps(admin).await;
    let unloaded_rss = proc::rss_bytes(pid).unwrap_or(0);
    let term = cluster.leader_term().await.unwrap_or(0);
    let connections = 64;
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(
            tonic::transport::Endpoint::from_shared(format!("http://{at}"))?
                .connect()
                .await?,
        );
    }
    let (admitted, refused, failed) = (
        Arc::new(std::sync::Mutex::new(Vec::new())),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let acked = Arc::new(std::sync::Mutex::new(HashSet::new()));
    let first_failure = Arc::new(std::sync::Mutex::new(None::<String>));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut shed = 0usize;
    let peak_rss = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(sizes.overload_secs);
    let mut sent = 0usize;
    let mut calls = Vec::new();
    // Open loop: one call every 1/offered s, whatever the answers.
    let every = Duration::from_secs_f64(1.0 / offered);
    let mut due = started;
    while Instant::now() < deadline {
        due += every;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let i = 40_000_000 + sent;
        sent += 1;
        if in_flight.load(Ordering::Relaxed) >= GENERATOR_IN_FLIGHT {
            shed += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let ch = channels[sent % connections].clone();
        let (admitted, refused, failed, acked, first_failure, in_flight) = (
            admitted.clone(),
            refused.clone(),
            failed.clone(),
            acked.clone(),
            first_failure.clone(),
            in_flight.clone(),
        );
        calls.push(tokio::spawn(async move {
            match grpc_register(&ch, i).await {
                Ok(Some(took)) => {
                    admitted.lock().unwrap().push(took);
                    acked.lock().unwrap().insert(i);
                }
                Ok(None) => {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    first_failure
                        .lock()
                        .unwrap()
                        .get_or_insert(format!("{e:#}"));
                }
            }
            in_flight.fetch_sub(1, Ordering::Relaxed);
        }));
        if sent.is_multiple_of(1000)
            && let Some(rss) = proc::rss_bytes(pid)
        {
            peak_rss.fetch_max(rss, Ordering::Relaxed);
        }
    }
    let offered_secs = started.elapsed().as_secs_f64();
    for c in calls {
        c.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    let mut admitted = std::mem::take(&mut *admitted.lock().unwrap());
    admitted.sort_unstable();
    // Every acknowledged registration is there.
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let listed = listed(at, "OVERLOAD").await?;
    let lost = acked
        .iter()
        .filter(|i| !listed.contains(&service_addr(**i).to_string()))
        .count();
    let leader_changes = cluster
        .leader_term()
        .await
        .unwrap_or(term)
        .saturating_sub(term);
    let status = match cluster.leader().await {
        Some(l) => {
            beacon_testkit::status_with(cluster.members[l].client, &cluster.beacon_client).await
        }
        None => None,
    };
    let step_gap = status.as_ref().map(|s| s.step_gap_worst_ms as f64);
    let step_gap_p99 = step_gap_p99_since(admin, gaps_before.as_ref()).await;
    let core_wait = status.as_ref().map(|s| s.queue_wait_worst_ms as f64);
    let run = OverloadRun {
        peak_per_sec: peak.per_sec,
        peak_p99_ms: peak.p99_ms,
        offered_per_sec: sent as f64 / offered_secs,
        goodput_per_sec: admitted.len() as f64 / secs,
        admitted_p99_ms: percentile(&admitted, 0.99),
        refused: refused.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        first_failure: first_failure.lock().unwrap().clone(),
        shed,
        leader_rss_bytes: peak_rss.load(Ordering::Relaxed),
        unloaded_rss_bytes: unloaded_rss,
        lost,
        leader_changes,
        core_wait_ms: core_wait,
        step_gap_ms: step_gap,
        step_gap_p99_ms: step_gap_p99,
    };
    println!(
        "  offered {:.0}/s ({:.1}x the peak; {} not sent, the generator holding {GENERATOR_IN_FLIGHT}): goodput {:.0}/s ({:.0}% of the peak), p99 of the admitted {:.2} ms, {} refused BUSY, {} failed ({}), leader RSS {:.1} MiB, {lost} acknowledged and lost",
        run.offered_per_sec,
        run.offered_per_sec / peak.per_sec,
        run.shed,
        run.goodput_per_sec,
        100.0 * run.goodput_per_sec / peak.per_sec,
        run.admitted_p99_ms,
        run.refused,
        run.failed,
        run.first_failure.as_deref().unwrap_or("none"),
        run.leader_rss_bytes as f64 / 1048576.0,
    );
    println!(
        "  {} leader changes; longest step gap {:?} ms (p99 {:?} ms); longest wait for the core {:?} ms; leader RSS unloaded {:.1} MiB",
        run.leader_changes,
        run.step_gap_ms,
        run.step_gap_p99_ms,
        run.core_wait_ms,
        run.unloaded_rss_bytes as f64 / 1048576.0
    );
    Ok(run)
}

/// A beacon's step gaps as its `/metrics` counts them now (`beacon_step_gap_seconds`).
async fn step_gaps(admin: Option<SocketAddr>) -> Option<Histogram> {
    Some(
        Metrics::scrape(admin)
            .await?
            .histogram("beacon_step_gap_seconds", &[]),
    )
}

/// The p99, in ms, of the gaps the beacon whose admin API is at `admin` counted since
/// `before` (`None`: no scrape then or now, or no step since).
async fn step_gap_p99_since(admin: Option<SocketAddr>, before: Option<&Histogram>) -> Option<f64> {
    step_gaps(admin).await?.since(before?).quantile_ms(0.99)
}
