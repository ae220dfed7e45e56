//! Whole replicas under faults: beacons of any machine `S` served by `V`, driven through the
//! simulated network and disk exactly as the daemon drives them, with a [`Workload`] of
//! clients and invariants.
//!
//! Each step of a beacon stores its term, sends what its [`beacon::consensus::Ready`] lets
//! leave early, stores its entries through the real storage code (a crash may fall between
//! the two and tear the write) and only then releases the rest. Crashes close the
//! beacon's connections (what was on them is gone) and its peers see them drop; a restart
//! opens what it stored and dials everyone; a pause (SIGSTOP) keeps its connections open
//! while it neither ticks nor reads.
//!
//! Checked after every step, beside the workload's own invariants: at most one leader per
//! term (one serving leader where terms are not dealt by place, `Faults::undealt_terms`);
//! terms never decrease on any beacon, restarts included. After the faults heal, one
//! leader that has taken over must be followed by all within [`HEAL_BOUND_MS`], serve the
//! workload's probe, and, once the clients stop, every beacon must catch up with it and agree
//! with what the clients believe.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

use beacon::consensus::{
    self, ConsensusError, Input, InputOf, Message, Mode, Replica, Reply, ReplyError, Service, Token,
};
use beacon::sim::{Checked, Context, Probe, View, Workload};
use beacon::storage::{
    Early, Memory, Outbox, Storage, carry_out, carry_out_early_beside, release_stored,
    stores_in_background,
};
use beacon::time::Millis;
use beacon::wire::MachineWire;

use super::disk::Disk;
use super::faults::Faults;
use super::net::{self, Links, Mail};
use crate::rng::SimRng as Rng;

/// The beacons' tick.
pub const TICK: u64 = 100;
/// Simulated time advances in steps of this many milliseconds.
pub const STEP: u64 = 10;
/// How long faults are injected in a seeded run.
pub const FAULTY_MS: u64 = 8_000;
/// After healing, one serving leader followed by everyone within this.
pub const HEAL_BOUND_MS: u64 = 4_000;
/// How long a learner added to be promoted keeps up before its leader promotes it.
pub const PROMOTE_AFTER_MS: u64 = 1_000;
/// Events kept for the report of a failing seed.
const TRACE_KEEP: usize = 80;

/// The shape of one simulated cluster.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Voters.
    pub beacons: usize,
    /// Learners beside them: they follow and receive the log, never lead, count for no
    /// majority.
    pub learners: usize,
    pub mode: Mode,
    pub faults: Faults,
    /// Log entries kept before a snapshot (small, so snapshots are exercised).
    pub log_keep: usize,
    /// Clients of the workload: it sends as clients `0..clients`.
    pub clients: usize,
    /// Beacons beyond the initial members, not started: an operator adds them
    /// (`Faults::members`) as a new machine would join.
    pub spares: usize,
    /// Each beacon stores in the background, as the daemon does: a batch's store completes
    /// a while after its early half (steps go on meanwhile), and a crash loses the stores
    /// under way ([`consensus::Config::stores_reported`]). Otherwise every store is done
    /// before the next step.
    pub pipelined: bool,
}

impl Setup {
    /// The usual seeded cluster: three or five voters, a learner in three runs of ten (it
    /// must change nothing the voters decide), quorum mode, drawn faults, a log of 16
    /// entries; `clients` draws how many clients, after the rest.
    pub fn drawn(rng: &mut Rng, clients: impl FnOnce(&mut Rng) -> usize) -> Setup {
        let beacons = if rng.chance(0.5) { 3 } else { 5 };
        let learners = usize::from(rng.chance(0.3));
        let faults = Faults::draw(rng);
        Setup {
            beacons,
            spares: 0,
            learners,
            mode: Mode::Quorum,
            faults,
            log_keep: 16,
            clients: clients(rng),
            // Most as the daemon stores; the rest as every store done at once.
            pipelined: rng.chance(0.75),
        }
    }

    /// Three voters in quorum mode and no fault: where a broken service shows at once.
    pub fn calm(clients: usize) -> Setup {
        Setup {
            beacons: 3,
            spares: 0,
            learners: 0,
            mode: Mode::Quorum,
            faults: Faults::none(),
            log_keep: 16,
            clients,
            pipelined: true,
        }
    }
}

/// Counts of what a run exercised.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub held_back: u64,
    pub pauses: u64,
    pub crashes: u64,
    pub torn_writes: u64,
    pub snapshots: u64,
    /// Terms led (one per election, counting a leader that leads on in a later term).
    pub elections: u64,
    /// Leader transfers asked for, and those that handed the leadership over.
    pub transfers: u64,
    /// Read indexes asked for, and those given (each checked: not below any index
    /// committed when it was asked).
    pub reads: u64,
    pub reads_given: u64,
    /// Read indexes a follower asked its leader for, saying in which term it followed it
    /// (given at once where the two make a majority), and those given at once.
    pub reads_asked: u64,
    pub reads_asked_given: u64,
    /// A leader's reads it asked its followers to vouch for (one follower's word with its
    /// own a majority), and those given on a follower's word.
    pub reads_vouch_asked: u64,
    /// Reads asked of each of two beacons that both thought they led at once.
    pub reads_at_rival_leaders: u64,
    pub reads_vouched: u64,
    /// Questions a follower answered no to: it followed another leader, or another term.
    pub vouches_refused: u64,
    /// Commits a follower released on its leader's word before the step (each checked:
    /// its entry there stored on a majority of the voters).
    pub commits_heard: u64,
    /// Messages with terms or indexes beyond the bounds, sent posing as a beacon.
    pub rogues: u64,
    /// Steps whose outputs joined another step's in one batch (one store for both).
    pub merged: u64,
    /// Requests due together at one beacon stepped as one input, as the daemon steps a
    /// client's renewals written back to back (`Input::Requests`).
    pub batched: u64,
    /// Background stores completed, and those under way lost to a crash.
    pub stored_beside: u64,
    pub stores_lost: u64,
    /// Answers given before their batch's store (they rested on nothing it held), each
    /// batch's commit checked stored on a majority, the leader included, beforehand.
    pub answered_early: u64,
    /// Batches whose answers left before a store the beacon then crashed in.
    pub answered_then_crashed: u64,
    /// Renewal batches delivered that bridged a follower behind its new leader's base (the
    /// notes it lacked of the term before), and those that carried the whole table.
    pub renewal_bridges: u64,
    pub renewal_tables: u64,
    pub handed_over: u64,
    /// Terms claimed by two beacons (terms not dealt by place, `Faults::undealt_terms`):
    /// one of them at most may serve.
    pub shared_terms: u64,
    /// Follower tails never applied that gave way to a new leader's entries (the stored
    /// log rewritten instead of a whole snapshot fetched).
    pub tails_cut: u64,
    /// Whole states a leader sent a follower that installed them (its log was too far
    /// behind, or it had applied entries the leader's log replaced).
    pub installs: u64,
    /// Changes of membership asked of a leader, and those committed (learners promoted
    /// on their own among them).
    pub member_changes: u64,
    pub members_changed: u64,
    pub promotions: u64,
}

/// Something on its way.
enum Delivery<S: consensus::Machine, V: Service<S>> {
    /// A message between beacons. `lives` are the incarnations of sender and receiver when
    /// it was sent: a restart closes the connection, and what was on it is gone.
    /// `greeting`: the answer to the receiver's own handshake.
    Peer {
        from: SocketAddr,
        to: SocketAddr,
        lives: (u32, u32),
        /// Boxed: a message is several times the size of the other deliveries.
        msg: Box<Message<S>>,
        greeting: bool,
    },
    /// A client's request.
    Request {
        to: SocketAddr,
        life: u32,
        token: Token,
        request: V::Request,
    },
    /// A follower's request for its leader's read index, saying in which term it followed
    /// that leader when it asked (the real request travels on a connection of its own).
    ReadIndex {
        to: SocketAddr,
        life: u32,
        token: Token,
        asker: consensus::Asker,
    },
    /// A leader's question to a follower `to` in its incarnation `life` (the real question
    /// travels on a connection of its own).
    Vouch { to: SocketAddr, life: u32, ask: Ask },
    /// A follower's word that it followed the leader that asked, in the term asked.
    Vouched(Ask),
    /// A beacon's answer, with its term when it answered.
    Reply {
        from: SocketAddr,
        term: u64,
        token: Token,
        reply: Reply<S, V>,
    },
}

impl<S: consensus::Machine, V: Service<S>> Delivery<S, V> {
    /// The beacon that reads it (a stopped one reads nothing).
    fn reader(&self) -> Option<SocketAddr> {
        match self {
            Delivery::Peer { to, .. }
            | Delivery::Request { to, .. }
            | Delivery::ReadIndex { to, .. }
            | Delivery::Vouch { to, .. } => Some(*to),
            Delivery::Vouched(ask) => Some(ask.leader),
            Delivery::Reply { .. } => None,
        }
    }
}

/// A leader's question to a follower: does it follow `leader` in `term` now? Asked for
/// read `token`, whose index is `index` once one follower says it does.
#[derive(Debug, Clone, Copy)]
struct Ask {
    leader: SocketAddr,
    /// The leader's incarnation: the reads that asked die with it.
    leader_life: u32,
    term: u64,
    token: Token,
    index: u64,
}

