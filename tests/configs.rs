//! The config store on real processes: compare-and-set increments from several clients
//! through a leader kill lose no update and apply none twice, revisions only grow, and
//! NebulaBeacon's `set node_config` / `get node_config` work through nebcli at any beacon.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use beacon::client::{Client, Cluster as Leader, ConnectOptions, config_check, config_put};
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
    let mut cluster = Leader::new(
        beacons.clone(),
        ConnectOptions::default(),
        Duration::from_secs(10),
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_set_loses_no_update_across_a_leader_kill() {
    let mut cluster = Cluster::start(BEACON.as_ref(), &free_ports(3), 100, "configs");
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader:\n{}", cluster.logs()));
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut admin = Leader::new(
        beacons.clone(),
        ConnectOptions::default(),
        Duration::from_secs(10),
    );
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
