//! Each part of the comparison: what it starts, measures and prints, into [`Results`]. A
//! part not asked for (or, for one of beacon alone, when beacon is not) does nothing;
//! [`super::run`] runs them all in order.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use beacon::config::DEFAULT_TICK_MS;

use super::*;

/// What every part reads: the programs found and the options.
pub(super) struct Bench<'a> {
    pub(super) programs: Programs,
    pub(super) opts: &'a Options,
}

impl Bench<'_> {
    pub(super) fn runs(&self, kind: Kind) -> bool {
        self.opts.runs(kind)
    }

    pub(super) fn wants(&self, part: Part) -> bool {
        self.opts.wants(part)
    }
}

pub(super) async fn run_failover(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Failover) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!(
        "failover: the leader SIGKILLed, SIGSTOPped or cut off; time until a write succeeds through a survivor"
    );
    for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
    {
        // Each member in a network namespace of its own, so that a leader can be cut
        // off; without the means (not root), on loopback, and the cut is skipped.
        let net = if opts.faults.contains(&Fault::Cut) {
            match Net::create(MEMBERS) {
                Ok(net) => Some(net),
                Err(e) => {
                    let why = format!("{kind}: leader cut off: not measured ({e:#})");
                    println!("  {why}");
                    results.skipped_faults.push(why);
                    None
                }
            }
        } else {
            None
        };
        let mut c = start_on(programs, kind, net);
        for &fault in &opts.faults {
            if fault == Fault::Cut && c.net.is_none() {
                continue;
            }
            let f = failover::run(&mut c, opts.rounds, fault).await;
            match f {
                Ok(f) => {
                    println!(
                        "  {kind}, {}: median {:.1} ms, max {:.1} ms",
                        fault.label(),
                        f.median_ms,
                        f.max_ms
                    );
                    results.failover.push((kind.to_string(), f));
                }
                Err(e) => {
                    keep(c, opts.keep);
                    return Err(e.context(format!("{kind}, {}", fault.label())));
                }
            }
        }
        keep(c, opts.keep);
    }
    Ok(())
}

pub(super) async fn run_idle(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Idle) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!(
        "idle: leader changes while nothing happens ({} s, defaults, the systems side by side)",
        opts.idle_secs
    );
    let clusters: Vec<Cluster> = [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
        .map(|kind| start(programs, kind))
        .collect();
    let length = Duration::from_secs(opts.idle_secs);
    let watched = futures_util::future::join_all(clusters.iter().map(|c| idle(c, length))).await;
    for (cluster, idle) in clusters.into_iter().zip(watched) {
        let kind = cluster.kind;
        keep(cluster, opts.keep);
        let idle = idle?;
        println!(
            "  {kind}: {} leader changes, term {} -> {}",
            idle.leader_changes, idle.term_before, idle.term_after
        );
        results.idle.push((kind.to_string(), idle));
    }
    Ok(())
}

pub(super) async fn run_alloc(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Alloc) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!("allocation: unique IDs from C clients, each connected to the leader");
    let duration = Duration::from_secs(opts.alloc_secs);
    for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
    {
        let cluster = start(programs, kind);
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let at = cluster.endpoints(&[leader]);
        clients::prepare(kind, &at).await?;
        let next = Arc::new(AtomicUsize::new(0));
        // Warm up (connections, the JVM's compiler, page cache) before measuring.
        alloc::run(
            kind,
            Via::Native,
            &at,
            &cluster.beacon_client,
            16,
            Duration::from_secs(2),
            &next,
        )
        .await
        .with_context(|| format!("{kind} warm-up"))?;
        for &c in &opts.clients {
            let before = cluster.leader_term().await;
            let mut t = alloc::run(
                kind,
                Via::Native,
                &at,
                &cluster.beacon_client,
                c,
                duration,
                &next,
            )
            .await?;
            let after = cluster.leader_term().await;
            // A term that moved (or a leader that cannot be found) means an election.
            t.term_moves = match (before, after) {
                (Some(b), Some(a)) => Some(a.saturating_sub(b)),
                _ => None,
            };
            println!(
                "  {kind}, {c} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {} duplicates, term {before:?} -> {after:?}",
                t.per_sec, t.p50_ms, t.p99_ms, t.errors, t.duplicates
            );
            results.alloc.push((kind.to_string(), t));
        }
        keep(cluster, opts.keep);
    }
    Ok(())
}

