//! The results as Markdown: a summary with ratios beacon/peer, then the details.

use std::fmt::Write;

use super::{Results, renewal_rate};

fn ratio(beacon: Option<f64>, peer: Option<f64>) -> String {
    match (beacon, peer) {
        (Some(b), Some(p)) if p > 0.0 => format!("{:.2}", b / p),
        _ => "-".into(),
    }
}

fn cell(v: Option<f64>, unit: &str, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.decimals$}{unit}"))
}

struct Row {
    what: String,
    beacon: Option<f64>,
    etcd: Option<f64>,
    zookeeper: Option<f64>,
    unit: &'static str,
    decimals: usize,
}

pub fn markdown(r: &Results) -> String {
    let mut rows = Vec::new();
    failover_rows(r, &mut rows);
    idle_rows(r, &mut rows);
    alloc_rows(r, &mut rows);
    liveness_rows(r, &mut rows);
    if let Some(s) = &r.sequence {
        sequence_rows(r, s, &mut rows);
    }
    assign_rows(r, &mut rows);
    tasks_rows(r, &mut rows);
    watch_rows(r, &mut rows);
    let mut out = r.taken.markdown();
    comparison_table(&rows, &mut out);

    tls_table(r, &mut out);
    grpc_table(r, &mut out);
    reads_table(r, &mut out);
    watch_table(r, &mut out);
    gray_table(r, &mut out);
    health_table(r, &mut out);
    client_libs_table(r, &mut out);
    scale_table(r, &mut out);
    renewal_rate_table(r, &mut out);
    membership_table(r, &mut out);

    failover_detail(r, &mut out);
    alloc_detail(r, &mut out);
    sequence_detail(r, &mut out);
    liveness_detail(r, &mut out);
    super::targets::table(r, &mut out);
    out
}

/// Failover rows: median and max for each fault.
fn failover_rows(r: &Results, rows: &mut Vec<Row>) {
    // Each fault once, in the order first run.
    let mut faults: Vec<super::failover::Fault> = Vec::new();
    for (_, f) in &r.failover {
        if !faults.contains(&f.fault) {
            faults.push(f.fault);
        }
    }
    for fault in faults {
        let failover = |name: &str| {
            r.failover
                .iter()
                .find(|(n, f)| n == name && f.fault == fault)
                .map(|(_, f)| f)
        };
        for (what, pick) in [
            (
                "median",
                (|f: &super::failover::Failover| f.median_ms) as fn(&_) -> f64,
            ),
            ("max", |f| f.max_ms),
        ] {
            rows.push(Row {
                what: format!("failover {what}, {} (lower is better)", fault.label()),
                beacon: failover("beacon").map(pick),
                etcd: failover("etcd").map(pick),
                zookeeper: failover("ZooKeeper").map(pick),
                unit: " ms",
                decimals: 1,
            });
        }
    }
}

/// Leader changes while idle.
fn idle_rows(r: &Results, rows: &mut Vec<Row>) {
    if !r.idle.is_empty() {
        let idle = |name: &str| {
            r.idle
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, i)| i.leader_changes as f64)
        };
        let secs = r.idle.first().map_or(0, |(_, i)| i.secs);
        rows.push(Row {
            what: format!("leader changes, {secs} s idle at defaults (lower is better)"),
            beacon: idle("beacon"),
            etcd: idle("etcd"),
            zookeeper: idle("ZooKeeper"),
            unit: "",
            decimals: 0,
        });
    }
}

/// Allocation: throughput and latency by clients, and the leader's term moves.
fn alloc_rows(r: &Results, rows: &mut Vec<Row>) {
    let alloc = |name: &str, c: usize| r.alloc_of(name, c);
    for c in r.alloc_clients() {
        for (what, unit, decimals, pick) in [
            (
                "IDs/s",
                "/s",
                0,
                (|t: &super::alloc::Throughput| t.per_sec) as fn(&_) -> f64,
            ),
            ("p50", " ms", 2, |t| t.p50_ms),
            ("p99", " ms", 2, |t| t.p99_ms),
        ] {
            rows.push(Row {
                what: format!("allocation {what}, {}", n_clients(c)),
                beacon: alloc("beacon", c).map(pick),
                etcd: alloc("etcd", c).map(pick),
                zookeeper: alloc("ZooKeeper", c).map(pick),
                unit,
                decimals,
            });
        }
    }
    if !r.alloc.is_empty() {
        // Every allocation run of a system, summed: the terms its leader went through.
        let moves = |name: &str| {
            let runs: Vec<Option<u64>> = r
                .alloc
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, t)| t.term_moves)
                .collect();
            (!runs.is_empty() && runs.iter().all(Option::is_some))
                .then(|| runs.iter().flatten().sum::<u64>() as f64)
        };
        rows.push(Row {
            what:
                "allocation: leader term moves during the runs (0 = no election; lower is better)"
                    .into(),
            beacon: moves("beacon"),
            etcd: moves("etcd"),
            zookeeper: moves("ZooKeeper"),
            unit: "",
            decimals: 0,
        });
    }
}

/// Liveness: capacity, memory per registration, renewal rate.
fn liveness_rows(r: &Results, rows: &mut Vec<Row>) {
    let live = |name: &str| r.liveness.iter().find(|(n, _)| n == name).map(|(_, l)| l);
    let capacity = |name: &str| {
        live(name)
            .and_then(|l| l.capacity(r.cpu_limit))
            .map(|s| s.live as f64)
    };
    let per_reg = |name: &str| {
        live(name)
            .and_then(|l| l.capacity(r.cpu_limit).or(l.steps.last()))
            .map(|s| s.bytes_per_registration)
    };
    if !r.liveness.is_empty() {
        rows.push(Row {
            what: format!(
                "live registrations at 1 renewal/s under {:.0}% of a core (largest step passed)",
                r.cpu_limit * 100.0
            ),
            beacon: capacity("beacon"),
            etcd: capacity("etcd"),
            zookeeper: None,
            unit: "",
            decimals: 0,
        });
        rows.push(Row {
            what: "leader memory per registration (lower is better)".into(),
            beacon: per_reg("beacon"),
            etcd: per_reg("etcd"),
            zookeeper: None,
            unit: " B",
            decimals: 0,
        });
    }

    if !r.renewal_rate.is_empty() {
        let rate = |system: &str, pick: fn(&renewal_rate::Rate) -> f64| {
            r.renewal_rate
                .iter()
                .find(|(s, _)| s == system)
                .map(|(_, x)| pick(x))
        };
        for (what, pick) in [
            (
                "lease renewals per leader core-second, five members (higher is better)",
                (|x| x.per_core_sec) as fn(&renewal_rate::Rate) -> f64,
            ),
            (
                "live registrations per leader core at the client's default renewal cadence",
                |x| x.live_per_core,
            ),
        ] {
            rows.push(Row {
                what: what.into(),
                beacon: rate("beacon", pick),
                etcd: rate("etcd", pick),
                zookeeper: None,
                unit: "",
                decimals: 0,
            });
        }
    }
}

