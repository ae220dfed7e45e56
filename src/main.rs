//! `beacon`: the daemon. With no arguments it runs a single beacon on 127.0.0.1:16000 from
//! the embedded default configuration.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use beacon::config::{Config, Overrides};
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "beacon", version, about = "beacon cluster coordinator daemon")]
struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// JSON configuration file (default: the embedded single-beacon configuration; see
    /// conf/beacon.json).
    #[arg(short, long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// This beacon's ip:port, or host:port resolved at start (overrides `node`).
    #[arg(long, value_name = "IP:PORT", global = true)]
    listen: Option<String>,
    /// The cluster's beacons, comma-separated; this beacon is added if missing (overrides
    /// `beacon`).
    #[arg(long, value_name = "IP:PORT,...", value_delimiter = ',', global = true)]
    peers: Option<Vec<String>>,
    /// The cluster's learners, comma-separated: beacons that keep a replica and serve reads
    /// but never lead nor count for a majority; list this beacon to start it as one
    /// (overrides `learners`).
    #[arg(long, value_name = "IP:PORT,...", value_delimiter = ',', global = true)]
    learners: Option<Vec<String>>,
    /// How writes are made safe: `quorum` or `classic` (overrides `mode`; default: quorum,
    /// classic for a pair of beacons).
    #[arg(long, value_name = "quorum|classic", global = true)]
    mode: Option<String>,
    /// Heartbeat interval in milliseconds (overrides `tick_ms`).
    #[arg(long, value_name = "MS", global = true)]
    tick_ms: Option<u64>,
    /// Cluster name (overrides `cluster`).
    #[arg(long, global = true)]
    cluster: Option<String>,
    /// Data directory; `{node}` expands to ip_port (overrides `data_dir`).
    #[arg(long, value_name = "DIR", global = true)]
    data_dir: Option<String>,
    /// Admin HTTP address, or `off` (overrides `admin`; default: this beacon's IP, its port
    /// + 88).
    #[arg(long, value_name = "IP:PORT|off", global = true)]
    admin: Option<String>,
    /// Answer DNS (UDP and TCP) at this address from this beacon's replica, or `off`
    /// (overrides `dns`; default: off): `TYPE.service.beacon.` and `ID.node.beacon.`.
    #[arg(long, value_name = "IP:PORT|off", global = true)]
    dns: Option<String>,
    /// How long a service's registration lives without a report (overrides `lease_ms`;
    /// default: 10 s, or 10 ticks if longer).
    #[arg(long, value_name = "MS", global = true)]
    lease_ms: Option<u64>,
    /// The node IDs handed out, e.g. 1-1023 (overrides `id_range`).
    #[arg(long, value_name = "FIRST-LAST", global = true)]
    id_range: Option<String>,
    /// This beacon's TLS certificate, PEM (overrides `tls.cert`); with --tls-key, TLS on.
    #[arg(long, value_name = "FILE", global = true)]
    tls_cert: Option<String>,
    /// The key of --tls-cert, PEM (overrides `tls.key`).
    #[arg(long, value_name = "FILE", global = true)]
    tls_key: Option<String>,
    /// The CA that signed the beacons' certificates, PEM (overrides `tls.ca`).
    #[arg(long, value_name = "FILE", global = true)]
    tls_ca: Option<String>,
    /// Validate the configuration, print it (as a config file, JSON) and exit.
    #[arg(long, global = true)]
    check_config: bool,
    /// Start on a data directory written under another configuration (cluster name,
    /// id_range, mode, beacon list), carrying its state into this one once it is checked to
    /// fit (every stored node ID inside the range). Every beacon of a cluster must change
    /// its configuration together.
    #[arg(long, global = true)]
    adopt_config: bool,
    /// Repair a stored term beyond 2^48 (a corrupt file, or a hostile term an older version
    /// adopted): take the highest term of this beacon's own log instead. Every beacon of the
    /// cluster must be stopped and started once with it together: a term lowered on one
    /// beacon alone would let an old leader's entries back in.
    #[arg(long, global = true)]
    reset_term: bool,
    /// Join a running cluster: ask one of these beacons to add this one (as a learner the
    /// leader promotes once it has kept up) and start with the membership it answers. Only
    /// asked with an empty data directory; a beacon that joined restarts from its state.
    /// Runs in quorum mode.
    #[arg(long, value_name = "IP:PORT,...", value_delimiter = ',')]
    join: Option<Vec<String>>,
    /// With --join, a client token of role admin for a cluster that authenticates clients
    /// (or set BEACON_JOIN_TOKEN).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BEACON_JOIN_TOKEN",
        hide_env_values = true
    )]
    join_token: Option<String>,
}

/// What the daemon binary does besides running a beacon.
#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Build this beacon's data directory for a new cluster from a backup
    /// (`nebcli snapshot save`), then exit. Run it for every beacon of the new cluster, each
    /// with its own --data-dir and --listen and the same --peers and --cluster (a name other
    /// than the old cluster's); then start them.
    Restore {
        /// The backup file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("beacon: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut overrides = Overrides {
        listen: args.listen,
        peers: args.peers,
        learners: args.learners,
        tick_ms: args.tick_ms,
        cluster: args.cluster,
        data_dir: args.data_dir,
        admin: args.admin,
        dns: args.dns,
        mode: args.mode,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        tls_ca: args.tls_ca,
        ..Overrides::default()
    };
    // Flags for a machine's keys: the key is named here, the machine checks the value.
    if let Some(lease) = args.lease_ms {
        overrides = overrides.with_key("--lease-ms", "lease_ms", lease);
    }
    if let Some(range) = args.id_range {
        overrides = overrides.with_key("--id-range", "id_range", range);
    }
    let mut config = Config::load(args.config.as_deref(), &overrides)?;
    if let Some(Sub::Restore { file }) = &args.command {
        let backup = beacon::backup::read(file)?;
        let done = beacon::backup::restore(&backup, &config)?;
        println!(
            "restored {} (cluster {}, index {}, term {}) into {} for cluster {}: {}",
            file.display(),
            backup.cluster,
            done.index,
            done.term,
            done.data_dir.display(),
            config.cluster,
            done.contents
        );
        return Ok(());
    }
    if args.check_config {
        for note in &config.resolved {
            eprintln!("beacon: {note}");
        }
        let json = serde_json::to_string_pretty(&config.to_json())?;
        println!("{json}");
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let options = beacon::server::StartOptions {
            adopt_config: args.adopt_config,
            reset_term: args.reset_term,
        };
        // The handlers are in place before the port opens: a signal sent as soon as the
        // beacon answers stops it gracefully, never by the signal's default action.
        let shutdown = shutdown_signal()?;
        if let Some(seeds) = &args.join {
            config = beacon::server::join::join(config, seeds, args.join_token.clone()).await?;
        }
        let server = beacon::server::Server::bind_with(config, options).await?;
        server.run(shutdown).await;
        anyhow::Ok(())
    })
}

/// Completes on SIGINT or SIGTERM; the handlers are installed at once.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}
