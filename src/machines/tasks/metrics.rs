//! What task queues show on `/metrics`: per queue, its tasks by state, the live workers
//! serving it and how long its oldest pending task has waited, so a growing queue or a
//! pile of dead letters can be alerted on.

use super::state::{TaskState, Tasks};
use crate::machines::registry::Registry;
use crate::machines::{GaugeSample, Measured, Part};

impl<S: Part<Tasks> + Part<Registry>> Measured<S> for Tasks {
    fn gauges(state: &S, _section: &Self::Section, wall_ms: u64, out: &mut Vec<GaugeSample>) {
        let tasks: &Tasks = state.part();
        let registry: &Registry = state.part();
        for q in tasks.queues() {
            let name = &q.spec.name;
            let mut counts = [0u64; 6];
            for t in q.tasks() {
                let i = match t.state {
                    TaskState::Pending => 0,
                    TaskState::Running(_) => 1,
                    TaskState::Completed(_) => 2,
                    TaskState::Failed => 3,
                    TaskState::Dead => 4,
                    TaskState::Cancelled => 5,
                };
                counts[i] += 1;
            }
            let states = [
                "pending",
                "running",
                "completed",
                "failed",
                "dead",
                "cancelled",
            ];
            for (state, n) in states.into_iter().zip(counts) {
                out.push(GaugeSample {
                    name: "queue_tasks",
                    help: "Tasks of a queue by state (dead: the dead letters)",
                    labels: vec![("queue", name.clone()), ("state", state.into())],
                    value: n as f64,
                });
            }
            let workers = tasks
                .workers()
                .filter(|w| registry.is_live(w.id.0, w.id.1) && w.queues.contains(name))
                .count();
            out.push(GaugeSample {
                name: "queue_workers",
                help: "Live workers serving a queue",
                labels: vec![("queue", name.clone())],
                value: workers as f64,
            });
            let oldest = q.pending().map(|t| t.submitted_ms).min();
            out.push(GaugeSample {
                name: "queue_oldest_pending_age_seconds",
                help: "How long the oldest pending task of a queue has waited (0: none pending)",
                labels: vec![("queue", name.clone())],
                value: oldest.map_or(0.0, |at| wall_ms.saturating_sub(at) as f64 / 1e3),
            });
        }
    }
}
