//! The leader's view of each follower: how far it has stored the log, what to send it next,
//! whether commits wait for it, and which confirmation round it acknowledged.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::log::{Log, Position};
use super::members::Members;
use crate::time::Millis;

/// How far a follower is known to have stored the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Highest index known to be in the follower's log (and ours); `None` until the follower
    /// reports a position this log contains.
    pub matched: Option<u64>,
    /// The next index to send.
    pub next: u64,
    /// When a snapshot was last sent, while the follower has not reported installing it.
    pub snapshot_sent: Option<Millis>,
    /// Snapshots sent since it last reported a position in our log: each resend waits
    /// twice as long as the one before.
    pub snapshots_sent: u32,
    /// The leader's confirmation round when the last snapshot was sent.
    pub snapshot_beat: u64,
}

/// Most doublings of the wait before a snapshot is sent again.
const MAX_SNAPSHOT_BACKOFF: u32 = 5;

impl Progress {
    /// Whether a snapshot is due to the follower at `now`, a first one at once, another
    /// `patience` ms after the first and twice as long after each since: the follower may
    /// still be installing it. A large state (ten million registrations: 400 MB) takes a
    /// follower seconds to read in, and a copy sent every `patience` piled up in its queue
    /// and the leader's memory, each taken and encoded again.
    pub fn snapshot_due(&self, now: Millis, patience: Millis) -> bool {
        let wait = patience
            << self
                .snapshots_sent
                .saturating_sub(1)
                .min(MAX_SNAPSHOT_BACKOFF);
        self.snapshot_sent
            .is_none_or(|at| now.saturating_sub(at) >= wait)
    }

    /// A snapshot was sent at `now`, in round `beat`.
    pub fn sent_snapshot(&mut self, now: Millis, beat: u64) {
        self.snapshot_sent = Some(now);
        self.snapshots_sent = self.snapshots_sent.saturating_add(1);
        self.snapshot_beat = beat;
    }

    /// The follower, still outside our history, acknowledged round `acked_beat`. One after
    /// the last snapshot's came in a later message, which a link delivers after it: the
    /// snapshot was lost on the way or refused, and the next one goes a patience after it,
    /// not after the backoff (which waits for a follower still reading a large one in).
    pub fn still_lost(&mut self, acked_beat: u64) {
        if self.snapshot_sent.is_some() && acked_beat > self.snapshot_beat {
            self.snapshots_sent = self.snapshots_sent.min(1);
        }
    }

    pub fn new(next: u64) -> Progress {
        Progress {
            matched: None,
            next,
            snapshot_sent: None,
            snapshots_sent: 0,
            snapshot_beat: 0,
        }
    }

    /// Takes in the follower's reported position, and (quorum mode) its commit index.
    /// Returns whether the follower needs a snapshot: its position is not in our history,
    /// and neither is its commit. A follower whose log leaves ours after its commit holds a
    /// tail that never committed (the entries through its commit are ours: a leader's log
    /// holds every committed entry); it is sent our entries from there and cuts the tail
    /// (`Replica::cut_after`).
    pub fn observe<C: Clone>(
        &mut self,
        log: &Log<C>,
        reported: Position,
        commit: Option<u64>,
        reject: bool,
    ) -> bool {
        if log.contains(reported) {
            let first = self.matched.is_none();
            let matched = self
                .matched
                .map_or(reported.index, |m| m.max(reported.index));
            self.matched = Some(matched);
            self.snapshot_sent = None;
            self.snapshots_sent = 0;
            if first || reject || self.next <= matched {
                self.next = matched + 1;
            }
            false
        } else if self.matched.is_some_and(|m| reported.index < m) {
            // An older report overtaken by a later one: nothing new.
            false
        } else if let Some(c) =
            commit.filter(|c| *c > 0 && *c < reported.index && log.term_at(*c).is_some())
        {
            self.matched = Some(c);
            self.snapshot_sent = None;
            self.snapshots_sent = 0;
            self.next = c + 1;
            false
        } else {
            self.matched = None;
            true
        }
    }
}

/// Everything a leader tracks of one follower.
#[derive(Debug, Clone)]
pub(crate) struct Follower {
    pub(crate) progress: Progress,
    /// The follower reported a position outside our history: it gets a snapshot.
    pub(crate) wants_snapshot: bool,
    /// Since when it has lacked entries the leader has (unknown position counts as lacking).
    pub(crate) behind_since: Option<Millis>,
    /// Whether commits wait for it (classic mode, while online). A follower that makes no
    /// progress for two ticks (at least 2 s, [`super::Config::patience_ms`]) is left out until it has caught up again, so one stuck beacon
    /// cannot stall every write.
    pub(crate) in_sync: bool,
    /// A learner to promote: since when it has kept up, as of the leader's ticks.
    pub(crate) kept_up_since: Option<Millis>,
    /// The latest confirmation round of ours it acknowledged.
    pub(crate) acked_beat: u64,
    /// The renewals it was sent and says it holds.
    pub(crate) renewals: super::renewals::Sent,
}

