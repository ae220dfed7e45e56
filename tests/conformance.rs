//! One conformance suite for every client: the cases that make a coordinator client
//! trustworthy, written once and run against the Rust client, the Python package, the Go
//! module and the Java library, each through a small driver program of its own (commands in
//! on stdin, answers and events out on stdout, one per line: `docs/clients.md` has the
//! protocol and the table of cases against clients). A client that behaves differently fails
//! the same case.
//!
//! Each case starts real beacons, then runs every client's driver against them at once, each
//! on a cluster of its own, with real faults: a beacon stopped (SIGSTOP) or killed.
//! Bounds on time are loose (a shared machine), far below what a client that waited on a
//! hung beacon would take; the figures themselves are printed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use beacon_testkit::*;

#[path = "support/python.rs"]
mod python_env;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
/// Leases short enough that a case waits a few in seconds, long enough that an election on a
/// loaded machine fits in one with room to spare.
const CONFIG: &str = r#"{"lease_ms": 3000, "id_reuse_delay_ms": 3000}"#;
const LEASE: Duration = Duration::from_millis(3000);

/// The clients under test, as the docs' table names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Python,
    Go,
    Java,
}

const LANGS: [Lang; 4] = [Lang::Rust, Lang::Python, Lang::Go, Lang::Java];

/// The command that runs `lang`'s driver, built first where it needs building.
fn driver_command(lang: Lang) -> Command {
    let root = python_env::root();
    match lang {
        Lang::Rust => {
            // As the test build resolves features (`--workspace --tests`), so that this finds
            // the driver it already compiled: `-p beacon-client` alone rebuilt tokio, tonic
            // and beacon in another feature set, two minutes of a loaded CI host.
            cargo_build(
                &["--workspace", "--tests", "--example", "conformance_driver"],
                "the Rust conformance driver",
            );
            Command::new(Path::new(BEACON).with_file_name("examples/conformance_driver"))
        }
        Lang::Python => {
            let mut cmd = Command::new(python_env::python());
            cmd.arg(root.join("clients/python/tests/conformance_driver.py"));
            cmd
        }
        Lang::Go => {
            let _built = python_env::locked("go-driver");
            let out: PathBuf = root.join("target/go-bin/conformance-driver");
            python_env::run(
                &mut drivers::go_build(&root.join("clients/go"), &out),
                "go build ./cmd/conformance-driver",
            );
            Command::new(out)
        }
        Lang::Java => {
            drivers::java_driver(&python_env::built_java()).expect("the Java driver's classpath")
        }
    }
}

/// A running driver: its answers in order, its events kept apart as they come.
struct Driver {
    lang: Lang,
    child: Child,
    /// Where the driver's stderr (its client's logs) goes: printed when a case fails, since
    /// the case's folder goes with it.
    log_path: PathBuf,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    events: Vec<String>,
}

/// A command's answer: the words after `ok`, or the error's kind and message.
type Answer = Result<Vec<String>, (String, String)>;

impl Driver {
    fn start(lang: Lang, dir: &Path) -> Driver {
        let log_path = dir.join(format!("{lang:?}-driver.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = driver_command(lang)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start the {lang:?} driver: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Driver {
            lang,
            log_path,
            child,
            stdin,
            lines,
            events: Vec::new(),
        }
    }

    /// Sends `command` and waits (at most `limit`) for its answer.
    fn ask_within(&mut self, command: &str, limit: Duration) -> Answer {
        writeln!(self.stdin, "{command}").expect("the driver reads its commands");
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{:?} driver: no answer to `{command}` within {limit:?}",
                    self.lang
                )
            });
            if line.starts_with("event ") {
                self.events.push(line);
                continue;
            }
            let mut words = line.split_whitespace().map(str::to_owned);
            return match words.next().as_deref() {
                Some("ok") => Ok(words.collect()),
                Some("err") => {
                    let kind = words.next().unwrap_or_default();
                    Err((kind, words.collect::<Vec<_>>().join(" ")))
                }
                _ => panic!("{:?} driver answered `{line}` to `{command}`", self.lang),
            };
        }
    }

    /// Sends `command`; its answer, which must be `ok`.
    fn ask(&mut self, command: &str) -> Vec<String> {
        self.ask_within(command, Duration::from_secs(60))
            .unwrap_or_else(|(kind, msg)| {
                panic!("{:?} driver: `{command}` failed: {kind} {msg}", self.lang)
            })
    }

    /// The events that came so far, and those that come within `wait`.
    fn events_after(&mut self, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.events.push(line);
        }
        self.events.clone()
    }

    /// Waits (at most `limit`) until `done` holds of the events so far.
    fn events_until(&mut self, limit: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + limit;
        while !done(&self.events) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.events.push(line),
                Err(_) => break,
            }
        }
        self.events.clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.show_log();
    }
}

