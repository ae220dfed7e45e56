//! Admission control: what the clients of one beacon may have in flight, refused early and
//! politely once over a limit.
//!
//! Every request a beacon takes (a native frame, a gRPC call, a call a follower relays)
//! passes [`Admission::admit`] before it is handled. It is refused with `BUSY` (gRPC
//! `RESOURCE_EXHAUSTED`, reason `BUSY`), with a hint of how long to wait, when
//!
//! * the beacon already has `limits.max_pending` requests under way, or a tenth of that of
//!   new work (a write costs the core far more than a renewal, and a queue of a thousand
//!   writes is already tens of milliseconds long): renewals of live leases (requests of a
//!   kind the machines batch, the registry's reports) and reads of the cluster's own status
//!   are held to the first limit alone, so that overload never costs a live service its
//!   lease;
//! * the client has `limits.client_in_flight` requests under way (a client is a connection,
//!   or a token's name where the beacon authenticates clients: all the connections of one
//!   token count together);
//! * the client asked for more than `limits.client_rate` requests a second (off by default);
//! * (a write, at the door of the core's queue) it would wait for the core longer than
//!   `limits.queue_delay_ms`, or the core's queue has stood above it ([`pace`]): renewals,
//!   status and reads go on.
//!
//! A refusal costs the beacon a few microseconds and nothing of its core: a client that
//! backs off and retries (the Rust, Python and nebcli clients do, with jitter) gets its
//! answer once the load passes, and the requests admitted meanwhile keep their latency.

pub(crate) mod pace;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

pub use crate::config::Limits;
use crate::machines::handle::Reject;
use crate::wire::ErrorCode;

/// Whether new work may join the core's queue now: admission by the wait it would meet
/// (`pace.rs`), asked of each write at the door of the queue, where reads, which never
/// wait there, are not held to it. The driver's handle holds it (`server/driver/handle.rs`).
pub(crate) type Gate = Arc<dyn Fn() -> Result<(), Reject> + Send + Sync>;

/// How urgent a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Keeps what exists going: a renewal of a live lease, a read of the cluster's status
    /// (health probes), what beacons send each other. Admitted up to the limit.
    Keep,
    /// Anything else: admitted up to a tenth of the limit.
    New,
}

/// The admission of one beacon.
#[derive(Debug)]
pub(crate) struct Admission {
    limits: Limits,
    /// Requests under way, and of them new work.
    pending: AtomicUsize,
    pending_new: AtomicUsize,
    /// Each client's share while a connection holds it.
    clients: Mutex<Clients>,
    refused: AtomicU64,
    /// How long new work would wait for the core.
    pace: Arc<pace::Pace>,
}

/// The shares handed out, by client.
#[derive(Debug, Default)]
struct Clients {
    by_key: HashMap<String, Weak<ClientShare>>,
    /// Shares looked at the last time the gone ones were swept out.
    swept_at: usize,
}

/// One client's share of a beacon: what its connections (all of one token's, or one
/// connection's) have under way and asked for lately. A connection takes it once, so a
/// request costs two atomic operations here, not a lookup.
#[derive(Debug)]
pub(crate) struct ClientShare {
    in_flight: AtomicUsize,
    /// Tokens left of this second's rate, and when the bucket was last filled (used only
    /// with `limits.client_rate`).
    bucket: Mutex<(f64, Instant)>,
}

/// A request admitted: dropping it (answered or abandoned) gives its place back.
#[derive(Debug)]
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    client: Option<Arc<ClientShare>>,
    class: Class,
    /// Requests it admitted (a batch is admitted in one step).
    count: usize,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.release(self.class, self.count);
        if let Some(c) = &self.client {
            c.in_flight.fetch_sub(self.count, Ordering::Relaxed);
        }
    }
}

/// The shortest and longest wait a refusal suggests.
const RETRY_MIN_MS: u64 = 5;
const RETRY_MAX_MS: u64 = 1_000;

