//! The registry's configuration: top-level keys, as in NebulaBeacon: `id_range`,
//! `lease_ms`, `id_reuse_delay_ms`, `max_metadata_bytes` and `node_type` (the
//! subscriptions), with the flags `--id-range` and `--lease-ms`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::state::{IdRange, check_type};
use crate::settings::{Checker, ConfigError, CoreFacts, KeyFlags, Section, parse_keys};

/// Limits on `lease_ms`: below a second a service's report interval would be a storm; above
/// an hour a dead service would hold its ID for too long.
pub const LEASE_MS_RANGE: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;
/// Upper limit on `id_reuse_delay_ms` (a day).
pub const MAX_ID_REUSE_DELAY_MS: u64 = 86_400_000;
/// Upper limit on `max_metadata_bytes`.
pub const MAX_METADATA_LIMIT: usize = 64 * 1024;

/// The registry's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// The node IDs handed to services.
    pub id_range: IdRange,
    /// A service that does not report within this loses its registration.
    pub lease_ms: u64,
    /// How long an expired registration's ID stays in quarantine.
    pub id_reuse_delay_ms: u64,
    /// Largest metadata a service may register with.
    pub max_metadata_bytes: usize,
    /// Node type -> the node types it subscribes to (key `node_type`).
    pub subscriptions: BTreeMap<String, Vec<String>>,
    /// Key `health_damping`: when a service whose status keeps changing is held critical.
    pub damping: super::damping::DampingConfig,
    /// Whether a routine report's confirmation may wait for the leader's next heartbeat:
    /// when a tick is at most an eighth of the lease (half a client's report interval), so
    /// that the wait stays well within a client's per-attempt deadline (a quarter of the
    /// lease). Derived from `tick_ms` and `lease_ms`, not a key of its own.
    pub routine_waits: bool,
}

/// The default lease: 10 s, or 10 ticks when that is longer, so that a lease always outlives
/// a leader's failover (four ticks) with room for a renewal or two.
pub fn default_lease_ms(tick_ms: u64) -> u64 {
    (tick_ms * 10).max(10_000)
}

fn default_id_range() -> [u32; 2] {
    [IdRange::DEFAULT.first, IdRange::DEFAULT.last]
}
fn default_id_reuse_delay_ms() -> u64 {
    30_000
}
fn default_max_metadata_bytes() -> usize {
    1024
}

/// The registry's top-level keys (the rest of the file is others').
#[derive(Debug, Deserialize)]
struct Keys {
    #[serde(default = "default_id_range")]
    id_range: [u32; 2],
    #[serde(default)]
    lease_ms: Option<u64>,
    #[serde(default = "default_id_reuse_delay_ms")]
    id_reuse_delay_ms: u64,
    #[serde(default = "default_max_metadata_bytes")]
    max_metadata_bytes: usize,
    #[serde(default)]
    node_type: Vec<Subscription>,
    #[serde(default)]
    health_damping: RawDamping,
}

/// Key `health_damping`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDamping {
    #[serde(default = "default_max_flaps")]
    max_flaps: u32,
    #[serde(default = "default_flap_window_ms")]
    window_ms: u64,
    #[serde(default = "default_stable_ms")]
    stable_ms: u64,
}

impl Default for RawDamping {
    fn default() -> Self {
        RawDamping {
            max_flaps: default_max_flaps(),
            window_ms: default_flap_window_ms(),
            stable_ms: default_stable_ms(),
        }
    }
}

fn default_max_flaps() -> u32 {
    super::damping::DampingConfig::default().max_flaps
}
fn default_flap_window_ms() -> u64 {
    super::damping::DampingConfig::default().window_ms
}
fn default_stable_ms() -> u64 {
    super::damping::DampingConfig::default().stable_ms
}

/// One entry of `node_type`, as in NebulaBeacon: services of `node_type` are told about
/// the nodes of the types in `subscribe`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Subscription {
    node_type: String,
    #[serde(default)]
    subscribe: Vec<String>,
}

