//! Reads while the leader takes writes: the latency and throughput of linearizable and
//! serializable reads at the leader and at a follower, for beacon, etcd
//! (`--consistency=l` and `s`) and ZooKeeper (`sync` then a read, or the read alone), with
//! writers allocating on the leader all the while.
//!
//! beacon's read is `show sequences` (one small answer, so the figure is the read path's
//! cost, not a large reply's); etcd's is a `get` of one key; ZooKeeper's the data of one
//! znode.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use beacon::client::ConnectOptions;
use beacon::wire::Consistency;
use serde::Serialize;
use zookeeper_client as zk;

use super::alloc::{self, Caller, Calls, TURN, percentile};
use super::scrape::{Histogram, Metrics};
use super::systems::Via;
use super::systems::{Cluster, Kind};

/// One kind of read at one beacon (or etcd member), measured under write load.
#[derive(Debug, Clone, Serialize)]
pub struct ReadRun {
    /// `leader` or `follower`.
    pub at: &'static str,
    /// `linearizable` or `serializable`.
    pub consistency: &'static str,
    pub readers: usize,
    pub ok: usize,
    pub errors: usize,
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The mean, as the readers timed it: comparable with the means of `inside`.
    pub mean_ms: f64,
    /// The writes the leader acknowledged per second meanwhile.
    pub writes_per_sec: f64,
    pub first_error: Option<String>,
    /// Where the time went, from the beacons' own metrics over the kind's turns (beacon only).
    pub inside: Option<Inside>,
}

/// Where a beacon read's time went, from the `/metrics` of the beacon read from and of the
/// leader, scraped before and after each turn and added up: means are exact (sum over
/// count), p99s interpolated within buckets that double (100 µs, 200 µs, 400 µs, ...).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Inside {
    /// A linearizable read's wait for its read index (`beacon_read_index_duration_seconds`:
    /// a confirmation round at the leader, the request to the leader at a follower).
    pub read_index_mean_ms: Option<f64>,
    pub read_index_p99_ms: Option<f64>,
    /// The leader's requests' wait in the queue to its core (`beacon_request_queue_seconds`).
    pub leader_queue_mean_ms: Option<f64>,
    /// The fsyncs of the leader and of the follower read from (`beacon_disk_wal_fsync_duration_seconds`).
    pub leader_fsync_mean_ms: Option<f64>,
    pub leader_fsync_p99_ms: Option<f64>,
    pub follower_fsync_mean_ms: Option<f64>,
    pub follower_fsync_p99_ms: Option<f64>,
}

/// The histograms [`Inside`] reads, of one beacon at one moment.
#[derive(Debug, Clone, Default)]
struct Counted {
    read_index: Histogram,
    queue: Histogram,
    fsync: Histogram,
}

impl Counted {
    /// `vias`: how the reads served there get their index (`round` or `vouch` at the
    /// leader, added up).
    async fn scrape(admin: Option<SocketAddr>, vias: &[&str]) -> Option<Counted> {
        let m = Metrics::scrape(admin).await?;
        let read_index = vias
            .iter()
            .map(|via| {
                let via = format!("via=\"{via}\"");
                m.histogram("beacon_read_index_duration_seconds", &[via.as_str()])
            })
            .reduce(|a, b| a.plus(&b))
            .unwrap_or_default();
        Some(Counted {
            read_index,
            queue: m.histogram("beacon_request_queue_seconds", &[]),
            fsync: m.histogram("beacon_disk_wal_fsync_duration_seconds", &[]),
        })
    }

    fn since(&self, before: &Counted) -> Counted {
        Counted {
            read_index: self.read_index.since(&before.read_index),
            queue: self.queue.since(&before.queue),
            fsync: self.fsync.since(&before.fsync),
        }
    }

    fn plus(&self, other: &Counted) -> Counted {
        Counted {
            read_index: self.read_index.plus(&other.read_index),
            queue: self.queue.plus(&other.queue),
            fsync: self.fsync.plus(&other.fsync),
        }
    }
}

