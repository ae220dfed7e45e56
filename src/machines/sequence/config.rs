//! The sequence issuer's configuration: key `sequence`, its limits, each optional.

use serde::Deserialize;

use super::service::SequenceLimits;
use crate::settings::{Checker, ConfigError, CoreFacts, KeyFlags, Section, parse_keys};

/// Upper limit on `sequence.max_step`: a segment is one log entry however large, but a
/// client holds two, and a lost one burns its numbers.
pub const MAX_SEQUENCE_STEP: u64 = 1 << 40;
/// Upper limit on `sequence.max_sequences`.
pub const MAX_SEQUENCES_LIMIT: usize = 1_000_000;

#[derive(Debug, Default, Deserialize)]
struct Keys {
    #[serde(default)]
    sequence: Raw,
}

/// Key `sequence`; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Raw {
    /// Defaults to the built-in default step, or `max_step` when that is smaller.
    default_step: Option<u64>,
    max_step: Option<u64>,
    max_sequences: Option<usize>,
}

impl Section for SequenceLimits {
    const KEYS: &'static [&'static str] = &["sequence"];

    fn parse(
        text: &str,
        check: &Checker,
        _core: &CoreFacts,
        _flags: &KeyFlags,
    ) -> Result<SequenceLimits, ConfigError> {
        let raw = parse_keys::<Keys>(check, text)?.sequence;
        let d = SequenceLimits::default();
        let max_step = check.range(
            "sequence.max_step",
            None,
            raw.max_step.unwrap_or(d.max_step),
            1,
            MAX_SEQUENCE_STEP,
        )?;
        let default_step = raw.default_step.unwrap_or(d.default_step.min(max_step));
        if !(1..=max_step).contains(&default_step) {
            return Err(check.err(
                "sequence.default_step",
                None,
                format!("{default_step} is out of range 1..={max_step} (key `sequence.max_step`)"),
            ));
        }
        let max_sequences = check.range(
            "sequence.max_sequences",
            None,
            raw.max_sequences.unwrap_or(d.max_sequences),
            1,
            MAX_SEQUENCES_LIMIT,
        )?;
        Ok(SequenceLimits {
            default_step,
            max_step,
            max_sequences,
        })
    }

    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        out.insert(
            "sequence".into(),
            serde_json::json!({
                "default_step": self.default_step,
                "max_step": self.max_step,
                "max_sequences": self.max_sequences,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::test_parse;

    #[test]
    fn limits_are_checked_and_named_by_their_path() {
        let err = |t: &str| test_parse::<SequenceLimits>(t).unwrap_err().to_string();
        assert!(
            err(r#"{"sequence": {"max_step": 0}}"#)
                .contains("key `sequence.max_step`: 0 is out of range")
        );
        assert!(
            err(r#"{"sequence": {"max_step": 10, "default_step": 20}}"#)
                .contains("key `sequence.default_step`: 20 is out of range 1..=10")
        );
        assert!(
            err(r#"{"sequence": {"max_sequences": 0}}"#).contains("key `sequence.max_sequences`")
        );
        assert!(
            err(r#"{"sequence": {"step": 5}}"#)
                .contains("key `sequence.step`: unknown field `step`")
        );
        let s = test_parse::<SequenceLimits>(r#"{"sequence": {"max_step": 50}}"#).unwrap();
        assert_eq!((s.default_step, s.max_step), (50, 50));
        assert_eq!(
            test_parse::<SequenceLimits>("{}").unwrap(),
            SequenceLimits::default()
        );
    }
}
