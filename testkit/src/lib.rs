//! Real `beacon` processes on loopback ports, for beacon's integration tests and benchmarks.
//!
//! Callers pass the path of the `beacon` binary (integration tests have it as
//! `env!("CARGO_BIN_EXE_beacon")`).

pub mod drivers;
pub mod linearizability;
pub mod proxy;

/// Throw-away CAs and certificates, re-exported for tests.
pub use beacon_certs as certs;
pub mod rng;
pub mod sim;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use beacon::client::{Client, ConnectOptions};
use beacon::pb;

/// The environment variable that confines every port the tests open: `LOW-HIGH`
/// (`BEACON_TEST_PORTS=20000-24999`), for a machine where other ports are taken or watched.
pub const PORTS_VAR: &str = "BEACON_TEST_PORTS";

/// The ports tests may open, `low..high` with room for each one's admin port (+ 88) below
/// `high`: [`PORTS_VAR`] when set (a value that is no range stops the test, saying so),
/// else from 10,000 to just below the kernel's ephemeral range (`ip_local_port_range`).
///
/// Below the ephemeral range: a port the kernel handed out for a listener was also one it
/// could hand out next as the source port of some outgoing connection (a beacon dialling a
/// peer, a proxy), and a beacon starting a moment later then found its address in use.
/// `None` when no such range is at least 1,000 ports wide (the kernel then picks).
pub fn port_range() -> Option<(u16, u16)> {
    if let Some(value) = std::env::var_os(PORTS_VAR) {
        return Some(range_of(&value.to_string_lossy()).unwrap_or_else(|e| panic!("{e}")));
    }
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral.saturating_sub(100));
    (high > low + 1_000).then_some((low, high))
}

/// The range [`PORTS_VAR`] names (`LOW-HIGH`), as `low..high` with each port's admin port
/// (+ 88) inside it.
pub fn range_of(value: &str) -> Result<(u16, u16), String> {
    let parsed = value.split_once('-').and_then(|(lo, hi)| {
        Some((
            lo.trim().parse::<u16>().ok()?,
            hi.trim().parse::<u16>().ok()?,
        ))
    });
    match parsed {
        Some((lo, hi)) if lo >= 1024 && u32::from(hi) >= u32::from(lo) + 100 => Ok((lo, hi - 88)),
        _ => Err(format!(
            "{PORTS_VAR}={value}: give a range LOW-HIGH of at least 100 ports from 1024 (each test port has its admin port 88 above it inside the range)"
        )),
    }
}

/// `n` distinct loopback ports that were free a moment ago, ascending (so index order is the
/// election's sorted order), drawn at random from [`port_range`], each with the port 88
/// above it (a beacon's default admin port) free too, both reserved against every other
/// test process of the machine ([`reserve`]).
pub fn free_ports(n: usize) -> Vec<u16> {
    sorted_ports(&free_listeners(n))
}

/// A loopback listener on a free port of [`port_range`], for a test's own server (a proxy).
pub fn free_listener() -> TcpListener {
    free_listeners(1).pop().expect("one listener")
}

fn free_listeners(n: usize) -> Vec<TcpListener> {
    match port_range() {
        Some(range) => listeners_in(n, range)
            .or_else(|e| {
                std::env::var_os(PORTS_VAR)
                    .is_none()
                    .then(|| ephemeral_listeners(n))
                    .ok_or(e)
            })
            .unwrap_or_else(|e| panic!("{e}")),
        None => ephemeral_listeners(n),
    }
}

/// Every port this process has handed out from [`port_range`]: a port is free only until its
/// test's beacon binds it, so without this record two tests running side by side in one test
/// binary (`cargo test`'s threads) could draw the same port a moment apart, and one cluster's
/// beacon then dialled the other's ("wrong cluster").
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Whether `port` or its admin port (+ 88) is a port, or the admin port of a port, already
/// handed out by this process.
fn handed_out(handed: &std::collections::BTreeSet<u16>, port: u16) -> bool {
    [Some(port), port.checked_sub(88), port.checked_add(88)]
        .into_iter()
        .flatten()
        .any(|p| handed.contains(&p))
}

