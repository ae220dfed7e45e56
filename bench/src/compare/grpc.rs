//! beacon through its gRPC API beside its native protocol, on the same cluster: allocation
//! and lease renewals at each client count, and failover with writers on each API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::{Context, anyhow};
use beacon::client::ConnectOptions;
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use serde::Serialize;

use super::Options;
use super::alloc::{self, Caller, Calls, TURN, Throughput, percentile};
use super::clients::{GrpcEndpoints, service_addr};
use super::failover::{self, Failover, Fault};
use super::h2_client::{Connection, Stream};
use super::systems::{Cluster, Kind, Via};

/// What one API measured.
#[derive(Debug, Clone, Serialize)]
pub struct GrpcRun {
    pub via: Via,
    pub alloc: Vec<Throughput>,
    /// The leader's CPU time per allocation, in microseconds, at each client count: what
    /// the API costs the beacon, apart from the clients (which share the machine).
    pub leader_us_per_id: Vec<f64>,
    /// The clients' CPU time per allocation (this process, where all of them run): they
    /// share the two cores with the beacons, so what a client library costs moves the
    /// throughput too. The gRPC clients make unary calls through `h2` ([`super::h2_client`]),
    /// as etcd's are measured beside them, and renew over `KeepAlive` the same way.
    pub clients_us_per_id: Vec<f64>,
    pub renewals: Vec<Renewals>,
    pub failover: Failover,
}

/// Lease renewals: C clients, each renewing one registration back to back.
#[derive(Debug, Clone, Serialize)]
pub struct Renewals {
    pub clients: usize,
    pub ok: usize,
    pub errors: usize,
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub first_error: Option<String>,
}

/// One API on its cluster, as the turns measure it.
struct Api {
    via: Via,
    at: Vec<SocketAddr>,
    client: ConnectOptions,
    /// The leader's process, whose CPU each turn is charged.
    leader: Option<u32>,
    next: Arc<AtomicUsize>,
}

/// What one API's turns at one client count came to, with the CPU they cost.
#[derive(Default)]
struct Turns {
    calls: Calls,
    leader_cpu: f64,
    clients_cpu: f64,
}

/// Measures both APIs, `native` on its cluster and gRPC on its own (each started afresh:
/// the one measured second would otherwise find the first one's registrations and a leader
/// moved by its failover rounds): allocation, then renewals, at each client count, the two
/// APIs calling by turns of [`TURN`] until each has had `opts.alloc_secs`. Taking turns
/// holds the machine equal for both: measured one after the other, a load that came and
/// went on this shared machine moved the ratio of the two by a third from one run to the
/// next. Then failover rounds on each.
pub async fn run(
    native: &mut Cluster,
    grpc: &mut Cluster,
    opts: &Options,
) -> anyhow::Result<[GrpcRun; 2]> {
    let mut apis = Vec::new();
    // Numbers far from the other parts' and each API's own, so that no address repeats.
    for (cluster, via, base) in [
        (&*native, Via::Native, 60_000_000),
        (&*grpc, Via::Grpc, 70_000_000),
    ] {
        let leader = cluster.ready(Duration::from_secs(60)).await?;
        let api = Api {
            via,
            at: cluster.endpoints(&[leader]),
            client: cluster.beacon_client.clone(),
            leader: cluster.members[leader].pid(),
            next: Arc::new(AtomicUsize::new(base)),
        };
        let warm = Duration::from_secs(1);
        alloc::run(Kind::Beacon, via, &api.at, &api.client, 16, warm, &api.next)
            .await
            .with_context(|| format!("warm-up through {via}"))?;
        apis.push(api);
    }
    let duration = Duration::from_secs(opts.alloc_secs);
    let (mut allocs, mut renewals) = ([vec![], vec![]], [vec![], vec![]]);
    let (mut leader_us, mut clients_us) = ([vec![], vec![]], [vec![], vec![]]);
    for &c in &opts.clients {
        let mut pools = Vec::new();
        for api in &apis {
            pools.push(
                alloc::connect(Kind::Beacon, api.via, &api.at, &api.client, c, &api.next).await?,
            );
        }
        let turns = by_turns(&apis, pools, duration).await?;
        for (i, t) in turns.into_iter().enumerate() {
            let run = t.calls.throughput(c);
            let per_id = |cpu: f64| {
                if run.ok > 0 {
                    cpu * 1e6 / run.ok as f64
                } else {
                    0.0
                }
            };
            leader_us[i].push(per_id(t.leader_cpu));
            clients_us[i].push(per_id(t.clients_cpu));
            allocs[i].push(run);
        }
    }
    for &c in &opts.clients {
        let mut pools = Vec::new();
        for api in &apis {
            let mut renewers = Vec::new();
            for _ in 0..c {
                renewers.push(Renewer::start(api.via, &api.at, &api.client, &api.next).await?);
            }
            pools.push(renewers);
        }
        let turns = by_turns(&apis, pools, duration).await?;
        for (i, t) in turns.into_iter().enumerate() {
            renewals[i].push(renewals_of(c, t.calls));
        }
    }
    let mut runs = Vec::new();
    for (i, (cluster, via)) in [(native, Via::Native), (grpc, Via::Grpc)]
        .into_iter()
        .enumerate()
    {
        cluster.via = via;
        let failover = failover::run(cluster, opts.rounds, Fault::Kill).await;
        cluster.via = Via::Native;
        runs.push(GrpcRun {
            via,
            alloc: std::mem::take(&mut allocs[i]),
            leader_us_per_id: std::mem::take(&mut leader_us[i]),
            clients_us_per_id: std::mem::take(&mut clients_us[i]),
            renewals: std::mem::take(&mut renewals[i]),
            failover: failover.with_context(|| format!("failover through {via}"))?,
        });
    }
    runs.try_into()
        .map_err(|_| anyhow!("a run for each of the two APIs"))
}

