//! Scale: registrations grown in steps (to a million by default) on five beacons in quorum
//! mode, with a lease long enough that renewals do not limit the climb.
//!
//! Per step: the resident memory of the leader and of a follower, and what each costs per
//! registration; the leader's log and snapshot on disk. At the top: a `--limit 10` page of
//! the registry, a watch resumed 100 changes back, a new watch's first listing and a
//! discovery push of one type among them all, killed-leader failover (beside failover at
//! the first step), and a follower whose data directory was wiped catching up. Where the
//! climb stops early, the result says which member stopped or what was refused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use beacon::pb;
use serde::Serialize;

use super::failover::{self, Failover, Fault};
use super::liveness::{Shard, beacon_client as connect, register};
use super::proc;
use super::systems::{Cluster, Kind};

/// Beacons of the scale part.
pub const MEMBERS: usize = 5;
/// The lease of every registration: an hour, the longest beacon allows.
pub const LEASE_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Serialize)]
pub struct ScaleStep {
    pub live: usize,
    /// Registrations added for this step, per second.
    pub registered_per_sec: f64,
    pub leader_rss: u64,
    pub leader_bytes_per_registration: f64,
    pub follower_rss: u64,
    pub follower_bytes_per_registration: f64,
    /// The leader's data directory: log and snapshot files.
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScaleTop {
    pub live: usize,
    /// A page of 10 registrations at the leader: median and slowest of 20.
    pub page_ms: (f64, f64),
    /// A watch resumed 100 log entries back: until it has heard up to the present.
    pub resume_ms: f64,
    pub resumed_changes: usize,
    /// A new watch of a type nobody has yet, among them all, until its first listing.
    #[serde(default)]
    pub first_listing_ms: f64,
    /// One registration of a type nobody else has, until its watcher hears of it.
    pub push_ms: f64,
    pub failover: Failover,
    /// A follower restarted with its data directory wiped: until it has applied what the
    /// leader had committed when it started, and the bytes it then holds on disk.
    pub catch_up_ms: f64,
    pub catch_up_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Scale {
    pub members: usize,
    pub steps: Vec<ScaleStep>,
    /// Killed-leader failover at the first step (the huge part: on a cluster of its own),
    /// to compare the top with.
    pub failover_small: Option<Failover>,
    /// Registrations held in `failover_small` when not the first step's.
    #[serde(default)]
    pub failover_small_live: Option<usize>,
    pub top: Option<ScaleTop>,
    /// Times a step's registrations failed (the leadership moved) and were made again.
    pub leader_changes: usize,
    /// Why the climb stopped before its last step, if it did.
    pub stopped: Option<String>,
    /// Why the measures at the top did not finish, if the climb did and they did not.
    #[serde(default)]
    pub top_stopped: Option<String>,
    /// Registrations restored from a generated backup before the climb (the huge part): its
    /// memory per registration is resident memory over every registration held, a beacon's
    /// own memory included (no empty beacon came before it).
    #[serde(default)]
    pub restored: usize,
    /// The steps of each further climb, each on a cluster of its own (memory only): resident
    /// memory moves from run to run, so it is published as a spread over all the climbs.
    #[serde(default)]
    pub other_climbs: Vec<Vec<ScaleStep>>,
}

impl Scale {
    /// Every climb's figure `of` at the step with `live` registrations: (median, min, max)
    /// and how many climbs reached it.
    pub fn spread(&self, live: usize, of: impl Fn(&ScaleStep) -> f64) -> (f64, f64, f64, usize) {
        let mut values: Vec<f64> = std::iter::once(&self.steps)
            .chain(&self.other_climbs)
            .filter_map(|climb| climb.iter().find(|s| s.live == live))
            .map(of)
            .collect();
        values.sort_by(f64::total_cmp);
        match values.as_slice() {
            [] => (0.0, 0.0, 0.0, 0),
            v => (v[v.len() / 2], v[0], v[v.len() - 1], v.len()),
        }
    }
}

/// Connections that register.
const CONNECTIONS: usize = 64;
/// How long a wiped follower may take to catch up before the part says it did not.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(120);
/// Attempts at one step's registrations before the climb stops.
const CLIMB_RETRIES: usize = 3;

/// One climb through `steps` on `cluster`, which holds `restored` registrations to begin
/// with; with `whole`, failover at the first step (`rounds` kills; none after a restore, whose
/// first step is not small) and everything measured at the top too, else memory and disk
/// alone.
pub async fn run(
    cluster: &mut Cluster,
    restored: usize,
    steps: &[usize],
    rounds: usize,
    whole: bool,
) -> anyhow::Result<Scale> {
    let mut result = Scale {
        restored,
        other_climbs: Vec::new(),
        members: cluster.members.len(),
        steps: Vec::new(),
        failover_small: None,
        failover_small_live: None,
        top: None,
        leader_changes: 0,
        stopped: None,
        top_stopped: None,
    };
    let leader = cluster.ready(Duration::from_secs(120)).await?;
    // Memory before any registration: what a beacon costs with nothing in it (unknown after
    // a restore: counted in).
    let baseline: Vec<u64> = (0..cluster.members.len())
        .map(|i| {
            cluster.members[i]
                .pid()
                .and_then(proc::rss_bytes)
                .filter(|_| restored == 0)
                .unwrap_or(0)
        })
        .collect();
    let shards: Vec<Shard> = (0..CONNECTIONS).map(|_| Shard::default()).collect();
    let mut live = restored;
    let mut at = cluster.members[leader].client;
    'climb: for &target in steps {
        let t = Instant::now();
        // A leader change mid-step fails some registrations: as a service would, register
        // them again at the new leader (the same address again is safe; one already made
        // is answered as it stands).
        let mut tries = 0;
        while let Err(e) = register(Kind::Beacon, at, live, target, &shards).await {
            tries += 1;
            result.leader_changes += 1;
            println!("  between {live} and {target} registrations: {e:#}; registering again");
            if tries == CLIMB_RETRIES {
                result.stopped = Some(why_stopped(cluster, live, target, &e));
                break 'climb;
            }
            match cluster.ready(Duration::from_secs(120)).await {
                Ok(l) => at = cluster.members[l].client,
                Err(e) => {
                    result.stopped = Some(why_stopped(cluster, live, target, &e));
                    break 'climb;
                }
            }
        }
        let took = t.elapsed().as_secs_f64();
        // Followers apply what the leader committed last.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let follower = (leader + 1) % cluster.members.len();
        let rss = |i: usize| cluster.members[i].pid().and_then(proc::rss_bytes);
        let (leader_rss, follower_rss) = (
            rss(leader).context("leader RSS")?,
            rss(follower).context("follower RSS")?,
        );
        let per = |rss: u64, base: u64| rss.saturating_sub(base) as f64 / target as f64;
        let dir = data_dir(cluster, leader);
        let step = ScaleStep {
            live: target,
            // A step at the restored count itself registers nothing.
            registered_per_sec: if target > live {
                (target - live) as f64 / took
            } else {
                0.0
            },
            leader_rss,
            leader_bytes_per_registration: per(leader_rss, baseline[leader]),
            follower_rss,
            follower_bytes_per_registration: per(follower_rss, baseline[follower]),
            log_bytes: file_size(&dir.join("log")),
            snapshot_bytes: file_size(&dir.join("snapshot")),
        };
        println!(
            "  {target} registrations ({:.0}/s): leader {:.1} MiB ({:.0} B each), follower {:.1} MiB ({:.0} B each), log {:.1} MiB, snapshot {:.1} MiB",
            step.registered_per_sec,
            mib(leader_rss),
            step.leader_bytes_per_registration,
            mib(follower_rss),
            step.follower_bytes_per_registration,
            mib(step.log_bytes),
            mib(step.snapshot_bytes),
        );
        result.steps.push(step);
        live = target;
        if whole && result.steps.len() == 1 && rounds > 0 && restored == 0 {
            let f = failover::run(cluster, rounds, Fault::Kill).await?;
            println!(
                "  failover at {live}: median {:.1} ms, max {:.1} ms",
                f.median_ms, f.max_ms
            );
            result.failover_small = Some(f);
            // The registrations' own leases were renewed by the new leader: nothing lost.
        }
        at = cluster.members[cluster.ready(Duration::from_secs(120)).await?].client;
    }
    if result.stopped.is_some() || live == 0 || !whole {
        return Ok(result);
    }
    // What the top costs, or where it broke down: the climb's figures stand either way.
    match top(cluster, live, rounds).await {
        Ok(t) => result.top = Some(t),
        Err(e) => result.top_stopped = Some(why_stopped(cluster, live, live, &e)),
    }
    Ok(result)
}

/// What the largest registry costs to page, watch, push, fail over and catch up.
async fn top(cluster: &mut Cluster, live: usize, rounds: usize) -> anyhow::Result<ScaleTop> {
    let leader = cluster.ready(Duration::from_secs(120)).await?;
    let at = cluster.members[leader].client;
    let mut client = connect(at).await?;

    let mut pages = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let page = client
            .nodes_matching(&pb::registry::NodesRequest {
                limit: 10,
                ..Default::default()
            })
            .await?;
        pages.push(ms(t));
        anyhow::ensure!(
            page.nodes.len() == 10 && page.total as usize >= live,
            "a page of 10 over {live} registrations came back with {} rows and total {}",
            page.nodes.len(),
            page.total
        );
    }
    pages.sort_by(f64::total_cmp);
    let page_ms = (pages[pages.len() / 2], pages[pages.len() - 1]);