impl Driver {
    /// Prints the driver's log when its case failed (or when `BEACON_DRIVER_LOGS` is set).
    fn show_log(&self) {
        if std::thread::panicking() || std::env::var_os("BEACON_DRIVER_LOGS").is_some() {
            let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            eprintln!(
                "--- the {:?} driver's log (last {} lines) ---",
                self.lang,
                tail.len()
            );
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// Three beacons, and which of them a case stopped or killed.
struct Beacons {
    cluster: Cluster,
    /// Each beacon's admin API (metrics).
    admin: Vec<std::net::SocketAddr>,
    down: Vec<bool>,
    /// For the test kit's status reads.
    rt: tokio::runtime::Runtime,
}

impl Beacons {
    fn start() -> Beacons {
        Beacons::start_with(serde_json::json!({}))
    }

    /// Three beacons with the suite's lease and `keys` besides (`limits`, say).
    fn start_with(keys: serde_json::Value) -> Beacons {
        let mut config: serde_json::Value = serde_json::from_str(CONFIG).unwrap();
        for (k, v) in keys.as_object().expect("config keys") {
            config[k] = v.clone();
        }
        let (cluster, admin) = cluster_with_admin(Path::new(BEACON), 3, TICK_MS, "conf", config);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let b = Beacons {
            cluster,
            admin,
            down: vec![false; 3],
            rt,
        };
        b.leader();
        b
    }

    /// The `BUSY` refusals all three beacons made so far.
    fn busy_refusals(&self) -> f64 {
        self.metric_sum("beacon_requests_busy_total")
    }

    /// Metric `name` summed over the three beacons.
    fn metric_sum(&self, name: &str) -> f64 {
        self.admin
            .iter()
            .map(|a| {
                let (_, text) = http_get(*a, "/metrics").expect("metrics");
                metric(&text, name).unwrap_or(0.0)
            })
            .sum()
    }

    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.cluster.beacons.iter().map(|b| b.addr).collect()
    }

    /// The beacons as a driver's `connect` takes them, `first` first.
    fn list(&self, first: usize) -> String {
        listed_first(&self.addrs(), first).join(",")
    }

    /// The index of the beacon every running one agrees leads.
    fn leader(&self) -> usize {
        let up: Vec<_> = self
            .addrs()
            .into_iter()
            .zip(&self.down)
            .filter(|(_, down)| !**down)
            .map(|(a, _)| a)
            .collect();
        let leader = self
            .rt
            .block_on(eventually(Duration::from_secs(15), || settled_leader(&up)))
            .unwrap_or_else(|| panic!("no leader\n{}", self.cluster.logs()));
        self.addrs()
            .iter()
            .position(|a| a.to_string() == leader)
            .expect("a beacon of the cluster leads")
    }

    /// A follower of the current leader.
    fn follower(&self) -> usize {
        (self.leader() + 1) % 3
    }

    fn stop(&mut self, i: usize) {
        self.cluster.beacons[i].pause();
        self.down[i] = true;
    }

    fn cont(&mut self, i: usize) {
        self.cluster.beacons[i].signal(libc::SIGCONT);
        self.down[i] = false;
    }

    fn kill(&mut self, i: usize) {
        self.cluster.beacons[i].kill();
        self.down[i] = true;
    }

    /// Starts a killed beacon again, from what it stored.
    fn restart(&mut self, i: usize) {
        self.cluster.beacons[i].restart();
        wait_listening(self.cluster.beacons[i].addr);
        self.down[i] = false;
    }
}

impl Drop for Beacons {
    fn drop(&mut self) {
        // A stopped beacon is killed whole, not left stopped.
        for b in &self.cluster.beacons {
            b.signal(libc::SIGCONT);
        }
    }
}

/// Runs `case` against every client at once, each on a cluster of its own, and prints what
/// each measured. (At once: most of a case is waiting, for a lease or a lapse; the suite's
/// cases take two test slots each, so that at most two run side by side, eight clusters on
/// two cores: sixteen at once made every case slower than the clients one after another.)
fn each_client(case: &str, run: impl Fn(Lang, Beacons, &Path) -> String + Sync) {
    each_of(&LANGS, case, run);
}

/// [`each_client`] for some of the clients.
fn each_of(langs: &[Lang], case: &str, run: impl Fn(Lang, Beacons, &Path) -> String + Sync) {
    each_on(langs, Beacons::start, case, run);
}

/// [`each_of`] on clusters that `start` makes.
fn each_on(
    langs: &[Lang],
    start: impl Fn() -> Beacons + Sync,
    case: &str,
    run: impl Fn(Lang, Beacons, &Path) -> String + Sync,
) {
    let said: Vec<std::thread::Result<String>> = std::thread::scope(|scope| {
        let runs: Vec<_> = langs
            .iter()
            .map(|&lang| {
                let (start, run) = (&start, &run);
                scope.spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    run(lang, start(), dir.path())
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join()).collect()
    });
    let mut failed = Vec::new();
    for (lang, said) in langs.iter().zip(said) {
        match said {
            Ok(said) => println!("{case} / {lang:?}: {said}"),
            Err(e) => {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!("{lang:?}: {why}"));
            }
        }
    }
    assert!(failed.is_empty(), "{case}:\n{}", failed.join("\n"));
}

/// The events of kind `what` (`lost`, `node W`, `config W`) among `events`.
fn of<'a>(events: &'a [String], what: &str) -> Vec<&'a str> {
    let prefix = format!("event {what} ");
    events
        .iter()
        .filter_map(|e| e.strip_prefix(&prefix))
        .collect()
}

