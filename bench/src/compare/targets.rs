//! beacon's performance targets beside what a run measured: each met or missed, by how much,
//! and, where this run tells, where the time or the bytes went.
//!
//! The targets are ratios within one run (beacon against etcd and ZooKeeper, gRPC against
//! the native protocol, linearizable against serializable reads), except memory, CPU and
//! times, which are absolute. A part that did not run adds no row. The table goes last in
//! a results file: the docs copy a file's tables by their place in it.

use std::fmt::Write;

use super::Results;
use super::systems::Via;

/// Which side of its bound a measure must stay on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

/// One target and what the run measured of it.
struct Target {
    what: String,
    bound: Bound,
    value: f64,
    /// Writes a bound or a value in the measure's unit.
    show: fn(f64) -> String,
    /// Where the time or the bytes went, from this run or the profiles beside it.
    why: String,
}

impl Target {
    fn met(&self) -> bool {
        match self.bound {
            Bound::AtLeast(b) => self.value >= b,
            Bound::AtMost(b) => self.value <= b,
        }
    }

    /// By how much the value misses its bound, as a share of what it is now: the gain (or
    /// cut) that would meet the target.
    fn short_by(&self) -> Option<String> {
        if self.met() || self.value <= 0.0 {
            return None;
        }
        Some(match self.bound {
            Bound::AtLeast(b) => format!("needs {:.0}% more", (b / self.value - 1.0) * 100.0),
            Bound::AtMost(b) => format!("needs {:.0}% less", (1.0 - b / self.value) * 100.0),
        })
    }

    fn bound_text(&self) -> String {
        match self.bound {
            Bound::AtLeast(b) => format!(">= {}", (self.show)(b)),
            Bound::AtMost(b) => format!("<= {}", (self.show)(b)),
        }
    }
}

fn times(v: f64) -> String {
    format!("{v:.2}x")
}

fn of_native(v: f64) -> String {
    format!("{v:.2}")
}

/// Allocation: at least twice etcd's and ZooKeeper's rate at each client count measured.
fn alloc(r: &Results, targets: &mut Vec<Target>) {
    for c in r.alloc_clients() {
        let Some(b) = r.alloc_of("beacon", c) else {
            continue;
        };
        for peer in ["etcd", "ZooKeeper"] {
            let Some(p) = r.alloc_of(peer, c).filter(|p| p.per_sec > 0.0) else {
                continue;
            };
            let why = if c == 1 {
                // One client waits out each commit: its rate is one over the latency.
                format!(
                    "one client waits out each commit: p50 {:.2} ms against {peer}'s {:.2} ms (a majority's fsync and the hops between processes; the leader's time by function: `bench/profiles/hot-paths.md`)",
                    b.p50_ms, p.p50_ms
                )
            } else {
                format!(
                    "{:.0}/s against {peer}'s {:.0}/s, p50 {:.2} ms; the leader's time by function: `bench/profiles/hot-paths.md`",
                    b.per_sec, p.per_sec, b.p50_ms
                )
            };
            targets.push(Target {
                what: format!(
                    "allocation, {}: beacon's IDs/s of {peer}'s",
                    super::report::n_clients(c)
                ),
                bound: Bound::AtLeast(2.0),
                value: b.per_sec / p.per_sec,
                show: times,
                why,
            });
        }
    }
}

/// Linearizable reads: p99 at most twice the serializable p99, at the leader and at a
/// follower.
fn reads(r: &Results, targets: &mut Vec<Target>) {
    let Some((_, runs)) = r.reads.iter().find(|(n, _)| n == "beacon") else {
        return;
    };
    for at in ["leader", "follower"] {
        let run = |consistency: &str| {
            runs.iter()
                .find(|x| x.at == at && x.consistency == consistency)
        };
        let (Some(lin), Some(ser)) = (run("linearizable"), run("serializable")) else {
            continue;
        };
        if ser.p99_ms <= 0.0 {
            continue;
        }
        let why = match lin
            .inside
            .as_ref()
            .and_then(|i| Some((i.read_index_mean_ms?, i.read_index_p99_ms?)))
        {
            Some((mean, p99)) => format!(
                "of a {:.2} ms mean, {mean:.2} ms waiting for the read index (p99 {p99:.2} ms: {}); p99 {:.2} ms against {:.2} ms",
                lin.mean_ms,
                if at == "leader" {
                    "a follower's word that it follows the leader, asked of the followers (or a round where none gives it)"
                } else {
                    "the request to the leader"
                },
                lin.p99_ms,
                ser.p99_ms
            ),
            None => format!("p99 {:.2} ms against {:.2} ms", lin.p99_ms, ser.p99_ms),
        };
        targets.push(Target {
            what: format!(
                "reads at the {at} under {} writers: linearizable p99 of serializable p99",
                super::reads::WRITERS
            ),
            bound: Bound::AtMost(2.0),
            value: lin.p99_ms / ser.p99_ms,
            show: times,
            why,
        });
    }
}