/// Assignment (beacon alone).
fn assign_rows(r: &Results, rows: &mut Vec<Row>) {
    if let Some(a) = &r.assign {
        let only = |what: String, v: f64, unit: &'static str, decimals: usize| Row {
            what,
            beacon: Some(v),
            etcd: None,
            zookeeper: None,
            unit,
            decimals,
        };
        let (m, x) = super::assign::median_max(&a.after_death_ms);
        rows.push(only(
            format!(
                "assignment: a dead worker's resources running again, median (lease {} ms, tick {} ms; lower is better)",
                a.lease_ms, a.tick_ms
            ),
            m,
            " ms",
            0,
        ));
        rows.push(only("assignment: the same, max".into(), x, " ms", 0));
        let (m, _) = super::assign::median_max(&a.after_unregister_ms);
        rows.push(only(
            "assignment: an unregistered worker's resources running again, median (lower is better)".into(),
            m,
            " ms",
            0,
        ));
        rows.push(only(
            format!(
                "assignment: spread of load after a join and a rebalance (largest weight {})",
                a.max_weight
            ),
            a.spread_after_join as f64,
            "",
            0,
        ));
        if let Some(cpu) = a.steady_cpu {
            rows.push(only(
                format!(
                    "assignment: leader CPU at steady state, {} resources on {} workers (lower is better)",
                    a.steady_resources, a.steady_workers
                ),
                cpu * 100.0,
                "%",
                1,
            ));
        }
        if let Some(rest) = a.rest_cpu {
            rows.push(only(
                "assignment: leader CPU of the same cluster at rest, before any worker (heartbeats and ticks alone)".into(),
                rest * 100.0,
                "%",
                1,
            ));
        }
        if let (Some(rate), Some(each)) = (a.steady_reports_per_sec, a.cpu_per_report_us()) {
            rows.push(only(
                format!(
                    "assignment: leader CPU per lease renewal at steady state beyond rest, {rate:.0} renewals/s (lower is better)"
                ),
                each,
                " µs",
                0,
            ));
        }
    }
}

/// Task queues.
fn tasks_rows(r: &Results, rows: &mut Vec<Row>) {
    let tasks = |name: &str| r.tasks.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    if let Some(t) = tasks("beacon").or_else(|| r.tasks.first().map(|(_, t)| t)) {
        let what = format!(
            "tasks: end to end tasks/s ({} workers, {} submitters, no-op tasks)",
            t.workers, t.submitters
        );
        for (what, unit, decimals, pick) in [
            (
                what.as_str(),
                "/s",
                0,
                (|t: &super::tasks::TaskResults| t.per_sec) as fn(&_) -> f64,
            ),
            ("tasks: latency p50 (lower is better)", " ms", 2, |t| {
                t.p50_ms
            }),
            ("tasks: latency p99 (lower is better)", " ms", 2, |t| {
                t.p99_ms
            }),
            (
                "tasks: longest pause between results with the leader SIGKILLed (lower is better)",
                " ms",
                0,
                |t| t.failover_pause_ms,
            ),
            ("tasks: acknowledged tasks lost", "", 0, |t| t.lost as f64),
        ] {
            rows.push(Row {
                what: what.to_owned(),
                beacon: tasks("beacon").map(pick),
                etcd: None,
                zookeeper: tasks("ZooKeeper").map(pick),
                unit,
                decimals,
            });
        }
    }
}

/// Config push to watchers.
fn watch_rows(r: &Results, rows: &mut Vec<Row>) {
    for (what, unit, decimals, pick) in [
        (
            "config push: write to the last of {n} watchers seeing it, p50 (lower is better)",
            " ms",
            2,
            (|w: &super::watch::WatchRun| w.last_p50_ms) as fn(&_) -> f64,
        ),
        (
            "config push: write to the last of {n} watchers seeing it, p99 (lower is better)",
            " ms",
            2,
            |w| w.last_p99_ms,
        ),
        (
            "config push: rounds a watcher missed, {n} watchers",
            "",
            0,
            |w| w.missed as f64,
        ),
    ] {
        let Some((_, beacon)) = r.watch.iter().find(|(n, _)| n == "beacon") else {
            break;
        };
        for b in beacon {
            let of = |name: &str| {
                r.watch
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, runs)| runs.iter().find(|w| w.watchers == b.watchers))
                    .map(pick)
            };
            rows.push(Row {
                what: what.replace("{n}", &b.watchers.to_string()),
                beacon: Some(pick(b)),
                etcd: of("etcd"),
                zookeeper: of("ZooKeeper"),
                unit,
                decimals,
            });
        }
    }
}

/// Every failover round.
fn failover_detail(r: &Results, out: &mut String) {
    if !r.failover.is_empty() {
        writeln!(
            out,
            "\nFailover rounds (ms from the fault to the first write that succeeded after it):\n"
        )
        .unwrap();
        writeln!(
            out,
            "| system | fault | rounds | IDs acknowledged | duplicate IDs |"
        )
        .unwrap();
        writeln!(out, "|---|---|---|---|---|").unwrap();
        for (name, f) in &r.failover {
            let rounds: Vec<String> = f.rounds.iter().map(|t| format!("{t:.1}")).collect();
            writeln!(
                out,
                "| {name} | {} | {} | {} | {} |",
                f.fault.label(),
                rounds.join(", "),
                f.ids,
                f.duplicates
            )
            .unwrap();
        }
        for why in &r.skipped_faults {
            writeln!(out, "\n{why}").unwrap();
        }
    }
}