/// A client made afresh with a stopped (hung) beacon first in its list answers without
/// waiting for it, and the registration it makes keeps its lease.
#[test]
fn a_hung_first_beacon_costs_a_fresh_client_no_wait() {
    each_client("hung first beacon", |lang, mut b, dir| {
        let hung = b.follower();
        b.stop(hung);
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(hung)));
        let started = Instant::now();
        let reg = d.ask("register LOGIC 10.0.9.1:7000");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "{lang:?}: the first answer took {took:?} past the hung first beacon"
        );
        std::thread::sleep(2 * LEASE);
        assert_eq!(d.ask(&format!("holds {}", reg[0])), ["true"], "{lang:?}");
        assert!(
            of(&d.events_after(Duration::ZERO), "lost").is_empty(),
            "{lang:?}"
        );
        format!("first answer in {took:?}")
    });
}

/// A registration kept alive while its leader is killed, then while the next leader hangs:
/// no lease lost.
#[test]
fn a_kept_alive_registration_outlives_a_killed_and_a_hung_leader() {
    each_client("leader killed and hung", |lang, mut b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(0)));
        let reg = d.ask("register LOGIC 10.0.9.2:7000");
        let leader = b.leader();
        b.kill(leader);
        std::thread::sleep(2 * LEASE);
        assert_eq!(
            d.ask(&format!("holds {}", reg[0])),
            ["true"],
            "{lang:?} after the kill"
        );
        // Back, so that a majority runs while the next leader hangs.
        b.restart(leader);
        let leader = b.leader();
        b.stop(leader);
        std::thread::sleep(2 * LEASE);
        assert_eq!(
            d.ask(&format!("holds {}", reg[0])),
            ["true"],
            "{lang:?} while hung"
        );
        b.cont(leader);
        let lost = d.events_after(Duration::from_millis(200));
        assert!(
            of(&lost, "lost").is_empty(),
            "{lang:?}: {lost:?}\n{}",
            b.cluster.logs()
        );
        "no lease lost".to_owned()
    });
}

