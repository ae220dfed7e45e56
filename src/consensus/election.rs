//! Leader election, sans-IO, by heartbeats. Where the algorithm comes from and what this
//! version fixes in it is history, kept in docs/guarantees.md (*How the election works*);
//! this is what the code does.
//!
//! Every beacon keeps a map sorted by beacon identity (`ip:port`, ordered as socket
//! addresses: by IP, then numerically by port). Each entry has an attribute word: bit 31 is
//! the leader bit, bits 0..2 the alive mask.
//!
//! * A heartbeat from X sets X's alive bit 0; X's leader bit mirrors the heartbeat's
//!   `is_leader`, set or clear.
//! * Every tick walks the map in order. Among entries whose alive mask is non-zero, the
//!   leader candidate is the one claiming leadership with the highest term (ties go to the
//!   earlier entry); if none claims, the first online entry. An entry whose mask is zero loses
//!   its leader bit. Then each mask shifts left by one (three bits kept) and our own entry's
//!   bit 0 is set, so a beacon goes offline on the fourth tick without a heartbeat.
//! * If the candidate is us we lead; if it is someone else and we were leading, we step down
//!   at once.
//!
//! So an online leader stays leader (a restarted old leader does not take over again), and
//! when none is online the first online beacon in sorted order takes over with a term above
//! any it has seen. Terms are dealt out round-robin by position in the sorted list, so a term
//! names one leader even when a partition lets two lead at once. Two leaders that meet
//! converge on the same choice everywhere: higher term, then sorted order.
//!
//! Beyond the per-tick check the same choice is re-made at once (without shifting the masks)
//! when a peer's connection drops, so failover does not
//! wait for the next tick, and when a heartbeat changes what we know of a peer, so a beacon
//! follows a new leader or yields to a stronger claim at once. A heartbeat never makes a
//! beacon elect itself, though: only a tick or a lost connection does. A beacon never elects
//! itself before its first tick unless it already follows a leader: at start-up it first hears
//! from the peers that are up (their `Hello` carries their state), and so joins an existing
//! leader instead of challenging it. A tick that comes late (the process was stopped or
//! starved) first ages the masks by the ticks it missed ([`Election::catch_up`]).
//!
//! Quorum mode adds three rules, so that a beacon cut off in one direction, or on the far
//! side of a ring or a bridge, cannot take the cluster's leadership or drive its terms up.
//! Every heartbeat says whom its sender follows, which beacons it sees online, and whether it
//! is *eligible*: in two-way contact (it sees them, they see it) with a majority.
//!
//! 1. The first-online rule skips beacons that are not eligible: a beacon nobody can hear,
//!    or that hears nobody, is passed over instead of blocking the election.
//! 2. Pre-vote: a beacon takes a new term only when a majority (itself included) is
//!    *available* to it: online, able to hear it, and following no other leader. A beacon
//!    that cannot gather a majority never raises its term, so it cannot come back from a cut
//!    with a term that makes everyone switch to it.
//! 3. Check-quorum: a leader whose followers (online, following it in its term) fall below
//!    a majority for three ticks steps down. A leader that can send but not receive, or whose
//!    followers went over to a leader it cannot hear, stops claiming, and rule 1 lets the
//!    next eligible beacon take over.
//!
//! A leader that sees a later term than its own leads on in a term above it (a follower that
//! promised that term ignores older leaders) only when the beacon announcing it follows no
//! other leader: a follower of a rival across a bridge is not a reason to race terms upwards.
//!
//! Quorum mode also promises each term once. A beacon that follows leader X in term T (or
//! takes T itself) has promised T to X, stores that promise before it says so, and never
//! follows another beacon claiming T: two beacons that came to the same term (terms are
//! dealt by place among the voters, and beacons that disagree on the voters may deal the
//! same one) cannot both gather a majority that follows them, and a new leader counts
//! only heartbeats that follow it in its term as promises. A beacon held by its promise
//! follows no one; the leader it sees then leads on in a term above, which it may follow.
//!
//! Learners are in the map too, marked as such: they follow the leader the voters elect and
//! receive its log, but never lead, count for no majority and take no place in the order
//! that deals terms and numbers `Heartbeat::sees` (those are the voters' alone, so adding
//! or removing a learner changes nothing the voters decide). A learner's claim to lead is
//! not taken, nor is its term heard.
//!
//! The members change while the cluster runs ([`Election::set_members`], driven by the
//! membership in the replica's log; see [`super::members`]): beacons that stay keep what is
//! known of them, and a voter that a change not yet committed removed keeps its claims heard
//! (the change may give way to a leader that never had it).
//!
//! Nothing here does I/O or reads a clock: the driver passes the time in (`now`, in
//! milliseconds of a monotonic clock) and carries out the returned [`Action`]s.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::time::Millis;

/// Leader bit of an entry's attribute word (NebulaBeacon's `mc_uiLeader`).
pub const LEADER_BIT: u32 = 0x8000_0000;
/// Alive mask: online while any of the last three ticks saw a heartbeat (`mc_uiAlive`).
pub const ALIVE_MASK: u32 = 0x0000_0007;
/// Most beacons in a cluster: `Heartbeat::sees` has one bit per beacon.
pub const MAX_BEACONS: usize = 64;
/// Ticks a new leader is given to gather its followers before check-quorum applies (the
/// alive window: a follower's answer is then certainly counted).
pub const QUORUM_GRACE_TICKS: u32 = 3;
/// Ticks after the leader's connection dropped during which heartbeats may elect us (the
/// alive window: the others have long said by then whether they lost it too).
const FAILOVER_TICKS: u32 = 3;
/// Ticks after a stop (two ticks or more without a step) during which this beacon elects
/// no one, itself least of all: what queued up for it while it was stopped arrives first and
/// says how the cluster stood then (it may have elected another and gone on, or removed this
/// beacon), and what was sent after its buffers filled is lost. The tick it wakes on, one for
/// that queue to drain, the alive window (three ticks) for what it said to age out, and one
/// to spare: past them, every peer it sees spoke since it woke.
pub const WOKEN_TICKS: u32 = 6;

/// The election part of a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub is_leader: bool,
    pub term: u64,
    /// The beacon the sender follows (itself while it leads); `None` while it knows none.
    pub leader: Option<SocketAddr>,
    /// The beacons the sender sees online, one bit per beacon in sorted order (bit 0 is the
    /// first); its own bit is always set.
    pub sees: u64,
    /// The sender could lead if chosen: it is in two-way contact with a majority (quorum
    /// mode; always true in classic mode).
    pub eligible: bool,
}

impl Heartbeat {
    /// A heartbeat that says nothing beyond NebulaBeacon's fields: no leader followed, seeing
    /// only itself, eligible.
    pub fn bare(is_leader: bool, term: u64) -> Heartbeat {
        Heartbeat {
            is_leader,
            term,
            leader: None,
            sees: 0,
            eligible: true,
        }
    }
}

/// The highest term a beacon promised and the leader it promised it to (quorum mode): a
/// beacon follows one leader per term. Stored before any heartbeat can announce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Promise {
    pub term: u64,
    /// `None` while this beacon has followed no leader in `term` (it heard of the term only).
    pub leader: Option<SocketAddr>,
}

impl Promise {
    /// A term heard of, promised to no leader yet.
    pub fn at(term: u64) -> Promise {
        Promise { term, leader: None }
    }

    /// Whether `self` says more than `earlier`: a later term, or the leader of the same one.
    pub fn supersedes(&self, earlier: &Promise) -> bool {
        self.term > earlier.term
            || (self.term == earlier.term && earlier.leader.is_none() && self.leader.is_some())
    }
}

/// What happened to the election, for the driver to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this heartbeat to every other beacon now.
    Broadcast(Heartbeat),
    /// The leader this beacon follows (or is) changed; `None` while no leader is known.
    LeaderChanged {
        leader: Option<SocketAddr>,
        term: u64,
    },
}

/// Something the outside world tells the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A heartbeat arrived from beacon `from`.
    Heartbeat { from: SocketAddr, hb: Heartbeat },
    /// `from`'s state as it answered our handshake. It travels on our connection, not on
    /// the one that carries `from`'s heartbeats, so it may arrive after a later heartbeat:
    /// it counts as a sign of life, and fills in what we know of `from` only while we have
    /// not heard from it otherwise.
    Greeting { from: SocketAddr, hb: Heartbeat },
    /// The connection carrying `peer`'s heartbeats closed.
    PeerDown { peer: SocketAddr },
}

/// Inputs the election refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    #[error("heartbeat from {0}, which is not in the configured beacon list")]
    UnknownBeacon(SocketAddr),
    #[error("heartbeat claims to come from this beacon's own address {0}")]
    OwnAddress(SocketAddr),
}

