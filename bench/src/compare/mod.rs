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
mod client_libs;
mod clients;
mod etcd_lease;
mod failover;
mod generated;
mod gray;
mod grpc;
mod h2_client;
mod health;
mod liveness;
mod membership;
mod netns;
mod parts;
mod proc;
mod provenance;
mod reads;
mod renewal_rate;
mod report;
mod scale;
mod scrape;
mod sequence;
mod systems;
mod targets;
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
    /// Ten million registrations on three beacons: most restored from a backup the bench
    /// generates (`beacon restore`, as operators restore), the rest registered live in
    /// steps; memory and disk per step, and at the top paging, watching, failover (beside
    /// failover at 1,000 on three beacons) and a wiped follower.
    Huge,
    /// Writes' longest gap while a cluster grows 1 -> 3 -> 5 and replaces a dead voter,
    /// beacon (`--join`, learners promoted once caught up) beside etcd (`member add`).
    Membership,
    /// Gray failures and overload (beacon): a hung follower and leader under kept-alive
    /// registrations, stalled watchers and a herd of them listing again, ten times the load
    /// the cluster takes.
    Gray,
    /// Discovery that tells the truth (beacon): from a failing check to every watcher and
    /// the DNS answer, a flapping service's published changes, DNS answers per core-second.
    Health,
    /// beacon's client libraries side by side (Rust, Python, Go, Java): allocations and
    /// renewals per second through each at each client count.
    ClientLibs,
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
    /// Registrations the huge part restores from its generated backup before it climbs.
    #[arg(long, default_value_t = 9_000_000)]
    huge_restore: usize,
    /// Live registrations of each step of the huge part's climb (after the restore).
    #[arg(long, value_delimiter = ',', default_values_t = [9_500_000, 10_000_000])]
    huge_steps: Vec<usize>,
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
    /// Watchers of the gray part's resuming herd (all stalled), and the registrations with
    /// 1 KB of metadata they miss before they all read on at once.
    #[arg(long, default_value_t = 200)]
    gray_resume_watchers: usize,
    #[arg(long, default_value_t = 10_000)]
    gray_resume_registrations: usize,
    /// Length of the gray part's overload run.
    #[arg(long, default_value_t = 10)]
    gray_overload_secs: u64,
    /// Watchers of the health part's failing service, how long its flapping service flaps,
    /// how long DNS is asked, and how many instances the DNS answer holds.
    #[arg(long, default_value_t = 100)]
    health_watchers: usize,
    #[arg(long, default_value_t = 60)]
    health_flap_secs: u64,
    #[arg(long, default_value_t = 10)]
    health_dns_secs: u64,
    #[arg(long, default_value_t = 20)]
    health_dns_instances: usize,
    /// The lease of the health part's dead-service run, and how many leaders die within it.
    #[arg(long, default_value_t = 6_000)]
    health_lease_ms: u64,
    #[arg(long, default_value_t = 5)]
    health_leader_changes: usize,
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
    /// The huge part: the scale part's figures from a restored backup up, and failover at
    /// 1,000 on a cluster of its size.
    pub huge: Option<scale::Scale>,
    /// The scale part's rate half, per system.
    pub renewal_rate: Vec<(String, renewal_rate::Rate)>,
    /// The membership part, per system.
    pub membership: Vec<(String, Vec<membership::Step>)>,
    /// The gray part (beacon).
    pub gray: Option<gray::Gray>,
    /// The health part (beacon).
    pub health: Option<health::HealthResults>,
    /// The client libraries part, per library.
    pub client_libs: Vec<client_libs::Library>,
    pub cpu_limit: f64,
    pub alloc_secs: u64,
    pub window_secs: u64,
}

impl Options {
    /// Whether `kind` is among the systems asked for.
    fn runs(&self, kind: Kind) -> bool {
        self.systems.is_empty() || self.systems.iter().any(|s| s.kind() == kind)
    }

    /// Whether `part` is asked for.
    fn wants(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }
}

/// beacon as the benchmark runs it: three beacons, quorum mode (the default for three), an
/// ID range wide enough for the liveness steps.
fn beacon_setup(tick_ms: u64) -> BeaconSetup {
    BeaconSetup {
        tick_ms,
        config: serde_json::json!({ "id_range": [1, 4_000_000] }),
        restore: None,
    }
}

const MEMBERS: usize = 3;

impl Results {
    /// `system`'s allocation run with `clients` clients, if this run made one.
    pub fn alloc_of(&self, system: &str, clients: usize) -> Option<&alloc::Throughput> {
        self.alloc
            .iter()
            .find(|(n, t)| n == system && t.clients == clients)
            .map(|(_, t)| t)
    }

    /// The client counts of the allocation runs, each once, fewest first.
    pub fn alloc_clients(&self) -> Vec<usize> {
        let mut clients: Vec<usize> = self.alloc.iter().map(|(_, t)| t.clients).collect();
        clients.sort_unstable();
        clients.dedup();
        clients
    }

    /// IDs acknowledged twice, over every part: a bench run with any fails.
    fn duplicates(&self) -> usize {
        self.failover
            .iter()
            .map(|(_, f)| f.duplicates)
            .sum::<usize>()
            + self.alloc.iter().map(|(_, t)| t.duplicates).sum::<usize>()
            + self
                .grpc
                .iter()
                .map(|g| {
                    g.failover.duplicates + g.alloc.iter().map(|a| a.duplicates).sum::<usize>()
                })
                .sum::<usize>()
            + self
                .tls
                .iter()
                .map(|(_, t)| {
                    t.failover.duplicates + t.alloc.iter().map(|a| a.duplicates).sum::<usize>()
                })
                .sum::<usize>()
            + self.sequence.as_ref().map_or(0, |s| {
                s.segments
                    .iter()
                    .chain(&s.numbers)
                    .map(|t| t.duplicates)
                    .sum::<usize>()
            })
            + [&self.scale, &self.huge]
                .into_iter()
                .flatten()
                .map(|s| {
                    s.failover_small
                        .iter()
                        .chain(s.top.as_ref().map(|t| &t.failover))
                        .map(|f| f.duplicates)
                        .sum::<usize>()
                })
                .sum::<usize>()
    }
}

pub async fn run(beacon_bin: &Path, opts: &Options) -> anyhow::Result<()> {
    let needed: Vec<Kind> = [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| opts.runs(*k))
        .collect();
    let b = parts::Bench {
        programs: Programs::find(beacon_bin.to_owned(), &needed)?,
        opts,
    };
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

    parts::run_failover(&b, &mut results).await?;
    parts::run_idle(&b, &mut results).await?;
    parts::run_alloc(&b, &mut results).await?;
    parts::run_liveness(&b, &mut results).await?;
    parts::run_sequence(&b, &mut results).await?;
    parts::run_assign(&b, &mut results).await?;
    parts::run_tasks(&b, &mut results).await?;
    parts::run_tls(&b, &mut results).await?;
    parts::run_grpc(&b, &mut results).await?;
    parts::run_reads(&b, &mut results).await?;
    parts::run_watch(&b, &mut results).await?;
    parts::run_scale_beacon(&b, &mut results).await?;
    parts::run_scale_others(&b, &mut results).await?;
    parts::run_huge(&b, &mut results).await?;
    parts::run_membership(&b, &mut results).await?;
    parts::run_gray(&b, &mut results).await?;
    parts::run_health(&b, &mut results).await?;
    parts::run_client_libs(&b, &mut results).await?;
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
    let duplicates = results.duplicates();
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