/// Every allocation run.
fn alloc_detail(r: &Results, out: &mut String) {
    if !r.alloc.is_empty() {
        writeln!(out, "\nAllocation runs ({} s each):\n", r.alloc_secs).unwrap();
        writeln!(
            out,
            "| system | clients | IDs | IDs/s | p50 | p99 | max | errors | duplicates |"
        )
        .unwrap();
        writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
        for (name, t) in &r.alloc {
            writeln!(
                out,
                "| {name} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} |",
                t.clients, t.ok, t.per_sec, t.p50_ms, t.p99_ms, t.max_ms, t.errors, t.duplicates
            )
            .unwrap();
        }
    }
}

/// Every sequence run.
fn sequence_detail(r: &Results, out: &mut String) {
    if let Some(s) = &r.sequence {
        writeln!(
            out,
            "\nSequence runs (sequences created with step {}; segments of one number; {} times a next_id() found both buffers empty and waited):\n",
            s.step, s.empty_waits
        )
        .unwrap();
        writeln!(
            out,
            "| what | clients | count | per second | p50 | p99 | max | errors | duplicates |"
        )
        .unwrap();
        writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
        for (what, list) in [
            ("segments", &s.segments),
            ("double-buffer numbers", &s.numbers),
        ] {
            for t in list {
                writeln!(
                    out,
                    "| {what} | {} | {} | {:.0} | {:.4} ms | {:.4} ms | {:.2} ms | {} | {} |",
                    t.clients,
                    t.ok,
                    t.per_sec,
                    t.p50_ms,
                    t.p99_ms,
                    t.max_ms,
                    t.errors,
                    t.duplicates
                )
                .unwrap();
            }
        }
        for (threads, per_sec, waits) in &s.next_id {
            writeln!(
                out,
                "| next_id() on {threads} threads | {threads} | - | {per_sec:.0} | - | - | - | {waits} waits | - |"
            )
            .unwrap();
        }
        if let Some(slow) = &s.slowed {
            writeln!(
                out,
                "\nnext_id() while each fetch crossed a proxy holding every chunk back {} ms: {} calls, p50 {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns, max {:.0} ns; {} segments fetched, {} waits for an empty buffer.",
                slow.delay_ms, slow.calls, slow.p50_ns, slow.p99_ns, slow.p999_ns, slow.max_ns, slow.fetches, slow.waits
            )
            .unwrap();
        }
    }
}

/// Every liveness step.
fn liveness_detail(r: &Results, out: &mut String) {
    if !r.liveness.is_empty() {
        writeln!(
            out,
            "\nLiveness steps ({} s window each; leader process):\n",
            r.window_secs
        )
        .unwrap();
        writeln!(out, "| system | live | leader CPU | renewals/s | failed | alive at end | RSS | per registration |").unwrap();
        writeln!(out, "|---|---|---|---|---|---|---|---|").unwrap();
        for (name, l) in &r.liveness {
            for s in &l.steps {
                writeln!(
                    out,
                    "| {name} | {} | {:.1}% | {:.0} | {} | {} | {:.1} MiB | {:.0} B |",
                    s.live,
                    s.cpu * 100.0,
                    s.renewals_per_sec,
                    s.renewal_errors,
                    s.alive,
                    s.rss_bytes as f64 / 1048576.0,
                    s.bytes_per_registration
                )
                .unwrap();
            }
        }
    }
}

pub(super) fn n_clients(n: usize) -> String {
    format!("{n} client{}", if n == 1 { "" } else { "s" })
}

/// The sequence part's rows: beacon's own figures, and unique numbers beside the allocation
/// runs of etcd (a revision per put) and ZooKeeper (a sequential znode) at the same clients.
fn sequence_rows(r: &Results, s: &super::sequence::SequenceResults, rows: &mut Vec<Row>) {
    let beacon_only = |what: String, v: f64, unit: &'static str, decimals: usize| Row {
        what,
        beacon: Some(v),
        etcd: None,
        zookeeper: None,
        unit,
        decimals,
    };
    for (threads, per_sec, _) in &s.next_id {
        rows.push(beacon_only(
            format!(
                "sequence: numbers/s from next_id(), one process, {threads} thread{}",
                if *threads == 1 { "" } else { "s" }
            ),
            *per_sec,
            "/s",
            0,
        ));
    }
    if let Some(slow) = &s.slowed {
        rows.push(beacon_only(
            format!(
                "sequence: next_id() p99.9 while fetches are slowed by {} ms (lower is better)",
                slow.delay_ms
            ),
            slow.p999_ns,
            " ns",
            0,
        ));
    }
    let peer = |name: &str, c: usize| r.alloc_of(name, c).map(|t| t.per_sec);
    for t in &s.numbers {
        rows.push(Row {
            what: format!(
                "unique numbers/s, {} (beacon: double-buffered sequence; etcd: a revision per put; ZooKeeper: a sequential znode)",
                n_clients(t.clients)
            ),
            beacon: Some(t.per_sec),
            etcd: peer("etcd", t.clients),
            zookeeper: peer("ZooKeeper", t.clients),
            unit: "/s",
            decimals: 0,
        });
    }
    for t in &s.segments {
        rows.push(Row {
            what: format!(
                "sequence: segments/s at the leader, {} (one committed entry each; etcd and ZooKeeper: one write per number)",
                n_clients(t.clients)
            ),
            beacon: Some(t.per_sec),
            etcd: peer("etcd", t.clients),
            zookeeper: peer("ZooKeeper", t.clients),
            unit: "/s",
            decimals: 0,
        });
    }
    rows.push(beacon_only(
        "snowflake: IDs/s from one thread (the layout's ceiling: 4,096,000/s)".into(),
        s.snowflake_per_sec,
        "/s",
        0,
    ));
}