/// One beacon as seen from here (a row of `show beacon`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeaconView {
    pub node: SocketAddr,
    pub is_leader: bool,
    pub is_online: bool,
    pub term: u64,
    /// Milliseconds since its last heartbeat; `Some(0)` for ourselves, `None` if never heard.
    pub last_seen_ms: Option<u64>,
    pub is_self: bool,
    /// Whom it follows, as its last heartbeat said (ourselves: whom we follow).
    pub follows: Option<SocketAddr>,
    /// A learner (it neither votes nor leads) rather than a voter.
    pub is_learner: bool,
}

#[derive(Debug, Clone, Default)]
struct Entry {
    /// A learner: it follows the leader and receives the log, but never leads, and counts
    /// for no majority.
    learner: bool,
    /// A learner only because a change not yet committed removed it from the voters: its
    /// claim to lead is taken (see [`Election::set_members`]); it counts for nothing.
    former: bool,
    attr: u32,
    term: u64,
    last_seen: Option<Millis>,
    /// The rest of its last heartbeat.
    leader: Option<SocketAddr>,
    sees: u64,
    eligible: bool,
}

impl Entry {
    fn alive(&self) -> bool {
        self.attr & ALIVE_MASK != 0
    }
    fn votes(&self) -> bool {
        !self.learner
    }
    fn claims(&self) -> bool {
        self.attr & LEADER_BIT != 0
    }
    /// Ages the alive mask by one tick, keeping the leader bit.
    fn shift(&mut self) {
        self.attr = ((self.attr << 1) & ALIVE_MASK) | (self.attr & LEADER_BIT);
    }
}

/// What triggered a check. Each re-makes the same choice; they differ in what they may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// The periodic check: ages the alive masks, may elect us.
    Tick,
    /// A peer's connection dropped: may elect us at once (fast failover).
    PeerDown(SocketAddr),
    /// A heartbeat changed what we know of a peer: may make us follow or step down, never
    /// elect us. Heartbeats from different peers arrive one by one; electing ourselves on a
    /// half-updated view (another peer's claim may be next in line) would be premature.
    Heartbeat,
}

/// The election state of one beacon.
#[derive(Debug, Clone)]
pub struct Election {
    me: SocketAddr,
    entries: BTreeMap<SocketAddr, Entry>,
    /// The term we announce: the term we were elected in while leading, else the highest
    /// promised.
    term: u64,
    /// Highest term promised: our own, and those claimed by leaders we heard. A beacon takes
    /// no entries from a leader of an older term. (A term a follower merely announces is
    /// not a claim: a follower of a leader across a bridge must not make us refuse ours.)
    max_seen: u64,
    /// Quorum mode: the leader we promised `max_seen` to (we followed it, or it is us);
    /// `None` while we followed no one in that term.
    promised: Option<SocketAddr>,
    /// Terms are dealt by place among the voters (see [`Election::next_term`]). Off only in
    /// the simulation, to show that promises alone keep one serving leader per term.
    deal: bool,
    /// Highest term heard in any heartbeat; a term we take is above it.
    max_heard: u64,
    /// Our leader's connection dropped: for the ticks left here (or until a leader is
    /// known), a heartbeat that shows a majority has lost it too may elect us.
    failover: u32,
    is_leader: bool,
    leader: Option<SocketAddr>,
    /// Set by the first tick, or once we followed a leader (we then know the cluster's state
    /// first hand); before, we never elect ourselves.
    informed: bool,
    /// Ticks left after a stop during which we elect ourselves on nothing we hear (see
    /// [`WOKEN_TICKS`]).
    woken: u32,
    /// Quorum mode: the eligibility, pre-vote and check-quorum rules apply.
    quorum: bool,
    /// Ticks since we took our current term as leader.
    led_ticks: u32,
    /// The promise last handed out to be stored (see [`Election::promise_to_store`]).
    reported: Promise,
}

impl Election {
    /// A beacon `me` in a cluster of `beacons` (which may or may not list `me`), in classic
    /// mode. A beacon configured alone, or with an empty list, leads from the start.
    pub fn new(me: SocketAddr, beacons: impl IntoIterator<Item = SocketAddr>) -> Self {
        Self::with_term(me, beacons, 0)
    }

    /// Like [`Election::new`], resuming from a term remembered from an earlier run, so terms
    /// never go backwards across restarts.
    pub fn with_term(
        me: SocketAddr,
        beacons: impl IntoIterator<Item = SocketAddr>,
        term: u64,
    ) -> Self {
        Self::with_members(me, beacons, [], term)
    }

    /// Resumes the promise an earlier run stored (its term is the one given at
    /// construction, [`Election::with_members`]).
    pub fn with_promise(mut self, promise: Promise) -> Self {
        if promise.term == self.max_seen && !self.is_leader {
            self.promised = promise.leader;
        }
        self.reported = promise;
        self
    }

    /// The promise to store before anything leaves, when it supersedes the one last handed
    /// out (or stored by an earlier run): a beacon's promises survive its restarts.
    pub fn promise_to_store(&mut self) -> Option<Promise> {
        let promise = self.promise();
        promise.supersedes(&self.reported).then(|| {
            self.reported = promise;
            promise
        })
    }

    /// Whether terms are dealt by place (the default). Off, a beacon takes the next term
    /// above any seen, whichever it is, so beacons often take the same one: only the
    /// simulation turns it off.
    pub fn with_dealing(mut self, deal: bool) -> Self {
        self.deal = deal;
        self
    }

    /// Like [`Election::with_term`], with `learners` beside the voters `beacons`: beacons in
    /// the map that follow the leader but never lead and count for no majority. `me` is a
    /// learner when `learners` lists it (and then not among the voters).
    pub fn with_members(
        me: SocketAddr,
        beacons: impl IntoIterator<Item = SocketAddr>,
        learners: impl IntoIterator<Item = SocketAddr>,
        term: u64,
    ) -> Self {
        let mut entries: BTreeMap<SocketAddr, Entry> = beacons
            .into_iter()
            .map(|addr| (addr, Entry::default()))
            .collect();
        for addr in learners {
            let learner = Entry {
                learner: true,
                ..Entry::default()
            };
            entries.insert(addr, learner);
        }
        let own = entries.entry(me).or_default();
        own.attr = 1;
        own.term = term;
        assert!(
            entries.len() <= MAX_BEACONS,
            "at most {MAX_BEACONS} beacons (the configuration checks this)"
        );
        let mut election = Election {
            me,
            entries,
            term,
            max_seen: term,
            promised: None,
            deal: true,
            max_heard: term,
            failover: 0,
            is_leader: false,
            leader: None,
            informed: false,
            woken: 0,
            quorum: false,
            led_ticks: 0,
            reported: Promise::default(),
        };
        if election.voters().count() == 1 && election.is_voter(me) {
            election.become_leader();
            election.leader = Some(me);
        }
        election
    }

    /// Changes the members (see [`super::members`]): beacons that stay keep what is known
    /// of them, new ones start offline, and `me` is a learner when neither list names it. A
    /// leader that is no voter any more steps down; then the choice is made again.
    /// `former` (among the learners): voters a change not yet committed removed, whose
    /// claims are still taken (the change may give way to a leader that never had it).
    pub fn set_members(
        &mut self,
        voters: impl IntoIterator<Item = SocketAddr>,
        learners: impl IntoIterator<Item = SocketAddr>,
        former: impl IntoIterator<Item = SocketAddr>,
    ) -> Vec<Action> {
        let before = self.heartbeat();
        let mut old = std::mem::take(&mut self.entries);
        for (addr, learner) in voters
            .into_iter()
            .map(|a| (a, false))
            .chain(learners.into_iter().map(|a| (a, true)))
        {
            if self.entries.contains_key(&addr) {
                continue; // a voter listed as a learner too stays a voter
            }
            let mut entry = old.remove(&addr).unwrap_or_default();
            entry.learner = learner;
            entry.former = false;
            self.entries.insert(addr, entry);
        }
        for addr in former {
            if let Some(entry) = self.entries.get_mut(&addr).filter(|e| e.learner) {
                entry.former = true;
            }
        }
        if !self.entries.contains_key(&self.me) {
            let mut own = old.remove(&self.me).unwrap_or_default();
            own.attr |= 1;
            own.learner = true;
            self.entries.insert(self.me, own);
        }
        let mut actions = Vec::new();
        if self.is_leader && self.is_learner() {
            self.step_down();
            self.settle_leader(None, &mut actions);
        }
        if self.leader.is_some_and(|l| !self.entries.contains_key(&l)) {
            self.settle_leader(None, &mut actions);
        }
        actions.extend(self.check(Check::Heartbeat));
        self.announce(before, true, &mut actions);
        actions
    }

    /// Whether `node` is online and follows us in our term (while we lead).
    pub fn follows_me(&self, node: SocketAddr) -> bool {
        self.is_leader
            && self.entries.get(&node).is_some_and(|e| {
                e.alive() && !e.claims() && e.leader == Some(self.me) && e.term == self.term
            })
    }

    /// Whether `node` is a voter here: a beacon in the map that is no learner.
    pub fn is_voter(&self, node: SocketAddr) -> bool {
        self.entries.get(&node).is_some_and(Entry::votes)
    }

