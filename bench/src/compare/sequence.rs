//! The sequence issuer measured: numbers per second from the double-buffered client at 1,
//! 4 and 16 threads; the latency of `next_id()` while every segment fetch is slowed by a
//! delaying proxy (the double buffer must hide it); segments per second at the leader from
//! C clients (one committed log entry each); unique numbers per second from C clients of
//! the double buffer, beside the allocation runs of etcd and ZooKeeper; and snowflake IDs
//! per second from one thread, against the layout's ceiling of 4096 per millisecond.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::{RegisterOptions, Registration};
use beacon::machines::sequence::client::{Sequence, SequenceOptions, Snowflake, SnowflakeOptions};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::alloc::{Throughput, percentile};

/// What the sequence part measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SequenceResults {
    /// (threads, numbers/s, waits for an empty buffer) from `next_id()` in one process.
    pub next_id: Vec<(usize, f64, u64)>,
    pub slowed: Option<Slowed>,
    /// Segments at the leader, per client count.
    pub segments: Vec<Throughput>,
    /// Unique numbers from C async clients of the double buffer, per client count.
    pub numbers: Vec<Throughput>,
    pub snowflake_per_sec: f64,
    /// Times `next_id()` found both buffers empty and waited, over every run.
    pub empty_waits: u64,
    pub step: u64,
}

/// `next_id()` latency while each fetch crosses a proxy that holds every chunk back.
#[derive(Debug, Clone, Serialize)]
pub struct Slowed {
    pub delay_ms: u64,
    pub calls: usize,
    pub fetches: u64,
    pub waits: u64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

fn sequence_opts(target: Duration) -> SequenceOptions {
    SequenceOptions {
        connect: opts(),
        retry_for: Duration::from_secs(5),
        target_period: target,
        ..SequenceOptions::default()
    }
}

/// Runs every measurement against the beacons at `endpoints` (the leader first).
pub async fn run(
    endpoints: &[SocketAddr],
    threads: &[usize],
    clients: &[usize],
    secs: u64,
    delay_ms: u64,
    step: u64,
) -> anyhow::Result<SequenceResults> {
    let beacons: Vec<String> = endpoints.iter().map(|a| a.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let duration = Duration::from_secs(secs);
    let mut results = SequenceResults {
        step,
        ..SequenceResults::default()
    };
    for name in ["threads", "slowed", "segments", "numbers"] {
        leader
            .create_sequence(name, 0, step)
            .await
            .with_context(|| format!("create sequence {name}"))?;
    }

    // Numbers/s from next_id() on OS threads, one process.
    let seq = Arc::new(
        Sequence::open(
            beacons.clone(),
            "threads",
            sequence_opts(Duration::from_secs(60)),
        )
        .await?,
    );
    for &n in threads {
        let waited = seq.status().waits;
        let per_sec = on_threads(&seq, n, duration).await;
        let waits = seq.status().waits - waited;
        println!(
            "  next_id(), {n} threads: {per_sec:.0} numbers/s, {waits} waits for an empty buffer"
        );
        results.next_id.push((n, per_sec, waits));
    }
    results.empty_waits += seq.status().waits;

    // next_id() latency while every fetch is slowed.
    let proxy = DelayProxy::start(endpoints[0], Duration::from_millis(delay_ms)).await?;
    let slow_opts = SequenceOptions {
        retry_for: Duration::from_secs(10),
        ..sequence_opts(Duration::from_secs(60))
    };
    let slow = Arc::new(Sequence::open(vec![proxy.to_string()], "slowed", slow_opts).await?);
    let slowed = latencies(&slow, duration, delay_ms).await;
    println!(
        "  next_id() with fetches slowed by {delay_ms} ms: p50 {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns, max {:.0} ns; {} fetches, {} waits",
        slowed.p50_ns, slowed.p99_ns, slowed.p999_ns, slowed.max_ns, slowed.fetches, slowed.waits
    );
    results.empty_waits += slowed.waits;
    results.slowed = Some(slowed);

    // Segments at the leader, and numbers from async clients of the double buffer.
    for &c in clients {
        let t = segments(&beacons, c, duration).await?;
        println!(
            "  segments, {c} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {} overlaps",
            t.per_sec, t.p50_ms, t.p99_ms, t.errors, t.duplicates
        );
        results.segments.push(t);
        let (t, waits) = numbers(&beacons, c, duration).await?;
        println!(
            "  numbers from the double buffer, {c} clients: {:.0}/s, p99 {:.4} ms, {} duplicates",
            t.per_sec, t.p99_ms, t.duplicates
        );
        results.empty_waits += waits;
        results.numbers.push(t);
    }

    results.snowflake_per_sec = snowflake(&beacons, duration).await?;
    println!(
        "  snowflake, 1 thread: {:.0} IDs/s ({:.0}% of the 4096/ms ceiling)",
        results.snowflake_per_sec,
        results.snowflake_per_sec / 4_096_000.0 * 100.0
    );
    Ok(results)
}

/// Numbers/s from `n` threads calling `next_id()` for `duration`.
async fn on_threads(seq: &Arc<Sequence>, n: usize, duration: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (seq, stop, total) = (seq.clone(), stop.clone(), total.clone());
            std::thread::spawn(move || {
                let mut mine = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        std::hint::black_box(seq.next_id().expect("numbers"));
                    }
                    mine += 1024;
                }
                total.fetch_add(mine, Ordering::Relaxed);
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("a bench thread panicked");
    }
    total.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Every `next_id()` latency of one thread for `duration`.
async fn latencies(seq: &Arc<Sequence>, duration: Duration, delay_ms: u64) -> Slowed {
    let s = seq.clone();
    let lat = tokio::task::spawn_blocking(move || {
        let mut lat: Vec<u32> = Vec::with_capacity(1 << 22);
        let deadline = Instant::now() + duration;
        while Instant::now() < deadline {
            for _ in 0..4096 {
                let t = Instant::now();
                std::hint::black_box(s.next_id().expect("numbers"));
                lat.push(t.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32);
            }
        }
        lat
    })
    .await
    .expect("the latency thread panicked");
    let mut sorted: Vec<Duration> = lat
        .into_iter()
        .map(|ns| Duration::from_nanos(u64::from(ns)))
        .collect();
    sorted.sort_unstable();
    let status = seq.status();
    let ns = |p: f64| percentile(&sorted, p) * 1e6;
    Slowed {
        delay_ms,
        calls: sorted.len(),
        fetches: status.fetches,
        waits: status.waits,
        p50_ns: ns(0.50),
        p99_ns: ns(0.99),
        p999_ns: ns(0.999),
        max_ns: sorted.last().map_or(0.0, |d| d.as_nanos() as f64),
    }
}

/// Segments of one number from `clients` clients, each with its own connection: one
/// committed log entry per request.
async fn segments(
    beacons: &[String],
    clients: usize,
    duration: Duration,
) -> anyhow::Result<Throughput> {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let mut leader = Leader::new(beacons.to_vec(), opts(), Duration::from_secs(5));
            tokio::spawn(async move {
                let (mut done, mut errors) = (Vec::new(), Vec::new());
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match leader.next_segment("segments", 1).await {
                        Ok(r) => done.push((t.elapsed(), r.segment.unwrap_or_default().start)),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                (done, errors)
            })
        })
        .collect();
    collect(tasks, clients, started).await
}

/// Numbers from `clients` async tasks sharing one double buffer.
async fn numbers(
    beacons: &[String],
    clients: usize,
    duration: Duration,
) -> anyhow::Result<(Throughput, u64)> {
    let seq = Arc::new(
        Sequence::open(
            beacons.to_vec(),
            "numbers",
            sequence_opts(Duration::from_secs(60)),
        )
        .await?,
    );
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let seq = seq.clone();
            tokio::spawn(async move {
                let (mut done, mut errors) = (Vec::new(), Vec::new());
                while Instant::now() < deadline {
                    for _ in 0..256 {
                        let t = Instant::now();
                        match seq.next_id_async().await {
                            Ok(n) => done.push((t.elapsed(), n)),
                            Err(e) => errors.push(e.to_string()),
                        }
                    }
                    tokio::task::yield_now().await;
                }
                (done, errors)
            })
        })
        .collect();
    let t = collect(tasks, clients, started).await?;
    Ok((t, seq.status().waits))
}

