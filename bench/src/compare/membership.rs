//! Membership changes under writes: how long writes stop while a cluster grows from one
//! member to three, from three to five, and while a dead voter is replaced, beacon beside
//! etcd. Writers allocate without pause through every member, present and future; each step
//! reports the longest time between two acknowledged writes from its start to its end.
//!
//! beacon: the first beacon starts alone in quorum mode; the others start with `--join`
//! (a learner, promoted once it has kept up); the dead voter is removed and a new beacon
//! joins. etcd: the documented `member add` then start for 1 -> 3 and for the replacement,
//! and the learner path (`member add --learner`, start, `member promote` once caught up) for
//! 3 -> 5.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use tokio::sync::Mutex;

use super::clients::Allocator;
use super::systems::{Kind, Programs, Via};
use beacon_testkit::{Process, beacon_args_at, free_ports, wait_listening};

/// Writers, each with a short per-request limit (as the failover part's).
const WRITERS: usize = 4;
const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a step may take before the part gives up.
const STEP_LIMIT: Duration = Duration::from_secs(90);

/// One step's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub step: String,
    /// How it was done.
    pub how: String,
    /// The longest time without an acknowledged write, from the step's start to its end.
    pub gap_ms: f64,
    /// From the step's start until the new membership served.
    pub took_ms: f64,
}

/// Successful writes' times, shared by the writers.
struct Writes {
    acked: Mutex<Vec<Instant>>,
    stop: AtomicBool,
}

impl Writes {
    /// Step `step`, done `how`, that started at `started` and has just served: it ends at
    /// the first write acknowledged from now on.
    async fn step(&self, step: &str, how: &str, started: Instant) -> anyhow::Result<Step> {
        let done = written_after(self, Instant::now()).await?;
        Ok(Step {
            step: step.into(),
            how: how.into(),
            gap_ms: ms(self.gap(started, done).await),
            took_ms: ms(done - started),
        })
    }

    /// The longest time between acknowledged writes within `[from, to]` (the bounds count as
    /// writes: a gap that spans the step's start or end is counted from or to it).
    async fn gap(&self, from: Instant, to: Instant) -> Duration {
        let acked = self.acked.lock().await;
        let mut last = from;
        let mut gap = Duration::ZERO;
        for t in acked.iter().filter(|t| **t > from && **t <= to) {
            gap = gap.max(*t - last);
            last = *t;
        }
        gap.max(to.saturating_duration_since(last))
    }
}