/// `n` listeners on free ports of `low..high`, each with its port + 88 free too, none handed
/// out before by this process.
fn listeners_in(n: usize, (low, high): (u16, u16)) -> Result<Vec<TcpListener>, String> {
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    static DRAWN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32)
        ^ DRAWN.fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed);
    let mut listeners: Vec<TcpListener> = Vec::new();
    let mut tries = 0;
    while listeners.len() < n && tries < 10_000 {
        tries += 1;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let port = low + (seed % u64::from(high - low)) as u16;
        // Not another's admin port (88 apart), free now, and so is its own admin port
        // (not held: only checked).
        let taken = |p: u16| {
            listeners
                .iter()
                .any(|l| l.local_addr().is_ok_and(|a| a.port() == p))
        };
        if taken(port.wrapping_sub(88)) || taken(port + 88) {
            continue;
        }
        // A narrow range used up by a long test binary: the earliest tests' clusters are
        // gone by now, so their ports may be drawn again.
        if handed_out(&handed, port) {
            if handed.len() * 3 < usize::from(high - low) / 2 {
                continue;
            }
            handed.clear();
        }
        let Ok(l) = TcpListener::bind(("127.0.0.1", port)) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port + 88)).is_err() {
            continue;
        }
        if !reserve(port) || !reserve(port + 88) {
            continue;
        }
        listeners.push(l);
    }
    if listeners.len() < n {
        return Err(format!(
            "{PORTS_VAR}: no {n} free ports in {low}-{high} after {tries} tries"
        ));
    }
    handed.extend(sorted_ports(&listeners));
    Ok(listeners)
}

/// The ports this process holds a reservation of: the lock of each port's file, held until
/// the process ends (the kernel lets it go then, however the process ends).
static RESERVED: std::sync::Mutex<std::collections::BTreeMap<u16, std::fs::File>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Reserves `port` against every other test process of this machine: a port checked free is
/// free only until its beacon binds it, and a beacon's admin port (+ 88) is checked but not
/// bound until the beacon starts, so two test processes side by side (nextest runs each test
/// in a process of its own) could draw one port a moment apart, and one beacon then failed
/// to bind it. A port is reserved by an exclusive lock on a file named after it in the
/// temporary directory; false when another process holds it. A port this process reserved
/// before is its own to hand out again.
fn reserve(port: u16) -> bool {
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    if reserved.contains_key(&port) {
        return true;
    }
    let dir = std::env::temp_dir().join("beacon-test-ports");
    let _ = std::fs::create_dir_all(&dir);
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
    {
        Ok(file) => file,
        // No place for the files (a read-only temporary directory): the check alone, as
        // before.
        Err(_) => return true,
    };
    match file.try_lock() {
        Ok(()) => {
            reserved.insert(port, file);
            true
        }
        Err(std::fs::TryLockError::WouldBlock) => false,
        // Locks not supported where the files are: the check alone.
        Err(std::fs::TryLockError::Error(_)) => true,
    }
}

