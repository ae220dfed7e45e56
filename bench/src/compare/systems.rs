//! Three-member clusters of beacon, etcd and ZooKeeper as real processes, on loopback or each
//! member in a network namespace of its own ([`Net`]), with one way to find the leader, to
//! SIGKILL, SIGSTOP or cut off a member and to bring it back.
//!
//! Every cluster keeps its data under one work directory, so all three write to the same
//! disk, and each keeps its own durability defaults (etcd and ZooKeeper fsync their logs
//! before acknowledging a write; beacon in quorum mode does too).

use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use beacon::client::ConnectOptions;
use beacon::transport::tls;
use beacon_certs::Ca;
use beacon_testkit::{Process, beacon_args_at, free_ports, wait_listening_within};
use std::sync::Arc;

use super::netns::Net;

/// Member `i`'s address: its namespace's, or loopback.
fn host(net: Option<&Net>, i: usize) -> IpAddr {
    net.map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |n| n.ip(i))
}

/// Which coordinator a cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Beacon,
    Etcd,
    ZooKeeper,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Beacon => "beacon",
            Kind::Etcd => "etcd",
            Kind::ZooKeeper => "ZooKeeper",
        })
    }
}

/// One member process. Killed when dropped.
pub struct Member {
    /// Where clients connect.
    pub client: SocketAddr,
    /// A beacon's admin HTTP API (its `/metrics`), where it serves one.
    pub admin: Option<SocketAddr>,
    process: Process,
}

impl Member {
    /// Starts member `i` (in its namespace, with `net`), with `env` set for the process
    /// besides `RUST_LOG`.
    fn start(
        net: Option<&Net>,
        i: usize,
        program: &Path,
        args: Vec<String>,
        client: SocketAddr,
        log: PathBuf,
        mut env: Vec<(String, String)>,
    ) -> Member {
        let (program, args) = match net {
            None => (program.to_owned(), args),
            Some(net) => {
                let (program, args) = net.wrap(i, &program.display().to_string(), args);
                (PathBuf::from(program), args)
            }
        };
        let level = std::env::var("BEACON_BENCH_LOG").unwrap_or_else(|_| "warn".into());
        Member {
            client,
            admin: None,
            process: Process::start(
                &program,
                args,
                {
                    env.push(("RUST_LOG".into(), level));
                    env
                },
                log,
            ),
        }
    }