pub(super) async fn run_liveness(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Liveness) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!("liveness: registrations renewed once a second; leader CPU and memory");
    let window = Duration::from_secs(opts.window_secs);
    for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
        let cluster = start(programs, kind);
        let l = liveness::run(&cluster, &opts.liveness_steps, window, opts.cpu_limit).await;
        keep(cluster, opts.keep);
        results.liveness.push((kind.to_string(), l?));
    }
    Ok(())
}

pub(super) async fn run_sequence(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Sequence) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!("sequence: numbers from segments, the double buffer and snowflake IDs");
    // The default node-ID range, whose IDs fit the default snowflake layout's 10
    // worker bits; a segment cap that lets the adaptive step outgrow a slowed fetch.
    let setup = BeaconSetup {
        tick_ms: DEFAULT_TICK_MS,
        config: serde_json::json!({ "sequence": { "max_step": 100_000_000u64 } }),
        restore: None,
    };
    let cluster = Cluster::start_beacon(programs, MEMBERS, &setup);
    let leader = cluster.ready(Duration::from_secs(60)).await?;
    let mut at = cluster.endpoints(&[leader]);
    at.extend(cluster.endpoints(&(0..MEMBERS).filter(|i| *i != leader).collect::<Vec<_>>()));
    let s = sequence::run(
        &at,
        &opts.sequence_threads,
        &opts.clients,
        opts.sequence_secs,
        opts.sequence_delay_ms,
        opts.sequence_step,
    )
    .await;
    keep(cluster, opts.keep);
    results.sequence = Some(s?);
    Ok(())
}

pub(super) async fn run_assign(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Assign) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!("assignment: resources moved off a dead or departed worker; balance; leader CPU");
    // A short tick and the shortest lease, so the times show beacon's own delays.
    let (tick_ms, lease_ms) = (100, 1_000);
    let setup = BeaconSetup {
        tick_ms,
        config: serde_json::json!({ "lease_ms": lease_ms, "assign": { "max_moves": 1_000 } }),
        restore: None,
    };
    let cluster = Cluster::start_beacon(programs, MEMBERS, &setup);
    let leader = cluster.ready(Duration::from_secs(60)).await?;
    let mut at = cluster.endpoints(&[leader]);
    at.extend(cluster.endpoints(&(0..MEMBERS).filter(|i| *i != leader).collect::<Vec<_>>()));
    let pid = cluster.members[leader].pid();
    let mut a = assign::run(
        &at,
        None,
        None,
        tick_ms,
        lease_ms,
        opts.assign_workers,
        opts.assign_resources,
        opts.assign_rounds,
        Duration::from_secs(opts.window_secs),
    )
    .await;
    keep(cluster, opts.keep);
    // The leader at steady state: a cluster at beacon's defaults, many resources.
    if let Ok(a) = &mut a {
        let cluster = start(programs, Kind::Beacon);
        let leader = cluster.ready(Duration::from_secs(60)).await?;
        let at = cluster.endpoints(&[leader]);
        let steady = assign::run(
            &at,
            cluster.members[leader].pid(),
            cluster.members[leader].admin,
            DEFAULT_TICK_MS,
            10_000,
            opts.assign_steady_workers,
            opts.assign_steady_resources,
            0,
            Duration::from_secs(opts.window_secs),
        )
        .await;
        keep(cluster, opts.keep);
        let steady = steady?;
        a.steady_cpu = steady.steady_cpu;
        a.rest_cpu = steady.rest_cpu;
        a.steady_reports_per_sec = steady.steady_reports_per_sec;
        a.steady_resources = steady.steady_resources;
        a.steady_workers = steady.steady_workers;
    }
    let _ = pid;
    let a = a?;
    let (m, x) = assign::median_max(&a.after_death_ms);
    let (um, ux) = assign::median_max(&a.after_unregister_ms);
    println!(
        "  after a death: median {m:.0} ms, max {x:.0} ms (lease {lease_ms} ms); after an unregister: median {um:.0} ms, max {ux:.0} ms; spread {} / {} / {} (largest weight {}); leader CPU {:.1}% with {} resources on {} workers ({:.1}% at rest before them; {:.0} reports/s, {:.0} µs of leader CPU each beyond rest)",
        a.spread_after_adds,
        a.spread_after_death,
        a.spread_after_join,
        a.max_weight,
        a.steady_cpu.unwrap_or(0.0) * 100.0,
        a.steady_resources,
        a.steady_workers,
        a.rest_cpu.unwrap_or(0.0) * 100.0,
        a.steady_reports_per_sec.unwrap_or(0.0),
        a.cpu_per_report_us().unwrap_or(0.0),
    );
    results.assign = Some(a);
    Ok(())
}

