//! Prometheus metrics, served at `GET /metrics` on the admin port.
//!
//! Names follow etcd's where they mean the same (`beacon_server_has_leader` is
//! `etcd_server_has_leader`, `beacon_disk_wal_fsync_duration_seconds` is
//! `etcd_disk_wal_fsync_duration_seconds`), so dashboards and alerts written for etcd carry
//! over; and Prometheus's conventions: one prefix, base units (seconds, bytes), `_total` on
//! counters, labels of bounded cardinality only (command, result code, peer beacon, node type
//! as configured).
//!
//! Counters and histograms are updated where things happen (the driver, the connection
//! handlers); gauges that describe state (leader, term, log size, and each machine's own:
//! registrations, IDs, queues, ...) are set by the driver when a scrape asks, so they are
//! exact at that moment and cost nothing between scrapes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CommandLabel {
    pub(crate) command: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    pub(crate) command: String,
    pub(crate) code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PeerLabel {
    pub(crate) peer: String,
}

/// How a linearizable read got its read index: `round` (this beacon leads and a majority
/// confirmed a round started after the read arrived), `vouch` (this beacon leads three
/// voters and a follower vouched, asked after the read arrived, that it follows it in its
/// term) or `leader` (this beacon follows and asked its leader).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ViaLabel {
    pub(crate) via: &'static str,
}

/// The three ways to a read index ([`ViaLabel`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReadIndexVia {
    Round,
    Vouch,
    Leader,
}

impl ReadIndexVia {
    const ALL: [ReadIndexVia; 3] = [
        ReadIndexVia::Round,
        ReadIndexVia::Vouch,
        ReadIndexVia::Leader,
    ];