    /// SIGSTOP: the process hangs with its sockets open.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// SIGCONT after [`Member::pause`].
    pub fn resume(&self) {
        self.process.signal(libc::SIGCONT);
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    pub fn restart(&mut self) {
        self.process.restart();
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the process is still running (it has not exited or been killed).
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }
}

/// A running three-member (or n-member) cluster.
pub struct Cluster {
    pub kind: Kind,
    pub members: Vec<Member>,
    /// How beacon clients connect (TLS for a cluster started with it).
    pub beacon_client: ConnectOptions,
    /// Which of beacon's APIs its clients call (the native protocol, or gRPC).
    pub via: Via,
    /// Kept for its lifetime: the members' data and logs.
    pub dir: tempfile::TempDir,
    /// The members' namespaces, when each runs in one (removed after the members stop).
    pub net: Option<Net>,
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    pub beacon: PathBuf,
    pub etcd: PathBuf,
    pub java: PathBuf,
    /// ZooKeeper's class path (the Debian package's jar, which names its dependencies).
    pub zookeeper_classpath: String,
}

impl Programs {
    /// Where the programs are: the Debian packages' locations, or those the environment
    /// names (`BEACON_BENCH_ETCD`, `BEACON_BENCH_JAVA`, `BEACON_BENCH_ZOOKEEPER_CP`, a class
    /// path holding ZooKeeper's jar and its dependencies). Only the systems in `needed` must
    /// be there.
    pub fn find(beacon: PathBuf, needed: &[Kind]) -> anyhow::Result<Programs> {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
        let p = Programs {
            beacon,
            etcd: var("BEACON_BENCH_ETCD", "/usr/bin/etcd").into(),
            java: var("BEACON_BENCH_JAVA", "/usr/bin/java").into(),
            zookeeper_classpath: var(
                "BEACON_BENCH_ZOOKEEPER_CP",
                "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
            ),
        };
        let zk_jar = p
            .zookeeper_classpath
            .split(':')
            .find(|e| e.ends_with(".jar"))
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut checks: Vec<(&str, &PathBuf)> = Vec::new();
        if needed.contains(&Kind::Etcd) {
            checks.push((
                "etcd (Debian package etcd-server; or set BEACON_BENCH_ETCD)",
                &p.etcd,
            ));
        }
        if needed.contains(&Kind::ZooKeeper) {
            checks.push((
                "java (a dependency of Debian package zookeeper; or set BEACON_BENCH_JAVA)",
                &p.java,
            ));
            checks.push((
                "ZooKeeper's jar (Debian package zookeeper; or set BEACON_BENCH_ZOOKEEPER_CP)",
                &zk_jar,
            ));
        }
        for (what, path) in checks {
            if !path.exists() {
                bail!(
                    "{what} not found at {}: run bench/run, which installs it",
                    path.display()
                );
            }
        }
        Ok(p)
    }
}

/// How a beacon cluster is configured for a run.
#[derive(Debug, Clone)]
pub struct BeaconSetup {
    pub tick_ms: u64,
    /// Extra config keys, a JSON object.
    pub config: serde_json::Value,
    /// A backup every member's data directory is built from (`beacon restore`) before it
    /// starts.
    pub restore: Option<PathBuf>,
}

impl Cluster {
    /// The admin API of the member clients reach at `client`, if it serves one.
    pub fn admin_of(&self, client: SocketAddr) -> Option<SocketAddr> {
        self.members
            .iter()
            .find(|m| m.client == client)
            .and_then(|m| m.admin)
    }

    pub fn start_beacon(programs: &Programs, n: usize, setup: &BeaconSetup) -> Cluster {
        Cluster::start_beacon_on(programs, n, setup, None)
    }

    /// [`Cluster::start_beacon`], each member in its namespace of `net` when given.
    pub fn start_beacon_on(
        programs: &Programs,
        n: usize,
        setup: &BeaconSetup,
        net: Option<Net>,
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        Cluster::start_beacon_in(dir, programs, n, setup, ConnectOptions::default(), net)
    }

    /// [`Cluster::start_beacon`] with TLS: a throw-away CA signs each beacon's certificate,
    /// and the beacons verify each other against it; clients verify the beacons.
    pub fn start_beacon_tls(
        programs: &Programs,
        n: usize,
        setup: &BeaconSetup,
    ) -> anyhow::Result<Cluster> {
        let dir = tempfile::tempdir().expect("work directory");
        let ca = Ca::new(dir.path(), "ca")?;
        ca.issue(dir.path(), "beacon")?;
        let mut setup = setup.clone();
        if let Some(keys) = setup.config.as_object_mut() {
            keys.insert(
                "tls".into(),
                serde_json::json!({
                    "cert": dir.path().join("beacon.pem"),
                    "key": dir.path().join("beacon.key"),
                    "ca": ca.pem,
                }),
            );
        }
        let client = ConnectOptions {
            tls: Some(Arc::new(tls::client_config(&ca.pem, None)?)),
            ..ConnectOptions::default()
        };
        Ok(Cluster::start_beacon_in(
            dir, programs, n, &setup, client, None,
        ))
    }

