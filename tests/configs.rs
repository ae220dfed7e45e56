//! The config store on real processes: compare-and-set increments from several clients
//! through a leader kill lose no update and apply none twice, revisions only grow,
//! NebulaBeacon's `set node_config` / `get node_config` work through nebcli at any beacon,
//! and 100 watching services each get every change that concerns them once, across a
//! leader kill, ending with their effective config.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use beacon::client::{
    Client, Cluster as Leader, ConfigWatch, ConnectOptions, Effective, config_check, config_put,
};
use beacon::machines::configs::ConfigErrorCode;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const KEY: &str = "cluster/counter";

/// The counter's value and revision as the beacon at `at` reads it (linearizably).
async fn read(at: SocketAddr) -> Option<(u64, u64)> {
    let mut c = Client::connect(&at.to_string(), &ConnectOptions::default())
        .await
        .ok()?;
    let reply = c.config_get(KEY, false).await.ok()?;
    let d = reply.documents.first()?;
    let value = std::str::from_utf8(&d.value).ok()?.parse().ok()?;
    Some((value, d.revision))
}

/// What one client saw: the increments acknowledged (the value written and its revision),
/// and the writes whose outcome it cannot know (an error other than a failed check: the
/// leader was killed after the entry went out, say), which may or may not have applied.
struct Seen {
    acked: Vec<(u64, u64)>,
    unknown: u64,
}