/// Each API's callers (`pools`, in the order of `apis`) call by turns of [`TURN`] until
/// each API has had `duration`, the API that goes first changing every round; each turn
/// is charged the CPU its leader and this process (where every client runs) spent.
async fn by_turns<C: Caller>(
    apis: &[Api],
    mut pools: Vec<Vec<C>>,
    duration: Duration,
) -> anyhow::Result<Vec<Turns>> {
    let mut turns: Vec<Turns> = apis.iter().map(|_| Turns::default()).collect();
    let rounds = alloc::rounds_of_turns(duration);
    let cpu = |pid: Option<u32>| pid.and_then(super::proc::cpu_seconds).unwrap_or(0.0);
    let me = Some(std::process::id());
    for round in 0..rounds {
        for k in 0..apis.len() {
            let i = (k + round) % apis.len();
            let (leader, clients) = (cpu(apis[i].leader), cpu(me));
            let pool = std::mem::take(&mut pools[i]);
            pools[i] = alloc::spell(pool, TURN, &mut turns[i].calls).await?;
            turns[i].leader_cpu += cpu(apis[i].leader) - leader;
            turns[i].clients_cpu += cpu(me) - clients;
        }
    }
    Ok(turns)
}

/// What `clients` renewers did, as a run's figures.
fn renewals_of(clients: usize, mut calls: Calls) -> Renewals {
    calls.latencies.sort_unstable();
    Renewals {
        clients,
        ok: calls.latencies.len(),
        errors: calls.errors.len(),
        per_sec: calls.per_sec(),
        p50_ms: percentile(&calls.latencies, 0.50),
        p99_ms: percentile(&calls.latencies, 0.99),
        first_error: calls.errors.into_iter().next(),
    }
}

/// One registration, renewed through one API.
enum Renewer {
    Native {
        cluster: Box<beacon::client::Cluster>,
        report: pb::registry::NodeReport,
    },
    /// A `KeepAlive` stream: a report sent, its reply awaited.
    Grpc {
        stream: Box<Stream>,
        report: pb::registry::NodeReport,
    },
}

impl Renewer {
    async fn start(
        via: Via,
        at: &[SocketAddr],
        opts: &ConnectOptions,
        next: &Arc<AtomicUsize>,
    ) -> anyhow::Result<Renewer> {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let register = pb::registry::RegisterRequest {
            node_type: "bench".into(),
            addr: service_addr(i).to_string(),
            ..Default::default()
        };
        let timeout = Duration::from_secs(5);
        let report_of =
            |reply: pb::registry::RegisterReply| -> anyhow::Result<pb::registry::NodeReport> {
                let node = reply.node.ok_or_else(|| anyhow!("reply without a node"))?;
                Ok(pb::registry::NodeReport {
                    node_id: node.node_id,
                    addr: node.addr,
                    term: node.term,
                    index: node.index,
                    ..Default::default()
                })
            };
        match via {
            Via::Native => {
                let beacons = at.iter().map(|a| a.to_string()).collect();
                let opts = ConnectOptions {
                    timeout,
                    ..opts.clone()
                };
                let mut cluster = Box::new(beacon::client::Cluster::new(beacons, opts, timeout));
                let reply = cluster
                    .call(RegistryCmd::Register, &register, "the registration")
                    .await?;
                Ok(Renewer::Native {
                    cluster,
                    report: report_of(reply)?,
                })
            }
            Via::Grpc => {
                let mut beacons = GrpcEndpoints::new(at, timeout)?;
                let reply: pb::registry::RegisterReply = beacons
                    .unary("/beacon.v1.registry.Registry/Register", register)
                    .await?;
                let mut connection = Connection::open(beacons.endpoint(), timeout).await?;
                let stream = connection
                    .stream("/beacon.v1.registry.Registry/KeepAlive")
                    .await?;
                Ok(Renewer::Grpc {
                    stream: Box::new(stream),
                    report: report_of(reply)?,
                })
            }
        }
    }

    async fn renew(&mut self) -> anyhow::Result<()> {
        match self {
            Renewer::Native { cluster, report } => {
                let _: pb::registry::NodeReportReply = cluster
                    .call(RegistryCmd::NodeReport, report, "the report")
                    .await?;
                Ok(())
            }
            Renewer::Grpc { stream, report } => {
                stream.send(report)?;
                let _: pb::registry::NodeReportReply = stream.next().await?;
                Ok(())
            }
        }
    }
}

impl Caller for Renewer {
    /// A renewal; one refused waits a millisecond before the next.
    async fn call(&mut self) -> anyhow::Result<u64> {
        alloc::after_error(self.renew().await, Duration::from_millis(1)).await
    }
}
