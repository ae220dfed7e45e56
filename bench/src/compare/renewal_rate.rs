//! The scale part's rate half: how many lease renewals one leader core sustains, and from it
//! how many live registrations one leader holds at its clients' default renewal cadence.
//!
//! Registrations are spread over [`CONNECTIONS`] connections to the leader; each connection
//! renews its registrations round and round as fast as they are answered, with at most
//! [`WINDOW`] renewals outstanding, a batch per write, as a client library that multiplexes
//! many registrations sends them. beacon renews by node report (cmd 101); etcd by
//! `LeaseKeepAlive`, one stream per connection as its Go client sends them. The leader's CPU
//! over the window divides the renewals per second: renewals per core-second, which times
//! the cadence of each system's own client gives the registrations one leader core keeps
//! alive. Renewers start before the registrations are made, so no lease runs out while the
//! rest are being made.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use beacon::machines::registry::REPORTS_PER_LEASE;
use beacon::machines::registry::config::default_lease_ms;
use serde::Serialize;
use tokio::sync::Semaphore;

use super::liveness::{self, Batches, Item, Measured, Renewers, Shard};
use super::systems::{Cluster, Kind};

/// Connections that renew (and register).
const CONNECTIONS: usize = 32;
/// Renewals a connection has outstanding at most.
const WINDOW: usize = 512;
/// Renewals written together (one flush).
const BATCH: usize = 64;
/// How long every renewer goes round at full size before the window opens.
const WARM_UP: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    pub members: usize,
    pub registrations: usize,
    pub connections: usize,
    pub window_secs: f64,
    pub renewals_per_sec: f64,
    /// Renewals refused (beacon) or answered as lapsed (etcd) in the window.
    pub failed: u64,
    /// Share of one core the leader used over the window.
    pub leader_cpu: f64,
    /// Renewals per second of the leader's CPU.
    pub per_core_sec: f64,
    /// How often the system's own client renews a registration at its default lease.
    pub cadence_ms: u64,
    /// Registrations one leader core keeps alive at that cadence.
    pub live_per_core: f64,
    /// Registrations the leader counts as live at the end.
    pub alive: u64,
}

/// The default renewal cadence of `kind`'s own client: beacon's reports
/// [`REPORTS_PER_LEASE`] times per default lease; etcd's Go client sends a keep-alive every
/// third of the TTL (10 s here, beacon's default lease).
fn cadence_ms(kind: Kind) -> u64 {
    match kind {
        Kind::Beacon => {
            default_lease_ms(beacon::config::DEFAULT_TICK_MS) / u64::from(REPORTS_PER_LEASE)
        }
        _ => liveness::ETCD_TTL_SECS as u64 * 1000 / 3,
    }
}

pub async fn run(
    cluster: &Cluster,
    registrations: usize,
    window: Duration,
) -> anyhow::Result<Rate> {
    let (pid, at) = cluster.leader_process().await?;
    let renewers = Renewers::start(cluster.kind, at, CONNECTIONS, |shard, stop| {
        let window = Arc::new(Semaphore::new(WINDOW));
        let round = Round {
            shard,
            next: 0,
            window: window.clone(),
            stop,
        };
        (round, Some(window))
    })
    .await?;
    let t = Instant::now();
    liveness::register(cluster.kind, at, 0, registrations, &renewers.shards).await?;
    println!(
        "  {}: {registrations} registrations in {:.1} s, renewed as they were made",
        cluster.kind,
        t.elapsed().as_secs_f64()
    );
    tokio::time::sleep(WARM_UP).await;
    let Measured {
        renewals_per_sec,
        failed,
        cpu,
        secs,
    } = renewers.measure(pid, window).await?;
    drop(renewers);
    let alive = liveness::count_alive(cluster.kind, at).await?;
    let per_core_sec = renewals_per_sec / cpu.max(1e-6);
    let cadence_ms = cadence_ms(cluster.kind);
    let rate = Rate {
        members: cluster.members.len(),
        registrations,
        connections: CONNECTIONS,
        window_secs: secs,
        renewals_per_sec,
        failed,
        leader_cpu: cpu,
        per_core_sec,
        cadence_ms,
        live_per_core: per_core_sec * cadence_ms as f64 / 1000.0,
        alive,
    };
    println!(
        "  {}: {renewals_per_sec:.0} renewals/s ({} failed) at {:.0}% of a leader core: \
         {per_core_sec:.0} per core-second, {:.0} live registrations per core at one renewal \
         per {cadence_ms} ms; {alive} alive",
        cluster.kind,
        rate.failed,
        cpu * 100.0,
        rate.live_per_core
    );
    Ok(rate)
}

/// Goes round a shard's registrations, a batch at a time, with at most [`WINDOW`]
/// renewals outstanding.
struct Round {
    shard: Shard,
    /// Where the next batch starts.
    next: usize,
    /// A permit per renewal that may be sent; each answer gives one back.
    window: Arc<Semaphore>,
    stop: Arc<AtomicBool>,
}

impl Batches for Round {
    fn next(&mut self) -> impl Future<Output = Option<Vec<Item>>> + Send {
        self.next_batch()
    }
}

impl Round {
    /// The next [`BATCH`] registrations to renew, once the window has room for them; `None`
    /// once stopped.
    async fn next_batch(&mut self) -> Option<Vec<Item>> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let items = {
                let held = self.shard.lock().await;
                if self.next >= held.len() {
                    self.next = 0;
                }
                let end = (self.next + BATCH).min(held.len());
                let items = held[self.next..end].to_vec();
                self.next = end;
                items
            };
            if items.is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            self.window
                .acquire_many(items.len() as u32)
                .await
                .ok()?
                .forget();
            return Some(items);
        }
    }
}
