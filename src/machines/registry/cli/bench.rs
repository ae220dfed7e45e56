//! `bench register`: allocation throughput and latency against a running cluster.
//!
//! C clients, each with its own connection to the leader, register N services in total
//! (distinct addresses in 10.0.0.0/8), timing every registration. The IDs returned are
//! checked for uniqueness, and every registration is unregistered afterwards so that runs can
//! be repeated without exhausting the ID range.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::machines::registry::{RegistryCmd, RegistryErrorCode};
use crate::net::{Cluster, ConnectOptions};
use crate::pb;
use serde::Serialize;

/// What one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub clients: usize,
    pub count: usize,
    pub ok: usize,
    pub failed: usize,
    pub unique_ids: usize,
    pub duplicates: usize,
    pub seconds: f64,
    pub allocs_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub first_error: Option<String>,
    pub cleanup_failed: usize,
    /// Why the first of them could not be unregistered.
    pub cleanup_why: Option<String>,
    /// Registrations found ended when the cleanup came to them: an earlier attempt of the
    /// unregistration went through but its answer was lost to a leader change, or the lease
    /// ran out after its last renewal. Nothing is left behind either way, as the client
    /// library's `Registration::unregister` also counts it.
    pub ended_before: usize,
    /// Registrations lost during the run: a renewal came too late.
    pub lost: usize,
    /// Why the first of them was refused.
    pub lost_why: Option<String>,
}

impl Report {
    pub fn render(&self) -> String {
        if self.ok == 0 {
            return format!(
                "no registration succeeded ({} tried from {} clients in {:.3} s, then stopped); first error: {}\n",
                self.failed,
                self.clients,
                self.seconds,
                self.first_error.as_deref().unwrap_or("none")
            );
        }
        format!(
            "registered {ok}/{count} from {clients} clients in {s:.3} s: {rate:.0} allocations/s\n\
             latency p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms\n\
             ids unique: {uniq} ({dups} duplicates){err}{cleanup}{ended}\n",
            ok = self.ok,
            count = self.count,
            clients = self.clients,
            s = self.seconds,
            rate = self.allocs_per_sec,
            p50 = self.p50_ms,
            p99 = self.p99_ms,
            max = self.max_ms,
            uniq = self.unique_ids,
            dups = self.duplicates,
            err = self
                .first_error
                .as_ref()
                .map(|e| format!("\n{} failed; first error: {e}", self.failed))
                .unwrap_or_default(),
            cleanup = if self.cleanup_failed > 0 || self.lost > 0 {
                format!(
                    "\n{} registrations lost their lease during the run (renewed too late{}); {} could not be unregistered",
                    self.lost,
                    self.lost_why
                        .as_ref()
                        .map(|w| format!(": {w}"))
                        .unwrap_or_default(),
                    self.cleanup_failed,
                ) + &self
                    .cleanup_why
                    .as_ref()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            } else {
                String::new()
            },
            ended = match self.ended_before {
                0 => String::new(),
                n => format!(
                    "\n{n} had ended before the cleanup unregistered them (a leader change swallowed the answer to an earlier attempt, or a lease ran out at the very end)"
                ),
            },
        )
    }
}

