//! Finding and following the leader.
//!
//! Writes and watches are served by the leader alone. A [`Cluster`] keeps one connection,
//! to the beacon it believes leads; when a beacon answers "not the leader" it follows the
//! hint in the answer, and when a beacon is down or no leader is known yet (an election is
//! under way) it tries the next beacon after a short pause, until `retry_for` has passed.
//!
//! A beacon that stopped answering (a hung process: its connections stay open, nothing comes
//! back) is the expensive case: each attempt at it costs a whole handshake limit or ping
//! interval. Such a beacon is a *suspect* for [`SUSPECT_FOR`]: it is tried only when every
//! other beacon was, and for [`SUSPECT_HINT_GRACE`] a "not the leader" answer naming it is
//! not followed (the others elect a new leader within a few ticks), so a call spends at most
//! one attempt on it. The others still naming it after that hear it: it was slow for a
//! moment (one answer later than the attempt allowed), not hung, and it is followed again
//! rather than shunned until the suspicion ends.

use std::time::Duration;

use tokio::time::Instant;

use super::{Client, ClientError, ConnectOptions};
use crate::wire::Code;

/// First pause between rounds over the beacon list while no leader answers. A leader
/// failover usually completes within a few milliseconds of a dead leader's connections
/// closing, so the first pauses are short; they double up to [`MAX_RETRY_PAUSE`], so that a
/// longer outage is not hammered.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(2);
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How long a beacon that did not answer in time is tried last: longer than an election
/// takes, so the others have moved on by then if it hung.
pub const SUSPECT_FOR: Duration = Duration::from_secs(5);

/// How long a suspect that the others name leader is not followed: longer than a failover
/// takes at the default tick (a hung leader is offline to its peers after three ticks and
/// replaced at once). With a much longer `tick_ms`, following it again may cost one more
/// attempt at a beacon that is hung after all.
pub const SUSPECT_HINT_GRACE: Duration = Duration::from_secs(1);

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
    /// Beacons that did not answer in time, and when each last did not.
    suspects: std::collections::HashMap<String, Instant>,
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
            suspects: Default::default(),
        }
    }

    /// Whether `addr` did not answer in time lately (within [`SUSPECT_FOR`]).
    fn suspect(&self, addr: &str) -> bool {
        self.suspects
            .get(addr)
            .is_some_and(|since| since.elapsed() < SUSPECT_FOR)
    }

    /// Whether a leader hint naming `addr` is followed: unless it did not answer in time
    /// within [`SUSPECT_HINT_GRACE`].
    fn followed(&self, addr: &str) -> bool {
        self.suspects
            .get(addr)
            .is_none_or(|since| since.elapsed() >= SUSPECT_HINT_GRACE)
    }

    /// The beacons suspected now, for a caller that reports where it stands.
    pub fn suspected(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .beacons
            .iter()
            .filter(|b| self.suspect(b))
            .cloned()
            .collect();
        all.sort();
        all
    }

    /// The next beacon of the list to try: the first one not suspected from where the last
    /// try left off, else (every one is suspected) simply the next.
    fn next_beacon(&mut self) -> String {
        let n = self.beacons.len();
        let pick = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| !self.suspect(&self.beacons[i]))
            .unwrap_or(self.next % n);
        self.next = pick + 1;
        self.beacons[pick].clone()
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
    /// to the hinted leader or the next beacon.
    async fn connection(&mut self) -> Result<&mut Client, ClientError> {
        if self.conn.is_none() {
            let addr = match self.hint.take() {
                Some(h) if self.followed(&h) => h,
                _ => self.next_beacon(),
            };
            let client = Client::connect(&addr, &self.opts).await;
            if client.is_ok() {
                self.suspects.remove(&addr);
            }
            self.conn = Some(client?);
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
            let result = match self.connection().await {
                Ok(conn) => conn.request_within(cmd, req, what, limit).await,
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
            self.suspects.insert(addr, Instant::now());
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
        retry.tried += 1;
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
