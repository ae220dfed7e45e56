//! Deterministic multi-node simulation of the election core.
//!
//! Beacons are [`Election`] instances wired through a simulated network that delivers every
//! heartbeat one round (one tick) after it was sent, unless the link is cut (the links, their
//! interleaving and the seed runner are the testkit's simulation harness). Rounds tick every
//! live beacon in a seeded random order. Faults: isolate a beacon, cut a link both ways or one
//! way, heal everything, crash a beacon (its peers see the connection drop, or, for a silent
//! crash such as a power cut, see nothing), restart it with the term it had stored.
//!
//! Checked after every round:
//! * never two leaders that both see each other online (and can hear each other) for more
//!   than one round;
//! * no beacon's term ever decreases, restarts included;
//! * after the network heals and faults stop, exactly one leader agreed by every live beacon
//!   within `CONVERGE_ROUNDS`, and it stays leader while nothing fails.
//!
//! A failure prints its seed; `BEACON_SIM_SEED=<seed> cargo test -p beacon-sims --test sims election_sim::` replays
//! it alone, and `BEACON_SIM_SEEDS=<n>` runs more seeds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use beacon::consensus::election::{Action, Election, Heartbeat, Input};
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::sim::net::{Links, interleave};
use beacon_testkit::sim::run_seeds;

/// Rounds allowed from "healed" to "one leader agreed by all".
const CONVERGE_ROUNDS: u64 = 6;
const TICK_MS: u64 = 100;

struct Sim {
    addrs: Vec<SocketAddr>,
    nodes: Vec<Option<Election>>,
    /// Stored term of each beacon (what its data_dir holds).
    disk: Vec<u64>,
    /// Last term observed per beacon, to check monotonicity across restarts.
    last_term: Vec<u64>,
    /// Directed links that drop everything: (from, to).
    cut: Links<usize>,
    /// Heartbeats sent this round, delivered at the start of the next.
    inflight: Vec<(usize, usize, Heartbeat)>,
    round: u64,
    /// Consecutive rounds each pair has been two mutually-visible leaders.
    dual: BTreeMap<(usize, usize), u32>,
    log: String,
    /// Log every delivery too (set when replaying a single seed).
    trace: bool,
}

