//! Beacons restarted from their configuration files, as a service manager restarts them,
//! after the membership changed under them: once a data directory holds a membership, it
//! wins over the file's `beacon` list, which is a contact list from then on.
//!
//! Three beacons start from files that list the three. One is removed, emptied and joined
//! again; a fourth joins; each of them, and the two never changed, is then killed and
//! started again from its original file, and starts with the stored membership (saying so
//! in its log when the file differs). A beacon removed while it ran is refused at restart,
//! with what to do, and the others go on serving.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use beacon_testkit::*;

mod support;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const CLUSTER: &str = "restart";

/// One beacon's configuration file, every key in it (no flags), as an operator writes it.
fn write_config(dir: &Path, me: SocketAddr, listed: &[SocketAddr]) -> PathBuf {
    let file = dir.join(format!("beacon-{}.json", me.port()));
    let config = serde_json::json!({
        "cluster": CLUSTER,
        "node": me.to_string(),
        "beacon": listed.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
        "mode": "quorum",
        "tick_ms": 100,
        "admin": "off",
        "data_dir": dir.join("{node}").display().to_string(),
        "lease_ms": 600000,
        "members": {"promote_after_ms": 300},
    });
    std::fs::write(&file, config.to_string()).unwrap();
    file
}

fn start(dir: &Path, me: SocketAddr, file: &Path, extra: &[&str]) -> Process {
    let mut args = vec!["--config".to_string(), file.display().to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    Process::start(
        Path::new(BEACON),
        args,
        vec![("RUST_LOG".into(), "info".into())],
        dir.join(format!("beacon-{}.log", me.port())),
    )
}

fn log_of(dir: &Path, port: u16) -> String {
    std::fs::read_to_string(dir.join(format!("beacon-{port}.log"))).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_rejoined_and_unchanged_beacons_restart_from_their_original_files() {
    let nebcli_bin = nebcli(Path::new(BEACON));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ports = free_ports(4);
    let [a, b, c, x] = [ports[0], ports[1], ports[2], ports[3]].map(addr);
    let three = [a, b, c];
    let files: Vec<PathBuf> = three
        .iter()
        .map(|me| write_config(d, *me, &three))
        .collect();
    // The fourth beacon's file lists the cluster as its operator found it, and itself.
    let x_file = write_config(d, x, &[a, b, c, x]);
    let logs = || {
        ports
            .iter()
            .map(|p| format!("--- beacon {p}\n{}", log_of(d, *p)))
            .collect::<String>()
    };
    let mut procs: Vec<Process> = three
        .iter()
        .zip(&files)
        .map(|(me, f)| start(d, *me, f, &[]))
        .collect();
    settled(&three, &three, &logs).await;
    let at = |node: SocketAddr| node.to_string();
    support::nebcli_register(&nebcli_bin, a, "LOGIC", "10.0.0.5:8080");

    // C: killed, removed, emptied, joined again with its original file and --join.
    procs[2].kill();
    let (ok, out) = run_nebcli(&nebcli_bin, &["-s", &at(a), "member", "remove", &at(c)]);
    assert!(ok, "member remove {c}: {out}\n{}", logs());
    std::fs::remove_dir_all(d.join(format!("127.0.0.1_{}", c.port()))).unwrap();
    let seeds = format!("{},{}", at(a), at(b));
    procs[2] = start(d, c, &files[2], &["--join", &seeds]);
    settled(&three, &three, &logs).await;
    // ... and restarted from the file alone, as a service manager does.
    procs[2].kill();
    procs[2] = start(d, c, &files[2], &[]);
    settled(&three, &three, &logs).await;

    // X joins with a file that lists the four; then restarts from that file.
    let mut x_proc = start(d, x, &x_file, &["--join", &seeds]);
    let four = [a, b, c, x];
    settled(&four, &four, &logs).await;
    x_proc.kill();
    x_proc = start(d, x, &x_file, &[]);
    settled(&four, &four, &logs).await;

    // A and B never changed: their files list three beacons, their state holds four.
    for i in [0, 1] {
        procs[i].kill();
        procs[i] = start(d, three[i], &files[i], &[]);
        settled(&four, &four, &logs).await;
        let log = log_of(d, three[i].port());
        assert!(
            log.contains("starting with the stored membership")
                && log.contains("the configured lists are only contact points"),
            "beacon {} did not say it starts with the stored membership:\n{log}",
            three[i]
        );
    }
    for p in procs.iter_mut().chain([&mut x_proc]) {
        assert!(p.is_running(), "a beacon stopped\n{}", logs());
    }
    assert!(
        support::lists_service(c, "10.0.0.5:8080").await,
        "the registration is gone"
    );

    // X removed while it runs: restarted from its file, it is refused with what to do, and
    // the three go on.
    let (ok, out) = run_nebcli(&nebcli_bin, &["-s", &at(a), "member", "remove", &at(x)]);
    assert!(ok, "member remove {x}: {out}\n{}", logs());
    settled(&three, &three, &logs).await;
    x_proc.kill();
    let before = log_of(d, x.port()).len();
    x_proc = start(d, x, &x_file, &[]);
    let exited = eventually(Duration::from_secs(10), || {
        let running = x_proc.is_running();
        async move { (!running).then_some(()) }
    })
    .await;
    let said = log_of(d, x.port())[before..].to_string();
    assert!(exited.is_some(), "a removed beacon started:\n{said}");
    assert!(
        said.contains(&format!("this beacon ({x}) is not a member"))
            && said.contains("start it with --join"),
        "{said}"
    );
    support::nebcli_register(&nebcli_bin, b, "LOGIC", "10.0.0.6:8080");
}

/// Waits until `up` follow one leader whose voters are `voters`, with no learner.
async fn settled(up: &[SocketAddr], voters: &[SocketAddr], logs: &dyn Fn() -> String) {
    assert!(
        voters_settle(up, voters).await,
        "the voters never became {voters:?}, followed by {up:?}\n{}",
        logs()
    );
}
