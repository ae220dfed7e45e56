//! beacon's client libraries side by side: allocations and lease renewals per second through
//! each (Rust, Python, Go, Java) at each caller count, on one cluster of three beacons.
//!
//! Each client is driven by its conformance driver (docs/clients.md), the same program the
//! conformance suite runs, with its `bench` command: `bench alloc SECONDS CALLERS` allocates
//! node IDs (`Register` through the client's call path: its failover, deadlines and `BUSY`
//! back-off), `bench renew SECONDS CALLERS` renews one registration per caller with reports
//! back to back. The gRPC clients share one client (one HTTP/2 connection) among their
//! callers, as a service would; the Rust client speaks the native protocol, one request under
//! way per connection, so each of its callers has a connection of its own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use beacon_testkit::drivers;
use serde::Serialize;

/// The libraries, as their READMEs and the conformance suite name them.
pub const LIBRARIES: [&str; 4] = ["Rust", "Python", "Go", "Java"];

/// One `bench` command's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub callers: usize,
    pub per_sec: f64,
    pub errors: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// What one library measured; `skipped` says why it was not measured here.
#[derive(Debug, Clone, Serialize)]
pub struct Library {
    pub name: String,
    pub alloc: Vec<Point>,
    pub renew: Vec<Point>,
    pub skipped: Option<String>,
}

/// A driver running: commands in, answers out.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    fn start(mut cmd: Command, log: &Path) -> anyhow::Result<Driver> {
        let log = std::fs::File::create(log)?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {cmd:?}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Driver {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends `command`; the words after `ok`, or the error the driver answered.
    fn ask(&mut self, command: &str) -> anyhow::Result<Vec<String>> {
        writeln!(self.stdin, "{command}")?;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("the driver ended before answering `{command}`");
            }
            if line.starts_with("event ") {
                continue;
            }
            let mut words = line.split_whitespace().map(str::to_owned);
            return match words.next().as_deref() {
                Some("ok") => Ok(words.collect()),
                _ => Err(anyhow!("`{command}`: {}", line.trim())),
            };
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to its end (a build step); its output when it fails.
fn build(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The command that starts library `name`'s driver, built first (release for Rust).
fn driver_command(root: &Path, name: &str) -> anyhow::Result<Command> {
    Ok(match name {
        "Rust" => {
            // The bench's own profile and target directory: release for figures, debug in
            // the CI's smoke run (a release build there would take minutes).
            let release = (!cfg!(debug_assertions)).then_some("--release");
            // The arguments `bench/run` builds with, so that this finds the driver built:
            // `-p beacon-client` alone, or the example without the bins, resolves tokio, tonic
            // and beacon in another feature set and builds them all again (90 s in debug).
            build(
                Command::new("cargo")
                    .args(["build", "-q", "--workspace", "--bins"])
                    .args(["--features", "beacon-bench/peers"])
                    .args(["--example", "conformance_driver"])
                    .args(release)
                    .current_dir(root),
                "cargo build --example conformance_driver",
            )?;
            let bench = std::env::current_exe().context("cannot locate this program")?;
            Command::new(bench.with_file_name("examples").join("conformance_driver"))
        }
        "Python" => {
            // The tests' environment when it is there; else one of the bench's own.
            let mut venv = root.join("target/python-venv");
            if !venv.join("bin/python").exists() {
                venv = root.join("target/bench-python-venv");
                if !venv.join("bin/python").exists() {
                    build(
                        Command::new("python3").args(["-m", "venv"]).arg(&venv),
                        "python3 -m venv",
                    )?;
                    build(
                        Command::new(venv.join("bin/python"))
                            .args(["-m", "pip", "install", "-q", "-e"])
                            .arg(root.join("clients/python")),
                        "pip install clients/python",
                    )?;
                }
            }
            let mut cmd = Command::new(venv.join("bin/python"));
            cmd.arg(root.join("clients/python/tests/conformance_driver.py"));
            cmd
        }
        "Go" => {
            let out = root.join("target/go-bin/conformance-driver-bench");
            build(
                &mut drivers::go_build(&root.join("clients/go"), &out),
                "go build ./cmd/conformance-driver",
            )?;
            Command::new(out)
        }
        "Java" => {
            let project = root.join("clients/java");
            build(
                &mut drivers::java_build(&project),
                "mvn test-compile in clients/java",
            )?;
            drivers::java_driver(&project)?
        }
        other => bail!("no client library `{other}`"),
    })
}

/// Measures library `name` against `endpoints` (the leader first): a warm-up, then each
/// measure at each caller count for `secs`. A library whose driver cannot be built or
/// started here is skipped, with why.
pub fn run(
    root: &Path,
    name: &str,
    endpoints: &[std::net::SocketAddr],
    callers: &[usize],
    secs: u64,
    logs: &Path,
) -> Library {
    let mut lib = Library {
        name: name.to_owned(),
        alloc: Vec::new(),
        renew: Vec::new(),
        skipped: None,
    };
    let measured = (|| -> anyhow::Result<()> {
        let cmd = driver_command(root, name)?;
        let mut d = Driver::start(cmd, &logs.join(format!("{name}-driver.log")))?;
        let list: Vec<String> = endpoints.iter().map(|a| a.to_string()).collect();
        d.ask(&format!("connect {} 20000", list.join(",")))?;
        // Connections, the JIT and the interpreters' caches before anything counts.
        d.ask("bench alloc 2 16")?;
        d.ask("bench renew 1 16")?;
        for (what, into) in [("alloc", &mut lib.alloc), ("renew", &mut lib.renew)] {
            for &c in callers {
                let a = d.ask(&format!("bench {what} {secs} {c}"))?;
                let num = |i: usize| a.get(i).and_then(|w| w.parse::<f64>().ok()).unwrap_or(0.0);
                let p = Point {
                    callers: c,
                    per_sec: num(0) / secs as f64,
                    errors: num(1) as usize,
                    p50_ms: num(2) / 1000.0,
                    p99_ms: num(3) / 1000.0,
                };
                println!(
                    "  {name}: {what} with {c} callers: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
                    p.per_sec, p.p50_ms, p.p99_ms, p.errors
                );
                into.push(p);
            }
        }
        Ok(())
    })();
    if let Err(e) = measured {
        let why = format!("{e:#}");
        println!("  {name}: not measured: {why}");
        lib.skipped = Some(why);
    }
    lib
}

/// The repository's root (the bench runs from it; `CARGO_MANIFEST_DIR` is the bench's
/// folder when it does not).
pub fn root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}
