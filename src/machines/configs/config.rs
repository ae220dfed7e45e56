//! The config store's configuration: key `configs`, its limits, each optional.

use serde::Deserialize;

use super::service::ConfigLimits;
use crate::settings::{Checker, ConfigError, CoreFacts, KeyFlags, Section, parse_keys};

#[derive(Debug, Default, Deserialize)]
struct Keys {
    #[serde(default)]
    configs: Raw,
}

/// Key `configs`; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Raw {
    max_value_bytes: Option<usize>,
    max_documents: Option<usize>,
    history: Option<usize>,
    max_ops: Option<usize>,
}

impl Section for ConfigLimits {
    const KEYS: &'static [&'static str] = &["configs"];

    fn parse(
        text: &str,
        check: &Checker,
        _core: &CoreFacts,
        _flags: &KeyFlags,
    ) -> Result<ConfigLimits, ConfigError> {
        let raw = parse_keys::<Keys>(check, text)?.configs;
        let d = ConfigLimits::default();
        Ok(ConfigLimits {
            max_value_bytes: check.range(
                "configs.max_value_bytes",
                None,
                raw.max_value_bytes.unwrap_or(d.max_value_bytes),
                1,
                4 << 20,
            )?,
            max_documents: check.range(
                "configs.max_documents",
                None,
                raw.max_documents.unwrap_or(d.max_documents),
                1,
                1_000_000,
            )?,
            history: check.range(
                "configs.history",
                None,
                raw.history.unwrap_or(d.history),
                0,
                1000,
            )?,
            max_ops: check.range(
                "configs.max_ops",
                None,
                raw.max_ops.unwrap_or(d.max_ops),
                1,
                10_000,
            )?,
        })
    }

    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        out.insert(
            "configs".into(),
            serde_json::json!({
                "max_value_bytes": self.max_value_bytes,
                "max_documents": self.max_documents,
                "history": self.history,
                "max_ops": self.max_ops,
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
        let err = |t: &str| test_parse::<ConfigLimits>(t).unwrap_err().to_string();
        assert!(
            err(r#"{"configs": {"max_documents": 0}}"#).contains("key `configs.max_documents`")
        );
        assert!(err(r#"{"configs": {"size": 5}}"#).contains("unknown field `size`"));
        assert_eq!(
            test_parse::<ConfigLimits>("{}").unwrap(),
            ConfigLimits::default()
        );
        let l = test_parse::<ConfigLimits>(r#"{"configs": {"history": 3}}"#).unwrap();
        assert_eq!(l.history, 3);
    }
}
