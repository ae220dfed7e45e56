//! `beacon-bench compare`: beacon, etcd and ZooKeeper side by side, three members each on
//! loopback, measured by the same client code with the same concurrency.
//!
//! The parts: failover after the leader is SIGKILLed, SIGSTOPped or cut off the network,
//! leader changes in an idle cluster, ID allocation throughput and latency,
//! liveness capacity (live registrations renewed once a second under a CPU budget on the
//! leader), beacon's sequence issuer (segments, the double-buffered client, snowflake IDs)
//! beside the same "give me a unique number" of etcd and ZooKeeper, work assignment, and
//! task queues beside seed 003's design on ZooKeeper. Results go to a Markdown table
//! (ratios beacon/peer) and JSON.

mod alloc;
mod assign;
mod clients;
mod etcd_lease;
mod failover;
mod gray;
mod grpc;
mod h2_client;
mod liveness;
mod membership;
mod netns;
mod proc;
mod provenance;
mod reads;
mod renewal_rate;
mod report;
mod scale;
mod sequence;
mod systems;
mod tasks;
mod watch;
mod zk_tasks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use beacon::config::DEFAULT_TICK_MS;
use serde::Serialize;

use failover::Fault;
use netns::Net;
use systems::Via;
use systems::{BeaconSetup, Cluster, Kind, Programs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Part {
    Failover,
    /// Leader changes while nothing happens (there should be none).
    Idle,
    Alloc,
    Liveness,
    Sequence,
    Assign,
    Tasks,
    /// beacon's allocation and failover with TLS on, beside plaintext.
    Tls,
    /// beacon through its gRPC API beside its native protocol: allocation, renewals,
    /// failover.
    Grpc,
    /// Linearizable and serializable reads at the leader and at a follower while the leader
    /// takes writes, beside etcd's and ZooKeeper's.
    Reads,
    /// Config push: from a write to the last of N watching services seeing it, beacon's
    /// config watch beside etcd's and ZooKeeper's watches.
    Watch,
    /// Five members each. Size: beacon's registrations grown in steps (to a million),
    /// memory and disk per step; paging, watching, failover and a wiped follower at the top.
    /// Rate: lease renewals per leader core-second, beacon beside etcd.
    Scale,
    /// Writes' longest gap while a cluster grows 1 -> 3 -> 5 and replaces a dead voter,
    /// beacon (`--join`, learners promoted once caught up) beside etcd (`member add`).
    Membership,
    /// Gray failures and overload (beacon): a hung follower and leader under kept-alive
    /// registrations, stalled watchers and a herd of them listing again, ten times the load
    /// the cluster takes.
    Gray,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum System {
    Beacon,
    Etcd,
    Zookeeper,
}

impl System {
    fn kind(self) -> Kind {
        match self {
            System::Beacon => Kind::Beacon,
            System::Etcd => Kind::Etcd,
            System::Zookeeper => Kind::ZooKeeper,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Options {
    /// Parts to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Part>,
    /// Systems to run (default: all three; liveness compares beacon and etcd).
    #[arg(long, value_enum, value_delimiter = ',')]
    systems: Vec<System>,
    /// Keep the members' data and logs (their directory is printed) instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// Failover rounds per system and fault.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Faults done to the leader in the failover part (`cut` needs root, for network
    /// namespaces; without, it is skipped with a note).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Fault::Kill, Fault::Stop, Fault::Cut])]
    faults: Vec<Fault>,
    /// Length of the idle run that counts leader changes.
    #[arg(long, default_value_t = 600)]
    idle_secs: u64,
    /// Concurrent clients of the allocation benchmark.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 64])]
    clients: Vec<usize>,
    /// Length of each allocation run.
    #[arg(long, default_value_t = 5)]
    alloc_secs: u64,
    /// Live registrations of each liveness step.
    #[arg(long, value_delimiter = ',', default_values_t = [2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 150_000, 200_000])]
    liveness_steps: Vec<usize>,
    /// Measuring window of each liveness step.
    #[arg(long, default_value_t = 10)]
    window_secs: u64,
    /// CPU budget of the leader in the liveness benchmark (share of one core).
    #[arg(long, default_value_t = 0.5)]
    cpu_limit: f64,
    /// Threads calling the double buffer's next_id() in the sequence part.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 4, 16])]
    sequence_threads: Vec<usize>,
    /// Length of each sequence run.
    #[arg(long, default_value_t = 3)]
    sequence_secs: u64,
    /// How long the proxy holds back each chunk of a slowed segment fetch.
    #[arg(long, default_value_t = 50)]
    sequence_delay_ms: u64,
    /// The sequences' own step (the client's adaptive requests start there).
    #[arg(long, default_value_t = 1_000)]
    sequence_step: u64,
    /// Workers and resources of the assignment part.
    #[arg(long, default_value_t = 10)]
    assign_workers: usize,
    #[arg(long, default_value_t = 1_000)]
    assign_resources: usize,
    /// Deaths (and unregisters) the assignment part times.
    #[arg(long, default_value_t = 5)]
    assign_rounds: usize,
    /// Resources and workers of the assignment part's steady-state CPU measurement.
    #[arg(long, default_value_t = 10_000)]
    assign_steady_resources: usize,
    #[arg(long, default_value_t = 100)]
    assign_steady_workers: usize,
    /// Workers and submitters of the task part, and the length of each of its runs.
    #[arg(long, default_value_t = 16)]
    tasks_workers: usize,
    #[arg(long, default_value_t = 16)]
    tasks_submitters: usize,
    #[arg(long, default_value_t = 5)]
    tasks_secs: u64,
    /// Watching services of each run of the config push part.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1_000])]
    watchers: Vec<usize>,
    /// Writes (rounds) of each run of the config push part (enough for a p99 that is not
    /// the max).
    #[arg(long, default_value_t = 200)]
    watch_rounds: usize,
    /// Climbs of the scale part, each on a cluster of its own: the first measures
    /// everything, the others memory and disk, so that memory is published as a spread.
    #[arg(long, default_value_t = 3)]
    scale_climbs: usize,
    /// Live registrations of each step of the scale part.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000, 100_000, 250_000, 500_000, 1_000_000])]
    scale_steps: Vec<usize>,
    /// Registrations renewed as fast as answered in the scale part's rate half.
    #[arg(long, default_value_t = 50_000)]
    rate_registrations: usize,
    /// Services kept alive by the Rust client in the gray part's hung-beacon case, their
    /// lease, and how long a beacon stays stopped.
    #[arg(long, default_value_t = 1_000)]
    gray_registrations: usize,
    #[arg(long, default_value_t = 3_000)]
    gray_lease_ms: u64,
    #[arg(long, default_value_t = 10)]
    gray_stop_secs: u64,
    /// Watchers of every node in the gray part (a tenth of them stall), and the
    /// registrations with 1 KB of metadata they watch arrive.
    #[arg(long, default_value_t = 1_000)]
    gray_watchers: usize,
    #[arg(long, default_value_t = 20_000)]
    gray_watch_registrations: usize,
    /// Length of the gray part's overload run.
    #[arg(long, default_value_t = 10)]
    gray_overload_secs: u64,
    /// Where the results table goes (JSON beside it, same name with .json).
    #[arg(long, default_value = "bench/results.md")]
    out: PathBuf,
}

/// Everything one run measured.
#[derive(Debug, Default, Serialize)]
pub struct Results {
    /// Where, when and how the run was taken.
    pub taken: provenance::Provenance,
    pub failover: Vec<(String, failover::Failover)>,
    /// Faults the failover part could not do here, and why.
    pub skipped_faults: Vec<String>,
    pub idle: Vec<(String, Idle)>,
    pub alloc: Vec<(String, alloc::Throughput)>,
    pub liveness: Vec<(String, liveness::Liveness)>,
    pub sequence: Option<sequence::SequenceResults>,
    pub assign: Option<assign::AssignResults>,
    pub tasks: Vec<(String, tasks::TaskResults)>,
    /// ("plaintext" or "TLS", what it measured).
    pub tls: Vec<(String, TlsRun)>,
    /// beacon's native protocol and its gRPC API, on one cluster.
    pub grpc: Vec<grpc::GrpcRun>,
    /// etcd's gRPC API through the gRPC part's client, per client count.
    pub grpc_etcd: Vec<alloc::Throughput>,
    pub reads: Vec<(String, Vec<reads::ReadRun>)>,
    /// The config push part, per system.
    pub watch: Vec<(String, Vec<watch::WatchRun>)>,
    pub scale: Option<scale::Scale>,
    /// The scale part's rate half, per system.
    pub renewal_rate: Vec<(String, renewal_rate::Rate)>,
    /// The membership part, per system.
    pub membership: Vec<(String, Vec<membership::Step>)>,
    /// The gray part (beacon).
    pub gray: Option<gray::Gray>,
    pub cpu_limit: f64,
    pub alloc_secs: u64,
    pub window_secs: u64,
}

/// beacon as the benchmark runs it: three beacons, quorum mode (the default for three), an
/// ID range wide enough for the liveness steps.
fn beacon_setup(tick_ms: u64) -> BeaconSetup {
    BeaconSetup {
        tick_ms,
        config: serde_json::json!({ "id_range": [1, 4_000_000] }),
    }
}

const MEMBERS: usize = 3;

pub async fn run(beacon_bin: &Path, opts: &Options) -> anyhow::Result<()> {
    let wants = |p: Part| opts.only.is_empty() || opts.only.contains(&p);
    let runs = |k: Kind| opts.systems.is_empty() || opts.systems.iter().any(|s| s.kind() == k);
    let needed: Vec<Kind> = [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
        .collect();
    let programs = Programs::find(beacon_bin.to_owned(), &needed)?;
    let mut results = Results {
        taken: provenance::Provenance::here(format!(
            "failover: {} rounds per system and fault; allocation runs: {} s; liveness windows: {} s",
            opts.rounds, opts.alloc_secs, opts.window_secs
        )),
        cpu_limit: opts.cpu_limit,
        alloc_secs: opts.alloc_secs,
        window_secs: opts.window_secs,
        ..Results::default()
    };

    if wants(Part::Failover) {
        println!(
            "failover: the leader SIGKILLed, SIGSTOPped or cut off; time until a write succeeds through a survivor"
        );
        for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
        {
            // Each member in a network namespace of its own, so that a leader can be cut
            // off; without the means (not root), on loopback, and the cut is skipped.
            let net = if opts.faults.contains(&Fault::Cut) {
                match Net::create(MEMBERS) {
                    Ok(net) => Some(net),
                    Err(e) => {
                        let why = format!("{kind}: leader cut off: not measured ({e:#})");
                        println!("  {why}");
                        results.skipped_faults.push(why);
                        None
                    }
                }
            } else {
                None
            };
            let mut c = start_on(&programs, kind, net);
            for &fault in &opts.faults {
                if fault == Fault::Cut && c.net.is_none() {
                    continue;
                }
                let f = failover::run(&mut c, opts.rounds, fault).await;
                match f {
                    Ok(f) => {
                        println!(
                            "  {kind}, {}: median {:.1} ms, max {:.1} ms",
                            fault.label(),
                            f.median_ms,
                            f.max_ms
                        );
                        results.failover.push((kind.to_string(), f));
                    }
                    Err(e) => {
                        keep(c, opts.keep);
                        return Err(e.context(format!("{kind}, {}", fault.label())));
                    }
                }
            }
            keep(c, opts.keep);
        }
    }

    if wants(Part::Idle) {
        println!(
            "idle: leader changes while nothing happens ({} s, defaults, the systems side by side)",
            opts.idle_secs
        );
        let clusters: Vec<Cluster> = [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
            .map(|kind| start(&programs, kind))
            .collect();
        let length = Duration::from_secs(opts.idle_secs);
        let watched =
            futures_util::future::join_all(clusters.iter().map(|c| idle(c, length))).await;
        for (cluster, idle) in clusters.into_iter().zip(watched) {
            let kind = cluster.kind;
            keep(cluster, opts.keep);
            let idle = idle?;
            println!(
                "  {kind}: {} leader changes, term {} -> {}",
                idle.leader_changes, idle.term_before, idle.term_after
            );
            results.idle.push((kind.to_string(), idle));
        }
    }

    if wants(Part::Alloc) {
        println!("allocation: unique IDs from C clients, each connected to the leader");
        let duration = Duration::from_secs(opts.alloc_secs);
        for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
        {
            let cluster = start(&programs, kind);
            let leader = cluster.ready(Duration::from_secs(120)).await?;
            let at = cluster.endpoints(&[leader]);
            clients::prepare(kind, &at).await?;
            let next = Arc::new(AtomicUsize::new(0));
            // Warm up (connections, the JVM's compiler, page cache) before measuring.
            alloc::run(
                kind,
                Via::Native,
                &at,
                &cluster.beacon_client,
                16,
                Duration::from_secs(2),
                &next,
            )
            .await
            .with_context(|| format!("{kind} warm-up"))?;
            for &c in &opts.clients {
                let before = cluster.leader_term().await;
                let mut t = alloc::run(
                    kind,
                    Via::Native,
                    &at,
                    &cluster.beacon_client,
                    c,
                    duration,
                    &next,
                )
                .await?;
                let after = cluster.leader_term().await;
                // A term that moved (or a leader that cannot be found) means an election.
                t.term_moves = match (before, after) {
                    (Some(b), Some(a)) => Some(a.saturating_sub(b)),
                    _ => None,
                };
                println!(
                    "  {kind}, {c} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {} duplicates, term {before:?} -> {after:?}",
                    t.per_sec, t.p50_ms, t.p99_ms, t.errors, t.duplicates
                );
                results.alloc.push((kind.to_string(), t));
            }
            keep(cluster, opts.keep);
        }
    }

    if wants(Part::Liveness) {
        println!("liveness: registrations renewed once a second; leader CPU and memory");
        let window = Duration::from_secs(opts.window_secs);
        for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
            let cluster = start(&programs, kind);
            let l = liveness::run(&cluster, &opts.liveness_steps, window, opts.cpu_limit).await;
            keep(cluster, opts.keep);
            results.liveness.push((kind.to_string(), l?));
        }
    }

    if wants(Part::Sequence) && runs(Kind::Beacon) {
        println!("sequence: numbers from segments, the double buffer and snowflake IDs");
        // The default node-ID range, whose IDs fit the default snowflake layout's 10
        // worker bits; a segment cap that lets the adaptive step outgrow a slowed fetch.
        let setup = BeaconSetup {
            tick_ms: DEFAULT_TICK_MS,
            config: serde_json::json!({ "sequence": { "max_step": 100_000_000u64 } }),
        };
        let cluster = Cluster::start_beacon(&programs, MEMBERS, &setup);
        let leader = cluster.ready(Duration::from_secs(60)).await?;
        let mut at = cluster.endpoints(&[leader]);
        at.extend(cluster.endpoints(&(0..MEMBERS).filter(|i| *i != leader).collect::<Vec<_>>()));
        let s = sequence::run(
            &at,
            &opts.sequence_threads,
            &opts.clients,
            opts.sequence_secs,
            opts.sequence_delay_ms,
            opts.sequence_step,
        )
        .await;
        keep(cluster, opts.keep);
        results.sequence = Some(s?);
    }

    if wants(Part::Assign) && runs(Kind::Beacon) {
        println!("assignment: resources moved off a dead or departed worker; balance; leader CPU");
        // A short tick and the shortest lease, so the times show beacon's own delays.
        let (tick_ms, lease_ms) = (100, 1_000);
        let setup = BeaconSetup {
            tick_ms,
            config: serde_json::json!({ "lease_ms": lease_ms, "assign": { "max_moves": 1_000 } }),
        };
        let cluster = Cluster::start_beacon(&programs, MEMBERS, &setup);
        let leader = cluster.ready(Duration::from_secs(60)).await?;
        let mut at = cluster.endpoints(&[leader]);
        at.extend(cluster.endpoints(&(0..MEMBERS).filter(|i| *i != leader).collect::<Vec<_>>()));
        let pid = cluster.members[leader].pid();
        let mut a = assign::run(
            &at,
            None,
            tick_ms,
            lease_ms,
            opts.assign_workers,
            opts.assign_resources,
            opts.assign_rounds,
            Duration::from_secs(opts.window_secs),
        )
        .await;
        keep(cluster, opts.keep);
        // The leader at steady state: a cluster at beacon's defaults, many resources.
        if let Ok(a) = &mut a {
            let cluster = start(&programs, Kind::Beacon);
            let leader = cluster.ready(Duration::from_secs(60)).await?;
            let at = cluster.endpoints(&[leader]);
            let steady = assign::run(
                &at,
                cluster.members[leader].pid(),
                DEFAULT_TICK_MS,
                10_000,
                opts.assign_steady_workers,
                opts.assign_steady_resources,
                0,
                Duration::from_secs(opts.window_secs),
            )
            .await;
            keep(cluster, opts.keep);
            let steady = steady?;
            a.steady_cpu = steady.steady_cpu;
            a.steady_resources = steady.steady_resources;
            a.steady_workers = steady.steady_workers;
        }
        let _ = pid;
        let a = a?;
        let (m, x) = assign::median_max(&a.after_death_ms);
        let (um, ux) = assign::median_max(&a.after_unregister_ms);
        println!(
            "  after a death: median {m:.0} ms, max {x:.0} ms (lease {lease_ms} ms); after an unregister: median {um:.0} ms, max {ux:.0} ms; spread {} / {} / {} (largest weight {}); leader CPU {:.1}% with {} resources on {} workers",
            a.spread_after_adds,
            a.spread_after_death,
            a.spread_after_join,
            a.max_weight,
            a.steady_cpu.unwrap_or(0.0) * 100.0,
            a.steady_resources,
            a.steady_workers
        );
        results.assign = Some(a);
    }

    if wants(Part::Tasks) {
        println!("tasks: submit -> run -> complete -> result, and a leader killed mid-run");
        for kind in [Kind::Beacon, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
        {
            let mut cluster = start(&programs, kind);
            let leader = cluster.ready(Duration::from_secs(120)).await?;
            let mut order = vec![leader];
            order.extend((0..MEMBERS).filter(|i| *i != leader));
            let at = cluster.endpoints(&order);
            let t = tasks::run(
                kind,
                &mut cluster,
                &at,
                opts.tasks_workers,
                opts.tasks_submitters,
                opts.tasks_secs,
            )
            .await;
            keep(cluster, opts.keep);
            let t = t.with_context(|| format!("{kind} task queue"))?;
            println!(
                "  {kind}: {:.0} tasks/s end to end, p50 {:.2} ms, p99 {:.2} ms ({} workers, {} submitters); leader killed: longest pause {:.0} ms; {} lost",
                t.per_sec, t.p50_ms, t.p99_ms, t.workers, t.submitters, t.failover_pause_ms, t.lost
            );
            if t.lost > 0 {
                anyhow::bail!(
                    "{kind}: {} acknowledged tasks never completed: {}",
                    t.lost,
                    t.lost_how.join("; ")
                );
            }
            results.tasks.push((kind.to_string(), t));
        }
    }

    if wants(Part::Tls) && runs(Kind::Beacon) {
        println!("TLS: beacon's allocation and failover with TLS on, beside plaintext");
        for with_tls in [false, true] {
            let setup = beacon_setup(DEFAULT_TICK_MS);
            let mut cluster = if with_tls {
                Cluster::start_beacon_tls(&programs, MEMBERS, &setup)?
            } else {
                Cluster::start_beacon(&programs, MEMBERS, &setup)
            };
            let name = if with_tls { "TLS" } else { "plaintext" };
            let run = tls_run(&mut cluster, opts).await;
            keep(cluster, opts.keep);
            let run = run.with_context(|| format!("beacon with {name}"))?;
            for t in &run.alloc {
                println!(
                    "  {name}, {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
                    t.clients, t.per_sec, t.p50_ms, t.p99_ms
                );
            }
            println!(
                "  {name}: failover median {:.1} ms, max {:.1} ms",
                run.failover.median_ms, run.failover.max_ms
            );
            results.tls.push((name.to_owned(), run));
        }
    }

    if wants(Part::Grpc) && runs(Kind::Beacon) {
        println!("gRPC: beacon through its gRPC API beside its native protocol");
        let setup = beacon_setup(DEFAULT_TICK_MS);
        let mut measured = Ok(());
        for via in [Via::Native, Via::Grpc] {
            // Each API on a cluster of its own, started afresh: the one measured second
            // would otherwise find the first one's registrations and a leader moved by its
            // failover rounds.
            let mut cluster = Cluster::start_beacon(&programs, MEMBERS, &setup);
            let run = grpc::run(&mut cluster, via, opts).await;
            keep(cluster, opts.keep);
            match run {
                Ok(run) => {
                    for ((a, r), us) in run
                        .alloc
                        .iter()
                        .zip(&run.renewals)
                        .zip(&run.leader_us_per_id)
                    {
                        println!(
                            "  {via}, {} clients: {:.0} IDs/s (p99 {:.2} ms, leader {us:.0} µs of CPU each), {:.0} renewals/s (p99 {:.2} ms)",
                            a.clients, a.per_sec, a.p99_ms, r.per_sec, r.p99_ms
                        );
                    }
                    println!(
                        "  {via}: failover median {:.1} ms, max {:.1} ms",
                        run.failover.median_ms, run.failover.max_ms
                    );
                    results.grpc.push(run);
                }
                Err(e) => {
                    measured = Err(e.context(format!("beacon through {via}")));
                    break;
                }
            }
        }
        measured?;
        if runs(Kind::Etcd) {
            // etcd through the same client: what each gRPC API costs, the client held equal.
            let cluster = start(&programs, Kind::Etcd);
            let leader = cluster.ready(Duration::from_secs(120)).await?;
            let at = cluster.endpoints(&[leader]);
            let next = Arc::new(AtomicUsize::new(0));
            let client = &cluster.beacon_client;
            let warm = Duration::from_secs(1);
            alloc::run(Kind::Etcd, Via::Grpc, &at, client, 16, warm, &next)
                .await
                .context("etcd warm-up")?;
            let duration = Duration::from_secs(opts.alloc_secs);
            for &c in &opts.clients {
                let t = alloc::run(Kind::Etcd, Via::Grpc, &at, client, c, duration, &next).await?;
                println!(
                    "  etcd through the same client, {c} clients: {:.0} IDs/s (p99 {:.2} ms)",
                    t.per_sec, t.p99_ms
                );
                results.grpc_etcd.push(t);
            }
            keep(cluster, opts.keep);
        }
    }

    if wants(Part::Reads) {
        println!(
            "reads: linearizable and serializable, at the leader and at a follower, while {} clients allocate on the leader",
            reads::WRITERS
        );
        let duration = Duration::from_secs(opts.alloc_secs);
        for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
        {
            let cluster = start(&programs, kind);
            let measured = reads::run(&cluster, reads::READERS, reads::WRITERS, duration).await;
            keep(cluster, opts.keep);
            let measured = measured.with_context(|| format!("{kind} reads"))?;
            for r in &measured {
                println!(
                    "  {kind}, {} {} reads, {} readers: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {:.0} writes/s meanwhile{}",
                    r.at,
                    r.consistency,
                    r.readers,
                    r.per_sec,
                    r.p50_ms,
                    r.p99_ms,
                    r.errors,
                    r.writes_per_sec,
                    r.first_error
                        .as_deref()
                        .map_or(String::new(), |e| format!(" (first error: {e})"))
                );
            }
            results.reads.push((kind.to_string(), measured));
        }
    }

    if wants(Part::Watch) {
        println!("config push: from a write to the last of N watching services seeing it");
        for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
            .into_iter()
            .filter(|k| runs(*k))
        {
            let cluster = start(&programs, kind);
            let leader = cluster.ready(Duration::from_secs(120)).await?;
            let mut order = vec![leader];
            order.extend((0..MEMBERS).filter(|i| *i != leader));
            let at = cluster.endpoints(&order);
            let measured = watch::run(kind, &at, &opts.watchers, opts.watch_rounds).await;
            keep(cluster, opts.keep);
            let measured = measured.with_context(|| format!("{kind} config push"))?;
            for w in &measured {
                println!(
                    "  {kind}, {} watchers: last one p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; each p50 {:.2} ms; {} missed",
                    w.watchers,
                    w.last_p50_ms,
                    w.last_p99_ms,
                    w.last_max_ms,
                    w.each_p50_ms,
                    w.missed
                );
            }
            results.watch.push((kind.to_string(), measured));
        }
    }

    if wants(Part::Scale) && runs(Kind::Beacon) {
        println!(
            "scale: registrations grown to {} on {} beacons; memory, disk, paging, watching, failover, a wiped follower",
            opts.scale_steps.last().copied().unwrap_or(0),
            scale::MEMBERS
        );
        let setup = BeaconSetup {
            tick_ms: DEFAULT_TICK_MS,
            config: serde_json::json!({ "id_range": [1, 4_000_000], "lease_ms": scale::LEASE_MS }),
        };
        let mut cluster = Cluster::start_beacon(&programs, scale::MEMBERS, &setup);
        let measured = scale::run(&mut cluster, &opts.scale_steps, opts.rounds.min(3), true).await;
        keep(cluster, opts.keep);
        let mut measured = measured.context("beacon at scale")?;
        if let Some(why) = &measured.stopped {
            println!("  {why}");
        }
        for climb in 2..=opts.scale_climbs {
            println!(
                "scale, climb {climb} of {}: memory and disk",
                opts.scale_climbs
            );
            let mut cluster = Cluster::start_beacon(&programs, scale::MEMBERS, &setup);
            let again = scale::run(&mut cluster, &opts.scale_steps, 0, false).await;
            keep(cluster, opts.keep);
            let again = again.with_context(|| format!("beacon at scale, climb {climb}"))?;
            if let Some(why) = &again.stopped {
                println!("  {why}");
            }
            measured.other_climbs.push(again.steps);
        }
        results.scale = Some(measured);
    }
    if wants(Part::Scale) {
        println!(
            "scale, rate: {} registrations on {} members renewed as fast as answered; renewals per leader core-second",
            opts.rate_registrations,
            scale::MEMBERS
        );
        let window = Duration::from_secs(opts.window_secs);
        for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
            let cluster = match kind {
                Kind::Beacon => {
                    Cluster::start_beacon(&programs, scale::MEMBERS, &beacon_setup(DEFAULT_TICK_MS))
                }
                _ => Cluster::start_etcd_on(&programs, scale::MEMBERS, None),
            };
            let measured = renewal_rate::run(&cluster, opts.rate_registrations, window).await;
            keep(cluster, opts.keep);
            results
                .renewal_rate
                .push((kind.to_string(), measured.context("renewal rate")?));
        }
    }

    if wants(Part::Membership) {
        println!(
            "membership: the longest gap between acknowledged writes while growing 1 -> 3 -> 5 and replacing a dead voter"
        );
        for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
            let steps = membership::run(&programs, kind, opts.keep)
                .await
                .with_context(|| format!("{kind}, membership"))?;
            for s in &steps {
                println!(
                    "  {kind}, {} ({}): longest gap {:.1} ms, done in {:.0} ms",
                    s.step, s.how, s.gap_ms, s.took_ms
                );
            }
            results.membership.push((kind.to_string(), steps));
        }
    }

    if wants(Part::Gray) && runs(Kind::Beacon) {
        println!(
            "gray: a hung follower and leader under kept-alive registrations, stalled watchers and their herd, ten times the load"
        );
        let sizes = gray::GraySizes {
            registrations: opts.gray_registrations,
            lease_ms: opts.gray_lease_ms,
            stop_secs: opts.gray_stop_secs,
            watchers: opts.gray_watchers,
            watch_registrations: opts.gray_watch_registrations,
            overload_secs: opts.gray_overload_secs,
        };
        results.gray = Some(
            gray::run(&programs, &sizes, opts.keep)
                .await
                .context("gray")?,
        );
    }

    let table = report::markdown(&results);
    println!("\n{table}");
    if let Some(dir) = opts.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(&opts.out, &table).with_context(|| format!("write {}", opts.out.display()))?;
    let json = opts.out.with_extension("json");
    let value = serde_json::to_value(&results)?;
    std::fs::write(&json, serde_json::to_string_pretty(&value)?)
        .with_context(|| format!("write {}", json.display()))?;
    println!("written to {} and {}", opts.out.display(), json.display());
    for chart in crate::charts::write_beside(&json, &value)? {
        println!("chart: {}", chart.display());
    }
    let duplicates: usize = results
        .failover
        .iter()
        .map(|(_, f)| f.duplicates)
        .sum::<usize>()
        + results
            .alloc
            .iter()
            .map(|(_, t)| t.duplicates)
            .sum::<usize>()
        + results
            .grpc
            .iter()
            .map(|g| g.failover.duplicates + g.alloc.iter().map(|a| a.duplicates).sum::<usize>())
            .sum::<usize>()
        + results
            .tls
            .iter()
            .map(|(_, t)| {
                t.failover.duplicates + t.alloc.iter().map(|a| a.duplicates).sum::<usize>()
            })
            .sum::<usize>()
        + results.sequence.as_ref().map_or(0, |s| {
            s.segments
                .iter()
                .chain(&s.numbers)
                .map(|t| t.duplicates)
                .sum::<usize>()
        })
        + results.scale.as_ref().map_or(0, |s| {
            s.failover_small
                .iter()
                .chain(s.top.as_ref().map(|t| &t.failover))
                .map(|f| f.duplicates)
                .sum::<usize>()
        });
    if duplicates > 0 {
        anyhow::bail!("{duplicates} IDs were acknowledged twice: see the tables above");
    }
    Ok(())
}

/// beacon with or without TLS: allocation at each client count, then failover rounds.
#[derive(Debug, Clone, Serialize)]
pub struct TlsRun {
    pub alloc: Vec<alloc::Throughput>,
    pub failover: failover::Failover,
}

async fn tls_run(cluster: &mut Cluster, opts: &Options) -> anyhow::Result<TlsRun> {
    let leader = cluster.ready(Duration::from_secs(60)).await?;
    let at = cluster.endpoints(&[leader]);
    let next = Arc::new(AtomicUsize::new(0));
    let duration = Duration::from_secs(opts.alloc_secs);
    alloc::run(
        Kind::Beacon,
        Via::Native,
        &at,
        &cluster.beacon_client,
        16,
        Duration::from_secs(1),
        &next,
    )
    .await?;
    let mut runs = Vec::new();
    for &c in &opts.clients {
        runs.push(
            alloc::run(
                Kind::Beacon,
                Via::Native,
                &at,
                &cluster.beacon_client,
                c,
                duration,
                &next,
            )
            .await?,
        );
    }
    let failover = failover::run(cluster, opts.rounds, Fault::Kill).await?;
    Ok(TlsRun {
        alloc: runs,
        failover,
    })
}

/// Stops the cluster; with `--keep`, leaves its data and logs behind and says where.
fn keep(cluster: Cluster, keep: bool) {
    let Cluster {
        kind, members, dir, ..
    } = cluster;
    drop(members);
    if keep {
        println!("  {kind} data and logs kept in {}", dir.keep().display());
    }
}

fn start(programs: &Programs, kind: Kind) -> Cluster {
    start_on(programs, kind, None)
}

/// A cluster at its system's defaults, each member in its namespace of `net` when given.
fn start_on(programs: &Programs, kind: Kind, net: Option<Net>) -> Cluster {
    match kind {
        Kind::Beacon => {
            Cluster::start_beacon_on(programs, MEMBERS, &beacon_setup(DEFAULT_TICK_MS), net)
        }
        Kind::Etcd => Cluster::start_etcd_on(programs, MEMBERS, net),
        Kind::ZooKeeper => Cluster::start_zookeeper_on(programs, MEMBERS, net),
    }
}

/// Leader changes in a cluster left alone.
#[derive(Debug, Clone, Serialize)]
pub struct Idle {
    pub secs: u64,
    pub leader_changes: usize,
    pub term_before: u64,
    pub term_after: u64,
}

/// Watches `cluster` for `length`, asking every 500 ms who leads: each change of the
/// leader's identity or term (or a moment with none) counts.
async fn idle(cluster: &Cluster, length: Duration) -> anyhow::Result<Idle> {
    let first = cluster.ready(Duration::from_secs(120)).await?;
    let term_before = cluster
        .leader_term()
        .await
        .context("the leader's term before the idle run")?;
    let mut seen = (Some(first), term_before);
    let mut leader_changes = 0;
    let end = tokio::time::Instant::now() + length;
    while tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = (
            cluster.leader().await,
            cluster.leader_term().await.unwrap_or(0),
        );
        if now != seen {
            leader_changes += 1;
            println!("  {}: leader {:?} -> {:?}", cluster.kind, seen, now);
            seen = now;
        }
    }
    Ok(Idle {
        secs: length.as_secs(),
        leader_changes,
        term_before,
        term_after: seen.1,
    })
}
