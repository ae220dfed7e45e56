//! Deterministic simulation of beacons' coordinators under faults, in quorum mode.
//!
//! Each seed drives 3 or 5 coordinators through a random schedule: symmetric and one-way
//! partitions, message loss, delay, duplication and reordering, crashes (some in the middle of
//! a leader's store, after its entries went out and before they reached its disk) and restarts
//! from what was stored. Clients register, hold and unregister all along, following
//! redirects and retrying on timeouts. After every step the history is checked:
//!
//! * no node ID is acknowledged to two registrations held at the same time;
//! * no acknowledged allocation is missing from a leader that has taken over;
//! * at most one leader per term; terms never decrease on any beacon, restarts included;
//!
//! and once the faults heal, one leader that has taken over must be followed by all within
//! [`HEAL_BOUND_MS`], serve a new registration, and every beacon must converge on the held
//! registrations.
//!
//! `BEACON_SIM_SEEDS=N` runs N seeds (default 2000); `BEACON_SIM_SEED=S` replays seed S and
//! prints its trace. A failing seed is printed with the last events before the failure.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

use beacon::coordinator::{
    Coordinator, CoordinatorConfig, Input, Mode, Output, RegisterRequest, Request, RequestError,
    Response, Target, Token, Unregister,
};
use beacon::election::Millis;
use beacon::registry::{FencingToken, IdRange, NodeId};
use beacon::replication::{Entry, PeerMessage, Snapshot};
use beacon_testkit::rng::SimRng as Rng;

const TICK: u64 = 100;
/// Simulated time advances in steps of this many milliseconds.
const STEP: u64 = 10;
/// How long faults are injected.
const FAULTY_MS: u64 = 8_000;
/// After healing, one serving leader followed by everyone within this.
const HEAL_BOUND_MS: u64 = 4_000;
/// A client gives up waiting for a reply after this and retries.
const REQUEST_TIMEOUT: u64 = 1_000;
/// Events kept for the report of a failing seed.
const TRACE_KEEP: usize = 60;

/// Fault rates of one seed (per simulated step of [`STEP`] ms, or per message).
#[derive(Debug, Clone)]
struct Faults {
    loss: f64,
    dup: f64,
    max_delay: u64,
    reorder: bool,
    partition: f64,
    one_way: f64,
    heal: f64,
    crash: f64,
    crash_mid_store: f64,
    restart: f64,
}

impl Faults {
    fn draw(rng: &mut Rng) -> Faults {
        Faults {
            loss: [0.0, 0.01, 0.05, 0.2][rng.below(4) as usize],
            dup: [0.0, 0.01, 0.05][rng.below(3) as usize],
            max_delay: [2, 20, 80, 250][rng.below(4) as usize],
            reorder: rng.chance(0.5),
            partition: [0.0, 0.002, 0.006][rng.below(3) as usize],
            one_way: [0.0, 0.002, 0.006][rng.below(3) as usize],
            heal: [0.005, 0.02][rng.below(2) as usize],
            crash: [0.0, 0.002, 0.005][rng.below(3) as usize],
            crash_mid_store: [0.0, 0.01][rng.below(2) as usize],
            restart: [0.01, 0.05][rng.below(2) as usize],
        }
    }

    fn healed(&self) -> Faults {
        Faults {
            loss: 0.0,
            dup: 0.0,
            max_delay: self.max_delay.min(20),
            reorder: false,
            partition: 0.0,
            one_way: 0.0,
            heal: 0.0,
            crash: 0.0,
            crash_mid_store: 0.0,
            restart: 1.0,
        }
    }
}

struct Flight {
    at: Millis,
    seq: u64,
    from: SocketAddr,
    /// Incarnations of sender and receiver when sent: a restart closes the connection, and
    /// what was on it is gone.
    from_life: u32,
    to: SocketAddr,
    to_life: u32,
    msg: PeerMessage,
}

/// What a beacon has on disk.
#[derive(Debug, Clone, Default)]
struct Disk {
    snapshot: Option<Snapshot>,
    entries: Vec<Entry>,
    term: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle {
        until: Millis,
    },
    Registering {
        addr: SocketAddr,
        sent: Option<(Token, Millis)>,
        retry_at: Millis,
    },
    Holding {
        addr: SocketAddr,
        until: Millis,
    },
    Unregistering {
        addr: SocketAddr,
        sent: Option<(Token, Millis)>,
        retry_at: Millis,
    },
}

