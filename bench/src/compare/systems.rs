//! Three-member clusters of beacon, etcd and ZooKeeper as real processes on loopback, with
//! one way to find the leader, SIGKILL a member and bring it back.
//!
//! Every cluster keeps its data under one work directory, so all three write to the same
//! disk, and each keeps its own durability defaults (etcd and ZooKeeper fsync their logs
//! before acknowledging a write; beacon in quorum mode does too).

use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;
use beacon::client::ConnectOptions;
use beacon::transport::certs::Ca;
use beacon::transport::tls;
use beacon_testkit::{Process, addr, beacon_args, free_ports, wait_listening};
use std::sync::Arc;

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
    process: Process,
}

impl Member {
    fn start(program: &Path, args: Vec<String>, client: SocketAddr, log: PathBuf) -> Member {
        let level = std::env::var("BEACON_BENCH_LOG").unwrap_or_else(|_| "warn".into());
        Member {
            client,
            process: Process::start(program, args, vec![("RUST_LOG".into(), level)], log),
        }
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
}

/// A running three-member (or n-member) cluster.
pub struct Cluster {
    pub kind: Kind,
    pub members: Vec<Member>,
    /// How beacon clients connect (TLS for a cluster started with it).
    pub beacon_client: ConnectOptions,
    /// Kept for its lifetime: the members' data and logs.
    pub dir: tempfile::TempDir,
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
    /// The Debian packages' locations, checked.
    pub fn find(beacon: PathBuf) -> anyhow::Result<Programs> {
        let p = Programs {
            beacon,
            etcd: "/usr/bin/etcd".into(),
            java: "/usr/bin/java".into(),
            zookeeper_classpath: "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar".into(),
        };
        for (what, path) in [
            ("etcd (Debian package etcd-server)", &p.etcd),
            ("java (a dependency of Debian package zookeeper)", &p.java),
            (
                "ZooKeeper (Debian package zookeeper)",
                &PathBuf::from("/usr/share/java/zookeeper.jar"),
            ),
        ] {
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
}

impl Cluster {
    pub fn start_beacon(programs: &Programs, n: usize, setup: &BeaconSetup) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        Cluster::start_beacon_in(dir, programs, n, setup, ConnectOptions::default())
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
        Ok(Cluster::start_beacon_in(dir, programs, n, &setup, client))
    }

    fn start_beacon_in(
        dir: tempfile::TempDir,
        programs: &Programs,
        n: usize,
        setup: &BeaconSetup,
        beacon_client: ConnectOptions,
    ) -> Cluster {
        let ports = free_ports(n);
        let members = ports
            .iter()
            .map(|p| {
                let keys = setup.config.as_object().cloned().unwrap_or_default();
                let mut args = beacon_args(dir.path(), *p, &ports, setup.tick_ms, "bench", keys);
                args.extend(["--admin".into(), "off".into()]);
                let m = Member::start(
                    &programs.beacon,
                    args,
                    addr(*p),
                    dir.path().join(format!("beacon-{p}.log")),
                );
                // In sorted order, each listening before the next starts (the demo's start).
                wait_listening(addr(*p));
                m
            })
            .collect();
        Cluster {
            kind: Kind::Beacon,
            members,
            beacon_client,
            dir,
        }
    }

    /// etcd with its defaults: heartbeat 100 ms, election timeout 1000 ms, fsync per write.
    pub fn start_etcd(programs: &Programs, n: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        let ports = free_ports(2 * n);
        let (client_ports, peer_ports) = ports.split_at(n);
        let initial: Vec<String> = (0..n)
            .map(|i| format!("e{i}=http://127.0.0.1:{}", peer_ports[i]))
            .collect();
        let members = (0..n)
            .map(|i| {
                let client = format!("http://127.0.0.1:{}", client_ports[i]);
                let peer = format!("http://127.0.0.1:{}", peer_ports[i]);
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
                    &programs.etcd,
                    args,
                    addr(client_ports[i]),
                    dir.path().join(format!("etcd-{i}.log")),
                )
            })
            .collect();
        Cluster {
            kind: Kind::Etcd,
            members,
            beacon_client: ConnectOptions::default(),
            dir,
        }
    }

    /// ZooKeeper with the Debian package's example configuration (tickTime 2000 ms,
    /// initLimit 10, syncLimit 5; forceSync on, its default).
    pub fn start_zookeeper(programs: &Programs, n: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("work directory");
        let ports = free_ports(3 * n);
        let servers: String = (0..n)
            .map(|i| {
                format!(
                    "server.{}=127.0.0.1:{}:{}\n",
                    i + 1,
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
                     clientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
                     4lw.commands.whitelist=srvr\nmaxClientCnxns=0\n{servers}",
                    data.display(),
                    ports[i]
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
                    &programs.java,
                    args,
                    addr(ports[i]),
                    dir.path().join(format!("zookeeper-{i}.log")),
                )
            })
            .collect();
        Cluster {
            kind: Kind::ZooKeeper,
            members,
            beacon_client: ConnectOptions::default(),
            dir,
        }
    }

    /// The member that leads now, as that member itself says.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.pid().is_some() && is_leader(self.kind, m.client, &self.beacon_client).await {
                return Some(i);
            }
        }
        None
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

async fn is_leader(kind: Kind, a: SocketAddr, beacon: &ConnectOptions) -> bool {
    match kind {
        Kind::Beacon => beacon_testkit::status_with(a, beacon)
            .await
            .is_some_and(|s| {
                s.leader.as_deref() == Some(a.to_string().as_str())
                    && s.beacons
                        .iter()
                        .any(|b| b.node == a.to_string() && b.is_leader)
            }),
        Kind::Etcd => etcd_status(a)
            .await
            .is_some_and(|(me, leader)| me == leader),
        Kind::ZooKeeper => zookeeper_mode(a).await.is_some_and(|m| m == "leader"),
    }
}

/// (this member's id, the leader's id) as the etcd member at `a` reports them.
async fn etcd_status(a: SocketAddr) -> Option<(u64, u64)> {
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(500));
    let mut c = etcd_client::Client::connect([format!("http://{a}")], Some(opts))
        .await
        .ok()?;
    let s = c.status().await.ok()?;
    let me = s.header()?.member_id();
    Some((me, s.leader()))
}

/// ZooKeeper's `srvr` four-letter word: the member's mode (leader, follower, standalone).
async fn zookeeper_mode(a: SocketAddr) -> Option<String> {
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect_timeout(&a, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
        s.write_all(b"srvr").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_owned())
    })
    .await
    .ok()
    .flatten()
}
