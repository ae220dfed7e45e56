//! Finding and following the leader.
//!
//! Writes and watches are served by the leader alone. A [`Cluster`] keeps one connection,
//! to the beacon it believes leads; when a beacon answers "not the leader" it follows the
//! hint in the answer, and when a beacon is down or no leader is known yet (an election is
//! under way) it tries the next beacon after a short pause, until `retry_for` has passed.
//!
//! A beacon that stopped answering (a hung process: its connections stay open, nothing comes
//! back) is the expensive case: each attempt at it costs a whole handshake limit or ping
//! interval. A fresh connection dials the next beacon while the first is slow to answer and
//! takes the first to answer ([`super::dial`]), so a hung beacon ahead in the list costs it
//! [`ConnectOptions::attempt_delay`], not a handshake limit. A beacon that did not answer in
//! time is a *suspect* of the whole process for [`SUSPECT_FOR`](super::SUSPECT_FOR) ([`super::suspects`]): it is
//! dialled last, and for [`SUSPECT_HINT_GRACE`](super::SUSPECT_HINT_GRACE) a "not the leader" answer naming it is not
//! followed (the others elect a new leader within a few ticks), so a call spends at most one
//! attempt on it. The others still naming it after that hear it: it was slow for a moment
//! (one answer later than the attempt allowed), not hung, and it is followed again rather
//! than shunned until the suspicion ends. Every attempt is bounded by what is left of the
//! call's `retry_for`.

use std::time::Duration;

use tokio::time::Instant;

use super::dial::{self, DialFailed, Dialled};
use super::suspects;
use super::{Client, ClientError, ConnectOptions};
use crate::wire::Code;

/// First pause between rounds over the beacon list while no leader answers. A leader
/// failover usually completes within a few milliseconds of a dead leader's connections
/// closing, so the first pauses are short; they double up to [`MAX_RETRY_PAUSE`], so that a
/// longer outage is not hammered.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(2);
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The least an attempt is allowed, however little of the call's budget is left: enough for
/// a beacon on the same network to answer.
const MIN_ATTEMPT: Duration = Duration::from_millis(20);

/// The leader of a cluster, reached through any of its beacons.
#[derive(Debug)]
pub struct Cluster {
    beacons: Vec<String>,
    opts: ConnectOptions,
    /// How long one call keeps looking for a leader before it gives up.
    retry_for: Duration,
    conn: Option<Client>,
    /// Where to try next: a leader named by a beacon, else the next beacon of the list.
    hint: Option<String>,
    next: usize,
    /// How many beacons the last failed dial tried: a round over the list counts them all.
    swept: usize,
}

impl Cluster {
    /// A cluster reached through `beacons` (`ip:port` of any of its beacons). Nothing is
    /// dialled until the first call.
    pub fn new(beacons: Vec<String>, opts: ConnectOptions, retry_for: Duration) -> Cluster {
        Cluster {
            beacons,
            opts,
            retry_for,
            conn: None,
            hint: None,
            next: 0,
            swept: 0,
        }
    }

    /// The beacons of the list suspected now (by any client of this process), for a caller
    /// that reports where it stands.
    pub fn suspected(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .beacons
            .iter()
            .filter(|b| suspects::is_suspect(b))
            .cloned()
            .collect();
        all.sort();
        all
    }

    /// The order to dial in: a followed leader hint first, then the list from where the
    /// last dial left off, the beacons not suspected before those that are.
    fn candidates(&mut self) -> Vec<String> {
        let n = self.beacons.len();
        let rotation = (0..n).map(|k| self.beacons[(self.next + k) % n].clone());
        let (trusted, suspected): (Vec<String>, Vec<String>) =
            rotation.partition(|b| !suspects::is_suspect(b));
        let mut order = Vec::with_capacity(n + 1);
        if let Some(hint) = self.hint.take().filter(|h| suspects::followed(h)) {
            order.push(hint);
        }
        for b in trusted.into_iter().chain(suspected) {
            if !order.contains(&b) {
                order.push(b);
            }
        }
        order
    }

    pub fn beacons(&self) -> &[String] {
        &self.beacons
    }

    /// Replaces the beacon list (a registration reply carries the cluster's full list).
    pub fn set_beacons(&mut self, beacons: Vec<String>) {
        if !beacons.is_empty() {
            self.beacons = beacons;
        }
    }

    /// Replaces how calls connect from the next connection on (a registration's keepalive
    /// takes options fitted to its lease once it knows the lease).
    pub fn set_options(&mut self, opts: ConnectOptions) {
        if let Some(conn) = self.conn.as_mut() {
            conn.set_limits(&opts);
        }
        self.opts = opts;
    }

    /// The beacon the current connection goes to, if any.
    pub fn connected_to(&self) -> Option<&str> {
        self.conn.as_ref().map(|c| c.addr())
    }

