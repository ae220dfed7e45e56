//! What the tasks of one beacon share: the configuration, the driver's handle, our latest
//! heartbeat for handshakes, the shutdown signal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::driver::{Greeting, PeerHandle};
use crate::config::Config;
use crate::machines::handle::{Consistency, Core, CoreExt, Ctx, Linearize, Reject};
use crate::server::driver::DriverHandle;
use crate::transport::tls::{self, Reloading, TlsError};
use crate::wire::{Cmd, Code, ErrorCode};

/// A beacon's TLS: what it accepts connections with, and (with a CA, as every beacon of a
/// cluster of more than one has) what it dials its peers with.
pub(crate) struct ServerTls {
    /// The client port's: it offers ALPN `h2`, for gRPC clients.
    pub(crate) accept: Reloading<rustls::ServerConfig>,
    /// The admin HTTP API's (HTTP/1.1).
    pub(crate) admin: Arc<Reloading<rustls::ServerConfig>>,
    pub(crate) dial: Option<Reloading<rustls::ClientConfig>>,
}

impl ServerTls {
    /// Loads the configured files; `None` when TLS is off.
    pub(crate) fn load(config: &Config) -> Result<Option<ServerTls>, TlsError> {
        let Some(files) = &config.tls else {
            return Ok(None);
        };
        let dial = match files.ca {
            Some(_) => Some(Reloading::new(files.clone(), tls::peer_client_config)?),
            None => None,
        };
        Ok(Some(ServerTls {
            accept: Reloading::new(files.clone(), tls::client_port_config)?,
            admin: Arc::new(Reloading::new(files.clone(), tls::server_config)?),
            dial,
        }))
    }

    /// Whether peers must present a certificate of the cluster's CA.
    pub(crate) fn verifies_peers(&self) -> bool {
        self.dial.is_some()
    }
}

/// State shared by the tasks of one beacon.
pub(crate) struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) driver: DriverHandle,
    /// Where peers' links hand the driver what they hear.
    pub(crate) peers: PeerHandle,
    /// Our latest heartbeat, for handshakes.
    pub(crate) current: watch::Receiver<Greeting>,
    pub(crate) shutdown: CancellationToken,
    /// One per peer: woken when that peer dials us, so that our own link to it, if down,
    /// retries at once instead of after its backoff (a restarted peer rejoins in a round
    /// trip, not in up to a tick). Peers come and go with the membership.
    pub(crate) peer_up: std::sync::Mutex<HashMap<SocketAddr, Arc<Notify>>>,
    /// The protocol version each peer spoke in its last handshake, either way: a change of
    /// membership waits until every member speaks one that carries it.
    pub(crate) peer_versions: std::sync::Mutex<HashMap<SocketAddr, u32>>,
    /// `None`: plain TCP.
    pub(crate) tls: Option<ServerTls>,
    pub(crate) metrics: Arc<super::metrics::Metrics>,
    /// Refused requests since the last warning about them.
    pub(crate) refusals: super::refusals::Requests,
    /// Refused connections since the last warning about them.
    pub(crate) refused_conns: super::refusals::Connections,
    /// Where each peer's admin API is, as its handshake said.
    pub(crate) peer_admin: std::sync::Mutex<HashMap<SocketAddr, String>>,
    /// Who may connect, and as what: `config.auth` at start, replaced when the tokens are
    /// reloaded (see `reload`).
    pub(crate) auth: arc_swap::ArcSwap<crate::auth::AuthConfig>,
    /// The beacon list as `ip:port`, as answers carry it.
    pub(crate) beacon_names: Vec<String>,
    /// The connections that carry our gRPC clients' calls to the leader.
    pub(crate) relays: super::relay::pool::Relays,
    /// The follower's linearizable reads, sharing their requests for the leader's read index.
    pub(crate) read_batch: super::read_batch::ReadBatch<crate::pb::ReadIndexReply>,
    /// The leader's connections to its followers, which it asks to vouch for its reads.
    pub(crate) vouchers: super::relay::pool::Relays,
    /// The leader's linearizable reads, sharing their questions to the followers: the term
    /// a follower vouched for.
    pub(crate) vouch_batch: super::read_batch::ReadBatch<u64>,
    /// The runtime of the core's thread, once it runs: the links to peers are served there
    /// ([`Shared::on_core`]).
    pub(crate) core_runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    /// The gRPC edge's standard services (health, reflection).
    pub(crate) grpc: super::grpc::standard::Standard,
    /// What this beacon's clients may have under way (key `limits`).
    pub(crate) admission: Arc<super::admission::Admission>,
}