pub(super) async fn run_tasks(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Tasks) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!("tasks: submit -> run -> complete -> result, and a leader killed mid-run");
    for kind in [Kind::Beacon, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
    {
        let mut cluster = start(programs, kind);
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let mut order = vec![leader];
        order.extend((0..MEMBERS).filter(|i| *i != leader));
        let at = cluster.endpoints(&order);
        let t = tasks::run(
            kind,
            &mut cluster,
            &at,
            opts.tasks_workers,
            opts.tasks_submitters,
            opts.tasks_secs,
        )
        .await;
        keep(cluster, opts.keep);
        let t = t.with_context(|| format!("{kind} task queue"))?;
        println!(
            "  {kind}: {:.0} tasks/s end to end, p50 {:.2} ms, p99 {:.2} ms ({} workers, {} submitters); leader killed: longest pause {:.0} ms; {} lost",
            t.per_sec, t.p50_ms, t.p99_ms, t.workers, t.submitters, t.failover_pause_ms, t.lost
        );
        if t.lost > 0 {
            anyhow::bail!(
                "{kind}: {} acknowledged tasks never completed: {}",
                t.lost,
                t.lost_how.join("; ")
            );
        }
        results.tasks.push((kind.to_string(), t));
    }
    Ok(())
}

pub(super) async fn run_tls(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Tls) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!("TLS: beacon's allocation and failover with TLS on, beside plaintext");
    for with_tls in [false, true] {
        let setup = beacon_setup(DEFAULT_TICK_MS);
        let mut cluster = if with_tls {
            Cluster::start_beacon_tls(programs, MEMBERS, &setup)?
        } else {
            Cluster::start_beacon(programs, MEMBERS, &setup)
        };
        let name = if with_tls { "TLS" } else { "plaintext" };
        let run = tls_run(&mut cluster, opts).await;
        keep(cluster, opts.keep);
        let run = run.with_context(|| format!("beacon with {name}"))?;
        for t in &run.alloc {
            println!(
                "  {name}, {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
                t.clients, t.per_sec, t.p50_ms, t.p99_ms
            );
        }
        println!(
            "  {name}: failover median {:.1} ms, max {:.1} ms",
            run.failover.median_ms, run.failover.max_ms
        );
        results.tls.push((name.to_owned(), run));
    }
    Ok(())
}

pub(super) async fn run_grpc(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Grpc) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!("gRPC: beacon through its gRPC API beside its native protocol");
    let setup = beacon_setup(DEFAULT_TICK_MS);
    // Each API on a cluster of its own, the two side by side: they take turns.
    let mut native = Cluster::start_beacon(programs, MEMBERS, &setup);
    let mut grpc = Cluster::start_beacon(programs, MEMBERS, &setup);
    let measured = grpc::run(&mut native, &mut grpc, opts).await;
    keep(native, opts.keep);
    keep(grpc, opts.keep);
    for run in measured.context("beacon through its two APIs")? {
        let via = run.via;
        for ((a, r), us) in run
            .alloc
            .iter()
            .zip(&run.renewals)
            .zip(&run.leader_us_per_id)
        {
            println!(
                "  {via}, {} clients: {:.0} IDs/s (p99 {:.2} ms, leader {us:.0} µs of CPU each), {:.0} renewals/s (p99 {:.2} ms)",
                a.clients, a.per_sec, a.p99_ms, r.per_sec, r.p99_ms
            );
        }
        println!(
            "  {via}: failover median {:.1} ms, max {:.1} ms",
            run.failover.median_ms, run.failover.max_ms
        );
        results.grpc.push(run);
    }
    if runs(Kind::Etcd) {
        // etcd through the same client: what each gRPC API costs, the client held equal.
        let cluster = start(programs, Kind::Etcd);
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let at = cluster.endpoints(&[leader]);
        let next = Arc::new(AtomicUsize::new(0));
        let client = &cluster.beacon_client;
        let warm = Duration::from_secs(1);
        alloc::run(Kind::Etcd, Via::Grpc, &at, client, 16, warm, &next)
            .await
            .context("etcd warm-up")?;
        let duration = Duration::from_secs(opts.alloc_secs);
        for &c in &opts.clients {
            let t = alloc::run(Kind::Etcd, Via::Grpc, &at, client, c, duration, &next).await?;
            println!(
                "  etcd through the same client, {c} clients: {:.0} IDs/s (p99 {:.2} ms)",
                t.per_sec, t.p99_ms
            );
            results.grpc_etcd.push(t);
        }
        keep(cluster, opts.keep);
    }
    Ok(())
}