    // A watch resumed 100 entries back hears every change since, up to the present.
    let now = client.beacon_status().await?.index;
    let from = now.saturating_sub(99).max(1);
    let mut watcher = connect(at).await?;
    let t = Instant::now();
    watcher.watch_from(&["bench".to_owned()], from).await?;
    let mut resumed_changes = 0;
    let mut heard = from.saturating_sub(1);
    while heard < now {
        let notice = within(watcher.next_notice()).await?;
        heard = notice.index;
        resumed_changes +=
            notice.add_nodes.len() + notice.update_nodes.len() + notice.del_nodes.len();
    }
    let resume_ms = ms(t);

    // One registration of a type of its own, heard by its watcher.
    let mut probe_watch = connect(at).await?;
    let t = Instant::now();
    probe_watch.watch(&["scale-probe".to_owned()]).await?;
    let first_listing_ms = ms(t);
    let t = Instant::now();
    client
        .register(&pb::registry::RegisterRequest {
            node_type: "scale-probe".into(),
            addr: "192.0.2.1:1".into(),
            ..Default::default()
        })
        .await?;
    loop {
        let notice = within(probe_watch.next_notice()).await?;
        if !notice.add_nodes.is_empty() {
            break;
        }
    }
    let push_ms = ms(t);
    println!(
        "  at {live}: a page of 10 in {:.2} ms (slowest {:.2} ms); a watch resumed 100 entries back heard {resumed_changes} changes in {resume_ms:.1} ms; a new watch's first listing in {first_listing_ms:.1} ms; a push in {push_ms:.1} ms",
        page_ms.0, page_ms.1
    );
    drop((client, watcher, probe_watch));

