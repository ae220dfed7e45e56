//! nebcli against real beacons: three beacon servers run in this test process (the beacon
//! library, real loopback sockets), and the `nebcli` binary is run as a separate process.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use beacon::config::{Config, Origin, Overrides};

const NEBCLI: &str = env!("CARGO_BIN_EXE_nebcli");

/// Three in-process beacons (tick 50 ms), stopped when dropped.
struct Cluster {
    addrs: Vec<SocketAddr>,
    _runtime: tokio::runtime::Runtime,
    stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(cluster: &str) -> Cluster {
        Cluster::start_with_lease(cluster, None)
    }

    /// Three beacons whose services' leases last `lease_ms` (default if `None`), the leader
    /// first in `addrs`. That is the first by address unless another was elected before the
    /// first was seen online (a loaded host starts them slowly): the leader then stays.
    fn start_with_lease(cluster: &str, lease_ms: Option<u64>) -> Cluster {
        let mut c = Cluster::start_first_with(cluster, 3, lease_ms);
        let leader = c.wait_for_leader();
        let at = c
            .addrs
            .iter()
            .position(|a| a.to_string() == leader)
            .expect("the leader is one of the three");
        c.addrs.swap(0, at);
        c
    }

    /// A cluster of three of which only the first `running` are started.
    fn start_first(cluster: &str, running: usize) -> Cluster {
        Cluster::start_first_with(cluster, running, None)
    }