/// A watch across a leader kill tells every change once, in order: those made before the
/// kill and those made while it found the next leader.
#[test]
fn a_watch_across_a_leader_kill_tells_every_change_once_in_order() {
    each_client("watch across a leader kill", |lang, b, dir| {
        watch_across(lang, b, dir, Beacons::kill)
    });
}

/// A watch whose beacon (the leader, listed first) hangs: it leaves the silent beacon, resumes
/// at the next leader, and tells every change once, in order.
#[test]
fn a_watch_across_a_hung_leader_tells_every_change_once_in_order() {
    each_client("watch across a hung leader", |lang, b, dir| {
        watch_across(lang, b, dir, Beacons::stop)
    });
}

/// A watch through the leader (listed first) while `fault` befalls it, changes made before
/// and after: each told once, in order.
fn watch_across(lang: Lang, mut b: Beacons, dir: &Path, fault: fn(&mut Beacons, usize)) -> String {
    let leader = b.leader();
    let mut d = Driver::start(lang, dir);
    d.ask(&format!("connect {} 20000", b.list(leader)));
    let mut services = Driver::start(Lang::Rust, dir);
    services.ask(&format!("connect {} 20000", b.list((leader + 1) % 3)));
    let first = services.ask("register WATCHED 10.0.9.3:7000")[0].clone();
    d.ask("watch w WATCHED");
    let mut want = vec![format!("present {first}")];
    let a = services.ask("register WATCHED 10.0.9.4:7000")[0].clone();
    want.push(format!("added {a}"));
    fault(&mut b, leader);
    let started = Instant::now();
    let c = services.ask("register WATCHED 10.0.9.5:7000")[0].clone();
    want.push(format!("added {c}"));
    services.ask(&format!("unregister {a}"));
    want.push(format!("removed {a}"));
    let events = d.events_until(Duration::from_secs(40), |e| {
        of(e, "node w").len() >= want.len()
    });
    let took = started.elapsed();
    let got: Vec<String> = of(&events, "node w")
        .iter()
        .map(|e| e.to_string())
        .collect();
    let got_after = d.events_after(Duration::from_millis(500));
    assert_eq!(got, want, "{lang:?}");
    assert_eq!(
        of(&got_after, "node w").len(),
        want.len(),
        "{lang:?}: a change told twice"
    );
    format!(
        "{} changes, each once, the last {took:?} after the fault",
        want.len()
    )
}

/// A client over its share (`limits.client_rate`: 20 calls a second per connection) is
/// refused `BUSY` with when to come back: it waits as told, with jitter, and every call of a
/// burst gets through, the beacons refusing a few times per call and not in a storm (a
/// client that retried at once would be refused thousands of times a second).
#[test]
fn a_busy_beacon_is_waited_out_as_told_and_every_call_gets_through() {
    let limited = || Beacons::start_with(serde_json::json!({"limits": {"client_rate": 20}}));
    each_on(&LANGS, limited, "busy beacon", |lang, b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 30000", b.list(b.leader())));
        let before = b.busy_refusals();
        let started = Instant::now();
        let answer = d.ask("bench alloc 3 8");
        let took = started.elapsed().as_secs_f64();
        let refused = b.busy_refusals() - before;
        let done: f64 = answer[0].parse().unwrap();
        assert_eq!(answer[1], "0", "{lang:?}: calls failed: {answer:?}");
        assert!(done >= 20.0, "{lang:?}: {done} calls in {took:.1} s");
        assert!(
            refused >= 1.0,
            "{lang:?}: no call was refused: the case tested nothing"
        );
        assert!(
            refused <= 20.0 * done,
            "{lang:?}: {refused} refusals for {done} calls in {took:.1} s: a retry storm"
        );
        format!("{done} calls in {took:.1} s, {refused} refusals")
    });
}

