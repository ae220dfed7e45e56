//! Drives the Rust client for beacon's client conformance suite (`tests/conformance.rs`):
//! commands in on stdin, answers and events out on stdout, one per line, the protocol
//! every client's driver speaks (`docs/clients.md`).
//!
//! Each command line is words separated by spaces; each gets one answer line, `ok ...` or
//! `err KIND message`. Events that come on their own (a lease lost, a watch's change) are
//! lines that start with `event`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beacon::machines::registry::RegistryErrorCode;
use beacon::wire::ErrorCode;
use beacon_client::{
    ClientError, Cluster, ConfigWatch, ConnectOptions, HealthFilter, RegisterOptions, Registration,
    Sequence, SequenceErrorCode, SequenceOptions, Watch, WatchEvent, config_put,
};

/// One line out at a time: answers and events share stdout.
#[derive(Clone)]
struct Out(Arc<Mutex<()>>);

impl Out {
    fn say(&self, line: &str) {
        let _held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// The suite's name for an error's kind.
fn kind(e: &ClientError) -> &'static str {
    let code = e.code();
    let is = |c: u32| code == Some(c);
    if matches!(e, ClientError::TooLarge { .. })
        || is(ErrorCode::FrameTooLarge as u32)
        || is(57)
        || is(62)
    {
        "TooLarge"
    } else if is(ErrorCode::Busy as u32) {
        "Busy"
    } else if is(ErrorCode::Compacted as u32) {
        "Compacted"
    } else if is(ErrorCode::NotLeader as u32) {
        "NotLeader"
    } else if is(RegistryErrorCode::NoLease as u32) || is(RegistryErrorCode::NotHolder as u32) {
        "LeaseLost"
    } else if e.is_retryable() {
        "Unavailable"
    } else {
        "Other"
    }
}

fn one_line(text: impl std::fmt::Display) -> String {
    text.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

struct Driver {
    out: Out,
    beacons: Vec<String>,
    retry_for: Duration,
    cluster: Option<Cluster>,
    regs: HashMap<u32, Registration>,
    seqs: HashMap<String, Sequence>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What a command failed with: the client's error, or the command's own.
enum Failed {
    Client(ClientError),
    Usage(String),
}

impl From<ClientError> for Failed {
    fn from(e: ClientError) -> Failed {
        Failed::Client(e)
    }
}

impl Driver {
    fn cluster(&mut self) -> Result<&mut Cluster, Failed> {
        self.cluster
            .as_mut()
            .ok_or_else(|| Failed::Usage("connect first".into()))
    }

    async fn run(&mut self, words: &[&str]) -> Result<String, Failed> {
        let arg = |i: usize| words.get(i).copied().unwrap_or("");
        let usage = |what: &str| Failed::Usage(what.to_owned());
        match words[0] {
            "connect" => {
                self.beacons = arg(1).split(',').map(str::to_owned).collect();
                if let Ok(ms) = arg(2).parse() {
                    self.retry_for = Duration::from_millis(ms);
                }
                self.cluster = Some(Cluster::new(
                    self.beacons.clone(),
                    ConnectOptions::default(),
                    self.retry_for,
                ));
                Ok(String::new())
            }
            "register" => {
                self.cluster()?;
                let addr = arg(2)
                    .parse()
                    .map_err(|e| usage(&format!("{}: {e}", arg(2))))?;
                let mut opts = RegisterOptions::new(arg(1), addr);
                opts.metadata = arg(3).to_owned();
                opts.retry_for = self.retry_for;
                let reg = Registration::register(self.beacons.clone(), opts).await?;
                let id = reg.node_id();
                let mut lost = reg.lease_lost();
                let out = self.out.clone();
                self.tasks.push(tokio::spawn(async move {
                    if let Ok(why) = lost.wait_for(Option::is_some).await {
                        let why = why.as_ref().map(one_line).unwrap_or_default();
                        out.say(&format!("event lost {id} {why}"));
                    }
                }));
                let (term, index) = reg.fencing_token();
                let lease = reg.reply().lease_ms;
                self.regs.insert(id, reg);
                Ok(format!("{id} {term} {index} {lease}"))
            }
            "holds" => {
                let reg = self
                    .regs
                    .get(&arg(1).parse().unwrap_or(0))
                    .ok_or_else(|| usage("no such registration here"))?;
                Ok(reg.is_live().to_string())
            }
            "unregister" => {
                let reg = self
                    .regs
                    .remove(&arg(1).parse().unwrap_or(0))
                    .ok_or_else(|| usage("no such registration here"))?;
                reg.unregister().await?;
                Ok(String::new())
            }
            "watch" => {
                self.cluster()?;
                let mut watch = Watch::start_with(
                    self.beacons.clone(),
                    vec![arg(2).to_owned()],
                    HealthFilter::Any,
                    ConnectOptions::default(),
                    self.retry_for,
                )
                .await?;
                let (id, out) = (arg(1).to_owned(), self.out.clone());
                let present: Vec<u32> = watch.nodes().map(|n| n.node_id).collect();
                self.tasks.push(tokio::spawn(async move {
                    for n in present {
                        out.say(&format!("event node {id} present {n}"));
                    }
                    while let Ok(e) = watch.next().await {
                        let kind = match e {
                            WatchEvent::Added(_) => "added",
                            WatchEvent::Updated(_) => "updated",
                            WatchEvent::Removed(_) => "removed",
                        };
                        out.say(&format!("event node {id} {kind} {}", e.node().node_id));
                    }
                }));
                Ok(String::new())
            }
            "numbers" => {
                let name = arg(1).to_owned();
                if !self.seqs.contains_key(&name) {
                    let step = arg(3).parse().unwrap_or(0);
                    match self.cluster()?.create_sequence(&name, 0, step).await {
                        Err(e) if e.is(SequenceErrorCode::SequenceExists) => {}
                        made => _ = made?,
                    }
                    let opts = SequenceOptions {
                        retry_for: self.retry_for,
                        ..Default::default()
                    };
                    let seq = Sequence::open(self.beacons.clone(), &name, opts).await?;
                    self.seqs.insert(name.clone(), seq);
                }
                let seq = &self.seqs[&name];
                let mut got = Vec::new();
                for _ in 0..arg(2).parse::<u32>().unwrap_or(0) {
                    let n = seq
                        .next_id_async()
                        .await
                        .map_err(|e| Failed::Usage(e.to_string()))?;
                    got.push(n.to_string());
                }
                Ok(got.join(" "))
            }
            "config_watch" => {
                self.cluster()?;
                let mut watch = ConfigWatch::start(
                    self.beacons.clone(),
                    vec![arg(2).to_owned()],
                    ConnectOptions::default(),
                    self.retry_for,
                )
                .await?;
                let (id, out) = (arg(1).to_owned(), self.out.clone());
                let listed: Vec<_> = watch.documents().cloned().collect();
                self.tasks.push(tokio::spawn(async move {
                    for d in listed {
                        let value = String::from_utf8_lossy(&d.value);
                        out.say(&format!(
                            "event config {id} put {} {} {value}",
                            d.key, d.revision
                        ));
                    }
                    while let Ok(e) = watch.next().await {
                        for d in e.put {
                            let value = String::from_utf8_lossy(&d.value);
                            out.say(&format!(
                                "event config {id} put {} {} {value}",
                                d.key, d.revision
                            ));
                        }
                        for key in e.deleted {
                            out.say(&format!("event config {id} deleted {key}"));
                        }
                    }
                }));
                Ok(String::new())
            }
            "config_put" => {
                let op = config_put(arg(1), arg(2).as_bytes().to_vec(), false);
                let reply = self.cluster()?.config_write(vec![], vec![op]).await?;
                Ok(reply.revision.to_string())
            }
            "put_large" => {
                let len = arg(2).parse().unwrap_or(0);
                let op = config_put(arg(1), vec![0; len], false);
                self.cluster()?.config_write(vec![], vec![op]).await?;
                Ok(String::new())
            }
            "bench" => {
                let what = match arg(1) {
                    "alloc" => Bench::Alloc,
                    "renew" => Bench::Renew,
                    other => return Err(usage(&format!("bench alloc|renew, not `{other}`"))),
                };
                let secs: u64 = arg(2)
                    .parse()
                    .map_err(|_| usage("bench WHAT SECONDS CALLERS"))?;
                let callers: usize = arg(3)
                    .parse()
                    .map_err(|_| usage("bench WHAT SECONDS CALLERS"))?;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
                let runs: Vec<_> = (0..callers)
                    .map(|c| tokio::spawn(bench_caller(what, self.beacons.clone(), c, deadline)))
                    .collect();
                let mut took = Vec::new();
                let mut errors = 0;
                for run in runs {
                    let (t, e) = run.await.map_err(|e| usage(&e.to_string()))?;
                    took.extend(t);
                    errors += e;
                }
                Ok(bench_summary(took, errors))
            }
            other => Err(usage(&format!("unknown command `{other}`"))),
        }
    }

    async fn quit(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        for (_, reg) in self.regs.drain() {
            let _ = reg.unregister().await;
        }
        for (_, seq) in self.seqs.drain() {
            let _ = seq.close().await;
        }
    }
}

/// What a `bench` command measures.
#[derive(Clone, Copy)]
enum Bench {
    /// Node IDs allocated: `Register` calls through the client's call path.
    Alloc,
    /// Lease renewals: one registration's reports, back to back.
    Renew,
}

/// One caller of a `bench` command until `deadline`: the native protocol has one request
/// under way per connection, so each caller has a `Cluster` (a connection) of its own.
/// The time each call took, in microseconds, and how many failed.
async fn bench_caller(
    what: Bench,
    beacons: Vec<String>,
    caller: usize,
    deadline: tokio::time::Instant,
) -> (Vec<u64>, usize) {
    use beacon::machines::registry::RegistryCmd;
    use beacon::pb::registry as pb;
    let mut cluster = Cluster::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    let mut took = Vec::new();
    let mut errors = 0;
    let register = |n: usize| pb::RegisterRequest {
        node_type: "BENCH".into(),
        addr: bench_addr(caller, n),
        ..Default::default()
    };
    let mut report = None;
    if let Bench::Renew = what {
        let reply: Result<pb::RegisterReply, _> = cluster
            .call(
                RegistryCmd::Register,
                &register(1 << 24),
                "the registration",
            )
            .await;
        let Ok(node) = reply.map(|r| r.node.unwrap_or_default()) else {
            return (took, 1);
        };
        report = Some(pb::NodeReport {
            node_id: node.node_id,
            addr: node.addr,
            term: node.term,
            index: node.index,
            ..Default::default()
        });
    }
    let mut n = 0;
    while tokio::time::Instant::now() < deadline {
        let started = std::time::Instant::now();
        let done = match &report {
            None => cluster
                .call::<_, pb::RegisterReply>(
                    RegistryCmd::Register,
                    &register(n),
                    "the registration",
                )
                .await
                .map(drop),
            Some(r) => cluster
                .call::<_, pb::NodeReportReply>(RegistryCmd::NodeReport, r, "the node report")
                .await
                .map(drop),
        };
        match done {
            Ok(()) => took.push(started.elapsed().as_micros() as u64),
            Err(_) => errors += 1,
        }
        n += 1;
    }
    (took, errors)
}

/// The address of a `bench` command's registration `n` of `caller`: distinct for each pair
/// (and from the cases' addresses, under 10.0).
fn bench_addr(caller: usize, n: usize) -> String {
    format!(
        "10.{}.{}.{}:{}",
        100 + caller % 150,
        (n / 60_000) / 256 % 256,
        (n / 60_000) % 256,
        1024 + n % 60_000
    )
}

/// A `bench` command's answer: `DONE ERRORS P50_US P99_US`.
fn bench_summary(mut took: Vec<u64>, errors: usize) -> String {
    took.sort_unstable();
    let at = |q: f64| {
        took.get(((took.len() as f64 * q) as usize).min(took.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    format!("{} {errors} {} {}", took.len(), at(0.5), at(0.99))
}

#[tokio::main]
async fn main() {
    let out = Out(Arc::new(Mutex::new(())));
    let mut driver = Driver {
        out: out.clone(),
        beacons: Vec::new(),
        retry_for: Duration::from_secs(10),
        cluster: None,
        regs: HashMap::new(),
        seqs: HashMap::new(),
        tasks: Vec::new(),
    };
    // Lines read on a thread of their own: the commands wait for answers, not for input.
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        if words[0] == "quit" {
            driver.quit().await;
            out.say("ok");
            return;
        }
        match driver.run(&words).await {
            Ok(answer) if answer.is_empty() => out.say("ok"),
            Ok(answer) => out.say(&format!("ok {answer}")),
            Err(Failed::Client(e)) => out.say(&format!("err {} {}", kind(&e), one_line(&e))),
            Err(Failed::Usage(e)) => out.say(&format!("err Other {}", one_line(e))),
        }
    }
}
