//! A service's registration, kept alive in the background.
//!
//! [`Registration::register`] gets a node ID from the leader; a background task then reports
//! to the leader (following it across failovers) several times per lease. The service learns
//! through [`Registration::lease_lost`] the moment it must stop using its ID:
//!
//! - the leader says the registration is gone (it expired or was unregistered), or
//! - no leader has confirmed the lease for a whole lease period. The leader counts a lease
//!   from when it *received* a report, which is after the service sent it, so the service
//!   gives up no later than the leader does, and the ID then sits in quarantine
//!   (`id_reuse_delay_ms`) before anyone else can get it. A leader confirms a report only
//!   once a majority confirmed it still leads after the report arrived (quorum mode), so a
//!   deposed leader cannot stretch the lease; the registration itself counts from when its
//!   request was sent.
//!
//! Every report and the final unregister name the registration by its fencing token, so a
//! late one can never renew or end a later holder's registration of the same ID.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Watch;
use crate::machines::registry::state::{MAX_NOTE_BYTES, Status};
use crate::machines::registry::wire::{RegistryCmd as Cmd, RegistryErrorCode, status_to_pb};
use crate::net::{ClientError, Cluster, ConnectOptions};
use crate::pb::registry as pb;

/// What to register.
#[derive(Debug, Clone)]
pub struct RegisterOptions {
    pub node_type: String,
    /// The `ip:port` the service serves on.
    pub addr: SocketAddr,
    pub access_addr: Option<SocketAddr>,
    pub worker_num: u32,
    /// A JSON object, or empty.
    pub metadata: String,
    /// How to reach beacons.
    pub connect: ConnectOptions,
    /// How long a call keeps looking for a leader (during a failover) before giving up.
    pub retry_for: Duration,
}

impl RegisterOptions {
    pub fn new(node_type: impl Into<String>, addr: SocketAddr) -> RegisterOptions {
        RegisterOptions {
            node_type: node_type.into(),
            addr,
            access_addr: None,
            worker_num: 0,
            metadata: String::new(),
            connect: ConnectOptions::default(),
            retry_for: Duration::from_secs(10),
        }
    }

    fn request(&self) -> pb::RegisterRequest {
        pb::RegisterRequest {
            node_type: self.node_type.clone(),
            addr: self.addr.to_string(),
            access_addr: self.access_addr.map(|a| a.to_string()).unwrap_or_default(),
            worker_num: self.worker_num,
            metadata: self.metadata.clone(),
        }
    }
}

/// Why a registration ended without the service asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseLost {
    /// The leader no longer holds the registration (expired, or unregistered elsewhere).
    Revoked(String),
    /// No leader confirmed the lease within a lease period.
    Unconfirmed { for_ms: u64, last_error: String },
}

impl std::fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseLost::Revoked(why) => write!(f, "registration revoked: {why}"),
            LeaseLost::Unconfirmed { for_ms, last_error } => write!(
                f,
                "no leader confirmed the lease for {for_ms} ms (last error: {last_error})"
            ),
        }
    }
}

/// A live registration. Dropping it stops the keepalive (the lease then runs out); call
/// [`Registration::unregister`] to free the ID at once.
pub struct Registration {
    reply: pb::RegisterReply,
    /// How it reached the cluster, for watches.
    connect: ConnectOptions,
    retry_for: Duration,
    node: pb::NodeInfo,
    lost: watch::Receiver<Option<LeaseLost>>,
    /// The lease is known to hold until then.
    confirmed_until: Arc<Mutex<Instant>>,
    load: watch::Sender<(pb::LoadStats, Vec<pb::LoadStats>)>,
    health: watch::Sender<Option<(Status, String)>>,
    stop: CancellationToken,
    task: Option<JoinHandle<Cluster>>,
    clock: Arc<ClockShare>,
}

/// What a registration shares with a snowflake generator on its node ID (see
/// [`crate::machines::sequence::client::Snowflake`]): the previous holder's last timestamp,
/// the highest timestamp used, and the reservation the leader committed. Reports carry a
/// reservation only once a generator is attached.
#[derive(Debug)]
pub struct ClockShare {
    floor_ms: u64,
    id_range: (u32, u32),
    attached: AtomicBool,
    used_ms: AtomicU64,
    /// Timestamps up to this are confirmed; 0 once the lease is lost or given up.
    reserved_ms: AtomicU64,
    /// Wakes the keepalive to report at once (a generator was attached).
    kick: Notify,
}

