//! Config push: the time from a write to the last of N watching services seeing it. beacon's
//! config watch (every watch at the leader, as beacon serves them) beside etcd's watch and
//! ZooKeeper's one-shot watch (set again after each event, with the read that shows the
//! new value), the watchers spread over the members as their clients spread them.
//!
//! Each watcher has a connection of its own, as separate services would. A round writes the
//! round's number to the one document (key, znode) every watcher follows, and ends when each
//! watcher has seen it; the next starts after a short pause.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use beacon::client::{ConfigWatch, ConnectOptions, config_put};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use zookeeper_client as zk;

use super::alloc::percentile;
use super::systems::Kind;

/// beacon's document, etcd's key, ZooKeeper's znode.
const BEACON_KEY: &str = "cluster/bench-config";
const ETCD_KEY: &str = "bench-config";
const ZK_PATH: &str = "/bench-config";

/// How long one round may take before the watchers that have not seen it count as missed.
const ROUND_LIMIT: Duration = Duration::from_secs(10);
/// Between rounds.
const PAUSE: Duration = Duration::from_millis(20);

/// One size of one system.
#[derive(Debug, Clone, Serialize)]
pub struct WatchRun {
    pub watchers: usize,
    pub rounds: usize,
    /// From the write's start to the last watcher seeing it, per round.
    pub last_p50_ms: f64,
    pub last_p99_ms: f64,
    pub last_max_ms: f64,
    /// From the write's start to each watcher seeing it, over every watcher and round.
    pub each_p50_ms: f64,
    /// The write's own latency (its acknowledgement), median.
    pub write_p50_ms: f64,
    /// Times a watcher had not seen a round within [`ROUND_LIMIT`].
    pub missed: usize,
}

/// What a watcher tells the writer: it saw round `.0` at `.1`.
type Seen = (u64, Instant);

/// Runs `rounds` rounds with each of `sizes` watchers against `endpoints` (the leader first).
pub async fn run(
    kind: Kind,
    endpoints: &[SocketAddr],
    sizes: &[usize],
    rounds: usize,
) -> anyhow::Result<Vec<WatchRun>> {
    let mut writer = Writer::connect(kind, endpoints).await?;
    let mut out = Vec::new();
    let mut round = 0;
    for &n in sizes {
        // Every watcher is listening before the first write.
        let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
        let mut tasks = Vec::with_capacity(n);
        let mut listening = Vec::with_capacity(n);
        for i in 0..n {
            let at = endpoints[i % endpoints.len()];
            let all = endpoints.to_vec();
            let (ready, started) = oneshot::channel();
            listening.push(started);
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                watcher(kind, at, &all, ready, tx).await
            }));
        }
        drop(tx);
        let started = tokio::time::Instant::now() + Duration::from_secs(120);
        for (i, l) in listening.into_iter().enumerate() {
            match tokio::time::timeout_at(started, l).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    let why = match (&mut tasks[i]).await {
                        Ok(Err(e)) => e,
                        other => anyhow::anyhow!("{other:?}"),
                    };
                    return Err(why.context(format!("{kind}: watcher {i} did not start")));
                }
                Err(_) => anyhow::bail!("{kind}: {n} watchers did not start within 120 s"),
            }
        }
        let (mut last, mut each, mut writes, mut missed) = (vec![], vec![], vec![], 0);
        for _ in 0..rounds {
            round += 1;
            let start = Instant::now();
            writer.write(round).await?;
            writes.push(start.elapsed());
            let deadline = tokio::time::Instant::now() + ROUND_LIMIT;
            let mut seen = 0;
            let mut latest = start;
            while seen < n {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some((r, at))) if r == round => {
                        seen += 1;
                        each.push(at - start);
                        latest = latest.max(at);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            missed += n - seen;
            last.push(latest - start);
            tokio::time::sleep(PAUSE).await;
        }
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            if let Ok(Err(e)) = t.await {
                return Err(e.context(format!("{kind}: a watcher failed")));
            }
        }
        for v in [&mut last, &mut each, &mut writes] {
            v.sort_unstable();
        }
        out.push(WatchRun {
            watchers: n,
            rounds,
            last_p50_ms: percentile(&last, 0.5),
            last_p99_ms: percentile(&last, 0.99),
            last_max_ms: percentile(&last, 1.0),
            each_p50_ms: percentile(&each, 0.5),
            write_p50_ms: percentile(&writes, 0.5),
            missed,
        });
    }
    Ok(out)
}