    /// A connection to the leader, as far as anyone knows: the open one, else a fresh one
    /// to the first to answer of the hinted leader and the beacons (see [`Cluster::candidates`]),
    /// each handshake allowed at most `left`.
    async fn connection(&mut self, left: Duration) -> Result<&mut Client, ClientError> {
        if self.conn.is_none() {
            let candidates = self.candidates();
            let limit = self.opts.handshake_timeout.min(left);
            match dial::first_to_answer(&candidates, &self.opts, limit).await {
                Ok(Dialled { client, .. }) => {
                    // The next dial starts after the one that answered, as a round would.
                    if let Some(i) = self.beacons.iter().position(|b| b == client.addr()) {
                        self.next = i + 1;
                    }
                    self.conn = Some(client);
                }
                Err(DialFailed { error, attempted }) => {
                    self.next = (self.next + attempted) % self.beacons.len().max(1);
                    self.swept = attempted;
                    return Err(error);
                }
            }
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    /// Sends `req` to the leader and returns its answer, following redirects and riding out
    /// elections for up to `retry_for`. Errors that another attempt cannot fix (invalid
    /// request, IDs exhausted) are returned at once.
    pub async fn call<Req, Resp>(
        &mut self,
        cmd: impl Code,
        req: &Req,
        what: &'static str,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let limit = self.opts.timeout;
        self.call_within(cmd, req, what, limit).await
    }

    /// [`Cluster::call`] with each attempt allowed `limit`.
    async fn call_within<Req, Resp>(
        &mut self,
        cmd: impl Code,
        req: &Req,
        what: &'static str,
        limit: Duration,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let mut retry = Retry::new();
        loop {
            // No attempt outlasts the call: each is bounded by what is left of `retry_for`.
            let left = self
                .retry_for
                .saturating_sub(retry.started.elapsed())
                .max(MIN_ATTEMPT);
            let result = match self.connection(left).await {
                Ok(conn) => conn.request_within(cmd, req, what, limit.min(left)).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(resp) => return Ok(resp),
                Err(e) => self.failed(&mut retry, e, what).await?,
            }
        }
    }

    /// Sends `req` (a request that starts a stream, such as a watch) to the leader, following
    /// redirects and riding out elections as [`Cluster::call`] does, and takes the
    /// connection, which the stream holds. It takes no closure, so its future is `Send`
    /// and a watch built on it can run in a spawned task.
    pub async fn open_stream<Req, Resp>(
        &mut self,
        cmd: impl Code,
        req: &Req,
        what: &'static str,
    ) -> Result<(Client, Resp), ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        // A call that succeeded leaves the connection it went over in place: take it. The
        // first answer may wait for its turn to list (a herd lists a few at a time) for as
        // long as the call may look for a leader; a hung beacon is still left at once.
        let limit = self.opts.timeout.max(self.retry_for);
        let answer = self.call_within(cmd, req, what, limit).await?;
        Ok((self.conn.take().expect("connected"), answer))
    }

    /// After a failed attempt: drops the connection, notes a leader hint, and either returns
    /// the error for good (not retryable, or `retry_for` has passed) or pauses when a whole
    /// round over the beacons found no leader.
    async fn failed(
        &mut self,
        retry: &mut Retry,
        err: ClientError,
        what: &'static str,
    ) -> Result<(), ClientError> {
        if err.is_silence()
            && let Some(addr) = self
                .conn
                .as_ref()
                .map(|c| c.addr().to_owned())
                .or_else(|| silent_addr(&err))
        {
            tracing::debug!(beacon = %addr, "no answer in time: tried last for a while: {err}");
            suspects::note(&addr);
        }
        if !err.leaves_connection_usable() {
            self.conn = None;
        }
        if !err.is_retryable() {
            return Err(err);
        }
        if let Some(wait) = err.busy_for() {
            // Over the beacon's limits: the same beacon (it leads), after the wait it asked
            // for, spread out by jitter so that a herd does not come back at once.
            if retry.started.elapsed() + wait >= self.retry_for {
                return Err(ClientError::NoLeader {
                    what,
                    waited: retry.started.elapsed(),
                    last: Box::new(err),
                });
            }
            tokio::time::sleep(jittered(wait)).await;
            return Ok(());
        }
        self.conn = None;
        if let ClientError::Refused {
            leader: Some(l), ..
        } = &err
        {
            self.hint = Some(l.clone());
        }
        if retry.started.elapsed() >= self.retry_for {
            return Err(ClientError::NoLeader {
                what,
                waited: retry.started.elapsed(),
                last: Box::new(err),
            });
        }
        // A dial that tried several beacons counts each of them.
        retry.tried += std::mem::take(&mut self.swept).max(1);
        // One more than the list, so that following a redirect does not count as a round.
        if retry.tried > self.beacons.len() {
            // No leader answered in a whole round: give the election a moment.
            retry.tried = 0;
            tokio::time::sleep(retry.pause).await;
            retry.pause = (retry.pause * 2).min(MAX_RETRY_PAUSE);
        }
        Ok(())
    }
}

/// `wait` spread between half and one and a half of it.
pub(crate) fn jittered(wait: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let unit = f64::from(nanos % 1_000_000) / 1_000_000.0;
    wait.mul_f64(0.5 + unit)
}

/// The beacon a silence error names.
fn silent_addr(err: &ClientError) -> Option<String> {
    match err {
        ClientError::Timeout { addr, .. } | ClientError::Hung { addr, .. } => Some(addr.clone()),
        _ => None,
    }
}

/// One call's attempts.
struct Retry {
    started: Instant,
    /// Attempts since the last pause.
    tried: usize,
    /// The next pause.
    pause: Duration,
}

impl Retry {
    fn new() -> Retry {
        Retry {
            started: Instant::now(),
            tried: 0,
            pause: FIRST_RETRY_PAUSE,
        }
    }
}