impl Shared {
    /// Runs `work` on the core's own thread (`core_runtime`) and gives back what it ends
    /// with: the links to peers are read and written there, so that a message between the
    /// core and a socket wakes no other thread. Before the core's thread runs, `work` runs
    /// here. `None` when the core's thread is gone (shutting down).
    pub(crate) async fn on_core<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        use tracing::Instrument;
        match self.core_runtime.get() {
            Some(core) => core.spawn(work.in_current_span()).await.ok(),
            None => Some(work.await),
        }
    }

    /// What wakes our link to `peer` when it dials us.
    pub(crate) fn peer_up(&self, peer: SocketAddr) -> Arc<Notify> {
        let mut known = self.peer_up.lock().unwrap_or_else(|e| e.into_inner());
        known.entry(peer).or_default().clone()
    }

    /// Notes the protocol version `peer` spoke in a handshake.
    pub(crate) fn note_peer_version(&self, peer: SocketAddr, version: u32) {
        let mut known = self.peer_versions.lock().unwrap_or_else(|e| e.into_inner());
        known.insert(peer, version);
    }

    /// The members among `peers` known to speak a protocol older than `version`.
    pub(crate) fn older_than(&self, peers: &[SocketAddr], version: u32) -> Vec<(SocketAddr, u32)> {
        let known = self.peer_versions.lock().unwrap_or_else(|e| e.into_inner());
        peers
            .iter()
            .filter_map(|p| known.get(p).filter(|v| **v < version).map(|v| (*p, *v)))
            .collect()
    }

    /// Notes where `peer` serves its admin API (empty: it serves none).
    pub(crate) fn note_peer_admin(&self, peer: SocketAddr, url: &str) {
        let mut known = self.peer_admin.lock().unwrap_or_else(|e| e.into_inner());
        if url.is_empty() {
            known.remove(&peer);
        } else {
            known.insert(peer, url.to_owned());
        }
    }

    /// The core's status, read off the driver's task.
    pub(crate) async fn core_status(
        &self,
    ) -> Result<crate::pb::BeaconStatus, crate::machines::handle::Reject> {
        let config = self.config.clone();
        let mut status = self
            .driver
            .read(move |core, now| super::driver::status_of(&config, core, now))
            .await?;
        let beat = &self.metrics.beat;
        status.step_gap_worst_ms = beat.worst_step_gap().as_millis() as u64;
        status.queue_wait_worst_ms = beat.worst_queue_wait().as_millis() as u64;
        Ok(status)
    }

    /// The core's status, with where each beacon's admin API is: what `show beacon` and the
    /// status page show.
    pub(crate) async fn status(
        &self,
    ) -> Result<crate::pb::BeaconStatus, crate::machines::handle::Reject> {
        let mut status = self.core_status().await?;
        let known = self.peer_admin.lock().unwrap_or_else(|e| e.into_inner());
        for entry in &mut status.beacons {
            entry.admin = if entry.is_self {
                self.config.admin_url()
            } else {
                entry
                    .node
                    .parse()
                    .ok()
                    .and_then(|node: SocketAddr| known.get(&node).cloned())
            };
        }
        Ok(status)
    }

    /// What request handlers have at hand, for a request from `identity` whose reads are
    /// `consistency`; `new_work`: it is not a renewal or a status read, and its writes pass
    /// the core's gate.
    pub(crate) fn ctx<'a>(
        &'a self,
        identity: Option<&'a crate::auth::Identity>,
        consistency: Consistency,
        new_work: bool,
    ) -> Ctx<'a> {
        Ctx {
            node: self.config.node,
            beacons: &self.beacon_names,
            sections: &self.config.machines,
            driver: &self.driver,
            identity,
            consistency,
            linearize: self,
            new_work,
        }
    }

    /// The read index a linearizable read of `part` (the whole state with `None`) waits
    /// for: this beacon's own when it leads, else its leader's, asked over the relay
    /// connection (while no leader can give one, it waits up to [`LEADER_WAIT`] for an
    /// election), lowered to the last entry that changed the part when the leader says so.
    async fn read_index_for_read(
        &self,
        leader: Option<SocketAddr>,
        part: Option<usize>,
    ) -> Result<u64, Reject> {
        let needs = |r: Reject| Reject {
            msg: format!(
                "{}; a linearizable read needs a leader that a majority confirms (`--consistency serializable` reads this beacon's replica as it is)",
                r.msg
            ),
            ..r
        };
        // A cluster that is electing (no leader known, or the leader still taking over)
        // usually has a leader within a few ticks: wait for one, as writes do, rather than
        // refuse a read just after a start or a failover. So does a read whose leader cannot
        // be reached (killed a moment ago, before this beacon noticed): the next leader is
        // asked once this beacon knows it.
        let electing = tokio::time::Instant::now() + LEADER_WAIT;
        let mut known = leader;
        loop {
            let leader = match known.take() {
                Some(leader) => Some(leader),
                None => match self.driver.read_index(None).await {
                    Ok(index) => return Ok(index),
                    Err(r) if r.code == ErrorCode::NotLeader as u32 && r.leader.is_some() => {
                        r.leader
                    }
                    Err(r) => {
                        self.wait_or_refuse(r, electing).await.map_err(needs)?;
                        continue;
                    }
                },
            };
            let leader = leader.expect("a leader to ask");
            let asked = std::time::Instant::now();
            match self
                .read_batch
                .read_index(leader, || self.leader_read_index(leader))
                .await
            {
                Ok(answer) => {
                    self.metrics
                        .read_index_took(super::metrics::ReadIndexVia::Leader, asked.elapsed());
                    return Ok(crate::machines::machine_index(
                        part,
                        answer.index,
                        &answer.machines,
                    ));
                }
                Err(r) => self.wait_or_refuse(r, electing).await.map_err(needs)?,
            }
        }
    }

    /// After a read index was refused with `refused`: waits a moment when a leader may be
    /// found by `until` (no leader yet, the leader unreachable or moved), else gives the
    /// refusal back. NO_QUORUM is refused at once: a beacon that sees no majority is not
    /// about to see a leader, and the caller may rather ask another beacon.
    async fn wait_or_refuse(
        &self,
        refused: Reject,
        until: tokio::time::Instant,
    ) -> Result<(), Reject> {
        let waits = [
            ErrorCode::NotLeader,
            ErrorCode::Unavailable,
            ErrorCode::LeaderChanged,
        ]
        .iter()
        .any(|c| *c as u32 == refused.code);
        if !waits || tokio::time::Instant::now() >= until || self.shutdown.is_cancelled() {
            return Err(refused);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Ok(())
    }

    /// Hands the leadership to `to` (or the beacon furthest along), as
    /// [`DriverHandle::transfer`](super::driver::DriverHandle::transfer) does, waiting up to
    /// [`LEADER_WAIT`] for a leader still taking over its state: one that took the leadership
    /// a moment ago (by the last transfer, as a rolling restart moves it from machine to
    /// machine) serves within a round trip and a store, and a transfer asked meanwhile would
    /// otherwise be refused. Nothing was started by a refused one, so asking again is safe.
    pub(crate) async fn transfer(
        &self,
        to: Option<SocketAddr>,
    ) -> Result<Result<SocketAddr, crate::consensus::TransferError>, Reject> {
        use crate::consensus::{ConsensusError, TransferError};
        let until = tokio::time::Instant::now() + LEADER_WAIT;
        loop {
            match self.driver.transfer(to).await? {
                Err(TransferError::Consensus(ConsensusError::NotReady))
                    if tokio::time::Instant::now() < until && !self.shutdown.is_cancelled() =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                done => return Ok(done),
            }
        }
    }

    /// `leader`'s read index, asked over the relay connection to it, saying (when this
    /// beacon follows it) in which term: that counts as this beacon's confirmation of the
    /// leadership (see [`crate::consensus::Input::ReadIndex`]). Asked now, after every read
    /// it serves arrived.
    async fn leader_read_index(
        &self,
        leader: SocketAddr,
    ) -> Result<crate::pb::ReadIndexReply, Reject> {
        let request = match self.driver.follows() {
            Some((l, term)) if l == leader => crate::pb::ReadIndexRequest {
                asker: self.config.node.to_string(),
                term,
            },
            _ => crate::pb::ReadIndexRequest::default(),
        };
        let body = prost::Message::encode_to_vec(&request);
        let asked = self.relays.ask(
            self,
            leader,
            None,
            Cmd::ReadIndex.code(),
            body.into(),
            false,
        );
        let (_, answer) = tokio::time::timeout(READ_WAIT, asked).await.map_err(|_| {
            Reject::new(
                ErrorCode::Unavailable,
                format!(
                    "the leader {leader} did not give its read index within {} ms",
                    READ_WAIT.as_millis()
                ),
            )
        })??;
        if answer.is_error() {
            let e: crate::pb::ErrorReply = answer.decode()?;
            return Err(Reject {
                code: e.code,
                msg: format!("the leader {leader}: {}", e.msg),
                close: false,
                leader: e.leader.parse().ok(),
                retry_after_ms: e.retry_after_ms,
            });
        }
        Ok(answer.decode()?)
    }
}