/// gRPC: at least 0.9 of the native protocol's rate, allocation and renewals, at each
/// client count.
fn grpc(r: &Results, targets: &mut Vec<Target>) {
    let run = |via: Via| r.grpc.iter().find(|g| g.via == via);
    let (Some(native), Some(grpc)) = (run(Via::Native), run(Via::Grpc)) else {
        return;
    };
    let cpu = |i: usize| {
        Some((
            native.leader_us_per_id.get(i)?,
            grpc.leader_us_per_id.get(i)?,
            native.clients_us_per_id.get(i)?,
            grpc.clients_us_per_id.get(i)?,
        ))
    };
    // gRPC's rate of `what` with `clients` clients as a share of native's.
    let of_native_rate = |what: &str, clients: usize, native: f64, grpc: f64, why: String| {
        (native > 0.0).then(|| Target {
            what: format!(
                "gRPC {what}, {}: of native",
                super::report::n_clients(clients)
            ),
            bound: Bound::AtLeast(0.9),
            value: grpc / native,
            show: of_native,
            why,
        })
    };
    for (i, (n, g)) in native.alloc.iter().zip(&grpc.alloc).enumerate() {
        let why = cpu(i).map_or_else(String::new, |(ln, lg, cn, cg)| {
            format!(
                "the leader's CPU per allocation {lg:.0} µs against {ln:.0} µs natively, the clients' {cg:.0} µs against {cn:.0} µs (on the same two cores); `docs/grpc.md`"
            )
        });
        targets.extend(of_native_rate(
            "allocation",
            n.clients,
            n.per_sec,
            g.per_sec,
            why,
        ));
    }
    for (n, g) in native.renewals.iter().zip(&grpc.renewals) {
        let why = format!(
            "{:.0}/s against {:.0}/s; each call's HTTP/2 framing, as allocation's above",
            g.per_sec, n.per_sec
        );
        targets.extend(of_native_rate(
            "renewals", n.clients, n.per_sec, g.per_sec, why,
        ));
    }
}

/// Renewals: a million per leader core-second with five members.
fn renewals(r: &Results, targets: &mut Vec<Target>) {
    let Some((_, x)) = r
        .renewal_rate
        .iter()
        .find(|(s, x)| s == "beacon" && x.members == 5)
    else {
        return;
    };
    targets.push(Target {
        what: "lease renewals per leader core-second, five members".into(),
        bound: Bound::AtLeast(1_000_000.0),
        value: x.per_core_sec,
        show: |v| format!("{v:.0}"),
        why: format!(
            "{:.0} renewals/s at {:.0}% of a core; the leader's time by function: `bench/profiles/hot-paths.md`",
            x.renewals_per_sec,
            x.leader_cpu * 100.0
        ),
    });
}

/// Assignment at steady state: the leader's CPU back at its earlier 0.7% of a core.
fn assign(r: &Results, targets: &mut Vec<Target>) {
    let Some(a) = &r.assign else { return };
    let Some(steady) = a.steady_cpu else { return };
    targets.push(Target {
        what: "assignment: the leader's CPU at steady state".into(),
        bound: Bound::AtMost(0.007),
        value: steady,
        show: |v| format!("{:.1}%", v * 100.0),
        why: a.rest_cpu.map_or_else(String::new, |rest| {
            format!(
                "{:.1}% of it at rest, before any worker (heartbeats and ticks); the rest by function: `bench/profiles/assign-steady.md`",
                rest * 100.0
            )
        }),
    });
}

/// Ten million registrations on three beacons: the bytes per registration on the leader,
/// failover beside failover at a thousand, a wiped follower's catch-up.
fn huge(r: &Results, targets: &mut Vec<Target>) {
    let Some(s) = &r.huge else { return };
    let Some(top) = &s.top else { return };
    let (bytes, _, _, n) = s.spread(top.live, |x| x.leader_bytes_per_registration);
    if n > 0 {
        targets.push(Target {
            what: format!("bytes per registration on the leader at {}", top.live),
            bound: Bound::AtMost(200.0),
            value: bytes,
            show: |v| format!("{v:.0} B"),
            why: "the registry's bytes by structure: `bench/profiles/registry-heap-200k.md`".into(),
        });
    }
    if let Some(small) = &s.failover_small {
        targets.push(Target {
            what: format!(
                "failover at {}, median, beyond failover at {}",
                top.live,
                s.failover_small_live
                    .unwrap_or_else(|| s.steps.first().map_or(0, |x| x.live))
            ),
            bound: Bound::AtMost(5.0),
            value: top.failover.median_ms - small.median_ms,
            show: |v| format!("{v:.1} ms"),
            why: format!(
                "{:.1} ms against {:.1} ms",
                top.failover.median_ms, small.median_ms
            ),
        });
    }
    targets.push(Target {
        what: format!("a wiped follower caught up at {}", top.live),
        bound: Bound::AtMost(30.0),
        value: top.catch_up_ms / 1e3,
        show: |v| format!("{v:.1} s"),
        why: format!(
            "{:.1} MiB on its disk after",
            top.catch_up_bytes as f64 / 1048576.0
        ),
    });
}