impl Sim {
    fn new(n: usize) -> Sim {
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 16000 + 1000 * i as u16)))
            .collect();
        let nodes: Vec<Option<Election>> = addrs
            .iter()
            .map(|a| Some(Election::new(*a, addrs.iter().copied())))
            .collect();
        // At start every link comes up and the handshakes carry each side's state, which
        // arrives before anyone's first tick.
        let mut inflight = Vec::new();
        for (from, node) in nodes.iter().enumerate() {
            let hb = node.as_ref().map(Election::heartbeat).expect("all start");
            for to in 0..n {
                if to != from {
                    inflight.push((from, to, hb));
                }
            }
        }
        Sim {
            addrs,
            nodes,
            disk: vec![0; n],
            last_term: vec![0; n],
            cut: Links::default(),
            inflight,
            round: 0,
            dual: BTreeMap::new(),
            log: String::new(),
            trace: std::env::var_os("BEACON_SIM_SEED").is_some(),
        }
    }

    fn n(&self) -> usize {
        self.addrs.len()
    }

    fn now(&self) -> u64 {
        self.round * TICK_MS
    }

    fn note(&mut self, what: impl AsRef<str>) {
        let _ = writeln!(self.log, "round {:>4}: {}", self.round, what.as_ref());
    }

    fn index(&self, addr: SocketAddr) -> usize {
        self.addrs
            .iter()
            .position(|a| *a == addr)
            .expect("known addr")
    }

    fn carry_out(&mut self, from: usize, actions: Vec<Action>) {
        let node = self.nodes[from].as_ref().expect("live");
        // The driver stores a new term before sending anything.
        self.disk[from] = node.max_seen_term();
        let (leading, term) = (node.is_leader(), node.term());
        for action in &actions {
            if let Action::LeaderChanged { leader, .. } = action {
                let leader = leader.map(|a| self.index(a));
                self.note(format!(
                    "  beacon {from} now follows {leader:?} (leading={leading}, term {term})"
                ));
            }
        }
        for action in actions {
            if let Action::Broadcast(hb) = action {
                for to in 0..self.n() {
                    if to != from {
                        self.inflight.push((from, to, hb));
                    }
                }
            }
        }
    }

    fn input(&mut self, to: usize, input: Input) {
        let now = self.now();
        if let Some(node) = self.nodes[to].as_mut() {
            let actions = node.step(now, input).expect("valid input");
            self.carry_out(to, actions);
        }
    }

    fn isolate(&mut self, i: usize) {
        self.note(format!("isolate {i}"));
        let all: Vec<usize> = (0..self.n()).collect();
        self.cut.isolate(i, &all);
    }

    fn cut_link(&mut self, a: usize, b: usize, both: bool) {
        self.note(format!(
            "cut {a} -> {b}{}",
            if both { " both ways" } else { "" }
        ));
        self.cut.cut(a, b);
        if both {
            self.cut.cut(b, a);
        }
    }

    fn heal(&mut self) {
        self.note("heal all links");
        self.cut.heal();
    }

    /// Crashes `i`. A detected crash (process killed, kernel closes its sockets) tells every
    /// peer that can reach it at once; a silent one (power cut) tells nobody.
    fn crash(&mut self, i: usize, detected: bool) {
        self.note(format!(
            "crash {i}{}",
            if detected { "" } else { " silently" }
        ));
        self.nodes[i] = None;
        // What it had already sent arrives before its connections close (TCP delivers
        // buffered data before the FIN); after a silent crash it is lost with the machine.
        let (sent, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(|m| m.0 == i);
        self.inflight = rest;
        if detected {
            for (from, to, hb) in sent {
                if !self.cut.is_cut(from, to) {
                    let from = self.addrs[from];
                    self.input(to, Input::Heartbeat { from, hb });
                }
            }
        }
        if detected {
            let peer = self.addrs[i];
            for j in 0..self.n() {
                if j != i && !self.cut.is_cut(i, j) {
                    self.input(j, Input::PeerDown { peer });
                }
            }
        }
    }

    fn restart(&mut self, i: usize) {
        self.note(format!("restart {i} with stored term {}", self.disk[i]));
        let node = Election::with_term(self.addrs[i], self.addrs.iter().copied(), self.disk[i]);
        self.nodes[i] = Some(node);
        // Its links come up and the handshakes carry both sides' current state.
        let hb = self.nodes[i].as_ref().unwrap().heartbeat();
        for j in 0..self.n() {
            if j == i {
                continue;
            }
            if let Some(peer_hb) = self.nodes[j].as_ref().map(|n| n.heartbeat()) {
                if !self.cut.is_cut(i, j) {
                    self.inflight.push((i, j, hb));
                }
                if !self.cut.is_cut(j, i) {
                    self.inflight.push((j, i, peer_hb));
                }
            }
        }
    }

    fn live(&self) -> Vec<usize> {
        (0..self.n()).filter(|i| self.nodes[*i].is_some()).collect()
    }

    /// One round: deliver last round's heartbeats, then tick everyone in a random order.
    fn round(&mut self, rng: &mut Rng) -> Result<(), String> {
        self.round += 1;
        let now = self.now();
        let batch = interleave(std::mem::take(&mut self.inflight), rng);
        for (from, to, hb) in batch {
            if !self.cut.is_cut(from, to) {
                if self.trace {
                    self.note(format!("  {from} -> {to}: {hb:?}"));
                }
                let from = self.addrs[from];
                self.input(to, Input::Heartbeat { from, hb });
            }
        }
        let mut order = self.live();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for i in order {
            let actions = self.nodes[i].as_mut().unwrap().tick(now);
            self.carry_out(i, actions);
        }
        self.check_round()
    }

    fn leaders(&self) -> Vec<usize> {
        self.live()
            .into_iter()
            .filter(|i| self.nodes[*i].as_ref().unwrap().is_leader())
            .collect()
    }

    fn check_round(&mut self) -> Result<(), String> {
        for i in self.live() {
            let term = self.nodes[i].as_ref().unwrap().term();
            if term < self.last_term[i] {
                return Err(format!(
                    "beacon {i}'s term went back from {} to {term}",
                    self.last_term[i]
                ));
            }
            self.last_term[i] = term;
        }
        let leaders = self.leaders();
        let mut dual = BTreeMap::new();
        for (x, &a) in leaders.iter().enumerate() {
            for &b in &leaders[x + 1..] {
                let na = self.nodes[a].as_ref().unwrap();
                let nb = self.nodes[b].as_ref().unwrap();
                // "See each other": each shows the other online and heartbeats can actually
                // pass both ways. (Behind a cut a beacon may still show a peer online from
                // heartbeats that predate the cut; no protocol can settle a conflict it cannot
                // hear about.)
                let hear = !self.cut.is_cut(a, b) && !self.cut.is_cut(b, a);
                if hear && na.is_online(self.addrs[b]) && nb.is_online(self.addrs[a]) {
                    let rounds = self.dual.get(&(a, b)).copied().unwrap_or(0) + 1;
                    if rounds > 1 {
                        return Err(format!(
                            "beacons {a} and {b} both lead and see each other online for {rounds} rounds"
                        ));
                    }
                    dual.insert((a, b), rounds);
                }
            }
        }
        self.dual = dual;
        Ok(())
    }

    /// The leader every live beacon agrees on, if there is exactly one.
    fn agreed_leader(&self) -> Option<usize> {
        let leaders = self.leaders();
        let [leader] = leaders.as_slice() else {
            return None;
        };
        let addr = self.addrs[*leader];
        self.live()
            .iter()
            .all(|i| self.nodes[*i].as_ref().unwrap().leader() == Some(addr))
            .then_some(*leader)
    }

    fn describe(&self) -> String {
        let mut out = String::new();
        for i in 0..self.n() {
            match &self.nodes[i] {
                None => {
                    let _ = writeln!(out, "  beacon {i}: crashed");
                }
                Some(n) => {
                    let online: Vec<usize> = (0..self.n())
                        .filter(|j| n.is_online(self.addrs[*j]))
                        .collect();
                    let _ = writeln!(
                        out,
                        "  beacon {i}: leader={} term={} follows={:?} online={online:?}",
                        n.is_leader(),
                        n.term(),
                        n.leader().map(|a| self.index(a))
                    );
                }
            }
        }
        out
    }
}