/// How long a linearizable read waits for a leader that can give a read index (an election
/// under way), before it is refused.
pub(crate) const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

pub(crate) use crate::machines::handle::READ_WAIT;

impl Linearize for Shared {
    fn linearize(
        &self,
        leader: Option<SocketAddr>,
        part: Option<usize>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, Reject>> + Send + '_>> {
        Box::pin(self.read_index_for_read(leader, part))
    }

    fn confirm_leading(
        &self,
        term: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Reject>> + Send + '_>> {
        Box::pin(async move {
            let asked = std::time::Instant::now();
            let me = self.config.node;
            // Asked here first so that a leader of five, which needs a round, does not
            // queue its reads one by one through the batch to learn it.
            if self.driver.vouch_wanted().is_some()
                && let Ok(vouched) = self.vouch_batch.read_index(me, || self.vouched()).await
                && vouched == term
            {
                self.metrics
                    .read_index_took(super::metrics::ReadIndexVia::Vouch, asked.elapsed());
                return Ok(());
            }
            // No follower's word (five voters, none would vouch, or none answered in time):
            // a round, which says why when it fails too.
            self.driver.read_index(None).await.map(drop)
        })
    }
}

/// How long a leader waits for a follower's word on its reads before it runs a round
/// instead: a follower that answers at all answers within a round trip between two
/// connection tasks; one that hung (or whose answers are cut off) is passed over.
const VOUCH_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

