//! The replica as readers see it: a read runs on the task that asked for it (a client's
//! connection, a gRPC call), not on the driver's, which only orders and applies.
//!
//! The driver takes the write lock only while it steps the replica with one input, and a
//! read holds the read lock only while it runs, so a read waits for at most one step, never
//! for the driver's queue of writes behind it. Why a lock and not a copy published after
//! each batch: the state holds up to a million registrations, and a copy per batch (or the
//! persistent maps that make one cheap) would cost every write more than the reads save.
//!
//! What a read may answer with is not what the replica holds but what is *released*: the
//! driver publishes, after each carry-out, the commit index as of that carry-out, when
//! everything it stored is on disk (or before the batch's store, when that commit index
//! stops before the batch's first entry: everything it names was stored before). A read's answer waits until every entry it saw is
//! committed by that measure (the same rule as a write's answer: nothing that depends on an
//! entry leaves this beacon before the entry is stored on a majority). A follower in quorum
//! mode also publishes the commit index its leader tells it as soon as it hears it: the
//! leader's commit names entries already stored on a majority, the leader's disk included.
//! It does so as the message arrives, on the connection that brought it
//! ([`View::release_commit`]), before the driver, perhaps in an fsync, steps it.

// The machines' handlers are compiled in every build, the daemon that calls them only with
// the `server` feature: without it (`beacon-client`) part of this module has no caller.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::allow::Allowlist;
use crate::consensus::{ConsensusError, Position};
use crate::machines::Replica;
use crate::time::Millis;

/// Why a read could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReadError {
    #[error(transparent)]
    Consensus(#[from] ConsensusError),
    /// The driver has stopped (this beacon is shutting down).
    #[error("this beacon is shutting down")]
    Stopped,
}

/// How far the log is committed, as of the driver's last carry-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    pub(crate) commit: u64,
    /// The position this replica's state was applied through then (a change of it wakes
    /// readers waiting for an index, and those whose entries may have been replaced).
    pub(crate) applied: Position,
    /// The driver has stopped: nothing will be released any more.
    pub(crate) stopped: bool,
}

/// The replica, shared between the driver (the only writer) and the readers.
pub(crate) struct View {
    replica: RwLock<Replica>,
    /// Who may connect: the cluster's replicated list, else `configured`; brought up to
    /// date at each release, read at each connection without the lock.
    allowed: ArcSwap<Allowlist>,
    /// This beacon's own list (key `ip_allow`).
    configured: Arc<Allowlist>,
    /// The beacons' addresses: always admitted, so that no list cuts the cluster apart
    /// (the members, the configured ones among them, as the membership changes).
    beacons: ArcSwap<Vec<std::net::IpAddr>>,
    /// The membership's log index `beacons` was taken at.
    beacons_at: std::sync::atomic::AtomicU64,
    /// The replica's clock starts here (the driver's and the readers' `now`).
    started: Instant,
    released: watch::Sender<Released>,
}

/// What the replica's clock reads when the process starts, rather than 0: a leader's table
/// of renewals dates each lease by its age, and a beacon that just restarted must be able
/// to place a renewal made before it started (a lease's age is at most a lease, far below
/// a day). Uptime is the clock less this.
pub(crate) const CLOCK_ORIGIN_MS: Millis = 86_400_000;

impl View {
    pub(crate) fn new(replica: Replica, configured: Allowlist) -> Arc<View> {
        let released = watch::Sender::new(Released {
            commit: replica.commit(),
            applied: replica.applied(),
            stopped: false,
        });
        let configured = Arc::new(configured);
        let allowed = ArcSwap::new(
            replica
                .state()
                .allowlist()
                .cloned()
                .unwrap_or_else(|| configured.clone()),
        );
        let beacons = ArcSwap::from_pointee(beacon_ips(&replica));
        Arc::new(View {
            replica: RwLock::new(replica),
            allowed,
            configured,
            beacons,
            beacons_at: Default::default(),
            started: Instant::now(),
            released,
        })
    }

    /// The replica's clock: milliseconds since the driver started, from [`CLOCK_ORIGIN_MS`].
    pub(crate) fn now(&self) -> Millis {
        CLOCK_ORIGIN_MS + self.started.elapsed().as_millis() as Millis
    }

