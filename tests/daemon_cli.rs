//! The `beacon` binary as an operator meets it: defaults, configuration errors, signals, logs.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn run_beacon(args: &[&str], cwd: &std::path::Path) -> std::process::Output {
    Command::new(BEACON)
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run beacon")
}

#[tokio::test]
async fn no_arguments_runs_a_lone_leader_on_16000() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        std::net::TcpListener::bind("127.0.0.1:16000").is_ok()
            && std::net::TcpListener::bind("127.0.0.1:16088").is_ok(),
        "this test needs 127.0.0.1:16000 and :16088 free (is a beacon already running?)"
    );
    let child = Command::new(BEACON)
        .current_dir(dir.path())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
        .spawn()
        .unwrap();
    let mut b = BeaconGuard(child);
    wait_listening(addr(16000));
    let s = status(addr(16000)).await.unwrap();
    assert_eq!(s.leader.as_deref(), Some("127.0.0.1:16000"));
    assert_eq!(
        (s.cluster.as_str(), s.tick_ms, s.beacons.len()),
        ("default", 100, 1)
    );
    // The default data_dir is relative to the working directory. (The status is read off
    // the driver's task, so it may show the new term a moment before the driver has stored
    // it.)
    let term = dir.path().join("data/127.0.0.1_16000/term");
    let stored = eventually(Duration::from_secs(5), || {
        let exists = term.exists();
        async move { exists.then_some(()) }
    })
    .await;
    assert!(stored.is_some(), "{} was never written", term.display());
    // The admin HTTP API answers on 16088.
    let mut http = std::net::TcpStream::connect("127.0.0.1:16088").unwrap();
    use std::io::{Read, Write};
    http.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    http.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains(r#""leader":"127.0.0.1:16000""#), "{resp}");
    b.stop();
}

struct BeaconGuard(std::process::Child);

impl BeaconGuard {
    fn stop(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().ok();
    }
}

impl Drop for BeaconGuard {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[test]
fn invalid_configs_fail_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{"node": "127.0.0.1:1", "tick_ms": "fast"}"#,
            "key `tick_ms`: invalid type",
        ),
        (
            r#"{"node": "127.0.0.1:1", "peers": []}"#,
            "key `peers`: unknown field `peers`",
        ),
        (
            r#"{"beacon": []}"#,
            "key `node`: missing: give this beacon's own ip:port",
        ),
        (
            r#"{"node": "127.0.0.1"}"#,
            "key `node`: `127.0.0.1` is not an ip:port or host:port address",
        ),
        (
            r#"{"node": "127.0.0.1:1", "beacon": ["127.0.0.1:2"]}"#,
            "key `beacon`: the list does not contain this beacon's own address",
        ),
        (
            r#"{"node": "127.0.0.1:1", "admin": "nowhere"}"#,
            "key `admin`",
        ),
        (
            r#"{"node": "127.0.0.1:1" "#,
            "is not valid JSON: EOF while parsing",
        ),
        (
            r#"{"node": "127.0.0.1:1", "tick_ms": 100,}"#,
            "is not valid JSON: trailing comma",
        ),
    ];
    // A long value is cut in the message, not echoed whole.
    let long = format!(
        r#"{{"node": "127.0.0.1:1", "node_type": [{{"node_type": "{}", "subscribe": []}}]}}"#,
        "A".repeat(5000)
    );
    let path = dir.path().join("long.json");
    std::fs::write(&path, &long).unwrap();
    let out = run_beacon(&["--config", path.to_str().unwrap()], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.len() < 400 && stderr.contains("... (5000 characters)`"),
        "{stderr}"
    );
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.json"));
        std::fs::write(&path, text).unwrap();
        let out = run_beacon(&["--config", path.to_str().unwrap()], dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(want),
            "{text}: expected `{want}` in: {stderr}"
        );
        assert!(
            stderr.contains(&format!("bad{i}.json")),
            "names the file: {stderr}"
        );
    }
    let out = run_beacon(&["--tick-ms", "1"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("flag --tick-ms: key `tick_ms`: 1 is out of range")
    );
    let out = run_beacon(&["--peers", "127.0.0.1:1,banana"], dir.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("flag --peers: key `beacon`: `banana`"));
}

#[test]
fn shipped_configs_pass_the_check() {
    let root = env!("CARGO_MANIFEST_DIR");
    for file in ["conf/beacon.json", "conf/cluster/beacon-17000.json"] {
        let out = run_beacon(
            &["--config", &format!("{root}/{file}"), "--check-config"],
            root.as_ref(),
        );
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // What it prints is the effective configuration as a file, which checks again to
        // the same thing.
        let printed = dir_file(&out.stdout);
        let again = run_beacon(
            &[
                "--config",
                &printed.1.display().to_string(),
                "--check-config",
            ],
            root.as_ref(),
        );
        assert!(
            again.status.success(),
            "{}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert_eq!(again.stdout, out.stdout, "{file}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["admin"].as_str().unwrap().ends_with("88"), "{v}");
    }
}