/// Everything but the workload: the beacons, their disks, the network and the faults.
pub struct Core<S: consensus::Machine, V: Service<S>> {
    pub seed: u64,
    rng: Rng,
    /// Draws the operator's maintenance (leader transfers), apart from `rng`.
    maintenance: Rng,
    /// Draws the reads, apart from the others.
    reader: Rng,
    /// Reads waiting for their read index: the highest index committed anywhere when each
    /// was asked, and where.
    reads: BTreeMap<Token, (u64, SocketAddr, SocketAddr)>,
    pub faults: Faults,
    pub now: Millis,
    /// Every beacon: the voters, then the learners, then the spares.
    pub beacons: Vec<SocketAddr>,
    /// Beacons started at least once (the initial members, and spares once added).
    started: BTreeSet<SocketAddr>,
    /// Spares added: the membership each was given to start with (as `beacon --join`
    /// hands it the membership of the beacon it asked).
    /// with the log index of the change that added it.
    joined: BTreeMap<SocketAddr, (consensus::Members, u64)>,
    /// Draws the operator's membership changes, apart from the others.
    operator: Rng,
    /// Draws which requests due together are stepped as one, apart from the others.
    batcher: Rng,
    pub nodes: BTreeMap<SocketAddr, Replica<S, V>>,
    disks: BTreeMap<SocketAddr, Disk<S>>,
    /// The last commit index of each leader found stored on a majority.
    durable_checked: BTreeMap<SocketAddr, u64>,
    /// Per beacon, the term it last led in and the commit index it had when first seen
    /// leading in it.
    commit_brought: BTreeMap<SocketAddr, (u64, u64)>,
    life: BTreeMap<SocketAddr, u32>,
    /// Stopped beacons and when they resume.
    pub paused: BTreeMap<SocketAddr, Millis>,
    pub links: Links<SocketAddr>,
    mail: Mail<Delivery<S, V>>,
    next_tick: BTreeMap<SocketAddr, Millis>,
    /// Per client: the beacon it last found leading.
    hints: Vec<Option<SocketAddr>>,
    /// Requests awaiting an answer, by token: the client's, or `None` for scripted ones.
    pending: BTreeMap<Token, Option<usize>>,
    /// Answers to scripted requests.
    pub answered: BTreeMap<Token, Reply<S, V>>,
    next_token: Token,
    pub stats: Stats,
    /// The beacon that claimed each term first, and the one that served in it.
    leader_of_term: BTreeMap<u64, SocketAddr>,
    server_of_term: BTreeMap<u64, SocketAddr>,
    shared_terms: BTreeSet<u64>,
    last_terms: BTreeMap<SocketAddr, (u64, u64)>,
    /// Every change told to watchers as committed, by log index, as the first beacon told
    /// it: every beacon must tell the same change at that index, or a watch resumed at
    /// another beacon after a failover would hear another story.
    told: BTreeMap<u64, S::Change>,
    /// Per beacon, where its history stands: the index it began after (its start, a
    /// snapshot installed) or the last it told a change of, whichever is later (what it
    /// tells next must come after it), and the last it told since it started.
    told_through: BTreeMap<SocketAddr, (u64, u64)>,
    /// Per beacon, the steps of the batch not carried out yet (merged, as the driver
    /// merges what queued up while it was busy: one store for all).
    batch: BTreeMap<SocketAddr, consensus::Ready<S, V>>,
    /// Per beacon storing in the background ([`Setup::pipelined`]): the store under way
    /// and what waits behind it.
    pipes: BTreeMap<SocketAddr, Pipe<S, V>>,
    pipelined: bool,
    trace: VecDeque<String>,
    verbose: bool,
    config: consensus::Config,
    fresh: Box<dyn Fn() -> (S, V)>,
}

/// A beacon's background stores, as the daemon's driver keeps them (`server/driver/store.rs`).
struct Pipe<S: consensus::Machine, V: Service<S>> {
    /// The store under way: the carry-outs waiting for it, its last entry, the entries, and
    /// when it completes.
    storing: Option<Storing<S, V>>,
    /// Carry-outs whose early half is done, waiting for the store under way.
    queued: Option<Early<S, V>>,
    /// The stored log holds more than it keeps: the next batch is carried out whole.
    compact_due: bool,
}

struct Storing<S: consensus::Machine, V: Service<S>> {
    early: Early<S, V>,
    through: Option<consensus::Position>,
    store: consensus::Store<S>,
    due: Millis,
}

impl<S: consensus::Machine, V: Service<S>> Default for Pipe<S, V> {
    fn default() -> Self {
        Pipe {
            storing: None,
            queued: None,
            compact_due: false,
        }
    }
}

/// A simulated cluster and its workload.
pub struct Sim<S: consensus::Machine, V: Service<S>, W> {
    pub core: Core<S, V>,
    pub workload: W,
}

/// Beacon `i`'s address.
pub fn beacon_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + i as u16))
}