/// The writer of the rounds.
enum Writer {
    Beacon(Box<beacon::client::Cluster>),
    Etcd(Box<etcd_client::Client>),
    ZooKeeper(Box<zk::Client>),
}

impl Writer {
    async fn connect(kind: Kind, endpoints: &[SocketAddr]) -> anyhow::Result<Writer> {
        let timeout = Duration::from_secs(10);
        let w = match kind {
            Kind::Beacon => Writer::Beacon(Box::new(beacon::client::Cluster::new(
                endpoints.iter().map(|a| a.to_string()).collect(),
                ConnectOptions::default(),
                timeout,
            ))),
            Kind::Etcd => Writer::Etcd(Box::new(
                etcd_client::Client::connect([format!("http://{}", endpoints[0])], None)
                    .await
                    .context("connect to etcd")?,
            )),
            Kind::ZooKeeper => {
                let client = super::clients::zk_connect(&endpoints[..1], timeout).await?;
                let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                match client.create(ZK_PATH, b"0", &opts).await {
                    Ok(_) | Err(zk::Error::NodeExists) => {}
                    Err(e) => return Err(e).context("create the watched znode"),
                }
                Writer::ZooKeeper(Box::new(client))
            }
        };
        Ok(w)
    }

    async fn write(&mut self, round: u64) -> anyhow::Result<()> {
        let value = round.to_string();
        match self {
            Writer::Beacon(c) => {
                c.config_write(
                    vec![],
                    vec![config_put(BEACON_KEY, value.into_bytes(), false)],
                )
                .await?;
            }
            Writer::Etcd(c) => {
                c.put(ETCD_KEY, value, None).await?;
            }
            Writer::ZooKeeper(c) => {
                c.set_data(ZK_PATH, value.as_bytes(), None).await?;
            }
        }
        Ok(())
    }
}

fn round_of(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// One watching service: connects at `at`, says `ready` once it listens, then tells `tx`
/// each round it sees, until aborted.
async fn watcher(
    kind: Kind,
    at: SocketAddr,
    all: &[SocketAddr],
    ready: oneshot::Sender<()>,
    tx: mpsc::UnboundedSender<Seen>,
) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(30);
    match kind {
        Kind::Beacon => {
            // A watch is served by the leader; the client finds it from any beacon.
            let beacons = all.iter().map(|a| a.to_string()).collect();
            let mut w = ConfigWatch::start(
                beacons,
                vec![BEACON_KEY.to_owned()],
                ConnectOptions::default(),
                timeout,
            )
            .await?;
            let _ = ready.send(());
            loop {
                let event = w.next().await?;
                let now = Instant::now();
                for d in &event.put {
                    if let Some(r) = round_of(&d.value) {
                        let _ = tx.send((r, now));
                    }
                }
            }
        }
        Kind::Etcd => {
            let opts = etcd_client::ConnectOptions::new().with_connect_timeout(timeout);
            let mut client = etcd_client::Client::connect([format!("http://{at}")], Some(opts))
                .await
                .context("connect to etcd")?;
            let mut stream = client.watch(ETCD_KEY, None).await?;
            // The first answer says the watch is created.
            stream.message().await?;
            let _ = ready.send(());
            while let Some(resp) = stream.message().await? {
                let now = Instant::now();
                for e in resp.events() {
                    if let Some(r) = e.kv().and_then(|kv| round_of(kv.value())) {
                        let _ = tx.send((r, now));
                    }
                }
            }
            anyhow::bail!("etcd ended the watch")
        }
        Kind::ZooKeeper => {
            let client = super::clients::zk_connect(&[at], timeout).await?;
            let (_, _, mut watch) = client.get_and_watch_data(ZK_PATH).await?;
            let _ = ready.send(());
            loop {
                watch.changed().await;
                // The event says that it changed; the read that sets the next watch says
                // to what, and that is when the service knows.
                let (data, _, next) = client.get_and_watch_data(ZK_PATH).await?;
                if let Some(r) = round_of(&data) {
                    let _ = tx.send((r, Instant::now()));
                }
                watch = next;
            }
        }
    }
}