/// What the leader and, when a follower was read from, the follower counted over a kind's
/// turns (each the sum of its scrapes' differences, after each turn against before it): the
/// read index is counted where the reads were served.
fn inside(leader: &Counted, follower: Option<&Counted>) -> Inside {
    let at = follower.unwrap_or(leader);
    Inside {
        read_index_mean_ms: at.read_index.mean_ms(),
        read_index_p99_ms: at.read_index.quantile_ms(0.99),
        leader_queue_mean_ms: leader.queue.mean_ms(),
        leader_fsync_mean_ms: leader.fsync.mean_ms(),
        leader_fsync_p99_ms: leader.fsync.quantile_ms(0.99),
        follower_fsync_mean_ms: follower.and_then(|f| f.fsync.mean_ms()),
        follower_fsync_p99_ms: follower.and_then(|f| f.fsync.quantile_ms(0.99)),
    }
}

/// The leader's counts now and, when `member` is a follower, its counts too (`None`: a
/// system without beacon's metrics, or no answer).
async fn scrape_counts(
    cluster: &Cluster,
    leader: usize,
    member: usize,
) -> Option<(Counted, Option<Counted>)> {
    let at_leader = Counted::scrape(cluster.members[leader].admin, &["round", "vouch"]).await?;
    let at_follower = if member == leader {
        None
    } else {
        Some(Counted::scrape(cluster.members[member].admin, &["leader"]).await?)
    };
    Some((at_leader, at_follower))
}

/// A connected reader of one system.
enum Reader {
    Beacon(Box<beacon::client::Client>),
    Etcd {
        client: Box<etcd_client::Client>,
        serializable: bool,
    },
    ZooKeeper {
        client: Box<zk::Client>,
        serializable: bool,
    },
}

/// The key etcd's readers get.
const ETCD_READ_KEY: &str = "bench-read";

impl Reader {
    async fn connect(
        kind: Kind,
        at: SocketAddr,
        consistency: Consistency,
        beacon: &ConnectOptions,
        timeout: Duration,
    ) -> anyhow::Result<Reader> {
        Ok(match kind {
            Kind::Beacon => {
                let opts = ConnectOptions {
                    consistency,
                    timeout,
                    ..beacon.clone()
                };
                Reader::Beacon(Box::new(
                    beacon::client::Client::connect(&at.to_string(), &opts)
                        .await
                        .with_context(|| format!("connect to beacon {at}"))?,
                ))
            }
            Kind::Etcd => {
                let opts = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(timeout)
                    .with_timeout(timeout);
                Reader::Etcd {
                    client: Box::new(
                        etcd_client::Client::connect([format!("http://{at}")], Some(opts))
                            .await
                            .context("connect to etcd")?,
                    ),
                    serializable: consistency == Consistency::Serializable,
                }
            }
            Kind::ZooKeeper => Reader::ZooKeeper {
                client: Box::new(super::clients::zk_connect(&[at], timeout).await?),
                serializable: consistency == Consistency::Serializable,
            },
        })
    }

    async fn read(&mut self) -> anyhow::Result<()> {
        match self {
            Reader::Beacon(client) => {
                client.sequences("").await?;
            }
            Reader::Etcd {
                client,
                serializable,
            } => {
                let opts = serializable.then(|| etcd_client::GetOptions::new().with_serializable());
                client.get(ETCD_READ_KEY, opts).await?;
            }
            Reader::ZooKeeper {
                client,
                serializable,
            } => {
                // ZooKeeper's reads are local to the server asked; `sync` first makes it
                // catch up with the leader, as a linearizable read needs.
                if !*serializable {
                    client.sync(super::clients::ZK_PARENT).await?;
                }
                client.get_data(super::clients::ZK_PARENT).await?;
            }
        }
        Ok(())
    }
}

/// Clients allocating on the leader while the reads are measured: enough for beacon's
/// leader to take 10,000 writes a second and more beside the linearizable readers (16 gave
/// 9,300 to 10,500 on two cores).
pub const WRITERS: usize = 24;

/// Readers at each place and consistency.
pub const READERS: usize = 8;