impl Shared {
    /// Asks this leader's voting followers, now (after every read the answer serves
    /// arrived), whether they follow it in its term: the term, once the first says so
    /// ([`crate::consensus::Vouch`]). Refused when a round is needed instead.
    async fn vouched(&self) -> Result<u64, Reject> {
        use futures_util::StreamExt;
        let Some(wanted) = self.driver.vouch_wanted() else {
            return Err(Reject::new(
                ErrorCode::Unavailable,
                "no follower's word makes a majority here: a round is needed",
            ));
        };
        let body: bytes::Bytes = prost::Message::encode_to_vec(&crate::pb::VouchRequest {
            leader: self.config.node.to_string(),
            term: wanted.term,
        })
        .into();
        let mut asks: futures_util::stream::FuturesUnordered<_> = wanted
            .voters
            .iter()
            .map(|&voter| {
                let body = body.clone();
                async move {
                    let (_, answer) = self
                        .vouchers
                        .ask(self, voter, None, Cmd::Vouch.code(), body, false)
                        .await?;
                    if answer.is_error() {
                        let e: crate::pb::ErrorReply = answer.decode()?;
                        return Err(Reject::new(e.code, format!("{voter}: {}", e.msg)));
                    }
                    let vouched: crate::pb::VouchReply = answer.decode()?;
                    Ok(vouched.term)
                }
            })
            .collect();
        let first_word = async {
            let mut refused = None;
            while let Some(answer) = asks.next().await {
                match answer {
                    Ok(term) if term == wanted.term => return Ok(term),
                    Ok(other) => {
                        refused = Some(Reject::new(
                            ErrorCode::LeaderChanged,
                            format!("a follower vouched for term {other}, not {}", wanted.term),
                        ))
                    }
                    Err(r) => refused = Some(r),
                }
            }
            Err(refused
                .unwrap_or_else(|| Reject::new(ErrorCode::Unavailable, "no follower to ask")))
        };
        tokio::time::timeout(VOUCH_WAIT, first_word)
            .await
            .unwrap_or_else(|_| {
                Err(Reject::new(
                    ErrorCode::Unavailable,
                    format!("no follower vouched within {} ms", VOUCH_WAIT.as_millis()),
                ))
            })
    }
}