/// `n` listeners on ports the kernel picks (from its ephemeral range), when no range below
/// it can be had.
fn ephemeral_listeners(n: usize) -> Vec<TcpListener> {
    (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect()
}

/// The ports `listeners` hold, ascending.
fn sorted_ports(listeners: &[TcpListener]) -> Vec<u16> {
    let mut ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    ports.sort_unstable();
    ports
}

/// The `nebcli` binary beside `beacon`, built first (a no-op when it is up to date): the
/// beacon crate's integration tests are given only the beacon crate's own binaries.
///
/// Built as `cargo test --workspace` builds it (`--workspace --tests`): `-p nebcli` alone
/// resolves the shared dependencies' features differently, so it would rebuild beacon and
/// its TLS stack, and the next `cargo test` would rebuild them back.
///
/// Without the variables cargo sets for a test binary (`CARGO_MANIFEST_DIR` and its like):
/// build scripts that watch them (ring's does) would see them changed and rebuild, and with
/// them everything above, about 40 s, and the next `cargo test` the same back.
pub fn nebcli(beacon: &Path) -> PathBuf {
    cargo_build(&["--workspace", "--tests"], "nebcli");
    beacon.with_file_name("nebcli")
}

/// Runs `cargo build -q ARGS` (for a binary a test runs: nebcli, an example) with what
/// cargo set for the test itself removed, so that the build is the workspace's own and
/// finds what the test build made; `what` names it when the build fails.
pub fn cargo_build(args: &[&str], what: &str) {
    let set_for_tests = |k: &str| {
        k == "OUT_DIR"
            || k == "CARGO_MANIFEST_DIR"
            || k == "CARGO_MANIFEST_PATH"
            || k == "CARGO_CRATE_NAME"
            || k == "CARGO_PRIMARY_PACKAGE"
            || k == "CARGO_TARGET_TMPDIR"
            || k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_")
    };
    let mut cargo = Command::new(env!("CARGO"));
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(set_for_tests) {
            cargo.env_remove(k);
        }
    }
    // The features of the build this test is part of (the README's test command turns the
    // benchmark's `peers` on): other features would resolve the shared dependencies
    // differently and rebuild them, and the next test run would rebuild them back.
    let peers = cfg!(feature = "peers").then_some(["--features", "beacon-bench/peers"]);
    let status = cargo
        .arg("build")
        .arg("-q")
        .args(args)
        .args(peers.iter().flatten())
        .status()
        .expect("run cargo");
    assert!(
        status.success(),
        "cargo build {} (for {what})",
        args.join(" ")
    );
}