/// Starts the writers of `kind` against every one of `endpoints` (running or not yet).
async fn write(kind: Kind, endpoints: &[SocketAddr]) -> anyhow::Result<Arc<Writes>> {
    let writes = Arc::new(Writes {
        acked: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    let next = Arc::new(AtomicUsize::new(0));
    for _ in 0..WRITERS {
        let mut client = Allocator::connect(
            kind,
            Via::Native,
            endpoints,
            &Default::default(),
            REQUEST_TIMEOUT,
            next.clone(),
        )
        .await?;
        let writes = writes.clone();
        tokio::spawn(async move {
            while !writes.stop.load(Ordering::Relaxed) {
                match client.allocate().await {
                    Ok(_) => writes.acked.lock().await.push(Instant::now()),
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        });
    }
    Ok(writes)
}

/// Waits (bounded) until a write after now is acknowledged.
async fn written_after(writes: &Writes, since: Instant) -> anyhow::Result<Instant> {
    let deadline = since + STEP_LIMIT;
    loop {
        if let Some(t) = writes.acked.lock().await.iter().rev().find(|t| **t > since) {
            return Ok(*t);
        }
        if Instant::now() > deadline {
            bail!("no write acknowledged within {STEP_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs the part for `kind`: the three steps, each measured.
pub async fn run(programs: &Programs, kind: Kind, keep: bool) -> anyhow::Result<Vec<Step>> {
    let dir = tempfile::tempdir().context("work directory")?;
    let result = match kind {
        Kind::Beacon => beacon(programs, dir.path()).await,
        Kind::Etcd => etcd(programs, dir.path()).await,
        Kind::ZooKeeper => bail!("ZooKeeper's dynamic reconfiguration is not measured"),
    };
    if keep {
        println!("  kept {}", dir.keep().display());
    }
    result
}

// ---- beacon ---------------------------------------------------------------------------------

const BEACON_CONFIG: &str =
    r#"{"mode": "quorum", "id_range": [1, 4000000], "members": {"promote_after_ms": 1000}}"#;

fn beacon_member(
    programs: &Programs,
    dir: &Path,
    me: SocketAddr,
    join: Option<SocketAddr>,
) -> Process {
    let keys = serde_json::from_str::<serde_json::Value>(BEACON_CONFIG)
        .expect("a JSON object")
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut args = beacon_args_at(dir, me, &[me], 100, "bench", keys);
    args.extend(["--admin".into(), "off".into()]);
    if let Some(via) = join {
        args.extend(["--join".into(), via.to_string()]);
    }
    let level = std::env::var("BEACON_BENCH_LOG").unwrap_or_else(|_| "warn".into());
    let mut env = super::systems::beacon_env();
    env.push(("RUST_LOG".into(), level));
    Process::start(
        &programs.beacon,
        args,
        env,
        dir.join(format!("beacon-{}.log", me.port())),
    )
}

/// Whether the leader, asked through `via`, has exactly `voters` as voters and no learner.
async fn beacon_voters(via: &[SocketAddr], voters: &[SocketAddr]) -> bool {
    let mut want: Vec<String> = voters.iter().map(|a| a.to_string()).collect();
    want.sort();
    let opts = beacon::net::ConnectOptions {
        timeout: Duration::from_millis(500),
        ..Default::default()
    };
    for at in via {
        let Ok(mut c) = beacon::net::Client::connect(&at.to_string(), &opts).await else {
            continue;
        };
        let Ok(status) = c.beacon_status().await else {
            continue;
        };
        if status.leader.as_deref() != Some(status.node.as_str()) {
            continue;
        }
        let mut have: Vec<String> = status
            .beacons
            .iter()
            .filter(|b| b.role == "voter" && !b.leaving)
            .map(|b| b.node.clone())
            .collect();
        have.sort();
        let learners = status
            .beacons
            .iter()
            .any(|b| b.role == "learner" && !b.leaving);
        return have == want && !learners;
    }
    false
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + STEP_LIMIT;
    while !done().await {
        if Instant::now() > deadline {
            bail!("{what}: not within {STEP_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn beacon(programs: &Programs, dir: &Path) -> anyhow::Result<Vec<Step>> {
    let addrs: Vec<SocketAddr> = free_ports(6)
        .into_iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
        .collect();
    let mut members = vec![beacon_member(programs, dir, addrs[0], None)];
    wait_listening(addrs[0]);
    until("the first beacon leads", async || {
        beacon_voters(&addrs[..1], &addrs[..1]).await
    })
    .await?;
    let writes = write(Kind::Beacon, &addrs).await?;
    written_after(&writes, Instant::now()).await?;
    let mut steps = Vec::new();
    for (name, grown) in [("1 -> 3", 3), ("3 -> 5", 5)] {
        let started = Instant::now();
        let from = members.len();
        for a in &addrs[from..grown] {
            members.push(beacon_member(programs, dir, *a, Some(addrs[0])));
        }
        until(name, async || {
            beacon_voters(&addrs[..grown], &addrs[..grown]).await
        })
        .await?;
        steps.push(
            writes
                .step(
                    name,
                    "`beacon --join` (a learner, promoted once it kept up)",
                    started,
                )
                .await?,
        );
    }
    // A follower dies; it is removed and a new machine joins.
    let dead = addrs[4];
    members[4].kill();
    let started = Instant::now();
    let opts = beacon::net::ConnectOptions {
        timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let req = beacon::pb::ChangeMembersRequest {
        action: beacon::pb::change_members_request::Action::Remove as i32,
        node: dead.to_string(),
        learner: false,
    };
    let seeds: Vec<String> = addrs[..4].iter().map(|a| a.to_string()).collect();
    beacon::cli::member::change(&opts, &seeds, &req)
        .await
        .context("remove the dead beacon")?;
    members.push(beacon_member(programs, dir, addrs[5], Some(addrs[0])));
    let after: Vec<SocketAddr> = [&addrs[..4], &addrs[5..6]].concat();
    until("replacement", async || beacon_voters(&after, &after).await).await?;
    steps.push(
        writes
            .step(
                "dead voter replaced",
                "`member remove`, then `beacon --join`",
                started,
            )
            .await?,
    );
    writes.stop.store(true, Ordering::Relaxed);
    drop(members);
    Ok(steps)
}

// ---- etcd ------------------------------------------------------------------------------------

/// An etcd member `e{i}` joining (or starting) the cluster `initial` (name=peer URL pairs).
fn etcd_member(
    programs: &Programs,
    dir: &Path,
    i: usize,
    client: SocketAddr,
    peer: SocketAddr,
    initial: &[String],
    state: &str,
) -> Process {
    let args = vec![
        format!("--name=e{i}"),
        format!("--data-dir={}", dir.join(format!("e{i}")).display()),
        format!("--listen-client-urls=http://{client}"),
        format!("--advertise-client-urls=http://{client}"),
        format!("--listen-peer-urls=http://{peer}"),
        format!("--initial-advertise-peer-urls=http://{peer}"),
        format!("--initial-cluster={}", initial.join(",")),
        format!("--initial-cluster-state={state}"),
        "--initial-cluster-token=bench".into(),
        "--log-level=warn".into(),
    ];
    Process::start(
        &programs.etcd,
        args,
        Vec::new(),
        dir.join(format!("etcd-{i}.log")),
    )
}

async fn etcd_admin(endpoints: &[SocketAddr]) -> anyhow::Result<etcd_client::Client> {
    let urls: Vec<String> = endpoints.iter().map(|a| format!("http://{a}")).collect();
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    etcd_client::Client::connect(urls, Some(opts))
        .await
        .context("connect to etcd")
}

/// Retries an etcd admin call until it succeeds (bounded).
async fn retried<T>(
    what: &str,
    mut call: impl AsyncFnMut() -> Result<T, etcd_client::Error>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + STEP_LIMIT;
    loop {
        match call().await {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() > deadline => bail!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Whether etcd, asked through `via`, has exactly `n` started voters.
async fn etcd_voters(admin: &mut etcd_client::Client, n: usize) -> bool {
    match admin.member_list().await {
        Ok(list) => {
            let voters = list
                .members()
                .iter()
                .filter(|m| !m.is_learner() && !m.name().is_empty())
                .count();
            voters == n && list.members().len() == n
        }
        Err(_) => false,
    }
}

async fn etcd(programs: &Programs, dir: &Path) -> anyhow::Result<Vec<Step>> {
    let ports = free_ports(12);
    let at = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let clients: Vec<SocketAddr> = ports[..6].iter().map(|p| at(*p)).collect();
    let peers: Vec<SocketAddr> = ports[6..].iter().map(|p| at(*p)).collect();
    let named = |i: usize| format!("e{i}=http://{}", peers[i]);
    let mut initial = vec![named(0)];
    let mut members = vec![etcd_member(
        programs, dir, 0, clients[0], peers[0], &initial, "new",
    )];
    let mut admin = etcd_admin(&clients[..1]).await?;
    retried("the first member", async || admin.status().await).await?;
    let writes = write(Kind::Etcd, &clients).await?;
    written_after(&writes, Instant::now()).await?;
    let mut steps = Vec::new();

    // 1 -> 3: `member add`, then start the member, as etcd's documentation says.
    let started = Instant::now();
    for i in 1..3 {
        let url = format!("http://{}", peers[i]);
        retried("member add", async || {
            admin.member_add([url.clone()], None).await
        })
        .await?;
        initial.push(named(i));
        members.push(etcd_member(
            programs, dir, i, clients[i], peers[i], &initial, "existing",
        ));
        until("the member started", async || {
            etcd_voters(&mut admin, i + 1).await
        })
        .await?;
    }
    steps.push(
        writes
            .step("1 -> 3", "`member add`, then start", started)
            .await?,
    );

    // 3 -> 5: the learner path: add as a learner, start, promote once caught up.
    let started = Instant::now();
    for i in 3..5 {
        let url = format!("http://{}", peers[i]);
        let opts = etcd_client::MemberAddOptions::new().with_is_learner();
        let added = retried("member add --learner", async || {
            admin.member_add([url.clone()], Some(opts.clone())).await
        })
        .await?;
        let id = added.member().map(|m| m.id()).context("the added member")?;
        initial.push(named(i));
        members.push(etcd_member(
            programs, dir, i, clients[i], peers[i], &initial, "existing",
        ));
        // Refused until the learner has caught up.
        retried("member promote", async || admin.member_promote(id).await).await?;
        until("the member promoted", async || {
            etcd_voters(&mut admin, i + 1).await
        })
        .await?;
    }
    steps.push(
        writes
            .step(
                "3 -> 5",
                "`member add --learner`, start, `member promote`",
                started,
            )
            .await?,
    );

    // A follower dies; it is removed and a new member added, then started.
    members[4].kill();
    let started = Instant::now();
    let list = retried("member list", async || admin.member_list().await).await?;
    let dead = list
        .members()
        .iter()
        .find(|m| m.name() == "e4")
        .map(|m| m.id())
        .context("e4 listed")?;
    retried("member remove", async || admin.member_remove(dead).await).await?;
    let url = format!("http://{}", peers[5]);
    retried("member add", async || {
        admin.member_add([url.clone()], None).await
    })
    .await?;
    initial.retain(|m| !m.starts_with("e4="));
    initial.push(named(5));
    members.push(etcd_member(
        programs, dir, 5, clients[5], peers[5], &initial, "existing",
    ));
    until("the replacement started", async || {
        etcd_voters(&mut admin, 5).await
    })
    .await?;
    steps.push(
        writes
            .step(
                "dead voter replaced",
                "`member remove`, `member add`, then start",
                started,
            )
            .await?,
    );
    writes.stop.store(true, Ordering::Relaxed);
    drop(members);
    Ok(steps)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