impl Admission {
    pub(crate) fn new(limits: Limits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            pending: AtomicUsize::new(0),
            pending_new: AtomicUsize::new(0),
            clients: Mutex::new(Clients::default()),
            refused: AtomicU64::new(0),
            pace: Arc::new(pace::Pace::new(std::time::Duration::from_millis(
                limits.queue_delay_ms,
            ))),
        })
    }

    /// The core's pace, which the core's thread keeps up to date.
    pub(crate) fn pace(&self) -> Arc<pace::Pace> {
        self.pace.clone()
    }

    /// Requests under way now.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Requests refused since start, writes refused for the wait at the core's door with them.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The gate a write of new work passes before it joins the core's queue
    /// ([`crate::machines::handle::Core::may_queue`]): refused `BUSY`, and counted
    /// with every other refusal, once the wait it would meet passes
    /// `limits.queue_delay_ms` ([`pace::Pace::admit_new`]).
    pub(crate) fn gate(self: &Arc<Self>) -> Gate {
        let admission = self.clone();
        Arc::new(move || {
            admission.pace.admit_new(Instant::now()).map_err(|slow| {
                // Twice the wait: by then the queue that refused it has drained.
                let wait = (slow.wait.as_millis() as u64).saturating_mul(2);
                admission.busy(format!("{}; renewals go on", slow.why), wait)
            })
        })
    }

    /// The share of the client `key` names ([`super::dispatch::client_key`]): the same for
    /// every connection that names it while one of them holds it.
    pub(crate) fn client(&self, key: &str) -> Arc<ClientShare> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(share) = clients.by_key.get(key).and_then(Weak::upgrade) {
            return share;
        }
        // Shares nobody holds any more go, once the map has doubled since the last sweep.
        if clients.by_key.len() >= 2 * clients.swept_at.max(64) {
            clients.by_key.retain(|_, w| w.strong_count() > 0);
            clients.swept_at = clients.by_key.len();
        }
        let share = Arc::new(ClientShare {
            in_flight: AtomicUsize::new(0),
            bucket: Mutex::new((f64::from(self.limits.client_rate), Instant::now())),
        });
        clients
            .by_key
            .insert(key.to_owned(), Arc::downgrade(&share));
        share
    }

    /// Admits a request of `class` from `client` (`None`: a call a follower relays, whose
    /// client that follower admitted), or refuses it `BUSY` with a retry hint. The server
    /// admits through [`Admission::admit_many`]; this is the one-request form its tests use.
    #[cfg(test)]
    pub(crate) fn admit(
        self: &Arc<Self>,
        client: Option<&Arc<ClientShare>>,
        class: Class,
    ) -> Result<Ticket, Reject> {
        self.admit_many(client, class, 1)
    }

    /// Admits `count` requests of `class` from `client` at once (a batch of renewals counts
    /// as the requests it holds): all of them, or none, refused `BUSY` with a retry hint.
    /// `client` is `None` for a call a follower relays, whose client that follower admitted.
    pub(crate) fn admit_many(
        self: &Arc<Self>,
        client: Option<&Arc<ClientShare>>,
        class: Class,
        count: usize,
    ) -> Result<Ticket, Reject> {
        let limits = self.limits;
        let pending = self.pending.fetch_add(count, Ordering::Relaxed) + count - 1;
        let new_work = (limits.max_pending / 10).max(1);
        let pending_new = match class {
            Class::New => self.pending_new.fetch_add(count, Ordering::Relaxed) + count - 1,
            Class::Keep => 0,
        };
        let over = if pending >= limits.max_pending {
            Some(format!(
                "this beacon has {pending} requests under way (limit {}; key `limits.max_pending`)",
                limits.max_pending
            ))
        } else if class == Class::New && pending_new >= new_work {
            Some(format!(
                "this beacon has {pending_new} writes and other new requests under way (limit {new_work}, a tenth of `limits.max_pending`; renewals go on)"
            ))
        } else {
            None
        };
        if let Some(why) = over {
            self.release(class, count);
            // Longer the deeper the load: a herd spreads its retries out.
            let depth = pending.max(pending_new * 10);
            let wait = RETRY_MIN_MS + (depth as u64 * 20 / limits.max_pending.max(1) as u64);
            return Err(self.busy(why, wait));
        }

        let Some(client) = client else {
            return Ok(Ticket {
                admission: self.clone(),
                client: None,
                class,
                count,
            });
        };
        let in_flight = client.in_flight.fetch_add(count, Ordering::Relaxed) + count - 1;
        let refusal = if in_flight >= limits.client_in_flight {
            Some((
                format!(
                    "this client has {in_flight} requests under way (key `limits.client_in_flight`)"
                ),
                RETRY_MIN_MS,
            ))
        } else if limits.client_rate > 0 {
            let rate = f64::from(limits.client_rate);
            let mut bucket = client.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let (tokens, filled) = *bucket;
            let tokens = (tokens + now.duration_since(filled).as_secs_f64() * rate).min(rate);
            let asked = count as f64;
            if tokens < asked {
                *bucket = (tokens, now);
                let wait = ((asked - tokens) / rate * 1000.0).ceil() as u64;
                Some((
                    format!(
                        "this client is over {} requests a second (key `limits.client_rate`)",
                        limits.client_rate
                    ),
                    wait,
                ))
            } else {
                *bucket = (tokens - asked, now);
                None
            }
        } else {
            None
        };
        if let Some((why, wait)) = refusal {
            client.in_flight.fetch_sub(count, Ordering::Relaxed);
            self.release(class, count);
            return Err(self.busy(why, wait));
        }
        Ok(Ticket {
            admission: self.clone(),
            client: Some(client.clone()),
            class,
            count,
        })
    }

    /// Gives `count` places of `class` back.
    fn release(&self, class: Class, count: usize) {
        self.pending.fetch_sub(count, Ordering::Relaxed);
        if class == Class::New {
            self.pending_new.fetch_sub(count, Ordering::Relaxed);
        }
    }

    fn busy(&self, why: String, wait_ms: u64) -> Reject {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let wait_ms = wait_ms.clamp(RETRY_MIN_MS, RETRY_MAX_MS);
        Reject::busy(format!("busy: {why}; retry in {wait_ms} ms"), wait_ms)
    }
}

