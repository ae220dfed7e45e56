//! Task queues' configuration: key `tasks`, their limits and defaults, each optional.

use serde::Deserialize;

use super::service::{MAX_TIMEOUT_MS, TaskLimits};
use crate::settings::{Checker, ConfigError, CoreFacts, KeyFlags, Section, parse_keys};

#[derive(Debug, Default, Deserialize)]
struct Keys {
    #[serde(default)]
    tasks: Raw,
}

/// Key `tasks`; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Raw {
    max_payload_bytes: Option<usize>,
    max_tasks: Option<usize>,
    max_queues: Option<usize>,
    result_ttl_ms: Option<u64>,
    default_timeout_ms: Option<u64>,
    default_max_attempts: Option<u32>,
    backoff_base_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
}

impl Section for TaskLimits {
    const KEYS: &'static [&'static str] = &["tasks"];

    fn parse(
        text: &str,
        check: &Checker,
        core: &CoreFacts,
        _flags: &KeyFlags,
    ) -> Result<TaskLimits, ConfigError> {
        let raw = parse_keys::<Keys>(check, text)?.tasks;
        let d = TaskLimits::default();
        let r = |key, value, lo, hi| check.range(key, None, value, lo, hi);
        // A payload and its envelope fit one frame, with room to spare.
        let frame_room = (core.max_frame_bytes / 2) as u64;
        let payload = raw
            .max_payload_bytes
            .unwrap_or(d.max_payload_bytes.min(frame_room as usize)) as u64;
        Ok(TaskLimits {
            max_payload_bytes: r("tasks.max_payload_bytes", payload, 1, frame_room)? as usize,
            max_tasks: r(
                "tasks.max_tasks",
                raw.max_tasks.unwrap_or(d.max_tasks) as u64,
                1,
                10_000_000,
            )? as usize,
            max_queues: r(
                "tasks.max_queues",
                raw.max_queues.unwrap_or(d.max_queues) as u64,
                1,
                100_000,
            )? as usize,
            result_ttl_ms: r(
                "tasks.result_ttl_ms",
                raw.result_ttl_ms.unwrap_or(d.result_ttl_ms),
                0,
                30 * 86_400_000,
            )?,
            default_timeout_ms: r(
                "tasks.default_timeout_ms",
                raw.default_timeout_ms.unwrap_or(d.default_timeout_ms),
                1,
                MAX_TIMEOUT_MS,
            )?,
            default_max_attempts: r(
                "tasks.default_max_attempts",
                u64::from(raw.default_max_attempts.unwrap_or(d.default_max_attempts)),
                1,
                1_000,
            )? as u32,
            backoff_base_ms: r(
                "tasks.backoff_base_ms",
                raw.backoff_base_ms.unwrap_or(d.backoff_base_ms),
                0,
                3_600_000,
            )?,
            backoff_max_ms: r(
                "tasks.backoff_max_ms",
                raw.backoff_max_ms.unwrap_or(d.backoff_max_ms),
                0,
                86_400_000,
            )?,
        })
    }

    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        out.insert(
            "tasks".into(),
            serde_json::json!({
                "max_payload_bytes": self.max_payload_bytes,
                "max_tasks": self.max_tasks,
                "max_queues": self.max_queues,
                "result_ttl_ms": self.result_ttl_ms,
                "default_timeout_ms": self.default_timeout_ms,
                "default_max_attempts": self.default_max_attempts,
                "backoff_base_ms": self.backoff_base_ms,
                "backoff_max_ms": self.backoff_max_ms,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::test_parse;

    #[test]
    fn limits_are_checked_against_the_frame_size() {
        let err = |t: &str| test_parse::<TaskLimits>(t).unwrap_err().to_string();
        assert!(
            err(r#"{"tasks": {"max_tasks": 0}}"#)
                .contains("key `tasks.max_tasks`: 0 is out of range")
        );
        assert!(
            err(r#"{"tasks": {"max_payload_bytes": 99999999}}"#)
                .contains("key `tasks.max_payload_bytes`")
        );
        assert!(err(r#"{"tasks": {"retries": 2}}"#).contains("unknown field `retries`"));
        assert_eq!(
            test_parse::<TaskLimits>("{}").unwrap(),
            TaskLimits::default()
        );
    }
}
