//! A follower's linearizable reads share their requests for the leader's read index.
//!
//! A read may use a read index only from a request sent after the read arrived (an index
//! asked for earlier may miss a write acknowledged in between). Reads that arrive while a
//! request is under way wait for it to end, and the next request, sent then, serves every
//! one of them: under load a follower sends one request per round trip to its leader, not
//! one per read.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::machines::handle::Reject;

/// The batcher: how many reads have arrived, and the last answer (`T`: the read index, and
/// what comes with it) with the reads it covers.
pub(crate) struct ReadBatch<T> {
    /// Reads arrived so far; each takes the next number.
    arrived: AtomicU64,
    /// One request at a time; waiting here is in arrival order.
    sending: tokio::sync::Mutex<()>,
    /// The last answer: the reads it covers (numbers up to this), whom it was asked of, and
    /// what it was.
    last: Mutex<Option<Answer<T>>>,
}

impl<T> Default for ReadBatch<T> {
    fn default() -> Self {
        ReadBatch {
            arrived: AtomicU64::new(0),
            sending: tokio::sync::Mutex::new(()),
            last: Mutex::new(None),
        }
    }
}

struct Answer<T> {
    covers: u64,
    leader: SocketAddr,
    index: Result<T, (u32, String, Option<SocketAddr>)>,
}

impl<T: Clone> ReadBatch<T> {
    /// `leader`'s read index for a read arriving now: from a request another read sends
    /// after this one arrived, or from `ask`, sent now.
    pub(crate) async fn read_index<F, Fut>(&self, leader: SocketAddr, ask: F) -> Result<T, Reject>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, Reject>>,
    {
        let me = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(answer) = self.covering(me, leader) {
            return answer;
        }
        let _turn = self.sending.lock().await;
        if let Some(answer) = self.covering(me, leader) {
            return answer;
        }
        // Every read arrived by now arrived before this request is sent.
        let covers = self.arrived.load(Ordering::SeqCst);
        let index = ask().await;
        let kept = match &index {
            Ok(i) => Ok(i.clone()),
            Err(r) => Err((r.code, r.msg.clone(), r.leader)),
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Answer {
            covers,
            leader,
            index: kept,
        });
        index
    }

    /// The last answer, if it was asked of `leader` after read `me` arrived.
    fn covering(&self, me: u64, leader: SocketAddr) -> Option<Result<T, Reject>> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let answer = last
            .as_ref()
            .filter(|a| a.covers >= me && a.leader == leader)?;
        Some(match &answer.index {
            Ok(i) => Ok(i.clone()),
            Err((code, msg, leader)) => Err(Reject {
                code: *code,
                msg: msg.clone(),
                close: false,
                leader: *leader,
                retry_after_ms: 0,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_arriving_during_a_request_share_the_next_one_never_an_earlier_one() {
        let batch = Arc::new(ReadBatch::<u64>::default());
        let leader: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        // Each request answers with its own number: the index of the `n`th request is `n`.
        let ask = |sent: Arc<AtomicUsize>| async move {
            let n = sent.fetch_add(1, Ordering::SeqCst) as u64 + 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(n)
        };
        let first = {
            let (batch, sent) = (batch.clone(), sent.clone());
            tokio::spawn(async move { batch.read_index(leader, || ask(sent)).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Ten reads arrive while the first request is under way.
        let mut later = Vec::new();
        for _ in 0..10 {
            let (batch, sent) = (batch.clone(), sent.clone());
            later.push(tokio::spawn(async move {
                batch.read_index(leader, || ask(sent)).await
            }));
        }
        assert_eq!(first.await.unwrap().unwrap(), 1);
        for read in later {
            assert_eq!(
                read.await.unwrap().unwrap(),
                2,
                "the request sent after they arrived"
            );
        }
        assert_eq!(sent.load(Ordering::SeqCst), 2, "one request for all ten");
        // A read arriving after both is not served by either.
        let sent2 = sent.clone();
        assert_eq!(batch.read_index(leader, || ask(sent2)).await.unwrap(), 3);
        // Nor by an answer from another leader.
        let other: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let sent3 = sent.clone();
        assert_eq!(batch.read_index(other, || ask(sent3)).await.unwrap(), 4);
    }
}