pub(super) async fn run_reads(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Reads) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!(
        "reads: linearizable and serializable, at the leader and at a follower, while {} clients allocate on the leader",
        reads::WRITERS
    );
    let duration = Duration::from_secs(opts.alloc_secs);
    for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
    {
        let cluster = start(programs, kind);
        let measured = reads::run(&cluster, reads::READERS, reads::WRITERS, duration).await;
        keep(cluster, opts.keep);
        let measured = measured.with_context(|| format!("{kind} reads"))?;
        for r in &measured {
            println!(
                "  {kind}, {} {} reads, {} readers: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {:.0} writes/s meanwhile{}",
                r.at,
                r.consistency,
                r.readers,
                r.per_sec,
                r.p50_ms,
                r.p99_ms,
                r.errors,
                r.writes_per_sec,
                r.first_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" (first error: {e})"))
            );
        }
        results.reads.push((kind.to_string(), measured));
    }
    Ok(())
}

pub(super) async fn run_watch(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Watch) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!("config push: from a write to the last of N watching services seeing it");
    for kind in [Kind::Beacon, Kind::Etcd, Kind::ZooKeeper]
        .into_iter()
        .filter(|k| runs(*k))
    {
        let cluster = start(programs, kind);
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let mut order = vec![leader];
        order.extend((0..MEMBERS).filter(|i| *i != leader));
        let at = cluster.endpoints(&order);
        let measured = watch::run(kind, &at, &opts.watchers, opts.watch_rounds).await;
        keep(cluster, opts.keep);
        let measured = measured.with_context(|| format!("{kind} config push"))?;
        for w in &measured {
            println!(
                "  {kind}, {} watchers: last one p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; each p50 {:.2} ms; {} missed",
                w.watchers, w.last_p50_ms, w.last_p99_ms, w.last_max_ms, w.each_p50_ms, w.missed
            );
        }
        results.watch.push((kind.to_string(), measured));
    }
    Ok(())
}

pub(super) async fn run_scale_beacon(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Scale) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!(
        "scale: registrations grown to {} on {} beacons; memory, disk, paging, watching, failover, a wiped follower",
        opts.scale_steps.last().copied().unwrap_or(0),
        scale::MEMBERS
    );
    let setup = BeaconSetup {
        tick_ms: DEFAULT_TICK_MS,
        config: serde_json::json!({ "id_range": [1, 4_000_000], "lease_ms": scale::LEASE_MS }),
        restore: None,
    };
    let mut cluster = Cluster::start_beacon(programs, scale::MEMBERS, &setup);
    let measured = scale::run(&mut cluster, 0, &opts.scale_steps, opts.rounds.min(3), true).await;
    keep(cluster, opts.keep);
    let mut measured = measured.context("beacon at scale")?;
    for why in measured.stopped.iter().chain(&measured.top_stopped) {
        println!("  {why}");
    }
    for climb in 2..=opts.scale_climbs {
        println!(
            "scale, climb {climb} of {}: memory and disk",
            opts.scale_climbs
        );
        let mut cluster = Cluster::start_beacon(programs, scale::MEMBERS, &setup);
        let again = scale::run(&mut cluster, 0, &opts.scale_steps, 0, false).await;
        keep(cluster, opts.keep);
        let again = again.with_context(|| format!("beacon at scale, climb {climb}"))?;
        if let Some(why) = &again.stopped {
            println!("  {why}");
        }
        measured.other_climbs.push(again.steps);
    }
    results.scale = Some(measured);
    Ok(())
}

