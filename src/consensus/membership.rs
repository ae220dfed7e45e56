//! The membership a replica acts on, and what it gives the election: the part of the core
//! that follows the log's changes of membership (see [`super::members`]).
//!
//! The membership in effect is the log's last change, else the configured one; a change a
//! leader told of (committed, while this log lacks it) wins until the log catches up. The
//! configured membership has an index too (a joiner's: the change that added it), and no
//! change older than it replaces it. The
//! election is given that membership plus, as learners, the beacons a change not yet
//! committed removed: they still get the log, to learn of their removal, and the voters
//! among them may still lead (the change may never commit).

use std::collections::BTreeSet;
use std::net::SocketAddr;

use super::log::Log;
use super::members::Members;

/// What the election was last given: the members, with, as learners, beacons a change not
/// yet committed removed, and which of those were voters.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Electorate {
    pub(super) members: Members,
    pub(super) former_voters: BTreeSet<SocketAddr>,
}

/// What the membership follows from: the change of membership in effect and the one at the
/// commit index (each its index and term: a cut tail may be replaced by another change at
/// the same index), and the index of the one a leader told of.
#[derive(Debug, Clone, PartialEq)]
struct SyncKey {
    in_effect: Option<(u64, Option<u64>)>,
    committed: Option<(u64, Option<u64>)>,
    heard: Option<u64>,
}

/// What a [`Membership::sync`] changed.
#[derive(Debug, Default)]
pub(super) struct Synced {
    /// For the operator: the new members, and this beacon's removal.
    pub(super) notices: Vec<String>,
    /// The electorate changed: the election (and a leader's followers) must follow it.
    pub(super) electorate: bool,
}

/// The membership in effect and what the election was last given.
#[derive(Debug)]
pub(super) struct Membership {
    /// The membership the configuration names (a new cluster's, or a joiner's).
    configured: Members,
    /// The log index of the change `configured` is (0: a new cluster's first membership).
    configured_index: u64,
    members: Members,
    electorate: Electorate,
    /// [`Members::voters_digest`] of the electorate's voters, sent with every message.
    voters_digest: u64,
    /// What the membership was last synced from.
    synced: Option<SyncKey>,
    /// The latest committed change of membership a leader told us, when our log lacks it:
    /// in effect until the log catches up.
    heard: Option<(u64, Members)>,
}

impl Membership {
    /// Starting from `members` (a stored one, else `configured`, the change at
    /// `configured_index`).
    pub(super) fn new(members: Members, configured: Members, configured_index: u64) -> Self {
        Membership {
            configured,
            configured_index,
            voters_digest: members.voters_digest(),
            electorate: Electorate {
                members: members.clone(),
                former_voters: BTreeSet::new(),
            },
            members,
            synced: None,
            heard: None,
        }
    }

    /// The membership in effect.
    pub(super) fn members(&self) -> &Members {
        &self.members
    }

    /// What the election was last given.
    pub(super) fn electorate(&self) -> &Electorate {
        &self.electorate
    }

    pub(super) fn voters_digest(&self) -> u64 {
        self.voters_digest
    }

    /// The log index of the change of membership in effect (0: the configured membership,
    /// never changed; a change a leader told us of while our log lacks it counts).
    pub(super) fn index<C: Clone>(&self, log: &Log<C>) -> u64 {
        let logged = log.change_at(u64::MAX).map_or(0, |(i, _)| i);
        self.heard
            .as_ref()
            .map_or(logged, |(i, _)| *i)
            .max(logged)
            .max(self.configured_index)
    }

    /// The membership as of log index `index`, as far as `log` knows it: the configured
    /// one where the log holds no change, or only changes older than it.
    pub(super) fn at<C: Clone>(&self, log: &Log<C>, index: u64) -> Members {
        self.logged(log, index)
            .map(|(_, m)| m.clone())
            .unwrap_or_else(|| self.configured.clone())
    }

    /// The log's change in effect at `index`, unless it is older than the configured one.
    fn logged<'a, C: Clone>(&self, log: &'a Log<C>, index: u64) -> Option<(u64, &'a Members)> {
        log.change_at(index)
            .filter(|(i, _)| *i >= self.configured_index)
    }

    /// A leader told us its latest committed change: taken when it is later than what
    /// `log` holds (committed changes form one history: the later index is the later
    /// membership). Whether it was taken.
    pub(super) fn hear<C: Clone>(&mut self, log: &Log<C>, heard: &(u64, Members)) -> bool {
        if heard.0 <= self.index(log) {
            return false;
        }
        self.heard = Some(heard.clone());
        true
    }

    /// Brings the membership in line with `log` (committed through `commit`) for beacon
    /// `me`; `None` when nothing it follows from changed (nearly every step).
    pub(super) fn sync<C: Clone>(
        &mut self,
        log: &Log<C>,
        commit: u64,
        me: SocketAddr,
    ) -> Option<Synced> {
        let change = |index: u64| log.change_at(index).map(|(i, _)| (i, log.term_at(i)));
        let key = SyncKey {
            in_effect: change(u64::MAX),
            committed: change(commit),
            heard: self.heard.as_ref().map(|(i, _)| *i),
        };
        if self.synced.as_ref() == Some(&key) {
            return None;
        }
        self.synced = Some(key);
        let logged = self.logged(log, u64::MAX).map(|(i, m)| (i, m.clone()));
        let logged_index = logged.as_ref().map_or(0, |(i, _)| *i);
        if self.heard.as_ref().is_some_and(|(i, _)| *i <= logged_index) {
            self.heard = None; // the log has caught up with it
        }
        let members = match (&self.heard, logged) {
            (Some((_, heard)), _) => heard.clone(),
            (None, Some((_, logged))) => logged,
            (None, None) => self.configured.clone(),
        };
        // Beacons a change not yet committed removed stay in the map as learners: they get
        // the log (and so learn they are out) and count for nothing. The voters among them
        // may still lead (the change may never commit: a leader elected by the membership
        // before it replaces it), so their claims are taken, as Raft's followers take the
        // entries of any leader of their term.
        let mut electorate = members.clone();
        let committed = self.at(log, commit);
        for node in committed.all().filter(|n| !members.contains(*n)) {
            electorate.learners.insert(node);
        }
        let former_voters = committed
            .voters
            .iter()
            .copied()
            .filter(|n| !members.contains(*n))
            .collect();
        let mut synced = Synced::default();
        if members != self.members {
            synced.notices.push(format!("members now: {members}"));
            if !members.contains(me) && self.members.contains(me) {
                synced.notices.push(format!(
                    "this beacon ({me}) was removed from the cluster: it leads and votes no more"
                ));
            }
            self.members = members;
        }
        let given = Electorate {
            members: electorate,
            former_voters,
        };
        if given != self.electorate {
            self.voters_digest = given.members.voters_digest();
            self.electorate = given;
            synced.electorate = true;
        }
        Some(synced)
    }
}