struct Client {
    phase: Phase,
    hint: Option<SocketAddr>,
    registrations: u16,
}

/// An acknowledged registration the service still holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    id: NodeId,
    /// The fencing token: the log position of the entry.
    term: u64,
    index: u64,
    /// The term of the leader that acknowledged it: every leader of a later term has it.
    acked_in: u64,
}

struct Sim {
    seed: u64,
    rng: Rng,
    faults: Faults,
    now: Millis,
    seq: u64,
    beacons: Vec<SocketAddr>,
    nodes: BTreeMap<SocketAddr, Coordinator>,
    life: BTreeMap<SocketAddr, u32>,
    disk: BTreeMap<SocketAddr, Disk>,
    flights: Vec<Flight>,
    /// Directed links that drop everything.
    blocked: BTreeSet<(SocketAddr, SocketAddr)>,
    /// Latest delivery time per link, to keep links in order unless the seed reorders.
    link_clock: BTreeMap<(SocketAddr, SocketAddr), Millis>,
    next_tick: BTreeMap<SocketAddr, Millis>,
    clients: Vec<Client>,
    /// Outstanding requests: token -> (client, service address, is a registration).
    pending: BTreeMap<Token, (usize, SocketAddr, bool)>,
    next_token: Token,
    held: BTreeMap<SocketAddr, Held>,
    released: BTreeSet<SocketAddr>,
    releasing: BTreeMap<SocketAddr, FencingToken>,
    acks: u64,
    leader_of_term: BTreeMap<u64, SocketAddr>,
    last_terms: BTreeMap<SocketAddr, (u64, u64)>,
    trace: VecDeque<String>,
    verbose: bool,
}

type Checked = Result<(), String>;

fn beacon_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + i as u16))
}

fn service_addr(client: usize, n: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, client as u8 + 1], n + 1))
}

impl Sim {
    fn new(seed: u64, verbose: bool) -> Sim {
        let mut rng = Rng::new(seed);
        let n = if rng.chance(0.5) { 3 } else { 5 };
        let faults = Faults::draw(&mut rng);
        let beacons: Vec<SocketAddr> = (0..n).map(beacon_addr).collect();
        let clients = (0..1 + rng.below(4) as usize)
            .map(|_| Client {
                phase: Phase::Idle { until: 0 },
                hint: None,
                registrations: 0,
            })
            .collect();
        let mut sim = Sim {
            seed,
            faults,
            now: 0,
            seq: 0,
            nodes: BTreeMap::new(),
            life: BTreeMap::new(),
            disk: BTreeMap::new(),
            flights: Vec::new(),
            blocked: BTreeSet::new(),
            link_clock: BTreeMap::new(),
            next_tick: BTreeMap::new(),
            clients,
            pending: BTreeMap::new(),
            next_token: 1,
            held: BTreeMap::new(),
            released: BTreeSet::new(),
            releasing: BTreeMap::new(),
            acks: 0,
            leader_of_term: BTreeMap::new(),
            last_terms: BTreeMap::new(),
            trace: VecDeque::new(),
            verbose,
            beacons,
            rng,
        };
        let all = sim.beacons.clone();
        for b in &all {
            sim.nodes.insert(*b, Coordinator::new(sim.config(*b, 0)));
            sim.life.insert(*b, 0);
            let offset = sim.rng.below(TICK);
            sim.next_tick.insert(*b, TICK + offset);
        }
        sim.connect_all();
        sim
    }

    fn config(&self, me: SocketAddr, stored_term: u64) -> CoordinatorConfig {
        CoordinatorConfig {
            me,
            mode: Mode::Quorum,
            beacons: self.beacons.clone(),
            tick_ms: TICK,
            // Few IDs, so they wrap and are reused after their quarantine.
            id_range: IdRange { first: 1, last: 12 },
            lease_ms: u64::MAX / 4,
            id_reuse_delay_ms: 1_000,
            subscriptions: BTreeMap::new(),
            log_keep: 16,
            stored_term,
        }
    }

    fn note(&mut self, what: String) {
        if self.verbose {
            println!("{:>6} {what}", self.now);
        }
        self.trace.push_back(format!("{:>6} {what}", self.now));
        if self.trace.len() > TRACE_KEEP {
            self.trace.pop_front();
        }
    }