impl ClockShare {
    /// The highest timestamp a previous holder of the node ID may have used.
    pub fn floor_ms(&self) -> u64 {
        self.floor_ms
    }

    /// The timestamp up to which the leader has confirmed this registration may generate.
    pub fn reserved_ms(&self) -> u64 {
        self.reserved_ms.load(Ordering::Acquire)
    }

    /// A generator starts at `from_ms`: reports carry reservations from now on, starting at
    /// once.
    pub fn attach(&self, from_ms: u64) {
        self.used_ms.fetch_max(from_ms, Ordering::AcqRel);
        self.attached.store(true, Ordering::Release);
        self.kick.notify_one();
    }

    /// The generator used timestamp `ms`.
    pub fn used(&self, ms: u64) {
        self.used_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// The reservation to ask for: past everything used and the wall clock by `ahead`.
    fn ask(&self, ahead: Duration) -> u64 {
        if !self.attached.load(Ordering::Acquire) {
            return 0;
        }
        let from = self
            .used_ms
            .load(Ordering::Acquire)
            .max(crate::time::wall_ms());
        from + ahead.as_millis() as u64
    }

    /// Stops generation; the last timestamp used, if a generator was attached.
    fn stop(&self) -> u64 {
        self.reserved_ms.store(0, Ordering::Release);
        if self.attached.load(Ordering::Acquire) {
            self.used_ms.load(Ordering::Acquire)
        } else {
            0
        }
    }
}

impl Registration {
    /// Registers with the leader of the cluster reached through `beacons` and starts the
    /// keepalive. Registering an address that is already live returns its ID.
    pub async fn register(
        beacons: Vec<String>,
        opts: RegisterOptions,
    ) -> Result<Registration, ClientError> {
        let mut cluster = Cluster::new(beacons, opts.connect.clone(), opts.retry_for);
        // The leader starts the lease when the request reaches it: after this.
        let sent_at = Instant::now();
        let reply: pb::RegisterReply = cluster
            .call(Cmd::Register, &opts.request(), "the registration")
            .await?;
        let node = reply.node.clone().unwrap_or_default();
        for w in &reply.warnings {
            tracing::warn!(node_id = node.node_id, "{w}");
        }
        let lease = Duration::from_millis(reply.lease_ms.max(1));
        // The keepalive leaves a beacon that stops answering within a fraction of the lease
        // (see `ConnectOptions::for_lease`), keeping what this cluster learnt of the others.
        cluster.set_beacons(reply.beacons.clone());
        cluster.set_options(opts.connect.clone().for_lease(lease));
        let (lost_tx, lost) = watch::channel(None);
        let (load, load_rx) = watch::channel(Default::default());
        let (health, health_rx) = watch::channel(None);
        let stop = CancellationToken::new();
        let confirmed_until = Arc::new(Mutex::new(sent_at + lease));
        let clock = Arc::new(ClockShare {
            floor_ms: reply.clock_floor_ms,
            id_range: (reply.id_first, reply.id_last),
            attached: AtomicBool::new(false),
            used_ms: AtomicU64::new(0),
            reserved_ms: AtomicU64::new(0),
            kick: Notify::new(),
        });
        let keepalive = Keepalive {
            clock: clock.clone(),
            cluster,
            node_id: node.node_id,
            addr: opts.addr,
            token: (node.term, node.index),
            lease,
            confirmed_at: sent_at,
            confirmed_until: confirmed_until.clone(),
            lost: lost_tx,
            load: load_rx,
            health: health_rx,
        };
        let task = tokio::spawn(keepalive.run(stop.clone()));
        Ok(Registration {
            reply,
            connect: opts.connect.clone(),
            retry_for: opts.retry_for,
            node,
            lost,
            confirmed_until,
            load,
            health,
            stop,
            task: Some(task),
            clock,
        })
    }

    /// What a snowflake generator on this registration's node ID shares with it.
    pub fn clock_share(&self) -> Arc<ClockShare> {
        self.clock.clone()
    }

    /// How this registration reaches the cluster, for the watches a service starts on it.
    pub fn connect_options(&self) -> &ConnectOptions {
        &self.connect
    }

    /// How long its calls keep looking for a leader.
    pub fn retry_for(&self) -> Duration {
        self.retry_for
    }

    /// The cluster's node-ID range `(first, last)`, as the leader stated it.
    pub fn id_range(&self) -> (u32, u32) {
        self.clock.id_range
    }

    pub fn node_id(&self) -> u32 {
        self.node.node_id
    }