    fn start_beacon_in(
        dir: tempfile::TempDir,
        programs: &Programs,
        n: usize,
        setup: &BeaconSetup,
        beacon_client: ConnectOptions,
        net: Option<Net>,
    ) -> Cluster {
        let ports = free_ports(2 * n);
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|i| SocketAddr::new(host(net.as_ref(), i), ports[i]))
            .collect();
        let members = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let keys = setup.config.as_object().cloned().unwrap_or_default();
                let mut args = beacon_args_at(dir.path(), *a, &addrs, setup.tick_ms, "bench", keys);
                // The admin API (for `/metrics`) on loopback; none for beacons in namespaces.
                let admin = net
                    .is_none()
                    .then(|| SocketAddr::from(([127, 0, 0, 1], ports[n + i])));
                let admin_flag = admin.map_or("off".to_owned(), |a| a.to_string());
                args.extend(["--admin".into(), admin_flag]);
                if let Some(backup) = &setup.restore {
                    restore(&programs.beacon, &args, backup);
                }
                let mut m = Member::start(
                    net.as_ref(),
                    i,
                    &programs.beacon,
                    args,
                    *a,
                    dir.path().join(format!("beacon-{i}.log")),
                    beacon_env(),
                );
                m.admin = admin;
                // In sorted order, each listening before the next starts (the demo's start);
                // a restored one loads its state first.
                let limit = if setup.restore.is_some() { 600 } else { 10 };
                wait_listening_within(*a, Duration::from_secs(limit));
                m
            })
            .collect();
        Cluster {
            kind: Kind::Beacon,
            members,
            beacon_client,
            via: Default::default(),
            dir,
            net,
        }
    }

    /// etcd with its defaults (heartbeat 100 ms, election timeout 1000 ms, fsync per write),
    /// each member in its namespace of `net` when given.
    pub fn start_etcd_on(programs: &Programs, n: usize, net: Option<Net>) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        let ports = free_ports(2 * n);
        let (client_ports, peer_ports) = ports.split_at(n);
        let at = |i: usize, port: u16| SocketAddr::new(host(net.as_ref(), i), port);
        let initial: Vec<String> = (0..n)
            .map(|i| format!("e{i}=http://{}", at(i, peer_ports[i])))
            .collect();
        let members = (0..n)
            .map(|i| {
                let client = format!("http://{}", at(i, client_ports[i]));
                let peer = format!("http://{}", at(i, peer_ports[i]));
                let args = vec![
                    format!("--name=e{i}"),
                    format!("--data-dir={}", dir.path().join(format!("e{i}")).display()),
                    format!("--listen-client-urls={client}"),
                    format!("--advertise-client-urls={client}"),
                    format!("--listen-peer-urls={peer}"),
                    format!("--initial-advertise-peer-urls={peer}"),
                    format!("--initial-cluster={}", initial.join(",")),
                    "--initial-cluster-state=new".into(),
                    "--initial-cluster-token=bench".into(),
                    "--log-level=warn".into(),
                ];
                Member::start(
                    net.as_ref(),
                    i,
                    &programs.etcd,
                    args,
                    at(i, client_ports[i]),
                    dir.path().join(format!("etcd-{i}.log")),
                    Vec::new(),
                )
            })
            .collect();
        Cluster {
            kind: Kind::Etcd,
            members,
            beacon_client: ConnectOptions::default(),
            via: Default::default(),
            dir,
            net,
        }
    }

    /// ZooKeeper with the Debian package's example configuration (tickTime 2000 ms,
    /// initLimit 10, syncLimit 5; forceSync on, its default), each member in its namespace
    /// of `net` when given.
    pub fn start_zookeeper_on(programs: &Programs, n: usize, net: Option<Net>) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        let ports = free_ports(3 * n);
        let ip = |i: usize| host(net.as_ref(), i);
        let servers: String = (0..n)
            .map(|i| {
                format!(
                    "server.{}={}:{}:{}\n",
                    i + 1,
                    ip(i),
                    ports[n + i],
                    ports[2 * n + i]
                )
            })
            .collect();
        let members = (0..n)
            .map(|i| {
                let data = dir.path().join(format!("z{i}"));
                std::fs::create_dir_all(&data).expect("zookeeper data dir");
                std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("myid");
                let cfg = dir.path().join(format!("z{i}.cfg"));
                let mut f = File::create(&cfg).expect("zookeeper config");
                write!(
                    f,
                    "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\n\
                     clientPort={}\nclientPortAddress={}\nadmin.enableServer=false\n\
                     4lw.commands.whitelist=srvr\nmaxClientCnxns=0\n{servers}",
                    data.display(),
                    ports[i],
                    ip(i)
                )
                .expect("write zookeeper config");
                let args = vec![
                    format!("-Dzookeeper.log.dir={}", dir.path().display()),
                    "-cp".into(),
                    programs.zookeeper_classpath.clone(),
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
                    cfg.display().to_string(),
                ];
                Member::start(
                    net.as_ref(),
                    i,
                    &programs.java,
                    args,
                    SocketAddr::new(ip(i), ports[i]),
                    dir.path().join(format!("zookeeper-{i}.log")),
                    Vec::new(),
                )
            })
            .collect();
        Cluster {
            kind: Kind::ZooKeeper,
            members,
            beacon_client: ConnectOptions::default(),
            via: Default::default(),
            dir,
            net,
        }
    }

    /// Cuts member `i` off the network (its namespace's link down).
    pub fn cut(&self, i: usize) -> anyhow::Result<()> {
        match &self.net {
            Some(net) => net.cut(i),
            None => bail!("{} cluster runs on loopback: nothing to cut", self.kind),
        }
    }

    /// Reconnects member `i` after [`Cluster::cut`].
    pub fn heal(&self, i: usize) -> anyhow::Result<()> {
        match &self.net {
            Some(net) => net.heal(i),
            None => Ok(()),
        }
    }

    /// The member that leads now, as every running member agrees: a member that was cut off
    /// or stopped may still say it leads for a moment after it is back, and one member's
    /// word is not enough to start a round with.
    pub async fn leader(&self) -> Option<usize> {
        let running: Vec<usize> = (0..self.members.len())
            .filter(|i| self.members[*i].pid().is_some())
            .collect();
        let addrs: Vec<SocketAddr> = running.iter().map(|i| self.members[*i].client).collect();
        match self.kind {
            Kind::Beacon => {
                let leader =
                    beacon_testkit::agreed_leader_with(&addrs, &self.beacon_client).await?;
                running
                    .into_iter()
                    .find(|i| self.members[*i].client.to_string() == leader)
            }
            Kind::Etcd => {
                let mut agreed = None;
                let mut leader = None;
                for (i, a) in running.iter().zip(&addrs) {
                    let (me, says, _) = etcd_status(*a).await?;
                    if says == 0 || agreed.is_some_and(|l| l != says) {
                        return None;
                    }
                    agreed = Some(says);
                    if me == says {
                        leader = Some(*i);
                    }
                }
                leader
            }
            Kind::ZooKeeper => {
                let mut leader = None;
                for (i, a) in running.iter().zip(&addrs) {
                    match zookeeper_mode(*a).await?.as_str() {
                        "leader" if leader.is_none() => leader = Some(*i),
                        "follower" => {}
                        _ => return None,
                    }
                }
                leader
            }
        }
    }

    /// Waits until every member is up and one leads; returns the leader.
    pub async fn ready(&self, limit: Duration) -> anyhow::Result<usize> {
        let deadline = Instant::now() + limit;
        loop {
            let mut up = 0;
            for m in &self.members {
                up += usize::from(responds(self.kind, m.client, &self.beacon_client).await);
            }
            if up == self.members.len()
                && let Some(l) = self.leader().await
            {
                return Ok(l);
            }
            if Instant::now() > deadline {
                bail!(
                    "{} cluster not ready within {limit:?} ({up} of {} members answer); logs in {}",
                    self.kind,
                    self.members.len(),
                    self.dir.path().display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// [`Cluster::ready`] within two minutes, then the leader's process ID and client
    /// address (the parts that read the leader's CPU and memory).
    pub async fn leader_process(&self) -> anyhow::Result<(u32, SocketAddr)> {
        let leader = self.ready(Duration::from_secs(120)).await?;
        let m = &self.members[leader];
        Ok((m.pid().context("leader pid")?, m.client))
    }

    /// The leader's term as the leader reports it (ZooKeeper: its epoch, the high half of
    /// its zxid); a run that ends on the term it began with held no election.
    pub async fn leader_term(&self) -> Option<u64> {
        let leader = self.leader().await?;
        let a = self.members[leader].client;
        match self.kind {
            Kind::Beacon => beacon_testkit::status_with(a, &self.beacon_client)
                .await
                .map(|s| s.term),
            Kind::Etcd => etcd_status(a).await.map(|(_, _, term)| term),
            Kind::ZooKeeper => zookeeper_srvr(a, "Zxid: ")
                .await
                .and_then(|z| u64::from_str_radix(z.trim_start_matches("0x"), 16).ok())
                .map(|zxid| zxid >> 32),
        }
    }

    pub fn endpoints(&self, which: &[usize]) -> Vec<SocketAddr> {
        which.iter().map(|i| self.members[*i].client).collect()
    }
}

/// Whether the member at `a` answers its health probe (a beacon: and sees every beacon
/// online, so a restarted member has rejoined before the next round).
async fn responds(kind: Kind, a: SocketAddr, beacon: &ConnectOptions) -> bool {
    match kind {
        Kind::Beacon => beacon_testkit::status_with(a, beacon)
            .await
            .is_some_and(|s| s.beacons.iter().all(|b| b.is_online)),
        Kind::Etcd => etcd_status(a).await.is_some(),
        Kind::ZooKeeper => zookeeper_mode(a)
            .await
            .is_some_and(|m| m == "leader" || m == "follower"),
    }
}

/// (this member's id, the leader's id, the raft term) as the etcd member at `a` reports
/// them.
async fn etcd_status(a: SocketAddr) -> Option<(u64, u64, u64)> {
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(500));
    let mut c = etcd_client::Client::connect([format!("http://{a}")], Some(opts))
        .await
        .ok()?;
    let s = c.status().await.ok()?;
    let me = s.header()?.member_id();
    Some((me, s.leader(), s.raft_term()))
}

/// ZooKeeper's `srvr` four-letter word: the member's mode (leader, follower, standalone).
async fn zookeeper_mode(a: SocketAddr) -> Option<String> {
    zookeeper_srvr(a, "Mode: ").await
}

/// The value of the line starting with `field` in the member's `srvr` answer.
async fn zookeeper_srvr(a: SocketAddr, field: &'static str) -> Option<String> {
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect_timeout(&a, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
        s.write_all(b"srvr").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|m| m.trim().to_owned())
    })
    .await
    .ok()
    .flatten()
}