    fn report(&self, why: &str) -> String {
        format!(
            "seed {} failed at {} ms: {why}\nfaults: {:?}\nbeacons: {}\nlast events:\n{}\nreplay: BEACON_SIM_SEED={} cargo test --test coordinator_sim",
            self.seed,
            self.now,
            self.faults,
            self.beacons.len(),
            self.trace.iter().cloned().collect::<Vec<_>>().join("\n"),
            self.seed
        )
    }

    // ---- the network ---------------------------------------------------------------------

    fn send(&mut self, from: SocketAddr, to: SocketAddr, msg: PeerMessage) {
        let Some(&to_life) = self.life.get(&to).filter(|_| self.nodes.contains_key(&to)) else {
            return;
        };
        if self.blocked.contains(&(from, to)) || self.rng.chance(self.faults.loss) {
            return;
        }
        let copies = if self.rng.chance(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = self.now + 1 + self.rng.below(self.faults.max_delay);
            if !self.faults.reorder {
                let clock = self.link_clock.entry((from, to)).or_default();
                at = at.max(*clock);
                *clock = at;
            }
            self.seq += 1;
            self.flights.push(Flight {
                at,
                seq: self.seq,
                from,
                from_life: self.life[&from],
                to,
                to_life,
                msg: msg.clone(),
            });
        }
    }