type Done = (Vec<(Duration, u64)>, Vec<String>);

async fn collect(
    tasks: Vec<tokio::task::JoinHandle<Done>>,
    clients: usize,
    started: Instant,
) -> anyhow::Result<Throughput> {
    let (mut latencies, mut values, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for t in tasks {
        let (done, errs) = t.await.context("a bench client panicked")?;
        for (lat, v) in done {
            latencies.push(lat);
            values.push(v);
        }
        errors.extend(errs);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let n = values.len();
    values.sort_unstable();
    values.dedup();
    Ok(Throughput {
        clients,
        ok: n,
        errors: errors.len(),
        duplicates: n - values.len(),
        per_sec: n as f64 / seconds,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        first_error: errors.into_iter().next(),
        term_moves: None,
    })
}

/// Snowflake IDs/s from one thread on a fresh registration.
async fn snowflake(beacons: &[String], duration: Duration) -> anyhow::Result<f64> {
    let options = RegisterOptions {
        connect: opts(),
        ..RegisterOptions::new("BENCH_SNOWFLAKE", "10.200.0.1:7000".parse()?)
    };
    let reg = Registration::register(beacons.to_vec(), options).await?;
    let flake = Arc::new(Snowflake::new(&reg, SnowflakeOptions::default()).await?);
    let f = flake.clone();
    let (count, secs) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut n = 0u64;
        let mut last = 0;
        while started.elapsed() < duration {
            for _ in 0..4096 {
                let id = f.next_id().expect("snowflake IDs");
                assert!(id > last, "snowflake IDs rise");
                last = id;
            }
            n += 4096;
        }
        (n, started.elapsed().as_secs_f64())
    })
    .await?;
    drop(flake);
    reg.unregister().await?;
    Ok(count as f64 / secs)
}

/// A TCP proxy that holds every chunk back by `delay` in both directions: a beacon that
/// answers slowly, as the double buffer sees it.
struct DelayProxy;

impl DelayProxy {
    async fn start(target: SocketAddr, delay: Duration) -> anyhow::Result<SocketAddr> {
        let held = beacon_testkit::free_listener();
        held.set_nonblocking(true)?;
        let listener = TcpListener::from_std(held)?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(target).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(pipe(ri, wo, delay));
                tokio::spawn(pipe(ro, wi, delay));
            }
        });
        Ok(addr)
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        tokio::time::sleep(delay).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