/// `bytes` written to a file of a new temporary directory (kept with it).
fn dir_file(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("printed.json");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[tokio::test]
async fn three_beacons_named_by_host_name_elect_a_leader() {
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let peers = ports
        .iter()
        .map(|p| format!("localhost:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let beacons: Vec<Beacon> = ports
        .iter()
        .map(|p| {
            // Host names where addresses go (the admin ports derived from them are covered
            // by the config's unit tests; here the testkit turns them off).
            let args = [
                "--listen",
                &format!("localhost:{p}"),
                "--peers",
                &peers,
                "--data-dir",
                &dir.path().join("{node}").display().to_string(),
            ]
            .map(String::from)
            .to_vec();
            Beacon::start(BEACON.as_ref(), addr(*p), dir.path(), args)
        })
        .collect();
    for b in &beacons {
        wait_listening(b.addr);
    }
    let addrs: Vec<SocketAddr> = beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs)).await;
    assert!(
        leader.is_some(),
        "no leader among beacons named by host name"
    );
    for b in &beacons {
        assert!(
            b.log().contains(&format!(
                "`localhost:{}` (key `node`) resolved to 127.0.0.1:{}",
                b.addr.port(),
                b.addr.port()
            )),
            "{}",
            b.log()
        );
    }
}

#[tokio::test]
async fn a_busy_port_or_data_dir_is_a_clear_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = free_ports(2);
    let data = dir.path().join("shared").display().to_string();
    let first = Beacon::start(
        BEACON.as_ref(),
        addr(p[0]),
        dir.path(),
        ["--listen", &addr(p[0]).to_string(), "--data-dir", &data]
            .map(String::from)
            .to_vec(),
    );
    wait_listening(first.addr);
    // A second beacon that must be refused at start: exit 2, the reason on stderr.
    let refused = |listen: SocketAddr, data: &str| {
        let args = [
            "--listen",
            &listen.to_string(),
            "--data-dir",
            data,
            "--admin",
            "off",
        ];
        let out = run_beacon(&args, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        stderr
    };
    // Same data_dir, other port.
    let stderr = refused(addr(p[1]), &data);
    assert!(
        stderr.contains("is in use by another beacon process"),
        "{stderr}"
    );
    // Same port, other data_dir.
    let stderr = refused(addr(p[0]), &dir.path().join("other").display().to_string());
    let want = format!("cannot listen on {} (key `node`)", addr(p[0]));
    assert!(stderr.contains(&want), "{stderr}");
    drop(first);
}

#[tokio::test]
async fn sigterm_and_sigint_shut_down_gracefully() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let p = free_ports(1)[0];
        let args = [
            "--listen",
            &addr(p).to_string(),
            "--data-dir",
            &dir.path().join("d").display().to_string(),
        ];
        let mut b = Beacon::start(
            BEACON.as_ref(),
            addr(p),
            dir.path(),
            args.map(String::from).to_vec(),
        );
        wait_listening(b.addr);
        assert!(status(b.addr).await.is_some());
        let exit = b
            .signal_and_wait(signal, Duration::from_secs(10))
            .expect("exits within 10 s");
        assert!(exit.success(), "signal {signal}: {exit:?}\n{}", b.log());
        let log = b.log();
        assert!(
            log.contains("shutdown requested") && log.contains("beacon stopped"),
            "{log}"
        );
        assert!(
            std::net::TcpStream::connect(b.addr).is_err(),
            "port released"
        );
    }
}

#[tokio::test]
async fn logs_carry_the_node_identity_and_honour_rust_log() {
    let dir = tempfile::tempdir().unwrap();
    let p = free_ports(1)[0];
    for (filter, present, absent) in [("debug", "DEBUG", ""), ("warn", "", " INFO ")] {
        let log = dir.path().join(format!("{filter}.log"));
        let mut child = Command::new(BEACON)
            .args([
                "--listen",
                &addr(p).to_string(),
                "--admin",
                "off",
                "--data-dir",
                &dir.path().join("d").display().to_string(),
            ])
            .env("RUST_LOG", filter)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_listening(addr(p));
        // Make it log something at debug level and above: a bad frame is a warning.
        use std::io::Write;
        std::net::TcpStream::connect(addr(p))
            .unwrap()
            .write_all(b"xx")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains(&format!("node={}", addr(p))), "{text}");
        assert!(text.contains("bad frame"), "{text}");
        if !present.is_empty() {
            assert!(text.contains(present), "RUST_LOG={filter}: {text}");
        }
        if !absent.is_empty() {
            assert!(!text.contains(absent), "RUST_LOG={filter}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beacon_shutting_down_does_not_take_the_leadership_on_its_way_out() {
    let ports = free_ports(3);
    let mut c = Cluster::start(BEACON.as_ref(), &ports, 100, "leaving");
    let addrs: Vec<SocketAddr> = c.beacons.iter().map(|b| b.addr).collect();
    eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    // The whole cluster is stopped at once, the leader first, as an operator's script would:
    // the others see its connections close while they are shutting down themselves.
    for b in &c.beacons {
        b.signal(libc::SIGTERM);
    }
    for b in &mut c.beacons {
        let status = b.signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
        assert!(status.is_some_and(|s| s.success()), "{}", b.log());
    }
    for b in &c.beacons {
        let log = b.log();
        let after = log
            .split_once("shutdown requested")
            .map_or("", |(_, after)| after);
        assert!(
            !after.contains("this beacon is now the leader"),
            "{} took the leadership while shutting down:\n{log}",
            b.addr
        );
    }
}
