//! Refusals summed up in the log, so that no sender can flood it: a client's bad requests
//! ([`Requests`]) and whole connections refused ([`Connections`]: garbage, an old protocol, an
//! oversized frame, a handshake for another cluster, a beacon not in the list, credentials
//! that do not verify, a TLS handshake that fails). Each is counted in the metrics; the log
//! gets the first of each kind in full and then, at most once per [`WARN_EVERY`], one line
//! with the counts by kind and address since the last.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often refusals are summed up in a warning.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);

/// Distinct addresses counted apart in one summary; the rest are counted together.
const ADDRESSES: usize = 32;

/// Counts refused requests between warnings.
#[derive(Default)]
pub(crate) struct Requests {
    state: Mutex<(Option<Instant>, u64)>,
}

impl Requests {
    /// Notes one refusal; returns how many to report when a warning is due now.
    pub(crate) fn note(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, count) = &mut *state;
        *count += 1;
        let due = last.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if !due {
            return None;
        }
        *last = Some(Instant::now());
        Some(std::mem::take(count))
    }
}

/// What to log of a connection refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Said {
    /// The first of its kind: log it in full.
    InFull,
    /// Counted; nothing to log now.
    Counted,
    /// Counted, and the summary of everything since the last is due: log this line.
    Summary(String),
}

#[derive(Default)]
struct Tally {
    /// Kinds already logged in full.
    told: BTreeSet<&'static str>,
    /// Since the last summary: by kind, by address.
    counts: BTreeMap<&'static str, BTreeMap<Option<IpAddr>, u64>>,
    last: Option<Instant>,
}

/// Counts refused connections by kind and address between warnings.
#[derive(Default)]
pub(crate) struct Connections {
    tally: Mutex<Tally>,
}

impl Connections {
    /// Notes a connection from `from` refused for `kind` (a short label: `bad_frame`,
    /// `wrong_cluster`, ...).
    pub(crate) fn note(&self, kind: &'static str, from: IpAddr) -> Said {
        self.note_at(kind, from, Instant::now())
    }

    fn note_at(&self, kind: &'static str, from: IpAddr, now: Instant) -> Said {
        let mut t = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        if t.told.insert(kind) {
            t.last.get_or_insert(now);
            return Said::InFull;
        }
        let by_addr = t.counts.entry(kind).or_default();
        let key = if by_addr.len() < ADDRESSES || by_addr.contains_key(&Some(from)) {
            Some(from)
        } else {
            None
        };
        *by_addr.entry(key).or_default() += 1;
        let due = t.last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY);
        if !due {
            return Said::Counted;
        }
        t.last = Some(now);
        let counts = std::mem::take(&mut t.counts);
        Said::Summary(summary(&counts))
    }
}

/// The label a failed TLS handshake is counted under: the certificate problems apart, so
/// that each is told in full the first time it happens.
pub(crate) fn tls_kind(why: &str) -> &'static str {
    if why.contains("Expired") || why.contains("expired") {
        "tls_certificate_expired"
    } else if why.contains("UnknownIssuer") {
        "tls_unknown_issuer"
    } else if why.contains("certificate") {
        "tls_bad_certificate"
    } else {
        "tls_handshake"
    }
}

/// "12 connections refused since the last such warning: bad_frame 10 (127.0.0.1 x10), ..."
fn summary(counts: &BTreeMap<&'static str, BTreeMap<Option<IpAddr>, u64>>) -> String {
    let total: u64 = counts.values().flat_map(|m| m.values()).sum();
    let kinds: Vec<String> = counts
        .iter()
        .map(|(kind, by_addr)| {
            let n: u64 = by_addr.values().sum();
            let addrs: Vec<String> = by_addr
                .iter()
                .map(|(a, n)| match a {
                    Some(a) => format!("{a} x{n}"),
                    None => format!("others x{n}"),
                })
                .collect();
            format!("{kind} {n} ({})", addrs.join(", "))
        })
        .collect();
    format!(
        "{total} connections refused since the last such warning (at most one per {} s): {}",
        WARN_EVERY.as_secs(),
        kinds.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_requests_are_summed_between_warnings() {
        let r = Requests::default();
        assert_eq!(r.note(), Some(1), "the first warns at once");
        for _ in 0..99 {
            assert_eq!(r.note(), None, "then none until the period is over");
        }
        // Pretend the period is over: the next warning counts everything since the last.
        r.state.lock().unwrap().0 = Some(Instant::now() - WARN_EVERY);
        assert_eq!(r.note(), Some(100));
    }

    #[test]
    fn refused_connections_are_told_once_then_summed_by_kind_and_address() {
        let c = Connections::default();
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(c.note_at("bad_frame", a, t0), Said::InFull);
        assert_eq!(
            c.note_at("wrong_cluster", b, t0),
            Said::InFull,
            "each kind once in full"
        );
        for _ in 0..500 {
            assert_eq!(c.note_at("bad_frame", a, t0), Said::Counted);
        }
        assert_eq!(c.note_at("bad_frame", b, t0), Said::Counted);
        let Said::Summary(line) = c.note_at("wrong_cluster", b, t0 + WARN_EVERY) else {
            panic!("a summary is due");
        };
        assert!(line.starts_with("502 connections refused"), "{line}");
        assert!(
            line.contains("bad_frame 501 (10.0.0.1 x500, 10.0.0.2 x1)"),
            "{line}"
        );
        assert!(line.contains("wrong_cluster 1 (10.0.0.2 x1)"), "{line}");
        // Many addresses: the first ones apart, the rest together.
        for i in 0..100u8 {
            c.note_at("bad_frame", IpAddr::from([10, 1, 0, i]), t0 + WARN_EVERY);
        }
        let Said::Summary(line) = c.note_at("bad_frame", a, t0 + 2 * WARN_EVERY) else {
            panic!("a summary is due");
        };
        assert!(line.contains("others x"), "{line}");
    }
}