/// Observations of one seed, for the summary line.
#[derive(Default)]
struct Stats {
    heals: u64,
    worst_converge: u64,
}

/// Runs one seeded schedule of chaos phases, each followed by healing and a check that the
/// cluster converges and then stays put.
fn run_seed(seed: u64, n: usize, phases: usize) -> Result<Stats, String> {
    let mut rng = Rng::new(seed);
    let mut sim = Sim::new(n);
    let mut stats = Stats::default();
    let fail = |sim: &Sim, msg: String| {
        let tail: Vec<&str> = sim.log.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "seed {seed} ({n} beacons), round {}: {msg}\nstate:\n{}recent events:\n{}\nreplay: BEACON_SIM_SEED={seed} cargo test -p beacon-sims --test sims election_sim::",
            sim.round,
            sim.describe(),
            tail.join("\n")
        )
    };
    for _ in 0..phases {
        // Chaos: random faults for a random stretch.
        let chaos_rounds = rng.below(30);
        for _ in 0..chaos_rounds {
            if rng.percent(25) {
                let i = rng.below(n as u64) as usize;
                let j = (i + 1 + rng.below(n as u64 - 1) as usize) % n;
                match rng.below(7) {
                    0 => sim.isolate(i),
                    1 => sim.cut_link(i, j, true),
                    2 => sim.cut_link(i, j, false),
                    3 => sim.heal(),
                    4 | 5 if sim.nodes[i].is_some() && sim.live().len() > 1 => {
                        let detected = rng.percent(70);
                        sim.crash(i, detected)
                    }
                    _ if sim.nodes[i].is_none() => sim.restart(i),
                    _ => {}
                }
            }
            sim.round(&mut rng).map_err(|m| fail(&sim, m))?;
        }
        // Heal: links back, some crashed beacons restarted (at least one beacon runs).
        sim.heal();
        for i in 0..n {
            if sim.nodes[i].is_none() && (sim.live().is_empty() || rng.percent(60)) {
                sim.restart(i);
            }
        }
        stats.heals += 1;
        let mut converged = None;
        for r in 1..=CONVERGE_ROUNDS {
            sim.round(&mut rng).map_err(|m| fail(&sim, m))?;
            if let Some(leader) = sim.agreed_leader() {
                converged = Some((leader, r));
                break;
            }
        }
        let Some((leader, took)) = converged else {
            return Err(fail(
                &sim,
                format!("no single agreed leader within {CONVERGE_ROUNDS} rounds of healing"),
            ));
        };
        stats.worst_converge = stats.worst_converge.max(took);
        // Stable: nothing fails, so the leader must stay.
        for _ in 0..5 {
            sim.round(&mut rng).map_err(|m| fail(&sim, m))?;
            if sim.agreed_leader() != Some(leader) {
                return Err(fail(
                    &sim,
                    format!("leader moved away from beacon {leader} with no fault"),
                ));
            }
        }
    }
    Ok(stats)
}