impl<S, V, W> Sim<S, V, W>
where
    S: MachineWire,
    V: Service<S>,
    W: Workload<S, V>,
{
    /// A cluster of `setup.beacons`, each starting from `fresh()` (an empty state and its
    /// service), with every link up.
    pub fn new(
        seed: u64,
        setup: Setup,
        fresh: impl Fn() -> (S, V) + 'static,
        workload: W,
        verbose: bool,
    ) -> Self {
        let voters: Vec<SocketAddr> = (0..setup.beacons).map(beacon_addr).collect();
        let learners: Vec<SocketAddr> = (setup.beacons..setup.beacons + setup.learners)
            .map(beacon_addr)
            .collect();
        let members: Vec<SocketAddr> = voters.iter().chain(&learners).copied().collect();
        let spares = (0..setup.spares).map(|i| beacon_addr(members.len() + i));
        let beacons: Vec<SocketAddr> = members.iter().copied().chain(spares).collect();
        let config = consensus::Config {
            me: beacons[0],
            mode: setup.mode,
            beacons: voters.clone(),
            learners,
            members_index: 0,
            tick_ms: TICK,
            log_keep: setup.log_keep,
            stored: consensus::Promise::default(),
            deal_terms: !(setup.faults.undealt_terms && setup.mode == Mode::Quorum),
            promote_after_ms: Some(PROMOTE_AFTER_MS),
            stores_reported: setup.pipelined,
            flush_per_batch: setup.pipelined,
        };
        let mut core = Core {
            seed,
            rng: Rng::new(seed ^ 0x5EED),
            // Leader transfers draw on a random source of their own, so a seed's other
            // faults strike as they did before transfers were simulated.
            maintenance: Rng::new(seed ^ 0x7EA5),
            reader: Rng::new(seed ^ 0x4EAD),
            reads: BTreeMap::new(),
            durable_checked: BTreeMap::new(),
            commit_brought: BTreeMap::new(),
            faults: setup.faults,
            now: 0,
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            life: BTreeMap::new(),
            paused: BTreeMap::new(),
            links: Links::default(),
            mail: Mail::default(),
            next_tick: BTreeMap::new(),
            hints: vec![None; setup.clients],
            pending: BTreeMap::new(),
            answered: BTreeMap::new(),
            next_token: 1,
            stats: Stats::default(),
            leader_of_term: BTreeMap::new(),
            server_of_term: BTreeMap::new(),
            shared_terms: BTreeSet::new(),
            last_terms: BTreeMap::new(),
            told: BTreeMap::new(),
            told_through: BTreeMap::new(),
            batch: BTreeMap::new(),
            pipes: BTreeMap::new(),
            pipelined: setup.pipelined,
            trace: VecDeque::new(),
            verbose,
            config,
            fresh: Box::new(fresh),
            beacons,
            started: members.iter().copied().collect(),
            joined: BTreeMap::new(),
            operator: Rng::new(seed ^ 0x3E3B),
            batcher: Rng::new(seed ^ 0xBA7C),
        };
        for b in core.beacons.clone() {
            core.life.insert(b, 0);
            core.disks.insert(b, Disk::default());
        }
        for b in members {
            core.start(b).expect("an empty disk opens");
            let offset = core.rng.below(TICK);
            core.next_tick.insert(b, TICK + offset);
        }
        core.connect_all();
        Sim { core, workload }
    }

    /// One step of [`STEP`] ms: pauses end, mail arrives, beacons tick, clients act, faults
    /// strike, and everything is checked.
    pub fn advance(&mut self) -> Checked {
        self.step_all(true)
    }

    /// One step; the clients act only if `act`.
    fn step_all(&mut self, act: bool) -> Checked {
        let core = &mut self.core;
        core.now += STEP;
        core.resume_due();
        let paused = core.paused.clone();
        let due = core.mail.due(core.now, |d| {
            d.reader().is_none_or(|r| !paused.contains_key(&r))
        });
        let mut due = due.into_iter().peekable();
        while let Some(d) = due.next() {
            match d {
                Delivery::Peer {
                    from,
                    to,
                    lives,
                    msg,
                    greeting,
                } => {
                    if !core.current(from, lives.0)
                        || !core.current(to, lives.1)
                        || core.links.is_cut(from, to)
                    {
                        continue;
                    }
                    if !greeting {
                        // As the daemon does: a follower releases the commit its leader's
                        // message tells before the step (reads may answer through it).
                        let heard = core.nodes[&to].commit_heard(from, &msg);
                        if let Some(commit) = heard {
                            core.check_heard_commit(to, from, commit)?;
                        }
                    }
                    let msg = *msg;
                    if let Some(batch) = &msg.renewals {
                        core.stats.renewal_bridges += u64::from(batch.bridge.is_some());
                        core.stats.renewal_tables += u64::from(batch.table.is_some());
                    }
                    let input = if greeting {
                        Input::Greeting { from, msg }
                    } else {
                        Input::Peer { from, msg }
                    };
                    core.feed(to, input)?;
                }
                Delivery::Request {
                    to,
                    life,
                    token,
                    request,
                } => {
                    if !core.current(to, life) {
                        continue;
                    }
                    // As the daemon does with a client's requests written back to back:
                    // those due next at the same beacon are, half the time, one input.
                    let mut requests = vec![(token, request)];
                    if core.batcher.below(2) == 0 {
                        while let Some(Delivery::Request { to: t, life: l, .. }) = due.peek()
                            && (*t, *l) == (to, life)
                            && let Some(Delivery::Request { token, request, .. }) = due.next()
                        {
                            requests.push((token, request));
                        }
                    }
                    if requests.len() == 1 {
                        let (token, request) = requests.pop().expect("one");
                        core.feed(to, Input::Request { token, request })?;
                    } else {
                        core.stats.batched += 1;
                        core.feed(to, Input::Requests { requests })?;
                    }
                }
                Delivery::ReadIndex {
                    to,
                    life,
                    token,
                    asker,
                } => {
                    if !core.current(to, life) {
                        continue;
                    }
                    // As the daemon does: answered from the replica as its last step left
                    // it (its batch perhaps not carried out yet) when the request alone
                    // confirms the leadership, else stepped.
                    let confirmed = core.nodes[&to].read_index_confirmed(asker);
                    let voters = &core.nodes[&to].members().voters;
                    if confirmed.is_some() && !voters.contains(&asker.from) {
                        return Err(format!(
                            "{to} gave read {token} its index on the word of {}, a learner",
                            asker.from
                        ));
                    }
                    match confirmed {
                        Some(index) => core.read_answered(to, token, index, true)?,
                        None => core.feed(
                            to,
                            Input::ReadIndex {
                                token,
                                asker: Some(asker),
                            },
                        )?,
                    }
                }
                Delivery::Vouch { to, life, ask } => {
                    // As the daemon does: answered from the replica as its last step left
                    // it, by the connection that brought the question.
                    if !core.current(to, life) {
                        continue;
                    }
                    if core.nodes[&to].vouches_for(ask.leader, ask.term) {
                        let word = format!("vouched for read {} to {}", ask.token, ask.leader);
                        core.post(word, Delivery::Vouched(ask));
                    } else {
                        core.stats.vouches_refused += 1;
                    }
                }
                Delivery::Vouched(ask) => {
                    // The reads that asked died with the leader's incarnation.
                    let (at, token) = (ask.leader, ask.token);
                    if core.current(at, ask.leader_life) && core.reads.contains_key(&token) {
                        core.stats.reads_vouched += 1;
                        core.read_answered(at, token, ask.index, false)?;
                    }
                }
                Delivery::Reply {
                    from,
                    term,
                    token,
                    reply,
                } => {
                    let Some(client) = core.pending.remove(&token) else {
                        return Err(format!("{from} answered request {token} twice or unasked"));
                    };
                    let Some(client) = client else {
                        core.answered.insert(token, reply);
                        continue;
                    };
                    match &reply {
                        Err(ReplyError::Consensus(ConsensusError::NotLeader { leader })) => {
                            core.hints[client] = *leader;
                        }
                        Ok(_) => core.hints[client] = Some(from),
                        Err(_) => {}
                    }
                    self.workload.deliver(core, from, term, token, reply)?;
                }
            }
        }
        // Background stores due now complete (their beacons step what they allow), then
        // what arrived in this step is carried out per beacon in one batch.
        core.complete_stores()?;
        core.flush_all()?;
        core.tick_due()?;
        if act {
            self.workload.act(core)?;
        }
        core.inject_faults()?;
        self.check()
    }

    fn check(&mut self) -> Checked {
        let core = &mut self.core;
        for (at, node) in &core.nodes {
            if !node.is_leader() {
                continue;
            }
            if !node.members().voters.contains(at) {
                return Err(format!("{at}, no voter in its own view, leads"));
            }
            let term = node.election().term();
            match core.leader_of_term.get(&term) {
                // Terms are dealt by place among the voters: once the voters change, two
                // beacons may be dealt one term, and promises keep one serving it.
                Some(other) if other != at && core.config.deal_terms && !core.reconfigured() => {
                    return Err(format!("{at} and {other} both led term {term}"));
                }
                Some(other) if other != at => {
                    // Undealt terms: two may claim one, the promises let one serve.
                    if core.shared_terms.insert(term) {
                        core.stats.shared_terms += 1;
                    }
                }
                Some(_) => {}
                None => {
                    core.leader_of_term.insert(term, *at);
                }
            }
            if !node.serving() {
                continue;
            }
            match core.server_of_term.get(&term) {
                Some(other) if other != at => {
                    return Err(format!("{at} and {other} both served term {term}"));
                }
                Some(_) => {}
                None => {
                    core.server_of_term.insert(term, *at);
                }
            }
        }
        let views = core.views();
        self.workload.check(core.now, &views)
    }

    /// The seeded run: faults for [`FAULTY_MS`], then everything heals; one leader must
    /// settle, serve the probe, and the replicas converge.
    pub fn run(&mut self) -> Checked {
        while self.core.now < FAULTY_MS {
            self.advance()?;
        }
        self.core.faults = self.core.faults.healed();
        self.core.note("HEAL ALL".into());
        self.core.heal();
        self.core.paused.clear();
        // Messages a slow link held back arrive now (in order): a network that has healed
        // no longer delays what was sent before (else the bound below would measure the
        // last slow fault, not the recovery).
        let soon = self.core.now + STEP;
        self.core
            .mail
            .bring_forward(soon, |d| matches!(d, Delivery::Peer { .. }));
        self.core.links.catch_up(soon);
        let healed_at = self.core.now;
        let mut settled = None;
        while self.core.now - healed_at <= HEAL_BOUND_MS {
            self.advance()?;
            if let Some(leader) = self.core.settled_leader() {
                settled = Some(leader);
                break;
            }
        }
        let Some(leader) = settled else {
            return Err(format!(
                "no leader everyone follows {HEAL_BOUND_MS} ms after healing:\n{}",
                self.core.dump()
            ));
        };
        self.core.note(format!("SETTLED on {leader}"));
        // The settled leader serves the probe (held requests may still arrive meanwhile; a
        // leader may still move on to a later term, which a client rides out by retrying).
        let asked_at = self.core.now;
        let mut to = leader;
        let probe = self.workload.probe();
        let mut token = self.core.scripted_request(to, probe.clone(), Some(1));
        loop {
            let late = self.core.now - asked_at > HEAL_BOUND_MS;
            match self.core.answered.get(&token) {
                Some(reply) => match self.workload.probe_answer(reply) {
                    Probe::Served => break,
                    Probe::Retry if !late => {
                        to = self.core.settled_leader().unwrap_or(to);
                        token = self.core.scripted_request(to, probe.clone(), Some(1));
                    }
                    _ => {
                        return Err(format!(
                            "the settled leader {to} refused the probe: {reply:?}\n{}",
                            self.core.dump()
                        ));
                    }
                },
                None if late => {
                    return Err(format!(
                        "the settled leader {to} did not serve the probe within {HEAL_BOUND_MS} ms:\n{}",
                        self.core.dump()
                    ));
                }
                None => self.advance()?,
            }
        }
        for _ in 0..(1_000 / STEP) {
            self.advance()?;
        }
        // The clients stop sending: every beacon catches up with the leader.
        let quiet_at = self.core.now;
        while !self.core.caught_up() {
            if self.core.now - quiet_at > HEAL_BOUND_MS {
                return Err(format!(
                    "the beacons did not catch up with the leader within {HEAL_BOUND_MS} ms of quiet:\n{}",
                    self.core.dump()
                ));
            }
            self.step_all(false)?;
        }
        let views = self.core.members_view();
        self.workload
            .converged(self.core.now, &views)
            .map_err(|e| format!("{e}\n{}", self.core.dump()))
    }

    /// Runs `ms` (the workload acts, faults as the setup says), panicking on a broken
    /// invariant.
    pub fn run_for(&mut self, ms: Millis) {
        let until = self.core.now + ms;
        while self.core.now < until {
            self.advance()
                .unwrap_or_else(|e| panic!("{e}\n{}", self.core.dump()));
        }
    }

    /// Runs until scripted request `token` is answered (at most `ms`), and returns the answer.
    pub fn answer(&mut self, token: Token, ms: Millis) -> Reply<S, V> {
        let until = self.core.now + ms;
        while !self.core.answered.contains_key(&token) {
            assert!(
                self.core.now < until,
                "request {token} unanswered\n{}",
                self.core.dump()
            );
            self.advance()
                .unwrap_or_else(|e| panic!("{e}\n{}", self.core.dump()));
        }
        self.core.answered[&token].clone()
    }

    /// The report of a failure: the seed, the faults, the last events.
    pub fn report(&self, why: &str, test: &str) -> String {
        let c = &self.core;
        format!(
            "seed {} failed at {} ms: {why}\nfaults: {:?}\nbeacons: {}, {}\nlast events:\n{}\nreplay: BEACON_SIM_SEED={} cargo test -p beacon-sims --test sims {test}::",
            c.seed,
            c.now,
            c.faults,
            c.beacons.len(),
            if c.pipelined {
                "storing in the background"
            } else {
                "every store done at once"
            },
            c.trace.iter().cloned().collect::<Vec<_>>().join("\n"),
            c.seed
        )
    }
}