/// The address of registration `i`: distinct for every i below 2^24 * 60000.
fn service_addr(i: usize) -> SocketAddr {
    let host = (i / 60_000) as u32;
    let port = 1024 + (i % 60_000) as u16;
    SocketAddr::from((Ipv4Addr::from(0x0a00_0000 | (host & 0x00ff_ffff)), port))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// `mutex`, locked; a client that panicked while holding it leaves its data usable here.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the clients of a run share.
#[derive(Default)]
struct Progress {
    /// Registrations made so far, for renewal and the live line.
    made: std::sync::Mutex<Vec<pb::registry::NodeInfo>>,
    failed: AtomicUsize,
    /// Set by Ctrl-C: the clients stop, and what was made is unregistered.
    stop: std::sync::atomic::AtomicBool,
    /// When the last successful registration completed.
    last_success: std::sync::Mutex<Option<Instant>>,
    /// The lease the cluster gives (from the first answer).
    lease_ms: std::sync::atomic::AtomicU64,
    /// The leader the answers came from, for renewals.
    leader: std::sync::Mutex<Option<String>>,
    /// Node IDs being given up at the end, or lost: no longer renewed.
    gone: std::sync::Mutex<HashSet<u32>>,
    /// Registrations whose renewal was refused (their lease ran out during the run).
    lost: AtomicUsize,
    /// Why the first refused renewal was refused.
    lost_why: std::sync::Mutex<Option<String>>,
    /// A renewal was refused for another reason (a leader change): dial the leader again.
    renew_failed: std::sync::atomic::AtomicBool,
}

pub async fn register(
    server: &str,
    opts: &ConnectOptions,
    clients: usize,
    count: usize,
    node_type: &str,
) -> Report {
    let next = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(Progress::default());
    // Until one registration succeeds, a failure of every client means nothing answers:
    // the run stops there rather than trying every registration against a dead address.
    let succeeded = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let failed_first = Arc::new(AtomicUsize::new(0));
    let clients = clients.min(count);
    let started = Instant::now();
    let renewing = tokio::spawn(renew(progress.clone(), opts.clone()));
    let showing = tokio::spawn(show_progress(progress.clone(), count, started));
    let interrupted = {
        let progress = progress.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupted: unregistering what was made");
                progress.stop.store(true, Ordering::Relaxed);
            }
        })
    };
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let next = next.clone();
        let progress = progress.clone();
        let (succeeded, failed_first) = (succeeded.clone(), failed_first.clone());
        // Each registration may look for a leader for as long as --timeout-ms allows.
        let mut cluster = Cluster::new(vec![server.to_owned()], opts.clone(), opts.timeout);
        let node_type = node_type.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut errors = Vec::new();
            loop {
                if progress.stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let req = pb::registry::RegisterRequest {
                    node_type: node_type.clone(),
                    addr: service_addr(i).to_string(),
                    ..Default::default()
                };
                let t = Instant::now();
                match cluster
                    .call::<_, pb::registry::RegisterReply>(
                        RegistryCmd::Register,
                        &req,
                        "the registration",
                    )
                    .await
                {
                    Ok(reply) => {
                        succeeded.store(true, Ordering::Relaxed);
                        let node = reply.node.unwrap_or_default();
                        progress.lease_ms.store(reply.lease_ms, Ordering::Relaxed);
                        *lock(&progress.leader) = Some(reply.leader);
                        *lock(&progress.last_success) = Some(Instant::now());
                        lock(&progress.made).push(node.clone());
                        done.push((t.elapsed(), node));
                    }
                    Err(e) => {
                        progress.failed.fetch_add(1, Ordering::Relaxed);
                        errors.push(e.to_string());
                        if !succeeded.load(Ordering::Relaxed)
                            && failed_first.fetch_add(1, Ordering::Relaxed) + 1 >= clients
                        {
                            break;
                        }
                    }
                }
            }
            (cluster, done, errors)
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("bench client does not panic"));
    }
    showing.abort();
    // The rate counts the successes over the time they took: from the start to the last.
    let seconds = lock(&progress.last_success)
        .map_or(started.elapsed(), |at| at - started)
        .as_secs_f64();

    let mut latencies = Vec::new();
    let mut nodes = Vec::new();
    let mut errors = Vec::new();
    for (_, done, errs) in &results {
        for (lat, node) in done {
            latencies.push(*lat);
            nodes.push(node.clone());
        }
        errors.extend(errs.iter().cloned());
    }
    let ids: Vec<u32> = nodes.iter().map(|n| n.node_id).collect();
    latencies.sort_unstable();
    let unique: HashSet<u32> = ids.iter().copied().collect();

    // Clean up: unregister everything, spread over the same clients.
    let mut cleanup = Vec::new();
    let per = nodes.len().div_ceil(results.len().max(1)).max(1);
    for ((mut cluster, _, _), chunk) in results.into_iter().zip(nodes.chunks(per)) {
        let chunk = chunk.to_vec();
        let progress = progress.clone();
        cleanup.push(tokio::spawn(async move {
            let (mut failed, mut why, mut ended) = (0, None, 0);
            for node in chunk {
                // Not renewed from now on; one that was lost is gone already.
                let fresh = lock(&progress.gone).insert(node.node_id);
                if !fresh {
                    continue;
                }
                // The benchmark holds these registrations itself: it gives the IDs up.
                let req = pb::registry::UnregisterRequest {
                    node_id: node.node_id,
                    addr: String::new(),
                    term: node.term,
                    index: node.index,
                    release: true,
                    clock_ms: 0,
                };
                let r: Result<pb::registry::UnregisterReply, _> = cluster
                    .call(RegistryCmd::Unregister, &req, "the unregistration")
                    .await;
                match r {
                    Ok(_) => {}
                    Err(e)
                        if e.is(RegistryErrorCode::UnknownTarget)
                            || e.is(RegistryErrorCode::NotHolder) =>
                    {
                        ended += 1
                    }
                    Err(e) => {
                        failed += 1;
                        why.get_or_insert(format!("node {}: {e}", node.node_id));
                    }
                }
            }
            (failed, why, ended)
        }));
    }
    let (mut cleanup_failed, mut cleanup_why, mut ended_before) = (0, None, 0);
    for task in cleanup {
        let (failed, why, ended) = task.await.expect("cleanup does not panic");
        cleanup_failed += failed;
        ended_before += ended;
        cleanup_why = cleanup_why.or(why);
    }
    // Renewed until every registration was given up.
    renewing.abort();
    interrupted.abort();

    Report {
        clients,
        count,
        ok: ids.len(),
        failed: errors.len(),
        unique_ids: unique.len(),
        duplicates: ids.len() - unique.len(),
        seconds,
        allocs_per_sec: ids.len() as f64 / seconds.max(1e-9),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        first_error: errors.into_iter().next(),
        cleanup_failed,
        cleanup_why,
        ended_before,
        lost: progress.lost.load(Ordering::Relaxed),
        lost_why: lock(&progress.lost_why).clone(),
    }
}