pub(super) async fn run_huge(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Huge) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let top = opts.huge_steps.last().copied().unwrap_or(opts.huge_restore);
    println!(
        "huge: {} registrations restored from a generated backup on {MEMBERS} beacons, then registered live to {top}",
        opts.huge_restore
    );
    let config = serde_json::json!({
        "id_range": [1, (top as u64 * 3 / 2).max(4_000_000)],
        "lease_ms": scale::LEASE_MS
    });
    // Failover at 1,000 on a cluster of the same size, to compare the top with.
    let small_setup = BeaconSetup {
        tick_ms: DEFAULT_TICK_MS,
        config: config.clone(),
        restore: None,
    };
    let mut small = Cluster::start_beacon(programs, MEMBERS, &small_setup);
    let measured = scale::run(&mut small, 0, &[1_000], opts.rounds.min(3), true).await;
    keep(small, opts.keep);
    let failover_small = measured.context("beacon at 1,000")?.failover_small;

    let work = tempfile::tempdir().context("a directory for the backup")?;
    let backup = work.path().join("generated.backup");
    let t = std::time::Instant::now();
    let size = generated::write(opts.huge_restore, &backup)?;
    println!(
        "  generated a backup of {} registrations: {:.1} MiB in {:.1} s",
        opts.huge_restore,
        size as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let setup = BeaconSetup {
        tick_ms: DEFAULT_TICK_MS,
        config,
        restore: Some(backup),
    };
    let t = std::time::Instant::now();
    let mut cluster = Cluster::start_beacon(programs, MEMBERS, &setup);
    println!(
        "  restored and started {MEMBERS} beacons in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    drop(work);
    // The first step is the restored state itself, as it stands once every beacon started.
    let steps: Vec<usize> = std::iter::once(opts.huge_restore)
        .chain(
            opts.huge_steps
                .iter()
                .copied()
                .filter(|s| *s > opts.huge_restore),
        )
        .collect();
    let measured = scale::run(
        &mut cluster,
        opts.huge_restore,
        &steps,
        opts.rounds.min(3),
        true,
    )
    .await;
    keep(cluster, opts.keep);
    let mut measured = measured.context("beacon restored, at scale")?;
    for why in measured.stopped.iter().chain(&measured.top_stopped) {
        println!("  {why}");
    }
    measured.failover_small = failover_small;
    measured.failover_small_live = Some(1_000);
    results.huge = Some(measured);
    Ok(())
}

pub(super) async fn run_scale_others(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Scale) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!(
        "scale, rate: {} registrations on {} members renewed as fast as answered; renewals per leader core-second",
        opts.rate_registrations,
        scale::MEMBERS
    );
    let window = Duration::from_secs(opts.window_secs);
    for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
        // The rate is one leader's: its renewals over its CPU. A leadership that moved
        // during the measure (a debug build on a busy host) leaves no figure of one leader,
        // so the measure is made again on a fresh cluster, and says so.
        let mut attempt = 1;
        let measured = loop {
            let cluster = match kind {
                Kind::Beacon => {
                    Cluster::start_beacon(programs, scale::MEMBERS, &beacon_setup(DEFAULT_TICK_MS))
                }
                _ => Cluster::start_etcd_on(programs, scale::MEMBERS, None),
            };
            let term = match cluster.leader_process().await {
                Ok(_) => cluster.leader_term().await,
                Err(_) => None,
            };
            let measured = renewal_rate::run(&cluster, opts.rate_registrations, window).await;
            let now = cluster.leader_term().await;
            keep(cluster, opts.keep);
            let moved = term.is_some() && now != term;
            if moved && attempt == RATE_ATTEMPTS {
                println!(
                    "  {kind}: the leadership moved during the last measure too; its figure spans more than one leader"
                );
            }
            if moved && attempt < RATE_ATTEMPTS {
                println!(
                    "  {kind}: the leadership moved during the measure (term {} -> {}{}); measured again on a fresh cluster",
                    term.unwrap_or_default(),
                    now.map_or_else(|| "none".to_owned(), |t| t.to_string()),
                    measured
                        .as_ref()
                        .err()
                        .map(|e| format!(": {e:#}"))
                        .unwrap_or_default()
                );
                attempt += 1;
                continue;
            }
            break measured;
        };
        results
            .renewal_rate
            .push((kind.to_string(), measured.context("renewal rate")?));
    }
    Ok(())
}

/// Measures of the renewal rate made at most, each on a fresh cluster, while the
/// leadership moves during them.
const RATE_ATTEMPTS: usize = 3;