    fn start_first_with(cluster: &str, running: usize, lease_ms: Option<u64>) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let addrs: Vec<SocketAddr> = beacon_testkit::free_ports(3)
            .into_iter()
            .map(beacon_testkit::addr)
            .collect();
        let peers: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        for a in addrs.iter().take(running) {
            let mut overrides = Overrides {
                listen: Some(a.to_string()),
                peers: Some(peers.clone()),
                tick_ms: Some(50),
                cluster: Some(cluster.into()),
                data_dir: Some(dir.path().join("{node}").display().to_string()),
                admin: Some("off".into()),
                ..Overrides::default()
            }
            .with_key("--id-range", "id_range", "1-100000");
            if let Some(lease) = lease_ms {
                overrides = overrides.with_key("--lease-ms", "lease_ms", lease);
            }
            let config = Config::from_json(
                Origin::Embedded,
                beacon::config::EMBEDDED_DEFAULT,
                &overrides,
            )
            .unwrap();
            let server = runtime
                .block_on(beacon::server::Server::bind(config))
                .unwrap();
            let mut stopped = stopped.clone();
            runtime.spawn(server.run(async move {
                let _ = stopped.changed().await;
            }));
        }
        Cluster {
            addrs,
            _runtime: runtime,
            stop,
            _dir: dir,
        }
    }

    /// Waits until every beacon sees all three online, the same leader, and every row at
    /// the leader's term (followers' heartbeats carry the term one tick after they learn it).
    fn wait_for_leader(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let settled = |a: &SocketAddr| {
            let out = nebcli(&["-s", &a.to_string(), "--json", "show", "beacon"], None);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let rows = v["beacons"].as_array()?;
            let all = rows
                .iter()
                .all(|b| b["is_online"] == true && b["term"] == v["term"]);
            all.then(|| v["leader"].as_str().map(String::from))
                .flatten()
        };
        loop {
            let leaders: Vec<Option<String>> = self.addrs.iter().map(settled).collect();
            if let Some(leader) = &leaders[0]
                && leaders.iter().all(|l| l.as_ref() == Some(leader))
            {
                return leader.clone();
            }
            assert!(
                Instant::now() < deadline,
                "cluster did not settle: {leaders:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn nebcli(args: &[&str], stdin: Option<&str>) -> Output {
    let home = tempfile::tempdir().unwrap();
    nebcli_home(args, stdin, home.path())
}

fn nebcli_home(args: &[&str], stdin: Option<&str>, home: &std::path::Path) -> Output {
    let mut child = Command::new(NEBCLI)
        .args(args)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = stdin.unwrap_or("").to_owned();
    let mut pipe = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = pipe.write_all(input.as_bytes());
    });
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn closed_port() -> SocketAddr {
    beacon_testkit::addr(beacon_testkit::free_ports(1)[0])
}

#[test]
fn show_beacon_prints_the_seed_table() {
    let c = Cluster::start("cli");
    let out = nebcli(&["-s", &c.addrs[1].to_string(), "show", "beacon"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "node",
            "is_leader",
            "is_online",
            "term",
            "last_seen_ms",
            "stored",
            "role"
        ],
        "{stdout}"
    );
    assert_eq!(lines.len(), 6, "{stdout}");
    // Three beacons default to quorum mode; the summary names the answering beacon.
    let summary = stdout.lines().nth(4).unwrap();
    assert!(
        summary.starts_with("mode quorum · term ")
            && summary.contains(" · commit ")
            && summary.contains(&format!(
                "leader {} (answered by {}, version {})",
                c.addrs[0],
                c.addrs[1],
                env!("CARGO_PKG_VERSION")
            )),
        "{stdout}"
    );
    // Then the core's beat: its longest step gap is at least a tick's worth of idling.
    let beat = stdout.lines().nth(5).unwrap();
    assert!(
        beat.starts_with("core beat over the last minute: longest gap between steps ")
            && beat.contains("longest wait for the core "),
        "{stdout}"
    );
    let mut sorted = c.addrs.clone();
    sorted.sort();
    for (i, row) in lines[1..4].iter().enumerate() {
        assert_eq!(row[0], sorted[i].to_string(), "sorted order: {stdout}");
        let leads = sorted[i] == c.addrs[0];
        assert_eq!(row[1], if leads { "yes" } else { "no" }, "{stdout}");
        assert_eq!(row[2], "yes", "{stdout}");
        assert!(row[3].parse::<u64>().unwrap() >= 1);
        assert!(row[4].parse::<u64>().is_ok(), "{stdout}");
        assert_eq!(row[6], "voter", "{stdout}");
    }
    // Columns line up: every row starts its second column where the header does.
    let col = stdout.lines().next().unwrap().find("is_leader").unwrap();
    for line in stdout.lines().skip(1).take(3) {
        assert!(
            line[col..].starts_with("yes") || line[col..].starts_with("no "),
            "{stdout}"
        );
    }
}

#[test]
fn json_output_has_the_same_facts() {
    let c = Cluster::start("cli-json");
    let out = nebcli(
        &["-s", &c.addrs[0].to_string(), "--json", "show", "beacon"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["node"], c.addrs[0].to_string());
    assert_eq!(v["cluster"], "cli-json");
    assert_eq!(v["leader"], c.addrs[0].to_string());
    assert_eq!(v["tick_ms"], 50);
    let rows = v["beacons"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let me = rows
        .iter()
        .find(|r| r["is_self"] == true)
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(me["is_leader"], true, "{v}");
    let follower = rows
        .iter()
        .find(|r| r["is_self"] == false)
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(follower["is_online"], true);
    assert!(follower["last_seen_ms"].as_u64().unwrap() < 5_000);
    assert!(follower["term"].as_u64().unwrap() >= 1);
    assert_eq!(v["mode"], "quorum");
    // The leader took over and committed its first entry; it knows what each follower stored.
    assert!(v["commit"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["stale"].is_null(), "{v}");
    assert_eq!(follower["stored"], v["index"], "{v}");
}

#[test]
fn piped_commands_run_until_quit_and_a_failure_sets_the_exit_code() {
    let c = Cluster::start("cli-repl");
    let home = tempfile::tempdir().unwrap();
    let out = nebcli_home(
        &["-s", &c.addrs[0].to_string()],
        Some("help\nshow beacon\nbogus command\n\nshow stars\nquit\nshow beacon\n"),
        home.path(),
    );
    // As a script under `set -e` would: a failed command makes the run fail.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        stdout.contains("show beacon") && stdout.contains("quit | exit"),
        "help: {stdout}"
    );
    let tables = stdout.lines().filter(|l| l.starts_with("node ")).count();
    assert_eq!(tables, 1, "one table, nothing after quit: {stdout}");
    assert!(
        stderr.contains("error: unknown command `bogus`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: unknown subject `show stars`"),
        "{stderr}"
    );
    // History is a person's: piped lines are not kept.
    assert!(!home.path().join(".nebcli_history").exists());

    // All went well: 0; `exit 3`: 3.
    let ok = nebcli(&["-s", &c.addrs[0].to_string()], Some("show beacon\n"));
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let three = nebcli(
        &["-s", &c.addrs[0].to_string()],
        Some("show beacon\nexit 3\n"),
    );
    assert_eq!(three.status.code(), Some(3));
}

#[test]
fn the_shell_reads_quotes_as_a_shell_does() {
    let c = Cluster::start("cli-quotes");
    let s = c.addrs[0].to_string();
    let out = nebcli(
        &["-s", &s],
        Some(
            "register --type LOGIC --addr 10.9.0.1:80 --metadata '{\"zone\": \"b\"}'\nshow nodes LOGIC --json\n",
        ),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("zone"), "{}", text(&out.stdout));
    let open = nebcli(&["-s", &s], Some("register --metadata '{\n"));
    assert_eq!(open.status.code(), Some(1));
    assert!(
        text(&open.stderr).contains("close the quote"),
        "{}",
        text(&open.stderr)
    );
}

#[test]
fn options_go_before_or_after_the_command_and_come_from_the_environment() {
    let c = Cluster::start("cli-options");
    let s = c.addrs[1].to_string();
    let dead = closed_port().to_string();
    // After the command; -w json as --json; the first of -s a,b unreachable.
    let list = format!("{dead},{s}");
    for args in [
        vec!["show", "beacon", "--json", "-s", &s],
        vec!["show", "beacon", "-w", "json", "--server", &s],
        vec!["-s", &list, "show", "beacon", "--json"],
    ] {
        let out = nebcli(&args, None);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out.stdout)));
        assert_eq!(v["leader"], c.addrs[0].to_string(), "{args:?}");
    }
    // BEACON_ENDPOINTS as -s, BEACON_TIMEOUT_MS as --timeout-ms.
    let out = Command::new(NEBCLI)
        .args(["show", "beacon", "--json"])
        .env("BEACON_ENDPOINTS", format!("{dead},{s}"))
        .env("BEACON_TIMEOUT_MS", "2000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // --timeout-ms is nebcli's wherever it is written; a queue's own limit has its own name.
    for words in [
        ["queue", "create", "jobs", "--attempt-timeout-ms", "2000"],
        ["queue", "create", "other", "--timeout-ms", "2000"],
    ] {
        let out = nebcli(&[&["-s", s.as_str()], &words[..]].concat(), None);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = nebcli(&["-s", &s, "-w", "json", "show", "queues"], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let timeout = |name: &str| {
        v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue"]["name"] == name)
            .map(|q| q["queue"]["timeout_ms"].as_u64().unwrap())
    };
    assert_eq!(timeout("jobs"), Some(2000), "{v}");
    assert_ne!(
        timeout("other"),
        Some(2000),
        "the global option is not the queue's: {v}"
    );
    // Usage errors exit 2 without trying the network.
    for args in [
        vec!["-s", "banana", "show", "beacon"],
        vec!["-s", "127.0.0.1", "show", "beacon"],
        vec!["-s", &s, "unregister", "-5"],
        vec!["-w", "yaml", "show", "beacon"],
    ] {
        let out = nebcli(&args, None);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Every command has --help, and needs no beacon for it.
    let out = nebcli(&["-s", &dead, "register", "--help"], None);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("register --type T --addr IP:PORT"),
        "{}",
        text(&out.stdout)
    );
    let out = nebcli(&["--help"], None);
    assert!(
        text(&out.stdout).contains("endpoint health"),
        "{}",
        text(&out.stdout)
    );
    let out = nebcli(&["completion", "bash"], None);
    assert!(text(&out.stdout).contains("complete -F _nebcli nebcli"));
}

#[test]
fn interactive_shell_on_a_terminal_shows_the_prompt() {
    let c = Cluster::start("cli-tty");
    // `script` gives nebcli a real pseudo-terminal; the session ends with `exit`.
    let cmd = format!("{NEBCLI} -s {}", c.addrs[0]);
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env("HOME", home.path())
        .env("TERM", "dumb")
        // Long output goes through the pager; this one marks each line it shows.
        .env("PAGER", "sed s/^/PAGED:/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        // Give the prompt time to appear before typing, as a person would.
        std::thread::sleep(Duration::from_millis(300));
        let _ = stdin.write_all(b"show beacon\n");
        std::thread::sleep(Duration::from_millis(300));
        let _ = stdin.write_all(b"help\n");
        std::thread::sleep(Duration::from_millis(300));
        let _ = stdin.write_all(b"exit\n");
        std::thread::sleep(Duration::from_millis(300));
    });
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("nebcli) "), "{stdout}");
    assert!(stdout.contains("connected to beacon"), "{stdout}");
    assert!(stdout.contains("is_leader"), "{stdout}");
    assert!(
        !stdout.contains("PAGED:node "),
        "a short table is printed as it is: {stdout}"
    );
    assert!(
        stdout.contains("PAGED:  show beacon"),
        "the long help went through the pager: {stdout}"
    );
    // What a person typed is kept for the next session.
    let history = std::fs::read_to_string(home.path().join(".nebcli_history")).unwrap();
    assert!(history.contains("show beacon"), "{history}");
}

#[test]
fn unreachable_server_is_one_clear_line_and_exit_1() {
    let dead = closed_port().to_string();
    for args in [vec!["-s", &dead, "show", "beacon"], vec!["-s", &dead]] {
        let out = nebcli(&args, Some("show beacon\n"));
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("nebcli: cannot reach beacon at {dead}: ")),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_value_over_the_frame_limit_is_refused_at_once_naming_the_limit() {
    let c = Cluster::start("cli-big");
    let at = c.addrs[0].to_string();
    let big = "a".repeat(10_000_000);
    // Refused, not retried until the command's time is up ("no leader answered").
    let out = nebcli(
        &["-s", &at, "config", "put", "cluster/big", "-"],
        Some(&big),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the request is 10000")
            && stderr.contains("over the frame limit of 4194304 bytes (`max_frame_bytes`")
            && stderr.contains("nebcli --max-frame-bytes")
            && !stderr.contains("no leader answered"),
        "{stderr}"
    );
    // With nebcli's own limit raised, the beacon refuses it (its limit is the default),
    // and says so rather than dropping the connection.
    let out = nebcli(
        &[
            "-s",
            &at,
            "--max-frame-bytes",
            "20000000",
            "config",
            "put",
            "cluster/big",
            "-",
        ],
        Some(&big),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("exceeds the limit of 4194304 bytes (`max_frame_bytes`)")
            && !stderr.contains("no leader answered"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_2_and_help_needs_no_server() {
    let dead = closed_port().to_string();
    let out = nebcli(&["-s", &dead, "frobnicate"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "nebcli: unknown command `frobnicate`; type `help` for the list of commands"
    );
    let out = nebcli(&["-s", &dead, "help"], None);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("show beacon"));
    // An unknown option is one, not a command; near misses are told what was meant.
    let out = nebcli(&["-s", &dead, "--bogus", "show", "beacon"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("nebcli: unknown option `--bogus` (nebcli's options: "),
        "{}",
        text(&out.stderr)
    );
    let out = nebcli(&["-s", &dead, "show", "beacons"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "nebcli: unknown subject `show beacons` (did you mean `show beacon`?); type `help` for the list of commands"
    );
}

#[test]
fn insisting_on_another_cluster_is_refused() {
    let c = Cluster::start("cli-mine");
    let out = nebcli(
        &[
            "-s",
            &c.addrs[0].to_string(),
            "--cluster",
            "theirs",
            "show",
            "beacon",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("wrong cluster: this beacon serves cluster `cli-mine`"),
        "{stderr}"
    );
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// `show nodes --json` of `addr`, as (node_id, addr) pairs.
fn node_pairs(addr: &SocketAddr) -> Vec<(u64, String)> {
    let v = json_of(&nebcli(
        &["-s", &addr.to_string(), "--json", "show", "nodes"],
        None,
    ));
    v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    let n = &e["node"];
                    (
                        n["node_id"].as_u64().unwrap(),
                        n["addr"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn register_show_and_unregister_through_any_beacon() {
    let c = Cluster::start("cli-nodes");
    let follower = c.addrs[2].to_string();
    let out = nebcli(
        &[
            "-s",
            &follower,
            "register",
            "--type",
            "LOGIC",
            "--addr",
            "10.0.0.1:80",
            "--workers",
            "4",
            "--metadata",
            r#"{"zone":"a"}"#,
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("node_id 1 (LOGIC at 10.0.0.1:80)"),
        "{}",
        text(&out.stdout)
    );
    let v = json_of(&nebcli(
        &[
            "-s",
            &follower,
            "--json",
            "register",
            "--type",
            "ACCESS",
            "--addr",
            "10.0.0.2:80",
        ],
        None,
    ));
    assert_eq!(v["node_id"], 2);
    assert_eq!(v["node_type"], "ACCESS");

    // Every beacon shows the same registrations.
    let want = vec![(1, "10.0.0.1:80".to_owned()), (2, "10.0.0.2:80".to_owned())];
    let deadline = Instant::now() + Duration::from_secs(10);
    for a in &c.addrs {
        while node_pairs(a) != want {
            assert!(Instant::now() < deadline, "{a} has {:?}", node_pairs(a));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    let out = nebcli(&["-s", &follower, "show", "nodes", "LOGIC"], None);
    let table = text(&out.stdout);
    assert!(
        table.starts_with("node_id    node_type    address        is_online    health     last_seen_ms\n1          LOGIC        10.0.0.1:80    yes          passing"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 3, "ACCESS filtered out: {table}");
    assert!(table.ends_with("1 nodes, 1 online · LOGIC 1\n"), "{table}");

    let out = nebcli(
        &[
            "-s",
            &follower,
            "show",
            "node_detail",
            "LOGIC",
            "10.0.0.1:80",
        ],
        None,
    );
    let detail = text(&out.stdout);
    assert!(
        detail.contains(r#"{"zone":"a"}"#) && detail.contains("fencing_token"),
        "{detail}"
    );

    // Reports live at the leader; a follower's nebcli is sent there.
    let out = nebcli(
        &["-s", &follower, "--json", "show", "node_report", "LOGIC"],
        None,
    );
    let v = json_of(&out);
    assert_eq!(v["is_leader"], true, "answered by the leader: {v}");
    assert!(v["nodes"][0]["last_seen_ms"].as_u64().is_some(), "{v}");
    let out = nebcli(&["-s", &follower, "show", "node_report", "LOGIC"], None);
    assert!(
        text(&out.stdout).starts_with("node_id    address        load"),
        "{}",
        text(&out.stdout)
    );

    let out = nebcli(&["-s", &follower, "show", "ids"], None);
    let ids = text(&out.stdout);
    assert!(
        ids.contains("1..=100000    2               2         99998"),
        "{ids}"
    );
    let v = json_of(&nebcli(&["-s", &follower, "--json", "show", "ids"], None));
    assert_eq!(
        (v["in_use"].as_u64(), v["last_node_id"].as_u64()),
        (Some(2), Some(2))
    );

    let out = nebcli(&["-s", &follower, "show", "subscription", "ACCESS"], None);
    assert!(
        text(&out.stdout).contains("ACCESS       LOGIC,LOGGER"),
        "{}",
        text(&out.stdout)
    );

    // An operator's unregister ends the registration it names; the ID goes to quarantine,
    // since the service may still be using it, unless --free.
    let out = nebcli(&["-s", &follower, "unregister", "10.0.0.1:80"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("unregistered node_id 1") && said.contains("in quarantine"),
        "{said}"
    );
    let leader = c.addrs[0].to_string();
    let v = json_of(&nebcli(&["-s", &leader, "--json", "show", "ids"], None));
    assert_eq!(v["quarantined"], serde_json::json!([1]), "{v}");
    let out = nebcli(&["-s", &follower, "unregister", "2", "--free"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("the ID is free"));
    let out = nebcli(&["-s", &follower, "unregister", "2"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no live registration at 2"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bad_registration_exits_1_with_the_field_at_fault() {
    let c = Cluster::start("cli-bad-reg");
    let at = c.addrs[0].to_string();
    // Not an address at all: nebcli's usage error, nothing sent.
    let out = nebcli(
        &[
            "-s", &at, "register", "--type", "LOGIC", "--addr", "nowhere",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--addr `nowhere` is not IP:PORT"),
        "{}",
        text(&out.stderr)
    );
    // An address no service can be reached at: the beacon's refusal, naming the field.
    let out = nebcli(
        &[
            "-s",
            &at,
            "register",
            "--type",
            "LOGIC",
            "--addr",
            "0.0.0.0:80",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("addr `0.0.0.0:80`"),
        "{}",
        text(&out.stderr)
    );
    assert!(node_pairs(&c.addrs[0]).is_empty());
}

#[test]
fn bench_register_reports_rate_latency_and_uniqueness() {
    let c = Cluster::start("cli-bench");
    let at = c.addrs[1].to_string();
    let out = nebcli(
        &[
            "-s",
            &at,
            "bench",
            "register",
            "--clients",
            "4",
            "--count",
            "200",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains("registered 200/200 from 4 clients"),
        "{report}"
    );
    assert!(
        report.contains("allocations/s") && report.contains("p99"),
        "{report}"
    );
    assert!(
        report.contains("ids unique: 200 (0 duplicates)"),
        "{report}"
    );
    let v = json_of(&nebcli(
        &[
            "-s",
            &at,
            "--json",
            "bench",
            "register",
            "--clients",
            "2",
            "--count",
            "50",
        ],
        None,
    ));
    assert_eq!(
        (v["ok"].as_u64(), v["duplicates"].as_u64()),
        (Some(50), Some(0))
    );
    assert!(v["allocs_per_sec"].as_f64().unwrap() > 0.0);
    // The benchmark cleans up after itself.
    assert!(node_pairs(&c.addrs[0]).is_empty());
}

#[test]
fn certs_makes_a_ca_and_certificates_that_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let o = nebcli(
        &[
            "certs",
            out.to_str().unwrap(),
            "--beacon",
            "127.0.0.1:16000",
            "--client",
            "dashboard",
        ],
        None,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("--cacert"), "{}", text(&o.stdout));
    let files = beacon::transport::tls::TlsFiles {
        cert: out.join("beacon-127.0.0.1_16000.pem"),
        key: out.join("beacon-127.0.0.1_16000.key"),
        ca: Some(out.join("ca.pem")),
    };
    beacon::transport::tls::server_config(&files).expect("the beacon's files load");
    let client = (out.join("dashboard.pem"), out.join("dashboard.key"));
    beacon::transport::tls::client_config(&out.join("ca.pem"), Some((&client.0, &client.1)))
        .expect("the client's files load");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.join("ca.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "keys are for their owner only");
    // Bad arguments: a clear error, exit 2.
    let o = nebcli(&["certs"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("<DIR>"), "{}", text(&o.stderr));
}

#[test]
fn endpoint_health_and_status_ask_every_beacon() {
    let c = Cluster::start("endpoints");
    let s = c.addrs[1].to_string();
    let out = nebcli(&["-s", &s, "endpoint", "health"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for a in &c.addrs {
        assert!(stdout.contains(&a.to_string()), "{stdout}");
    }
    assert!(stdout.contains("3 of 3 beacons can write"), "{stdout}");

    let out = nebcli(&["-s", &s, "--json", "endpoint", "status"], None);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    let leaders: Vec<&str> = rows
        .iter()
        .map(|r| r["status"]["leader"].as_str().unwrap())
        .collect();
    assert!(leaders.iter().all(|l| *l == c.addrs[0].to_string()), "{v}");
    for r in rows {
        assert_eq!(r["healthy"], true, "{v}");
        assert_eq!(r["status"]["version"], env!("CARGO_PKG_VERSION"), "{v}");
    }
}

#[test]
fn endpoint_health_fails_when_the_cluster_cannot_write() {
    // One of three beacons runs: it answers, but sees no majority; the others cannot be
    // reached. Every row says why, and the exit code says the cluster cannot write.
    let c = Cluster::start_first("lonely", 1);
    let s = c.addrs[0].to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = nebcli(
            &["-s", &s, "--timeout-ms", "1000", "endpoint", "health"],
            None,
        );
        if out.status.code() == Some(1) || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("the cluster cannot write"), "{stderr}");
    assert!(stdout.contains("0 of 3 beacons can write"), "{stdout}");
    assert!(stdout.contains("sees 1 of 3"), "{stdout}");
    assert!(stdout.contains(&c.addrs[2].to_string()), "{stdout}");
}

#[test]
fn output_at_scale_counts_and_ranges_and_says_what_a_re_registration_replaced() {
    let c = Cluster::start("cli-scale");
    let s = c.addrs[0].to_string();
    let run = |args: &[&str]| {
        let out = nebcli(&[&["-s", s.as_str()], args].concat(), None);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    for i in 1..=5 {
        let addr = format!("10.7.0.{i}:80");
        let t = if i <= 3 { "LOGIC" } else { "LOGGER" };
        run(&[
            "register",
            "--type",
            t,
            "--addr",
            &addr,
            "--workers",
            "2",
            "--metadata",
            r#"{"zone":"a"}"#,
        ]);
    }
    let nodes = run(&["show", "nodes", "--limit", "2"]);
    assert_eq!(nodes.lines().count(), 4, "header, 2 rows, summary: {nodes}");
    assert!(
        nodes.contains("2 of 5 nodes shown, 2 of them online · LOGIC 2 · next page: --from 3"),
        "{nodes}"
    );
    let all = run(&["show", "nodes"]);
    assert!(
        all.contains("5 nodes, 5 online · LOGGER 2, LOGIC 3"),
        "{all}"
    );
    // The beacon cuts the list, in JSON too: pages walked with --from hold every entry once.
    let number = |v: &serde_json::Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(0)
    };
    let (mut from, mut seen) = (0u64, Vec::new());
    for _ in 0..5 {
        let page: serde_json::Value = serde_json::from_str(&run(&[
            "-w",
            "json",
            "show",
            "nodes",
            "--limit",
            "2",
            "--from",
            &from.to_string(),
        ]))
        .unwrap();
        let rows = page["nodes"].as_array().unwrap();
        assert!(rows.len() <= 2, "{page}");
        assert_eq!(number(&page["total"]), 5, "{page}");
        seen.extend(rows.iter().map(|r| number(&r["node"]["node_id"])));
        from = number(&page["next_node_id"]);
        if from == 0 {
            break;
        }
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5]);
    // Output into a pipe whose reader has gone (`| head`): a quiet end with the status a
    // shell expects, not a panic.
    let mut child = Command::new(NEBCLI)
        .args(["-s", s.as_str(), "-w", "json", "show", "nodes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", text(&out.stderr));
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    let logic = run(&["show", "nodes", "--type", "LOGIC"]);
    assert!(logic.contains("3 nodes, 3 online · LOGIC 3"), "{logic}");
    // Metadata is a JSON object in --json; times are for people in tables.
    let v: serde_json::Value =
        serde_json::from_str(&run(&["show", "nodes", "LOGIC", "--json"])).unwrap();
    assert_eq!(v["nodes"][0]["node"]["metadata"]["zone"], "a", "{v}");
    let detail = run(&["show", "node_detail", "LOGIC"]);
    assert!(detail.contains(" ago, 20"), "{detail}");
    // Re-registering with fewer flags replaces the details, and says so.
    let again = run(&["register", "--type", "LOGIC", "--addr", "10.7.0.1:80"]);
    assert!(
        again.contains("updated the live registration of 10.7.0.1:80: workers 2 -> 0, metadata {\"zone\":\"a\"} -> (none)"),
        "{again}"
    );
    // Metadata that is not an object is refused.
    let out = nebcli(
        &[
            "-s",
            &s,
            "register",
            "--type",
            "LOGIC",
            "--addr",
            "10.7.0.9:80",
            "--metadata",
            "[1]",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("metadata must be a JSON object"),
        "{}",
        text(&out.stderr)
    );
    // Quarantined IDs as a count and ranges; every one with --json.
    for i in [1, 2, 3, 5] {
        run(&["unregister", &format!("10.7.0.{i}:80")]);
    }
    let ids = run(&["show", "ids"]);
    assert!(ids.contains("quarantined: 1-3, 5"), "{ids}");
    let v: serde_json::Value = serde_json::from_str(&run(&["show", "ids", "--json"])).unwrap();
    assert_eq!(v["quarantined"].as_array().unwrap().len(), 4, "{v}");
}

#[test]
fn bench_that_cannot_write_stops_at_once_and_fails() {
    // Nothing at the address: one line, exit 1, before any registration.
    let dead = closed_port().to_string();
    let out = nebcli(&["-s", &dead, "bench", "register", "--count", "10"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot reach beacon"),
        "{}",
        text(&out.stderr)
    );
    // One beacon of three: it answers reads, but no write can succeed. Each client fails
    // once, within --timeout-ms, and the run stops there instead of trying 1,000 times.
    let c = Cluster::start_first("cli-bench-alone", 1);
    let s = c.addrs[0].to_string();
    let out = nebcli(
        &[
            "-s",
            &s,
            "--timeout-ms",
            "300",
            "bench",
            "register",
            "--count",
            "1000",
            "--clients",
            "4",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("no registration succeeded"), "{stdout}");
    let tried: usize = stdout
        .split('(')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(tried <= 8, "{stdout}");
    // More than the free IDs: refused before it starts.
    let out = nebcli(&["-s", &s, "bench", "register", "--count", "200000"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("more than the 100000 free node IDs"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bench_renews_what_it_made_through_a_run_longer_than_a_lease() {
    // Leases of 2 s; a run of several seconds loses nothing and leaves nothing behind. One
    // client registers one at a time, each write stored before the next: 1,200 of them take
    // about 6 s of a debug build on an idle host (three leases), and four times that on a
    // loaded one.
    let c = Cluster::start_with_lease("cli-bench-renew", Some(2000));
    let s = c.addrs[0].to_string();
    let out = nebcli(
        &[
            "-s",
            &s,
            "bench",
            "register",
            "--count",
            "1200",
            "--clients",
            "1",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("registered 1200/1200"), "{stdout}");
    assert!(!stdout.contains("lost their lease"), "{stdout}");
    // The run outlasted a lease, or this proves nothing.
    let secs: f64 = stdout
        .split(" in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        secs > 2.0,
        "the run took {secs} s, shorter than a lease: {stdout}"
    );
    let v = json_of(&nebcli(&["-s", &s, "--json", "show", "ids"], None));
    assert_eq!(v["in_use"], 0, "every registration given up: {v}");
}

/// A nebcli process that runs until stopped, its stdout read line by line.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(NEBCLI)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line (from now) that `f` accepts, within 10 s.
    fn line(&mut self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if f(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("{what}: not seen in {:?}", self.seen),
            }
        }
    }

    /// Sends `signal`; the exit status, stderr and the rest of stdout, within 10 s.
    fn stop(mut self, signal: i32) -> (std::process::ExitStatus, String, String) {
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "no exit after signal {signal}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        let rest: Vec<String> = self
            .lines
            .recv_timeout(Duration::from_secs(2))
            .into_iter()
            .chain(self.lines.try_iter())
            .collect();
        (status, err, rest.join("\n"))
    }
}

#[test]
fn register_keep_renews_until_sigterm_and_watch_nodes_prints_each_change() {
    let c = Cluster::start_with_lease("keep", Some(1_000));
    let s = c.addrs[0].to_string();
    // A missing port is nebcli's usage error, not the beacon's refusal.
    let out = nebcli(
        &[
            "-s", &s, "register", "--type", "LOGIC", "--addr", "10.0.0.5",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not IP:PORT"),
        "{}",
        text(&out.stderr)
    );

    // One registration first, so the watch shows it is established (`present`).
    let out = nebcli(
        &[
            "-s",
            &s,
            "register",
            "--type",
            "LOGIC",
            "--addr",
            "10.0.0.4:8080",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut watch = Running::start(&["-s", &s, "-w", "json", "watch", "nodes", "LOGIC"]);
    watch.line("present", |l| {
        l.contains("\"present\"") && l.contains("10.0.0.4:8080")
    });
    let mut keep = Running::start(&[
        "-s",
        &s,
        "register",
        "--type",
        "LOGIC",
        "--addr",
        "10.0.0.5:8080",
        "--keep",
    ]);
    keep.line("registered", |l| {
        l.contains("renewing the lease of node_id")
    });
    let added = watch.line("added", |l| {
        l.contains("\"added\"") && l.contains("10.0.0.5")
    });
    let added: serde_json::Value = serde_json::from_str(&added).unwrap();
    assert_eq!(added["node"]["addr"], "10.0.0.5:8080", "{added}");
    // Three leases later it is still registered: something renews it.
    std::thread::sleep(Duration::from_millis(3_000));
    let nodes = json_of(&nebcli(
        &["-s", &s, "-w", "json", "show", "nodes", "LOGIC"],
        None,
    ));
    let live: Vec<_> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["is_online"] == true)
        .collect();
    assert!(
        live.iter().any(|n| n["node"]["addr"] == "10.0.0.5:8080"),
        "{nodes}"
    );
    // SIGTERM: unregistered at once, exit 0; the watch prints the removal.
    let (status, err, out) = keep.stop(libc::SIGTERM);
    assert!(status.success(), "{status:?}: {err}");
    assert!(out.contains("SIGTERM: unregistered node_id"), "{out}");
    watch.line("removed", |l| {
        l.contains("\"removed\"") && l.contains("10.0.0.5:8080")
    });
    let (status, err, _) = watch.stop(libc::SIGINT);
    assert!(status.success(), "{status:?}: {err}");

    // From the index of the `added` line: no listing, the same two changes again, in
    // order, each with its index.
    let from = added["index"]
        .as_u64()
        .expect("each line has its index")
        .to_string();
    let mut again = Running::start(&["-s", &s, "watch", "nodes", "LOGIC", "--from", &from]);
    let first = again.line("added", |l| !l.trim().is_empty());
    assert!(
        first.starts_with("added ")
            && first.contains("10.0.0.5:8080")
            && first.contains(&format!("index={from}")),
        "{first}"
    );
    again.line("removed", |l| {
        l.starts_with("removed ") && l.contains("10.0.0.5:8080")
    });
    let (status, err, _) = again.stop(libc::SIGINT);
    assert!(status.success(), "{status:?}: {err}");
    let out = nebcli(&["-s", &s, "watch", "nodes", "--from", "x"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn watch_tasks_and_assignments_print_each_change_with_its_index_and_resume_from_one() {
    let c = Cluster::start("watches");
    let s = c.addrs[0].to_string();
    let run = |args: &[&str]| {
        let out = nebcli(&[&["-s", s.as_str()], args].concat(), None);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        out
    };

    // A queue's finished tasks, as JSON lines.
    run(&["queue", "create", "jobs"]);
    let mut tasks = Running::start(&["-s", &s, "-w", "json", "watch", "tasks", "jobs"]);
    run(&["task", "submit", "jobs", "t1", "--payload", "hello"]);
    let worker = Running::start(&["-s", &s, "task", "work", "jobs"]);
    let line = tasks.line("t1 finished", |l| l.contains("\"t1\""));
    let finished: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(finished["event"], "finished", "{finished}");
    assert_eq!(finished["task"]["state"], "completed", "{finished}");
    let index = finished["index"].as_u64().expect("the line has its index");
    let (status, err, _) = tasks.stop(libc::SIGINT);
    assert!(status.success(), "{status:?}: {err}");
    // From that index: the same task again, as text.
    let mut again = Running::start(&[
        "-s",
        &s,
        "watch",
        "tasks",
        "jobs",
        "--from",
        &index.to_string(),
    ]);
    let line = again.line("t1 again", |l| l.contains("t1"));
    assert!(
        line.starts_with("finished task t1 of jobs: completed")
            && line.ends_with(&format!("index={index}")),
        "{line}"
    );
    again.stop(libc::SIGINT);
    worker.stop(libc::SIGINT);

    // A registration's assignments: listed, then each change.
    let mut keep = Running::start(&[
        "-s",
        &s,
        "register",
        "--type",
        "ROBOT",
        "--addr",
        "10.0.7.1:9000",
        "--keep",
    ]);
    let registered = keep.line("registered", |l| {
        l.contains("renewing the lease of node_id")
    });
    let node_id: String = registered
        .split("node_id ")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    run(&["resource", "add", "arm-1", "--type", "ROBOT"]);
    let mut held = Running::start(&["-s", &s, "watch", "assignments", &node_id]);
    held.line("present", |l| l.starts_with("present resource arm-1"));
    run(&["resource", "add", "arm-2", "--type", "ROBOT"]);
    let line = held.line("held", |l| l.starts_with("held resource arm-2"));
    let index: String = line.rsplit("index=").next().unwrap().trim().to_owned();
    run(&["resource", "delete", "arm-2"]);
    held.line("gone", |l| l.starts_with("gone resource arm-2"));
    held.stop(libc::SIGINT);
    // From arm-2's index: no listing, the two changes again.
    let mut again = Running::start(&["-s", &s, "watch", "assignments", &node_id, "--from", &index]);
    let first = again.line("held again", |l| !l.trim().is_empty());
    assert!(first.starts_with("held resource arm-2"), "{first}");
    again.line("gone again", |l| l.starts_with("gone resource arm-2"));
    again.stop(libc::SIGINT);
    keep.stop(libc::SIGTERM);

    // Usage errors exit 2.
    for bad in [
        &["watch", "tasks"][..],
        &["watch", "assignments", "x"],
        &["watch", "tasks", "jobs", "--from", "y"],
    ] {
        let out = nebcli(&[&["-s", s.as_str()], bad].concat(), None);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
}

#[test]
fn small_things_a_new_user_met_say_what_they_mean() {
    let c = Cluster::start_with_lease("small", Some(1_000));
    let s = c.addrs[0].to_string();
    let run = |args: &[&str]| nebcli(&[&["-s", s.as_str()], args].concat(), None);

    // --count 0 is refused; a count over the cap is said, not silently cut.
    let out = run(&["sequence", "create", "orders"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["sequence", "next", "orders", "--count", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = run(&["sequence", "next", "orders", "--count", "100000000000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("a segment holds at most"),
        "{}",
        text(&out.stderr)
    );

    // A 64-bit ID is a JSON string, every digit kept.
    let out = run(&["-w", "json", "snowflake", "decode", "9223372036854775807"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["id"], "9223372036854775807", "{v}");

    // A type the beacons are not configured with, or one differing only in case, is said.
    let out = run(&["register", "--type", "logic", "--addr", "10.0.0.9:80"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("`LOGIC` is"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("case-sensitive"),
        "{}",
        text(&out.stderr)
    );

    // Looking up an address nothing is registered at fails, saying so.
    let out = run(&["show", "node_detail", "LOGIC", "10.9.9.9:80"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("no LOGIC registration at 10.9.9.9:80"),
        "{}",
        text(&out.stderr)
    );

    // An operator frees a quarantined ID early; a live one is refused.
    let out = run(&[
        "-w",
        "json",
        "register",
        "--type",
        "LOGIC",
        "--addr",
        "10.0.0.8:80",
    ]);
    let id = json_of(&out)["node_id"].as_u64().unwrap().to_string();
    let out = run(&["ids", "free", &id]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a live ID: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("held by a live registration"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["unregister", &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ids = json_of(&run(&["-w", "json", "show", "ids"]));
    let quarantined = |v: &serde_json::Value| v["quarantined"].as_array().unwrap().len();
    assert_eq!(quarantined(&ids), 1, "{ids}");
    let out = run(&["ids", "free", &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("is free"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        quarantined(&json_of(&run(&["-w", "json", "show", "ids"]))),
        0
    );
    let out = run(&["ids", "free", "zero"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn reads_without_a_majority_fail_unless_serializable_which_says_how_current_it_is() {
    // One beacon of three: no leader a majority confirms.
    let c = Cluster::start_first("cli-reads-alone", 1);
    let s = c.addrs[0].to_string();
    let out = nebcli(&["-s", &s, "show", "nodes"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("--consistency serializable"), "{err}");
    let out = nebcli(&["-s", &s, "--consistency", "s", "show", "nodes"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("may be stale (it reflects the log through index "),
        "{shown}"
    );
    let out = nebcli(
        &[
            "-s",
            &s,
            "--consistency",
            "s",
            "-w",
            "json",
            "show",
            "nodes",
        ],
        None,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["index"].is_u64() && v["stale"].is_string(), "{v}");
}

#[test]
fn every_list_pages_on_the_beacon_and_says_where_the_next_page_starts() {
    let c = Cluster::start("cli-pages");
    let s = c.addrs[0].to_string();
    let run = |args: &[&str]| {
        let out = nebcli(&[&["-s", s.as_str()], args].concat(), None);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    for name in ["a", "b", "c"] {
        run(&["sequence", "create", &format!("seq-{name}")]);
        run(&["queue", "create", &format!("queue-{name}")]);
        run(&[
            "resource",
            "add",
            &format!("res-{name}"),
            "--type",
            "CRAWLER",
        ]);
        run(&[
            "slots",
            "create",
            &format!("group-{name}"),
            "--type",
            "ROBOT",
            "--count",
            "1",
        ]);
    }
    // (list command, the JSON array, the name field within an entry)
    let lists: [(&str, &str, &[&str]); 4] = [
        ("sequences", "sequences", &["name"]),
        ("queues", "queues", &["queue", "name"]),
        ("resources", "resources", &["name"]),
        ("slots", "groups", &["group", "name"]),
    ];
    for (list, array, name_at) in lists {
        let (mut from, mut names) = (String::new(), Vec::new());
        for _ in 0..3 {
            let page: serde_json::Value = serde_json::from_str(&run(&[
                "-w", "json", "show", list, "--limit", "2", "--from", &from,
            ]))
            .unwrap();
            let rows = page[array].as_array().unwrap();
            assert!(rows.len() <= 2, "{list}: {page}");
            assert_eq!(
                page["total"]
                    .as_u64()
                    .or_else(|| page["total"].as_str().and_then(|t| t.parse().ok())),
                Some(3),
                "{list}: {page}"
            );
            for row in rows {
                let name = name_at.iter().fold(row, |v, k| &v[*k]);
                names.push(name.as_str().unwrap().to_owned());
            }
            from = page["next"].as_str().unwrap_or_default().to_owned();
            if from.is_empty() {
                break;
            }
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            (names.len(), &names, sorted.len()),
            (3, &sorted, 3),
            "{list}"
        );
        // The table says which part of the list it is and where the next page starts.
        let table = run(&["show", list, "--limit", "1"]);
        assert!(
            table.contains(&format!("1 of 3 shown · next page: --from {}", names[1])),
            "{list}: {table}"
        );
    }
    let out = nebcli(&["-s", s.as_str(), "show", "queues", "--limit", "0"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn an_operator_sets_health_drains_and_lists_by_health() {
    let c = Cluster::start_with_lease("cli-health", Some(60_000));
    let follower = c.addrs[1].to_string();
    let run = |args: &[&str]| {
        let mut all = vec!["-s", &follower];
        all.extend_from_slice(args);
        nebcli(&all, None)
    };
    for addr in ["10.0.5.1:80", "10.0.5.2:80", "10.0.5.3:80"] {
        let out = run(&["register", "--type", "WEB", "--addr", addr]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // Through a follower: the change goes to the leader and is answered once committed.
    let out = run(&["node", "health", "1", "critical", "--note", "db down"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with("node_id 1 (WEB at 10.0.5.1:80): critical since"),
        "{said}"
    );
    assert!(said.contains("(db down)"), "{said}");
    let out = run(&["node", "drain", "2", "--note", "upgrade"]);
    assert!(
        text(&out.stdout).contains("passing, draining since"),
        "{}",
        text(&out.stdout)
    );

    // Listings say each one's health and keep the ones asked for.
    let ids = |filter: &str| -> Vec<u64> {
        let v = json_of(&run(&["--json", "show", "nodes", "--health", filter]));
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["node_id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ids("critical"), vec![1]);
    assert_eq!(ids("draining"), vec![2]);
    assert_eq!(ids("serving"), vec![3]);
    assert_eq!(ids("passing"), vec![2, 3]);
    assert_eq!(ids("any"), vec![1, 2, 3]);
    let v = json_of(&run(&["--json", "show", "nodes"]));
    assert_eq!(v["nodes"][0]["node"]["health"]["status"], "critical");
    assert_eq!(v["nodes"][0]["node"]["health"]["note"], "db down");
    assert_eq!(v["nodes"][1]["node"]["health"]["draining"], true);
    assert_eq!(v["nodes"][2]["node"]["health"]["status"], "passing");
    let table = text(&run(&["show", "nodes"]).stdout);
    assert!(table.contains("health"), "{table}");
    assert!(table.contains("critical since"), "{table}");

    // Back into rotation.
    let out = run(&["node", "undrain", "10.0.5.2:80"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["node", "health", "1", "passing"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(ids("serving"), vec![1, 2, 3]);

    // Mistakes are usage errors (exit 2) naming what was wrong; an unknown node is exit 1.
    for (args, says) in [
        (
            &["node", "health", "1", "sick"][..],
            "`sick` is not passing",
        ),
        (
            &["node", "health", "x", "passing"][..],
            "`x` is neither a node ID",
        ),
        (&["node", "health", "1"][..], "usage: `node health ID"),
        (
            &["node", "drain", "1", "--force", "yes"][..],
            "unknown flag --force",
        ),
        (
            &["show", "nodes", "--health", "sick"][..],
            "--health `sick`",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = run(&["node", "drain", "99"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no registration for node ID 99"),
        "{}",
        text(&out.stderr)
    );
}
