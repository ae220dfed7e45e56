//! A beacon's `/metrics`, read off its admin API: a histogram's buckets, sum and count, and
//! what it counted between two scrapes.

use std::net::SocketAddr;
use std::time::Duration;

/// The text of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Metrics(String);

impl Metrics {
    /// Reads `/metrics` off the admin API at `admin` (`None`: no admin API, or no answer).
    pub async fn scrape(admin: Option<SocketAddr>) -> Option<Metrics> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(admin?),
        )
        .await
        .ok()?
        .ok()?;
        conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: beacon\r\n\r\n")
            .await
            .ok()?;
        let mut text = String::new();
        tokio::time::timeout(Duration::from_secs(5), conn.read_to_string(&mut text))
            .await
            .ok()?
            .ok()?;
        Some(Metrics(text))
    }

    #[cfg(test)]
    pub fn parse(text: &str) -> Metrics {
        Metrics(text.to_owned())
    }

    /// Histogram `name` (without `_bucket`, `_sum`, `_count`) of the series whose labels
    /// include every one of `labels` (`["via=\"round\""]`; none for an unlabelled one).
    /// Empty when the beacon has not counted it yet.
    pub fn histogram(&self, name: &str, labels: &[&str]) -> Histogram {
        let mut h = Histogram::default();
        for line in self.0.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let (metric, set) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let Some(part) = metric.strip_prefix(name) else {
                continue;
            };
            let pairs: Vec<&str> = set.split(',').filter(|p| !p.is_empty()).collect();
            if !labels.iter().all(|l| pairs.contains(l)) {
                continue;
            }
            match part {
                "_bucket" => {
                    let le = pairs.iter().find_map(|p| p.strip_prefix("le="));
                    let le = match le.map(|l| l.trim_matches('"')) {
                        Some("+Inf") => f64::INFINITY,
                        Some(l) => match l.parse() {
                            Ok(l) => l,
                            Err(_) => continue,
                        },
                        None => continue,
                    };
                    if let Ok(n) = value.trim().parse() {
                        h.buckets.push((le, n));
                    }
                }
                "_sum" => h.sum = value.trim().parse().unwrap_or(0.0),
                "_count" => h.count = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        h
    }
}

/// A histogram as Prometheus exposes it: each bucket's bound in seconds with the
/// observations at most that, cumulative; their sum in seconds; their count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    /// What was counted after `before` (a scrape of the same series, earlier).
    pub fn since(&self, before: &Histogram) -> Histogram {
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|&(le, n)| {
                    let was = before
                        .buckets
                        .iter()
                        .find(|(b, _)| *b == le)
                        .map_or(0, |(_, n)| *n);
                    (le, n.saturating_sub(was))
                })
                .collect(),
            sum: (self.sum - before.sum).max(0.0),
            count: self.count.saturating_sub(before.count),
        }
    }

    /// What `self` and `other` (of the same series, over other spans) counted together.
    pub fn plus(&self, other: &Histogram) -> Histogram {
        let mut buckets = self.buckets.clone();
        for &(le, n) in &other.buckets {
            match buckets.iter_mut().find(|(b, _)| *b == le) {
                Some((_, m)) => *m += n,
                None => buckets.push((le, n)),
            }
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram {
            buckets,
            sum: self.sum + other.sum,
            count: self.count + other.count,
        }
    }

    /// The mean, in ms (`None`: nothing counted).
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64 * 1000.0)
    }

    /// The `q` quantile, in ms, interpolated within its bucket as Prometheus's
    /// `histogram_quantile` does (`None`: nothing counted).
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut lower = (0.0, 0u64);
        for &(le, n) in &self.buckets {
            if n as f64 >= rank {
                if le.is_infinite() {
                    return Some(lower.0 * 1000.0);
                }
                let within = (n - lower.1) as f64;
                let at = if within > 0.0 {
                    (rank - lower.1 as f64) / within
                } else {
                    1.0
                };
                return Some((lower.0 + (le - lower.0) * at) * 1000.0);
            }
            lower = (le, n);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    #[test]
    fn a_quantile_interpolates_within_its_bucket_since_the_first_scrape() {
        let before = Metrics::parse(
            "beacon_step_gap_seconds_bucket{le=\"0.05\"} 10\nbeacon_step_gap_seconds_bucket{le=\"0.1\"} 10\nbeacon_step_gap_seconds_bucket{le=\"0.2\"} 10\nbeacon_step_gap_seconds_bucket{le=\"+Inf\"} 10\n",
        )
        .histogram("beacon_step_gap_seconds", &[]);
        let after = Metrics::parse(
            "# TYPE beacon_step_gap_seconds histogram\nbeacon_step_gap_seconds_bucket{le=\"0.05\"} 10\nbeacon_step_gap_seconds_bucket{le=\"0.1\"} 60\nbeacon_step_gap_seconds_bucket{le=\"0.2\"} 110\nbeacon_step_gap_seconds_bucket{le=\"+Inf\"} 110\n",
        )
        .histogram("beacon_step_gap_seconds", &[]);
        // 100 gaps since: 50 in (50, 100] ms and 50 in (100, 200] ms; the 99th is 49/50 of
        // the way through the second bucket.
        let p99 = after.since(&before).quantile_ms(0.99).unwrap();
        assert!((p99 - 198.0).abs() < 1e-9, "{p99}");
        let p50 = after.since(&before).quantile_ms(0.5).unwrap();
        assert!((p50 - 100.0).abs() < 1e-9, "{p50}");
        assert_eq!(after.since(&after).quantile_ms(0.99), None, "none since");
    }

    #[test]
    fn a_labelled_series_is_told_from_its_siblings_and_its_mean_is_exact() {
        let text = "\
# TYPE beacon_read_index_duration_seconds histogram
beacon_read_index_duration_seconds_sum{via=\"round\"} 0.003
beacon_read_index_duration_seconds_count{via=\"round\"} 3
beacon_read_index_duration_seconds_bucket{le=\"0.001\",via=\"round\"} 2
beacon_read_index_duration_seconds_bucket{le=\"+Inf\",via=\"round\"} 3
beacon_read_index_duration_seconds_sum{via=\"leader\"} 0.5
beacon_read_index_duration_seconds_count{via=\"leader\"} 1
beacon_read_index_duration_seconds_bucket{le=\"0.001\",via=\"leader\"} 0
beacon_read_index_duration_seconds_bucket{le=\"+Inf\",via=\"leader\"} 1
beacon_read_index_duration_seconds_total_other 7
";
        let m = Metrics::parse(text);
        let round = m.histogram("beacon_read_index_duration_seconds", &["via=\"round\""]);
        assert_eq!(round.count, 3);
        assert_eq!(round.buckets, vec![(0.001, 2), (f64::INFINITY, 3)]);
        assert!((round.mean_ms().unwrap() - 1.0).abs() < 1e-9);
        let leader = m.histogram("beacon_read_index_duration_seconds", &["via=\"leader\""]);
        assert!((leader.mean_ms().unwrap() - 500.0).abs() < 1e-9);
        let absent = m.histogram("beacon_read_index_duration_seconds", &["via=\"other\""]);
        assert_eq!(absent.mean_ms(), None);
        assert_eq!(absent.quantile_ms(0.5), None);
    }
}