/// Which of beacon's APIs a client calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Via {
    /// The native framed protocol (`beacon::client`).
    #[default]
    Native,
    /// The gRPC API on the same port, through `h2` (the bench's `h2_client`).
    Grpc,
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Via::Native => "native",
            Via::Grpc => "gRPC",
        })
    }
}

/// The environment a beacon runs with as `conf/systemd/beacon.service` and the container
/// image start it: its heap in transparent huge pages, so that a beacon killed with
/// millions of registrations closes its sockets (and its peers re-elect) without first
/// freeing gigabytes page by page. Left alone when the bench's own environment sets
/// `GLIBC_TUNABLES`, which the beacons then inherit.
pub(super) fn beacon_env() -> Vec<(String, String)> {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return Vec::new();
    }
    vec![("GLIBC_TUNABLES".into(), "glibc.malloc.hugetlb=1".into())]
}

/// Builds the data directory of the beacon `args` start from `backup` (`beacon restore`),
/// as an operator restores a cluster; panics with its output if it fails.
fn restore(beacon: &Path, args: &[String], backup: &Path) {
    let out = std::process::Command::new(beacon)
        .args(args)
        .arg("restore")
        .arg(backup)
        .output()
        .expect("run beacon restore");
    assert!(
        out.status.success(),
        "beacon restore {} failed: {}{}",
        backup.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("    {}", String::from_utf8_lossy(&out.stdout));
}