#[cfg(test)]
mod tests {
    use super::super::log::{Entry, Payload};
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn three() -> Members {
        Members::new([addr(1), addr(2), addr(3)], [])
    }

    fn change(log: &mut Log<u64>, members: Members) -> u64 {
        let index = log.last().index + 1;
        log.append(Entry {
            index,
            term: 1,
            payload: Payload::Members(Box::new(members)),
        });
        index
    }

    #[test]
    fn a_removal_not_yet_committed_keeps_the_removed_voter_as_a_learner() {
        let mut m = Membership::new(three(), three(), 0);
        let mut log = Log::new(100);
        assert!(m.sync(&log, 0, addr(1)).is_some(), "the first sync looks");
        assert!(m.sync(&log, 0, addr(1)).is_none(), "nothing changed since");
        let two = Members::new([addr(1), addr(2)], []);
        let at = change(&mut log, two.clone());
        let synced = m.sync(&log, 0, addr(3)).expect("a change");
        assert_eq!(m.members(), &two, "in effect where it is appended");
        assert!(synced.electorate);
        assert_eq!(synced.notices.len(), 2, "{:?}", synced.notices);
        assert!(m.electorate().members.learners.contains(&addr(3)));
        assert!(m.electorate().former_voters.contains(&addr(3)));
        assert_eq!(m.voters_digest(), m.electorate().members.voters_digest());
        let committed = m.sync(&log, at, addr(3)).expect("committed now");
        assert!(committed.electorate && committed.notices.is_empty());
        assert!(
            !m.electorate().members.contains(addr(3)),
            "out once committed"
        );
        assert_eq!(m.index(&log), at);
    }

    /// A joiner at an address that was a voter before (another machine, removed since)
    /// starts with the membership that added it, at index 20: a removed leader still
    /// telling of the change at 5 (where that address votes), or the older changes at the
    /// start of the log it fetches, do not make it a voter of that membership again.
    #[test]
    fn a_joiner_takes_no_membership_older_than_the_one_that_added_it() {
        let old = Members::new([addr(1), addr(2), addr(3), addr(4)], []);
        let joined = Members::new([addr(1), addr(2)], [addr(4)]);
        let mut m = Membership::new(joined.clone(), joined.clone(), 20);
        let mut log = Log::new(100);
        m.sync(&log, 0, addr(4));
        assert_eq!(m.index(&log), 20);
        assert!(!m.hear(&log, &(5, old.clone())), "older than its own");
        assert_eq!(m.members(), &joined);
        // The log it fetches starts with the older change; its own is still the one.
        for _ in 0..4 {
            log.append(Entry {
                index: log.last().index + 1,
                term: 1,
                payload: Payload::Command(0),
            });
        }
        change(&mut log, old.clone());
        m.sync(&log, 5, addr(4));
        assert_eq!(m.members(), &joined, "a change at 5 is older than 20");
        assert!(!m.electorate().members.voters.contains(&addr(4)));
        assert!(
            m.electorate().former_voters.is_empty(),
            "no stale voter leads"
        );
        assert_eq!(m.at(&log, 5), joined);
        // A later committed change (its promotion) is taken, heard or logged.
        let promoted = Members::new([addr(1), addr(2), addr(4)], []);
        assert!(m.hear(&log, &(25, promoted.clone())));
        m.sync(&log, 5, addr(4));
        assert_eq!(m.members(), &promoted);
    }

    #[test]
    fn a_change_a_leader_told_of_holds_until_the_log_catches_up() {
        let mut m = Membership::new(three(), three(), 0);
        let mut log = Log::new(100);
        m.sync(&log, 0, addr(1));
        let four = Members::new([addr(1), addr(2), addr(3), addr(4)], []);
        assert!(m.hear(&log, &(5, four.clone())));
        assert!(
            !m.hear(&log, &(4, three())),
            "an earlier change is not taken"
        );
        m.sync(&log, 0, addr(1)).expect("heard");
        assert_eq!(m.members(), &four);
        assert_eq!(m.index(&log), 5);
        for _ in 0..4 {
            log.append(Entry {
                index: log.last().index + 1,
                term: 1,
                payload: Payload::Command(0),
            });
        }
        let five = Members::new([addr(1), addr(2), addr(3), addr(4), addr(5)], []);
        change(&mut log, five.clone());
        m.sync(&log, 5, addr(1)).expect("the log caught up");
        assert_eq!(m.members(), &five, "the log's own change wins from here");
        assert_eq!(
            m.at(&log, 0),
            three(),
            "before any change: the configured one"
        );
    }
}
