//! The log's own thread: a batch's entries are written and fsynced there while the core's
//! thread goes on stepping what arrives (peers' acknowledgements, rounds, new requests).
//!
//! One store at a time, in order: the storage moves to this thread with the entries and
//! comes back with the receipt, so nothing else can touch it meanwhile. What a store holds
//! back (a follower's acknowledgements, answers, committed changes) is released, and the
//! core told ([`crate::consensus::Input::Stored`]), when it comes back. See
//! [`crate::consensus::Config::stores_reported`].

use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::error;

use crate::consensus::{Position, Store, Stored};
use crate::machines::{Services, State};
use crate::storage::{self, Early, Storage, StorageError};

/// A store under way: what waits for it, and its answer.
pub(super) struct Storing {
    /// The carry-outs' rest, early halves done, released once the store is done.
    pub(super) early: Early<State, Services>,
    /// The last entry stored, told to the core once it is durable.
    pub(super) through: Option<Position>,
    pub(super) done: oneshot::Receiver<Done>,
}

/// What comes back from the thread: the storage, and the store's receipt (with how long it
/// took) or why it failed.
pub(super) struct Done {
    pub(super) storage: Storage<State>,
    pub(super) result: Result<(Stored, Duration), StorageError>,
}

struct Job {
    storage: Storage<State>,
    store: Store<State>,
    done: oneshot::Sender<Done>,
}

/// The thread's queue; the thread ends once this is dropped.
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    /// Starts the thread.
    pub(super) fn start() -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("beacon-store".into())
            .spawn(move || {
                while let Ok(Job {
                    mut storage,
                    store,
                    done,
                }) = queue.recv()
                {
                    let result = storage::store_beside(&mut storage, &store);
                    // The driver stopped waiting (it is shutting down): nothing to tell.
                    let _ = done.send(Done { storage, result });
                }
            })?;
        Ok(Writer { jobs })
    }

    /// Stores `store` with `storage` on the thread; the answer comes on the receiver. Were
    /// the thread gone (it ends only once this is dropped), the receiver would say so and
    /// the beacon stop.
    pub(super) fn store(
        &self,
        storage: Storage<State>,
        store: Store<State>,
    ) -> oneshot::Receiver<Done> {
        let (done, answer) = oneshot::channel();
        if self
            .jobs
            .send(Job {
                storage,
                store,
                done,
            })
            .is_err()
        {
            error!("the log's thread is gone");
        }
        answer
    }
}