    /// The registration as the leader stored it.
    pub fn node(&self) -> &pb::NodeInfo {
        &self.node
    }

    /// The fencing token of this registration: (term, index) of its log entry. A later holder
    /// of the same ID always has a larger one.
    pub fn fencing_token(&self) -> (u64, u64) {
        (self.node.term, self.node.index)
    }

    /// The leader's whole answer (lease, beacons, subscriptions).
    pub fn reply(&self) -> &pb::RegisterReply {
        &self.reply
    }

    /// Node types this service's type subscribes to.
    pub fn subscribe(&self) -> &[String] {
        &self.reply.subscribe
    }

    /// Watches the node types this service's type subscribes to (the `node_type` list of
    /// the beacon configuration, as in NebulaBeacon): the current set, then each change.
    pub async fn watch_subscriptions(&self) -> Result<Watch, ClientError> {
        Watch::start(
            self.reply.beacons.clone(),
            self.reply.subscribe.clone(),
            self.connect.clone(),
            self.retry_for,
        )
        .await
    }

    /// Whether the lease still holds, as far as this service knows.
    pub fn is_live(&self) -> bool {
        self.lost.borrow().is_none() && std::time::Instant::now() < self.confirmed_until()
    }

    /// Until when the lease is known to hold: a lease period after the last confirmed
    /// report was sent (or the registration, before the first). No leader ends the
    /// registration before then; a service that must never use its ID past its lease
    /// checks this before each use.
    pub fn confirmed_until(&self) -> std::time::Instant {
        self.confirmed_until
            .lock()
            .expect("never poisoned")
            .into_std()
    }

    /// A receiver that changes to `Some` when the lease is lost; `.changed()` wakes then.
    pub fn lease_lost(&self) -> watch::Receiver<Option<LeaseLost>> {
        self.lost.clone()
    }

    /// Waits until the lease is lost.
    pub async fn lost(&self) -> LeaseLost {
        let mut rx = self.lost.clone();
        let lost = rx
            .wait_for(Option::is_some)
            .await
            .map(|v| v.clone())
            .ok()
            .flatten();
        lost.unwrap_or_else(|| LeaseLost::Revoked("keepalive stopped".into()))
    }

    /// Sets the load and counters sent with the next reports (the seed's node report).
    pub fn set_load(&self, node: pb::LoadStats, workers: Vec<pb::LoadStats>) {
        self.load.send_replace((node, workers));
    }

    /// Sets the health the reports carry from now on (the first goes at once): what the
    /// service's own checks find. The leader writes it only when the status changes, with
    /// `note` saying why; discovery leaves a `Critical` registration out. An operator's
    /// drain is the operator's and stays.
    pub fn set_health(&self, status: Status, note: impl Into<String>) {
        self.health.send_replace(Some((status, note.into())));
    }

    /// Runs `checks` every `every` beside the service until the registration ends, and
    /// reports the worst of their statuses as its health once it has held for `threshold`
    /// rounds in a row (so one slow answer does not take the service out of discovery).
    pub fn run_checks(&self, checks: Vec<super::Check>, every: Duration, threshold: u32) {
        let health = self.health.clone();
        let stop = self.stop.clone();
        let report = move |status, note| {
            health.send_replace(Some((status, note)));
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = super::checks::run(checks, every, threshold, report) => {}
                _ = stop.cancelled() => {}
            }
        });
    }

    /// Stops the keepalive and frees the ID at the leader. Succeeds when the registration
    /// has ended, whether by this call or before it (its lease ran out, or an attempt of
    /// this call whose answer was lost went through): the ID is then no longer this
    /// service's either way. The request names this registration by its fencing token, so
    /// it can never end a later holder's.
    pub async fn unregister(mut self) -> Result<pb::NodeInfo, ClientError> {
        self.stop.cancel();
        let mut cluster = match self.task.take() {
            Some(task) => task.await.expect("keepalive task does not panic"),
            None => unreachable!("the task is taken only here"),
        };
        // The keepalive has stopped: no reply can renew the reservation after this.
        let clock_ms = self.clock.stop();
        let req = pb::UnregisterRequest {
            node_id: self.node.node_id,
            addr: String::new(),
            term: self.node.term,
            index: self.node.index,
            release: true,
            clock_ms,
        };
        match cluster
            .call::<_, pb::UnregisterReply>(Cmd::Unregister, &req, "the unregistration")
            .await
        {
            Ok(reply) => Ok(reply.node.unwrap_or_default()),
            Err(e)
                if e.is(RegistryErrorCode::NotHolder) || e.is(RegistryErrorCode::UnknownTarget) =>
            {
                Ok(self.node.clone())
            }
            Err(e) => Err(e),
        }
    }
}