/// A leader's followers, each with what it tracks of it.
#[derive(Debug, Clone, Default)]
pub(super) struct Followers {
    map: BTreeMap<SocketAddr, Follower>,
    /// The commit index at the leader's last tick: a learner that holds it has kept up.
    commit_last_tick: u64,
}

impl Followers {
    /// Every one of `peers` with its progress unknown, `next` the next index to send.
    pub(super) fn fresh(peers: impl IntoIterator<Item = SocketAddr>, next: u64) -> Self {
        Followers {
            map: peers
                .into_iter()
                .map(|p| (p, Follower::new(next)))
                .collect(),
            commit_last_tick: 0,
        }
    }

    pub(super) fn contains(&self, peer: SocketAddr) -> bool {
        self.map.contains_key(&peer)
    }

    pub(super) fn get_mut(&mut self, peer: SocketAddr) -> Option<&mut Follower> {
        self.map.get_mut(&peer)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (SocketAddr, &Follower)> {
        self.map.iter().map(|(p, f)| (*p, f))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (SocketAddr, &mut Follower)> {
        self.map.iter_mut().map(|(p, f)| (*p, f))
    }

    /// The last index `peer` is known to store, if known.
    pub(super) fn matched(&self, peer: SocketAddr) -> Option<u64> {
        self.map.get(&peer).and_then(|f| f.progress.matched)
    }

    /// Each follower's progress, for `show beacon`.
    pub(super) fn views(&self) -> Vec<FollowerView> {
        self.map
            .iter()
            .map(|(peer, f)| FollowerView {
                peer: *peer,
                matched: f.progress.matched,
                next: f.progress.next,
                wants_snapshot: f.wants_snapshot,
                in_sync: f.in_sync,
            })
            .collect()
    }

    /// Sends each follower again what it has not acknowledged (a message may have been
    /// dropped).
    pub(super) fn resend_unacknowledged(&mut self) {
        for f in self.map.values_mut() {
            if let Some(m) = f.progress.matched {
                f.progress.next = m + 1;
            }
            f.renewals.resend();
        }
    }

    /// `peer` reconnected: it starts from scratch, `next` the next index to send.
    pub(super) fn reset(&mut self, peer: SocketAddr, next: u64) {
        if let Some(f) = self.map.get_mut(&peer) {
            *f = Follower::new(next);
        }
    }

    /// Follows the membership: every member but `me` is tracked (a new one from `next`),
    /// no one else.
    pub(super) fn follow(&mut self, members: &Members, me: SocketAddr, next: u64) {
        self.map.retain(|p, _| members.contains(*p));
        for peer in members.all().filter(|p| *p != me) {
            self.map.entry(peer).or_insert_with(|| Follower::new(next));
        }
    }

    /// A tick at commit index `commit`: returns the commit index of the tick before.
    pub(super) fn mark_tick(&mut self, commit: u64) -> u64 {
        std::mem::replace(&mut self.commit_last_tick, commit)
    }

    /// The highest value a majority of the voters has reached: `reached` of each voter
    /// among the followers, and `own`, the leader's (a learner's counts for nothing). What a
    /// commit index is to stored entries, a confirmed round is to acknowledged ones.
    pub(super) fn majority_reached(
        &self,
        election: &super::Election,
        own: u64,
        majority: usize,
        reached: impl Fn(&Follower) -> u64,
    ) -> u64 {
        let mut values: Vec<u64> = self
            .map
            .iter()
            .filter(|(peer, _)| election.is_voter(**peer))
            .map(|(_, f)| reached(f))
            .collect();
        values.push(own);
        values.sort_unstable_by(|a, b| b.cmp(a));
        values[majority - 1]
    }
}

impl std::ops::Index<&SocketAddr> for Followers {
    type Output = Follower;

    fn index(&self, peer: &SocketAddr) -> &Follower {
        &self.map[peer]
    }
}

impl Follower {
    pub(crate) fn new(next: u64) -> Follower {
        Follower {
            progress: Progress::new(next),
            wants_snapshot: false,
            behind_since: None,
            in_sync: true,
            acked_beat: 0,
            renewals: super::renewals::Sent::default(),
            kept_up_since: None,
        }
    }
}

/// A follower's replication progress, as its leader knows it (for `show beacon`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerView {
    pub peer: std::net::SocketAddr,
    /// The last index it is known to store, if known.
    pub matched: Option<u64>,
    /// The next index to send.
    pub next: u64,
    /// It is outside the leader's log and gets a snapshot.
    pub wants_snapshot: bool,
    /// Classic mode: commits wait for it.
    pub in_sync: bool,
}

#[cfg(test)]
mod tests {
    use super::super::log::{Entry, Payload};
    use super::*;

