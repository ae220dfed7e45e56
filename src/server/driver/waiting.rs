//! Requests stepped and waiting for their answers, by token.
//!
//! A request asked alone has a channel of its own for its answer. A batch (node reports
//! queued back to back on one connection, up to 64) has one channel for all of it and a
//! run of consecutive tokens: its answers are collected here, on the core thread, and
//! leave together once the last is given. The connection answers a batch once it has every
//! answer anyway; a channel per request cost the core an allocation and a wake-up per
//! renewal, and an entry per token in a map another 7% of a leader under renewals.

use std::collections::BTreeMap;

use hashbrown::HashMap;
use tokio::sync::oneshot;

use crate::consensus::Token;
use crate::machines::{Services, State};

type Reply = crate::consensus::Reply<State, Services>;

/// A batch whose answers are being collected.
struct Batch {
    /// Answer `i` is that of token `first + i` (the batch's key).
    answers: Vec<Option<Reply>>,
    /// Answers not given yet.
    left: usize,
    reply: oneshot::Sender<Vec<Reply>>,
}

#[derive(Default)]
pub(super) struct Waiting {
    /// Requests asked alone. One insert and one removal per request, so hashed by foldhash
    /// (hashbrown's default), not SipHash, which a token needs no defence from.
    alone: HashMap<Token, oneshot::Sender<Reply>>,
    /// Batches by their first token: a few at a time.
    batches: BTreeMap<Token, Batch>,
}

impl Waiting {
    /// Request `token`'s answer goes to `reply`.
    pub(super) fn alone(&mut self, token: Token, reply: oneshot::Sender<Reply>) {
        self.alone.insert(token, reply);
    }

    /// The answers of the `n` requests of tokens `first..first + n` go to `reply`
    /// together, in this order, once all are given (at once when there are none).
    pub(super) fn batch(&mut self, first: Token, n: usize, reply: oneshot::Sender<Vec<Reply>>) {
        if n == 0 {
            let _ = reply.send(Vec::new());
            return;
        }
        self.batches.insert(
            first,
            Batch {
                answers: (0..n).map(|_| None).collect(),
                left: n,
                reply,
            },
        );
    }

    /// Gives `reply` to request `token`, if it waits: a batch's answers leave with its
    /// last.
    pub(super) fn give(&mut self, token: Token, reply: Reply) {
        if let Some(to) = self.alone.remove(&token) {
            let _ = to.send(reply);
            return;
        }
        let Some((&first, batch)) = self.batches.range_mut(..=token).next_back() else {
            return;
        };
        // Past the batch before it, or answered already (the first answer stands, as for
        // a request asked alone, whose channel is gone once it is answered).
        let Some(slot @ None) = batch.answers.get_mut((token - first) as usize) else {
            return;
        };
        *slot = Some(reply);
        batch.left -= 1;
        if batch.left == 0
            && let Some(batch) = self.batches.remove(&first)
        {
            let answers = batch.answers.into_iter().flatten().collect();
            let _ = batch.reply.send(answers);
        }
    }

    /// Requests waiting (read for the metrics).
    pub(super) fn len(&self) -> usize {
        self.alone.len() + self.batches.values().map(|b| b.left).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{ConsensusError, ReplyError};

    fn answer(n: u64) -> Reply {
        Err(ReplyError::Consensus(ConsensusError::NoQuorum {
            sees: n as usize,
            needs: 2,
            of: 3,
        }))
    }

    fn number(r: &Reply) -> u64 {
        match r {
            Err(ReplyError::Consensus(ConsensusError::NoQuorum { sees, .. })) => *sees as u64,
            other => panic!("not a test answer: {other:?}"),
        }
    }

    #[test]
    fn a_batch_leaves_in_its_order_once_its_last_answer_is_given() {
        let mut w = Waiting::default();
        let (tx, mut rx) = oneshot::channel();
        w.batch(10, 3, tx);
        let (alone, mut alone_rx) = oneshot::channel();
        w.alone(13, alone);
        let (next, mut next_rx) = oneshot::channel();
        w.batch(14, 2, next);
        assert_eq!(w.len(), 6);
        w.give(15, answer(5));
        w.give(15, answer(8)); // given again: the first answer stands
        w.give(16, answer(9)); // past every batch: nobody's
        w.give(14, answer(4));
        let next = next_rx.try_recv().expect("the later batch, on its own");
        assert_eq!(next.iter().map(number).collect::<Vec<_>>(), [4, 5]);
        w.give(12, answer(2));
        w.give(10, answer(0));
        w.give(13, answer(3));
        assert_eq!(number(&alone_rx.try_recv().unwrap()), 3, "alone: at once");
        assert!(rx.try_recv().is_err(), "one answer of the batch is missing");
        w.give(11, answer(1));
        let answers = rx.try_recv().expect("the batch's answers");
        assert_eq!(answers.iter().map(number).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(w.len(), 0);
        assert!(w.batches.is_empty(), "nothing kept of it");
        // A token given twice, or never waited for, changes nothing.
        w.give(11, answer(9));
        w.give(99, answer(9));
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn an_empty_batch_is_answered_at_once_and_a_dropped_one_tells_its_asker() {
        let mut w = Waiting::default();
        let (tx, mut rx) = oneshot::channel();
        w.batch(5, 0, tx);
        assert!(rx.try_recv().unwrap().is_empty());
        let (tx, mut rx) = oneshot::channel();
        w.batch(1, 2, tx);
        w.give(1, answer(0));
        drop(w);
        assert!(
            matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
            "a driver that stops drops what waits: its asker hears it"
        );
    }
}
