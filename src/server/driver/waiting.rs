//! Requests stepped and waiting for their answers, by token.
//!
//! A request asked alone has a channel of its own for its answer. A batch (node reports
//! queued back to back on one connection, up to 64) has one channel for all of it: its
//! answers are collected here, on the core thread, and leave together once the last is
//! given. The connection answers a batch once it has every answer anyway, and a channel
//! per request cost the core an allocation and a wake-up per renewal (some 8% of a leader
//! under renewals).

use hashbrown::HashMap;
use tokio::sync::oneshot;

use crate::consensus::Token;
use crate::machines::{Services, State};

type Reply = crate::consensus::Reply<State, Services>;

/// Where one request's answer goes.
enum Replier {
    Alone(oneshot::Sender<Reply>),
    /// Answer `slot` of batch `batch`.
    InBatch {
        batch: u64,
        slot: usize,
    },
}

/// A batch whose answers are being collected.
struct Batch {
    answers: Vec<Option<Reply>>,
    /// Answers not given yet.
    left: usize,
    reply: oneshot::Sender<Vec<Reply>>,
}

#[derive(Default)]
pub(super) struct Waiting {
    /// One insert and one removal per request, so hashed by foldhash (hashbrown's
    /// default), not SipHash, which a token needs no defence from.
    by_token: HashMap<Token, Replier>,
    batches: HashMap<u64, Batch>,
    next_batch: u64,
}

impl Waiting {
    /// Request `token`'s answer goes to `reply`.
    pub(super) fn alone(&mut self, token: Token, reply: oneshot::Sender<Reply>) {
        self.by_token.insert(token, Replier::Alone(reply));
    }

    /// The answers of requests `tokens` go to `reply` together, in this order, once all
    /// are given (at once when there are none).
    pub(super) fn batch(&mut self, tokens: &[Token], reply: oneshot::Sender<Vec<Reply>>) {
        if tokens.is_empty() {
            let _ = reply.send(Vec::new());
            return;
        }
        let batch = self.next_batch;
        self.next_batch += 1;
        for (slot, token) in tokens.iter().enumerate() {
            self.by_token
                .insert(*token, Replier::InBatch { batch, slot });
        }
        self.batches.insert(
            batch,
            Batch {
                answers: (0..tokens.len()).map(|_| None).collect(),
                left: tokens.len(),
                reply,
            },
        );
    }

    /// Gives `reply` to request `token`, if it waits: a batch's answers leave with its
    /// last.
    pub(super) fn give(&mut self, token: Token, reply: Reply) {
        match self.by_token.remove(&token) {
            None => {}
            Some(Replier::Alone(to)) => {
                let _ = to.send(reply);
            }
            Some(Replier::InBatch { batch, slot }) => {
                let Some(b) = self.batches.get_mut(&batch) else {
                    return;
                };
                if b.answers[slot].replace(reply).is_none() {
                    b.left -= 1;
                }
                if b.left == 0
                    && let Some(b) = self.batches.remove(&batch)
                {
                    let answers = b.answers.into_iter().flatten().collect();
                    let _ = b.reply.send(answers);
                }
            }
        }
    }

    /// Requests waiting.
    pub(super) fn len(&self) -> usize {
        self.by_token.len()
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

    fn term(r: &Reply) -> u64 {
        match r {
            Err(ReplyError::Consensus(ConsensusError::NoQuorum { sees, .. })) => *sees as u64,
            other => panic!("not a test answer: {other:?}"),
        }
    }

    #[test]
    fn a_batch_leaves_in_its_order_once_its_last_answer_is_given() {
        let mut w = Waiting::default();
        let (tx, mut rx) = oneshot::channel();
        w.batch(&[10, 11, 12], tx);
        let (alone, mut alone_rx) = oneshot::channel();
        w.alone(13, alone);
        w.give(12, answer(2));
        w.give(10, answer(0));
        w.give(13, answer(3));
        assert_eq!(term(&alone_rx.try_recv().unwrap()), 3, "alone: at once");
        assert!(rx.try_recv().is_err(), "one answer of the batch is missing");
        w.give(11, answer(1));
        let answers = rx.try_recv().expect("the batch's answers");
        assert_eq!(answers.iter().map(term).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(w.len(), 0);
        assert!(w.batches.is_empty(), "nothing kept of it");
        // A token given twice, or never waited for, changes nothing.
        w.give(11, answer(9));
        w.give(99, answer(9));
    }

    #[test]
    fn an_empty_batch_is_answered_at_once_and_a_dropped_one_tells_its_asker() {
        let mut w = Waiting::default();
        let (tx, mut rx) = oneshot::channel();
        w.batch(&[], tx);
        assert!(rx.try_recv().unwrap().is_empty());
        let (tx, mut rx) = oneshot::channel();
        w.batch(&[1, 2], tx);
        w.give(1, answer(0));
        drop(w);
        assert!(
            matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
            "a driver that stops drops what waits: its asker hears it"
        );
    }
}