    fn deliver_due(&mut self) -> Checked {
        let now = self.now;
        let mut due: Vec<Flight> = Vec::new();
        let mut i = 0;
        while i < self.flights.len() {
            if self.flights[i].at <= now {
                due.push(self.flights.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|f| (f.at, f.seq));
        for f in due {
            let current = |a: &SocketAddr, life: u32| {
                self.nodes.contains_key(a) && self.life.get(a) == Some(&life)
            };
            if !current(&f.from, f.from_life)
                || !current(&f.to, f.to_life)
                || self.blocked.contains(&(f.from, f.to))
            {
                continue;
            }
            self.step(
                f.to,
                Input::Peer {
                    from: f.from,
                    msg: f.msg,
                },
            )?;
        }
        Ok(())
    }

    /// A connection between `a` and `b` (re)opens: each greets the other.
    fn connect(&mut self, a: SocketAddr, b: SocketAddr) {
        for (x, y) in [(a, b), (b, a)] {
            if let Some(node) = self.nodes.get(&x) {
                let hello = node.greeting();
                self.send(x, y, hello);
            }
        }
    }

    fn connect_all(&mut self) {
        let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        for (i, a) in live.iter().enumerate() {
            for b in &live[i + 1..] {
                self.connect(*a, *b);
            }
        }
    }

    // ---- beacons -------------------------------------------------------------------------

    /// Feeds `input` to beacon `at` and carries out its outputs as the driver does: a
    /// leader's messages leave before its store; the store (term first), then everything
    /// else. A crash may fall between the two.
    fn step(&mut self, at: SocketAddr, input: Input) -> Checked {
        let now = self.now;
        let Some(node) = self.nodes.get_mut(&at) else {
            return Ok(());
        };
        let outputs = node.step(now, input);
        let (term, max_seen) = (node.election().term(), node.election().max_seen_term());
        self.disk.entry(at).or_default().term = max_seen;
        self.check_terms(at, term, max_seen)?;
        let mut rest = Vec::new();
        let mut early = false;
        for output in outputs {
            match output {
                Output::Send { to, msg } if msg.heartbeat.is_leader => {
                    early = true;
                    self.send(at, to, msg);
                }
                other => rest.push(other),
            }
        }
        if early && self.rng.chance(self.faults.crash_mid_store) {
            self.crash(at, "in the middle of storing")?;
            return Ok(());
        }
        for output in rest {
            match output {
                Output::Persist { snapshot, entries } => {
                    let disk = self.disk.entry(at).or_default();
                    if let Some(s) = snapshot {
                        disk.snapshot = Some(s);
                        disk.entries.clear();
                    }
                    disk.entries.extend(entries);
                }
                Output::Send { to, msg } => self.send(at, to, msg),
                Output::Reply { token, result } => self.on_reply(at, token, result)?,
                Output::LeaderChanged { leader, term } => {
                    self.note(format!("{at} follows {leader:?} in term {term}"));
                }
                Output::Notice(n) => self.note(format!("{at}: {n}")),
                Output::Committed(_) => {}
            }
        }
        Ok(())
    }

    fn check_terms(&mut self, at: SocketAddr, term: u64, max_seen: u64) -> Checked {
        let (last_term, last_seen) = self.last_terms.get(&at).copied().unwrap_or_default();
        if term < last_term || max_seen < last_seen {
            return Err(format!(
                "{at}: term went from {last_term} (seen {last_seen}) back to {term} (seen {max_seen})"
            ));
        }
        self.last_terms.insert(at, (term, max_seen));
        Ok(())
    }

    fn crash(&mut self, at: SocketAddr, how: &str) -> Checked {
        self.nodes.remove(&at);
        *self.life.get_mut(&at).unwrap() += 1;
        self.note(format!("CRASH {at} {how}"));
        let others: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        for other in others {
            // The connection drops: the survivors notice.
            self.step(other, Input::PeerDown { peer: at })?;
        }
        Ok(())
    }

    fn restart(&mut self, at: SocketAddr) -> Checked {
        let disk = self.disk.get(&at).cloned().unwrap_or_default();
        let (node, notices) =
            Coordinator::restore(self.config(at, disk.term), disk.snapshot, disk.entries)
                .expect("stored state loads");
        let (term, max_seen) = (node.election().term(), node.election().max_seen_term());
        self.nodes.insert(at, node);
        *self.life.get_mut(&at).unwrap() += 1;
        self.disk.entry(at).or_default().term = max_seen;
        self.note(format!("RESTART {at} (term {term}) {notices:?}"));
        self.check_terms(at, term, max_seen)?;
        self.next_tick.insert(at, self.now + TICK);
        let others: Vec<SocketAddr> = self.nodes.keys().copied().filter(|o| *o != at).collect();
        for other in others {
            self.connect(at, other);
        }
        Ok(())
    }

    fn tick_due(&mut self) -> Checked {
        let due: Vec<SocketAddr> = self
            .next_tick
            .iter()
            .filter(|(a, t)| **t <= self.now && self.nodes.contains_key(a))
            .map(|(a, _)| *a)
            .collect();
        for at in due {
            self.next_tick.insert(at, self.now + TICK);
            self.step(at, Input::Tick)?;
        }
        Ok(())
    }

    // ---- faults --------------------------------------------------------------------------

    fn inject_faults(&mut self) -> Checked {
        let f = self.faults.clone();
        if self.rng.chance(f.partition) {
            // A symmetric split into two sides.
            let side: BTreeSet<SocketAddr> = self
                .beacons
                .iter()
                .copied()
                .filter(|_| self.rng.chance(0.5))
                .collect();
            let resets = self.rng.chance(0.5);
            self.note(format!(
                "PARTITION {side:?} | rest{}",
                if resets { " (connections reset)" } else { "" }
            ));
            for a in &self.beacons.clone() {
                for b in &self.beacons.clone() {
                    if side.contains(a) != side.contains(b) {
                        self.blocked.insert((*a, *b));
                        if resets {
                            self.step(*a, Input::PeerDown { peer: *b })?;
                        }
                    }
                }
            }
        }
        if self.rng.chance(f.one_way) {
            let from = self.rng.pick(&self.beacons).unwrap();
            let to = self.rng.pick(&self.beacons).unwrap();
            if from != to {
                self.note(format!("ONE-WAY {from} -> {to} dropped"));
                self.blocked.insert((from, to));
            }
        }
        if !self.blocked.is_empty() && self.rng.chance(f.heal) {
            self.note("HEAL".into());
            self.heal();
        }
        if self.rng.chance(f.crash) {
            let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
            if let Some(victim) = self.rng.pick(&live) {
                self.crash(victim, "")?;
            }
        }
        let down: Vec<SocketAddr> = self
            .beacons
            .iter()
            .copied()
            .filter(|b| !self.nodes.contains_key(b))
            .collect();
        for b in down {
            if self.rng.chance(f.restart) {
                self.restart(b)?;
            }
        }
        Ok(())
    }

    fn heal(&mut self) {
        let cut: Vec<(SocketAddr, SocketAddr)> = self.blocked.iter().copied().collect();
        self.blocked.clear();
        for (a, b) in cut {
            self.connect(a, b);
        }
    }

    // ---- clients -------------------------------------------------------------------------

    fn target(&mut self, hint: Option<SocketAddr>) -> Option<SocketAddr> {
        if let Some(h) = hint.filter(|h| self.nodes.contains_key(h))
            && self.rng.chance(0.9)
        {
            return Some(h);
        }
        let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        self.rng.pick(&live)
    }

    fn request(
        &mut self,
        client: usize,
        addr: SocketAddr,
        request: Request,
    ) -> Option<(Token, SocketAddr)> {
        let hint = self.clients[client].hint;
        let to = self.target(hint)?;
        let token = self.next_token;
        self.next_token += 1;
        let is_register = matches!(request, Request::Register(_));
        self.pending.insert(token, (client, addr, is_register));
        Some((token, to))
    }

    fn clients_act(&mut self) -> Checked {
        let now = self.now;
        for i in 0..self.clients.len() {
            let phase = self.clients[i].phase;
            let next = match phase {
                Phase::Idle { until } if now >= until => {
                    let n = self.clients[i].registrations;
                    self.clients[i].registrations += 1;
                    Some(Phase::Registering {
                        addr: service_addr(i, n),
                        sent: None,
                        retry_at: now,
                    })
                }
                Phase::Registering {
                    addr,
                    sent: Some((_, at)),
                    ..
                } if now - at > REQUEST_TIMEOUT => Some(Phase::Registering {
                    addr,
                    sent: None,
                    retry_at: now,
                }),
                Phase::Holding { addr, until } if now >= until => {
                    // From the moment it asks to unregister, the service no longer uses it.
                    if let Some(h) = self.held.remove(&addr) {
                        self.releasing.insert(
                            addr,
                            FencingToken {
                                term: h.term,
                                index: h.index,
                            },
                        );
                    }
                    self.released.insert(addr);
                    Some(Phase::Unregistering {
                        addr,
                        sent: None,
                        retry_at: now,
                    })
                }
                Phase::Unregistering {
                    addr,
                    sent: Some((_, at)),
                    ..
                } if now - at > REQUEST_TIMEOUT => Some(Phase::Unregistering {
                    addr,
                    sent: None,
                    retry_at: now,
                }),
                _ => None,
            };
            if let Some(p) = next {
                self.clients[i].phase = p;
            }
            match self.clients[i].phase {
                Phase::Registering {
                    addr,
                    sent: None,
                    retry_at,
                } if now >= retry_at => {
                    let request = Request::Register(RegisterRequest {
                        node_type: "LOGIC".into(),
                        addr,
                        access_addr: None,
                        worker_num: 1,
                        metadata: String::new(),
                        wall_ms: 1_800_000_000_000 + now,
                    });
                    if let Some((token, to)) = self.request(i, addr, request.clone()) {
                        self.clients[i].phase = Phase::Registering {
                            addr,
                            sent: Some((token, now)),
                            retry_at,
                        };
                        self.step(to, Input::Request { token, request })?;
                    }
                }
                Phase::Unregistering {
                    addr,
                    sent: None,
                    retry_at,
                } if now >= retry_at => {
                    let token = self.releasing.get(&addr).copied().unwrap_or_default();
                    let request = Request::Unregister(Unregister {
                        target: Target::Addr(addr),
                        token,
                        release: true,
                    });
                    if let Some((token, to)) = self.request(i, addr, request.clone()) {
                        self.clients[i].phase = Phase::Unregistering {
                            addr,
                            sent: Some((token, now)),
                            retry_at,
                        };
                        self.step(to, Input::Request { token, request })?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn on_reply(
        &mut self,
        at: SocketAddr,
        token: Token,
        result: Result<Response, RequestError>,
    ) -> Checked {
        let Some((client, addr, is_register)) = self.pending.remove(&token) else {
            return Err(format!("{at} answered request {token} twice or unasked"));
        };
        if let Ok(Response::Registered { record, .. }) = &result {
            if !is_register || record.addr != addr {
                return Err(format!("{at} answered {addr}'s request with {record:?}"));
            }
            let acked_in = self.nodes[&at].election().term();
            let held = Held {
                id: record.node_id,
                term: record.term,
                index: record.index,
                acked_in,
            };
            self.acknowledged(at, addr, held)?;
        }
        if let Err(e) = &result {
            self.note(format!("REFUSED {addr} by {at}: {e}"));
        }
        let now = self.now;
        let c = &mut self.clients[client];
        if let Err(RequestError::NotLeader { leader }) = &result {
            c.hint = *leader;
        }
        let backoff = now + 20;
        c.phase = match (c.phase, result) {
            (Phase::Registering { sent, .. }, Ok(Response::Registered { .. }))
                if sent.map(|s| s.0) == Some(token) =>
            {
                c.hint = Some(at);
                Phase::Holding {
                    addr,
                    until: now + 100 + self.rng.below(1_500),
                }
            }
            (Phase::Registering { sent, addr, .. }, Err(_)) if sent.map(|s| s.0) == Some(token) => {
                Phase::Registering {
                    addr,
                    sent: None,
                    retry_at: backoff,
                }
            }
            (
                Phase::Unregistering { sent, .. },
                Ok(Response::Unregistered(_)) | Err(RequestError::UnknownTarget(_)),
            ) if sent.map(|s| s.0) == Some(token) => Phase::Idle {
                until: now + self.rng.below(500),
            },
            (Phase::Unregistering { sent, addr, .. }, Err(_))
                if sent.map(|s| s.0) == Some(token) =>
            {
                Phase::Unregistering {
                    addr,
                    sent: None,
                    retry_at: backoff,
                }
            }
            (phase, _) => phase, // a late answer to a request already retried
        };
        Ok(())
    }

    /// A registration was acknowledged: it must not share its ID with another held one.
    fn acknowledged(&mut self, at: SocketAddr, addr: SocketAddr, held: Held) -> Checked {
        let Held {
            id, term, index, ..
        } = held;
        self.acks += 1;
        self.note(format!("ACK {addr} -> ID {id} at {term}/{index} by {at}"));
        if self.released.contains(&addr) {
            return Ok(()); // a late duplicate answer; the service has moved on
        }
        if let Some(h) = self.held.get(&addr)
            && h.id != id
        {
            return Err(format!(
                "{addr} was acknowledged ID {} and then ID {id}",
                h.id
            ));
        }
        if let Some((other, h)) = self.held.iter().find(|(a, h)| **a != addr && h.id == id) {
            return Err(format!(
                "ID {id} acknowledged to {addr} by {at} at {term}/{index} while {other} holds it since {}/{}",
                h.term, h.index
            ));
        }
        self.held.insert(addr, held);
        Ok(())
    }

    // ---- invariants ----------------------------------------------------------------------

    fn check(&mut self) -> Checked {
        for (at, node) in &self.nodes {
            if !node.is_leader() {
                continue;
            }
            let term = node.election().term();
            match self.leader_of_term.get(&term) {
                Some(other) if other != at => {
                    return Err(format!("{at} and {other} both led term {term}"));
                }
                Some(_) => {}
                None => {
                    self.leader_of_term.insert(term, *at);
                }
            }
            if !node.has_taken_over() {
                continue;
            }
            for (addr, h) in &self.held {
                if h.acked_in > term {
                    continue; // acknowledged by a later leader; this one is stale
                }
                let kept = node.registry().get(h.id).is_some_and(|r| r.addr == *addr);
                if !kept {
                    return Err(format!(
                        "leader {at} (term {term}) lost ID {} of {addr}, acknowledged at {}/{}; it has {:?}",
                        h.id,
                        h.term,
                        h.index,
                        node.registry().get(h.id)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every beacon's view, for failure reports.
    fn dump(&self) -> String {
        let mut lines = Vec::new();
        for (a, n) in &self.nodes {
            lines.push(format!(
                "  {a}: follows {:?}, term {} (seen {}), taken over {}, at {}, commit {}",
                n.election().leader(),
                n.election().term(),
                n.election().max_seen_term(),
                n.has_taken_over(),
                n.position(),
                n.commit()
            ));
            if n.is_leader() {
                lines.push(format!("    {:?}", n.follower_progress()));
            }
        }
        lines.join("\n")
    }

    /// The one leader everyone follows, if there is one and it has taken over.
    fn settled_leader(&self) -> Option<SocketAddr> {
        if self.nodes.len() != self.beacons.len() {
            return None;
        }
        let leaders: Vec<&SocketAddr> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.is_leader())
            .map(|(a, _)| a)
            .collect();
        let [leader] = leaders[..] else {
            return None;
        };
        let followed = self
            .nodes
            .values()
            .all(|n| n.election().leader() == Some(*leader));
        (followed && self.nodes[leader].has_taken_over()).then_some(*leader)
    }

    fn advance(&mut self) -> Checked {
        self.now += STEP;
        self.deliver_due()?;
        self.tick_due()?;
        self.clients_act()?;
        self.inject_faults()?;
        self.check()
    }

    fn run(&mut self) -> Checked {
        while self.now < FAULTY_MS {
            self.advance()?;
        }
        // Heal everything and bring everyone back.
        self.faults = self.faults.healed();
        self.note("HEAL ALL".into());
        self.heal();
        let healed_at = self.now;
        let mut settled = None;
        while self.now - healed_at <= HEAL_BOUND_MS {
            self.advance()?;
            if let Some(leader) = self.settled_leader() {
                settled = Some(leader);
                break;
            }
        }
        let Some(leader) = settled else {
            return Err(format!(
                "no leader everyone follows {HEAL_BOUND_MS} ms after healing:\n{}",
                self.dump()
            ));
        };
        self.note(format!("SETTLED on {leader}"));
        // The settled leader serves a new registration, and everyone converges.
        let probe = SocketAddr::from(([10, 9, 9, 9], 9));
        let token = self.next_token;
        self.next_token += 1;
        let request = Request::Register(RegisterRequest {
            node_type: "LOGIC".into(),
            addr: probe,
            access_addr: None,
            worker_num: 1,
            metadata: String::new(),
            wall_ms: 0,
        });
        self.clients.push(Client {
            phase: Phase::Registering {
                addr: probe,
                sent: Some((token, self.now)),
                retry_at: u64::MAX,
            },
            hint: Some(leader),
            registrations: 1,
        });
        let probe_client = self.clients.len() - 1;
        self.pending.insert(token, (probe_client, probe, true));
        self.step(leader, Input::Request { token, request })?;
        let asked_at = self.now;
        while !self.held.contains_key(&probe) {
            if self.now - asked_at > HEAL_BOUND_MS {
                return Err(format!(
                    "the settled leader {leader} did not acknowledge a registration within {HEAL_BOUND_MS} ms:\n{}",
                    self.dump()
                ));
            }
            self.advance()?;
        }
        for _ in 0..(1_000 / STEP) {
            self.advance()?;
        }
        // Clients are still active: compare only what stays held through the last step.
        for (at, node) in &self.nodes {
            for (addr, h) in &self.held {
                if h.index <= node.commit()
                    && node.registry().get(h.id).is_none_or(|r| r.addr != *addr)
                {
                    return Err(format!(
                        "{at} (commit {}, at {}) lacks committed ID {} of {addr} (at {}/{}):\n{}",
                        node.commit(),
                        node.position(),
                        h.id,
                        h.term,
                        h.index,
                        self.dump()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Runs one seed; `Err` carries the report of a failure (or of a panic in the core).
fn run_seed(seed: u64, verbose: bool) -> Result<u64, String> {
    let outcome = std::panic::catch_unwind(|| {
        let mut sim = Sim::new(seed, verbose);
        match sim.run() {
            Ok(()) => Ok(sim.acks),
            Err(why) => Err(sim.report(&why)),
        }
    });
    outcome.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!(
            "seed {seed} panicked: {what}\nreplay: BEACON_SIM_SEED={seed} cargo test --test coordinator_sim"
        ))
    })
}

#[test]
fn seeded_faults_never_break_the_invariants() {
    if let Ok(seed) = std::env::var("BEACON_SIM_SEED") {
        let seed: u64 = seed.parse().expect("BEACON_SIM_SEED is a number");
        match run_seed(seed, true) {
            Ok(acks) => println!("seed {seed}: {acks} acknowledgements, invariants held"),
            Err(report) => panic!("{report}"),
        }
        return;
    }
    let seeds: u64 = std::env::var("BEACON_SIM_SEEDS")
        .map(|s| s.parse().expect("BEACON_SIM_SEEDS is a number"))
        .unwrap_or(2000);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let results: Vec<(u64, Result<u64, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    (0..seeds)
                        .filter(|seed| seed % workers == w)
                        .map(|seed| (seed, run_seed(seed, false)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    });
    let acks: u64 = results.iter().filter_map(|(_, r)| r.as_ref().ok()).sum();
    let failures: Vec<&(u64, Result<u64, String>)> =
        results.iter().filter(|(_, r)| r.is_err()).collect();
    println!(
        "{seeds} seeds, {acks} acknowledged registrations, {} failed",
        failures.len()
    );
    assert!(
        acks > seeds,
        "the clients got through: {acks} acknowledgements"
    );
    if let Some((_, Err(first))) = failures.first() {
        let seeds: Vec<u64> = failures.iter().map(|(s, _)| *s).collect();
        panic!("{} seeds failed: {seeds:?}\nfirst:\n{first}", seeds.len());
    }
}
