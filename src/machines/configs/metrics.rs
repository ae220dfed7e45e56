//! What the config store shows on `/metrics`: how many documents it holds, and the revision
//! of its last write.

use super::state::ConfigStore;
use crate::machines::{GaugeSample, Measured, Part};

impl<S: Part<ConfigStore>> Measured<S> for ConfigStore {
    fn gauges(state: &S, _section: &Self::Section, _wall_ms: u64, out: &mut Vec<GaugeSample>) {
        let store: &ConfigStore = state.part();
        out.push(GaugeSample {
            name: "config_documents",
            help: "Config documents stored",
            labels: Vec::new(),
            value: store.len() as f64,
        });
        out.push(GaugeSample {
            name: "config_revision",
            help: "The revision (log index) of the config store's last write",
            labels: Vec::new(),
            value: store.last_revision() as f64,
        });
    }
}
