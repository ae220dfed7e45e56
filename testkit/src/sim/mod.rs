//! The simulation harness: one network, one disk, one set of faults and one seed runner for
//! every simulation of beacon, none of which names a machine.
//!
//! * [`net`]: directed links (cut, one-way, slow; rings and bridges), delay, loss,
//!   duplication and reordering, and the mail in flight;
//! * [`disk`]: the real storage code over files in memory, with writes torn by a crash;
//! * [`faults`]: the fault rates a seed draws;
//! * [`cluster`]: whole replicas of any machine driven as the daemon drives them, with a
//!   machine's [`beacon::sim::Workload`] of clients and invariants;
//! * [`run_seeds`]: many seeds on every core, `BEACON_SIM_SEEDS` and `BEACON_SIM_SEED` to
//!   widen or replay, a failing seed reported with its trace.

pub mod cluster;
pub mod disk;
pub mod faults;
pub mod net;

pub use cluster::{Setup, Sim, Stats};
pub use disk::Disk;
pub use faults::Faults;

/// What the passing seeds of [`run_workload`] counted, summed.
#[derive(Debug, Clone, Copy)]
pub struct Totals<const N: usize> {
    pub seeds: u64,
    pub sums: [u64; N],
}

/// Runs seeds of one machine's workload as [`run_seeds`] does: `draw` makes each seed's
/// set-up and clients from the seed's random source, every beacon starts from `fresh()`,
/// and each finished run adds what `counts` reads off it to the totals. A failing seed
/// panics with its report, named for `test` (the test binary, to replay it).
pub fn run_workload<S, V, W, const N: usize>(
    default: u64,
    test: &str,
    fresh: fn() -> (S, V),
    draw: impl Fn(&mut crate::rng::SimRng) -> (Setup, W) + Sync,
    counts: impl Fn(&Sim<S, V, W>) -> [u64; N] + Sync,
) -> Totals<N>
where
    S: beacon::wire::MachineWire + 'static,
    V: beacon::consensus::Service<S> + 'static,
    W: beacon::sim::Workload<S, V>,
{
    let results = run_seeds(default, test, |seed, verbose| {
        let mut rng = crate::rng::SimRng::new(seed);
        let (setup, workload) = draw(&mut rng);
        let mut sim = Sim::new(seed, setup, fresh, workload, verbose);
        match sim.run() {
            Ok(()) => Ok(counts(&sim)),
            Err(why) => Err(sim.report(&why, test)),
        }
    });
    let mut sums = [0; N];
    for r in &results {
        for (sum, n) in sums.iter_mut().zip(r) {
            *sum += n;
        }
    }
    Totals {
        seeds: results.len() as u64,
        sums,
    }
}

/// Runs seeds `0..seeds` of a broken machine's simulation, one after another: in how many
/// `run` failed (the invariants caught the fault), printing the first failure with its seed
/// under `what`.
pub fn count_caught(seeds: u64, what: &str, mut run: impl FnMut(u64) -> Result<(), String>) -> u64 {
    let mut caught = 0;
    for seed in 0..seeds {
        if let Err(why) = run(seed) {
            if caught == 0 {
                println!("first caught (seed {seed}): {why}");
            }
            caught += 1;
        }
    }
    println!("{what}: caught in {caught} of {seeds} seeds");
    caught
}

/// Runs seeds `0..default` (or `BEACON_SIM_SEEDS`) on every core; with `BEACON_SIM_SEED`
/// only that seed, verbosely. `run(seed, verbose)` returns the seed's result or the report
/// of its failure; a panic counts as a failure. Returns every passing seed's result;
/// panics with the first failure's report.
pub fn run_seeds<T: Send>(
    default: u64,
    test: &str,
    run: impl Fn(u64, bool) -> Result<T, String> + Sync,
) -> Vec<T> {
    let one = |seed: u64, verbose: bool| -> Result<T, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, verbose)))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!(
                    "seed {seed} panicked: {what}\nreplay: BEACON_SIM_SEED={seed} cargo test -p beacon-sims --test sims {test}::"
                ))
            })
    };
    if let Ok(seed) = std::env::var("BEACON_SIM_SEED") {
        let seed: u64 = seed.parse().expect("BEACON_SIM_SEED is a number");
        return match one(seed, true) {
            Ok(result) => vec![result],
            Err(report) => panic!("{report}"),
        };
    }
    let seeds: u64 = std::env::var("BEACON_SIM_SEEDS")
        .map(|s| s.parse().expect("BEACON_SIM_SEEDS is a number"))
        .unwrap_or(default);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let results: Vec<(u64, Result<T, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let one = &one;
                s.spawn(move || {
                    (0..seeds)
                        .filter(|seed| seed % workers == w)
                        .map(|seed| (seed, one(seed, false)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a seed worker"))
            .collect()
    });
    let failed: Vec<u64> = results
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(s, _)| *s)
        .collect();
    let mut passed = Vec::new();
    let mut first = None;
    for (_, r) in results {
        match r {
            Ok(t) => passed.push(t),
            Err(report) => {
                first.get_or_insert(report);
            }
        }
    }
    if let Some(first) = first {
        panic!(
            "{} of {seeds} seeds failed: {failed:?}\nfirst:\n{first}",
            failed.len()
        );
    }
    passed
}
