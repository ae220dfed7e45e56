//! One conformance suite for every client: the cases that make a coordinator client
//! trustworthy, written once and run against the Rust client, the Python package and the Go
//! module, each through a small driver program of its own (commands in on stdin, answers and
//! events out on stdout, one per line: `docs/clients.md` has the protocol and the table of
//! cases against clients). A client that behaves differently fails the same case.
//!
//! Each case starts real beacons, then runs every client's driver against them in turn,
//! each on a cluster of its own, with real faults: a beacon stopped (SIGSTOP) or killed.
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
/// Short leases, so that a case waits a few leases in seconds.
const CONFIG: &str = r#"{"lease_ms": 1500, "id_reuse_delay_ms": 3000}"#;
const LEASE: Duration = Duration::from_millis(1500);

/// The clients under test, as the docs' table names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Python,
    Go,
}

const LANGS: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::Go];

/// The command that runs `lang`'s driver, built first where it needs building.
fn driver_command(lang: Lang) -> Command {
    let root = python_env::root();
    match lang {
        Lang::Rust => {
            cargo_build(
                &["-p", "beacon-client", "--example", "conformance_driver"],
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
            let out: PathBuf = root.join("target/go-bin/conformance-driver");
            python_env::run(
                Command::new("go")
                    .args(["build", "-o"])
                    .arg(&out)
                    .arg("./cmd/conformance-driver")
                    .current_dir(root.join("clients/go")),
                "go build ./cmd/conformance-driver",
            );
            Command::new(out)
        }
    }
}

/// A running driver: its answers in order, its events kept apart as they come.
struct Driver {
    lang: Lang,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    events: Vec<String>,
}

/// A command's answer: the words after `ok`, or the error's kind and message.
type Answer = Result<Vec<String>, (String, String)>;

impl Driver {
    fn start(lang: Lang, dir: &Path) -> Driver {
        let log = std::fs::File::create(dir.join(format!("{lang:?}-driver.log"))).unwrap();
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
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three beacons, and which of them a case stopped or killed.
struct Beacons {
    cluster: Cluster,
    down: Vec<bool>,
}

impl Beacons {
    async fn start() -> Beacons {
        let ports = free_ports(3);
        let cluster = Cluster::start_with(Path::new(BEACON), &ports, TICK_MS, "conf", CONFIG);
        let b = Beacons {
            cluster,
            down: vec![false; 3],
        };
        b.leader().await;
        b
    }

    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.cluster.beacons.iter().map(|b| b.addr).collect()
    }

    /// The beacons as a driver's `connect` takes them, `first` first.
    fn list(&self, first: usize) -> String {
        listed_first(&self.addrs(), first).join(",")
    }

    /// The index of the beacon every running one agrees leads.
    async fn leader(&self) -> usize {
        let up: Vec<_> = self
            .addrs()
            .into_iter()
            .zip(&self.down)
            .filter(|(_, down)| !**down)
            .map(|(a, _)| a)
            .collect();
        let leader = eventually(Duration::from_secs(15), || settled_leader(&up))
            .await
            .unwrap_or_else(|| panic!("no leader\n{}", self.cluster.logs()));
        self.addrs()
            .iter()
            .position(|a| a.to_string() == leader)
            .expect("a beacon of the cluster leads")
    }

    /// A follower of the current leader.
    async fn follower(&self) -> usize {
        (self.leader().await + 1) % 3
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

/// Runs `case` against every client, each on a cluster of its own, and prints what each
/// measured.
async fn each_client<F, Fut>(case: &str, run: F)
where
    F: Fn(Lang, Beacons, tempfile::TempDir) -> Fut,
    Fut: std::future::Future<Output = String>,
{
    for lang in LANGS {
        let dir = tempfile::tempdir().unwrap();
        let beacons = Beacons::start().await;
        let said = run(lang, beacons, dir).await;
        println!("{case} / {lang:?}: {said}");
    }
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_first_beacon_costs_a_fresh_client_no_wait() {
    each_client("hung first beacon", |lang, mut b, dir| async move {
        let hung = b.follower().await;
        b.stop(hung);
        let mut d = Driver::start(lang, dir.path());
        d.ask(&format!("connect {} 20000", b.list(hung)));
        let started = Instant::now();
        let reg = d.ask("register LOGIC 10.0.9.1:7000");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "{lang:?}: the first answer took {took:?} past the hung first beacon"
        );
        std::thread::sleep(3 * LEASE);
        assert_eq!(d.ask(&format!("holds {}", reg[0])), ["true"], "{lang:?}");
        assert!(
            of(&d.events_after(Duration::ZERO), "lost").is_empty(),
            "{lang:?}"
        );
        format!("first answer in {took:?}")
    })
    .await;
}

/// A registration kept alive while its leader is killed, then while the next leader hangs:
/// no lease lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_registration_outlives_a_killed_and_a_hung_leader() {
    each_client("leader killed and hung", |lang, mut b, dir| async move {
        let mut d = Driver::start(lang, dir.path());
        d.ask(&format!("connect {} 20000", b.list(0)));
        let reg = d.ask("register LOGIC 10.0.9.2:7000");
        let leader = b.leader().await;
        b.kill(leader);
        std::thread::sleep(3 * LEASE);
        assert_eq!(
            d.ask(&format!("holds {}", reg[0])),
            ["true"],
            "{lang:?} after the kill"
        );
        // Back, so that a majority runs while the next leader hangs.
        b.restart(leader);
        let leader = b.leader().await;
        b.stop(leader);
        std::thread::sleep(3 * LEASE);
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
    })
    .await;
}

/// A watch across a leader kill tells every change once, in order: those made before the
/// kill and those made while it found the next leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_across_a_leader_kill_tells_every_change_once_in_order() {
    each_client(
        "watch across a leader kill",
        |lang, mut b, dir| async move {
            let mut d = Driver::start(lang, dir.path());
            d.ask(&format!("connect {} 20000", b.list(0)));
            let mut services = Driver::start(Lang::Rust, dir.path());
            services.ask(&format!("connect {} 20000", b.list(0)));
            let first = services.ask("register WATCHED 10.0.9.3:7000")[0].clone();
            d.ask("watch w WATCHED");
            let mut want = vec![format!("present {first}")];
            let a = services.ask("register WATCHED 10.0.9.4:7000")[0].clone();
            want.push(format!("added {a}"));
            let leader = b.leader().await;
            b.kill(leader);
            let c = services.ask("register WATCHED 10.0.9.5:7000")[0].clone();
            want.push(format!("added {c}"));
            services.ask(&format!("unregister {a}"));
            want.push(format!("removed {a}"));
            let events = d.events_until(Duration::from_secs(20), |e| {
                of(e, "node w").len() >= want.len()
            });
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
            format!("{} changes, each once", want.len())
        },
    )
    .await;
}

/// Numbers taken from a sequence (in segments of 20) on both sides of a leader kill: none
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_across_a_leader_kill_gives_no_number_twice() {
    each_client(
        "sequence across a leader kill",
        |lang, mut b, dir| async move {
            let mut d = Driver::start(lang, dir.path());
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
            let leader = b.leader().await;
            b.kill(leader);
            take(&mut d);
            take(&mut d);
            format!("{} numbers, none twice", seen.len())
        },
    )
    .await;
}

/// A config watch across a leader kill misses no change and tells none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_watch_across_a_leader_kill_misses_no_change() {
    each_client(
        "config watch across a leader kill",
        |lang, mut b, dir| async move {
            let mut d = Driver::start(lang, dir.path());
            d.ask(&format!("connect {} 20000", b.list(0)));
            d.ask("config_watch c cluster/");
            for v in 1..=5 {
                d.ask(&format!("config_put cluster/step {v}"));
            }
            let leader = b.leader().await;
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
        },
    )
    .await;
}

/// A lease that really lapses (every beacon stopped for longer than a lease) is reported
/// once, and the registration no longer holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_lapses_is_reported_once_and_holds_no_more() {
    each_client("lease that lapses", |lang, mut b, dir| async move {
        let mut d = Driver::start(lang, dir.path());
        d.ask(&format!("connect {} 20000", b.list(0)));
        let reg = d.ask("register LOGIC 10.0.9.6:7000");
        for i in 0..3 {
            b.stop(i);
        }
        let events = d.events_until(3 * LEASE, |e| !of(e, "lost").is_empty());
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
    })
    .await;
}

/// A message over the beacons' frame limit is refused as TooLarge, said clearly, and the
/// client goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_frame_limit_is_a_clear_too_large() {
    each_client("over the frame limit", |lang, b, dir| async move {
        let mut d = Driver::start(lang, dir.path());
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
    })
    .await;
}

/// Every case above is in the docs' table of cases against clients.
#[test]
fn the_docs_table_names_every_case() {
    let docs = std::fs::read_to_string(python_env::root().join("docs/clients.md")).unwrap();
    let me = std::fs::read_to_string(python_env::root().join("tests/conformance.rs")).unwrap();
    let cases: Vec<&str> = me
        .split("async fn ")
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