/// Numbers taken from a sequence (in segments of 20) on both sides of a leader kill: none
/// twice.
#[test]
fn a_sequence_across_a_leader_kill_gives_no_number_twice() {
    each_client("sequence across a leader kill", |lang, mut b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(0)));
        let mut seen = std::collections::BTreeSet::new();
        let mut take = |d: &mut Driver| {
            // Segments of 20: every call fetches many, across the kill too.
            for n in d.ask("numbers orders 500 20") {
                assert!(
                    seen.insert(n.parse::<u64>().unwrap()),
                    "{lang:?}: number {n} twice"
                );
            }
        };
        take(&mut d);
        let leader = b.leader();
        b.kill(leader);
        take(&mut d);
        take(&mut d);
        format!("{} numbers, none twice", seen.len())
    });
}

/// A config watch across a leader kill misses no change and tells none twice.
#[test]
fn a_config_watch_across_a_leader_kill_misses_no_change() {
    each_client("config watch across a leader kill", |lang, mut b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(0)));
        d.ask("config_watch c cluster/");
        for v in 1..=5 {
            d.ask(&format!("config_put cluster/step {v}"));
        }
        let leader = b.leader();
        b.kill(leader);
        for v in 6..=10 {
            d.ask(&format!("config_put cluster/step {v}"));
        }
        let events = d.events_until(Duration::from_secs(20), |e| of(e, "config c").len() >= 10);
        let values: Vec<&str> = of(&events, "config c")
            .iter()
            .filter_map(|e| e.rsplit(' ').next())
            .collect();
        let want: Vec<String> = (1..=10).map(|v| v.to_string()).collect();
        assert_eq!(values, want, "{lang:?}: {events:?}");
        let after = d.events_after(Duration::from_millis(500));
        assert_eq!(
            of(&after, "config c").len(),
            10,
            "{lang:?}: a change told twice"
        );
        "10 changes, each once, in order".to_owned()
    });
}

/// A lease that really lapses (every beacon stopped for longer than a lease) is reported
/// once, and the registration no longer holds.
#[test]
fn a_lease_that_lapses_is_reported_once_and_holds_no_more() {
    each_client("lease that lapses", |lang, mut b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(0)));
        let reg = d.ask("register LOGIC 10.0.9.6:7000");
        for i in 0..3 {
            b.stop(i);
        }
        let events = d.events_until(2 * LEASE, |e| !of(e, "lost").is_empty());
        assert_eq!(d.ask(&format!("holds {}", reg[0])), ["false"], "{lang:?}");
        for i in 0..3 {
            b.cont(i);
        }
        let after = d.events_after(2 * LEASE);
        assert_eq!(of(&events, "lost").len(), 1, "{lang:?}: {events:?}");
        assert_eq!(
            of(&after, "lost").len(),
            1,
            "{lang:?}: told more than once: {after:?}"
        );
        assert_eq!(
            d.ask(&format!("holds {}", reg[0])),
            ["false"],
            "{lang:?} once the beacons are back"
        );
        "reported once".to_owned()
    });
}

/// A client's reports on schedule, with most of the lease left, go out routine: the leader
/// confirms them with its next heartbeat's round, and the lease holds.
#[test]
fn a_scheduled_report_is_routine_and_keeps_the_lease() {
    each_client("scheduled reports routine", |lang, b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 20000", b.list(0)));
        let reg = d.ask("register LOGIC 10.0.9.7:7000");
        // A report every quarter lease: two or three in this time.
        std::thread::sleep(LEASE * 3 / 4 * 3);
        let routine = b.metric_sum("beacon_server_confirmed_with_heartbeat_total");
        assert!(
            routine >= 1.0,
            "{lang:?}: no report confirmed with a heartbeat ({routine})"
        );
        assert_eq!(d.ask(&format!("holds {}", reg[0])), ["true"], "{lang:?}");
        format!("{routine} routine")
    });
}

