//! Liveness capacity: live registrations renewed once a second each, in growing steps,
//! while the leader's CPU share and resident memory are read from /proc.
//!
//! beacon: a registration per service, renewed by a node report (cmd 101). etcd: a lease
//! (TTL 10 s, beacon's default lease) per service with a key attached, renewed by a
//! keep-alive. Both spread their renewals evenly over each second, from 64 connections to
//! the leader; etcd's keep-alives go on one stream per connection, as etcd's Go client
//! sends them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use beacon::client::{Client, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::wire::{Code as _, Frame};
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::sync::{Mutex, Semaphore};

use super::clients::service_addr;
use super::etcd_lease::{self, Counters};
use super::proc;
use super::systems::{Cluster, Kind};

/// Connections that register and renew.
const CONNECTIONS: usize = 64;
/// Renewal period of every registration.
const PERIOD: Duration = Duration::from_secs(1);
/// Lease of etcd registrations (beacon's default `lease_ms`).
pub(super) const ETCD_TTL_SECS: i64 = 10;

#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub live: usize,
    /// Share of one core the leader used over the window.
    pub cpu: f64,
    pub renewals_per_sec: f64,
    pub renewal_errors: u64,
    pub rss_bytes: u64,
    pub bytes_per_registration: f64,
    /// Registrations the leader counts as live at the end of the window.
    pub alive: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Liveness {
    pub baseline_rss: u64,
    pub steps: Vec<Step>,
}

impl Liveness {
    /// The largest step that kept every registration alive, at the full renewal rate, under
    /// `cpu` of one core.
    pub fn capacity(&self, cpu: f64) -> Option<&Step> {
        self.steps
            .iter()
            .filter(|s| s.passed(cpu))
            .max_by_key(|s| s.live)
    }
}

impl Step {
    pub fn passed(&self, cpu: f64) -> bool {
        self.cpu < cpu
            && self.alive as usize >= self.live
            && self.renewals_per_sec >= 0.95 * self.live as f64
    }
}

/// One registration, as its renewer needs it.
#[derive(Debug, Clone)]
pub(super) enum Item {
    Beacon {
        node_id: u32,
        addr: String,
        /// The registration's fencing token (term, index), which every report names.
        token: (u64, u64),
    },
    Etcd {
        lease: i64,
    },
}

/// The registrations one connection registered (and renews).
pub(super) type Shard = Arc<Mutex<Vec<Item>>>;

pub async fn run(
    cluster: &Cluster,
    steps: &[usize],
    window: Duration,
    cpu_limit: f64,
) -> anyhow::Result<Liveness> {
    let (pid, at) = cluster.leader_process().await?;
    let baseline_rss = proc::rss_bytes(pid).context("leader RSS")?;
    let renewers = Renewers::start(cluster.kind, at, CONNECTIONS, |shard, stop| {
        (Pacer::new(shard, stop), None)
    })
    .await?;

    let mut result = Liveness {
        baseline_rss,
        steps: Vec::new(),
    };
    let mut live = 0;
    for &target in steps {
        let t = Instant::now();
        register(cluster.kind, at, live, target, &renewers.shards).await?;
        println!(
            "  {}: {} registrations in {:.1} s",
            cluster.kind,
            target - live,
            t.elapsed().as_secs_f64()
        );
        live = target;
        // Let every renewer go round at the new size before measuring.
        tokio::time::sleep(PERIOD * 3).await;
        let Measured {
            renewals_per_sec: renewals,
            failed: renewal_errors,
            cpu,
            ..
        } = renewers.measure(pid, window).await?;
        let rss = proc::rss_bytes(pid).context("leader RSS")?;
        let alive = count_alive(cluster.kind, at).await?;
        let step = Step {
            live,
            cpu,
            renewals_per_sec: renewals,
            renewal_errors,
            rss_bytes: rss,
            bytes_per_registration: rss.saturating_sub(baseline_rss) as f64 / live as f64,
            alive,
        };
        println!(
            "  {}: {live} live: leader CPU {:.1}% of a core, {renewals:.0} renewals/s ({} failed), \
             RSS {:.1} MiB ({:.0} B per registration), {alive} alive",
            cluster.kind,
            cpu * 100.0,
            step.renewal_errors,
            rss as f64 / 1048576.0,
            step.bytes_per_registration
        );
        let over = !step.passed(cpu_limit);
        result.steps.push(step);
        if over {
            break;
        }
    }
    Ok(result)
}

/// What renewers did over a measuring window, and the leader's CPU meanwhile.
pub(super) struct Measured {
    pub renewals_per_sec: f64,
    pub failed: u64,
    /// Share of one core the leader used.
    pub cpu: f64,
    pub secs: f64,
}

