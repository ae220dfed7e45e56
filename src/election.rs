//! Leader election, sans-IO: NebulaBeacon's heartbeat algorithm with its known defects fixed.
//!
//! Every beacon keeps a map sorted by beacon identity (`ip:port`, ordered as socket
//! addresses: by IP, then numerically by port). Each entry has an attribute word: bit 31 is
//! the leader bit, bits 0..2 the alive mask.
//!
//! * A heartbeat from X sets X's alive bit 0; X's leader bit mirrors the heartbeat's
//!   `is_leader` (the original only ever set it, never cleared it).
//! * Every tick walks the map in order. Among entries whose alive mask is non-zero, the
//!   leader candidate is the one claiming leadership with the highest term (ties go to the
//!   earlier entry); if none claims, the first online entry. An entry whose mask is zero loses
//!   its leader bit. Then each mask shifts left by one (three bits kept) and our own entry's
//!   bit 0 is set, so a beacon goes offline on the fourth tick without a heartbeat.
//! * If the candidate is us we lead; if it is someone else and we were leading, we step down
//!   at once (the original never stepped down).
//!
//! So an online leader stays leader (a restarted old leader does not take over again), and
//! when none is online the first online beacon in sorted order takes over with a term above
//! any it has seen. Terms are dealt out round-robin by position in the sorted list, so a term
//! names one leader even when a partition lets two lead at once. Two leaders that meet converge on the same choice everywhere: higher term,
//! then sorted order.
//!
//! Beyond the per-tick check the same choice is re-made at once (without shifting the masks)
//! when a peer's connection drops (as the original's `BeaconFailed` did), so failover does not
//! wait for the next tick, and when a heartbeat changes what we know of a peer, so a beacon
//! follows a new leader or yields to a stronger claim at once. A heartbeat never makes a
//! beacon elect itself, though: only a tick or a lost connection does. A beacon never elects
//! itself before its first tick unless it already follows a leader: at start-up it first hears
//! from the peers that are up (their `Hello` carries their state), and so joins an existing
//! leader instead of challenging it.
//!
//! Nothing here does I/O or reads a clock: the driver passes the time in (`now`, in
//! milliseconds of a monotonic clock) and carries out the returned [`Action`]s.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Milliseconds of a monotonic clock, supplied by the caller.
pub type Millis = u64;

/// Leader bit of an entry's attribute word (NebulaBeacon's `mc_uiLeader`).
pub const LEADER_BIT: u32 = 0x8000_0000;
/// Alive mask: online while any of the last three ticks saw a heartbeat (`mc_uiAlive`).
pub const ALIVE_MASK: u32 = 0x0000_0007;

/// The election part of a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub is_leader: bool,
    pub term: u64,
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
}

#[derive(Debug, Clone, Default)]
struct Entry {
    attr: u32,
    term: u64,
    last_seen: Option<Millis>,
}

impl Entry {
    fn alive(&self) -> bool {
        self.attr & ALIVE_MASK != 0
    }
    fn claims(&self) -> bool {
        self.attr & LEADER_BIT != 0
    }
}

/// What triggered a check. Each re-makes the same choice; they differ in what they may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// The periodic check: ages the alive masks, may elect us.
    Tick,
    /// A peer's connection dropped: may elect us at once (fast failover).
    PeerDown,
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
    /// The term we announce: the term we were elected in while leading, else the highest seen.
    term: u64,
    /// Highest term seen anywhere, ourselves included.
    max_seen: u64,
    is_leader: bool,
    leader: Option<SocketAddr>,
    /// Set by the first tick; before it (and before following anyone) we never elect
    /// ourselves.
    ticked: bool,
}

impl Election {
    /// A beacon `me` in a cluster of `beacons` (which may or may not list `me`). A beacon
    /// configured alone, or with an empty list, leads from the start.
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
        let mut entries: BTreeMap<SocketAddr, Entry> = beacons
            .into_iter()
            .map(|addr| (addr, Entry::default()))
            .collect();
        entries.insert(
            me,
            Entry {
                attr: 1,
                term,
                last_seen: None,
            },
        );
        let mut election = Election {
            me,
            entries,
            term,
            max_seen: term,
            is_leader: false,
            leader: None,
            ticked: false,
        };
        if election.entries.len() == 1 {
            election.become_leader();
            election.leader = Some(me);
        }
        election
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

    /// The term this beacon announces.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The highest term this beacon has seen.
    pub fn max_seen_term(&self) -> u64 {
        self.max_seen
    }

    /// The heartbeat this beacon sends now.
    pub fn heartbeat(&self) -> Heartbeat {
        Heartbeat {
            is_leader: self.is_leader,
            term: self.term,
        }
    }