impl<S: MachineWire, V: Service<S>> Context<V::Request> for Core<S, V> {
    fn now(&self) -> Millis {
        self.now
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.chance(p)
    }

    fn send(&mut self, client: usize, request: V::Request) -> Option<Token> {
        let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        let to = match self.hints[client].filter(|h| self.nodes.contains_key(h)) {
            Some(h) if self.rng.chance(0.9) => h,
            _ => self.rng.pick(&live)?,
        };
        let token = self.next_token;
        self.next_token += 1;
        self.pending.insert(token, Some(client));
        self.send_request(to, token, request, None);
        Some(token)
    }

    fn note(&mut self, what: String) {
        let line = format!("{:>6} {what}", self.now);
        if self.verbose {
            println!("{line}");
        }
        self.trace.push_back(line);
        if self.trace.len() > TRACE_KEEP {
            self.trace.pop_front();
        }
    }
}

impl<S: MachineWire, V: Service<S>> Core<S, V> {
    /// Whether the membership may have changed (an operator changes it in this run).
    fn reconfigured(&self) -> bool {
        self.stats.member_changes > 0
    }

    fn current(&self, at: SocketAddr, life: u32) -> bool {
        self.nodes.contains_key(&at) && self.life.get(&at) == Some(&life)
    }

    /// Whether `at` runs and is not stopped.
    pub fn live(&self, at: SocketAddr) -> bool {
        self.nodes.contains_key(&at) && !self.paused.contains_key(&at)
    }

