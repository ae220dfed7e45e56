//! Who the beacons of a cluster are: the voters, which elect the leader and make its
//! majorities, and the learners, which follow it and count for nothing.
//!
//! Membership is replicated state. The configuration's lists are only the initial
//! membership; a change is a core entry ([`super::Payload::Members`] carrying the whole new
//! membership) that takes effect where it is appended, committed or not, as Raft's changes
//! of one server at a time do. A leader appends one change at a time, each moving one
//! beacon, so any majority of the old voters and any of the new share a beacon; and none
//! before its own first entry of its term is committed, so a change of an earlier leader
//! that never committed cannot meet one of its own. A log cut back (a tail that never
//! committed) takes its changes with it: the log knows the membership as of each of its
//! entries ([`super::Log::members`]).

use std::collections::BTreeSet;
use std::net::SocketAddr;

/// The members of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Members {
    pub voters: BTreeSet<SocketAddr>,
    /// Disjoint from `voters`.
    pub learners: BTreeSet<SocketAddr>,
    /// Learners the leader promotes to voters once they have kept up for a while (a beacon
    /// added by `member add` without `--learner`): a subset of `learners`.
    pub promoting: BTreeSet<SocketAddr>,
}

/// One change of membership, moving one beacon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A new beacon, as a learner; `promote`: made a voter once it has kept up.
    AddLearner { node: SocketAddr, promote: bool },
    /// A learner becomes a voter.
    Promote(SocketAddr),
    /// A voter or a learner leaves.
    Remove(SocketAddr),
}

impl Change {
    /// The beacon it moves.
    pub fn node(&self) -> SocketAddr {
        match *self {
            Change::AddLearner { node, .. } | Change::Promote(node) | Change::Remove(node) => node,
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::AddLearner {
                node,
                promote: true,
            } => write!(f, "add {node} (a learner until it has kept up)"),
            Change::AddLearner {
                node,
                promote: false,
            } => write!(f, "add {node} as a learner"),
            Change::Promote(node) => write!(f, "promote {node} to voter"),
            Change::Remove(node) => write!(f, "remove {node}"),
        }
    }
}

/// Why a change of membership is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembersError {
    #[error("{0} is already a member")]
    AlreadyMember(SocketAddr),
    #[error("{0} is not a member")]
    NotAMember(SocketAddr),
    #[error("{0} is not a learner: only a learner is promoted")]
    NotALearner(SocketAddr),
    #[error("{0} is the last voter; a cluster keeps at least one")]
    LastVoter(SocketAddr),
    #[error("a cluster has at most {0} beacons")]
    TooMany(usize),
}

impl Members {
    /// The initial membership: the configured voters and learners.
    pub fn new(
        voters: impl IntoIterator<Item = SocketAddr>,
        learners: impl IntoIterator<Item = SocketAddr>,
    ) -> Members {
        let voters: BTreeSet<_> = voters.into_iter().collect();
        let learners = learners
            .into_iter()
            .filter(|l| !voters.contains(l))
            .collect();
        Members {
            voters,
            learners,
            promoting: BTreeSet::new(),
        }
    }

    pub fn contains(&self, node: SocketAddr) -> bool {
        self.voters.contains(&node) || self.learners.contains(&node)
    }

    /// A fingerprint of the voters (FNV-1a of their sorted addresses; never 0): heartbeats
    /// number the voters a beacon sees by their places among its voters
    /// (`Heartbeat::sees`), which mean the same to another beacon only if it has the same
    /// voters.
    pub fn voters_digest(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for voter in &self.voters {
            for byte in voter.to_string().bytes().chain([b';']) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash.max(1)
    }

    /// Voters and learners, in sorted order.
    pub fn all(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let mut all: Vec<_> = self.voters.union(&self.learners).copied().collect();
        all.sort();
        all.into_iter()
    }

    /// The membership after `change`, or why it cannot be made.
    pub fn with(&self, change: Change) -> Result<Members, MembersError> {
        let mut next = self.clone();
        match change {
            Change::AddLearner { node, promote } => {
                if self.contains(node) {
                    return Err(MembersError::AlreadyMember(node));
                }
                let most = super::election::MAX_BEACONS;
                if self.voters.len() + self.learners.len() >= most {
                    return Err(MembersError::TooMany(most));
                }
                next.learners.insert(node);
                if promote {
                    next.promoting.insert(node);
                }
            }
            Change::Promote(node) => {
                if !self.learners.contains(&node) {
                    return Err(if self.voters.contains(&node) {
                        MembersError::NotALearner(node)
                    } else {
                        MembersError::NotAMember(node)
                    });
                }
                next.learners.remove(&node);
                next.promoting.remove(&node);
                next.voters.insert(node);
            }
            Change::Remove(node) => {
                if !self.contains(node) {
                    return Err(MembersError::NotAMember(node));
                }
                if self.voters.len() == 1 && self.voters.contains(&node) {
                    return Err(MembersError::LastVoter(node));
                }
                next.voters.remove(&node);
                next.learners.remove(&node);
                next.promoting.remove(&node);
            }
        }
        Ok(next)
    }
}

impl std::fmt::Display for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |set: &BTreeSet<SocketAddr>| {
            set.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(f, "voters [{}]", list(&self.voters))?;
        if !self.learners.is_empty() {
            write!(f, ", learners [{}]", list(&self.learners))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_change_moves_one_beacon_and_refuses_what_makes_no_sense() {
        let m = Members::new([a(1), a(2), a(3)], [a(3), a(4)]);
        assert_eq!(
            m.learners,
            [a(4)].into(),
            "a voter listed as learner stays a voter"
        );
        let grown = m
            .with(Change::AddLearner {
                node: a(5),
                promote: true,
            })
            .unwrap();
        assert!(grown.learners.contains(&a(5)) && grown.promoting.contains(&a(5)));
        let promoted = grown.with(Change::Promote(a(5))).unwrap();
        assert!(promoted.voters.contains(&a(5)) && promoted.promoting.is_empty());
        assert_eq!(
            promoted.with(Change::Promote(a(5))),
            Err(MembersError::NotALearner(a(5)))
        );
        assert_eq!(
            m.with(Change::Promote(a(9))),
            Err(MembersError::NotAMember(a(9)))
        );
        assert_eq!(
            m.with(Change::AddLearner {
                node: a(1),
                promote: false
            }),
            Err(MembersError::AlreadyMember(a(1)))
        );
        let shrunk = m.with(Change::Remove(a(1))).unwrap();
        assert_eq!(shrunk.voters, [a(2), a(3)].into());
        let one = Members::new([a(1)], []);
        assert_eq!(
            one.with(Change::Remove(a(1))),
            Err(MembersError::LastVoter(a(1)))
        );
        assert_eq!(
            m.with(Change::Remove(a(9))),
            Err(MembersError::NotAMember(a(9)))
        );
    }
}