/// Keeps the run's registrations alive: rounds of one node report for each registration,
/// pipelined over one connection to the leader that stays open (a run longer than a lease
/// must not lose what it made). A round starts a quarter of a lease after the previous one
/// started, or once its answers are in if it took longer: renewals never pile up faster than
/// the leader answers them. A refused renewal means the registration is gone (its lease ran
/// out while this machine was too busy to renew it): it is not renewed again, and the run
/// says so. Runs until aborted.
async fn renew(progress: Arc<Progress>, opts: ConnectOptions) {
    use futures_util::{SinkExt, StreamExt};
    // Which registration each report in flight is for, by its sequence number.
    let pending: Arc<std::sync::Mutex<std::collections::HashMap<u32, u32>>> = Arc::default();
    let answered = Arc::new(tokio::sync::Notify::new());
    let mut link: Option<(String, _)> = None;
    let mut seq = 0u32;
    loop {
        let lease = progress.lease_ms.load(Ordering::Relaxed).max(1_000);
        let round = tokio::time::Instant::now();
        let leader = lock(&progress.leader).clone();
        if progress.renew_failed.swap(false, Ordering::Relaxed) {
            link = None;
        }
        if let Some(leader) = leader
            && link.as_ref().is_none_or(|(at, _)| *at != leader)
            && let Ok(client) = crate::net::Client::connect(&leader, &opts).await
        {
            let (sink, mut replies) = client.into_framed().split();
            let (watcher, pending, answered) =
                (progress.clone(), pending.clone(), answered.clone());
            tokio::spawn(async move {
                while let Some(Ok(frame)) = replies.next().await {
                    let (id, left) = {
                        let mut pending = lock(&pending);
                        (pending.remove(&frame.seq), pending.len())
                    };
                    // Only "holds no lease" means the registration is gone; anything else
                    // (leadership moved, the beacon is busy) is tried again next round.
                    let refusal = frame
                        .is_error()
                        .then(|| frame.decode::<pb::ErrorReply>().ok())
                        .flatten();
                    let no_lease = refusal
                        .as_ref()
                        .is_some_and(|e| e.code == RegistryErrorCode::NoLease as u32);
                    if let Some(e) = refusal.as_ref().filter(|_| !no_lease) {
                        // Follow a leader that moved.
                        if !e.leader.is_empty() {
                            *lock(&watcher.leader) = Some(e.leader.clone());
                        }
                        watcher.renew_failed.store(true, Ordering::Relaxed);
                    }
                    if no_lease
                        && let Some(id) = id
                        && lock(&watcher.gone).insert(id)
                    {
                        watcher.lost.fetch_add(1, Ordering::Relaxed);
                        let why = refusal.as_ref().map_or_else(String::new, |e| e.msg.clone());
                        lock(&watcher.lost_why).get_or_insert(why);
                    }
                    if left == 0 {
                        answered.notify_one();
                    }
                }
            });
            link = Some((leader, sink));
        }
        if let Some((_, sink)) = link.as_mut() {
            let gone = lock(&progress.gone).clone();
            let made: Vec<pb::registry::NodeInfo> = lock(&progress.made)
                .iter()
                .filter(|n| !gone.contains(&n.node_id))
                .cloned()
                .collect();
            let mut sent = true;
            for node in &made {
                seq = seq.wrapping_add(1);
                lock(&pending).insert(seq, node.node_id);
                let req = pb::registry::NodeReport {
                    node_id: node.node_id,
                    addr: node.addr.clone(),
                    term: node.term,
                    index: node.index,
                    ..Default::default()
                };
                let code = crate::wire::Code::code(RegistryCmd::NodeReport);
                if sink
                    .feed(crate::wire::Frame::new(code, seq, 0, &req))
                    .await
                    .is_err()
                {
                    sent = false;
                    break;
                }
            }
            if !sent || sink.flush().await.is_err() {
                // Dial again next round; what was in flight is not coming back.
                link = None;
                lock(&pending).clear();
            } else if !made.is_empty() {
                // The round ends when its answers are in (or after half a lease, whatever
                // became of them).
                let _ = tokio::time::timeout(Duration::from_millis(lease / 2), answered.notified())
                    .await;
            }
        }
        tokio::time::sleep_until(round + Duration::from_millis(lease / 4)).await;
    }
}

/// A live line on stderr while the run goes: how many, how fast, how many failed. Only on a
/// terminal; runs until aborted.
async fn show_progress(progress: Arc<Progress>, count: usize, started: Instant) {
    use std::io::{IsTerminal, Write};
    if !std::io::stderr().is_terminal() {
        return;
    }
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let made = lock(&progress.made).len();
        let failed = progress.failed.load(Ordering::Relaxed);
        let rate = made as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{made}/{count} registered, {rate:.0}/s, {failed} failed   "
        );
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_are_distinct() {
        let addrs: HashSet<SocketAddr> = (0..200_000).map(service_addr).collect();
        assert_eq!(addrs.len(), 200_000);
    }

    #[test]
    fn percentiles_pick_the_rank() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&ms, 0.5), 50.0);
        assert_eq!(percentile(&ms, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