/// Measures reads at the leader and at a follower, linearizable and serializable, each
/// while `writers` allocate on the leader: the four kinds of read take turns of
/// [`TURN`] (the kind that goes first changing every round), with the writers writing
/// through each, until each kind has had `duration`. Each turn's figures go to its kind:
/// the reads, the writes made meanwhile and, for beacon, what its metrics counted.
pub async fn run(
    cluster: &Cluster,
    readers: usize,
    writers: usize,
    duration: Duration,
) -> anyhow::Result<Vec<ReadRun>> {
    let kind = cluster.kind;
    let leader = cluster.ready(Duration::from_secs(120)).await?;
    let follower = (leader + 1) % cluster.members.len();
    let write_at = cluster.endpoints(&[leader]);
    super::clients::prepare(kind, &write_at).await?;
    let next = Arc::new(AtomicUsize::new(80_000_000));
    let timeout = Duration::from_secs(5);
    let mut kinds = Vec::new();
    for (at, member) in [("leader", leader), ("follower", follower)] {
        for consistency in [Consistency::Linearizable, Consistency::Serializable] {
            let read_at = cluster.endpoints(&[member])[0];
            let mut pool = Vec::new();
            for _ in 0..readers {
                pool.push(
                    Reader::connect(kind, read_at, consistency, &cluster.beacon_client, timeout)
                        .await?,
                );
            }
            kinds.push(ReadKind {
                at,
                member,
                consistency,
                pool,
                reads: Calls::default(),
                writes: Calls::default(),
                counted: None,
                uncounted: false,
            });
        }
    }
    let mut writing = alloc::connect(
        kind,
        Via::Native,
        &write_at,
        &cluster.beacon_client,
        writers,
        &next,
    )
    .await?;
    let rounds = alloc::rounds_of_turns(duration);
    for round in 0..rounds {
        for k in 0..kinds.len() {
            let n = kinds.len();
            let this = &mut kinds[(k + round) % n];
            let before = scrape_counts(cluster, leader, this.member).await;
            let pool = std::mem::take(&mut this.pool);
            let (readers_back, writers_back) = tokio::join!(
                alloc::spell(pool, TURN, &mut this.reads),
                alloc::spell(writing, TURN, &mut this.writes),
            );
            this.pool = readers_back?;
            writing = writers_back?;
            // Counted across every turn, or not at all where a scrape went unanswered.
            let after = scrape_counts(cluster, leader, this.member).await;
            match (before, after) {
                (Some((lb, fb)), Some((la, fa))) => {
                    let (l, f) = (la.since(&lb), fa.zip(fb).map(|(a, b)| a.since(&b)));
                    this.counted = Some(match this.counted.take() {
                        None => (l, f),
                        Some((sl, sf)) => (sl.plus(&l), sf.zip(f).map(|(a, b)| a.plus(&b))),
                    });
                }
                _ => this.uncounted = true,
            }
        }
    }
    Ok(kinds.into_iter().map(|k| k.run(readers)).collect())
}

/// One kind of read (at the leader or a follower, linearizable or serializable): its
/// readers and what its turns came to.
struct ReadKind {
    at: &'static str,
    member: usize,
    consistency: Consistency,
    pool: Vec<Reader>,
    reads: Calls,
    writes: Calls,
    /// The leader's counts and the follower's (when a follower is read from) over the
    /// turns so far.
    counted: Option<(Counted, Option<Counted>)>,
    /// A scrape went unanswered (or the system has no such metrics): nothing is counted.
    uncounted: bool,
}

impl ReadKind {
    fn run(self, readers: usize) -> ReadRun {
        let ReadKind {
            at,
            consistency,
            reads,
            writes,
            counted,
            uncounted,
            ..
        } = self;
        let per_sec = reads.per_sec();
        let mut took = reads.latencies;
        let mean_ms = if took.is_empty() {
            0.0
        } else {
            took.iter().map(|t| t.as_secs_f64()).sum::<f64>() / took.len() as f64 * 1000.0
        };
        took.sort_unstable();
        ReadRun {
            at,
            consistency: match consistency {
                Consistency::Linearizable => "linearizable",
                Consistency::Serializable => "serializable",
            },
            readers,
            ok: took.len(),
            errors: reads.errors.len(),
            per_sec,
            p50_ms: percentile(&took, 0.50),
            p99_ms: percentile(&took, 0.99),
            mean_ms,
            writes_per_sec: writes.per_sec(),
            first_error: reads.errors.into_iter().next(),
            inside: counted
                .filter(|_| !uncounted)
                .map(|(leader, follower)| inside(&leader, follower.as_ref())),
        }
    }
}

impl Caller for Reader {
    /// A read; one refused waits 10 ms before the next.
    async fn call(&mut self) -> anyhow::Result<u64> {
        alloc::after_error(self.read().await, Duration::from_millis(10)).await
    }
}