/// beacon with TLS beside plaintext: what TLS costs.
fn tls_table(r: &Results, out: &mut String) {
    let run = |name: &str| r.tls.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    let (Some(plain), Some(tls)) = (run("plaintext"), run("TLS")) else {
        return;
    };
    writeln!(
        out,
        "\nbeacon with TLS (3 beacons, quorum mode, tick {} ms):\n",
        beacon::config::DEFAULT_TICK_MS
    )
    .unwrap();
    writeln!(out, "| measure | plaintext | TLS | TLS/plaintext |").unwrap();
    writeln!(out, "|---|---|---|---|").unwrap();
    let mut row = |what: String, p: f64, t: f64, unit: &str, decimals: usize| {
        writeln!(
            out,
            "| {what} | {p:.decimals$}{unit} | {t:.decimals$}{unit} | {} |",
            ratio(Some(t), Some(p))
        )
        .unwrap();
    };
    for (p, t) in plain.alloc.iter().zip(&tls.alloc) {
        let c = n_clients(p.clients);
        row(
            format!("TLS: allocation IDs/s, {c}"),
            p.per_sec,
            t.per_sec,
            "/s",
            0,
        );
        row(
            format!("TLS: allocation p99, {c}"),
            p.p99_ms,
            t.p99_ms,
            " ms",
            2,
        );
    }
    let (p, t) = (&plain.failover, &tls.failover);
    row(
        "TLS: failover median".into(),
        p.median_ms,
        t.median_ms,
        " ms",
        1,
    );
    row("TLS: failover max".into(), p.max_ms, t.max_ms, " ms", 1);
}

/// beacon's gRPC API beside its native protocol (and etcd's gRPC API through the same
/// client, when etcd ran): what the gRPC edge costs.
fn grpc_table(r: &Results, out: &mut String) {
    use super::systems::Via;
    let run = |via: Via| r.grpc.iter().find(|g| g.via == via);
    let (Some(native), Some(grpc)) = (run(Via::Native), run(Via::Grpc)) else {
        return;
    };
    let etcd = |clients: usize| {
        r.grpc_etcd
            .iter()
            .find(|t| t.clients == clients)
            .map(|t| t.per_sec)
    };
    writeln!(
        out,
        "\nbeacon through gRPC beside its native protocol (two clusters of 3 beacons side by side, quorum mode, default tick; at each client count the two APIs call by turns of half a second until each has had the run's time, so that the machine's load weighs on both alike), and etcd's gRPC API through the same client (unary calls over one HTTP/2 connection per client, through h2):\n"
    )
    .unwrap();
    writeln!(
        out,
        "| measure | native | gRPC | etcd (gRPC) | gRPC/native | gRPC/etcd |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|").unwrap();
    let mut row = |what: String, n: f64, g: f64, e: Option<f64>, unit: &str, decimals: usize| {
        writeln!(
            out,
            "| {what} | {} | {} | {} | {} | {} |",
            cell(Some(n), unit, decimals),
            cell(Some(g), unit, decimals),
            cell(e, unit, decimals),
            ratio(Some(g), Some(n)),
            ratio(Some(g), e)
        )
        .unwrap();
    };
    for (n, g) in native.alloc.iter().zip(&grpc.alloc) {
        let c = n_clients(n.clients);
        row(
            format!("gRPC: allocation IDs/s, {c}"),
            n.per_sec,
            g.per_sec,
            etcd(n.clients),
            "/s",
            0,
        );
        row(
            format!("gRPC: allocation p99, {c}"),
            n.p99_ms,
            g.p99_ms,
            None,
            " ms",
            2,
        );
    }
    let cpu = [
        ("leader", &native.leader_us_per_id, &grpc.leader_us_per_id),
        (
            "clients'",
            &native.clients_us_per_id,
            &grpc.clients_us_per_id,
        ),
    ];
    for (whose, native_us, grpc_us) in cpu {
        let clients = native.alloc.iter().map(|a| a.clients);
        for ((n, g), c) in native_us.iter().zip(grpc_us).zip(clients) {
            let c = n_clients(c);
            row(
                format!("gRPC: {whose} CPU per allocation, {c} (lower is better)"),
                *n,
                *g,
                None,
                " µs",
                0,
            );
        }
    }
    for (n, g) in native.renewals.iter().zip(&grpc.renewals) {
        let c = n_clients(n.clients);
        row(
            format!("gRPC: lease renewals/s, {c}"),
            n.per_sec,
            g.per_sec,
            None,
            "/s",
            0,
        );
    }
    let (n, g) = (&native.failover, &grpc.failover);
    row(
        "gRPC: failover median, leader SIGKILLed".into(),
        n.median_ms,
        g.median_ms,
        None,
        " ms",
        1,
    );
    row(
        "gRPC: failover max, leader SIGKILLed".into(),
        n.max_ms,
        g.max_ms,
        None,
        " ms",
        1,
    );
}

/// The reads part: each kind of read at the leader and at a follower, beacon beside etcd and
/// ZooKeeper.
fn reads_table(r: &Results, out: &mut String) {
    let Some((_, beacon)) = r.reads.iter().find(|(n, _)| n == "beacon") else {
        return;
    };
    let of = |name: &str, b: &super::reads::ReadRun| {
        r.reads
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, runs)| {
                runs.iter()
                    .find(|e| e.at == b.at && e.consistency == b.consistency)
            })
            .cloned()
    };
    writeln!(
        out,
        "\nReads while {} clients allocate on the leader (3 members; {} readers each; beacon reads `show sequences`, etcd gets one key, ZooKeeper reads one znode, after `sync` when linearizable; the four kinds of read take turns of half a second, the writers writing through each, so that the machine's load weighs on each alike):\n",
        super::reads::WRITERS,
        super::reads::READERS,
    )
    .unwrap();
    writeln!(
        out,
        "| read | beacon reads/s | beacon p50 | beacon p99 | etcd reads/s | etcd p50 | etcd p99 | ZooKeeper reads/s | ZooKeeper p50 | ZooKeeper p99 | p99 beacon/etcd | beacon writes/s meanwhile | beacon errors |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|").unwrap();
    for b in beacon {
        let (e, z) = (of("etcd", b), of("ZooKeeper", b));
        writeln!(
            out,
            "| {} at the {} | {:.0}/s | {:.2} ms | {:.2} ms | {} | {} | {} | {} | {} | {} | {} | {:.0}/s | {} |",
            b.consistency,
            b.at,
            b.per_sec,
            b.p50_ms,
            b.p99_ms,
            cell(e.as_ref().map(|e| e.per_sec), "/s", 0),
            cell(e.as_ref().map(|e| e.p50_ms), " ms", 2),
            cell(e.as_ref().map(|e| e.p99_ms), " ms", 2),
            cell(z.as_ref().map(|z| z.per_sec), "/s", 0),
            cell(z.as_ref().map(|z| z.p50_ms), " ms", 2),
            cell(z.as_ref().map(|z| z.p99_ms), " ms", 2),
            ratio(Some(b.p99_ms), e.as_ref().map(|e| e.p99_ms)),
            b.writes_per_sec,
            b.errors
        )
        .unwrap();
    }
    reads_inside_table(beacon, out);
}