impl Section for RegistrySettings {
    const KEYS: &'static [&'static str] = &[
        "id_range",
        "lease_ms",
        "id_reuse_delay_ms",
        "max_metadata_bytes",
        "node_type",
        "health_damping",
    ];

    fn parse(
        text: &str,
        check: &Checker,
        core: &CoreFacts,
        flags: &KeyFlags,
    ) -> Result<RegistrySettings, ConfigError> {
        let keys = parse_keys::<Keys>(check, text)?;
        let range_flag = flags.get("id_range");
        let [first, last] = match range_flag {
            None => keys.id_range,
            Some(f) => {
                let parsed = f
                    .value
                    .split_once('-')
                    .and_then(|(a, b)| Some([a.trim().parse().ok()?, b.trim().parse().ok()?]));
                parsed.ok_or_else(|| {
                    check.err(
                        "id_range",
                        Some(f.flag),
                        format!("`{}` is not FIRST-LAST (for example 1-1023)", f.value),
                    )
                })?
            }
        };
        let range_flag = range_flag.map(|f| f.flag);
        if first == 0 || first > last {
            return Err(check.err(
                "id_range",
                range_flag,
                format!("[{first}, {last}] is not a range [first, last] with 1 <= first <= last"),
            ));
        }
        let lease_flag = flags.get("lease_ms");
        let lease_ms = match lease_flag {
            Some(f) => f.value.trim().parse().map_err(|_| {
                check.err(
                    "lease_ms",
                    Some(f.flag),
                    format!("`{}` is not a number of milliseconds", f.value),
                )
            })?,
            None => keys
                .lease_ms
                .unwrap_or_else(|| default_lease_ms(core.tick_ms)),
        };
        let lease_flag = lease_flag.map(|f| f.flag);
        check.range(
            "lease_ms",
            lease_flag,
            lease_ms,
            *LEASE_MS_RANGE.start(),
            *LEASE_MS_RANGE.end(),
        )?;
        let tick_ms = core.tick_ms;
        if lease_ms < tick_ms * 3 {
            return Err(check.err(
                "lease_ms",
                lease_flag,
                format!(
                    "{lease_ms} is shorter than 3 ticks of {tick_ms} ms ({} ms): a lease must outlive a leader failover",
                    tick_ms * 3
                ),
            ));
        }
        if keys.id_reuse_delay_ms > MAX_ID_REUSE_DELAY_MS {
            return Err(check.err(
                "id_reuse_delay_ms",
                None,
                format!(
                    "{} is over the limit of {MAX_ID_REUSE_DELAY_MS}",
                    keys.id_reuse_delay_ms
                ),
            ));
        }
        if keys.max_metadata_bytes > MAX_METADATA_LIMIT {
            return Err(check.err(
                "max_metadata_bytes",
                None,
                format!(
                    "{} is over the limit of {MAX_METADATA_LIMIT}",
                    keys.max_metadata_bytes
                ),
            ));
        }
        let mut subscriptions = BTreeMap::new();
        for sub in keys.node_type {
            for t in std::iter::once(&sub.node_type).chain(&sub.subscribe) {
                check_type(t).map_err(|e| check.err("node_type", None, e.to_string()))?;
            }
            if subscriptions
                .insert(sub.node_type.clone(), sub.subscribe)
                .is_some()
            {
                return Err(check.err(
                    "node_type",
                    None,
                    format!("node type `{}` is listed twice", sub.node_type),
                ));
            }
        }
        let d = keys.health_damping;
        check.range(
            "health_damping.max_flaps",
            None,
            u64::from(d.max_flaps),
            1,
            1_000,
        )?;
        check.range(
            "health_damping.window_ms",
            None,
            d.window_ms,
            tick_ms,
            86_400_000,
        )?;
        check.range("health_damping.stable_ms", None, d.stable_ms, 0, 86_400_000)?;
        Ok(RegistrySettings {
            damping: super::damping::DampingConfig {
                max_flaps: d.max_flaps,
                window_ms: d.window_ms,
                stable_ms: d.stable_ms,
            },
            id_range: IdRange { first, last },
            lease_ms,
            routine_waits: tick_ms * 8 <= lease_ms,
            id_reuse_delay_ms: keys.id_reuse_delay_ms,
            max_metadata_bytes: keys.max_metadata_bytes,
            subscriptions,
        })
    }

    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        use serde_json::json;
        out.insert(
            "id_range".into(),
            json!([self.id_range.first, self.id_range.last]),
        );
        out.insert("lease_ms".into(), json!(self.lease_ms));
        out.insert("id_reuse_delay_ms".into(), json!(self.id_reuse_delay_ms));
        out.insert("max_metadata_bytes".into(), json!(self.max_metadata_bytes));
        let types: Vec<serde_json::Value> = self
            .subscriptions
            .iter()
            .map(|(t, subscribe)| json!({"node_type": t, "subscribe": subscribe}))
            .collect();
        out.insert("node_type".into(), json!(types));
        out.insert(
            "health_damping".into(),
            json!({
                "max_flaps": self.damping.max_flaps,
                "window_ms": self.damping.window_ms,
                "stable_ms": self.damping.stable_ms,
            }),
        );
    }

    /// State written under one node-ID range is not served under another.
    fn identity(&self, out: &mut BTreeMap<String, serde_json::Value>) {
        out.insert(
            "id_range".into(),
            serde_json::json!([self.id_range.first, self.id_range.last]),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{KeyFlag, Origin, test_parse};

    #[test]
    fn keys_are_checked_and_named() {
        let err = |t: &str| test_parse::<RegistrySettings>(t).unwrap_err().to_string();
        assert!(err(r#"{"id_range": [5, 2]}"#).contains("key `id_range`"));
        assert!(err(r#"{"id_range": [0, 2]}"#).contains("key `id_range`"));
        assert!(err(r#"{"lease_ms": 10}"#).contains("key `lease_ms`"));
        assert!(
            err(r#"{"node_type": [{"node_type": ""}]}"#)
                .contains("key `node_type`: node_type is empty")
        );
        assert!(
            err(r#"{"node_type": [{"node_type": "A"}, {"node_type": "A"}]}"#)
                .contains("listed twice")
        );
        assert!(
            err(r#"{"node_type": [{"node_type": "A", "subscirbe": []}]}"#)
                .contains("unknown field `subscirbe`")
        );
        let s = test_parse::<RegistrySettings>("{}").unwrap();
        assert_eq!((s.id_range, s.lease_ms), (IdRange::DEFAULT, 10_000));
    }

    #[test]
    fn the_lease_outlives_three_ticks_and_flags_replace_keys() {
        let check = Checker::new(Origin::File("t.json".into()));
        let core = CoreFacts {
            tick_ms: 1000,
            max_frame_bytes: 1 << 20,
            beacons: 3,
        };
        let e = RegistrySettings::parse(r#"{"lease_ms": 2000}"#, &check, &core, &KeyFlags::new())
            .unwrap_err();
        assert!(e.to_string().contains("shorter than 3 ticks"), "{e}");
        let flags = KeyFlags::from([
            (
                "lease_ms".to_owned(),
                KeyFlag {
                    flag: "--lease-ms",
                    value: "20000".into(),
                },
            ),
            (
                "id_range".to_owned(),
                KeyFlag {
                    flag: "--id-range",
                    value: "1-9".into(),
                },
            ),
        ]);
        let s = RegistrySettings::parse("{}", &check, &core, &flags).unwrap();
        assert_eq!((s.lease_ms, s.id_range.last), (20_000, 9));
        let bad = KeyFlags::from([(
            "id_range".to_owned(),
            KeyFlag {
                flag: "--id-range",
                value: "nine".into(),
            },
        )]);
        let e = RegistrySettings::parse("{}", &check, &core, &bad).unwrap_err();
        assert!(
            e.to_string().starts_with("flag --id-range: key `id_range`"),
            "{e}"
        );
    }
}