    /// Whether this beacon is a learner: it follows, and never leads.
    pub fn is_learner(&self) -> bool {
        !self.is_voter(self.me)
    }

    /// The voters, in sorted order (the positions of `Heartbeat::sees` and of the terms).
    fn voters(&self) -> impl Iterator<Item = (&SocketAddr, &Entry)> {
        self.entries.iter().filter(|(_, e)| e.votes())
    }

    /// Switches the quorum-mode rules on or off (see the module documentation).
    pub fn with_quorum(mut self, quorum: bool) -> Self {
        self.quorum = quorum;
        self
    }

    pub fn me(&self) -> SocketAddr {
        self.me
    }

    pub fn is_leader(&self) -> bool {
        self.is_leader
    }

    /// The leader this beacon follows (or is), if one is known.
    pub fn leader(&self) -> Option<SocketAddr> {
        self.leader
    }

    /// The leader this beacon follows, another beacon (`None` while it leads, or knows no
    /// leader).
    pub fn followed(&self) -> Option<SocketAddr> {
        self.leader.filter(|_| !self.is_leader)
    }

    /// The term this beacon announces.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The highest term this beacon has seen.
    pub fn max_seen_term(&self) -> u64 {
        self.max_seen
    }

    /// The highest term seen and whom it was promised to (quorum mode; in classic mode no
    /// leader is recorded).
    pub fn promise(&self) -> Promise {
        Promise {
            term: self.max_seen,
            leader: self.promised,
        }
    }

    /// Voters that make a majority.
    pub fn majority(&self) -> usize {
        self.voters().count() / 2 + 1
    }

    /// The heartbeat this beacon sends now.
    pub fn heartbeat(&self) -> Heartbeat {
        Heartbeat {
            is_leader: self.is_leader,
            term: self.term,
            leader: self.leader,
            sees: self.sees(),
            eligible: self.eligible(),
        }
    }

    /// Every other beacon, voters and learners, in sorted order.
    pub fn peers(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.entries.keys().copied().filter(|a| *a != self.me)
    }

    /// Whether `node` is online in this beacon's view.
    pub fn is_online(&self, node: SocketAddr) -> bool {
        self.entries.get(&node).is_some_and(Entry::alive)
    }

    /// Voters this one sees online, itself included if it is one.
    pub fn online(&self) -> usize {
        self.voters().filter(|(_, e)| e.alive()).count()
    }

    /// Followers (online, following us in our term) and ourselves, while leading; the
    /// number check-quorum compares with the majority.
    pub fn support(&self) -> usize {
        1 + self
            .other_voters()
            .filter(|(_, e)| {
                e.alive() && !e.claims() && e.leader == Some(self.me) && e.term == self.term
            })
            .count()
    }

    /// The whole map as rows, in sorted order.
    pub fn view(&self, now: Millis) -> Vec<BeaconView> {
        self.entries
            .iter()
            .map(|(addr, e)| {
                let is_self = *addr == self.me;
                BeaconView {
                    node: *addr,
                    // A claim is only shown while its beacon is online; the next check
                    // clears the bit of a beacon whose mask has emptied.
                    is_leader: e.claims() && e.alive(),
                    is_online: e.alive(),
                    term: e.term,
                    last_seen_ms: if is_self {
                        Some(0)
                    } else {
                        e.last_seen.map(|t| now.saturating_sub(t))
                    },
                    is_self,
                    follows: if is_self { self.leader } else { e.leader },
                    is_learner: e.learner,
                }
            })
            .collect()
    }

    /// Feeds one input in.
    pub fn step(&mut self, now: Millis, input: Input) -> Result<Vec<Action>, ElectionError> {
        match input {
            Input::Heartbeat { from, hb } => self.on_heartbeat(now, from, hb, false),
            Input::Greeting { from, hb } => self.on_heartbeat(now, from, hb, true),
            Input::PeerDown { peer } => Ok(self.on_peer_down(peer)),
        }
    }

    /// Our leader `from`, in `term`, hands its leadership to us (a leader transfer for
    /// maintenance): we lead at once in a term above any seen, so every beacon, the old
    /// leader included, prefers our claim (the higher term) without an election gap. Taken
    /// only from the leader we follow, in the term we know it in; anything else is ignored
    /// (a stale or misdirected hand-over).
    pub fn take_transfer(&mut self, from: SocketAddr, term: u64) -> Vec<Action> {
        if self.is_leader || self.leader != Some(from) || self.term != term || self.is_learner() {
            return Vec::new();
        }
        let before = self.heartbeat();
        let mut actions = Vec::new();
        self.become_leader();
        self.settle_leader(Some(self.me), &mut actions);
        self.announce(before, false, &mut actions);
        actions
    }

    /// The periodic check (NebulaBeacon's `CheckLeader`), then this tick's heartbeat.
    pub fn tick(&mut self, _now: Millis) -> Vec<Action> {
        self.informed = true;
        self.woken = self.woken.saturating_sub(1);
        let before = self.heartbeat();
        let mut actions = self.check(Check::Tick);
        // Check-quorum counts the ticks of a leadership from the first one after it began.
        if self.quorum && self.is_leader && before.is_leader && before.term == self.term {
            self.led_ticks = self.led_ticks.saturating_add(1);
            if self.led_ticks > QUORUM_GRACE_TICKS && self.support() < self.majority() {
                self.step_down();
                self.settle_leader(None, &mut actions);
            }
        }
        // One heartbeat per tick, whatever changed.
        self.announce(before, true, &mut actions);
        actions
    }

    /// The driver ran no tick for `missed` tick periods (the process was stopped or
    /// starved): the alive masks age as if those ticks had run, so heartbeats that were
    /// missing all that time count as missing. A leader that thereby sees fewer than a
    /// majority following it (quorum mode) steps down now, before it acts on anything that
    /// queued up meanwhile: the others may well have elected someone else.
    ///
    /// After a stop of two ticks or more, it elects itself on nothing it hears for
    /// [`WOKEN_TICKS`]: the heartbeats that queued up meanwhile are stale.
    pub fn catch_up(&mut self, missed: u32) -> Vec<Action> {
        if missed >= 2 {
            self.woken = WOKEN_TICKS;
        }
        let before = self.heartbeat();
        for _ in 0..missed.min(3) {
            self.shift_masks();
        }
        let mut actions = Vec::new();
        if self.is_leader {
            self.led_ticks = self.led_ticks.saturating_add(missed);
            if self.quorum && self.support() < self.majority() {
                self.step_down();
                self.settle_leader(None, &mut actions);
            }
        }
        self.announce(before, false, &mut actions);
        actions
    }

    fn on_heartbeat(
        &mut self,
        now: Millis,
        from: SocketAddr,
        hb: Heartbeat,
        greeting: bool,
    ) -> Result<Vec<Action>, ElectionError> {
        if from == self.me {
            return Err(ElectionError::OwnAddress(from));
        }
        let before = self.heartbeat();
        let entry = self
            .entries
            .get_mut(&from)
            .ok_or(ElectionError::UnknownBeacon(from))?;
        if greeting && entry.alive() {
            // What we know of it is at least as fresh: only its sign of life counts.
            entry.attr |= 1;
            entry.last_seen = Some(now);
            return Ok(Vec::new());
        }
        let changed = !entry.alive()
            || entry.claims() != hb.is_leader
            || entry.term != hb.term
            || entry.leader != hb.leader
            || entry.sees != hb.sees
            || entry.eligible != hb.eligible;
        entry.attr |= 1;
        // A learner never leads: a claim from one (a beacon that takes itself for a voter:
        // its configuration differs) is not taken, nor its term heard.
        let claims = hb.is_leader && (entry.votes() || entry.former);
        if claims {
            entry.attr |= LEADER_BIT;
        } else {
            entry.attr &= !LEADER_BIT;
        }
        entry.term = hb.term;
        entry.leader = hb.leader;
        entry.sees = hb.sees;
        entry.eligible = hb.eligible;
        entry.last_seen = Some(now);
        if entry.votes() {
            self.max_heard = self.max_heard.max(hb.term);
        }
        if claims {
            self.see_term(hb.term);
        }
        let mut actions = if changed {
            self.check(Check::Heartbeat)
        } else {
            Vec::new()
        };
        // A follower whose heartbeat changed answers at once: a later term is the promise a
        // new leader (quorum mode) collects before it serves, and whom it follows and sees
        // is what others' elections count. Waiting for the next tick would add up to a
        // tick to every failover.
        self.announce(before, false, &mut actions);
        Ok(actions)
    }

    fn on_peer_down(&mut self, peer: SocketAddr) -> Vec<Action> {
        let known = self
            .entries
            .get(&peer)
            .is_some_and(|e| peer != self.me && (e.alive() || e.claims()));
        if !known {
            return Vec::new();
        }
        let before = self.heartbeat();
        if let Some(entry) = self.entries.get_mut(&peer) {
            entry.attr = 0;
        }
        let mut actions = self.check(Check::PeerDown(peer));
        self.announce(before, false, &mut actions);
        actions
    }