    /// The replica to read. Hold it only while reading: the driver waits for it.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Replica> {
        self.replica.read()
    }

    /// The replica to step (the driver alone).
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Replica> {
        self.replica.write()
    }

    /// After a carry-out (and, on a follower in quorum mode, after each message from its
    /// leader: see the driver): publishes how far the log is committed now, waking the
    /// readers whose answers wait for it.
    pub(crate) fn release(&self, replica: &Replica) {
        let allowed = replica.state().allowlist().unwrap_or(&self.configured);
        if !Arc::ptr_eq(allowed, &self.allowed.load()) {
            self.allowed.store(allowed.clone());
        }
        let at = replica.members_index();
        if self
            .beacons_at
            .swap(at, std::sync::atomic::Ordering::Relaxed)
            != at
        {
            self.beacons.store(Arc::new(beacon_ips(replica)));
        }
        self.released.send_if_modified(|r| {
            let now = Released {
                // A follower may have released a higher commit from its leader's message
                // before the driver stepped it (`release_commit`).
                commit: replica.commit().max(r.commit),
                applied: replica.applied(),
                stopped: false,
            };
            let changed = *r != now;
            *r = now;
            changed
        });
    }

    /// A follower heard from its leader that its log is committed through `commit` (see
    /// [`crate::consensus::Replica::commit_heard`]) before the driver stepped that message:
    /// readers waiting for it may answer now. Committed entries are never replaced, so what
    /// is released never goes back (a later [`View::release`] keeps the higher index).
    pub(crate) fn release_commit(&self, commit: u64) {
        self.released.send_if_modified(|r| {
            let higher = commit > r.commit;
            r.commit = r.commit.max(commit);
            higher
        });
    }

    /// Who may connect now (see [`crate::allow`]).
    pub(crate) fn allowlist(&self) -> Arc<Allowlist> {
        self.allowed.load_full()
    }

    /// Whether `ip` may open a client connection or have a service registered at it: a
    /// beacon's address, or one the allowlist admits.
    pub(crate) fn admits(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.beacons.load().contains(&ip) || self.allowed.load().admits(ip)
    }

    /// The driver has stopped: readers waiting for a release give up.
    pub(crate) fn stop(&self) {
        self.released.send_modify(|r| r.stopped = true);
    }

    /// Waits until `done` gives an answer, asking it with the replica and what was released
    /// each time something new is. Fails with "shutting down" once the driver has stopped.
    pub(crate) async fn until<T>(
        &self,
        mut done: impl FnMut(&Replica, Released) -> Option<T>,
    ) -> Result<T, ReadError> {
        let mut released = self.released.subscribe();
        loop {
            let now = *released.borrow_and_update();
            let answer = {
                let replica = self.read();
                done(&replica, now)
            };
            if let Some(answer) = answer {
                return Ok(answer);
            }
            if now.stopped || released.changed().await.is_err() {
                return Err(ReadError::Stopped);
            }
        }
    }

    /// Waits until every entry through `at` is committed and released: `LeaderChanged` if
    /// this replica no longer holds `at` (a new leader replaced it).
    pub(crate) async fn committed(&self, at: Position) -> Result<(), ReadError> {
        self.until(|replica, released| match replica.committed(at) {
            None => Some(Err(ConsensusError::LeaderChanged)),
            Some(_) if at.index <= released.commit => Some(Ok(())),
            Some(_) => None,
        })
        .await??;
        Ok(())
    }

    /// Waits until this replica has applied the log through `index` and released it as
    /// committed.
    pub(crate) async fn applied(&self, index: u64) -> Result<(), ReadError> {
        self.until(|replica, released| {
            (index <= released.commit && index <= replica.applied().index).then_some(())
        })
        .await
    }
}

/// The IP addresses of the beacons `replica` knows: the configured ones and the members.
fn beacon_ips(replica: &Replica) -> Vec<std::net::IpAddr> {
    let config = replica.config();
    let mut ips: Vec<_> = config
        .beacons
        .iter()
        .chain(&config.learners)
        .copied()
        .chain(replica.members().all())
        .map(|b| b.ip().to_canonical())
        .collect();
    ips.sort();
    ips.dedup();
    ips
}