    let failover = failover::run(cluster, rounds.max(1), Fault::Kill).await?;
    println!(
        "  failover at {live}: median {:.1} ms, max {:.1} ms",
        failover.median_ms, failover.max_ms
    );

    // A follower wiped and restarted catches up from the others.
    let leader = cluster.ready(Duration::from_secs(120)).await?;
    let wiped = (leader + 1) % cluster.members.len();
    cluster.members[wiped].kill();
    let dir = data_dir(cluster, wiped);
    std::fs::remove_dir_all(&dir).with_context(|| format!("wipe {}", dir.display()))?;
    let commit = connect(cluster.members[leader].client)
        .await?
        .beacon_status()
        .await?
        .commit;
    let t = Instant::now();
    cluster.members[wiped].restart();
    let follower = cluster.members[wiped].client;
    loop {
        if let Some(s) = beacon_testkit::status_with(follower, &cluster.beacon_client).await
            && s.commit >= commit
            && s.index >= commit
        {
            break;
        }
        if t.elapsed() > CATCH_UP_LIMIT {
            return Err(anyhow!(
                "a wiped follower did not catch up to index {commit} within {CATCH_UP_LIMIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Caught up once what it applied is on its disk too (a status answers from memory).
    let on_disk = || file_size(&dir.join("log")) + file_size(&dir.join("snapshot"));
    while on_disk() == 0 && t.elapsed() < CATCH_UP_LIMIT {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let catch_up_ms = ms(t);
    let catch_up_bytes = on_disk();
    println!(
        "  a wiped follower caught up to index {commit} in {catch_up_ms:.0} ms, {:.1} MiB on disk",
        mib(catch_up_bytes)
    );
    Ok(ScaleTop {
        live,
        page_ms,
        resume_ms,
        resumed_changes,
        first_listing_ms,
        push_ms,
        failover,
        catch_up_ms,
        catch_up_bytes,
    })
}

/// Why registering `from..to` failed (or, `from == to`, the measures at the top): the error,
/// and each member that is no longer running or its memory.
fn why_stopped(cluster: &mut Cluster, from: usize, to: usize, e: &anyhow::Error) -> String {
    let members: Vec<String> = cluster
        .members
        .iter_mut()
        .enumerate()
        .map(|(i, m)| match m.pid() {
            Some(pid) if m.is_running() => format!(
                "beacon {i} running, {:.0} MiB",
                mib(proc::rss_bytes(pid).unwrap_or(0))
            ),
            _ => format!("beacon {i} not running (see its log)"),
        })
        .collect();
    let at = if from == to {
        format!("at {from} registrations")
    } else {
        format!("between {from} and {to} registrations")
    };
    format!(
        "stopped {at}: {e:#}; {}; logs in {} (kept with --keep)",
        members.join(", "),
        cluster.dir.path().display()
    )
}

/// Member `i`'s data directory (`{node}` in the bench's `data_dir`).
fn data_dir(cluster: &Cluster, i: usize) -> PathBuf {
    let a = cluster.members[i].client;
    cluster.dir.path().join(format!("{}_{}", a.ip(), a.port()))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// A notice within 30 s.
async fn within<T>(
    f: impl Future<Output = Result<T, beacon::client::ClientError>>,
) -> anyhow::Result<T> {
    Ok(tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .context("no notice within 30 s")??)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}