    /// Every running replica.
    pub fn views(&self) -> Vec<View<'_, S, V>> {
        self.nodes
            .iter()
            .map(|(addr, replica)| View {
                addr: *addr,
                replica,
            })
            .collect()
    }

    // ---- the network ---------------------------------------------------------------------

    fn send_peer(&mut self, from: SocketAddr, to: SocketAddr, msg: Message<S>, greeting: bool) {
        if !self.nodes.contains_key(&to) {
            return;
        }
        let lives = (self.life[&from], self.life[&to]);
        let net = self.faults.net;
        for at in self.links.arrivals(&mut self.rng, &net, self.now, from, to) {
            self.mail.push(
                at,
                Delivery::Peer {
                    from,
                    to,
                    lives,
                    msg: Box::new(msg.clone()),
                    greeting,
                },
            );
        }
    }

    /// Sends a request to beacon `to`, arriving after `delay` (or a random one, perhaps held
    /// back for seconds).
    fn send_request(
        &mut self,
        to: SocketAddr,
        token: Token,
        request: V::Request,
        delay: Option<Millis>,
    ) {
        let life = self.life[&to];
        let at = match delay {
            Some(d) => self.now.saturating_add(d),
            None => match self.client_arrival(format!("request {token} to {to}")) {
                Some(at) => at,
                None => return,
            },
        };
        self.mail.push(
            at,
            Delivery::Request {
                to,
                life,
                token,
                request,
            },
        );
    }

    /// Sends a follower's read-index request to its leader `to`: late, lost or held back
    /// as a request may be.
    fn send_read_index(&mut self, to: SocketAddr, token: Token, asker: consensus::Asker) {
        let life = self.life[&to];
        let Some(at) = self.client_arrival(format!("read index {token} to {to}")) else {
            return;
        };
        self.mail.push(
            at,
            Delivery::ReadIndex {
                to,
                life,
                token,
                asker,
            },
        );
    }

    /// Sends `delivery` (`what`, for the notes) on a connection of its own: late, lost or
    /// held back as a request may be.
    fn post(&mut self, what: String, delivery: Delivery<S, V>) {
        if let Some(at) = self.client_arrival(what) {
            self.mail.push(at, delivery);
        }
    }

    /// When a request sent now (`what`) arrives on its own connection: after a random
    /// delay, held back for seconds, or never (lost).
    fn client_arrival(&mut self, what: String) -> Option<Millis> {
        if self.rng.chance(self.faults.hold) {
            self.stats.held_back += 1;
            self.note(format!("HOLD {what}"));
            return Some(self.now + 1_500 + self.rng.below(4_500));
        }
        if self.rng.chance(self.faults.net.loss) {
            return None;
        }
        Some(self.now + 1 + self.rng.below(self.faults.net.max_delay))
    }

    fn send_reply(&mut self, from: SocketAddr, token: Token, reply: Reply<S, V>) {
        if self.rng.chance(self.faults.net.loss) {
            return;
        }
        let term = self.nodes[&from].election().term();
        let at = self.now + 1 + self.rng.below(self.faults.net.max_delay);
        self.mail.push(
            at,
            Delivery::Reply {
                from,
                term,
                token,
                reply,
            },
        );
    }

    /// `a` dials `b` (and `b` dials `a`): each handshake carries the dialer's state, and
    /// its answer the other's, which may overtake or trail what the other sends itself.
    fn connect(&mut self, a: SocketAddr, b: SocketAddr) {
        for (x, y) in [(a, b), (b, a)] {
            if let (Some(dialer), Some(acceptor)) = (self.nodes.get(&x), self.nodes.get(&y)) {
                // As the daemon does: a greeting claims only what is stored.
                let (hello, answer) = (dialer.stored_greeting(), acceptor.stored_greeting());
                self.send_peer(x, y, hello, false);
                self.send_peer(y, x, answer, true);
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

    /// Starts `at` from its disk.
    fn start(&mut self, at: SocketAddr) -> Checked {
        let disk = self.disks.get_mut(&at).expect("every beacon has a disk");
        let restored = disk
            .open()
            .map_err(|e| format!("{at} cannot open its disk: {e}"))?;
        if let Some(t) = &restored.truncated {
            self.note(format!("{at}: torn log tail cut off: {t:?}"));
        }
        let mut config = consensus::Config {
            me: at,
            stored: restored.promise,
            ..self.config.clone()
        };
        if let Some((m, index)) = self.joined.get(&at) {
            config.beacons = m.voters.iter().copied().collect();
            config.learners = m.learners.iter().copied().collect();
            config.members_index = *index;
        }
        let (state, service) = (self.fresh)();
        let (node, notices) = Replica::restore(
            config,
            state,
            service,
            restored.snapshot,
            restored.entries,
            restored.commit,
        )
        .map_err(|e| format!("{at} cannot start from its disk: {e}"))?;
        let (term, max_seen) = (node.election().term(), node.election().max_seen_term());
        // The changes of replayed entries are never told: its history starts after them.
        // Changes of the entries it applied at start were never told: its history begins
        // after them (those it left for the leader to confirm are told as they apply).
        self.told_through.insert(at, (node.applied().index, 0));
        self.nodes.insert(at, node);
        *self.life.get_mut(&at).expect("known beacon") += 1;
        if !notices.is_empty() {
            self.note(format!("{at}: {notices:?}"));
        }
        self.check_terms(at, term, max_seen, true)
    }

    /// Feeds `input` to beacon `at` and carries out what it asks at once.
    pub fn step(&mut self, at: SocketAddr, input: InputOf<S, V>) -> Checked {
        self.feed(at, input)?;
        self.flush(at)
    }

    /// Beacon `at` gave read `token` the read index `index` (`by_follower`: a follower
    /// asked it): no lower than what any beacon had committed when the read was asked.
    fn read_answered(
        &mut self,
        at: SocketAddr,
        token: u64,
        index: u64,
        by_follower: bool,
    ) -> Checked {
        let Some((floor, asked, holder)) = self.reads.remove(&token) else {
            return Ok(());
        };
        self.stats.reads_given += 1;
        if by_follower {
            self.stats.reads_asked_given += 1;
        }
        if index < floor {
            return Err(format!(
                "{at} gave read {token} (asked at {asked}) the read index {index}, below {floor}, which {holder} had committed when it asked: a stale read"
            ));
        }
        Ok(())
    }

    /// Feeds `input` to beacon `at`; what it asks joins the beacon's batch, carried out by
    /// [`Core::flush`].
    fn feed(&mut self, at: SocketAddr, input: InputOf<S, V>) -> Checked {
        let now = self.now;
        let Some(node) = self.nodes.get_mut(&at) else {
            return Ok(());
        };
        let was_leading = node.is_leader().then(|| node.election().term());
        let asked_by_follower = match &input {
            Input::ReadIndex {
                token,
                asker: Some(_),
            } => Some(*token),
            _ => None,
        };
        let mut ready = node.step(now, input);
        let (term, max_seen) = (node.election().term(), node.election().max_seen_term());
        if node.is_leader() && was_leading != Some(term) {
            self.stats.elections += 1;
        }
        let mut stale = Ok(());
        for event in ready.take_events() {
            if let consensus::Event::Transferred { result: Ok(to), .. } = &event
                && *to != at
            {
                self.stats.handed_over += 1;
            }
            if let consensus::Event::Notice(n) = &event
                && n.starts_with("installed a snapshot from leader")
            {
                self.stats.installs += 1;
            }
            if let consensus::Event::Notice(n) = &event
                && n.starts_with("promoting ")
            {
                self.stats.promotions += 1;
            }
            if let consensus::Event::MembersChanged { result: Ok(_), .. } = &event {
                self.stats.members_changed += 1;
            }
            if let consensus::Event::ReadIndex {
                token,
                result: Ok(index),
            } = &event
            {
                let by_follower = asked_by_follower == Some(*token);
                stale = stale.and(self.read_answered(at, *token, *index, by_follower));
            }
            self.note(format!("{at}: {event:?}"));
        }
        stale?;
        if let Some(why) = self.nodes[&at].halted() {
            return Err(format!("{at} halted: {why}"));
        }
        // Storing in the background, a term is the beacon's own once its batch is carried
        // out (stored before any message says it): a crash before that forgets it, as
        // one between a step and its store always could.
        self.check_terms(at, term, max_seen, !self.pipelined)?;
        self.check_commit_durable(at, false)?;
        self.nodes[&at]
            .check_parts()
            .map_err(|e| format!("{at}: {e}"))?;
        match self.batch.get_mut(&at) {
            Some(batch) => {
                batch.merge(ready);
                self.stats.merged += 1;
            }
            None => {
                self.batch.insert(at, ready);
            }
        }
        Ok(())
    }

    /// Checks that a quorum-mode leader's commit index, as soon as it has one, names an
    /// entry stored on a majority of disks, its own included. A follower that learns it
    /// from the leader may answer reads through it before storing the entries itself (the
    /// daemon releases them so): nothing later takes an entry on a majority back.
    /// A follower releases its log through `commit` on its leader's word, before stepping
    /// the message ([`Replica::commit_heard`]): its entry there must be stored on a majority
    /// of the voters' disks, or a read through it could show a write a failover loses.
    fn check_heard_commit(&mut self, at: SocketAddr, leader: SocketAddr, commit: u64) -> Checked {
        self.stats.commits_heard += 1;
        let node = &self.nodes[&at];
        let Some(term) = node.term_at(commit) else {
            return Ok(()); // compacted into its snapshot: no position to look for
        };
        let position = consensus::Position {
            index: commit,
            term,
        };
        // Committed under the membership its leader had then: the one in effect at the
        // entry, or a later one this follower or the leader knows.
        let mut memberships = vec![node.members_at(commit), node.members().clone()];
        if let Some(l) = self.nodes.get(&leader) {
            memberships.push(l.members().clone());
        }
        let durable = memberships
            .iter()
            .any(|m| self.voters_holding(position, &m.voters).len() >= majority(&m.voters));
        if !durable {
            return Err(format!(
                "{at} released {position} as committed on its leader's word, but no majority of the voters ({}) has stored it",
                node.members()
            ));
        }
        Ok(())
    }

    /// The voters whose disks hold `position` (a learner's disk counts for nothing: it is in
    /// no majority).
    fn voters_holding(
        &self,
        position: consensus::Position,
        voters: &BTreeSet<SocketAddr>,
    ) -> Vec<SocketAddr> {
        self.disks
            .iter()
            .filter(|(a, d)| voters.contains(a) && d.holds(position))
            .map(|(a, _)| *a)
            .collect()
    }

    /// A leader that is its own majority (one voter) commits before its store is done
    /// (its messages wait for the store): its commit is checked once it stored (`stored`).
    fn check_commit_durable(&mut self, at: SocketAddr, stored: bool) -> Checked {
        let Some(node) = self.nodes.get(&at) else {
            return Ok(());
        };
        if !node.is_leader() || node.mode() != consensus::Mode::Quorum {
            return Ok(());
        }
        let index = node.commit();
        let leading_term = node.election().term();
        let (_, brought) = *self
            .commit_brought
            .entry(at)
            .and_modify(|(t, c)| {
                if *t != leading_term {
                    *t = leading_term;
                    *c = index;
                }
            })
            .or_insert((leading_term, index));
        if self.durable_checked.get(&at) == Some(&index) {
            return Ok(());
        }
        let Some(term) = node.term_at(index) else {
            return Ok(());
        };
        let at_commit = consensus::Position { index, term };
        // A leader commits what a majority of its current voters stored; a commit index
        // it learned as a follower was reached under the membership of its entry.
        let voters = node.members().voters.clone();
        if voters.len() == 1 && !stored {
            return Ok(());
        }
        let then = node.members_at(index).voters;
        let holders = self.voters_holding(at_commit, &voters);
        let holders_then = self.voters_holding(at_commit, &then);
        if holders.len() < majority(&voters) && holders_then.len() < majority(&then) {
            return Err(format!(
                "{at} leads with commit index {index} (term {term}), which only {holders:?} have stored: not a majority"
            ));
        }
        // A commit this leader made, it made only through what it stored itself. One it
        // brought from following (its store of the entries still under way when it was
        // elected, [`Setup::pipelined`]) rests on the majority alone.
        let made = !self.pipelined || index > brought;
        if made && !holders.contains(&at) {
            return Err(format!(
                "{at} leads with commit index {index} (term {term}), which it has not stored itself"
            ));
        }
        self.durable_checked.insert(at, index);
        Ok(())
    }

    /// Carries out every beacon's batch.
    fn flush_all(&mut self) -> Checked {
        let batched: Vec<SocketAddr> = self.batch.keys().copied().collect();
        for at in batched {
            self.flush(at)?;
        }
        Ok(())
    }

    /// Carries out beacon `at`'s batch as the driver does ([`carry_out`], the same code): the
    /// term stored, early messages sent, the store (which a crash may tear, after the early
    /// messages left), compaction, then the rest.
    fn flush(&mut self, at: SocketAddr) -> Checked {
        self.take_held(at);
        if !self.pipelined {
            return self.flush_whole(at);
        }
        self.flush_pipelined(at)?;
        // Carried out: its term is stored.
        if let Some(node) = self.nodes.get(&at) {
            let (term, max_seen) = (node.election().term(), node.election().max_seen_term());
            self.check_terms(at, term, max_seen, true)?;
        }
        Ok(())
    }

    /// As the driver does before each carry-out: the leader's messages the batch's steps
    /// asked for, built once for the batch ([`consensus::Config::flush_per_batch`]).
    fn take_held(&mut self, at: SocketAddr) {
        let now = self.now;
        let Some(node) = self.nodes.get_mut(&at) else {
            return;
        };
        let ready = node.flush_batch(now);
        match self.batch.get_mut(&at) {
            Some(batch) => batch.merge(ready),
            None if ready.is_empty() => {}
            None => {
                self.batch.insert(at, ready);
            }
        }
    }

    fn flush_pipelined(&mut self, at: SocketAddr) -> Checked {
        let Some(ready) = self.batch.get(&at) else {
            return Ok(());
        };
        let pipe = self.pipes.entry(at).or_default();
        if stores_in_background(ready) && !pipe.compact_due {
            return self.flush_beside(at);
        }
        // As the driver does: the stores under way first, then this batch whole.
        self.drain(at)?;
        if !self.nodes.contains_key(&at) {
            return Ok(());
        }
        self.flush_whole(at)?;
        if let Some(pipe) = self.pipes.get_mut(&at) {
            pipe.compact_due = false;
        }
        if let Some(node) = self.nodes.get(&at) {
            let through = node.position();
            self.note(format!("{at}: stored through {through}"));
            self.feed(at, Input::Stored { through })?;
        }
        Ok(())
    }

    /// The early half of `at`'s batch now, its store in the background (completing after
    /// 0-2 steps, while `at` steps on).
    fn flush_beside(&mut self, at: SocketAddr) -> Checked {
        let Some(ready) = self.batch.remove(&at) else {
            return Ok(());
        };
        if ready.answers_rest_on_durable() {
            self.check_commit_durable(at, true)?;
        }
        let pipe = self.pipes.entry(at).or_default();
        let hold = pipe
            .storing
            .as_ref()
            .is_some_and(|s| s.early.holds_answers())
            || pipe.queued.as_ref().is_some_and(|q| q.holds_answers());
        let mut out = SimOutbox::new(&mut self.rng, 0.0);
        let early = carry_out_early_beside(ready, hold, &mut out);
        match pipe.queued.as_mut() {
            Some(queued) => queued.merge(early),
            None => pipe.queued = Some(early),
        }
        let SimOutbox { sent, answered, .. } = out;
        for (to, msg) in sent {
            self.send_peer(at, to, msg, false);
        }
        self.stats.answered_early += answered.len() as u64;
        for (token, reply) in answered {
            self.send_reply(at, token, reply);
        }
        self.start_store(at)
    }

    /// Starts `at`'s queued store unless one is under way; one with no entries is done at
    /// once.
    fn start_store(&mut self, at: SocketAddr) -> Checked {
        let delay = STEP * self.rng.below(3);
        let Some(pipe) = self.pipes.get_mut(&at) else {
            return Ok(());
        };
        if pipe.storing.is_some() {
            return Ok(());
        }
        let Some(mut early) = pipe.queued.take() else {
            return Ok(());
        };
        let (store, through) = early.take_store();
        pipe.storing = Some(Storing {
            early,
            through,
            store,
            due: self.now + delay,
        });
        if through.is_none() {
            return self.complete_store(at);
        }
        Ok(())
    }

    /// Completes the background stores due now, at running beacons.
    fn complete_stores(&mut self) -> Checked {
        let due: Vec<SocketAddr> = self
            .pipes
            .iter()
            .filter(|(at, p)| {
                p.storing.as_ref().is_some_and(|s| s.due <= self.now)
                    && !self.paused.contains_key(at)
            })
            .map(|(at, _)| *at)
            .collect();
        for at in due {
            self.complete_store(at)?;
        }
        Ok(())
    }

    /// Completes `at`'s store under way: written (or torn by a crash in the middle), what
    /// waited for it released, the beacon told, the next store started.
    fn complete_store(&mut self, at: SocketAddr) -> Checked {
        let Some(Storing {
            early,
            through,
            store,
            ..
        }) = self.pipes.get_mut(&at).and_then(|p| p.storing.take())
        else {
            return Ok(());
        };
        let (Some(node), Some(disk)) = (self.nodes.get(&at), self.disks.get_mut(&at)) else {
            return Ok(());
        };
        if !store.entries.is_empty() && self.rng.chance(self.faults.crash_mid_store) {
            let keep = self.rng.below(64) as usize;
            assert!(
                disk.store_torn(&store, keep).is_err(),
                "a torn write was reported stored"
            );
            self.stats.torn_writes += 1;
            return self.crash(at, "in the middle of a background store");
        }
        let stored = disk.store(&store).map_err(|e| format!("{at}: {e}"))?;
        let compact_due = disk.logged() > node.entries_to_keep();
        if through.is_some() {
            self.stats.stored_beside += 1;
        }
        let mut out = SimOutbox::new(&mut self.rng, 0.0);
        let released = release_stored(early, stored, &mut out);
        if let Some(pipe) = self.pipes.get_mut(&at) {
            pipe.compact_due |= compact_due;
        }
        for (to, msg) in out.sent {
            self.send_peer(at, to, msg, false);
        }
        self.check_commit_durable(at, true)?;
        self.check_told(at, &released.committed, released.restored)?;
        for (token, reply) in released.replies {
            self.send_reply(at, token, reply);
        }
        if let Some(through) = through {
            self.note(format!("{at}: stored through {through} in the background"));
            self.feed(at, Input::Stored { through })?;
        }
        self.start_store(at)
    }

    /// Completes `at`'s stores under way and queued, now.
    fn drain(&mut self, at: SocketAddr) -> Checked {
        for _ in 0..2 {
            if !self.nodes.contains_key(&at) {
                return Ok(());
            }
            let Some(pipe) = self.pipes.get_mut(&at) else {
                return Ok(());
            };
            match pipe.storing.as_mut() {
                Some(storing) => storing.due = self.now,
                None => return Ok(()),
            }
            self.complete_store(at)?;
        }
        Ok(())
    }

    /// Carries out `at`'s batch whole, every store done before the next step.
    fn flush_whole(&mut self, at: SocketAddr) -> Checked {
        let Some(ready) = self.batch.remove(&at) else {
            return Ok(());
        };
        // Answers that leave before the store rest on what a majority has stored already,
        // this leader included: checked against the disks before this store.
        if ready.answers_rest_on_durable() {
            self.check_commit_durable(at, true)?;
        }
        let (Some(node), Some(disk)) = (self.nodes.get(&at), self.disks.get_mut(&at)) else {
            return Ok(());
        };
        let mut out = SimOutbox::new(&mut self.rng, self.faults.crash_mid_store);
        let (snapshot, entries) = Disk::positions(ready.store());
        let rewrite = ready.rewrites_log();
        let carried = carry_out(ready, node, disk.storage(), self.now, &mut out)
            .map_err(|e| format!("{at}: {e}"))?;
        if carried.is_some() {
            disk.stored(snapshot, &entries);
            if rewrite {
                let tail: Vec<_> = node.unapplied().iter().map(|e| e.position()).collect();
                disk.rewritten(node.applied(), &tail);
                self.stats.tails_cut += 1;
            }
            if out.compacted {
                disk.compacted(node.applied());
            }
        }
        let SimOutbox {
            sent,
            answered,
            crashed,
            torn,
            compacted,
            ..
        } = out;
        for (to, msg) in sent {
            self.send_peer(at, to, msg, false);
        }
        if !answered.is_empty() {
            self.stats.answered_early += answered.len() as u64;
            if crashed {
                self.stats.answered_then_crashed += 1;
            }
        }
        for (token, reply) in answered {
            self.send_reply(at, token, reply);
        }
        if compacted {
            self.stats.snapshots += 1;
        }
        let Some(released) = carried else {
            if crashed {
                if torn {
                    self.stats.torn_writes += 1;
                }
                return self.crash(at, "in the middle of storing");
            }
            return Ok(());
        };
        self.check_commit_durable(at, true)?;
        self.check_told(at, &released.committed, released.restored)?;
        for (token, reply) in released.replies {
            self.send_reply(at, token, reply);
        }
        Ok(())
    }

    /// Checks the changes `at` tells its watchers: each committed (at or below its commit
    /// index), after the last it told, and the same at every beacon for the same index.
    fn check_told(
        &mut self,
        at: SocketAddr,
        committed: &[(u64, S::Change)],
        restored: Option<u64>,
    ) -> Checked {
        let (through, last) = self.told_through.entry(at).or_default();
        if let Some(index) = restored {
            // A snapshot replaced the state (and the log): the history starts again after
            // it. It never takes back a change told as committed.
            if index < *last {
                return Err(format!(
                    "{at} installed a snapshot through index {index}, taking back the change it told at {last}"
                ));
            }
            *through = index;
        }
        let commit = self.nodes.get(&at).map_or(u64::MAX, |n| n.commit());
        for (index, change) in committed {
            if restored.is_some_and(|r| *index <= r) {
                continue;
            }
            if *index <= *through {
                return Err(format!(
                    "{at} told the change at index {index} after the one at {through}: out of order, or twice"
                ));
            }
            if *index > commit {
                return Err(format!(
                    "{at} told the change at index {index} as committed while its commit index is {commit}"
                ));
            }
            *through = *index;
            *last = *index;
            match self.told.get(index) {
                Some(first) if first != change => {
                    return Err(format!(
                        "{at} told {change:?} at index {index}, where another beacon told {first:?}: watchers would disagree"
                    ));
                }
                Some(_) => {}
                None => {
                    self.told.insert(*index, change.clone());
                }
            }
        }
        Ok(())
    }

    /// Checks that `at`'s term never goes back, and takes it as its own when `carried`
    /// (carried out).
    fn check_terms(&mut self, at: SocketAddr, term: u64, max_seen: u64, carried: bool) -> Checked {
        if term > consensus::MAX_TERM || max_seen > consensus::MAX_TERM {
            return Err(format!(
                "{at}: term {term} (seen {max_seen}) is beyond 2^48: an out-of-bounds term was adopted"
            ));
        }
        let (last_term, last_seen) = self.last_terms.get(&at).copied().unwrap_or_default();
        if term < last_term || max_seen < last_seen {
            return Err(format!(
                "{at}: term went from {last_term} (seen {last_seen}) back to {term} (seen {max_seen})"
            ));
        }
        if carried {
            self.last_terms.insert(at, (term, max_seen));
        }
        Ok(())
    }

    /// Kills `at`: its connections close, its peers see them drop.
    pub fn crash(&mut self, at: SocketAddr, how: &str) -> Checked {
        self.nodes.remove(&at);
        self.batch.remove(&at);
        // Stores under way never reach the disk.
        if let Some(pipe) = self.pipes.remove(&at)
            && pipe.storing.is_some()
        {
            self.stats.stores_lost += 1;
        }
        self.paused.remove(&at);
        if let Some(disk) = self.disks.get_mut(&at) {
            disk.close();
        }
        *self.life.get_mut(&at).expect("known beacon") += 1;
        self.stats.crashes += 1;
        self.note(format!("CRASH {at} {how}"));
        let others: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        for other in others {
            // The survivors notice (a stopped one, once it resumes).
            if !self.paused.contains_key(&other) {
                self.step(other, Input::PeerDown { peer: at })?;
            }
        }
        Ok(())
    }

    /// Starts `at` again from what it stored; it dials everyone.
    pub fn restart(&mut self, at: SocketAddr) -> Checked {
        self.start(at)?;
        let term = self.nodes[&at].election().term();
        self.note(format!("RESTART {at} (term {term})"));
        self.next_tick.insert(at, self.now + TICK);
        let others: Vec<SocketAddr> = self.nodes.keys().copied().filter(|o| *o != at).collect();
        for other in others {
            self.connect(at, other);
        }
        Ok(())
    }

    /// Stops `at` (SIGSTOP) for `ms`: it neither ticks nor reads; its connections stay open.
    pub fn pause(&mut self, at: SocketAddr, ms: Millis) {
        self.stats.pauses += 1;
        self.note(format!("PAUSE {at} for {ms} ms"));
        self.paused.insert(at, self.now + ms);
    }

    fn resume_due(&mut self) {
        let due: Vec<SocketAddr> = self
            .paused
            .iter()
            .filter(|(_, until)| **until <= self.now)
            .map(|(a, _)| *a)
            .collect();
        for at in due {
            self.paused.remove(&at);
            self.note(format!("RESUME {at}"));
            // A resumed process runs its overdue tick at some point among what queued up.
            let offset = self.rng.below(TICK);
            self.next_tick.insert(at, self.now + offset);
        }
    }

    fn tick_due(&mut self) -> Checked {
        let due: Vec<SocketAddr> = self
            .next_tick
            .iter()
            .filter(|(a, t)| **t <= self.now && self.live(**a))
            .map(|(a, _)| *a)
            .collect();
        for at in due {
            self.next_tick.insert(at, self.now + TICK);
            self.step(
                at,
                // The simulation's clock is every beacon's wall clock too, as the
                // workloads' requests carry it.
                Input::Tick { wall_ms: self.now },
            )?;
        }
        Ok(())
    }

    // ---- faults --------------------------------------------------------------------------

    /// Cuts the links `pairs` (by beacon index). With `resets`, a beacon whose links with a
    /// peer are now cut both ways sees its connections to it close (a firewall that
    /// rejects): it re-checks the leader at once, as the driver does.
    pub fn cut(&mut self, pairs: &[(SocketAddr, SocketAddr)], resets: bool) -> Checked {
        self.links.cut_all(pairs.iter().copied());
        if resets {
            for (a, b) in pairs {
                if self.links.is_cut(*b, *a) && self.live(*a) {
                    self.step(*a, Input::PeerDown { peer: *b })?;
                }
            }
        }
        Ok(())
    }

    /// Every link works again; cut connections are made anew.
    pub fn heal(&mut self) {
        for (a, b) in self.links.heal() {
            self.connect(a, b);
        }
    }

    fn inject_faults(&mut self) -> Checked {
        let f = self.faults.clone();
        let beacons = self.beacons.clone();
        if self.rng.chance(f.partition) {
            let side = beacons
                .iter()
                .copied()
                .filter(|_| self.rng.chance(0.5))
                .collect();
            let resets = self.rng.chance(0.5);
            self.note(format!(
                "PARTITION {side:?} | rest{}",
                if resets { " (connections reset)" } else { "" }
            ));
            self.cut(&net::split(&beacons, &side), resets)?;
        }
        if self.rng.chance(f.one_way) {
            let from = self.rng.pick(&beacons).expect("beacons");
            let targets: Vec<SocketAddr> = if self.rng.chance(0.3) {
                beacons.clone()
            } else {
                vec![self.rng.pick(&beacons).expect("beacons")]
            };
            for to in targets.into_iter().filter(|to| *to != from) {
                self.note(format!("ONE-WAY {from} -> {to} dropped"));
                self.links.cut(from, to);
            }
        }
        if self.rng.chance(f.topology) {
            let mut order = beacons.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, self.rng.below(i as u64 + 1) as usize);
            }
            if self.rng.chance(0.5) && order.len() >= 4 {
                self.note(format!("RING {order:?}"));
                self.links.cut_all(net::ring(&order));
            } else {
                let left = order[1..].iter().step_by(2).copied().collect();
                self.note(format!("BRIDGE via {}, {left:?} | the rest", order[0]));
                self.links.cut_all(net::bridge(&order, order[0], &left));
            }
        }
        if self.rng.chance(f.slow) {
            let victim = self.rng.pick(&beacons).expect("beacons");
            let late = 1_000 + self.rng.below(2_000);
            let both = self.rng.chance(0.5);
            self.note(format!(
                "SLOW links {} {victim} by {late} ms",
                if both { "to and from" } else { "to" }
            ));
            for other in beacons.iter().copied().filter(|o| *o != victim) {
                self.links.slow_down(other, victim, late);
                if both {
                    self.links.slow_down(victim, other, late);
                }
            }
        }
        if self.links.is_faulty() && self.rng.chance(f.heal) {
            self.note("HEAL".into());
            self.heal();
        }
        if self.rng.chance(f.crash) {
            let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
            if let Some(victim) = self.rng.pick(&live) {
                self.crash(victim, "")?;
            }
        }
        if self.maintenance.chance(f.transfer) {
            // An operator hands the leadership over (to a named beacon, or the one furthest
            // along), whatever else is going on.
            let leaders = self.running_leaders();
            if let Some(leader) = self.maintenance.pick(&leaders) {
                let to = if self.maintenance.chance(0.5) {
                    self.maintenance.pick(&beacons)
                } else {
                    None
                };
                let token = self.next_token;
                self.next_token += 1;
                self.note(format!("TRANSFER {leader} -> {to:?}"));
                self.stats.transfers += 1;
                self.step(leader, Input::Transfer { token, to })?;
            }
        }
        if self.reader.chance(f.read) {
            // A client asks a running beacon for a linearizable read's point in the log.
            let running = self.running();
            if let Some(at) = self.reader.pick(&running) {
                self.client_read(at)?;
            }
            // Where two beacons think they lead (one deposed without knowing it yet, cut off
            // or just resumed), each is read from: the reads a stale leader must not answer.
            let leaders = self.running_leaders();
            if leaders.len() > 1 {
                for at in leaders {
                    self.stats.reads_at_rival_leaders += 1;
                    self.client_read(at)?;
                }
            }
        }
        if self.maintenance.chance(f.rogue) {
            self.rogue(&beacons)?;
        }
        if self.rng.chance(f.pause) {
            let running = self.running();
            if let Some(victim) = self.rng.pick(&running) {
                let ms = 300 + self.rng.below(2_700);
                self.pause(victim, ms);
            }
        }
        for b in beacons {
            if self.started.contains(&b)
                && !self.nodes.contains_key(&b)
                && self.rng.chance(f.restart)
            {
                self.restart(b)?;
            }
        }
        if self.operator.chance(f.members) {
            self.change_members()?;
        }
        Ok(())
    }

    /// An operator changes the membership through a leader: adds a spare (a new machine:
    /// an empty disk, started with the leader's membership, as `beacon --join` starts),
    /// promotes a learner, or removes a member (perhaps the leader itself, which it refuses).
    fn change_members(&mut self) -> Checked {
        use consensus::Change;
        let leaders = self.running_leaders();
        let Some(leader) = self.operator.pick(&leaders) else {
            return Ok(());
        };
        let members = self.nodes[&leader].members().clone();
        let outside: Vec<SocketAddr> = self
            .beacons
            .iter()
            .copied()
            .filter(|b| !members.contains(*b))
            .collect();
        let learners: Vec<SocketAddr> = members.learners.iter().copied().collect();
        let all: Vec<SocketAddr> = members.all().collect();
        let change = match self.operator.below(3) {
            0 if !outside.is_empty() => {
                let node = self.operator.pick(&outside).expect("not empty");
                Change::AddLearner {
                    node,
                    promote: self.operator.chance(0.7),
                }
            }
            1 if !learners.is_empty() => {
                Change::Promote(self.operator.pick(&learners).expect("not empty"))
            }
            _ => Change::Remove(self.operator.pick(&all).expect("a member")),
        };
        let token = self.next_token;
        self.next_token += 1;
        self.note(format!("MEMBERS at {leader}: {change}"));
        self.stats.member_changes += 1;
        self.step(leader, Input::ChangeMembers { token, change })?;
        let accepted = self
            .nodes
            .get(&leader)
            .is_some_and(|n| n.members().contains(change.node()));
        if let Change::AddLearner { node, .. } = change
            && accepted
        {
            // A new machine: whatever ran there before is gone with its disk (its removal
            // is committed: a change is accepted only once the one before it is).
            if self.nodes.contains_key(&node) {
                self.crash(node, "(replaced by a new machine)")?;
            }
            self.disks.insert(node, Disk::default());
            self.last_terms.remove(&node);
            self.told_through.remove(&node);
            let mut joining = members.clone();
            joining.learners.insert(node);
            let index = self.nodes[&leader].members_index();
            self.joined.insert(node, (joining, index));
            self.started.insert(node);
            self.restart(node)?;
        }
        Ok(())
    }

    /// A client asks beacon `at` for a linearizable read's point in the log; checked when
    /// it is given: no lower than any beacon had committed when it was asked.
    fn client_read(&mut self, at: SocketAddr) -> Checked {
        let (floor, holder) = self
            .nodes
            .iter()
            .map(|(a, n)| (n.commit(), *a))
            .max()
            .unwrap_or((0, at));
        let token = self.next_token;
        self.next_token += 1;
        self.reads.insert(token, (floor, at, holder));
        self.stats.reads += 1;
        // A follower asks the leader it follows, in the term it follows it in now;
        // the request may arrive late (held back for seconds), after either moved on.
        let asked = self.nodes.get(&at).and_then(|n| {
            let e = n.election();
            e.followed().map(|leader| (leader, e.term()))
        });
        // A leader of three voters asks its followers to vouch for its term, in half
        // its reads (the other half run a round, as a leader of five always does).
        let vouch = match asked {
            Some(_) => None,
            None => self
                .nodes
                .get(&at)
                .and_then(|n| n.vouch_wanted())
                .filter(|_| self.reader.chance(0.5)),
        };
        match (asked, vouch) {
            (Some((leader, term)), _) if self.nodes.contains_key(&leader) => {
                self.stats.reads_asked += 1;
                let asker = consensus::Asker { from: at, term };
                self.send_read_index(leader, token, asker);
            }
            (_, Some(vouch)) => {
                self.stats.reads_vouch_asked += 1;
                let ask = Ask {
                    leader: at,
                    leader_life: self.life[&at],
                    term: vouch.term,
                    token,
                    index: vouch.index,
                };
                for voter in vouch.voters {
                    if let Some(&life) = self.life.get(&voter) {
                        let what = format!("vouch for {at} in {} to {voter}", vouch.term);
                        self.post(
                            what,
                            Delivery::Vouch {
                                to: voter,
                                life,
                                ask,
                            },
                        );
                    }
                }
            }
            _ => self.step(at, Input::ReadIndex { token, asker: None })?,
        }
        Ok(())
    }

    /// The beacons that lead, are up and not paused (an operator's maintenance goes to one).
    fn running_leaders(&self) -> Vec<SocketAddr> {
        self.nodes
            .iter()
            .filter(|(a, n)| n.is_leader() && !self.paused.contains_key(*a))
            .map(|(a, _)| *a)
            .collect()
    }

    /// The beacons that are up and not paused.
    fn running(&self) -> Vec<SocketAddr> {
        self.nodes
            .keys()
            .copied()
            .filter(|a| !self.paused.contains_key(a))
            .collect()
    }

    /// A message from a process posing as a configured beacon, with a term or an index
    /// beyond the bounds: a beacon must drop it whole, never adopt what it says.
    fn rogue(&mut self, beacons: &[SocketAddr]) -> Checked {
        use consensus::{MAX_INDEX, MAX_TERM, Position, election::Heartbeat};
        let live: Vec<SocketAddr> = self.nodes.keys().copied().collect();
        let Some(victim) = self.maintenance.pick(&live) else {
            return Ok(());
        };
        let others: Vec<SocketAddr> = beacons.iter().copied().filter(|b| *b != victim).collect();
        let Some(posing_as) = self.maintenance.pick(&others) else {
            return Ok(());
        };
        let extreme = [u64::MAX, u64::MAX - 1, MAX_TERM + 1, 1 << 63];
        let pick = |rng: &mut Rng| extreme[rng.below(extreme.len() as u64) as usize];
        let (term, index, commit) = match self.maintenance.below(3) {
            0 => (pick(&mut self.maintenance), 0, 0),
            1 => (1, pick(&mut self.maintenance).max(MAX_INDEX + 1), 0),
            _ => (2, 1, pick(&mut self.maintenance)),
        };
        let hb = Heartbeat {
            is_leader: self.maintenance.chance(0.7),
            term,
            leader: Some(posing_as),
            sees: u64::MAX,
            eligible: true,
        };
        let msg = Message::<S>::bare(hb, Position { index, term }, commit);
        self.note(format!(
            "ROGUE to {victim} as {posing_as}: term {term}, index {index}, commit {commit}"
        ));
        self.stats.rogues += 1;
        self.step(
            victim,
            Input::Peer {
                from: posing_as,
                msg,
            },
        )
    }

    // ---- scripted schedules and reports --------------------------------------------------

    /// Sends a request from a scripted caller; `delay` `None` holds it until
    /// [`Core::release`].
    pub fn scripted_request(
        &mut self,
        to: SocketAddr,
        request: V::Request,
        delay: Option<Millis>,
    ) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        self.pending.insert(token, None);
        self.send_request(to, token, request, Some(delay.unwrap_or(Millis::MAX / 4)));
        token
    }

    /// Lets a held request go: it arrives now.
    pub fn release(&mut self, token: Token) {
        self.mail.reschedule(
            self.now,
            |d| matches!(d, Delivery::Request { token: t, .. } if *t == token),
        );
    }

    /// The one leader everyone follows, if there is one and it has taken over.
    pub fn settled_leader(&self) -> Option<SocketAddr> {
        if !self.paused.is_empty() {
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
        // Every member in the leader's view runs and follows it (a beacon removed, or
        // never added, is no member: it follows no one).
        let followed = self.nodes[leader].members().all().all(|m| {
            self.nodes
                .get(&m)
                .is_some_and(|n| n.election().leader() == Some(*leader))
        });
        (followed && self.nodes[leader].has_taken_over()).then_some(*leader)
    }

    /// The running members, in the settled leader's view (every running beacon while none
    /// has settled).
    pub fn members_view(&self) -> Vec<View<'_, S, V>> {
        let members = self
            .settled_leader()
            .map(|l| self.nodes[&l].members().clone());
        self.views()
            .into_iter()
            .filter(|v| members.as_ref().is_none_or(|m| m.contains(v.addr)))
            .collect()
    }

    /// Whether one leader settled and every beacon stores, has committed and has applied
    /// what it has (a follower applies an entry once it knows it committed).
    pub fn caught_up(&self) -> bool {
        let Some(leader) = self.settled_leader() else {
            return false;
        };
        let (position, commit) = (self.nodes[&leader].position(), self.nodes[&leader].commit());
        self.nodes[&leader].members().all().all(|m| {
            let n = &self.nodes[&m];
            n.position() == position && n.commit() == commit && n.applied() == position
        })
    }

    /// The settled leader; panics (with every beacon's view) if there is none.
    pub fn leader(&self) -> SocketAddr {
        self.settled_leader()
            .unwrap_or_else(|| panic!("no settled leader\n{}", self.dump()))
    }

    /// Every beacon's view, for failure reports.
    pub fn dump(&self) -> String {
        let mut lines = Vec::new();
        for (a, n) in &self.nodes {
            lines.push(format!(
                "  {a}: follows {:?}, term {} (seen {}), taken over {}, at {}, commit {}, applied {}{}",
                n.election().leader(),
                n.election().term(),
                n.election().max_seen_term(),
                n.has_taken_over(),
                n.position(),
                n.commit(),
                n.applied().index,
                if self.paused.contains_key(a) {
                    " (paused)"
                } else {
                    ""
                }
            ));
            if n.is_leader() {
                lines.push(format!("    {:?}", n.follower_progress()));
            }
        }
        lines.join("\n")
    }
}

