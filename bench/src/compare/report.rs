//! The results as Markdown: a summary with ratios beacon/peer, then the details.

use std::fmt::Write;

use super::Results;

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
    let failover = |name: &str| r.failover.iter().find(|(n, _)| n == name).map(|(_, f)| f);
    for (name, f) in r.failover.iter().filter(|(n, _)| n.starts_with("beacon")) {
        for (what, pick) in [
            (
                "median",
                (|f: &super::failover::Failover| f.median_ms) as fn(&_) -> f64,
            ),
            ("max", |f| f.max_ms),
        ] {
            rows.push(Row {
                what: format!("failover {what}, {name} (lower is better)"),
                beacon: Some(pick(f)),
                etcd: failover("etcd").map(pick),
                zookeeper: failover("ZooKeeper").map(pick),
                unit: " ms",
                decimals: 1,
            });
        }
    }
    let alloc = |name: &str, c: usize| {
        r.alloc
            .iter()
            .find(|(n, t)| n == name && t.clients == c)
            .map(|(_, t)| t)
    };
    let mut clients: Vec<usize> = r.alloc.iter().map(|(_, t)| t.clients).collect();
    clients.sort_unstable();
    clients.dedup();
    for c in clients {
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
                what: format!(
                    "allocation {what}, {c} client{}",
                    if c == 1 { "" } else { "s" }
                ),
                beacon: alloc("beacon", c).map(pick),
                etcd: alloc("etcd", c).map(pick),
                zookeeper: alloc("ZooKeeper", c).map(pick),
                unit,
                decimals,
            });
        }
    }
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

    let mut out = String::new();
    writeln!(
        out,
        "| measure | beacon | etcd | ZooKeeper | beacon/etcd | beacon/ZooKeeper |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|").unwrap();
    for row in &rows {
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

    if !r.failover.is_empty() {
        writeln!(
            out,
            "\nFailover rounds (ms from the SIGKILL to the first write that succeeded after it):\n"
        )
        .unwrap();
        writeln!(
            out,
            "| system | rounds | IDs acknowledged | duplicate IDs |"
        )
        .unwrap();
        writeln!(out, "|---|---|---|---|").unwrap();
        for (name, f) in &r.failover {
            let rounds: Vec<String> = f.rounds.iter().map(|t| format!("{t:.1}")).collect();
            writeln!(
                out,
                "| {name} | {} | {} | {} |",
                rounds.join(", "),
                f.ids,
                f.duplicates
            )
            .unwrap();
        }
    }
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
    out
}
