//! Work assignment's configuration: key `assign`, its limits and policies, each optional.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::service::AssignLimits;
use crate::machines::registry::check_type;
use crate::settings::{Checker, ConfigError, CoreFacts, KeyFlags, Section, parse_keys};

/// Upper limit on a delay window (a day).
pub const MAX_DELAY_MS: u64 = 86_400_000;

#[derive(Debug, Default, Deserialize)]
struct Keys {
    #[serde(default)]
    assign: Raw,
}

/// Key `assign`; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Raw {
    max_moves: Option<usize>,
    max_resources: Option<usize>,
    max_weight: Option<u32>,
    delay_ms: BTreeMap<String, u64>,
    auto_rebalance_spread: Option<u64>,
}

impl Section for AssignLimits {
    const KEYS: &'static [&'static str] = &["assign"];

    fn parse(
        text: &str,
        check: &Checker,
        _core: &CoreFacts,
        _flags: &KeyFlags,
    ) -> Result<AssignLimits, ConfigError> {
        let raw = parse_keys::<Keys>(check, text)?.assign;
        let d = AssignLimits::default();
        let max_moves = check.range(
            "assign.max_moves",
            None,
            raw.max_moves.unwrap_or(d.max_moves),
            1,
            100_000,
        )?;
        let max_resources = check.range(
            "assign.max_resources",
            None,
            raw.max_resources.unwrap_or(d.max_resources),
            1,
            10_000_000,
        )?;
        let max_weight = raw.max_weight.unwrap_or(d.max_weight);
        if max_weight == 0 {
            return Err(check.err("assign.max_weight", None, "must be at least 1".into()));
        }
        for (node_type, ms) in &raw.delay_ms {
            check_type(node_type).map_err(|e| check.err("assign.delay_ms", None, e.to_string()))?;
            if *ms > MAX_DELAY_MS {
                return Err(check.err(
                    "assign.delay_ms",
                    None,
                    format!("{ms} for {node_type} is over the limit of {MAX_DELAY_MS}"),
                ));
            }
        }
        Ok(AssignLimits {
            max_moves,
            max_resources,
            max_weight,
            delay_ms: raw.delay_ms,
            auto_rebalance_spread: raw.auto_rebalance_spread,
        })
    }

    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        let mut v = serde_json::json!({
            "max_moves": self.max_moves,
            "max_resources": self.max_resources,
            "max_weight": self.max_weight,
            "delay_ms": self.delay_ms,
        });
        if let Some(spread) = self.auto_rebalance_spread {
            v["auto_rebalance_spread"] = spread.into();
        }
        out.insert("assign".into(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::test_parse;

    #[test]
    fn limits_and_policies_are_checked_and_named_by_their_path() {
        let err = |t: &str| test_parse::<AssignLimits>(t).unwrap_err().to_string();
        assert!(err(r#"{"assign": {"max_moves": 0}}"#).contains("key `assign.max_moves`"));
        assert!(err(r#"{"assign": {"moves": 3}}"#).contains("unknown field `moves`"));
        assert!(err(r#"{"assign": {"delay_ms": {"a b": 5}}}"#).contains("key `assign.delay_ms`"));
        let a = test_parse::<AssignLimits>(
            r#"{"assign": {"delay_ms": {"CRAWLER": 5000}, "auto_rebalance_spread": 2}}"#,
        )
        .unwrap();
        assert_eq!(a.delay_ms["CRAWLER"], 5000);
        assert_eq!(a.auto_rebalance_spread, Some(2));
    }
}