/// Runs `nebcli` with `args`: whether it exited 0, and what it printed (stdout, then
/// stderr).
pub fn run_nebcli(nebcli: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(nebcli)
        .args(args)
        .output()
        .expect("run nebcli");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The addresses of `all` as a client's beacon list with `all[first]` first (a stopped
/// beacon listed first, say), the others in their order.
pub fn listed_first(all: &[SocketAddr], first: usize) -> Vec<String> {
    let mut list = vec![all[first].to_string()];
    list.extend(
        all.iter()
            .filter(|a| **a != all[first])
            .map(|a| a.to_string()),
    );
    list
}

/// A child process whose output goes to a log file, which can be killed, signalled and
/// started again with the same command line. Killed when dropped.
pub struct Process {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `program` with `args` and `env`, stdout and stderr appended to `log`.
    pub fn start(
        program: &Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Process {
        let mut p = Process {
            program: program.to_owned(),
            args,
            env,
            log,
            child: None,
        };
        p.spawn();
        p
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        self.child = Some(child);
    }

    /// SIGKILL: the process dies at once; the kernel closes its sockets.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
    }

    /// Sends `signal` (e.g. SIGSTOP / SIGCONT) without waiting.
    pub fn signal(&self, signal: i32) {
        if let Some(child) = &self.child {
            unsafe { libc::kill(child.id() as i32, signal) };
        }
    }

    /// SIGSTOP, and waits (bounded by 2 s) until every thread of the process has stopped:
    /// `kill` returns once the signal is queued, and a thread already running may still
    /// answer a request sent just after it.
    pub fn pause(&self) {
        let Some(child) = &self.child else { return };
        unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
        let tasks = format!("/proc/{}/task", child.id());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && !all_stopped(&tasks) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends `signal` and waits (bounded) for the exit status.
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        unsafe { libc::kill(child.id() as i32, signal) };
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                return Some(status);
            }
            if Instant::now() > deadline {
                child.kill().ok();
                child.wait().ok();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills (if running) and starts again with the same command line.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The process id, while started.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One beacon process. Killed when dropped.
pub struct Beacon {
    pub addr: SocketAddr,
    process: Process,
}

impl Beacon {
    /// Starts `beacon` with `args` (plus `--admin off` unless given), logging to `dir`.
    pub fn start(bin: &Path, addr: SocketAddr, dir: &Path, mut args: Vec<String>) -> Beacon {
        if !args.iter().any(|a| a == "--admin") {
            args.extend(["--admin".into(), "off".into()]);
        }
        let level = std::env::var("BEACON_TEST_LOG").unwrap_or("info".into());
        let process = Process::start(
            bin,
            args,
            vec![("RUST_LOG".into(), level)],
            dir.join(format!("beacon-{}.log", addr.port())),
        );
        Beacon { addr, process }
    }

    /// SIGKILL: the process dies at once; the kernel closes its sockets.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Sends `signal` (e.g. SIGSTOP / SIGCONT) without waiting.
    pub fn signal(&self, signal: i32) {
        self.process.signal(signal);
    }

    /// SIGSTOP, returning once every thread has stopped (see [`Process::pause`]).
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Sends `signal` and waits (bounded) for the exit status.
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        self.process.signal_and_wait(signal, limit)
    }

    pub fn restart(&mut self) {
        self.process.restart();
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// The command line of the beacon on `port` of a cluster on `ports`: its config file (the
/// `keys` given plus its `node`) written into `dir`, its data directory under `dir`.
pub fn beacon_args(
    dir: &Path,
    port: u16,
    ports: &[u16],
    tick_ms: u64,
    cluster: &str,
    keys: serde_json::Map<String, serde_json::Value>,
) -> Vec<String> {
    let all: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    beacon_args_at(dir, addr(port), &all, tick_ms, cluster, keys)
}

/// [`beacon_args`] for beacons on any addresses (each in a network namespace of its own).
pub fn beacon_args_at(
    dir: &Path,
    me: SocketAddr,
    all: &[SocketAddr],
    tick_ms: u64,
    cluster: &str,
    mut keys: serde_json::Map<String, serde_json::Value>,
) -> Vec<String> {
    let peers: Vec<String> = all.iter().map(|a| a.to_string()).collect();
    keys.insert("node".into(), me.to_string().into());
    let file = if me.ip().is_loopback() {
        dir.join(format!("beacon-{}.json", me.port()))
    } else {
        dir.join(format!("beacon-{}_{}.json", me.ip(), me.port()))
    };
    std::fs::write(&file, serde_json::Value::Object(keys).to_string()).expect("write config");
    vec![
        "--config".into(),
        file.display().to_string(),
        "--listen".into(),
        me.to_string(),
        "--peers".into(),
        peers.join(","),
        "--tick-ms".into(),
        tick_ms.to_string(),
        "--cluster".into(),
        cluster.into(),
        "--data-dir".into(),
        dir.join("{node}").display().to_string(),
    ]
}

/// A cluster of `n` beacons on free ports, each serving its admin API on a free port of its
/// own (returned in the beacons' order), with the keys of `config` (a JSON object) added.
pub fn cluster_with_admin(
    bin: &Path,
    n: usize,
    tick_ms: u64,
    cluster: &str,
    config: serde_json::Value,
) -> (Cluster, Vec<SocketAddr>) {
    let ports = free_ports(2 * n);
    let (beacons, admin) = ports.split_at(n);
    let configs: Vec<String> = admin
        .iter()
        .map(|p| {
            let mut keys = config.clone();
            keys["admin"] = format!("127.0.0.1:{p}").into();
            keys.to_string()
        })
        .collect();
    let cluster = Cluster::start_each(bin, beacons, tick_ms, cluster, &configs);
    (cluster, admin.iter().map(|p| addr(*p)).collect())
}

/// A cluster of beacons on `ports`, all listing each other.
pub struct Cluster {
    pub beacons: Vec<Beacon>,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start(bin: &Path, ports: &[u16], tick_ms: u64, cluster: &str) -> Cluster {
        Cluster::start_with(bin, ports, tick_ms, cluster, "{}")
    }

    /// Like [`Cluster::start`], with extra configuration keys (a JSON object, e.g.
    /// `{"lease_ms": 3000}`) in each beacon's config file.
    pub fn start_with(
        bin: &Path,
        ports: &[u16],
        tick_ms: u64,
        cluster: &str,
        config: &str,
    ) -> Cluster {
        let configs = vec![config.to_string(); ports.len()];
        Cluster::start_each(bin, ports, tick_ms, cluster, &configs)
    }

    /// Like [`Cluster::start_with`], with config keys of its own for each beacon.
    pub fn start_each(
        bin: &Path,
        ports: &[u16],
        tick_ms: u64,
        cluster: &str,
        configs: &[String],
    ) -> Cluster {
        Cluster::start_with_learners(bin, ports, &[], tick_ms, cluster, configs)
    }

    /// Like [`Cluster::start_each`], with learners: the beacons on `voters` are the voters
    /// and those on `learners` follow them (key `learners` on every beacon, each learner's
    /// `--peers` the voters). `configs` holds the keys of each, voters first.
    pub fn start_with_learners(
        bin: &Path,
        voters: &[u16],
        learners: &[u16],
        tick_ms: u64,
        cluster: &str,
        configs: &[String],
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let voter_addrs: Vec<SocketAddr> = voters.iter().map(|p| addr(*p)).collect();
        let listed: Vec<String> = learners.iter().map(|p| addr(*p).to_string()).collect();
        let beacons = voters
            .iter()
            .chain(learners)
            .zip(configs)
            .map(|(p, config)| {
                let mut keys: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(config).expect("config keys are a JSON object");
                if !listed.is_empty() {
                    keys.insert("learners".into(), listed.clone().into());
                }
                // An admin address in the keys is meant: it is not turned off.
                let admin = keys
                    .get("admin")
                    .and_then(|a| a.as_str())
                    .map(str::to_owned);
                let mut args =
                    beacon_args_at(dir.path(), addr(*p), &voter_addrs, tick_ms, cluster, keys);
                if let Some(admin) = admin {
                    args.extend(["--admin".into(), admin]);
                }
                let b = Beacon::start(bin, addr(*p), dir.path(), args);
                // Start in sorted order, each listening before the next starts, so the first
                // beacon is the first online everywhere (as in the seed's demo).
                wait_listening(addr(*p));
                b
            })
            .collect();
        Cluster { beacons, dir }
    }

    pub fn logs(&self) -> String {
        self.beacons
            .iter()
            .map(|b| format!("==== {} ====\n{}", b.addr, b.log()))
            .collect()
    }
}

pub fn wait_listening(addr: SocketAddr) {
    wait_listening_within(addr, Duration::from_secs(10));
}

/// [`wait_listening`] for up to `limit` (a beacon that loads a large state first).
pub fn wait_listening_within(addr: SocketAddr, limit: Duration) {
    let deadline = Instant::now() + limit;
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "beacon {addr} did not start listening"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `GET path` from the plain-HTTP admin API at `admin`: the status code and the body, or
/// `None` when it cannot be reached (bounded by 5 s).
pub fn http_get(admin: SocketAddr, path: &str) -> Option<(u16, String)> {
    http_request(admin, path, &[]).map(|r| (r.code, r.body))
}

/// An HTTP answer: status code, head (status line and headers) and body.
#[derive(Debug)]
pub struct HttpReply {
    pub code: u16,
    pub head: String,
    pub body: String,
}

/// `GET path` from the plain-HTTP admin API at `admin` with extra `headers` (name, value),
/// or `None` when it cannot be reached (bounded by 5 s).
pub fn http_request(admin: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Option<HttpReply> {
    use std::io::{Read, Write};
    let limit = Some(Duration::from_secs(5));
    let mut s = std::net::TcpStream::connect_timeout(&admin, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(limit).ok()?;
    s.set_write_timeout(limit).ok()?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {admin}\r\n{extra}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let resp = String::from_utf8_lossy(&resp).into_owned();
    let code = resp.get(9..12)?.parse().ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    // axum answers small bodies whole; a chunked one is joined here.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some(HttpReply {
        code,
        head: head.to_owned(),
        body,
    })
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the Prometheus sample `name` (with its labels, as written: `a{b="c"}`) in
/// `metrics`, if present.
pub fn metric(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (n, v) = l.rsplit_once(' ')?;
        (n == name).then(|| v.parse().ok()).flatten()
    })
}

/// `addr`'s view of the beacon cluster, or `None` if it cannot be asked.
pub async fn status(addr: SocketAddr) -> Option<pb::BeaconStatus> {
    status_with(addr, &ConnectOptions::default()).await
}

/// [`status`] asked with `opts` (TLS, say), within 2 s.
pub async fn status_with(addr: SocketAddr, opts: &ConnectOptions) -> Option<pb::BeaconStatus> {
    let opts = ConnectOptions {
        timeout: Duration::from_secs(2),
        ..opts.clone()
    };
    let mut client = Client::connect(&addr.to_string(), &opts).await.ok()?;
    client.beacon_status().await.ok()
}

/// The leader all of `addrs` agree on, if they do and it claims leadership in each view.
pub async fn agreed_leader(addrs: &[SocketAddr]) -> Option<String> {
    agreed_leader_with(addrs, &ConnectOptions::default()).await
}

/// The leader `addrs` agree on once it is not `gone` (a leader just killed or stopped):
/// asked at once, the survivors still name it until they see it gone.
pub async fn next_leader(addrs: &[SocketAddr], gone: &str) -> Option<String> {
    agreed_leader(addrs).await.filter(|l| l != gone)
}

/// [`agreed_leader`] asked with `opts`.
pub async fn agreed_leader_with(addrs: &[SocketAddr], opts: &ConnectOptions) -> Option<String> {
    leader_seen(addrs, opts, false).await
}

/// The leader all of `addrs` agree on once every view also shows every beacon following it:
/// each follower's word that it follows the leader has reached the others. Until then a
/// follower that loses the leader may count another as free to follow it and take over (the
/// fast failover), so a test that cuts a link right after an election waits for this.
pub async fn settled_leader(addrs: &[SocketAddr]) -> Option<String> {
    leader_seen(addrs, &ConnectOptions::default(), true).await
}

/// The leader every one of `addrs` names, claiming in each view; with `followed`, only once
/// each view shows every beacon following it. One status read per beacon.
async fn leader_seen(
    addrs: &[SocketAddr],
    opts: &ConnectOptions,
    followed: bool,
) -> Option<String> {
    let mut agreed: Option<String> = None;
    for a in addrs {
        let s = status_with(*a, opts).await?;
        let leader = s.leader?;
        let claims = s
            .beacons
            .iter()
            .any(|b| b.node == leader && b.is_leader && b.is_online);
        let follow = |b: &pb::BeaconEntry| b.follows.as_deref() == Some(leader.as_str());
        if !claims
            || agreed.as_ref().is_some_and(|l| *l != leader)
            || (followed && !s.beacons.iter().all(follow))
        {
            return None;
        }
        agreed = Some(leader);
    }
    agreed
}

/// Waits (up to 30 s) until every beacon of `up` follows one leader whose membership is
/// exactly `voters`, with no learner; false if it never is.
pub async fn voters_settle(up: &[SocketAddr], voters: &[SocketAddr]) -> bool {
    let mut want: Vec<String> = voters.iter().map(|a| a.to_string()).collect();
    want.sort();
    eventually(Duration::from_secs(30), || async {
        let leader: SocketAddr = agreed_leader(up).await?.parse().ok()?;
        let s = status(leader).await?;
        let mut v: Vec<String> = s
            .beacons
            .iter()
            .filter(|b| b.role == "voter" && !b.leaving)
            .map(|b| b.node.clone())
            .collect();
        v.sort();
        (v == want && s.beacons.iter().all(|b| b.role == "voter")).then_some(())
    })
    .await
    .is_some()
}

/// Polls `probe` every 10 ms until it returns `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The row for `node` in `status`.
pub fn row(status: &pb::BeaconStatus, node: SocketAddr) -> &pb::BeaconEntry {
    let node = node.to_string();
    status
        .beacons
        .iter()
        .find(|b| b.node == node)
        .expect("row for node")
}

/// Whether every thread listed under `/proc/<pid>/task` is stopped (state `T` or `t`).
fn all_stopped(tasks: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(tasks) else {
        return true;
    };
    entries.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                // The state follows the command name, which is in parentheses.
                let after = &stat[stat.rfind(')')? + 1..];
                after.split_whitespace().next().map(str::to_owned)
            })
            .is_none_or(|state| state == "T" || state == "t")
    })
}