/// One client: `n` increments, each a read and a write at the revision read, retried when
/// another client wrote first or leadership moved.
async fn increments(beacons: Vec<String>, n: usize, deadline: Instant) -> Seen {
    // One attempt per write (no retry inside the call): a write retried after its first
    // attempt reached a leader that then died may have applied, and its retry then fails
    // the check, so a `REVISION_MISMATCH` would not mean that nothing was written. Retries
    // happen here instead, each after a fresh read. (A redirect to the leader then costs an
    // attempt, counted as unknown: that only loosens the bound checked at the end.)
    let mut cluster = Leader::new(beacons.clone(), ConnectOptions::default(), Duration::ZERO);
    let mut seen = Seen {
        acked: Vec::new(),
        unknown: 0,
    };
    let mut next = 0;
    while seen.acked.len() < n && Instant::now() < deadline {
        next += 1;
        let at: SocketAddr = beacons[next % beacons.len()].parse().unwrap();
        let Some((value, revision)) = read(at).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let put = config_put(KEY, (value + 1).to_string().into_bytes(), false);
        match cluster
            .config_write(vec![config_check(KEY, revision)], vec![put])
            .await
        {
            Ok(reply) => seen.acked.push((value + 1, reply.revision)),
            // Another client wrote first: nothing was written; read again.
            Err(e) if e.is(ConfigErrorCode::RevisionMismatch) => {}
            // The outcome is unknown: it may have applied (then its retry's check fails and
            // it is never applied twice). Read again.
            Err(_) => {
                seen.unknown += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    seen
}

fn nebcli_run(nebcli: &Path, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(nebcli)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run nebcli");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Three beacons with a leader, and a client of theirs that writes at the leader.
struct Started {
    cluster: Cluster,
    addrs: Vec<SocketAddr>,
    leader: String,
    beacons: Vec<String>,
    admin: Leader,
}

async fn start(name: &str) -> Started {
    let cluster = Cluster::start(BEACON.as_ref(), &free_ports(3), 100, name);
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader:\n{}", cluster.logs()));
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let admin = Leader::new(
        beacons.clone(),
        ConnectOptions::default(),
        Duration::from_secs(15),
    );
    Started {
        cluster,
        addrs,
        leader,
        beacons,
        admin,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_set_loses_no_update_across_a_leader_kill() {
    let Started {
        mut cluster,
        addrs,
        leader,
        beacons,
        mut admin,
    } = start("configs").await;
    let first = admin
        .config_write(vec![], vec![config_put(KEY, b"0".to_vec(), false)])
        .await
        .unwrap();
    // Created only if new (revision 0): it exists now.
    let again = admin
        .config_write(
            vec![config_check(KEY, 0)],
            vec![config_put(KEY, b"9".to_vec(), false)],
        )
        .await
        .expect_err("a create-if-new of an existing document must fail");
    assert!(again.to_string().contains("is at revision"), "{again}");

    let deadline = Instant::now() + Duration::from_secs(40);
    let clients: Vec<_> = (0..4)
        .map(|_| tokio::spawn(increments(beacons.clone(), 15, deadline)))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = addrs.iter().position(|a| a.to_string() == leader).unwrap();
    cluster.beacons[killed].kill();
    let (mut acked, mut unknown) = (Vec::new(), 0);
    for c in clients {
        let seen = c.await.unwrap();
        acked.extend(seen.acked);
        unknown += seen.unknown;
    }
    assert_eq!(
        acked.len(),
        60,
        "every client made its increments:\n{}",
        cluster.logs()
    );
    // No two acknowledged increments wrote the same value (a compare-and-set on an old
    // revision changes nothing), and values and revisions rise together.
    acked.sort_unstable();
    assert!(
        acked.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
        "{acked:?}"
    );
    assert!(acked[0].1 > first.revision);
    let revisions: Vec<u64> = acked.iter().map(|a| a.1).collect();

    cluster.beacons[killed].restart();
    let alive: Vec<SocketAddr> = addrs.clone();
    let (value, revision) = eventually(Duration::from_secs(10), || async {
        let mut seen = Vec::new();
        for a in &alive {
            seen.push(read(*a).await?);
        }
        seen.windows(2).all(|w| w[0] == w[1]).then(|| seen[0])
    })
    .await
    .unwrap_or_else(|| panic!("the beacons do not agree:\n{}", cluster.logs()));
    // Every acknowledged increment is there; beyond them, at most the writes whose outcome
    // the clients could not know.
    let highest = acked.last().unwrap().0;
    assert!(
        value >= highest && value <= 60 + unknown,
        "value {value}: acknowledged up to {highest}, 60 acknowledged and {unknown} unknown"
    );
    assert!(revision >= *revisions.last().unwrap());

    // NebulaBeacon's commands, through nebcli, written at one beacon and read at another.
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let (code, out, err) = nebcli_run(
        &nebcli,
        &["-s", &beacons[1], "set", "node_config", "LOGIC", "-"],
        "port=7000\n",
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = nebcli_run(
        &nebcli,
        &["-s", &beacons[2], "get", "node_config", "LOGIC"],
        "",
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("port=7000\n"), "{out}");
    let (code, out, _) = nebcli_run(
        &nebcli,
        &["-s", &beacons[0], "-w", "json", "config", "history", KEY],
        "",
    );
    assert_eq!(code, Some(0));
    let history: serde_json::Value = serde_json::from_str(&out).unwrap();
    let revs: Vec<u64> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["revision"].as_u64().unwrap())
        .collect();
    assert!(
        revs.len() == 11 && revs.windows(2).all(|w| w[0] > w[1]),
        "newest first: {revs:?}"
    );
    // The value at a past revision: the newest written at or before it (the one before
    // revs[2] is at revs[3]).
    let (code, out, err) = nebcli_run(
        &nebcli,
        &[
            "-s",
            &beacons[1],
            "-w",
            "json",
            "config",
            "get",
            KEY,
            "--rev",
            &(revs[2] - 1).to_string(),
        ],
        "",
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let at: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(at["revision"], revs[3]);
    assert_eq!(at["value"], history["history"][3]["value"]);
    let (code, _, err) = nebcli_run(
        &nebcli,
        &[
            "-s",
            &beacons[0],
            "config",
            "put",
            KEY,
            "x",
            "--if-rev",
            "1",
        ],
        "",
    );
    assert_eq!(code, Some(1));
    assert!(err.contains("nothing was written"), "{err}");
}

/// The address of watching service `i`, and its type (`LOGIC` for even `i`, `GATE` for odd).
fn service(i: usize) -> (SocketAddr, &'static str) {
    let addr = format!("10.0.{}.{}:80", i / 250, i % 250 + 1)
        .parse()
        .unwrap();
    (addr, if i.is_multiple_of(2) { "LOGIC" } else { "GATE" })
}

/// One watching service: its effective config as first listed, then each event's changes,
/// until its effective config has a setting `done` (or the deadline passes). Returns
/// the `(key, revision)` of every document it was told of, its final effective config, and
/// how many times its watch resumed at another beacon.
async fn follow(
    beacons: Vec<String>,
    i: usize,
    deadline: Instant,
    listed: tokio::sync::mpsc::UnboundedSender<()>,
) -> (Effective, Vec<(String, u64)>, Effective, u64) {
    let (addr, node_type) = service(i);
    let mut watch = ConfigWatch::for_service(
        beacons,
        node_type.to_owned(),
        addr,
        0,
        ConnectOptions::default(),
        Duration::from_secs(15),
    )
    .await
    .unwrap_or_else(|e| panic!("service {i} cannot watch: {e}"));
    let first = watch.effective();
    let _ = listed.send(());
    let mut told = Vec::new();
    while watch.effective().get("done").is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, watch.next()).await {
            Ok(Ok(event)) => {
                told.extend(event.put.iter().map(|d| (d.key.clone(), d.revision)));
                told.extend(event.deleted.iter().map(|k| (k.clone(), event.index)));
            }
            Ok(Err(e)) => panic!("service {i}'s watch failed: {e}"),
            Err(_) => break,
        }
    }
    (first, told, watch.effective(), watch.resumes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watching_service_gets_each_change_once_across_a_leader_kill() {
    let Started {
        mut cluster,
        addrs,
        leader,
        beacons,
        mut admin,
    } = start("configs-watch").await;
    let put = |key: &str, value: &str| config_put(key, value.as_bytes().to_vec(), false);
    // Written before any service watches: each gets them in its first listing.
    admin
        .config_write(
            vec![],
            vec![
                put("cluster/log_level", "info"),
                put("type/LOGIC/port", "7000"),
                put("type/GATE/port", "9000"),
            ],
        )
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let (listed, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let watchers: Vec<_> = (0..100)
        .map(|i| tokio::spawn(follow(beacons.clone(), i, deadline, listed.clone())))
        .collect();
    // Every watcher has its first listing before the writes below.
    for _ in 0..100 {
        tokio::time::timeout_at(deadline.into(), heard.recv())
            .await
            .expect("every service starts its watch")
            .expect("a watcher failed");
    }

    let w1 = admin
        .config_write(vec![], vec![put("cluster/log_level", "debug")])
        .await
        .unwrap();
    let killed = addrs.iter().position(|a| a.to_string() == leader).unwrap();
    cluster.beacons[killed].kill();
    let alive: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| a.to_string() != leader)
        .collect();
    eventually(Duration::from_secs(10), || next_leader(&alive, &leader))
        .await
        .unwrap_or_else(|| panic!("no new leader:\n{}", cluster.logs()));
    // After the kill, through the next leader: one for service 5 alone, one for every
    // service (as node over type over cluster makes it effective: service 5 keeps its own).
    let w2 = admin
        .config_write(vec![], vec![put("node/10.0.0.6:80/log_level", "trace")])
        .await
        .unwrap();
    let w3 = admin
        .config_write(
            vec![],
            vec![
                put("type/LOGIC/log_level", "warn"),
                put("type/GATE/log_level", "warn"),
                put("cluster/done", "1"),
            ],
        )
        .await
        .unwrap();
    assert!(w1.revision < w2.revision && w2.revision < w3.revision);

    for (i, w) in watchers.into_iter().enumerate() {
        let (first, told, last, resumes) = w.await.unwrap();
        // Every watch was at the leader killed: each took up its stream at the next one.
        assert!(resumes >= 1, "service {i} never resumed");
        let (_, node_type) = service(i);
        let port = if node_type == "LOGIC" { "7000" } else { "9000" };
        assert_eq!(first.get("log_level"), Some(&b"info"[..]), "service {i}");
        assert_eq!(first.get("port"), Some(port.as_bytes()), "service {i}");
        let expect: Vec<(String, u64)> = {
            let mut e = vec![("cluster/log_level".to_owned(), w1.revision)];
            if i == 5 {
                e.push(("node/10.0.0.6:80/log_level".into(), w2.revision));
            }
            e.push((format!("type/{node_type}/log_level"), w3.revision));
            e.push(("cluster/done".into(), w3.revision));
            e
        };
        assert_eq!(
            told,
            expect,
            "service {i} is told each change that concerns it once, in order:\n{}",
            cluster.logs()
        );
        let level = if i == 5 { "trace" } else { "warn" };
        assert_eq!(last.get("log_level"), Some(level.as_bytes()), "service {i}");
    }

    // A service that starts after the writes gets them: nothing was pushed and forgotten.
    let (late, _, _, _) = follow(beacons.clone(), 5, Instant::now(), listed).await;
    assert_eq!(late.get("log_level"), Some(&b"trace"[..]));
    assert_eq!(late.get("port"), Some(&b"9000"[..]));

    // nebcli shows a service what it gets, then each change, as lines.
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let list = beacons.join(",");
    let mut service = NebcliLines::watch(&nebcli, &[&list, "--service", "GATE", "10.0.0.6:80"]);
    // Present: done, log_level (node over type), port (type), in name order.
    let present: Vec<serde_json::Value> = (0..3).map(|_| service.next()).collect();
    let named = |v: &serde_json::Value| (v["event"].clone(), v["key"].clone(), v["value"].clone());
    assert_eq!(
        present.iter().map(named).collect::<Vec<_>>(),
        [
            ("present".into(), "setting:done".into(), "1".into()),
            ("present".into(), "setting:log_level".into(), "trace".into()),
            ("present".into(), "setting:port".into(), "9000".into()),
        ]
    );
    // A key without --prefix stands for itself, as etcdctl's: not the keys it begins.
    let mut key = NebcliLines::watch(&nebcli, &[&list, "type/LOGIC/port"]);
    assert_eq!(
        named(&key.next()),
        ("present".into(), "type/LOGIC/port".into(), "7000".into())
    );
    admin
        .config_write(vec![], vec![put("type/LOGIC/portable", "x")])
        .await
        .unwrap();
    let w4 = admin
        .config_write(
            vec![],
            vec![
                put("type/GATE/port", "9100"),
                put("type/LOGIC/port", "7100"),
            ],
        )
        .await
        .unwrap();
    for (watch, key, value) in [
        (&mut service, "setting:port", "9100"),
        (&mut key, "type/LOGIC/port", "7100"),
    ] {
        let changed = watch.next();
        assert_eq!(named(&changed), ("put".into(), key.into(), value.into()));
        assert_eq!(changed["index"], w4.revision);
    }
}

/// A `nebcli -w json config watch` running, and the JSON lines it prints.
struct NebcliLines {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl NebcliLines {
    /// `nebcli -s BEACONS -w json config watch ARGS...` (`args` starts with the beacons).
    fn watch(nebcli: &Path, args: &[&str]) -> NebcliLines {
        let mut child = std::process::Command::new(nebcli)
            .args(["-s", args[0], "-w", "json", "config", "watch"])
            .args(&args[1..])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        NebcliLines { child, lines }
    }

    fn next(&mut self) -> serde_json::Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(15))
            .expect("a line from `nebcli config watch`");
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for NebcliLines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
