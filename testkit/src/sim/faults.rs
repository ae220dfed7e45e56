//! The faults one seed injects, and how often: drawn from the seed, so that seeds between
//! them cover quiet networks and stormy ones, crashes mid-write and long pauses.

use super::net::Conditions;
use crate::rng::SimRng as Rng;

/// Fault rates of one seed: per simulated step, or per message for the network's.
#[derive(Debug, Clone)]
pub struct Faults {
    pub net: Conditions,
    /// A symmetric split into two sides.
    pub partition: f64,
    /// Links cut in one direction only.
    pub one_way: f64,
    /// Rings and bridges.
    pub topology: f64,
    /// Every cut and slow link heals.
    pub heal: f64,
    /// A beacon is killed.
    pub crash: f64,
    /// A leader is killed between sending its entries and storing them, its write torn.
    pub crash_mid_store: f64,
    /// A killed beacon starts again from what it stored.
    pub restart: f64,
    /// A beacon is stopped (SIGSTOP) for up to 3 s: it neither ticks nor reads.
    pub pause: f64,
    /// A client's request is held back for seconds (at a stopped beacon, behind a cut).
    pub hold: f64,
    /// A beacon's links slow down: messages arrive seconds late, in order, so it acts on a
    /// stale view.
    pub slow: f64,
    /// An operator asks the leader to hand its leadership over (`leader transfer`).
    pub transfer: f64,
    /// A process posing as a configured beacon sends a beacon a message with a term or an
    /// index beyond any a beacon reaches (u64::MAX, 2^48 + 1).
    pub rogue: f64,
    /// A client asks a beacon for a linearizable read's point in the log (its read index);
    /// the answer must not be below any index committed when it asked.
    pub read: f64,
    /// Quorum mode: terms are not dealt by place among the voters; every beacon takes the
    /// next term above any it has seen, so two often take the same one (as beacons that
    /// disagree on who the voters are may). Promises alone must keep one serving leader a
    /// term.
    pub undealt_terms: bool,
    /// Quorum mode: an operator changes the membership through the leader (adds a spare
    /// beacon as a learner, to be promoted or not, promotes a learner, removes a member,
    /// the leader too, which it refuses).
    pub members: f64,
}

impl Faults {
    pub fn draw(rng: &mut Rng) -> Faults {
        let mut one_of = |options: &[f64]| options[rng.below(options.len() as u64) as usize];
        let loss = one_of(&[0.0, 0.01, 0.05, 0.2]);
        let dup = one_of(&[0.0, 0.01, 0.05]);
        let max_delay = one_of(&[2.0, 20.0, 80.0, 250.0]) as u64;
        let reorder = rng.chance(0.5);
        let mut one_of = |options: &[f64]| options[rng.below(options.len() as u64) as usize];
        Faults {
            net: Conditions {
                loss,
                dup,
                max_delay,
                reorder,
            },
            partition: one_of(&[0.0, 0.002, 0.006]),
            one_way: one_of(&[0.0, 0.002, 0.006]),
            topology: one_of(&[0.0, 0.002, 0.004]),
            heal: one_of(&[0.005, 0.02]),
            crash: one_of(&[0.0, 0.002, 0.005]),
            crash_mid_store: one_of(&[0.0, 0.01]),
            restart: one_of(&[0.01, 0.05]),
            pause: one_of(&[0.0, 0.002, 0.005]),
            hold: one_of(&[0.0, 0.02, 0.1]),
            slow: one_of(&[0.0, 0.002, 0.005]),
            transfer: one_of(&[0.0, 0.002, 0.01]),
            rogue: one_of(&[0.0, 0.002, 0.01]),
            // Not drawn: a seed's other faults strike as they did before reads were simulated.
            read: 0.02,
            undealt_terms: rng.chance(0.3),
            // Set by the simulations that give their clusters spare beacons.
            members: 0.0,
        }
    }

    /// No faults at all (scripted schedules inject their own).
    pub fn none() -> Faults {
        Faults {
            net: Conditions::quiet(),
            partition: 0.0,
            one_way: 0.0,
            topology: 0.0,
            heal: 0.0,
            crash: 0.0,
            crash_mid_store: 0.0,
            restart: 0.0,
            pause: 0.0,
            hold: 0.0,
            slow: 0.0,
            transfer: 0.0,
            rogue: 0.0,
            read: 0.0,
            undealt_terms: false,
            members: 0.0,
        }
    }

    /// What is left once everything heals: a prompt network, and every beacon comes back.
    pub fn healed(&self) -> Faults {
        Faults {
            net: Conditions {
                max_delay: self.net.max_delay.min(20),
                ..Conditions::quiet()
            },
            restart: 1.0,
            undealt_terms: self.undealt_terms,
            ..Faults::none()
        }
    }
}