/// The targets this run measured, as a table (nothing when it measured none).
pub fn table(r: &Results, out: &mut String) {
    let mut targets = Vec::new();
    alloc(r, &mut targets);
    reads(r, &mut targets);
    grpc(r, &mut targets);
    renewals(r, &mut targets);
    assign(r, &mut targets);
    huge(r, &mut targets);
    write(&targets, out);
}

fn write(targets: &[Target], out: &mut String) {
    if targets.is_empty() {
        return;
    }
    let missed = targets.iter().filter(|t| !t.met()).count();
    writeln!(
        out,
        "\nTargets measured by this run ({} of {} met; where one is missed, by how much, and where the time or the bytes went):\n",
        targets.len() - missed,
        targets.len()
    )
    .unwrap();
    writeln!(
        out,
        "| target | measured | bound | met | short by | where it went |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|").unwrap();
    for t in targets {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            t.what,
            (t.show)(t.value),
            t.bound_text(),
            if t.met() { "yes" } else { "no" },
            t.short_by().unwrap_or_else(|| "-".into()),
            if t.why.is_empty() { "-" } else { &t.why }
        )
        .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(bound: Bound, value: f64) -> Target {
        Target {
            what: "x".into(),
            bound,
            value,
            show: times,
            why: String::new(),
        }
    }

    #[test]
    fn a_target_says_whether_it_was_met_and_by_how_much_it_was_missed() {
        let short = target(Bound::AtLeast(2.0), 1.6);
        assert!(!short.met());
        assert_eq!(short.short_by().as_deref(), Some("needs 25% more"));
        let over = target(Bound::AtMost(2.0), 3.2);
        assert!(!over.met());
        assert_eq!(over.short_by().as_deref(), Some("needs 38% less"));
        let met = target(Bound::AtMost(2.0), 2.0);
        assert!(met.met());
        assert_eq!(met.short_by(), None);
        assert_eq!(met.bound_text(), "<= 2.00x");
    }

    #[test]
    fn the_table_counts_what_was_met_and_a_run_without_targets_adds_nothing() {
        let mut out = String::new();
        write(&[], &mut out);
        assert!(out.is_empty());
        write(
            &[
                target(Bound::AtLeast(2.0), 2.5),
                target(Bound::AtLeast(2.0), 1.5),
            ],
            &mut out,
        );
        assert!(out.contains("(1 of 2 met;"), "{out}");
        assert!(
            out.contains("| x | 1.50x | >= 2.00x | no | needs 33% more | - |"),
            "{out}"
        );
        assert!(
            out.contains("| x | 2.50x | >= 2.00x | yes | - | - |"),
            "{out}"
        );
    }

    #[test]
    fn allocation_is_held_to_twice_each_peer_at_each_client_count() {
        let run = |per_sec: f64, clients: usize| super::super::alloc::Throughput {
            clients,
            per_sec,
            p50_ms: 1.0,
            ..Default::default()
        };
        let r = Results {
            alloc: vec![
                ("beacon".into(), run(2000.0, 1)),
                ("etcd".into(), run(1100.0, 1)),
                ("ZooKeeper".into(), run(800.0, 1)),
                ("beacon".into(), run(20000.0, 64)),
                ("etcd".into(), run(9000.0, 64)),
            ],
            ..Default::default()
        };
        let mut targets = Vec::new();
        alloc(&r, &mut targets);
        let got: Vec<(String, bool)> = targets.iter().map(|t| (t.what.clone(), t.met())).collect();
        assert_eq!(
            got,
            [
                (
                    "allocation, 1 client: beacon's IDs/s of etcd's".to_owned(),
                    false
                ),
                (
                    "allocation, 1 client: beacon's IDs/s of ZooKeeper's".to_owned(),
                    true
                ),
                (
                    "allocation, 64 clients: beacon's IDs/s of etcd's".to_owned(),
                    true
                ),
            ]
        );
    }
}