pub(super) async fn run_membership(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Membership) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    let runs = |k: Kind| b.runs(k);
    println!(
        "membership: the longest gap between acknowledged writes while growing 1 -> 3 -> 5 and replacing a dead voter"
    );
    for kind in [Kind::Beacon, Kind::Etcd].into_iter().filter(|k| runs(*k)) {
        let steps = membership::run(programs, kind, opts.keep)
            .await
            .with_context(|| format!("{kind}, membership"))?;
        for s in &steps {
            println!(
                "  {kind}, {} ({}): longest gap {:.1} ms, done in {:.0} ms",
                s.step, s.how, s.gap_ms, s.took_ms
            );
        }
        results.membership.push((kind.to_string(), steps));
    }
    Ok(())
}

pub(super) async fn run_gray(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Gray) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!(
        "gray: a hung follower and leader under kept-alive registrations, stalled watchers and their herd, ten times the load"
    );
    let sizes = gray::GraySizes {
        registrations: opts.gray_registrations,
        lease_ms: opts.gray_lease_ms,
        stop_secs: opts.gray_stop_secs,
        watchers: opts.gray_watchers,
        watch_registrations: opts.gray_watch_registrations,
        resume_watchers: opts.gray_resume_watchers,
        resume_registrations: opts.gray_resume_registrations,
        overload_secs: opts.gray_overload_secs,
    };
    results.gray = Some(
        gray::run(programs, &sizes, opts.keep)
            .await
            .context("gray")?,
    );
    Ok(())
}

pub(super) async fn run_health(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::Health) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!(
        "health: from a failing check to every watcher and the DNS answer, a flapping service, DNS answers, a dead service across leader changes"
    );
    let sizes = health::HealthSizes {
        watchers: opts.health_watchers,
        flap_secs: opts.health_flap_secs,
        dns_secs: opts.health_dns_secs,
        dns_instances: opts.health_dns_instances,
        lease_ms: opts.health_lease_ms,
        leader_changes: opts.health_leader_changes,
    };
    let measured = health::run(programs, &sizes, opts.keep)
        .await
        .context("health")?;
    for d in &measured.drops {
        println!(
            "  threshold {}: last of {} watchers {:.0} ms, DNS {:.0} ms",
            d.threshold, d.watchers, d.last_watcher_ms, d.dns_ms
        );
    }
    println!(
        "  flapping: {:.0} check changes/min, {:.1} published/min",
        measured.flap.check_changes_per_min, measured.flap.published_per_min
    );
    println!(
        "  DNS: {:.0} answers/s, {:.0} per beacon core-second",
        measured.dns.per_sec, measured.dns.per_core_sec
    );
    let l = &measured.lease;
    println!(
        "  a dead service across {} leader changes: gone {:.0} ms after its last report (lease {} ms, bound {} ms)",
        l.leader_changes, l.gone_after_ms, l.lease_ms, l.bound_ms
    );
    results.health = Some(measured);
    Ok(())
}

pub(super) async fn run_client_libs(b: &Bench<'_>, results: &mut Results) -> anyhow::Result<()> {
    if !b.wants(Part::ClientLibs) || !b.runs(Kind::Beacon) {
        return Ok(());
    }
    let (programs, opts) = (&b.programs, b.opts);
    println!(
        "client libraries: allocations and renewals per second through each, {} s per measure",
        opts.alloc_secs
    );
    let cluster = start(programs, Kind::Beacon);
    let leader = cluster.ready(Duration::from_secs(60)).await?;
    let mut order = vec![leader];
    order.extend((0..MEMBERS).filter(|&i| i != leader));
    let endpoints = cluster.endpoints(&order);
    let logs = tempfile::tempdir()?;
    let root = client_libs::root();
    for name in client_libs::LIBRARIES {
        let (root, endpoints, clients, logs) = (
            root.clone(),
            endpoints.clone(),
            opts.clients.clone(),
            logs.path().to_owned(),
        );
        let secs = opts.alloc_secs;
        let lib = tokio::task::spawn_blocking(move || {
            client_libs::run(&root, name, &endpoints, &clients, secs, &logs)
        })
        .await?;
        results.client_libs.push(lib);
    }
    if opts.keep {
        println!("  driver logs kept in {}", logs.keep().display());
    }
    keep(cluster, opts.keep);
    Ok(())
}