fn run_all(n: usize) {
    let stats = run_seeds(500, "election_sim", |seed, _verbose| run_seed(seed, n, 20));
    let worst = stats.iter().map(|s| s.worst_converge).max().unwrap_or(0);
    let heals: u64 = stats.iter().map(|s| s.heals).sum();
    println!(
        "{n} beacons: {} seeds, {heals} heals, slowest convergence {worst} rounds (bound {CONVERGE_ROUNDS})",
        stats.len()
    );
}

#[test]
fn three_beacons_converge_under_random_faults() {
    run_all(3);
}

#[test]
fn five_beacons_converge_under_random_faults() {
    run_all(5);
}

/// The seed's demo, in the simulation: kill the leader, kill a follower, restart both.
#[test]
fn seed_demo_sequence() {
    let mut rng = Rng::new(1);
    let mut sim = Sim::new(3);
    for _ in 0..3 {
        sim.round(&mut rng).unwrap();
    }
    assert_eq!(sim.agreed_leader(), Some(0), "{}", sim.describe());

    sim.crash(0, true);
    // The connection drop re-runs the check at once: no tick needed.
    assert_eq!(sim.leaders(), vec![1]);
    sim.round(&mut rng).unwrap();
    assert_eq!(sim.agreed_leader(), Some(1), "{}", sim.describe());

    sim.crash(2, true);
    sim.round(&mut rng).unwrap();
    assert_eq!(sim.agreed_leader(), Some(1));
    let b = sim.nodes[1].as_ref().unwrap();
    assert!(!b.is_online(sim.addrs[0]) && !b.is_online(sim.addrs[2]));

    sim.restart(0);
    sim.restart(2);
    for _ in 0..3 {
        sim.round(&mut rng).unwrap();
        assert_eq!(
            sim.agreed_leader(),
            Some(1),
            "leadership must not move back"
        );
    }
    for i in 0..3 {
        let node = sim.nodes[i].as_ref().unwrap();
        assert!(
            sim.addrs.iter().all(|a| node.is_online(*a)),
            "{}",
            sim.describe()
        );
    }
}

/// An isolated leader keeps its claim (classic mode), the majority elects a new leader with a
/// higher term, and on healing the higher term wins everywhere in one round.
#[test]
fn isolated_leader_yields_to_the_higher_term_after_healing() {
    let mut rng = Rng::new(2);
    let mut sim = Sim::new(3);
    for _ in 0..3 {
        sim.round(&mut rng).unwrap();
    }
    assert_eq!(sim.agreed_leader(), Some(0));
    sim.isolate(0);
    // Silence. 0's last heartbeat reached 1 and 2 before round 3's tick; rounds 3, 4 and 5
    // count it, and round 6 (the 4th tick since it, the 3rd after the cut) elects 1.
    let mut took = 0;
    for r in 1..=6 {
        sim.round(&mut rng).unwrap();
        if sim.nodes[1].as_ref().unwrap().is_leader() {
            took = r;
            break;
        }
    }
    assert_eq!(took, 3, "failover by timeout\n{}", sim.describe());
    assert_eq!(sim.leaders(), vec![0, 1]);
    let (t0, t1) = (
        sim.nodes[0].as_ref().unwrap().term(),
        sim.nodes[1].as_ref().unwrap().term(),
    );
    assert!(t1 > t0);
    sim.heal();
    sim.round(&mut rng).unwrap();
    assert_eq!(sim.leaders(), vec![1]);
    sim.round(&mut rng).unwrap();
    assert_eq!(sim.agreed_leader(), Some(1), "{}", sim.describe());
}