    fn pos(index: u64, term: u64) -> Position {
        Position { index, term }
    }

    #[test]
    fn progress_follows_reports_and_asks_for_a_snapshot_when_lost() {
        let mut log = Log::new(100);
        for i in 1..=5 {
            log.append(Entry {
                index: i,
                term: 1,
                payload: Payload::Command(i),
            });
        }
        let mut p = Progress::new(6);
        // Unknown follower reports 3@1: matched, resend from 4.
        assert!(!p.observe(&log, pos(3, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(3), 4));
        // It catches up.
        assert!(!p.observe(&log, pos(5, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A delayed older report changes nothing.
        assert!(!p.observe(&log, pos(4, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A position from another history: snapshot.
        assert!(p.observe(&log, pos(7, 2), None, false));
        assert_eq!(p.matched, None);
        // Unless the follower's commit is in our log: its tail after it never committed,
        // and it is sent our entries from there.
        assert!(!p.observe(&log, pos(7, 2), Some(2), false));
        assert_eq!((p.matched, p.next), (Some(2), 3));
        // A commit our log no longer holds (compacted away) or none: snapshot.
        assert!(p.observe(&log, pos(7, 2), Some(9), false));
        assert!(p.observe(&log, pos(7, 2), Some(0), false));
        // The first snapshot goes at once; each resend waits twice as long as the last.
        let sent_at: Vec<u64> = (0..40_000)
            .step_by(100)
            .filter(|now| {
                let due = p.snapshot_due(*now, 1_000);
                if due {
                    p.sent_snapshot(*now, 7);
                }
                due
            })
            .collect();
        assert_eq!(sent_at, [0, 1_000, 3_000, 7_000, 15_000, 31_000]);
        // An answer to a message sent after it, still outside our history: it was lost,
        // and the next goes a patience after it.
        p.still_lost(7);
        assert!(!p.snapshot_due(32_000, 1_000), "an answer from before it");
        p.still_lost(8);
        assert!(p.snapshot_due(32_000, 1_000));
        // Once it reports a position in our log, the next one it needs goes at once.
        assert!(!p.observe(&log, pos(5, 1), None, false));
        assert!(p.snapshot_due(32_100, 1_000));
        p.sent_snapshot(32_100, 9);
        assert!(!p.snapshot_due(33_000, 1_000) && p.snapshot_due(33_100, 1_000));
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn followers_follow_the_membership_and_a_majority_counts_voters_only() {
        let (a, b, c, d) = (peer(1), peer(2), peer(3), peer(4));
        let election = super::super::Election::with_members(a, [a, b, c], [d], 1).with_quorum(true);
        let mut followers = Followers::fresh([b, c, d], 6);
        for (p, f) in followers.iter_mut() {
            f.progress.matched = Some(u64::from(p.port()) * 10);
            f.acked_beat = u64::from(p.port());
        }
        // Own 50, b 20, c 30, learner d 40 (counts for nothing): a majority of three has 30.
        assert_eq!(
            followers.majority_reached(&election, 50, 2, |f| f.progress.matched.unwrap_or(0)),
            30
        );
        assert_eq!(
            followers.majority_reached(&election, 9, 2, |f| f.acked_beat),
            3
        );
        assert_eq!(followers.matched(c), Some(30));
        followers.resend_unacknowledged();
        assert_eq!(followers[&c].progress.next, 31);
        followers.reset(c, 7);
        assert_eq!(
            followers.matched(c),
            None,
            "a reconnected follower starts from scratch"
        );
        let members = Members::new([a, b, d], []);
        followers.follow(&members, a, 8);
        let peers: Vec<SocketAddr> = followers.views().iter().map(|v| v.peer).collect();
        assert_eq!(
            peers,
            vec![b, d],
            "c left; the leader is no follower of its own"
        );
        assert!(!followers.contains(c));
        assert_eq!(followers.mark_tick(12), 0);
        assert_eq!(followers.mark_tick(15), 12);
    }
}
