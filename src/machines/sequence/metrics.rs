//! What sequences show on `/metrics`: each sequence's highest number handed out, so its
//! rate of use (`deriv(beacon_sequence_max[5m])`) can be graphed.

use super::state::Sequences;
use crate::machines::{GaugeSample, Measured, Part};

impl<S: Part<Sequences>> Measured<S> for Sequences {
    fn gauges(state: &S, _section: &Self::Section, _wall_ms: u64, out: &mut Vec<GaugeSample>) {
        let sequences: &Sequences = state.part();
        out.push(GaugeSample {
            name: "sequences",
            help: "Sequences defined",
            labels: Vec::new(),
            value: sequences.len() as f64,
        });
        for r in sequences.iter() {
            out.push(GaugeSample {
                name: "sequence_max",
                help: "The highest number a sequence has handed out (in segments, some not used yet)",
                labels: vec![("sequence", r.name.clone())],
                value: r.max as f64,
            });
        }
    }
}