    /// Adds a broadcast of our heartbeat when it differs from `before`, or `always`: a
    /// beacon tells its peers at once whenever what it would tell them changed.
    fn announce(&self, before: Heartbeat, always: bool, actions: &mut Vec<Action>) {
        let now = self.heartbeat();
        if always || now != before {
            actions.push(Action::Broadcast(now));
        }
    }

    fn see_term(&mut self, term: u64) {
        if term > self.max_seen {
            self.promised = None;
        }
        self.max_seen = self.max_seen.max(term);
        if !self.is_leader {
            self.term = self.max_seen;
            if let Some(own) = self.entries.get_mut(&self.me) {
                own.term = self.term;
            }
        }
    }

    /// The voters other than us: whom every count of support, contact and claims walks
    /// (a learner counts in none of them).
    fn other_voters(&self) -> impl Iterator<Item = (&SocketAddr, &Entry)> {
        self.voters().filter(|(a, _)| **a != self.me)
    }

    /// Our bit in `Heartbeat::sees` (none for a learner).
    fn my_bit(&self) -> u64 {
        let position = self.voters().position(|(a, _)| *a == self.me);
        position.map_or(0, |p| 1 << p)
    }

    /// Which voters we see online, as a bitmap in their sorted order.
    fn sees(&self) -> u64 {
        self.voters()
            .enumerate()
            .filter(|(_, (_, e))| e.alive())
            .fold(0, |bits, (i, _)| bits | 1 << i)
    }

    /// Beacons in two-way contact with us (we see them online, their last heartbeat says
    /// they see us), ourselves included.
    fn two_way(&self) -> usize {
        let me = self.my_bit();
        1 + self
            .other_voters()
            .filter(|(_, e)| e.alive() && e.sees & me != 0)
            .count()
    }

    /// Whether we could lead if chosen: always in classic mode; in quorum mode only in
    /// two-way contact with a majority.
    fn eligible(&self) -> bool {
        !self.is_learner() && (!self.quorum || self.two_way() >= self.majority())
    }

    /// Beacons that would follow us if we took a new term (the pre-vote): ourselves, and
    /// every online beacon that hears us, claims nothing and follows no other leader.
    fn available(&self) -> usize {
        let me = self.my_bit();
        1 + self
            .other_voters()
            .filter(|(_, e)| {
                e.alive()
                    && !e.claims()
                    && e.sees & me != 0
                    && (e.leader.is_none() || e.leader == Some(self.me))
            })
            .count()
    }

    /// The highest term announced by an online beacon that follows us or no one: a term we
    /// must lead above for it to take our entries. A learner's counts too: one that took a
    /// later term (from a voter a change it has not caught up with removed) ignores our
    /// log, and so would never learn of the change.
    fn unfollowed_term(&self) -> u64 {
        self.entries
            .iter()
            .filter(|(a, e)| {
                **a != self.me
                    && e.alive()
                    && !e.claims()
                    && (e.leader.is_none() || e.leader == Some(self.me))
            })
            .map(|(_, e)| e.term)
            .max()
            .unwrap_or(0)
    }

    /// Whether we may follow `claimant` (quorum mode): only in the highest term we know (we
    /// take no entries of an older one, and whom we follow in which term is what our
    /// heartbeat promises), and not when we promised that term to another beacon
    /// (ourselves included).
    fn may_follow(&self, claimant: SocketAddr) -> bool {
        let Some(entry) = self.entries.get(&claimant) else {
            return false;
        };
        !self.quorum || (entry.term == self.max_seen && self.promised.is_none_or(|p| p == claimant))
    }

    /// Leading: an online beacon that sees us, claims nothing and announces our term follows
    /// no one. Its promise of our term went to another (two beacons took the same term), so
    /// it can follow us only in a later one. (A learner too: it would take no log until the
    /// next term.)
    fn held_elsewhere(&self) -> bool {
        let me = self.my_bit();
        self.quorum
            && self.entries.iter().any(|(a, e)| {
                *a != self.me
                    && e.alive()
                    && !e.claims()
                    && e.leader.is_none()
                    && e.term == self.term
                    && e.sees & me != 0
            })
    }

    /// The term this beacon takes when it becomes leader: the smallest term above any seen
    /// that belongs to it. Terms are dealt out round-robin by position in the sorted list
    /// (with three beacons the first takes 1, 4, 7, ..., the second 2, 5, 8, ...), so no two
    /// beacons ever lead in the same term, even when a partition lets both lead at once.
    fn next_term(&self) -> u64 {
        let n = self.voters().count() as u64;
        let position = self
            .voters()
            .position(|(a, _)| *a == self.me)
            .expect("a voter takes terms") as u64;
        // Inputs are bounded (`bounds::MAX_TERM`), so this cannot wrap; saturating all the
        // same, so that a bug elsewhere cannot wrap a term to 0.
        let above = self
            .max_seen
            .max(self.max_heard)
            .max(if self.is_leader {
                self.unfollowed_term()
            } else {
                0
            })
            .saturating_add(1);
        if !self.deal {
            return above;
        }
        above.saturating_add((position + n - (above - 1) % n) % n)
    }

    fn become_leader(&mut self) {
        self.is_leader = true;
        self.term = self.next_term();
        self.max_seen = self.term;
        self.promised = self.quorum.then_some(self.me);
        self.led_ticks = 0;
        let own = self.entries.get_mut(&self.me).expect("own entry");
        own.attr |= LEADER_BIT;
        own.term = self.term;
    }

    fn step_down(&mut self) {
        self.is_leader = false;
        self.term = self.max_seen;
        let own = self.entries.get_mut(&self.me).expect("own entry");
        own.attr &= !LEADER_BIT;
        own.term = self.term;
    }

    fn shift_masks(&mut self) {
        let me = self.me;
        for (addr, entry) in self.entries.iter_mut() {
            entry.shift();
            if *addr == me {
                entry.attr |= 1;
            }
        }
    }

    /// Records whom we follow now, with an action when it changed.
    fn settle_leader(&mut self, leader: Option<SocketAddr>, actions: &mut Vec<Action>) {
        if leader != self.leader {
            self.leader = leader;
            actions.push(Action::LeaderChanged {
                leader,
                term: self.term,
            });
        }
    }

    /// The leader candidate: among online beacons, the claimant with the highest term
    /// (ties to the earlier one), else the first eligible one. Returns it and whether it
    /// claims.
    fn candidate(&self) -> Option<(SocketAddr, bool)> {
        let own_eligible = self.eligible();
        let mut chosen: Option<(SocketAddr, bool, u64)> = None;
        // A former voter is a candidate by its claim alone.
        let walked = self
            .entries
            .iter()
            .filter(|(_, e)| e.votes() || (e.former && e.claims()));
        for (addr, entry) in walked {
            if !entry.alive() {
                continue;
            }
            let better = match chosen {
                None => {
                    let eligible = if *addr == self.me {
                        own_eligible
                    } else {
                        !self.quorum || entry.eligible
                    };
                    entry.claims() || eligible
                }
                Some((_, chosen_claims, chosen_term)) => {
                    entry.claims() && (!chosen_claims || entry.term > chosen_term)
                }
            };
            if better {
                chosen = Some((*addr, entry.claims(), entry.term));
            }
        }
        chosen.map(|(addr, claims, _)| (addr, claims))
    }