    /// Every other configured beacon, in sorted order.
    pub fn peers(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.entries.keys().copied().filter(|a| *a != self.me)
    }

    /// Whether `node` is online in this beacon's view.
    pub fn is_online(&self, node: SocketAddr) -> bool {
        self.entries.get(&node).is_some_and(Entry::alive)
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
                }
            })
            .collect()
    }

    /// Feeds one input in.
    pub fn step(&mut self, now: Millis, input: Input) -> Result<Vec<Action>, ElectionError> {
        match input {
            Input::Heartbeat { from, hb } => self.on_heartbeat(now, from, hb),
            Input::PeerDown { peer } => Ok(self.on_peer_down(peer)),
        }
    }

    /// The periodic check (NebulaBeacon's `CheckLeader`), then this tick's heartbeat.
    pub fn tick(&mut self, _now: Millis) -> Vec<Action> {
        self.ticked = true;
        let mut actions = self.check(Check::Tick);
        // One heartbeat per tick: a role change inside the check already produced one.
        if !actions.iter().any(|a| matches!(a, Action::Broadcast(_))) {
            actions.push(Action::Broadcast(self.heartbeat()));
        }
        actions
    }

    fn on_heartbeat(
        &mut self,
        now: Millis,
        from: SocketAddr,
        hb: Heartbeat,
    ) -> Result<Vec<Action>, ElectionError> {
        if from == self.me {
            return Err(ElectionError::OwnAddress(from));
        }
        let entry = self
            .entries
            .get_mut(&from)
            .ok_or(ElectionError::UnknownBeacon(from))?;
        let changed = !entry.alive() || entry.claims() != hb.is_leader || entry.term != hb.term;
        entry.attr |= 1;
        if hb.is_leader {
            entry.attr |= LEADER_BIT;
        } else {
            entry.attr &= !LEADER_BIT;
        }
        entry.term = hb.term;
        entry.last_seen = Some(now);
        let term_before = self.term;
        self.see_term(hb.term);
        let mut actions = if changed {
            self.check(Check::Heartbeat)
        } else {
            Vec::new()
        };
        // A follower that has just taken a later term answers at once: its heartbeat is the
        // promise a new leader (quorum mode) collects before it serves, and waiting for the
        // next tick would add up to a tick to every failover. Terms only grow, so this
        // answers each term once.
        if !self.is_leader
            && self.term > term_before
            && !actions.iter().any(|a| matches!(a, Action::Broadcast(_)))
        {
            actions.push(Action::Broadcast(self.heartbeat()));
        }
        Ok(actions)
    }

    fn on_peer_down(&mut self, peer: SocketAddr) -> Vec<Action> {
        match self.entries.get_mut(&peer) {
            Some(entry) if peer != self.me && (entry.alive() || entry.claims()) => {
                entry.attr = 0;
                self.check(Check::PeerDown)
            }
            _ => Vec::new(),
        }
    }

    fn see_term(&mut self, term: u64) {
        self.max_seen = self.max_seen.max(term);
        if !self.is_leader {
            self.term = self.max_seen;
            if let Some(own) = self.entries.get_mut(&self.me) {
                own.term = self.term;
            }
        }
    }

    /// The term this beacon takes when it becomes leader: the smallest term above any seen
    /// that belongs to it. Terms are dealt out round-robin by position in the sorted list
    /// (with three beacons the first takes 1, 4, 7, ..., the second 2, 5, 8, ...), so no two
    /// beacons ever lead in the same term, even when a partition lets both lead at once.
    fn next_term(&self) -> u64 {
        let n = self.entries.len() as u64;
        let position = self
            .entries
            .keys()
            .position(|a| *a == self.me)
            .expect("own entry") as u64;
        let above = self.max_seen + 1;
        above + (position + n - (above - 1) % n) % n
    }

    fn become_leader(&mut self) {
        self.is_leader = true;
        self.term = self.next_term();
        self.max_seen = self.term;
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

    /// Walks the map and settles who leads.
    fn check(&mut self, why: Check) -> Vec<Action> {
        let shift = why == Check::Tick;
        // (identity, claims leadership, term) of the best candidate so far.
        let mut chosen: Option<(SocketAddr, bool, u64)> = None;
        for (addr, entry) in self.entries.iter_mut() {
            if entry.alive() {
                let better = match chosen {
                    None => true,
                    Some((_, chosen_claims, chosen_term)) => {
                        entry.claims() && (!chosen_claims || entry.term > chosen_term)
                    }
                };
                if better {
                    chosen = Some((*addr, entry.claims(), entry.term));
                }
            } else {
                entry.attr &= !LEADER_BIT;
            }
            if shift {
                entry.attr = ((entry.attr << 1) & ALIVE_MASK) | (entry.attr & LEADER_BIT);
                if *addr == self.me {
                    entry.attr |= 1;
                }
            }
        }
        let rival = self
            .entries
            .iter()
            .any(|(addr, e)| *addr != self.me && e.alive() && e.claims());
        // Our own entry is always alive, so there is always a candidate.
        let (candidate, claims, _) = chosen.expect("own entry is always online");

        let mut actions = Vec::new();
        let term_before = self.term;
        // A fresh beacon first learns the cluster's state: it may elect itself once it has
        // ticked (its peers' handshakes have had a tick to arrive) or once it has followed a
        // leader (it knows the state first hand).
        let informed = self.ticked || self.leader.is_some();
        if candidate == self.me {
            if !self.is_leader && informed && why != Check::Heartbeat {
                self.become_leader();
                actions.push(Action::Broadcast(self.heartbeat()));
            } else if self.is_leader && self.max_seen > self.term && why == Check::Tick && !rival {
                // A beacon announces a later term than ours (it saw a rival that led in a
                // partition and is gone, or it kept that term across a restart): it ignores
                // an older leader's writes. We lead on, in a term above it. Not while a
                // rival's claim is online (the claims settle that), and at most once a tick,
                // so two leaders that cannot hear each other do not race terms upwards.
                self.become_leader();
                actions.push(Action::Broadcast(self.heartbeat()));
            }
        } else if self.is_leader {
            self.step_down();
            actions.push(Action::Broadcast(self.heartbeat()));
        }

        let leader = if candidate == self.me {
            self.is_leader.then_some(self.me)
        } else {
            claims.then_some(candidate)
        };
        if leader != self.leader || (self.is_leader && self.term != term_before) {
            self.leader = leader;
            actions.push(Action::LeaderChanged {
                leader,
                term: self.term,
            });
        }
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

    fn cluster(me: u16) -> Election {
        Election::new(addr(me), [addr(A), addr(B), addr(C)])
    }

    fn hb(is_leader: bool, term: u64) -> Heartbeat {
        Heartbeat { is_leader, term }
    }

    fn beat(e: &mut Election, now: Millis, from: u16, is_leader: bool, term: u64) -> Vec<Action> {
        e.step(
            now,
            Input::Heartbeat {
                from: addr(from),
                hb: hb(is_leader, term),
            },
        )
        .unwrap()
    }

    fn down(e: &mut Election, peer: u16) -> Vec<Action> {
        e.step(0, Input::PeerDown { peer: addr(peer) }).unwrap()
    }

    fn changed(leader: u16, term: u64) -> Action {
        Action::LeaderChanged {
            leader: Some(addr(leader)),
            term,
        }
    }

    #[test]
    fn a_lone_beacon_leads_from_the_start() {
        let alone = Election::new(addr(A), []);
        assert!(alone.is_leader());
        assert_eq!(alone.term(), 1);
        assert_eq!(alone.leader(), Some(addr(A)));
        let listed_alone = Election::new(addr(A), [addr(A)]);
        assert!(listed_alone.is_leader());
        let mut resumed = Election::with_term(addr(A), [], 41);
        assert_eq!(resumed.term(), 42);
        assert_eq!(resumed.tick(100), vec![Action::Broadcast(hb(true, 42))]);
    }

    #[test]
    fn a_clustered_beacon_waits_for_its_first_tick() {
        let mut b = cluster(B);
        assert!(!b.is_leader());
        // Heartbeats before the first tick never make us leader, even if we are first online.
        assert_eq!(beat(&mut b, 1, C, false, 0), vec![]);
        assert!(!b.is_leader());
        // First tick: A never heard of, B is the first online beacon, so B leads, in the
        // first term that is B's (terms are dealt round-robin: A 1, B 2, C 3, A 4, ...).
        assert_eq!(
            b.tick(100),
            vec![Action::Broadcast(hb(true, 2)), changed(B, 2)]
        );
    }

    #[test]
    fn the_first_online_beacon_leads_and_others_follow_its_claim() {
        let mut c = cluster(C);
        beat(&mut c, 1, A, false, 0);
        beat(&mut c, 1, B, false, 0);
        // A is first online but has not claimed yet: C follows nobody, and does not lead.
        assert_eq!(c.tick(100), vec![Action::Broadcast(hb(false, 0))]);
        assert_eq!(c.leader(), None);
        // A's claim arrives: C follows A at once, and answers at once with A's term (its
        // promise), without waiting for the next tick.
        assert_eq!(
            beat(&mut c, 150, A, true, 1),
            vec![changed(A, 1), Action::Broadcast(hb(false, 1))]
        );
        assert_eq!(c.term(), 1);
        assert_eq!(c.tick(200), vec![Action::Broadcast(hb(false, 1))]);
    }

    #[test]
    fn three_silent_ticks_empty_the_alive_mask_and_the_fourth_acts_on_it() {
        // B leads; its last heartbeat reaches C before tick 1.
        let mut c = cluster(C);
        beat(&mut c, 0, A, false, 0);
        beat(&mut c, 0, B, true, 1);
        for t in 1..=2 {
            c.tick(t * 100);
            assert!(c.is_online(addr(B)), "online after tick {t}");
            beat(&mut c, t * 100, A, false, 1);
        }
        // Tick 3 still counts B's heartbeat, then shifts it out: B is shown offline.
        c.tick(300);
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
            }
        );
        assert_eq!(
            c.leader(),
            Some(addr(B)),
            "the decision waits for the next tick"
        );
        // Tick 4 clears B's leader bit; A, first online, has not claimed yet.
        beat(&mut c, 300, A, false, 1);
        assert_eq!(
            c.tick(400),
            vec![
                Action::LeaderChanged {
                    leader: None,
                    term: 1
                },
                Action::Broadcast(hb(false, 1))
            ]
        );
    }

    #[test]
    fn an_online_leader_keeps_leading_when_an_earlier_beacon_returns() {
        // B leads (A was down); A (first in order) restarts and reports in as a follower.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        b.tick(100); // B is first online: leads in its first term, 2
        assert!(b.is_leader());
        beat(&mut b, 150, A, false, 0);
        assert_eq!(b.tick(200), vec![Action::Broadcast(hb(true, 2))]);
        assert!(b.is_leader(), "sticky: the online leader stays");

        let mut a = cluster(A);
        beat(&mut a, 0, B, true, 2);
        beat(&mut a, 0, C, false, 2);
        assert_eq!(a.leader(), Some(addr(B)));
        assert_eq!(a.tick(100), vec![Action::Broadcast(hb(false, 2))]);
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
        beat(&mut b, 0, C, false, 1);
        b.tick(100);
        assert_eq!(b.leader(), Some(addr(A)));
        // No tick in between: B is now the first online beacon and takes term 2.
        assert_eq!(
            down(&mut b, A),
            vec![Action::Broadcast(hb(true, 2)), changed(B, 2)]
        );
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
        beat(&mut a, 5, C, false, 2);
        assert_eq!(
            down(&mut a, B),
            vec![Action::Broadcast(hb(true, 4)), changed(A, 4)]
        );
        // Without that knowledge it waits for its tick.
        let mut fresh = cluster(A);
        beat(&mut fresh, 5, C, false, 2);
        assert_eq!(down(&mut fresh, C), vec![]);
        assert!(!fresh.is_leader());
    }

    #[test]
    fn a_leader_steps_down_the_moment_a_stronger_claim_is_online() {
        // After a partition heals A (term 5) and B (term 3) both claim leadership.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        b.tick(100);
        assert!(b.is_leader());
        assert_eq!(
            beat(&mut b, 150, A, true, 5),
            vec![Action::Broadcast(hb(false, 5)), changed(A, 5)]
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
        a.tick(100);
        assert_eq!((a.is_leader(), a.term()), (true, 1));
        // The heartbeat itself changes nothing; the next tick does.
        assert_eq!(beat(&mut a, 150, C, false, 5), vec![]);
        assert_eq!(
            a.tick(200),
            vec![Action::Broadcast(hb(true, 7)), changed(A, 7)]
        );
        assert_eq!((a.is_leader(), a.term(), a.max_seen_term()), (true, 7, 7));
        // Hearing its own term again changes nothing.
        assert_eq!(beat(&mut a, 250, C, false, 7), vec![]);
        assert_eq!(
            a.tick(300),
            vec![Action::Broadcast(hb(true, 7))],
            "a plain tick"
        );
        // While a rival's claim is online the claims settle it: no new term.
        let mut b = cluster(B);
        beat(&mut b, 0, C, false, 0);
        b.tick(100);
        assert_eq!((b.is_leader(), b.term()), (true, 2));
        beat(&mut b, 150, A, true, 1);
        beat(&mut b, 160, C, false, 5);
        b.tick(200);
        assert_eq!((b.is_leader(), b.term(), b.max_seen_term()), (true, 2, 5));
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
            vec![Action::Broadcast(hb(false, 6)), changed(C, 6)]
        );
        assert_eq!(beat(&mut c, 10, A, true, 4), vec![]);
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
                    hb: hb(true, 1)
                }
            ),
            Err(ElectionError::UnknownBeacon(stranger))
        );
        assert_eq!(
            a.step(
                0,
                Input::Heartbeat {
                    from: addr(A),
                    hb: hb(true, 1)
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
}