    fn label(self) -> ViaLabel {
        let via = match self {
            ReadIndexVia::Round => "round",
            ReadIndexVia::Vouch => "vouch",
            ReadIndexVia::Leader => "leader",
        };
        ViaLabel { via }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DnsLabel {
    pub(crate) result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    pub(crate) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: String,
    mode: String,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The machines' own gauges ([`crate::machines::Measured`]), as the driver last read them
/// for a scrape: names and labels are the machines', so they are encoded as they come.
#[derive(Debug, Default)]
pub(crate) struct MachineGauges {
    samples: std::sync::Mutex<Vec<crate::machines::GaugeSample>>,
}

impl MachineGauges {
    pub(crate) fn set(&self, samples: Vec<crate::machines::GaugeSample>) {
        *self.samples.lock().unwrap_or_else(|e| e.into_inner()) = samples;
    }
}

impl prometheus_client::collector::Collector for MachineGauges {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::ConstGauge;
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        // One descriptor per name, its samples after it (they come grouped by machine, so
        // a name's samples are gathered first).
        let mut names: Vec<&'static str> = Vec::new();
        for s in samples.iter() {
            if !names.contains(&s.name) {
                names.push(s.name);
            }
        }
        for name in names {
            let of_name: Vec<_> = samples.iter().filter(|s| s.name == name).collect();
            let help = of_name.first().map_or("", |s| s.help);
            let gauge = ConstGauge::new(0.0f64);
            let mut metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            if let [one] = of_name.as_slice()
                && one.labels.is_empty()
            {
                ConstGauge::new(one.value).encode(metric)?;
                continue;
            }
            for s in of_name {
                let labels: Vec<(&str, &str)> =
                    s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                ConstGauge::new(s.value).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The watches' gauges and counters, read from [`crate::machines::watchers::Watchers`] at
/// each scrape.
#[derive(Debug)]
struct WatchCollector(
    std::sync::Arc<crate::machines::watchers::Watchers>,
    std::sync::Arc<super::admission::Admission>,
);

impl prometheus_client::collector::Collector for WatchCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let g = self.0.gauges();
        let gauges: [(&str, &str, i64); 4] = [
            (
                "requests_pending",
                "Requests under way at this beacon now (admission control refuses BUSY over limits.max_pending)",
                self.1.pending() as i64,
            ),
            ("watchers", "Watches open on this beacon", g.open),
            (
                "watch_backlog_bytes",
                "Bytes of notices queued for watchers and not yet taken by their connections",
                g.backlog_bytes,
            ),
            (
                "watch_backlog_deepest_bytes",
                "The most one watcher held queued since the last scrape (the limit is watch.queue_bytes)",
                g.deepest_bytes as i64,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        let counters: [(&str, &str, u64); 4] = [
            (
                "requests_busy",
                "Requests refused BUSY by admission control (key `limits`)",
                self.1.refused(),
            ),
            (
                "watchers_dropped",
                "Watchers dropped for falling behind their limits (they resume from their log index)",
                g.dropped,
            ),
            (
                "watch_notices_encoded",
                "Notice bodies encoded for watchers",
                g.encoded,
            ),
            (
                "watch_notices_shared",
                "Notice bodies handed to a watcher already encoded for another of the same kind",
                g.reused,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        Ok(())
    }
}

/// A request's command and, when refused, its error code.
type RequestKey = (u32, Option<u32>);

/// A request's duration histogram and its result's counter.
type RequestMetrics = (Histogram, Counter);

/// Every metric of one beacon. Cheap to clone handles are kept by whoever updates them.
pub(crate) struct Metrics {
    registry: Registry,
    pub(crate) has_leader: Gauge,
    pub(crate) is_leader: Gauge,
    /// 1 on a learner (key `learners`), as `etcd_server_is_learner`.
    pub(crate) is_learner: Gauge,
    pub(crate) leader_changes: Counter,
    /// The same changes with when and who, for the status page.
    pub(crate) leaders: super::leaders::LeaderHistory,
    pub(crate) term: Gauge,
    pub(crate) committed: Counter,
    /// Confirmation rounds this beacon started as leader, and answers that waited for the
    /// round a heartbeat carried (routine reports): as the core counts them.
    pub(crate) rounds: Counter,
    pub(crate) with_heartbeat: Counter,
    pub(crate) applied: Counter,
    pub(crate) failed: Counter,
    pub(crate) pending: Gauge,
    pub(crate) can_write: Gauge,
    pub(crate) lag: Gauge,
    pub(crate) log_entries: Gauge,
    pub(crate) snapshot_bytes: Gauge,
    pub(crate) fsync: Histogram,
    /// Linearizable reads' waits for their read index, by how they got it.
    pub(crate) read_index: Family<ViaLabel, Histogram>,
    /// The core's beat: gaps between steps, and requests' waits for the core.
    pub(crate) beat: std::sync::Arc<super::beat::Beat>,
    pub(crate) request_duration: Family<CommandLabel, Histogram>,
    pub(crate) requests: Family<ResultLabel, Counter>,
    /// The two metrics of each (command, result code) met so far, by their numbers: a
    /// request's record is then two atomic updates, where looking them up by their labels
    /// formatted the names, copied them four times and hashed them under two locks (a tenth
    /// of the connections' time at 400,000 renewals a second).
    by_request: parking_lot::RwLock<std::collections::HashMap<RequestKey, RequestMetrics>>,
    pub(crate) refusals: Family<ReasonLabel, Counter>,
    pub(crate) connections_refused: Family<ReasonLabel, Counter>,
    /// DNS queries by how they were answered.
    pub(crate) dns_queries: Family<DnsLabel, Counter>,
    pub(crate) replication_rtt: Family<PeerLabel, Histogram>,
    pub(crate) peer_online: Family<PeerLabel, Gauge>,
    /// Leader only: entries each member lacks of the leader's log (a learner catching up).
    pub(crate) peer_behind: Family<PeerLabel, Gauge>,
    /// The voters and learners of the membership in effect here.
    pub(crate) voters: Gauge,
    pub(crate) learners: Gauge,
    pub(crate) snapshots_sent: Counter,
    pub(crate) snapshots_received: Counter,
    /// Committed changes kept for watches that resume, and the oldest index they resume at.
    pub(crate) watch_history: Gauge,
    pub(crate) watch_history_bytes: Gauge,
    pub(crate) watch_oldest: Gauge,
    /// Notices pushed to watchers, by kind.
    pub(crate) notices: Family<CommandLabel, Counter>,
    pub(crate) uptime: FloatGauge,
    pub(crate) machines: std::sync::Arc<MachineGauges>,
    /// The watches: read at each scrape.
    pub(crate) watchers: std::sync::Arc<crate::machines::watchers::Watchers>,
}

/// 100 µs to about 13 s, doubling: fsyncs and requests both live in this range.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0001, 2.0, 18)
}

fn latency_histogram() -> Histogram {
    Histogram::new(latency_buckets())
}

impl Metrics {
    /// A linearizable read waited `took` for its read index, got `via` a round or the leader.
    pub(crate) fn read_index_took(&self, via: ReadIndexVia, took: std::time::Duration) {
        self.read_index
            .get_or_create(&via.label())
            .observe(took.as_secs_f64());
    }

    pub(crate) fn new(
        version: &str,
        mode: &str,
        watchers: std::sync::Arc<crate::machines::watchers::Watchers>,
        admission: std::sync::Arc<super::admission::Admission>,
    ) -> Metrics {
        let mut root = Registry::with_prefix("beacon");
        let m = Metrics {
            registry: Registry::default(),
            has_leader: Gauge::default(),
            is_leader: Gauge::default(),
            is_learner: Gauge::default(),
            leader_changes: Counter::default(),
            leaders: Default::default(),
            term: Gauge::default(),
            committed: Counter::default(),
            rounds: Counter::default(),
            with_heartbeat: Counter::default(),
            applied: Counter::default(),
            failed: Counter::default(),
            pending: Gauge::default(),
            can_write: Gauge::default(),
            lag: Gauge::default(),
            log_entries: Gauge::default(),
            snapshot_bytes: Gauge::default(),
            fsync: latency_histogram(),
            read_index: Family::new_with_constructor(latency_histogram),
            beat: std::sync::Arc::new(super::beat::Beat::new(admission.pace())),
            request_duration: Family::new_with_constructor(latency_histogram),
            requests: Family::default(),
            by_request: Default::default(),
            refusals: Family::default(),
            connections_refused: Family::default(),
            dns_queries: Family::default(),
            replication_rtt: Family::new_with_constructor(latency_histogram),
            peer_online: Family::default(),
            peer_behind: Family::default(),
            voters: Gauge::default(),
            learners: Gauge::default(),
            snapshots_sent: Counter::default(),
            snapshots_received: Counter::default(),
            watch_history: Gauge::default(),
            watch_history_bytes: Gauge::default(),
            watch_oldest: Gauge::default(),
            notices: Family::default(),
            uptime: FloatGauge::default(),
            machines: Default::default(),
            watchers: watchers.clone(),
        };
        // Both reasons from the start, so that a rate over them is 0 rather than absent.
        for reason in ["unauthenticated", "permission_denied"] {
            m.refusals
                .get_or_create(&ReasonLabel {
                    reason: reason.into(),
                })
                .inc_by(0);
        }
        // Every way to a read index from the start, for the same reason (a dashboard's
        // quantile over them is empty, not an error, before the first read).
        for via in ReadIndexVia::ALL {
            drop(m.read_index.get_or_create(&via.label()));
        }
        let build = Family::<BuildLabel, Gauge>::default();
        build
            .get_or_create(&BuildLabel {
                version: version.to_owned(),
                mode: mode.to_owned(),
            })
            .set(1);
        root.register(
            "build_info",
            "Always 1; the labels say which version runs, in which mode",
            build,
        );
        root.register_with_unit(
            "step_gap",
            "Time between two steps of the core (a tick when idle; more is the core kept waiting)",
            Unit::Seconds,
            m.beat.step_gap.clone(),
        );
        root.register_with_unit(
            "request_queue",
            "Time a request waited in the queue before the core took it",
            Unit::Seconds,
            m.beat.queue_wait.clone(),
        );
        root.register_with_unit(
            "uptime",
            "Time since this beacon started",
            Unit::Seconds,
            m.uptime.clone(),
        );
        let server = root.sub_registry_with_prefix("server");
        server.register(
            "has_leader",
            "1 while this beacon knows a leader (itself or another)",
            m.has_leader.clone(),
        );
        server.register(
            "is_leader",
            "1 while this beacon leads",
            m.is_leader.clone(),
        );
        server.register(
            "is_learner",
            "1 on a learner: it keeps a replica but never leads nor counts for a majority",
            m.is_learner.clone(),
        );
        server.register(
            "voters",
            "Voters of the membership in effect here (they elect the leader and make its majorities)",
            m.voters.clone(),
        );
        server.register(
            "learners",
            "Learners of the membership in effect here",
            m.learners.clone(),
        );
        server.register(
            "peer_behind_entries",
            "On the leader: log entries each member lacks (a new learner catching up before its promotion)",
            m.peer_behind.clone(),
        );
        server.register(
            "leader_changes_seen",
            "Times the leader this beacon follows (or is) changed, including to none",
            m.leader_changes.clone(),
        );
        server.register("term", "This beacon's term", m.term.clone());
        server.register(
            "can_write",
            "1 while a write sent to this beacon would succeed (what /health says)",
            m.can_write.clone(),
        );
        server.register(
            "proposals_committed",
            "Log entries this beacon has seen committed",
            m.committed.clone(),
        );
        server.register(
            "confirmation_rounds",
            "Confirmation rounds this beacon started as leader (a majority's word that it still leads)",
            m.rounds.clone(),
        );
        server.register(
            "confirmed_with_heartbeat",
            "Answers this beacon confirmed as leader with the round its next heartbeat carried (routine reports), not a round of their own",
            m.with_heartbeat.clone(),
        );
        server.register(
            "proposals_applied",
            "Log entries applied to this beacon's state",
            m.applied.clone(),
        );
        server.register(
            "proposals_failed",
            "Requests the core answered with a consensus error (no leader, no quorum, leadership lost before commit)",
            m.failed.clone(),
        );
        server.register(
            "proposals_pending",
            "Requests in the core waiting for their answer",
            m.pending.clone(),
        );
        server.register(
            "lag_entries",
            "Committed entries this follower lacks that its leader has announced",
            m.lag.clone(),
        );
        server.register(
            "log_entries",
            "Entries in the stored log since the last snapshot",
            m.log_entries.clone(),
        );
        server.register_with_unit(
            "snapshot_size",
            "Size of the stored snapshot",
            Unit::Bytes,
            m.snapshot_bytes.clone(),
        );
        server.register(
            "snapshots_sent",
            "Snapshots this leader sent to followers",
            m.snapshots_sent.clone(),
        );
        server.register(
            "snapshots_received",
            "Snapshots this beacon received from a leader",
            m.snapshots_received.clone(),
        );
        server.register(
            "watch_history_changes",
            "Committed changes kept for watches that resume from a log index (key watch.history)",
            m.watch_history.clone(),
        );
        server.register_with_unit(
            "watch_history",
            "About how many bytes the changes kept for watches hold (key watch.history_bytes)",
            Unit::Bytes,
            m.watch_history_bytes.clone(),
        );
        server.register(
            "watch_oldest_index",
            "The oldest log index a watch can resume from here; older ones are answered COMPACTED",
            m.watch_oldest.clone(),
        );
        let disk = root.sub_registry_with_prefix("disk");
        disk.register_with_unit(
            "wal_fsync_duration",
            "Time to append a batch of entries to the log and fsync it",
            Unit::Seconds,
            m.fsync.clone(),
        );
        root.register_with_unit(
            "read_index_duration",
            "Time a linearizable read waited for its read index: via=\"round\" at a leader (its queue to the core and, in quorum mode, a confirmation round by a majority), via=\"vouch\" at a leader of three voters (a follower's word that it follows it, asked of its followers), via=\"leader\" at a follower (asking its leader, sharing a request with the reads that arrived meanwhile)",
            Unit::Seconds,
            m.read_index.clone(),
        );
        let requests = root.sub_registry_with_prefix("request");
        requests.register_with_unit(
            "duration",
            "Time from a request's arrival to its answer, by command",
            Unit::Seconds,
            m.request_duration.clone(),
        );
        root.register(
            "requests",
            "Requests answered, by command and result code (OK or the error code)",
            m.requests.clone(),
        );
        root.register(
            "watch_notices",
            "Notices pushed to watchers (changes and progress), by kind (NodeNotice, ConfigNotice, ...)",
            m.notices.clone(),
        );
        root.register(
            "auth_refusals",
            "Connections and requests refused for their credentials (unauthenticated) or permissions (permission_denied)",
            m.refusals.clone(),
        );
        root.register(
            "connections_refused",
            "Connections refused before or at their handshake, by reason (bad_magic, unsupported_version, frame_too_large, bad_frame, wrong_cluster, unknown_beacon, config_mismatch, unauthenticated, tls_handshake, tls_certificate_expired, tls_unknown_issuer, tls_bad_certificate, tls_timeout, handshake_timeout, handshake_required, and admin_* for the admin port)",
            m.connections_refused.clone(),
        );
        root.register(
            "dns_queries",
            "DNS queries answered, by result (answered, no_data, nxdomain, truncated, refused)",
            m.dns_queries.clone(),
        );
        let network = root.sub_registry_with_prefix("network");
        network.register_with_unit(
            "replication_round_trip",
            "Leader: time from sending entries to a follower until it acknowledges storing them (both ways over the network plus the follower's fsync)",
            Unit::Seconds,
            m.replication_rtt.clone(),
        );
        network.register(
            "peer_online",
            "1 while this beacon hears the peer's heartbeats",
            m.peer_online.clone(),
        );
        root.register_collector(Box::new(m.machines.clone()));
        root.register_collector(Box::new(WatchCollector(watchers, admission)));
        Metrics {
            registry: root,
            ..m
        }
    }

    /// The metrics in the text exposition format (OpenMetrics, which Prometheus reads).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Records `n` answered requests, each of which took `took`: command `cmd`, refused
    /// with error code `code` or not (`None`), labelled by `names` (the command's name and
    /// the result's) when this pair is met for the first time. A batch of renewals answered
    /// together is recorded with one lookup.
    pub(crate) fn requests(
        &self,
        cmd: u32,
        code: Option<u32>,
        took: Duration,
        n: u64,
        names: impl FnOnce() -> (String, String),
    ) {
        let known = self.by_request.read().get(&(cmd, code)).cloned();
        let (duration, count) = known.unwrap_or_else(|| {
            let (command, result) = names();
            let handles = (
                self.request_duration
                    .get_or_create(&CommandLabel {
                        command: command.clone(),
                    })
                    .clone(),
                self.requests
                    .get_or_create(&ResultLabel {
                        command,
                        code: result,
                    })
                    .clone(),
            );
            self.by_request.write().insert((cmd, code), handles.clone());
            handles
        });
        let secs = took.as_secs_f64();
        for _ in 0..n {
            duration.observe(secs);
        }
        count.inc_by(n);
    }

    /// Records one notice pushed to a watcher (frame `cmd`).
    pub(crate) fn pushed(&self, cmd: u32) {
        let command = crate::machines::Dispatch::name(cmd).unwrap_or_else(|| cmd.to_string());
        self.notices.get_or_create(&CommandLabel { command }).inc();
    }

    /// Records a DNS query answered with `result`.
    pub(crate) fn dns_query(&self, result: &str) {
        self.dns_queries
            .get_or_create(&DnsLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Records a connection refused for `reason`.
    pub(crate) fn connection_refused(&self, reason: &str) {
        self.connections_refused
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Records a refusal of credentials or permissions.
    pub(crate) fn refused(&self, reason: &str) {
        self.refusals
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Metrics {
        Metrics::new(
            "1.2.3",
            "quorum",
            Default::default(),
            super::super::admission::Admission::new(Default::default()),
        )
    }

    #[test]
    fn names_follow_the_conventions() {
        let m = metrics();
        m.leader_changes.inc();
        m.requests(1, None, Duration::from_millis(2), 1, || {
            ("Register".into(), "OK".into())
        });
        m.refused("unauthenticated");
        m.machines.set(vec![crate::machines::GaugeSample {
            name: "registrations",
            help: "Live registrations by node type",
            labels: vec![("node_type", "LOGIC".into())],
            value: 3.0,
        }]);
        let text = m.encode();
        for line in [
            "beacon_build_info{version=\"1.2.3\",mode=\"quorum\"} 1",
            "beacon_server_leader_changes_seen_total 1",
            "beacon_requests_total{command=\"Register\",code=\"OK\"} 1",
            "beacon_auth_refusals_total{reason=\"unauthenticated\"} 1",
            "beacon_registrations{node_type=\"LOGIC\"} 3.0",
            "# TYPE beacon_disk_wal_fsync_duration_seconds histogram",
            "# TYPE beacon_step_gap_seconds histogram",
            "# TYPE beacon_request_queue_seconds histogram",
            "beacon_request_duration_seconds_count{command=\"Register\"} 1",
            "beacon_watchers 0",
            "beacon_watchers_dropped_total 0",
            "# TYPE beacon_watch_backlog_bytes gauge",
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
    }

    #[test]
    fn a_requests_metrics_are_found_by_its_numbers_once_named() {
        let m = metrics();
        let named = std::cell::Cell::new(0);
        let name = |result: &str| {
            named.set(named.get() + 1);
            ("Report".to_owned(), result.to_owned())
        };
        for _ in 0..3 {
            m.requests(101, None, Duration::from_millis(1), 1, || name("OK"));
        }
        // A batch answered alike counts each of its requests.
        m.requests(101, None, Duration::from_millis(1), 2, || name("OK"));
        m.requests(101, Some(9), Duration::from_millis(1), 1, || {
            name("NotLeader")
        });
        assert_eq!(named.get(), 2, "each pair is named once");
        let text = m.encode();
        for line in [
            "beacon_requests_total{command=\"Report\",code=\"OK\"} 5",
            "beacon_requests_total{command=\"Report\",code=\"NotLeader\"} 1",
            "beacon_request_duration_seconds_count{command=\"Report\"} 6",
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
    }
}
