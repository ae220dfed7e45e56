//! State stored under one configuration and a beacon started under another: refused with the
//! key at fault and what to do, carried over with `--adopt-config` only once it fits, never
//! dropped. Real beacon processes on one data directory.

mod support;
use beacon::storage::format::FORMAT;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::nodes;

use beacon::client::{Client, ConnectOptions};
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

/// The command line of a lone beacon on `port` with data in `dir`, of `cluster`, with
/// `range`, plus `extra` flags.
fn args(dir: &Path, port: u16, cluster: &str, range: [u32; 2], extra: &[&str]) -> Vec<String> {
    let file = dir.join(format!("conf-{}-{}.json", range[0], range[1]));
    let conf = serde_json::json!({
        "node": addr(port).to_string(),
        "id_range": range,
        "lease_ms": 600_000,
    });
    std::fs::write(&file, conf.to_string()).unwrap();
    let mut args: Vec<String> = vec![
        "--config".into(),
        file.display().to_string(),
        "--cluster".into(),
        cluster.into(),
        "--data-dir".into(),
        dir.join("data").display().to_string(),
        "--admin".into(),
        "off".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs a beacon that must refuse to start: its exit code and what it printed.
fn refused(args: &[String]) -> (Option<i32>, String) {
    let mut child = Command::new(BEACON)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("the beacon started although it should have refused: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a beacon that must come up and lead.
async fn serving(dir: &Path, port: u16, args: Vec<String>) -> Beacon {
    let b = Beacon::start(BEACON.as_ref(), addr(port), dir, args);
    let all = [addr(port)];
    eventually(Duration::from_secs(10), || agreed_leader(&all))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", b.log()));
    b
}

async fn register(port: u16, i: u8) -> pb::registry::NodeInfo {
    let mut c = Client::connect(&addr(port).to_string(), &opts())
        .await
        .unwrap();
    let req = pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: SocketAddr::from(([10, 4, 0, i], 80)).to_string(),
        ..Default::default()
    };
    c.register(&req).await.unwrap().node.unwrap()
}

async fn held_ids(port: u16) -> Vec<u32> {
    nodes(addr(port))
        .await
        .unwrap()
        .nodes
        .into_iter()
        .filter(|e| e.is_online)
        .filter_map(|e| e.node.map(|n| n.node_id))
        .collect()
}

/// A beacon of cluster `alpha` with the default range, serving.
async fn alpha(dir: &Path, port: u16) -> Beacon {
    serving(dir, port, args(dir, port, "alpha", [1, 1023], &[])).await
}

/// Leaves `dir` holding one registration of cluster `alpha`, its beacon stopped.
async fn one_registration_in_alpha(dir: &Path, port: u16) {
    let b = alpha(dir, port).await;
    register(port, 1).await;
    stop(b);
}

fn stop(mut b: Beacon) {
    let status = b.signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
    assert!(status.is_some(), "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_id_range_is_refused_or_adopted_only_when_every_stored_id_fits() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    let b = alpha(dir.path(), port).await;
    for i in 1..=3 {
        register(port, i).await;
    }
    assert_eq!(held_ids(port).await, vec![1, 2, 3]);
    stop(b);

    // Another range: refused, naming the key, the ranges and the way out.
    let (code, err) = refused(&args(dir.path(), port, "alpha", [2, 1023], &[]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("(key `id_range`)"), "{err}");
    assert!(
        err.contains("[1, 1023]") && err.contains("[2, 1023]"),
        "{err}"
    );
    assert!(err.contains("--adopt-config"), "{err}");
    // Adopting a range that leaves a stored ID out is refused too: nothing is dropped.
    let (code, err) = refused(&args(
        dir.path(),
        port,
        "alpha",
        [2, 1023],
        &["--adopt-config"],
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("node IDs [1] outside the configured id_range 2..=1023"),
        "{err}"
    );
    // A wider range fits: adopted, every registration kept, allocation goes on after them.
    let b = serving(
        dir.path(),
        port,
        args(dir.path(), port, "alpha", [1, 4095], &["--adopt-config"]),
    )
    .await;
    assert_eq!(held_ids(port).await, vec![1, 2, 3]);
    assert_eq!(register(port, 4).await.node_id, 4);
    assert!(
        b.log()
            .contains("--adopt-config: the stored state is carried over")
    );
    stop(b);
    // The new range is what the directory now records.
    let b = serving(
        dir.path(),
        port,
        args(dir.path(), port, "alpha", [1, 4095], &[]),
    )
    .await;
    assert_eq!(held_ids(port).await, vec![1, 2, 3, 4]);
    stop(b);
    let (code, err) = refused(&args(dir.path(), port, "alpha", [1, 1023], &[]));
    assert_eq!(code, Some(2), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    one_registration_in_alpha(dir.path(), port).await;
    let (code, err) = refused(&args(dir.path(), port, "beta", [1, 1023], &[]));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("it holds the state of cluster `alpha`, this beacon is configured for `beta` (key `cluster`)"),
        "{err}"
    );
    // Its own cluster still starts, with everything.
    let b = alpha(dir.path(), port).await;
    assert_eq!(held_ids(port).await, vec![1]);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_written_before_identities_were_recorded_is_taken_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    one_registration_in_alpha(dir.path(), port).await;
    let identity = dir.path().join("data/identity.json");
    std::fs::remove_file(&identity).unwrap();
    let b = alpha(dir.path(), port).await;
    assert_eq!(held_ids(port).await, vec![1]);
    assert!(b.log().contains("no record of its cluster"), "{}", b.log());
    assert!(identity.exists(), "recorded now");
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beacons_with_different_beacon_lists_refuse_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let start = |port: u16, list: &[u16]| {
        let peers: Vec<String> = list.iter().map(|p| addr(*p).to_string()).collect();
        let args = vec![
            "--listen".into(),
            addr(port).to_string(),
            "--peers".into(),
            peers.join(","),
            "--tick-ms".into(),
            "100".into(),
            "--data-dir".into(),
            dir.path().join("{node}").display().to_string(),
        ];
        Beacon::start(BEACON.as_ref(), addr(port), dir.path(), args)
    };
    let a = start(ports[0], &[ports[0], ports[1]]);
    let b = start(ports[1], &[ports[0], ports[1], ports[2]]);
    let complaint = "every beacon of a cluster needs the same `beacon` list";
    let refused = eventually(Duration::from_secs(5), || async {
        (a.log().contains(complaint) && b.log().contains(complaint)).then_some(())
    })
    .await;
    assert!(refused.is_some(), "{}\n{}", a.log(), b.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_term_beyond_the_bound_stops_the_start_and_reset_term_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    one_registration_in_alpha(dir.path(), port).await;
    // The term file holds what a rogue's claim left there in an older version.
    std::fs::write(
        dir.path().join("data").join("term"),
        format!("{}\n", u64::MAX),
    )
    .unwrap();
    let (code, err) = refused(&args(dir.path(), port, "alpha", [1, 1023], &[]));
    assert_eq!(code, Some(2), "a refused start: {err}");
    assert!(
        err.contains("the stored term 18446744073709551615 is beyond 2^48"),
        "{err}"
    );
    assert!(err.contains("--reset-term"), "the way out is named: {err}");
    // --reset-term takes the highest term of its own log, and the state is all there.
    let b = serving(
        dir.path(),
        port,
        args(dir.path(), port, "alpha", [1, 1023], &["--reset-term"]),
    )
    .await;
    assert!(
        b.log()
            .contains("--reset-term: the stored term 18446744073709551615"),
        "{}",
        b.log()
    );
    assert_eq!(held_ids(port).await, vec![1]);
    let term = status(addr(port)).await.unwrap().term;
    assert!(term < 100, "{term}");
    stop(b);
}

/// What `nebcli -w json CMD` prints at `port`.
fn nebcli_json(nebcli: &Path, port: u16, cmd: &[&str]) -> serde_json::Value {
    let out = Command::new(nebcli)
        .args(["-s", &addr(port).to_string(), "-w", "json"])
        .args(cmd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A data directory copied from `tests/fixtures/NAME` (`files`, and its identity with the
/// address it ran on, `ran_on`, replaced by this beacon's) and the arguments that start a
/// beacon on it at `port`; with the identity as written.
fn from_fixture(
    dir: &Path,
    port: u16,
    name: &str,
    files: &[&str],
    ran_on: &str,
) -> (std::path::PathBuf, String, Vec<String>) {
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    for file in files {
        std::fs::copy(fixture.join(file), data.join(file)).unwrap();
    }
    let identity = std::fs::read_to_string(fixture.join("identity.json"))
        .unwrap()
        .replace(ran_on, &addr(port).to_string());
    std::fs::write(data.join("identity.json"), &identity).unwrap();
    let args: Vec<String> = [
        "--listen",
        &addr(port).to_string(),
        "--data-dir",
        &data.display().to_string(),
        "--admin",
        "off",
    ]
    .map(String::from)
    .to_vec();
    (data, identity, args)
}

/// Checks what a fixture holds: sequence `orders` at `max` in two segments beside one other,
/// and node IDs handed out up to `last_node_id`.
fn check_orders_and_ids(nebcli: &Path, port: u16, max: u64, last_node_id: u64) {
    let sequences = nebcli_json(nebcli, port, &["show", "sequences"]);
    let orders = sequences["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "orders")
        .cloned()
        .unwrap_or_else(|| panic!("{sequences}"));
    assert_eq!(
        (orders["max"].as_u64(), orders["segments"].as_u64()),
        (Some(max), Some(2))
    );
    assert_eq!(sequences["total"], 2, "{sequences}");
    let ids = nebcli_json(nebcli, port, &["show", "ids"]);
    assert_eq!(ids["last_node_id"], last_node_id, "{ids}");
}

/// `tests/fixtures/data-v1` is a data directory written by beacon before its files said
/// their format (format 1): a lone beacon whose sequence `orders` reached 1052 in two
/// segments, beside an empty `invoices`, with node IDs handed out up to 312. A beacon of
/// this version reads it, rewrites it in its own format, and reads that again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_the_previous_format_is_read_and_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    // Its identity names the address it ran on; this beacon runs on another.
    let (data, identity, args) = from_fixture(
        dir.path(),
        port,
        "data-v1",
        &["log", "snapshot", "term"],
        "127.0.0.1:29400",
    );
    assert!(!identity.contains("format"), "a format-1 identity");
    let nebcli = nebcli(BEACON.as_ref());
    let check = |port| check_orders_and_ids(&nebcli, port, 1052, 312);
    let b = serving(dir.path(), port, args.clone()).await;
    check(port);
    assert!(
        b.log()
            .contains("data_dir was in format 1: its files are rewritten in format 3"),
        "{}",
        b.log()
    );
    stop(b);
    let log = std::fs::read(data.join("log")).unwrap();
    assert_eq!(&log[..8], b"beacon.L", "the log is marked now");
    assert!(
        std::fs::read_to_string(data.join("identity.json"))
            .unwrap()
            .contains("\"format\": 3")
    );
    // Started again: read in its own format, nothing to upgrade, nothing lost.
    let b = serving(dir.path(), port, args).await;
    check(port);
    // (The log file holds both runs.)
    assert_eq!(b.log().matches("was in format").count(), 1, "{}", b.log());
    stop(b);
}

/// A data directory written by a newer beacon is refused, its files untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_a_newer_format_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    one_registration_in_alpha(dir.path(), port).await;
    let term = dir.path().join("data").join("term");
    let newer = FORMAT + 1;
    std::fs::write(&term, format!("format {newer}\nterm 1\n")).unwrap();
    let (code, err) = refused(&args(dir.path(), port, "alpha", [1, 1023], &[]));
    assert_eq!(code, Some(2), "a refused start: {err}");
    assert!(
        err.contains(&format!(
            "file `term` is in format {newer}, newer than this beacon"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("(formats 1 to {FORMAT})")), "{err}");
    assert_eq!(
        std::fs::read_to_string(&term).unwrap(),
        format!("format {newer}\nterm 1\n")
    );
}

/// `tests/fixtures/data-v2` is a data directory of the version before this one (format 2,
/// before the membership was in the log): a lone beacon with sequence `orders` at 552 in two
/// segments beside an empty `invoices`, five registrations (node IDs up to 5) and resource
/// `r1`. A beacon of this version reads it, rewrites it in format 3 (which a format-2 reader
/// refuses, as it cannot read changes of membership), and reads that again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_the_version_before_is_read_and_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    let (data, identity, args) = from_fixture(
        dir.path(),
        port,
        "data-v2",
        &["log", "term"],
        "127.0.0.1:29401",
    );
    assert!(identity.contains("\"format\": 2"), "a format-2 identity");
    let log = std::fs::read(data.join("log")).unwrap();
    assert_eq!(&log[8..12], &2u32.to_be_bytes(), "a format-2 log");
    let nebcli = nebcli(BEACON.as_ref());
    let check = |port| {
        check_orders_and_ids(&nebcli, port, 552, 5);
        let resources = nebcli_json(&nebcli, port, &["show", "resources"]);
        assert!(resources.to_string().contains("\"r1\""), "{resources}");
    };
    let b = serving(dir.path(), port, args.clone()).await;
    check(port);
    assert!(
        b.log()
            .contains("data_dir was in format 2: its files are rewritten in format 3"),
        "{}",
        b.log()
    );
    stop(b);
    let log = std::fs::read(data.join("log")).unwrap();
    assert_eq!(
        &log[..12],
        b"beacon.L\0\0\0\x03",
        "the log says format 3 now"
    );
    assert!(
        std::fs::read_to_string(data.join("term"))
            .unwrap()
            .starts_with("format 3\n")
    );
    let b = serving(dir.path(), port, args).await;
    check(port);
    assert_eq!(b.log().matches("was in format").count(), 1, "{}", b.log());
    stop(b);
}
