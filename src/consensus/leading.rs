//! What only a leader keeps: its term and where it stands in taking over, each follower's
//! progress, the answers waiting for a commit or a confirmation round, a transfer under
//! way. Each has its part ([`super::takeover::Phase`], [`Followers`],
//! [`super::confirm::Rounds`], [`Pending`]); [`Leading`] holds them for one leadership.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::app::{Machine, Service};
use super::confirm::{self, Rounds};
use super::progress::Followers;
use super::renewals::Notes;
use super::takeover::Phase;
use super::{Token, Transfer};

/// A service's answer to a request.
pub(super) type Answer<S, V> = Result<<V as Service<S>>::Response, <V as Service<S>>::Error>;

/// An answer, with the last index of the state it was decided on and the last renewal
/// noted then (see [`super::Replica::give`]).
pub(super) type Decided<S, V> = (u64, u64, Answer<S, V>);

/// State only the leader has.
pub(super) struct Leading<S: Machine, V: Service<S>> {
    /// The term this leadership began in; a new term is a new leadership.
    pub(super) term: u64,
    /// The index of the entry that began this term (0 before it is appended): entries the
    /// leader took over may have been committed by an earlier leader without its knowing,
    /// and committing this entry commits them, so no read is served from before it.
    pub(super) start: u64,
    pub(super) phase: Phase,
    pub(super) followers: Followers,
    /// Answers waiting for a confirmation round, each with the last index of the state it
    /// was decided on.
    pub(super) rounds: Rounds<Decided<S, V>>,
    /// Answers and changes of membership waiting for their commit.
    pub(super) pending: Pending<S, V>,
    pub(super) transfer: Option<Transfer>,
    /// What this step must send even if no entry goes.
    pub(super) news: News,
    /// The renewals made in this term, for the followers.
    pub(super) notes: Notes,
    /// Answers waiting for a majority to hold every renewal noted before them, each with
    /// the last note it waits for (see [`super::Replica::give`]).
    pub(super) unheard: VecDeque<(u64, Token, Answer<S, V>)>,
    /// The last note made when each request still unanswered was decided: its answer waits
    /// for those, not for notes made while it waited for its round or commit.
    pub(super) noted: hashbrown::HashMap<Token, u64>,
}

/// What a leader's step must tell its followers.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct News {
    /// Entries were appended in this step: send them.
    pub(super) appended: bool,
    /// The commit index moved in this step: tell the followers even if nothing else goes
    /// (a follower holds a linearizable read's answer until it knows the entries it read
    /// are committed, and would otherwise learn it only with the next heartbeat).
    pub(super) committed: bool,
}

impl<S: Machine, V: Service<S>> Leading<S, V> {
    pub(super) fn new(term: u64, phase: Phase, followers: Followers) -> Self {
        Leading {
            term,
            start: 0,
            phase,
            followers,
            rounds: Rounds::default(),
            pending: Pending::default(),
            transfer: None,
            news: News::default(),
            notes: Notes::new(),
            unheard: VecDeque::new(),
            noted: hashbrown::HashMap::new(),
        }
    }

    /// Leading, but still collecting a majority's state (quorum mode).
    pub(super) fn taking_over(&self) -> bool {
        self.phase.is_collecting()
    }

    /// The transfer's target, while one is under way.
    pub(super) fn handing_to(&self) -> Option<SocketAddr> {
        self.transfer.as_ref().map(|t| t.to)
    }
}

/// A leader's requests waiting for their entries to commit, in index order: requests
/// answered from the committed state, answers decided on a state ahead of the commit, and
/// changes of membership.
pub(super) struct Pending<S: Machine, V: Service<S>> {
    /// Requests waiting for their entry to commit.
    waiting: VecDeque<(u64, Token, V::Waiting)>,
    /// Answers decided on the state, waiting for every entry that state held to commit
    /// (the index of the last): see [`super::Replica::answer_from_state`].
    held: VecDeque<(u64, Token, Answer<S, V>)>,
    /// Changes of membership waiting to commit: the entry's index and whom to answer.
    changing: Vec<(u64, Option<Token>)>,
}

impl<S: Machine, V: Service<S>> Default for Pending<S, V> {
    fn default() -> Self {
        Pending {
            waiting: VecDeque::new(),
            held: VecDeque::new(),
            changing: Vec::new(),
        }
    }
}

/// What a commit made due.
pub(super) struct Due<S: Machine, V: Service<S>> {
    /// Requests to answer from the committed state.
    pub(super) waiting: Vec<(Token, V::Waiting)>,
    /// Answers to give as they are.
    pub(super) held: Vec<(Token, Answer<S, V>)>,
}

impl<S: Machine, V: Service<S>> Pending<S, V> {
    /// `token` waits for index `index` to commit.
    pub(super) fn wait(&mut self, index: u64, token: Token, waiting: V::Waiting) {
        let at = self.waiting.partition_point(|(i, _, _)| *i <= index);
        self.waiting.insert(at, (index, token, waiting));
    }

    /// `token`'s answer, decided on the state through `decided`, waits for that to commit.
    pub(super) fn hold(&mut self, decided: u64, token: Token, answer: Answer<S, V>) {
        let at = self.held.partition_point(|(i, _, _)| *i <= decided);
        self.held.insert(at, (decided, token, answer));
    }

    /// The change of membership at `index` is answered to `token` (if any) once committed.
    pub(super) fn change(&mut self, index: u64, token: Option<Token>) {
        self.changing.push((index, token));
    }

    /// What the commit index `commit` made due, taken.
    pub(super) fn due(&mut self, commit: u64) -> Due<S, V> {
        Due {
            waiting: confirm::take_due(&mut self.waiting, commit),
            held: confirm::take_due(&mut self.held, commit),
        }
    }

    /// The changes of membership `commit` covers, taken: each its index and whom to answer.
    pub(super) fn changes_due(&mut self, commit: u64) -> Vec<(u64, Option<Token>)> {
        // Asked after every step, and nearly always with nothing to take.
        if self.changing.iter().all(|(i, _)| *i > commit) {
            return Vec::new();
        }
        let (done, waiting) = self.changing.drain(..).partition(|(i, _)| *i <= commit);
        self.changing = waiting;
        done
    }

    /// Every request still waiting (the leadership ends): the tokens of the requests, in
    /// index order (those answered from the state, then those held), and of the changes of
    /// membership.
    pub(super) fn tokens(self) -> (Vec<Token>, Vec<Token>) {
        let waiting = self.waiting.into_iter().map(|(_, t, _)| t);
        let held = self.held.into_iter().map(|(_, t, _)| t);
        let changing = self.changing.into_iter().filter_map(|(_, t)| t);
        (waiting.chain(held).collect(), changing.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Append, Numbers};
    use super::*;

    #[test]
    fn a_commit_makes_due_what_waited_for_it_in_index_order_and_no_more() {
        let mut p = Pending::<Numbers, Append>::default();
        p.wait(5, 1, 50);
        p.wait(3, 2, 30);
        p.hold(4, 3, Ok(40));
        p.hold(6, 4, Ok(60));
        p.change(4, Some(5));
        p.change(7, None);
        let due = p.due(4);
        assert_eq!(due.waiting, vec![(2, 30)]);
        assert_eq!(
            due.held.into_iter().map(|(t, _)| t).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(p.changes_due(4), vec![(4, Some(5))]);
        assert_eq!(p.due(4).waiting, vec![], "taken once");
        assert_eq!(
            p.tokens(),
            (vec![1, 4], vec![]),
            "the rest goes with the leadership"
        );
    }
}