impl Reject {
    /// `BUSY`, saying to retry after `wait_ms`.
    pub(crate) fn busy(msg: String, wait_ms: u64) -> Reject {
        let mut reject = Reject::new(ErrorCode::Busy, msg);
        reject.retry_after_ms = wait_ms;
        reject
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_work_is_refused_first_and_renewals_keep_the_rest() {
        let a = Admission::new(Limits {
            max_pending: 20,
            client_in_flight: 100,
            client_rate: 0,
            queue_delay_ms: 5,
        });
        let mut held: Vec<Ticket> = (0..2)
            .map(|i| {
                a.admit(Some(&a.client(&format!("c{i}"))), Class::New)
                    .unwrap()
            })
            .collect();
        let busy = a.admit(Some(&a.client("c9")), Class::New).unwrap_err();
        assert_eq!(busy.code, ErrorCode::Busy as u32);
        assert!(
            busy.msg.contains("limits.max_pending") && busy.retry_after_ms >= 5,
            "{busy:?}"
        );
        for _ in 2..20 {
            held.push(a.admit(Some(&a.client("c9")), Class::Keep).unwrap());
        }
        assert!(
            a.admit(Some(&a.client("c9")), Class::Keep).is_err(),
            "the limit holds for renewals too"
        );
        assert_eq!(a.pending(), 20);
        held.truncate(1);
        assert_eq!(a.pending(), 1, "an answered request gives its place back");
        assert!(a.admit(Some(&a.client("c9")), Class::New).is_ok());
        assert_eq!(a.refused(), 2);
        // Renewals under way do not crowd new work out: it has its own tenth.
        let b = Admission::new(Limits {
            max_pending: 20,
            client_in_flight: 100,
            client_rate: 0,
            queue_delay_ms: 5,
        });
        let renewals: Vec<Ticket> = (0..15)
            .map(|_| b.admit(None, Class::Keep).unwrap())
            .collect();
        let writes: Vec<Ticket> = (0..2).map(|_| b.admit(None, Class::New).unwrap()).collect();
        assert!(b.admit(None, Class::New).is_err());
        drop((renewals, writes));
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn a_batch_is_admitted_whole_or_not_at_all() {
        let a = Admission::new(Limits {
            max_pending: 20,
            client_in_flight: 100,
            client_rate: 0,
            queue_delay_ms: 5,
        });
        let conn = a.client("conn 1");
        let batch = a.admit_many(Some(&conn), Class::Keep, 15).unwrap();
        assert_eq!(a.pending(), 15);
        assert!(a.admit_many(Some(&conn), Class::Keep, 10).is_err());
        assert_eq!(a.pending(), 15, "a refused batch takes nothing");
        assert!(a.admit_many(Some(&conn), Class::Keep, 5).is_ok());
        drop(batch);
        assert_eq!(a.pending(), 0);
        assert_eq!(conn.in_flight.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn one_client_is_held_to_its_share_and_its_rate() {
        let a = Admission::new(Limits {
            max_pending: 1000,
            client_in_flight: 2,
            client_rate: 0,
            queue_delay_ms: 5,
        });
        let conn = a.client("conn 1");
        let _one = a.admit(Some(&conn), Class::New).unwrap();
        let _two = a.admit(Some(&conn), Class::New).unwrap();
        let busy = a.admit(Some(&conn), Class::Keep).unwrap_err();
        assert!(busy.msg.contains("limits.client_in_flight"), "{busy:?}");
        assert!(
            a.admit(Some(&a.client("conn 2")), Class::New).is_ok(),
            "another client is not"
        );

        let a = Admission::new(Limits {
            max_pending: 1000,
            client_in_flight: 1000,
            client_rate: 10,
            queue_delay_ms: 5,
        });
        // Two connections of one token: one share, held while they are open.
        let (first, second) = (a.client("token ci"), a.client("token ci"));
        assert!(Arc::ptr_eq(&first, &second));
        for _ in 0..10 {
            drop(a.admit(Some(&first), Class::New).unwrap());
        }
        let busy = a.admit(Some(&second), Class::New).unwrap_err();
        assert!(
            busy.msg.contains("limits.client_rate") && busy.retry_after_ms <= 100,
            "{busy:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert!(
            a.admit(Some(&first), Class::New).is_ok(),
            "the rate refills"
        );
    }
}