/// How many of `voters` make a majority.
fn majority(voters: &BTreeSet<SocketAddr>) -> usize {
    voters.len() / 2 + 1
}

/// Where a simulated beacon's carry-out sends (queued, then put on the network in order),
/// and the crash that may strike between its early messages and its store.
struct SimOutbox<'a, S: consensus::Machine, V: Service<S>> {
    sent: Vec<(SocketAddr, Message<S>)>,
    /// Answers given before the store: they are out even if the beacon then crashes.
    answered: Vec<(Token, Reply<S, V>)>,
    rng: &'a mut Rng,
    crash_mid_store: f64,
    crashed: bool,
    torn: bool,
    compacted: bool,
}

impl<'a, S: consensus::Machine, V: Service<S>> SimOutbox<'a, S, V> {
    fn new(rng: &'a mut Rng, crash_mid_store: f64) -> Self {
        SimOutbox {
            sent: Vec::new(),
            answered: Vec::new(),
            rng,
            crash_mid_store,
            crashed: false,
            torn: false,
            compacted: false,
        }
    }
}

impl<S: consensus::Machine + MachineWire, V: Service<S>> Outbox<S, V, Memory>
    for SimOutbox<'_, S, V>
{
    fn send(&mut self, to: SocketAddr, msg: Message<S>) {
        self.sent.push((to, msg));
    }

    fn answer_early(&mut self, replies: Vec<(Token, Reply<S, V>)>) -> Vec<(Token, Reply<S, V>)> {
        self.answered.extend(replies);
        Vec::new()
    }

    /// A leader killed between sending its entries and storing them: the write is torn
    /// (some of its bytes reach the disk), and the beacon is gone.
    fn before_store(
        &mut self,
        storage: &mut Storage<S, Memory>,
        store: &consensus::Store<S>,
    ) -> bool {
        if self.sent.is_empty() || !self.rng.chance(self.crash_mid_store) {
            return true;
        }
        self.crashed = true;
        // Only an append tears: a snapshot, and the log stored beside it, replace their
        // files whole or not at all.
        if !store.entries.is_empty() && store.snapshot.is_none() {
            let keep = self.rng.below(64) as usize;
            storage.backend_mut().tear_next_append(keep);
            assert!(
                storage.store(store).is_err(),
                "a torn write was reported stored"
            );
            self.torn = true;
        }
        false
    }

    fn compacted(&mut self) {
        self.compacted = true;
    }
}
