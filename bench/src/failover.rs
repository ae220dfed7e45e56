//! Failover time: fault the leader, then poll every survivor until all of them name the same
//! new leader and see it claiming leadership.
//!
//! Two faults: `kill` (SIGKILL: the kernel closes the leader's sockets, survivors notice the
//! dropped connection at once) and `hang` (SIGSTOP: the process freezes with its sockets
//! open, as a hung machine or a network partition looks; survivors notice only when its
//! heartbeats stop for three ticks).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use beacon::client::{Client, ConnectOptions};
use beacon_testkit::{Cluster, addr, agreed_leader, eventually, free_ports, status};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// SIGKILL the leader (connections drop).
    Kill,
    /// SIGSTOP the leader (connections stay open, heartbeats stop).
    Hang,
}

#[derive(Debug, clap::Args)]
pub struct Options {
    /// Heartbeat interval of the beacons (default: beacon's own).
    #[arg(long, default_value_t = beacon::config::DEFAULT_TICK_MS)]
    tick_ms: u64,
    /// Number of failovers to time.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Number of beacons.
    #[arg(long, default_value_t = 3)]
    beacons: usize,
    #[arg(long, value_enum, default_value_t = Fault::Kill)]
    fault: Fault,
}

/// Polls `survivors` (one kept-open connection each) until they agree on a leader other than
/// `old`; returns when that happened.
async fn wait_new_leader(
    survivors: &[SocketAddr],
    old: &str,
    limit: Duration,
) -> anyhow::Result<Instant> {
    let opts = ConnectOptions {
        timeout: Duration::from_millis(500),
        ..ConnectOptions::default()
    };
    let mut clients: Vec<Option<Client>> = survivors.iter().map(|_| None).collect();
    let deadline = Instant::now() + limit;
    loop {
        let mut agreed: Option<String> = None;
        let mut all = true;
        for (i, a) in survivors.iter().enumerate() {
            if clients[i].is_none() {
                clients[i] = Client::connect(&a.to_string(), &opts).await.ok();
            }
            let view = match clients[i].as_mut() {
                Some(c) => c.beacon_status().await.ok(),
                None => None,
            };
            let Some(view) = view else {
                clients[i] = None;
                all = false;
                break;
            };
            let leader = view.leader.clone().unwrap_or_default();
            let claims = view
                .beacons
                .iter()
                .any(|b| b.node == leader && b.is_leader && b.is_online);
            if leader.is_empty()
                || leader == old
                || !claims
                || agreed.as_ref().is_some_and(|l| *l != leader)
            {
                all = false;
                break;
            }
            agreed = Some(leader);
        }
        if all {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!("survivors did not agree on a new leader within {limit:?}");
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

pub async fn run(bin: &Path, opts: &Options) -> anyhow::Result<()> {
    if opts.beacons < 2 {
        bail!("--beacons must be at least 2 for a failover");
    }
    let ports = free_ports(opts.beacons);
    let all: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    let mut cluster = Cluster::start(bin, &ports, opts.tick_ms, "bench-failover");
    let settle = Duration::from_millis(opts.tick_ms * 20).max(Duration::from_secs(5));
    println!(
        "failover: {} beacons, tick {} ms, fault {:?}, {} rounds",
        opts.beacons, opts.tick_ms, opts.fault, opts.rounds
    );
    let mut times = Vec::new();
    for round in 1..=opts.rounds {
        let leader = eventually(settle, || agreed_leader(&all))
            .await
            .context("cluster has no agreed leader")?;
        let i = all
            .iter()
            .position(|a| a.to_string() == leader)
            .expect("leader is a member");
        let survivors: Vec<SocketAddr> = all.iter().copied().filter(|a| *a != all[i]).collect();

        let faulted = Instant::now();
        match opts.fault {
            Fault::Kill => cluster.beacons[i].kill(),
            Fault::Hang => cluster.beacons[i].signal(libc::SIGSTOP),
        }
        let agreed = wait_new_leader(&survivors, &leader, settle).await?;
        let took = agreed - faulted;
        let new_leader = status(survivors[0])
            .await
            .and_then(|s| s.leader)
            .unwrap_or_default();
        println!(
            "round {round}: leader {leader} {}; {new_leader} agreed by {} survivors after {:.1} ms",
            match opts.fault {
                Fault::Kill => "killed",
                Fault::Hang => "stopped",
            },
            survivors.len(),
            took.as_secs_f64() * 1e3
        );
        times.push(took);

        // Bring it back and let the cluster settle (everyone online) before the next round.
        match opts.fault {
            Fault::Kill => cluster.beacons[i].restart(),
            Fault::Hang => cluster.beacons[i].signal(libc::SIGCONT),
        }
        eventually(settle, || async {
            for a in &all {
                if !status(*a).await?.beacons.iter().all(|b| b.is_online) {
                    return None;
                }
            }
            agreed_leader(&all).await
        })
        .await
        .context("cluster did not settle after the failed leader came back")?;
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "median {:.1} ms, min {:.1} ms, max {:.1} ms over {} rounds (tick {} ms, fault {:?})",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len(),
        opts.tick_ms,
        opts.fault
    );
    Ok(())
}