/// Where beacon's reads spent their time, from its metrics over each kind's turns.
fn reads_inside_table(beacon: &[super::reads::ReadRun], out: &mut String) {
    if beacon.iter().all(|b| b.inside.is_none()) {
        return;
    }
    writeln!(
        out,
        "\nWhere beacon's reads spent their time, from the metrics of the beacon read from and of the leader over each kind's turns, added up (means exact; p99s within buckets that double, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 ms):\n"
    )
    .unwrap();
    writeln!(
        out,
        "| read | mean, as the readers timed it | waiting for the read index, mean | the same, p99 | the leader's queue to its core, mean | leader's fsync, mean | leader's fsync, p99 | follower's fsync, mean | follower's fsync, p99 |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
    let ms = |v: Option<f64>| cell(v, " ms", 2);
    for b in beacon {
        let Some(i) = &b.inside else { continue };
        let index = |v: Option<f64>| {
            if b.consistency == "linearizable" {
                ms(v)
            } else {
                "-".to_owned()
            }
        };
        writeln!(
            out,
            "| {} at the {} | {:.2} ms | {} | {} | {} | {} | {} | {} | {} |",
            b.consistency,
            b.at,
            b.mean_ms,
            index(i.read_index_mean_ms),
            index(i.read_index_p99_ms),
            ms(i.leader_queue_mean_ms),
            ms(i.leader_fsync_mean_ms),
            ms(i.leader_fsync_p99_ms),
            ms(i.follower_fsync_mean_ms),
            ms(i.follower_fsync_p99_ms),
        )
        .unwrap();
    }
}

/// The config push part: each system at each number of watchers.
fn watch_table(r: &Results, out: &mut String) {
    if r.watch.is_empty() {
        return;
    }
    writeln!(
        out,
        "\nConfig push (3 members; one connection per watcher; beacon's watches at the leader, etcd's and ZooKeeper's spread over the members; ZooKeeper's one-shot watch set again with the read that shows the value; times from the write's start):\n"
    )
    .unwrap();
    writeln!(
        out,
        "| system | watchers | rounds | last watcher p50 | last watcher p99 | last watcher max | each watcher p50 | write p50 | missed |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
    for (system, runs) in &r.watch {
        for w in runs {
            writeln!(
                out,
                "| {system} | {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
                w.watchers,
                w.rounds,
                w.last_p50_ms,
                w.last_p99_ms,
                w.last_max_ms,
                w.each_p50_ms,
                w.write_p50_ms,
                w.missed
            )
            .unwrap();
        }
    }
}

/// The scale part: memory and disk at each step, and what the largest registry costs.
fn scale_table(r: &Results, out: &mut String) {
    if let Some(s) = &r.scale {
        writeln!(
            out,
            "\nScale: registrations grown in steps on {} beacons (quorum mode, a lease of an hour; memory is resident memory above the beacon's own before the first registration):\n",
            s.members
        )
        .unwrap();
        climb_table(s, out);
    }
    if let Some(s) = &r.huge {
        writeln!(
            out,
            "\nHuge: {} registrations restored on {} beacons from a backup the bench generated (`beacon restore`, each beacon's data directory built from the file as an operator restores a cluster), then registered live in steps (quorum mode, a lease of an hour; memory is resident memory over every registration held, the beacon's own included; restored registrations have no log entries, live ones do until the log is compacted):\n",
            s.restored, s.members
        )
        .unwrap();
        climb_table(s, out);
    }
}

/// One climb's steps, and what its largest registry costs.
fn climb_table(s: &super::scale::Scale, out: &mut String) {
    let climbs = 1 + s.other_climbs.len();
    if climbs > 1 {
        writeln!(
            out,
            "Memory is the median of {climbs} climbs, each on a cluster of its own, with the lowest and highest in brackets; the rest is the first climb's.\n"
        )
        .unwrap();
    }
    writeln!(
        out,
        "| live | registered/s | leader RSS | leader per registration | follower RSS | follower per registration | log on disk | snapshot on disk |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|").unwrap();
    let mib = |b: u64| b as f64 / 1048576.0;
    // The median, with the spread when more than one climb measured it.
    let spread = |live: usize,
                  of: &dyn Fn(&super::scale::ScaleStep) -> f64,
                  unit: &dyn Fn(f64) -> String| {
        let (median, low, high, n) = s.spread(live, of);
        if n > 1 {
            format!("{} ({}-{})", unit(median), unit(low), unit(high))
        } else {
            unit(median)
        }
    };
    let in_mib = |v: f64| format!("{:.1} MiB", v / 1048576.0);
    let in_bytes = |v: f64| format!("{v:.0} B");
    for step in &s.steps {
        writeln!(
            out,
            "| {} | {:.0}/s | {} | {} | {} | {} | {:.1} MiB | {:.1} MiB |",
            step.live,
            step.registered_per_sec,
            spread(step.live, &|x| x.leader_rss as f64, &in_mib),
            spread(step.live, &|x| x.leader_bytes_per_registration, &in_bytes),
            spread(step.live, &|x| x.follower_rss as f64, &in_mib),
            spread(step.live, &|x| x.follower_bytes_per_registration, &in_bytes),
            mib(step.log_bytes),
            mib(step.snapshot_bytes)
        )
        .unwrap();
    }
    if s.leader_changes > 0 {
        writeln!(
            out,
            "\nThe leadership moved {} times during the climb; the registrations a move failed were made again at the new leader.",
            s.leader_changes
        )
        .unwrap();
    }
    if let Some(why) = &s.stopped {
        writeln!(out, "\nThe climb stopped early: {why}").unwrap();
    }
    if let Some(why) = &s.top_stopped {
        writeln!(
            out,
            "\nThe climb reached its last step, but the measures at the top did not finish: {why}"
        )
        .unwrap();
    }
    let Some(top) = &s.top else {
        return;
    };
    writeln!(out, "\nAt {} registrations:\n", top.live).unwrap();
    writeln!(out, "| measure | value |").unwrap();
    writeln!(out, "|---|---|").unwrap();
    let small = s.failover_small.as_ref();
    let first = s
        .failover_small_live
        .unwrap_or_else(|| s.steps.first().map_or(0, |x| x.live));
    let rows = [
        (
            "a page of 10 registrations (`show nodes --limit 10`), median / slowest of 20"
                .to_owned(),
            format!("{:.2} ms / {:.2} ms", top.page_ms.0, top.page_ms.1),
        ),
        (
            "a watch resumed 100 log entries back, until it heard the present".to_owned(),
            format!("{:.1} ms ({} changes)", top.resume_ms, top.resumed_changes),
        ),
        (
            "a new watch of a type of its own, until its first listing".to_owned(),
            format!("{:.1} ms", top.first_listing_ms),
        ),
        (
            "a discovery push: one registration of its own type, until its watcher heard it"
                .to_owned(),
            format!("{:.1} ms", top.push_ms),
        ),
        (
            "failover, leader SIGKILLed: median / max".to_owned(),
            format!(
                "{:.1} ms / {:.1} ms",
                top.failover.median_ms, top.failover.max_ms
            ),
        ),
        (
            format!("failover at {first} registrations: median / max"),
            small.map_or("-".to_owned(), |f| {
                format!("{:.1} ms / {:.1} ms", f.median_ms, f.max_ms)
            }),
        ),
        (
            "a follower with its data directory wiped, caught up".to_owned(),
            format!(
                "{:.1} s ({:.1} MiB on its disk after)",
                top.catch_up_ms / 1e3,
                mib(top.catch_up_bytes)
            ),
        ),
    ];
    for (what, value) in rows {
        writeln!(out, "| {what} | {value} |").unwrap();
    }
}

/// The scale part's rate half: what each system's leader sustained.
fn renewal_rate_table(r: &Results, out: &mut String) {
    if r.renewal_rate.is_empty() {
        return;
    }
    writeln!(
        out,
        "\nRenewal rate: registrations renewed as fast as answered, a window of renewals outstanding per connection; the leader's CPU over the window:\n"
    )
    .unwrap();
    writeln!(
        out,
        "| system | members | registrations | connections | renewals/s | failed | leader CPU | per core-second | default cadence | live per core | alive at end |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|").unwrap();
    for (system, x) in &r.renewal_rate {
        writeln!(
            out,
            "| {system} | {} | {} | {} | {:.0} | {} | {:.0}% | {:.0} | {} ms | {:.0} | {} |",
            x.members,
            x.registrations,
            x.connections,
            x.renewals_per_sec,
            x.failed,
            x.leader_cpu * 100.0,
            x.per_core_sec,
            x.cadence_ms,
            x.live_per_core,
            x.alive
        )
        .unwrap();
    }
}

/// The membership part: writes' longest gap in each step, per system.
fn membership_table(r: &Results, out: &mut String) {
    if r.membership.is_empty() {
        return;
    }
    writeln!(
        out,
        "\nMembership: four writers allocate without pause through every member, present and future; the longest time between two acknowledged writes in each step (lower is better), and how long the step took:\n"
    )
    .unwrap();
    writeln!(out, "| system | step | how | longest gap | step took |").unwrap();
    writeln!(out, "|---|---|---|---|---|").unwrap();
    for (system, steps) in &r.membership {
        for s in steps {
            writeln!(
                out,
                "| {system} | {} | {} | {:.1} ms | {:.0} ms |",
                s.step, s.how, s.gap_ms, s.took_ms
            )
            .unwrap();
        }
    }
}

/// The health part: from a failing check to discovery, a flapping service, DNS, a dead
/// service across leader changes.
fn health_table(r: &Results, out: &mut String) {
    let Some(h) = &r.health else {
        return;
    };
    writeln!(
        out,
        "\nDiscovery that tells the truth (beacon, one member; see docs/registry.md, *Health and drain* and *DNS*):\n"
    )
    .unwrap();
    writeln!(out, "| case | measure | value |").unwrap();
    writeln!(out, "|---|---|---|").unwrap();
    for d in &h.drops {
        let case = format!(
            "a check fails (every {} ms, reported after {} rounds)",
            d.interval_ms, d.threshold
        );
        writeln!(
            out,
            "| {case} | to the last of {} watchers | {:.0} ms |",
            d.watchers, d.last_watcher_ms
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | to the DNS answer without it | {:.0} ms |",
            d.dns_ms
        )
        .unwrap();
    }
    let f = &h.flap;
    writeln!(
        out,
        "| a check flipping every round for {} s | changes its check made, per minute | {:.0} |",
        f.secs, f.check_changes_per_min
    )
    .unwrap();
    writeln!(
        out,
        "| a check flipping every round for {} s | changes watchers were told of, per minute | {:.1} |",
        f.secs, f.published_per_min
    )
    .unwrap();
    let d = &h.dns;
    writeln!(
        out,
        "| DNS, {} instances, {} UDP askers | answers per second | {:.0} |",
        d.instances, d.askers, d.per_sec
    )
    .unwrap();
    writeln!(
        out,
        "| DNS, {} instances, {} UDP askers | answers per beacon core-second | {:.0} |",
        d.instances, d.askers, d.per_core_sec
    )
    .unwrap();
    let l = &h.lease;
    writeln!(
        out,
        "| a dead service, {} beacons, {} leader changes within its {} ms lease | from its last report to gone (bound: lease + 2 ticks, {} ms) | {:.0} ms |",
        l.beacons, l.leader_changes, l.lease_ms, l.bound_ms, l.gone_after_ms
    )
    .unwrap();
}

/// The gray part: each measure beside its target, and whether it was met.
fn gray_table(r: &Results, out: &mut String) {
    let Some(g) = &r.gray else {
        return;
    };
    let mib = |b: u64| b as f64 / 1048576.0;
    let met = |ok: bool| if ok { "yes" } else { "no" };
    writeln!(
        out,
        "\nGray failures and overload (beacon; see docs/guarantees.md, *What a hung beacon costs a service* and *What overload costs*):\n"
    )
    .unwrap();
    writeln!(out, "| case | measure | value | target | met |").unwrap();
    writeln!(out, "|---|---|---|---|---|").unwrap();
    for h in &g.hung {
        let case = format!(
            "{} stopped {} s; {} services, {} ms leases",
            h.stopped,
            h.stopped_ms / 1000,
            h.registrations,
            h.lease_ms
        );
        writeln!(
            out,
            "| {case} | leases lost | {} | 0 | {} |",
            h.leases_lost,
            met(h.leases_lost == 0)
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | longest time a service went without a confirmed renewal (median {:.0} ms) | {:.0} ms | 2000 ms | {} |",
            h.median_gap_ms,
            h.longest_gap_ms,
            met(h.longest_gap_ms <= 2000.0)
        )
        .unwrap();
        step_gap_row(
            out,
            &case,
            "the running beacons'",
            h.step_gap_ms,
            h.step_gap_p99_ms,
        );
    }
    for a in &g.first_answers {
        let case = format!(
            "{} stopped and listed first; {} fresh clients, one write each",
            a.stopped,
            a.samples_ms.len()
        );
        let mut sorted = a.samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        match (sorted.last(), &a.not_measured) {
            (Some(worst), failed) => writeln!(
                out,
                "| {case} | {}: time to the first answer, slowest (median {:.0} ms){} | {worst:.0} ms | {:.0} ms | {} |",
                a.client,
                sorted[sorted.len() / 2],
                failed.as_deref().map(|f| format!("; some failed: {f}")).unwrap_or_default(),
                super::gray::FIRST_ANSWER_TARGET_MS,
                met(*worst <= super::gray::FIRST_ANSWER_TARGET_MS && failed.is_none())
            )
            .unwrap(),
            (None, failed) => writeln!(
                out,
                "| {case} | {}: time to the first answer | not measured: {} | {:.0} ms | - |",
                a.client,
                failed.as_deref().unwrap_or("no sample"),
                super::gray::FIRST_ANSWER_TARGET_MS
            )
            .unwrap(),
        }
    }
    for w in g.watchers.iter().chain(&g.resume) {
        let case = format!(
            "{} watchers of every node ({} stalled) at the leader of {}, {} registrations with {} B of metadata{}",
            w.watchers,
            w.stalled,
            w.beacons.max(1),
            w.registrations,
            w.metadata_bytes,
            match w.leases_lost {
                Some(_) => format!(
                    ", each kept alive by reports at a {} ms lease",
                    super::gray::RESUME_LEASE_MS
                ),
                None => String::new(),
            }
        );
        let above = mib(w.rss_watched_bytes.saturating_sub(w.rss_state_bytes));
        writeln!(
            out,
            "| {case} | leader RSS above the registrations' own ({:.1} MiB with no watcher, at most {:.1} MiB with them) | {above:.1} MiB | 64 MiB | {} |",
            mib(w.rss_state_bytes),
            mib(w.rss_watched_bytes),
            met(above <= 64.0)
        )
        .unwrap();
        let herd = match w.herd {
            super::gray::Herd::Relist => format!("the {} stalled list again at once", w.stalled),
            super::gray::Herd::Resume => format!(
                "the {} stalled read on at once ({} dropped and resumed from their index, {} of them listing again)",
                w.stalled, w.resumed, w.relisted
            ),
        };
        writeln!(
            out,
            "| {herd} (all through in {:.0} ms) | write p99 during the herd ({} writes) against idle ({:.2} ms) | {:.2} ms | {:.2} ms | {} |",
            w.herd_listed_ms,
            w.herd_writes,
            w.idle_p99_ms,
            w.herd_p99_ms,
            2.0 * w.idle_p99_ms,
            met(w.herd_p99_ms <= 2.0 * w.idle_p99_ms)
        )
        .unwrap();
        writeln!(
            out,
            "| {herd} | the same through a new connection for every write, against idle ({:.2} ms) | {:.2} ms | {:.2} ms | {} |",
            w.idle_fresh_p99_ms,
            w.herd_fresh_p99_ms,
            2.0 * w.idle_fresh_p99_ms,
            met(w.herd_fresh_p99_ms <= 2.0 * w.idle_fresh_p99_ms)
        )
        .unwrap();
        if w.beacons > 1 {
            writeln!(
                out,
                "| {herd} | leader changes | {} | 0 | {} |",
                w.leader_changes,
                met(w.leader_changes == 0)
            )
            .unwrap();
        }
        if let Some(lost) = w.leases_lost {
            writeln!(
                out,
                "| {herd} | leases lost | {lost} | 0 | {} |",
                met(lost == 0)
            )
            .unwrap();
        }
        step_gap_row(out, &case, "the leader's", w.step_gap_ms, w.step_gap_p99_ms);
    }
    if let Some(o) = &g.overload {
        let case = format!(
            "{:.0} calls/s offered ({:.1}x the peak of {:.0}/s)",
            o.offered_per_sec,
            o.offered_per_sec / o.peak_per_sec.max(1.0),
            o.peak_per_sec
        );
        let share = 100.0 * o.goodput_per_sec / o.peak_per_sec.max(1.0);
        writeln!(
            out,
            "| {case} | goodput, of the peak | {:.0}/s ({share:.0}%) | 90% | {} |",
            o.goodput_per_sec,
            met(share >= 90.0)
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | p99 of the calls admitted (the peak's: {:.2} ms) | {:.2} ms | {:.2} ms | {} |",
            o.peak_p99_ms,
            o.admitted_p99_ms,
            5.0 * o.peak_p99_ms,
            met(o.admitted_p99_ms <= 5.0 * o.peak_p99_ms)
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | refused BUSY; failed otherwise{}; not sent by the generator (it holds {} calls at most) | {}; {}; {} | - | - |",
            o.first_failure
                .as_deref()
                .map(|f| format!(" (first: {f})"))
                .unwrap_or_default(),
            super::gray::GENERATOR_IN_FLIGHT,
            o.refused,
            o.failed,
            o.shed
        )
        .unwrap();
        let above = mib(o.leader_rss_bytes.saturating_sub(o.unloaded_rss_bytes));
        writeln!(
            out,
            "| {case} | leader RSS above its unloaded {:.1} MiB (at most {:.1} MiB) | {above:.1} MiB | 64 MiB | {} |",
            mib(o.unloaded_rss_bytes),
            mib(o.leader_rss_bytes),
            met(above <= 64.0)
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | leader changes | {} | 0 | {} |",
            o.leader_changes,
            met(o.leader_changes == 0)
        )
        .unwrap();
        writeln!(
            out,
            "| {case} | registrations acknowledged and lost | {} | 0 | {} |",
            o.lost,
            met(o.lost == 0)
        )
        .unwrap();
        if let Some(wait) = o.core_wait_ms {
            writeln!(
                out,
                "| {case} | the longest an admitted call waited for the leader's core (worst of the minute; `limits.queue_delay_ms` 5) | {wait:.0} ms | - | - |"
            )
            .unwrap();
        }
        step_gap_row(out, &case, "the leader's", o.step_gap_ms, o.step_gap_p99_ms);
    }
}

/// The longest step gap of `whose` cores in a gray case, against two ticks.
fn step_gap_row(
    out: &mut String,
    case: &str,
    whose: &str,
    gap_ms: Option<f64>,
    p99_ms: Option<f64>,
) {
    let target = super::gray::STEP_GAP_TARGET_MS;
    let met = |v: f64| if v <= target { "yes" } else { "no" };
    match gap_ms {
        Some(gap) => writeln!(
            out,
            "| {case} | {whose} longest gap between two steps of the core (worst of the minute ending with the case; tick 100 ms) | {gap:.0} ms | {target:.0} ms | {} |",
            met(gap)
        ),
        None => writeln!(
            out,
            "| {case} | {whose} longest gap between two steps of the core | not measured (no beacon answered) | {target:.0} ms | - |"
        ),
    }
    .unwrap();
    match p99_ms {
        Some(p99) => writeln!(
            out,
            "| {case} | {whose} p99 gap between two steps of the core over the case (`beacon_step_gap_seconds`, interpolated within its bucket) | {p99:.0} ms | {target:.0} ms | {} |",
            met(p99)
        ),
        None => writeln!(
            out,
            "| {case} | {whose} p99 gap between two steps of the core | not measured (no metrics scraped) | {target:.0} ms | - |"
        ),
    }
    .unwrap();
}

/// The rows side by side, with beacon's ratio to each system (none when no row).
fn comparison_table(rows: &[Row], out: &mut String) {
    // Parts that compare beacon with itself (gRPC, TLS) have no row here: no empty table.
    if !rows.is_empty() {
        writeln!(
            out,
            "| measure | beacon | etcd | ZooKeeper | beacon/etcd | beacon/ZooKeeper |"
        )
        .unwrap();
        writeln!(out, "|---|---|---|---|---|---|").unwrap();
    }
    for row in rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            row.what,
            cell(row.beacon, row.unit, row.decimals),
            cell(row.etcd, row.unit, row.decimals),
            cell(row.zookeeper, row.unit, row.decimals),
            ratio(row.beacon, row.etcd),
            ratio(row.beacon, row.zookeeper),
        )
        .unwrap();
    }
}

/// The client libraries part: allocations and renewals per second through each library at
/// each caller count, and each beside the Rust client's.
fn client_libs_table(r: &Results, out: &mut String) {
    if r.client_libs.is_empty() {
        return;
    }
    writeln!(
        out,
        "\nbeacon's client libraries (3 beacons, quorum mode, the leader listed first; each \
         measure {} s; allocations: `Register` through the client's call path; renewals: one \
         registration per caller, reported back to back; the gRPC clients share one client \
         among their callers, the Rust client has a connection per caller):\n",
        r.alloc_secs
    )
    .unwrap();
    writeln!(
        out,
        "| library | callers | allocations/s | p99 | vs Rust | renewals/s | p99 | vs Rust | errors |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
    let rust = r.client_libs.iter().find(|l| l.name == "Rust");
    let of = |points: &[super::client_libs::Point], c: usize| {
        points.iter().find(|p| p.callers == c).map(|p| p.per_sec)
    };
    for lib in &r.client_libs {
        if let Some(why) = &lib.skipped {
            writeln!(out, "| {} | | not measured: {why} | | | | | | |", lib.name).unwrap();
            continue;
        }
        for (a, n) in lib.alloc.iter().zip(&lib.renew) {
            writeln!(
                out,
                "| {} | {} | {:.0} | {:.2} ms | {} | {:.0} | {:.2} ms | {} | {} |",
                lib.name,
                a.callers,
                a.per_sec,
                a.p99_ms,
                ratio(Some(a.per_sec), rust.and_then(|r| of(&r.alloc, a.callers))),
                n.per_sec,
                n.p99_ms,
                ratio(Some(n.per_sec), rust.and_then(|r| of(&r.renew, n.callers))),
                a.errors + n.errors,
            )
            .unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scale::Scale;

    fn scale(stopped: Option<&str>, top_stopped: Option<&str>) -> Scale {
        Scale {
            members: 3,
            steps: Vec::new(),
            failover_small: None,
            failover_small_live: None,
            top: None,
            leader_changes: 0,
            stopped: stopped.map(str::to_owned),
            top_stopped: top_stopped.map(str::to_owned),
            restored: 0,
            other_climbs: Vec::new(),
        }
    }

    #[test]
    fn a_climb_that_reached_its_top_is_not_said_to_have_stopped_early() {
        let mut out = String::new();
        super::climb_table(&scale(None, Some("the leader was lost")), &mut out);
        assert!(
            out.contains("reached its last step, but the measures at the top did not finish: the leader was lost"),
            "{out}"
        );
        assert!(!out.contains("stopped early"), "{out}");
        let mut out = String::new();
        super::climb_table(&scale(Some("at 5 registrations"), None), &mut out);
        assert!(
            out.contains("The climb stopped early: at 5 registrations"),
            "{out}"
        );
        assert!(!out.contains("did not finish"), "{out}");
    }
}