/// One renewer per connection, each renewing the registrations of its shard, their answers
/// counted together; stopped when dropped.
pub(super) struct Renewers {
    /// The registrations each connection made, and renews.
    pub(super) shards: Vec<Shard>,
    counters: Counters,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Renewers {
    /// `connections` renewers against `at`, each taking its batches from what `batches`
    /// makes of its shard and the stop flag, with the window (if any) its answers give
    /// permits back to.
    pub(super) async fn start<B: Batches>(
        kind: Kind,
        at: SocketAddr,
        connections: usize,
        batches: impl Fn(Shard, Arc<AtomicBool>) -> (B, Option<Arc<Semaphore>>),
    ) -> anyhow::Result<Renewers> {
        let mut renewers = Renewers {
            shards: (0..connections).map(|_| Shard::default()).collect(),
            counters: Counters {
                renewed: Arc::default(),
                failed: Arc::default(),
                answered: None,
            },
            stop: Arc::default(),
            tasks: Vec::new(),
        };
        for shard in renewers.shards.clone() {
            let (source, window) = batches(shard, renewers.stop.clone());
            let counters = Counters {
                answered: window,
                ..renewers.counters.clone()
            };
            renewers
                .tasks
                .push(spawn_renewer(kind, at, source, counters).await?);
        }
        Ok(renewers)
    }

    /// Counts the answers over `window`, and the CPU of the leader (`pid`) meanwhile.
    pub(super) async fn measure(&self, pid: u32, window: Duration) -> anyhow::Result<Measured> {
        let Counters {
            renewed, failed, ..
        } = &self.counters;
        let (r0, f0) = (
            renewed.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
        );
        let cpu0 = proc::cpu_seconds(pid).context("leader CPU")?;
        let since = Instant::now();
        tokio::time::sleep(window).await;
        let cpu = proc::core_share(pid, since, cpu0).context("leader CPU")?;
        let secs = since.elapsed().as_secs_f64();
        Ok(Measured {
            renewals_per_sec: (renewed.load(Ordering::Relaxed) - r0) as f64 / secs,
            failed: failed.load(Ordering::Relaxed) - f0,
            cpu,
            secs,
        })
    }
}

impl Drop for Renewers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Registers `from..to` over all shards' connections, appending each to its shard.
pub(super) async fn register(
    kind: Kind,
    at: SocketAddr,
    from: usize,
    to: usize,
    shards: &[Shard],
) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for (c, shard) in shards.iter().enumerate() {
        let shard = shard.clone();
        let mine: Vec<usize> = (from..to).filter(|i| i % shards.len() == c).collect();
        tasks.push(tokio::spawn(async move {
            match kind {
                Kind::Beacon => {
                    let mut client = beacon_client(at).await?;
                    for i in mine {
                        let addr = service_addr(i).to_string();
                        let req = pb::registry::RegisterRequest {
                            node_type: "bench".into(),
                            addr: addr.clone(),
                            ..Default::default()
                        };
                        // As every client does: a beacon over its limits answers BUSY with
                        // how long to wait (a thousand connections registering at once are
                        // a herd), and the registration is made again after that.
                        let reply: pb::registry::RegisterReply = loop {
                            match client
                                .request(RegistryCmd::Register, &req, "the registration")
                                .await
                            {
                                Err(e) if e.busy_for().is_some() => {
                                    tokio::time::sleep(e.busy_for().unwrap_or_default()).await;
                                }
                                answer => break answer?,
                            }
                        };
                        let node = reply.node.context("reply without node")?;
                        shard.lock().await.push(Item::Beacon {
                            node_id: node.node_id,
                            addr,
                            token: (node.term, node.index),
                        });
                    }
                }
                Kind::Etcd => {
                    let mut client = etcd(at).await?;
                    for i in mine {
                        let lease = client.lease_grant(ETCD_TTL_SECS, None).await?.id();
                        let opts = etcd_client::PutOptions::new().with_lease(lease);
                        client.put(format!("svc/{i}"), "", Some(opts)).await?;
                        shard.lock().await.push(Item::Etcd { lease });
                    }
                }
                Kind::ZooKeeper => bail!("the liveness benchmark compares beacon and etcd"),
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await.context("registering task panicked")??;
    }
    Ok(())
}

pub(super) async fn beacon_client(at: SocketAddr) -> anyhow::Result<Client> {
    let opts = ConnectOptions {
        timeout: Duration::from_secs(10),
        ..ConnectOptions::default()
    };
    Client::connect(&at.to_string(), &opts)
        .await
        .with_context(|| format!("connect to beacon {at}"))
}

async fn etcd(at: SocketAddr) -> anyhow::Result<etcd_client::Client> {
    etcd_client::Client::connect([format!("http://{at}")], None)
        .await
        .with_context(|| format!("connect to etcd at {at}"))
}

/// How often a renewer sends what has come due: every registration is renewed once a
/// period, spread evenly, and what falls due within one batch interval goes out together
/// (one write), as a client library that multiplexes many registrations would send it.
const BATCH_INTERVAL: Duration = Duration::from_millis(10);

/// Hands out the registrations of a shard as they come due: each once per period, spread
/// evenly, a batch per [`BATCH_INTERVAL`].
struct Pacer {
    shard: Shard,
    stop: Arc<AtomicBool>,
    batches: tokio::time::Interval,
    /// Start of the current period, its number of registrations, and how many went out.
    start: Instant,
    len: usize,
    sent: usize,
}

impl Pacer {
    fn new(shard: Shard, stop: Arc<AtomicBool>) -> Pacer {
        let mut batches = tokio::time::interval(BATCH_INTERVAL);
        batches.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Pacer {
            shard,
            stop,
            batches,
            start: Instant::now(),
            len: 0,
            sent: 0,
        }
    }

    /// The next batch, or `None` once stopped.
    async fn next_due(&mut self) -> Option<Vec<Item>> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            if self.sent >= self.len {
                tokio::time::sleep_until((self.start + PERIOD).into()).await;
                self.start = Instant::now();
                self.len = self.shard.lock().await.len();
                self.sent = 0;
                continue;
            }
            self.batches.tick().await;
            let share = self.start.elapsed().as_secs_f64() / PERIOD.as_secs_f64();
            let due = ((self.len as f64 * share).ceil() as usize).min(self.len);
            if due > self.sent {
                let items = self.shard.lock().await[self.sent..due].to_vec();
                self.sent = due;
                return Some(items);
            }
        }
    }
}

impl Batches for Pacer {
    fn next(&mut self) -> impl Future<Output = Option<Vec<Item>>> + Send {
        self.next_due()
    }
}

/// Where a renewer takes the registrations it renews next, a batch (one write) at a time;
/// `None` ends it.
pub(super) trait Batches: Send + 'static {
    fn next(&mut self) -> impl Future<Output = Option<Vec<Item>>> + Send;
}

/// A task that renews what `batches` hands out, sending without waiting for answers;
/// answers are counted as they come.
async fn spawn_renewer(
    kind: Kind,
    at: SocketAddr,
    mut batches: impl Batches,
    counters: Counters,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    match kind {
        Kind::Beacon => {
            let (mut sink, mut replies) = beacon_client(at).await?.into_framed().split();
            tokio::spawn(async move {
                while let Some(Ok(frame)) = replies.next().await {
                    counters.count(!frame.is_error());
                }
            });
            Ok(tokio::spawn(async move {
                let mut seq = 1u32;
                while let Some(items) = batches.next().await {
                    for item in items {
                        let Item::Beacon {
                            node_id,
                            addr,
                            token: (term, index),
                        } = item
                        else {
                            unreachable!("beacon items");
                        };
                        let req = pb::registry::NodeReport {
                            node_id,
                            addr,
                            term,
                            index,
                            ..Default::default()
                        };
                        seq = seq.wrapping_add(1);
                        let frame = Frame::new(RegistryCmd::NodeReport.code(), seq, 0, &req);
                        if sink.feed(frame).await.is_err() {
                            return;
                        }
                    }
                    if sink.flush().await.is_err() {
                        return;
                    }
                }
            }))
        }
        Kind::Etcd => {
            let requests = etcd_lease::open(at, counters).await?;
            Ok(tokio::spawn(async move {
                while let Some(items) = batches.next().await {
                    for item in items {
                        let Item::Etcd { lease } = item else {
                            unreachable!("etcd items");
                        };
                        let req = etcd_lease::KeepAliveRequest { id: lease };
                        if requests.send(req).await.is_err() {
                            return;
                        }
                    }
                }
            }))
        }
        Kind::ZooKeeper => bail!("renewals compare beacon and etcd"),
    }
}

/// Registrations the leader holds as live.
pub(super) async fn count_alive(kind: Kind, at: SocketAddr) -> anyhow::Result<u64> {
    match kind {
        Kind::Beacon => {
            let mut c = beacon_client(at).await?;
            Ok(u64::from(c.ids().await?.in_use))
        }
        Kind::Etcd => {
            let mut c = etcd(at).await?;
            let opts = etcd_client::GetOptions::new()
                .with_prefix()
                .with_count_only();
            Ok(c.get("svc/", Some(opts)).await?.count() as u64)
        }
        Kind::ZooKeeper => bail!("the liveness benchmark compares beacon and etcd"),
    }
}