    /// Walks the map and settles who leads.
    fn check(&mut self, why: Check) -> Vec<Action> {
        let candidate = self.candidate();
        // An entry whose mask is empty loses its leader bit; a tick ages every mask.
        for entry in self.entries.values_mut() {
            if !entry.alive() {
                entry.attr &= !LEADER_BIT;
            }
        }
        if why == Check::Tick {
            self.shift_masks();
        }
        let rival = self.other_voters().any(|(_, e)| e.alive() && e.claims());

        let mut actions = Vec::new();
        let term_before = self.term;
        // A fresh beacon first learns the cluster's state: it may elect itself once it has
        // ticked (its peers' handshakes have had a tick to arrive) or once it has followed a
        // leader (it knows the state first hand).
        self.informed |= self.leader.is_some();
        let informed = self.informed;
        if let Check::PeerDown(peer) = why
            && self.leader == Some(peer)
            && !self.is_leader
        {
            // Our leader's process died (its connections closed): its other followers lose
            // it at the same moment and say so; once a majority has, we may take over
            // without waiting for a tick.
            self.failover = FAILOVER_TICKS;
        }
        // A heartbeat may elect us only during such a failover: otherwise another peer's
        // claim may be next in line.
        let may_elect = why != Check::Heartbeat || self.failover > 0;
        match candidate {
            Some((c, _)) if c == self.me => {
                if !self.is_leader
                    && informed
                    && self.woken == 0
                    && may_elect
                    && (!self.quorum || self.available() >= self.majority())
                {
                    self.become_leader();
                } else if self.is_leader
                    && why == Check::Tick
                    && !rival
                    && (self.unfollowed_term() > self.term || self.held_elsewhere())
                {
                    // A beacon that follows us (or no one) announces a later term than ours:
                    // it ignores an older leader's entries (it kept that term across a
                    // restart, or saw a rival that is gone). We lead on in a term above it;
                    // not while a rival's claim is online (the claims settle that), and at
                    // most once a tick. So too when a voter that sees us is held from
                    // following us by a promise of our term to another.
                    self.become_leader();
                }
            }
            _ if self.is_leader => self.step_down(),
            _ => {}
        }

        let leader = match candidate {
            Some((c, _)) if c == self.me => self.is_leader.then_some(self.me),
            Some((c, claims)) => (claims && self.may_follow(c)).then_some(c),
            None => None,
        };
        if let Some(l) = leader.filter(|_| self.quorum)
            && self
                .entries
                .get(&l)
                .is_some_and(|e| e.term == self.max_seen)
        {
            // Following `l` in the highest term we know is our promise of that term.
            self.promised = Some(l);
        }
        if self.is_leader && self.term != term_before {
            // A new term is a new leadership, even with the same leader.
            self.leader = None;
        }
        if leader.is_some() {
            self.failover = 0;
        } else if why == Check::Tick {
            self.failover = self.failover.saturating_sub(1);
        }
        self.settle_leader(leader, &mut actions);
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    const A: u16 = 16000;
    const B: u16 = 17000;
    const C: u16 = 18000;
    const D: u16 = 19000;
    const E: u16 = 20000;

    fn cluster(me: u16) -> Election {
        Election::new(addr(me), [addr(A), addr(B), addr(C)])
    }

    fn quorum(me: u16, ports: &[u16]) -> Election {
        Election::new(addr(me), ports.iter().map(|p| addr(*p))).with_quorum(true)
    }

    /// What an action comes to, in a form tests can spell out.
    #[derive(Debug, PartialEq, Eq)]
    enum Act {
        /// A heartbeat broadcast: (is_leader, term).
        Beat(bool, u64),
        /// Now following (or leading as) the beacon on this port, in this term.
        Follows(Option<u16>, u64),
    }
    use Act::{Beat, Follows};

    fn acts(actions: Vec<Action>) -> Vec<Act> {
        actions
            .into_iter()
            .map(|a| match a {
                Action::Broadcast(hb) => Beat(hb.is_leader, hb.term),
                Action::LeaderChanged { leader, term } => Follows(leader.map(|l| l.port()), term),
            })
            .collect()
    }

    /// A heartbeat from a classic-mode peer: follows `leader` (port), sees everyone.
    fn hb_from(is_leader: bool, term: u64, leader: Option<u16>) -> Heartbeat {
        Heartbeat {
            is_leader,
            term,
            leader: leader.map(addr),
            sees: u64::MAX,
            eligible: true,
        }
    }

    fn beat(e: &mut Election, now: Millis, from: u16, is_leader: bool, term: u64) -> Vec<Act> {
        let leader = is_leader.then_some(from);
        send(e, now, from, hb_from(is_leader, term, leader))
    }

    fn send(e: &mut Election, now: Millis, from: u16, hb: Heartbeat) -> Vec<Act> {
        acts(
            e.step(
                now,
                Input::Heartbeat {
                    from: addr(from),
                    hb,
                },
            )
            .unwrap(),
        )
    }

    fn down(e: &mut Election, peer: u16) -> Vec<Act> {
        acts(e.step(0, Input::PeerDown { peer: addr(peer) }).unwrap())
    }

    fn tick(e: &mut Election, now: Millis) -> Vec<Act> {
        acts(e.tick(now))
    }

    #[test]
    fn a_lone_beacon_leads_from_the_start() {
        let alone = Election::new(addr(A), []);
        assert!(alone.is_leader());
        assert_eq!(alone.term(), 1);
        assert_eq!(alone.leader(), Some(addr(A)));
        assert_eq!(alone.followed(), None, "it leads, it follows nobody");
        let listed_alone = Election::new(addr(A), [addr(A)]);
        assert!(listed_alone.is_leader());
        let mut resumed = Election::with_term(addr(A), [], 41);
        assert_eq!(resumed.term(), 42);
        assert_eq!(tick(&mut resumed, 100), vec![Beat(true, 42)]);
        let mut quorum_alone = quorum(A, &[A]);
        assert!(quorum_alone.is_leader());
        assert_eq!(tick(&mut quorum_alone, 100), vec![Beat(true, 1)]);
        assert!(quorum_alone.is_leader(), "a majority of one");
    }

    #[test]
    fn a_transfer_makes_the_follower_lead_in_a_higher_term_that_the_old_leader_yields_to() {
        // C follows A (term 1).
        let mut c = cluster(C);
        beat(&mut c, 1, B, false, 1);
        beat(&mut c, 1, A, true, 1);
        assert_eq!(c.leader(), Some(addr(A)));
        // A hand-over from someone C does not follow, or in another term, is ignored.
        assert!(c.take_transfer(addr(B), 1).is_empty());
        assert!(c.take_transfer(addr(A), 4).is_empty());
        assert!(!c.is_leader());
        // From A in term 1: C leads at once, in its own next term (3), and says so.
        assert_eq!(
            acts(c.take_transfer(addr(A), 1)),
            vec![Follows(Some(C), 3), Beat(true, 3)]
        );
        assert!(c.is_leader());
        // A hears C's claim in the higher term: it steps down and follows C, with no tick.
        let mut a = cluster(A);
        tick(&mut a, 100);
        assert!(a.is_leader() && a.term() == 1);
        beat(&mut a, 101, B, false, 1);
        assert_eq!(
            beat(&mut a, 102, C, true, 3),
            vec![Follows(Some(C), 3), Beat(false, 3)]
        );
        assert!(!a.is_leader());
        // A tick later C is still the leader everywhere (sticky), although A is first.
        tick(&mut a, 200);
        assert_eq!(a.leader(), Some(addr(C)));
    }

    #[test]
    fn a_clustered_beacon_waits_for_its_first_tick() {
        let mut b = cluster(B);
        assert!(!b.is_leader());
        // Heartbeats before the first tick never make us leader, even if we are first online;
        // C coming online changes what we see, which we announce.
        assert_eq!(beat(&mut b, 1, C, false, 0), vec![Beat(false, 0)]);
        assert!(!b.is_leader());
        // First tick: A never heard of, B is the first online beacon, so B leads, in the
        // first term that is B's (terms are dealt round-robin: A 1, B 2, C 3, A 4, ...).
        assert_eq!(tick(&mut b, 100), vec![Follows(Some(B), 2), Beat(true, 2)]);
    }

    #[test]
    fn the_first_online_beacon_leads_and_others_follow_its_claim() {
        let mut c = cluster(C);
        beat(&mut c, 1, A, false, 0);
        beat(&mut c, 1, B, false, 0);
        // A is first online but has not claimed yet: C follows nobody, and does not lead.
        assert_eq!(tick(&mut c, 100), vec![Beat(false, 0)]);
        assert_eq!(c.leader(), None);
        // A's claim arrives: C follows A at once, and answers at once with A's term (its
        // promise), without waiting for the next tick.
        assert_eq!(
            beat(&mut c, 150, A, true, 1),
            vec![Follows(Some(A), 1), Beat(false, 1)]
        );
        assert_eq!(c.term(), 1);
        assert_eq!(
            c.heartbeat().leader,
            Some(addr(A)),
            "it says whom it follows"
        );
        assert_eq!(c.followed(), Some(addr(A)));
        assert_eq!(tick(&mut c, 200), vec![Beat(false, 1)]);
        // The same heartbeat again changes nothing and is not answered.
        assert_eq!(beat(&mut c, 210, A, true, 1), vec![]);
    }

    #[test]
    fn three_silent_ticks_empty_the_alive_mask_and_the_fourth_acts_on_it() {
        // B leads; its last heartbeat reaches C before tick 1.
        let mut c = cluster(C);
        beat(&mut c, 0, A, false, 0);
        beat(&mut c, 0, B, true, 1);
        for t in 1..=2 {
            tick(&mut c, t * 100);
            assert!(c.is_online(addr(B)), "online after tick {t}");
            send(&mut c, t * 100, A, hb_from(false, 1, Some(B)));
        }
        // Tick 3 still counts B's heartbeat, then shifts it out: B is shown offline.
        tick(&mut c, 300);
        assert!(!c.is_online(addr(B)));
        assert_eq!(
            c.view(300)[1],
            BeaconView {
                node: addr(B),
                is_leader: false,
                is_online: false,
                term: 1,
                last_seen_ms: Some(300),
                is_self: false,
                follows: Some(addr(B)),
                is_learner: false,
            }
        );
        assert_eq!(
            c.leader(),
            Some(addr(B)),
            "the decision waits for the next tick"
        );
        // Tick 4 clears B's leader bit; A, first online, has not claimed yet.
        send(&mut c, 300, A, hb_from(false, 1, Some(B)));
        assert_eq!(tick(&mut c, 400), vec![Follows(None, 1), Beat(false, 1)]);
    }

    #[test]
    fn an_online_leader_keeps_leading_when_an_earlier_beacon_returns() {
        // B leads (A was down); A (first in order) restarts and reports in as a follower.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        tick(&mut b, 100); // B is first online: leads in its first term, 2
        assert!(b.is_leader());
        beat(&mut b, 150, A, false, 0);
        assert_eq!(tick(&mut b, 200), vec![Beat(true, 2)]);
        assert!(b.is_leader(), "sticky: the online leader stays");

        let mut a = cluster(A);
        beat(&mut a, 0, B, true, 2);
        send(&mut a, 0, C, hb_from(false, 2, Some(B)));
        assert_eq!(a.leader(), Some(addr(B)));
        assert_eq!(tick(&mut a, 100), vec![Beat(false, 2)]);
        assert!(
            !a.is_leader(),
            "a restarted beacon does not take leadership back"
        );
    }

    #[test]
    fn heartbeat_with_is_leader_zero_clears_the_mirrored_bit() {
        let mut c = cluster(C);
        beat(&mut c, 0, B, true, 3);
        assert!(c.view(0)[1].is_leader);
        beat(&mut c, 10, B, false, 3);
        assert!(!c.view(10)[1].is_leader, "leader bit mirrors is_leader = 0");
    }

    #[test]
    fn losing_the_leader_connection_elects_the_next_beacon_at_once() {
        let mut b = cluster(B);
        beat(&mut b, 0, A, true, 1);
        send(&mut b, 0, C, hb_from(false, 1, Some(A)));
        tick(&mut b, 100);
        assert_eq!(b.leader(), Some(addr(A)));
        // No tick in between: B is now the first online beacon and takes term 2.
        assert_eq!(down(&mut b, A), vec![Follows(Some(B), 2), Beat(true, 2)]);
        let row = &b.view(100)[0];
        assert!(!row.is_online && !row.is_leader);
        // A peer that is already down changes nothing.
        assert_eq!(down(&mut b, A), vec![]);
    }

    #[test]
    fn a_restarted_beacon_that_follows_a_leader_may_take_over_before_its_first_tick() {
        // A restarts and learns from the handshakes that B leads; B dies before A's first tick.
        let mut a = cluster(A);
        beat(&mut a, 5, B, true, 2);
        send(&mut a, 5, C, hb_from(false, 2, Some(B)));
        assert_eq!(down(&mut a, B), vec![Follows(Some(A), 4), Beat(true, 4)]);
        // Without that knowledge it waits for its tick.
        let mut fresh = cluster(A);
        beat(&mut fresh, 5, C, false, 2);
        assert_eq!(down(&mut fresh, C), vec![Beat(false, 0)]);
        assert!(!fresh.is_leader());
    }

    #[test]
    fn a_leader_steps_down_the_moment_a_stronger_claim_is_online() {
        // After a partition heals A (term 5) and B (term 3) both claim leadership.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        tick(&mut b, 100);
        assert!(b.is_leader());
        assert_eq!(
            beat(&mut b, 150, A, true, 5),
            vec![Follows(Some(A), 5), Beat(false, 5)]
        );
        assert!(!b.is_leader());
        assert_eq!(b.term(), 5, "a follower announces the highest term seen");
    }

    #[test]
    fn a_leader_that_hears_a_later_term_takes_a_term_above_it() {
        // A leads in term 1; C restarts remembering term 5 (a leader it saw in a partition)
        // and follows A. C ignores writes of terms below 5, so A moves past it.
        let mut a = cluster(A);
        beat(&mut a, 0, B, false, 0);
        tick(&mut a, 100);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
        // The heartbeat itself changes only what A sees; the next tick acts on the term.
        assert_eq!(
            send(&mut a, 150, C, hb_from(false, 5, Some(A))),
            vec![Beat(true, 1)]
        );
        assert_eq!(tick(&mut a, 200), vec![Follows(Some(A), 7), Beat(true, 7)]);
        assert_eq!((a.is_leader(), a.term(), a.max_seen_term()), (true, 7, 7));
        // Hearing its own term again changes nothing.
        assert_eq!(send(&mut a, 250, C, hb_from(false, 7, Some(A))), vec![]);
        assert_eq!(tick(&mut a, 300), vec![Beat(true, 7)], "a plain tick");
        // While a rival's claim is online the claims settle it: no new term.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        tick(&mut b, 100);
        assert_eq!((b.is_leader(), b.term()), (true, 2));
        beat(&mut b, 150, A, true, 1);
        beat(&mut b, 160, C, false, 5);
        tick(&mut b, 200);
        assert_eq!((b.is_leader(), b.term()), (true, 2));
    }

    #[test]
    fn a_later_term_from_a_follower_of_another_leader_is_no_reason_to_raise_ours() {
        // Across a bridge: C follows a leader (term 5) that A cannot hear. A does not race
        // it upwards.
        let mut a = cluster(A);
        beat(&mut a, 0, B, false, 0);
        tick(&mut a, 100);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
        send(&mut a, 150, C, hb_from(false, 5, Some(E)));
        tick(&mut a, 200);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
    }

    #[test]
    fn terms_are_dealt_round_robin_so_no_two_beacons_share_one() {
        let taken = |me: u16, max_seen: u64| {
            let mut e = Election::with_term(addr(me), [addr(A), addr(B), addr(C)], max_seen);
            e.tick(0);
            e.term()
        };
        assert_eq!([taken(A, 0), taken(B, 0), taken(C, 0)], [1, 2, 3]);
        assert_eq!([taken(A, 3), taken(B, 3), taken(C, 3)], [4, 5, 6]);
        assert_eq!([taken(A, 4), taken(B, 4), taken(C, 4)], [7, 5, 6]);
        // Partitioned apart with the same history, A and C still lead in different terms,
        // and when they meet the higher one wins everywhere.
        let mut a = cluster(A);
        let mut c = cluster(C);
        a.max_seen = 3;
        c.max_seen = 3;
        a.tick(0);
        c.tick(0);
        assert_eq!((a.term(), c.term()), (4, 6));
        assert_eq!(
            beat(&mut a, 10, C, true, 6),
            vec![Follows(Some(C), 6), Beat(false, 6)]
        );
        assert_eq!(beat(&mut c, 10, A, true, 4), vec![Beat(true, 6)]);
        assert!(c.is_leader());
    }

    #[test]
    fn equal_claimed_terms_resolve_by_sorted_order() {
        // Unique terms make this impossible between correct beacons; a misconfigured peer
        // could still produce it, and the choice must still be the same everywhere.
        let mut b = cluster(B);
        beat(&mut b, 10, C, true, 4);
        beat(&mut b, 10, A, true, 4);
        assert_eq!(b.leader(), Some(addr(A)));
        let mut b2 = cluster(B);
        beat(&mut b2, 10, A, true, 4);
        beat(&mut b2, 10, C, true, 4);
        assert_eq!(b2.leader(), Some(addr(A)));
    }

    #[test]
    fn a_higher_term_beats_sorted_order() {
        let mut b = cluster(B);
        beat(&mut b, 0, A, true, 2);
        beat(&mut b, 0, C, true, 7);
        assert_eq!(b.leader(), Some(addr(C)));
        b.tick(100);
        assert_eq!(b.leader(), Some(addr(C)));
    }

    #[test]
    fn terms_never_decrease() {
        let mut b = cluster(B);
        b.tick(0);
        beat(&mut b, 0, A, true, 9);
        assert_eq!(b.term(), 9);
        beat(&mut b, 10, A, true, 2);
        assert_eq!(b.term(), 9);
        assert_eq!(b.max_seen_term(), 9);
        down(&mut b, A);
        assert_eq!(
            b.term(),
            11,
            "new leader takes its first term above any seen"
        );
    }

    #[test]
    fn the_leader_bit_of_an_offline_beacon_is_cleared() {
        let mut c = cluster(C);
        beat(&mut c, 0, A, true, 1);
        for t in 1..=4 {
            c.tick(t * 100);
        }
        let row = &c.view(400)[0];
        assert!(!row.is_online);
        assert!(!row.is_leader);
        // C is the only online beacon left, so it leads.
        assert!(c.is_leader());
    }

    #[test]
    fn unknown_senders_are_refused() {
        let mut a = cluster(A);
        let stranger = addr(19000);
        assert_eq!(
            a.step(
                0,
                Input::Heartbeat {
                    from: stranger,
                    hb: Heartbeat::bare(true, 1)
                }
            ),
            Err(ElectionError::UnknownBeacon(stranger))
        );
        assert_eq!(
            a.step(
                0,
                Input::Heartbeat {
                    from: addr(A),
                    hb: Heartbeat::bare(true, 1)
                }
            ),
            Err(ElectionError::OwnAddress(addr(A)))
        );
        assert_eq!(a.view(0).len(), 3, "a refused sender is not added");
    }

    #[test]
    fn sorted_order_is_numeric_by_port() {
        let e = Election::new(addr(9000), [addr(16000), addr(9000), addr(10000)]);
        let order: Vec<u16> = e.view(0).iter().map(|v| v.node.port()).collect();
        assert_eq!(order, vec![9000, 10000, 16000]);
    }

    #[test]
    fn missed_ticks_age_the_masks_and_a_leader_without_a_majority_steps_down() {
        // Classic mode: the masks age, leadership stays (NebulaBeacon's rule).
        let mut a = cluster(A);
        beat(&mut a, 0, B, false, 0);
        tick(&mut a, 100);
        assert!(a.is_leader());
        a.catch_up(5);
        assert!(!a.is_online(addr(B)), "B's heartbeat is three ticks old");
        assert!(a.is_leader());
        // Quorum mode: a leader that finds it has missed ticks, and so may have been
        // replaced, steps down at once, before anything queued up is acted on.
        let mut q = quorum(A, &[A, B, C]);
        let follows_a = Heartbeat {
            is_leader: false,
            term: 0,
            leader: None,
            sees: 0b111,
            eligible: true,
        };
        send(&mut q, 0, B, follows_a);
        send(&mut q, 0, C, follows_a);
        tick(&mut q, 100);
        assert!(q.is_leader());
        let answer = Heartbeat {
            term: q.term(),
            leader: Some(addr(A)),
            ..follows_a
        };
        send(&mut q, 110, B, answer);
        send(&mut q, 110, C, answer);
        assert_eq!(q.support(), 3);
        // Two missed ticks leave the followers online; a long stop does not.
        assert_eq!(acts(q.catch_up(1)), vec![]);
        assert!(q.is_leader());
        assert_eq!(acts(q.catch_up(70)), vec![Follows(None, 1), Beat(false, 1)]);
        assert!(!q.is_leader());
    }

    // ---- quorum mode -----------------------------------------------------------------------

    /// A heartbeat in quorum mode from a beacon that sees the beacons at `sees` (ports).
    fn qhb(
        is_leader: bool,
        term: u64,
        leader: Option<u16>,
        sees: &[u16],
        all: &[u16],
    ) -> Heartbeat {
        let bits = sees
            .iter()
            .map(|p| 1u64 << all.iter().position(|a| a == p).unwrap())
            .fold(0, |b, x| b | x);
        Heartbeat {
            is_leader,
            term,
            leader: leader.map(addr),
            sees: bits,
            eligible: sees.len() > all.len() / 2,
        }
    }

    #[test]
    fn quorum_mode_a_beacon_that_cannot_gather_a_majority_never_raises_its_term() {
        let all = [A, B, C];
        // A hears nobody (its inbound side is cut): however many ticks pass, no term.
        let mut a = quorum(A, &all);
        for t in 1..=10 {
            tick(&mut a, t * 100);
        }
        assert_eq!((a.is_leader(), a.term()), (false, 0));
        assert!(!a.heartbeat().eligible);
        // A hears B and C, but they do not hear A (its outbound side is cut): still none.
        let mut a = quorum(A, &all);
        for t in 1..=10 {
            send(&mut a, t * 100, B, qhb(false, 0, None, &[B, C], &all));
            send(&mut a, t * 100, C, qhb(false, 0, None, &[B, C], &all));
            tick(&mut a, t * 100);
        }
        assert_eq!((a.is_leader(), a.term()), (false, 0));
        // Once they hear A, it leads.
        send(&mut a, 1100, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 1100, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 1200);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
    }

    #[test]
    fn quorum_mode_the_first_online_rule_skips_a_beacon_that_cannot_lead() {
        let all = [A, B, C];
        // B hears A, but A hears nobody (says so): B does not wait for A, it leads.
        let mut b = quorum(B, &all);
        send(&mut b, 0, A, qhb(false, 0, None, &[A], &all));
        send(&mut b, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut b, 100);
        assert_eq!((b.is_leader(), b.term()), (true, 2));
        // With A able to lead, B waits for it, as in NebulaBeacon.
        let mut b = quorum(B, &all);
        send(&mut b, 0, A, qhb(false, 0, None, &all, &all));
        send(&mut b, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut b, 100);
        assert!(!b.is_leader());
        assert_eq!(b.leader(), None);
    }

    #[test]
    fn quorum_mode_a_leader_whose_followers_are_gone_steps_down_after_the_grace() {
        let all = [A, B, C];
        let mut a = quorum(A, &all);
        send(&mut a, 0, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 100);
        assert!(a.is_leader());
        // B and C follow A; then they go over to a leader A cannot hear (term 5), while A
        // still hears them: A has no majority following it.
        for t in 2..=4 {
            send(&mut a, t * 100, B, qhb(false, 5, Some(D), &all, &all));
            send(&mut a, t * 100, C, qhb(false, 5, Some(D), &all, &all));
            tick(&mut a, t * 100);
            assert!(a.is_leader(), "within the grace (tick {t})");
        }
        send(&mut a, 500, B, qhb(false, 5, Some(D), &all, &all));
        send(&mut a, 500, C, qhb(false, 5, Some(D), &all, &all));
        assert_eq!(tick(&mut a, 500), vec![Follows(None, 1), Beat(false, 1)]);
        // And it does not take a new term while they follow someone else.
        for t in 6..=12 {
            send(&mut a, t * 100, B, qhb(false, 5, Some(D), &all, &all));
            send(&mut a, t * 100, C, qhb(false, 5, Some(D), &all, &all));
            tick(&mut a, t * 100);
        }
        assert_eq!((a.is_leader(), a.term()), (false, 1));
    }

    #[test]
    fn quorum_mode_a_leader_followed_by_a_majority_stays() {
        let all = [A, B, C];
        let mut a = quorum(A, &all);
        send(&mut a, 0, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 100);
        for t in 2..=20 {
            send(&mut a, t * 100, B, qhb(false, 1, Some(A), &all, &all));
            tick(&mut a, t * 100);
        }
        assert_eq!((a.is_leader(), a.term(), a.support()), (true, 1, 2));
    }

    #[test]
    fn quorum_mode_a_bridge_does_not_make_two_leaders_race_terms() {
        // Five beacons: {A, B} - C - {D, E}. A leads with B and C; D cannot hear A.
        let all = [A, B, C, D, E];
        let mut d = quorum(D, &all);
        for t in 1..=30 {
            send(&mut d, t * 100, C, qhb(false, 1, Some(A), &all, &all));
            send(&mut d, t * 100, E, qhb(false, 1, None, &[C, D, E], &all));
            tick(&mut d, t * 100);
        }
        // D sees C, D, E (a majority), but C follows A: only D and E would follow D. And
        // C's term is A's, not a claim D has heard: D promises nothing.
        assert_eq!((d.is_leader(), d.term()), (false, 0));
        assert_eq!(d.leader(), None);
    }

    #[test]
    fn quorum_mode_a_killed_leader_is_replaced_at_once_by_the_next_eligible_beacon() {
        let all = [A, B, C];
        let mut b = quorum(B, &all);
        send(&mut b, 0, A, qhb(true, 1, Some(A), &all, &all));
        send(&mut b, 0, C, qhb(false, 1, Some(A), &all, &all));
        tick(&mut b, 100);
        assert_eq!(b.leader(), Some(addr(A)));
        // A's connection just closed. C still follows A as far as B knows: B waits for C to
        // say it lost A too (it does at once, its connection to A closed as well), not for
        // a tick.
        assert_eq!(down(&mut b, A), vec![Follows(None, 1), Beat(false, 1)]);
        assert_eq!(
            send(&mut b, 1, C, qhb(false, 1, None, &[B, C], &all)),
            vec![Follows(Some(B), 2), Beat(true, 2)]
        );
        // A tick between the drop and C's word does not end the failover.
        let mut b = quorum(B, &all);
        send(&mut b, 0, A, qhb(true, 1, Some(A), &all, &all));
        send(&mut b, 0, C, qhb(false, 1, Some(A), &all, &all));
        down(&mut b, A);
        tick(&mut b, 100);
        assert!(!b.is_leader(), "C has not said it lost A yet");
        assert_eq!(
            send(&mut b, 101, C, qhb(false, 1, None, &[B, C], &all)),
            vec![Follows(Some(B), 2), Beat(true, 2)]
        );
        // Without a failover under way, such a heartbeat elects nobody: the tick decides.
        let mut c = quorum(C, &all);
        send(&mut c, 0, A, qhb(false, 0, None, &[A], &all));
        send(&mut c, 0, B, qhb(false, 0, None, &[B, C], &all));
        tick(&mut c, 100);
        assert!(!c.is_leader(), "B, first eligible, is the candidate");
        let mut b = quorum(B, &all);
        send(&mut b, 0, A, qhb(false, 0, None, &[A], &all));
        assert_eq!(
            send(&mut b, 1, C, qhb(false, 0, None, &[B, C], &all)),
            vec![Beat(false, 0)]
        );
        assert!(!b.is_leader());
    }

    #[test]
    fn quorum_mode_heartbeats_say_whom_the_sender_follows_and_sees() {
        let all = [A, B, C];
        let mut c = quorum(C, &all);
        send(&mut c, 0, A, qhb(true, 1, Some(A), &all, &all));
        let hb = c.heartbeat();
        assert_eq!(hb.leader, Some(addr(A)));
        assert_eq!(hb.sees, 0b101, "A and itself");
        assert!(hb.eligible, "in two-way contact with A: a majority of 3");
    }

    // ---- learners --------------------------------------------------------------------------

    /// A learner's port: it sorts before every voter.
    const L: u16 = 15000;

    /// Beacon `me` of voters A, B, C and learner L, in quorum mode.
    fn with_learner(me: u16) -> Election {
        let voters = [addr(A), addr(B), addr(C)];
        Election::with_members(addr(me), voters, [addr(L)], 0).with_quorum(true)
    }

    #[test]
    fn a_learner_never_takes_a_term_and_follows_the_leader_the_voters_elect() {
        let all = [A, B, C];
        let mut l = with_learner(L);
        assert!(l.is_learner());
        for t in 1..=10 {
            tick(&mut l, t * 100);
        }
        assert_eq!((l.is_leader(), l.term(), l.leader()), (false, 0, None));
        let hb = l.heartbeat();
        assert!(!hb.eligible, "a learner is never eligible");
        assert_eq!(hb.sees, 0, "no voter in sight, and no bit of its own");
        // However many voters it hears, none claiming: still no term of its own.
        send(&mut l, 1001, A, qhb(false, 0, None, &all, &all));
        send(&mut l, 1002, B, qhb(false, 0, None, &all, &all));
        tick(&mut l, 1100);
        assert_eq!((l.is_leader(), l.term()), (false, 0));
        // A claims: the learner follows it, in its term.
        send(&mut l, 1101, A, qhb(true, 1, Some(A), &all, &all));
        assert_eq!((l.leader(), l.term()), (Some(addr(A)), 1));
        assert_eq!(
            l.heartbeat().sees,
            0b011,
            "A and B, by their places among the voters"
        );
        // A hand-over to a learner is not taken.
        assert!(l.take_transfer(addr(A), 1).is_empty());
        assert!(!l.is_leader());
        let own = l.view(1200).into_iter().find(|v| v.is_self).unwrap();
        assert!(own.is_learner);
    }

    #[test]
    fn voters_pass_over_a_learner_and_count_it_for_no_majority() {
        let all = [A, B, C];
        let mut a = with_learner(A);
        assert!(!a.is_learner());
        assert_eq!(a.majority(), 2, "of the three voters");
        // L (first in sorted order) is online and even claims the leadership: A takes
        // neither its claim nor its term, and does not count it.
        send(&mut a, 0, L, qhb(true, 5, Some(L), &all, &all));
        tick(&mut a, 100);
        tick(&mut a, 200);
        assert_eq!((a.is_leader(), a.leader()), (false, None));
        assert_eq!(a.online(), 1, "A alone: the learner is no voter");
        assert_eq!(a.max_seen_term(), 0);
        assert_eq!(a.heartbeat().sees, 0b001, "A sees itself; L has no bit");
        assert!(!a.heartbeat().eligible, "L's word makes no majority");
        // B makes a majority with A: A, the first voter, leads, in the first term the
        // voters' places deal it (a learner moves no place).
        send(&mut a, 250, B, qhb(false, 0, None, &[A, B], &all));
        tick(&mut a, 300);
        assert!(a.is_leader());
        assert_eq!(a.term(), 1);
        // A learner online does not keep a leader up: with B gone, check-quorum steps A down.
        for t in 4..=12 {
            send(&mut a, t * 100, L, qhb(false, 1, Some(A), &all, &all));
            tick(&mut a, t * 100 + 50);
        }
        assert!(!a.is_leader(), "A and a learner are no majority");
    }

    #[test]
    fn quorum_mode_a_beacon_follows_one_leader_a_term() {
        let all = [A, B, C];
        let mut c = quorum(C, &all);
        send(&mut c, 0, A, qhb(false, 0, None, &all, &all));
        assert_eq!(
            send(&mut c, 0, B, qhb(true, 2, Some(B), &all, &all)),
            vec![Follows(Some(B), 2), Beat(false, 2)]
        );
        let promised_b = Promise {
            term: 2,
            leader: Some(addr(B)),
        };
        assert_eq!(c.promise(), promised_b);
        // A claims the same term (it came to it another way). It sorts first, so the claims
        // settle on A, but C promised term 2 to B: it follows no one, and says so.
        assert_eq!(
            send(&mut c, 10, A, qhb(true, 2, Some(A), &all, &all)),
            vec![Follows(None, 2), Beat(false, 2)]
        );
        assert_eq!(c.heartbeat().leader, None);
        // B yields; C still does not go over to A in term 2.
        send(&mut c, 20, B, qhb(false, 2, None, &all, &all));
        tick(&mut c, 100);
        assert_eq!((c.leader(), c.promise()), (None, promised_b));
        // In a later term it follows A, and that is its promise now.
        assert_eq!(
            send(&mut c, 110, A, qhb(true, 4, Some(A), &all, &all)),
            vec![Follows(Some(A), 4), Beat(false, 4)]
        );
        assert_eq!(c.promise().leader, Some(addr(A)));
        // Nor does a beacon follow a claim of an older term than it promised: it takes no
        // entries of that term, and its heartbeat would promise the later one.
        let mut c = Election::with_term(addr(C), all.map(addr), 5).with_quorum(true);
        let acted = send(&mut c, 0, A, qhb(true, 4, Some(A), &all, &all));
        assert!(!acted.iter().any(|a| matches!(a, Follows(..))), "{acted:?}");
        assert_eq!(c.leader(), None);
    }

    #[test]
    fn quorum_mode_a_restarted_beacon_keeps_the_promise_it_stored() {
        let all = [A, B, C];
        let stored = Promise {
            term: 2,
            leader: Some(addr(B)),
        };
        let mut c = Election::with_term(addr(C), all.map(addr), 2)
            .with_quorum(true)
            .with_promise(stored);
        let acted = send(&mut c, 0, A, qhb(true, 2, Some(A), &all, &all));
        assert!(!acted.iter().any(|a| matches!(a, Follows(..))), "{acted:?}");
        assert_eq!(c.leader(), None);
        send(&mut c, 10, A, qhb(false, 2, None, &all, &all));
        assert_eq!(
            send(&mut c, 20, B, qhb(true, 2, Some(B), &all, &all)),
            vec![Follows(Some(B), 2), Beat(false, 2)]
        );
        // A promise stored for an older term than the one given says nothing.
        let old = Election::with_term(addr(C), all.map(addr), 3)
            .with_quorum(true)
            .with_promise(stored);
        assert_eq!(old.promise(), Promise::at(3));
    }

    #[test]
    fn quorum_mode_a_leader_leads_on_above_a_voter_that_promised_its_term_away() {
        let all = [A, B, C];
        let mut a = quorum(A, &all);
        send(&mut a, 0, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 100);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
        // B follows A; C announces A's term but follows no one while it sees A: its promise
        // of term 1 went to another. At its tick A leads on in its next term, which C may
        // follow.
        send(&mut a, 110, B, qhb(false, 1, Some(A), &all, &all));
        send(&mut a, 110, C, qhb(false, 1, None, &all, &all));
        assert_eq!(tick(&mut a, 200), vec![Follows(Some(A), 4), Beat(true, 4)]);
        assert_eq!((a.is_leader(), a.term()), (true, 4));
        // So too for a learner held that way (it would take no log for the whole term).
        let mut a = Election::with_members(addr(A), all.map(addr), [addr(D)], 0).with_quorum(true);
        send(&mut a, 0, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 100);
        send(&mut a, 110, B, qhb(false, 1, Some(A), &all, &all));
        send(&mut a, 110, C, qhb(false, 1, Some(A), &all, &all));
        tick(&mut a, 200);
        assert_eq!(a.term(), 1);
        send(&mut a, 210, D, qhb(false, 1, None, &all, &all));
        tick(&mut a, 300);
        assert_eq!((a.is_leader(), a.term()), (true, 4));
        // And for a learner that took a later term and follows no one (it followed a voter
        // that a change it has not caught up with removed): it takes no log of ours until
        // we lead above its term, and so would never learn of the change.
        send(&mut a, 310, D, qhb(false, 8, None, &all, &all));
        tick(&mut a, 400);
        assert!(a.is_leader());
        assert!(a.term() > 8, "term {}", a.term());
        // A voter that does not see A (a cut) is not held by a promise: no new term.
        let mut a = quorum(A, &all);
        send(&mut a, 0, B, qhb(false, 0, None, &all, &all));
        send(&mut a, 0, C, qhb(false, 0, None, &all, &all));
        tick(&mut a, 100);
        send(&mut a, 110, B, qhb(false, 1, Some(A), &all, &all));
        send(&mut a, 110, C, qhb(false, 1, None, &[B, C], &all));
        tick(&mut a, 200);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
    }
}
