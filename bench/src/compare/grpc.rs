//! beacon through its gRPC API beside its native protocol, on the same cluster: allocation
//! and lease renewals at each client count, and failover with writers on each API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use beacon::client::ConnectOptions;
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use serde::Serialize;

use super::Options;
use super::alloc::{self, Throughput, percentile};
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

/// Measures `via` on `cluster`: allocation, renewals, then failover rounds.
pub async fn run(cluster: &mut Cluster, via: Via, opts: &Options) -> anyhow::Result<GrpcRun> {
    let leader = cluster.ready(Duration::from_secs(60)).await?;
    let at = cluster.endpoints(&[leader]);
    // Numbers far from the other parts' and each API's own, so that no address repeats.
    let base = if via == Via::Grpc {
        70_000_000
    } else {
        60_000_000
    };
    let next = Arc::new(AtomicUsize::new(base));
    let duration = Duration::from_secs(opts.alloc_secs);
    let client = &cluster.beacon_client;
    alloc::run(
        Kind::Beacon,
        via,
        &at,
        client,
        16,
        Duration::from_secs(1),
        &next,
    )
    .await?;
    let mut allocs = Vec::new();
    let mut leader_us_per_id = Vec::new();
    let mut clients_us_per_id = Vec::new();
    let pid = cluster.members[leader].pid();
    for &c in &opts.clients {
        let before = pid.and_then(super::proc::cpu_seconds);
        let clients_before = super::proc::cpu_seconds(std::process::id());
        let run = alloc::run(Kind::Beacon, via, &at, client, c, duration, &next).await?;
        let after = pid.and_then(super::proc::cpu_seconds);
        let clients_after = super::proc::cpu_seconds(std::process::id());
        let per_id = |before: Option<f64>, after: Option<f64>| match (before, after) {
            (Some(b), Some(a)) if run.ok > 0 => (a - b) * 1e6 / run.ok as f64,
            _ => 0.0,
        };
        leader_us_per_id.push(per_id(before, after));
        clients_us_per_id.push(per_id(clients_before, clients_after));
        allocs.push(run);
    }
    let mut renewals = Vec::new();
    for &c in &opts.clients {
        renewals.push(renew(via, &at, client, c, duration, &next).await?);
    }
    cluster.via = via;
    let failover = failover::run(cluster, opts.rounds, Fault::Kill).await;
    cluster.via = Via::Native;
    Ok(GrpcRun {
        via,
        alloc: allocs,
        leader_us_per_id,
        clients_us_per_id,
        renewals,
        failover: failover?,
    })
}

/// `clients` clients, each with its own connection and registration, renewing for
/// `duration`.
async fn renew(
    via: Via,
    at: &[SocketAddr],
    opts: &ConnectOptions,
    clients: usize,
    duration: Duration,
    next: &Arc<AtomicUsize>,
) -> anyhow::Result<Renewals> {
    let mut renewers = Vec::new();
    for _ in 0..clients {
        renewers.push(Renewer::start(via, at, opts, next).await?);
    }
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = renewers
        .into_iter()
        .map(|mut r| {
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut errors = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match r.renew().await {
                        Ok(()) => done.push(t.elapsed()),
                        Err(e) => {
                            errors.push(format!("{e:#}"));
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
                (done, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    for t in tasks {
        let (done, errs) = t.await.context("renewal client panicked")?;
        latencies.extend(done);
        errors.extend(errs);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Renewals {
        clients,
        ok: latencies.len(),
        errors: errors.len(),
        per_sec: latencies.len() as f64 / seconds,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        first_error: errors.into_iter().next(),
    })
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