/// A message over the beacons' frame limit is refused as TooLarge, said clearly, and the
/// client goes on.
#[test]
fn a_message_over_the_frame_limit_is_a_clear_too_large() {
    each_client("over the frame limit", |lang, b, dir| {
        let mut d = Driver::start(lang, dir);
        d.ask(&format!("connect {} 3000", b.list(0)));
        let refused = d.ask_within("put_large cluster/big 5000000", Duration::from_secs(30));
        let (kind, msg) = refused.expect_err("a 5 MB value is refused");
        assert_eq!(kind, "TooLarge", "{lang:?}: {msg}");
        assert!(
            msg.contains("frame") || msg.contains("large"),
            "{lang:?}: {msg}"
        );
        d.ask("config_put cluster/small 1");
        msg
    });
}

/// Every case above is in the docs' table of cases against clients.
#[test]
fn the_docs_table_names_every_case() {
    let docs = std::fs::read_to_string(python_env::root().join("docs/clients.md")).unwrap();
    let me = std::fs::read_to_string(python_env::root().join("tests/conformance.rs")).unwrap();
    let cases: Vec<&str> = me
        .split("\nfn ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| name.starts_with("a_"))
        .collect();
    assert!(cases.len() >= 7, "{cases:?}");
    for case in cases {
        assert!(
            docs.contains(case),
            "docs/clients.md does not name the case `{case}`"
        );
    }
}

/// Each client's README states its allocations and renewals per second at each caller count
/// as `bench/run --only client-libs` measured them (bench/results-clients.json), beside the
/// Rust client's: the figures a user reads are the benchmark's, and move with it.
#[test]
fn each_client_readme_states_its_figures_from_the_bench() {
    let root = python_env::root();
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("bench/results-clients.json"))
            .expect("bench/results-clients.json (bench/run --only client-libs --out bench/results-clients.md)"),
    )
    .unwrap();
    let libs = results["client_libs"].as_array().expect("client_libs");
    let lib = |name: &str| {
        libs.iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no figures for the {name} client"))
    };
    // `| callers | allocations/s | renewals/s |`, then the Rust client's beside the others.
    let rows = |l: &serde_json::Value| -> Vec<(u64, String)> {
        let of = |what: &str, i: usize| l[what][i]["per_sec"].as_f64().unwrap_or(-1.0);
        (0..l["alloc"].as_array().map_or(0, Vec::len))
            .map(|i| {
                let callers = l["alloc"][i]["callers"].as_u64().unwrap();
                (
                    callers,
                    format!("{:.0} | {:.0}", of("alloc", i), of("renew", i)),
                )
            })
            .collect()
    };
    let rust = rows(lib("Rust"));
    assert_eq!(rust.len(), 3, "1, 16 and 64 callers: {rust:?}");
    for (name, readme) in [
        ("Rust", "client/README.md"),
        ("Python", "clients/python/README.md"),
        ("Go", "clients/go/README.md"),
        ("Java", "clients/java/README.md"),
    ] {
        let text = std::fs::read_to_string(root.join(readme)).unwrap();
        let l = lib(name);
        assert!(l["skipped"].is_null(), "{name}: {}", l["skipped"]);
        for ((callers, own), (_, beside)) in rows(l).iter().zip(&rust) {
            let row = if name == "Rust" {
                format!("| {callers} | {own} |")
            } else {
                format!("| {callers} | {own} | {beside} |")
            };
            assert!(
                text.contains(&row),
                "{readme} does not state `{row}` (bench/results-clients.json)"
            );
        }
    }
}