/// Says to be beacon `node` of `cluster` over `stream` (a `Hello` with no credentials but
/// what the stream carries) and returns the beacon's answer: its refusal, or `None` if it
/// accepted.
pub async fn claim_to_be_a_beacon<S>(
    stream: S,
    cluster: &str,
    node: SocketAddr,
) -> Option<pb::ErrorReply>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use beacon::wire::{Cmd, Code, Frame, FrameCodec, PROTOCOL_VERSION};
    use futures_util::{SinkExt, StreamExt};
    let mut conn = tokio_util::codec::Framed::new(stream, FrameCodec::new(1 << 20));
    let hello = pb::Hello {
        cluster: cluster.into(),
        role: pb::Role::Peer as i32,
        node: node.to_string(),
        version: PROTOCOL_VERSION,
        ..Default::default()
    };
    conn.send(Frame::new(Cmd::Hello.code(), 1, 0, &hello))
        .await
        .ok()?;
    let reply = conn.next().await?.ok()?;
    reply.is_error().then(|| reply.decode().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_another_process_reserved_is_not_handed_out() {
        // A port no test draws (below every range), so that nothing else locks its file.
        let port = 1_100 + (std::process::id() % 800) as u16;
        let path = std::env::temp_dir()
            .join("beacon-test-ports")
            .join(port.to_string());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Another process's reservation: a lock through another open file, which conflicts
        // with this process's as another process's does.
        let other = std::fs::File::create(&path).unwrap();
        other.lock().unwrap();
        assert!(!reserve(port), "reserved elsewhere: not handed out");
        drop(other);
        assert!(reserve(port), "let go: this process reserves it");
        assert!(
            reserve(port),
            "its own reservation is its own to hand out again"
        );
        let third = std::fs::File::open(&path).unwrap();
        assert!(
            matches!(third.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            "held for as long as this process runs"
        );
    }

    #[test]
    fn a_port_range_is_read_and_kept_to() {
        assert_eq!(range_of("20000-20999"), Ok((20000, 20911)));
        assert_eq!(range_of(" 20000 - 20999"), Ok((20000, 20911)));
        for bad in ["20000", "20000-20050", "80-2000", "x-y", "30000-20000"] {
            let e = range_of(bad).unwrap_err();
            assert!(
                e.starts_with(&format!("{PORTS_VAR}={bad}: give a range")),
                "{e}"
            );
        }
        let range = (41000, 41300);
        let held = listeners_in(5, range).unwrap();
        for l in &held {
            let port = l.local_addr().unwrap().port();
            assert!(
                (range.0..range.1).contains(&port),
                "{port} outside {range:?}"
            );
        }
        assert_eq!(
            sorted_ports(&held)
                .windows(2)
                .filter(|w| w[0] == w[1])
                .count(),
            0
        );
    }
}