/// A note cut to what a beacon takes ([`MAX_NOTE_BYTES`]), at a character's edge: a report
/// the beacon refused for its note would not renew the lease.
fn clip_note(mut note: String) -> String {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.clock.stop();
        self.stop.cancel();
    }
}

struct Keepalive {
    clock: Arc<ClockShare>,
    cluster: Cluster,
    node_id: u32,
    addr: SocketAddr,
    /// The registration's fencing token (term, index).
    token: (u64, u64),
    lease: Duration,
    /// When the last confirmed report (or the registration) was sent.
    confirmed_at: Instant,
    confirmed_until: Arc<Mutex<Instant>>,
    lost: watch::Sender<Option<LeaseLost>>,
    load: watch::Receiver<(pb::LoadStats, Vec<pb::LoadStats>)>,
    /// The health the service set, sent with every report once set.
    health: watch::Receiver<Option<(Status, String)>>,
}

/// How many times a [`Registration`] reports (renewing its lease) per lease: with the
/// default lease of 10 s, every 2.5 s. Three reports can be lost before the lease runs out.
pub const REPORTS_PER_LEASE: u32 = 4;

impl Keepalive {
    /// Reports [`REPORTS_PER_LEASE`] times per lease until stopped or the lease is lost;
    /// returns the cluster connection for a final unregister.
    async fn run(mut self, stop: CancellationToken) -> Cluster {
        let every = (self.lease / REPORTS_PER_LEASE).max(Duration::from_millis(50));
        loop {
            let confirmed_at = self.confirmed_at;
            let scheduled = tokio::select! {
                _ = stop.cancelled() => return self.cluster,
                _ = tokio::time::sleep(every) => true,
                _ = self.clock.kick.notified() => false,
                Ok(()) = self.health.changed() => false,
            };
            let sent_at = Instant::now();
            let deadline = confirmed_at + self.lease;
            let remaining = deadline.saturating_duration_since(sent_at);
            // Two reports' worth ahead: a generator stops on its own after two reports
            // went unconfirmed, well within the lease.
            let mut report = self.report(self.clock.ask(every * 2));
            // On schedule with over half the lease left (not a retry, which comes a report
            // later): the answer may wait for the leader's next heartbeat.
            report.routine = scheduled && remaining > self.lease / 2 && report.clock_ms == 0;
            let attempt = tokio::select! {
                _ = stop.cancelled() => return self.cluster,
                r = tokio::time::timeout(remaining, self.cluster.call::<_, pb::NodeReportReply>(
                    Cmd::NodeReport, &report, "the node report")) => r,
            };
            let error = match attempt {
                Ok(Ok(reply)) => {
                    if reply.clock_ms > 0 {
                        self.clock
                            .reserved_ms
                            .fetch_max(reply.clock_ms, Ordering::AcqRel);
                    }
                    self.confirmed_at = sent_at;
                    *self.confirmed_until.lock().expect("never poisoned") = sent_at + self.lease;
                    continue;
                }
                Ok(Err(e)) if e.is(RegistryErrorCode::NoLease) => {
                    self.lose(LeaseLost::Revoked(e.to_string()));
                    return self.cluster;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer before the lease ran out".to_owned(),
            };
            if Instant::now() >= deadline {
                self.lose(LeaseLost::Unconfirmed {
                    for_ms: confirmed_at.elapsed().as_millis() as u64,
                    last_error: error,
                });
                return self.cluster;
            }
            tracing::debug!(node_id = self.node_id, "report failed, retrying: {error}");
        }
    }

    fn report(&mut self, clock_ms: u64) -> pb::NodeReport {
        let (node, worker) = self.load.borrow().clone();
        let health = self.health.borrow_and_update().clone();
        pb::NodeReport {
            node_id: self.node_id,
            addr: self.addr.to_string(),
            node: Some(node),
            worker,
            term: self.token.0,
            index: self.token.1,
            clock_ms,
            health: health.as_ref().map(|(s, _)| status_to_pb(*s).into()),
            health_note: health.map(|(_, note)| clip_note(note)).unwrap_or_default(),
            routine: false,
        }
    }

    fn lose(&self, why: LeaseLost) {
        self.clock.stop();
        tracing::warn!(node_id = self.node_id, "lease lost: {why}");
        self.lost.send_replace(Some(why));
    }
}
