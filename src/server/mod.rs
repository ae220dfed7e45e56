//! The beacon daemon: binds its sockets, runs the driver, the peer links, the inbound
//! connections and the admin HTTP API, and shuts them all down on request.

mod admin;
pub mod admission;
mod backup;
mod beat;
mod conn;
mod dispatch;
mod dns;
mod driver;
mod framed;
pub(crate) mod grpc;
mod heard;
mod history;
pub mod join;
mod leaders;
mod load;
mod metrics;
mod peer;
mod read_batch;
mod refusals;
mod relay;
mod reload;
mod shared;

pub use crate::data_dir::identity_of;
pub use load::{LoadError, StartOptions};

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, error, error_span, info, warn};

use crate::config::Config;
use driver::Driver;
use load::Loaded;
use shared::Shared;

/// How long shutdown waits for connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Queued messages per peer link. Each carries entries the peer lacks; one that does not fit
/// is resent on the leader's next tick, so the queue only needs to absorb a burst of writes.
const LINK_QUEUE: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("key `tls`: {0}")]
    Tls(#[from] crate::transport::tls::TlsError),
    #[error("cannot listen on {addr} (key `{key}`): {cause}")]
    Bind {
        key: &'static str,
        addr: SocketAddr,
        cause: std::io::Error,
    },
}

/// How long a lone voter waits to serve before it lets clients in anyway (they are then
/// told to retry, as at any leader taking over).
const LONE_READY_WAIT: Duration = Duration::from_secs(2);

/// A beacon whose sockets are bound and whose stored state is loaded, ready to run.
pub struct Server {
    config: Arc<Config>,
    tls: Option<shared::ServerTls>,
    listener: TcpListener,
    admin: Option<TcpListener>,
    dns: Option<dns::Listeners>,
    loaded: Loaded,
}

impl Server {
    /// Loads the stored state and binds the cluster and admin listeners, so every start-up
    /// error surfaces here, before anything runs.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        Server::bind_with(config, StartOptions::default()).await
    }

    /// [`Server::bind`] with start options (`--adopt-config`).
    pub async fn bind_with(
        mut config: Config,
        options: StartOptions,
    ) -> Result<Server, ServerError> {
        let loaded = load::load(&config, options)?;
        // The stored membership, not the configured lists, is whom this beacon links with
        // and what its handshake names.
        config.beacons = loaded.members.voters.iter().copied().collect();
        config.learners = loaded.members.learners.iter().copied().collect();
        let tls = shared::ServerTls::load(&config)?;
        let bind = |key, addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|cause| ServerError::Bind { key, addr, cause })
        };
        let listener = bind("node", config.node).await?;
        let admin = match config.admin {
            Some(addr) => Some(bind("admin", addr).await?),
            None => None,
        };
        let dns = match config.dns {
            Some(addr) => {
                Some(
                    dns::Listeners::bind(addr)
                        .await
                        .map_err(|cause| ServerError::Bind {
                            key: "dns",
                            addr,
                            cause,
                        })?,
                )
            }
            None => None,
        };
        Ok(Server {
            config: Arc::new(config),
            tls,
            listener,
            admin,
            dns,
            loaded,
        })
    }

    /// The admin HTTP address actually bound, if enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The DNS address actually bound, if enabled.
    pub fn dns_addr(&self) -> Option<SocketAddr> {
        self.dns.as_ref().and_then(|d| d.local_addr())
    }

    /// Runs until `shutdown` completes, then stops gracefully: no new connections, tasks
    /// finish, sockets close (peers notice at once and re-elect if we led).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let config = self.config.clone();
        // Identity spans are error-level so that they are kept under any RUST_LOG filter:
        // a warning without the beacon's identity is hard to place in a cluster's logs.
        let span = error_span!("beacon", node = %config.node, cluster = %config.cluster);
        self.serve(shutdown).instrument(span).await
    }

    async fn serve(self, shutdown: impl Future<Output = ()>) {
        let Server {
            config,
            tls,
            listener,
            admin,
            dns,
            loaded,
        } = self;
        info!(
            beacons = ?config.beacons,
            learners = ?config.learners,
            tick_ms = config.tick_ms,
            mode = %config.mode,
            data_dir = %loaded.data_dir.path().display(),
            term = loaded.stored_term,
            "beacon starting"
        );
        if !config.node.ip().is_loopback() && config.tls.is_none() && !config.auth.enabled() {
            warn!(
                "open: this beacon listens on {} with neither TLS nor authentication (keys `tls`, `auth`); anyone who reaches the port can register, unregister and read everything",
                config.node
            );
        }
        let peers_verified = config.tls.as_ref().is_some_and(|t| t.ca.is_some());
        if config.members().len() > 1 && !peers_verified && config.auth.peer_token.is_none() {
            warn!(
                "peers are not authenticated: any process that reaches {} can join as a beacon and claim the leadership; give every beacon the same auth.peer_token (or TLS with tls.ca)",
                config.node
            );
        }
        for note in &config.resolved {
            info!("{note}");
        }
        for (warning, notice) in &loaded.notices {
            if *warning {
                warn!("{notice}");
            } else {
                info!("{notice}");
            }
        }
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();

        let mut link_rxs = Vec::new();
        let mut links = HashMap::new();
        for peer in config.members().into_iter().filter(|b| *b != config.node) {
            let (tx, rx) = mpsc::channel(LINK_QUEUE);
            links.insert(peer, tx);
            link_rxs.push((peer, rx));
        }
        let watchers = Arc::new(crate::machines::watchers::Watchers::new(config.watch.queue));
        let admission = admission::Admission::new(config.limits);
        let metrics = Arc::new(metrics::Metrics::new(
            crate::VERSION,
            config.mode.as_str(),
            watchers,
            admission.clone(),
        ));
        metrics.is_learner.set(i64::from(config.is_learner()));
        let (mut driver, handle, peers, current) = Driver::new(
            config.clone(),
            loaded,
            links,
            metrics.clone(),
            admission.gate(),
        );
        let peer_up = link_rxs
            .iter()
            .map(|(peer, _)| (*peer, Arc::new(Notify::new())))
            .collect::<HashMap<_, _>>()
            .into();
        let shared = Arc::new(Shared {
            config: config.clone(),
            driver: handle.clone(),
            peers,
            current,
            shutdown: token.clone(),
            peer_up,
            peer_versions: Default::default(),
            tls,
            metrics: metrics.clone(),
            refusals: Default::default(),
            refused_conns: Default::default(),
            peer_admin: Default::default(),
            auth: arc_swap::ArcSwap::from_pointee(config.auth.clone()),
            beacon_names: config.beacon_names(),
            relays: Default::default(),
            read_batch: Default::default(),
            vouchers: relay::pool::Relays::to_followers(),
            vouch_batch: Default::default(),
            core_runtime: Default::default(),
            grpc: grpc::standard::Standard::new(),
            admission,
        });
        if config.auth.enabled() {
            tracker.spawn(reload::run(shared.clone(), token.clone()).in_current_span());
        }

        {
            // Opened from the core's thread, run here with every other connection.
            let (shared, tracker) = (shared.clone(), tracker.clone());
            let edges = tokio::runtime::Handle::current();
            driver.open_links_with(Box::new(move |peer| {
                let (tx, rx) = mpsc::channel(LINK_QUEUE);
                let span = error_span!("link", %peer);
                tracker.spawn_on(peer::run(peer, shared.clone(), rx).instrument(span), &edges);
                tx
            }));
        }
        match driver.spawn_core(token.clone(), &tracker) {
            Ok(core) => {
                let _ = shared.core_runtime.set(core);
            }
            Err(e) => {
                error!("cannot start the core's thread: {e}");
                token.cancel();
            }
        }
        tracker.spawn(grpc::report_health(shared.clone()).in_current_span());
        tracker.spawn(relay::follow_leader(shared.clone()).in_current_span());
        for (peer, rx) in link_rxs {
            let span = error_span!("link", %peer);
            tracker.spawn(peer::run(peer, shared.clone(), rx).instrument(span));
        }
        if let Some(admin) = admin {
            match admin.local_addr() {
                Ok(addr) => info!(%addr, "admin HTTP API listening"),
                Err(e) => warn!("admin HTTP API listening (address unknown: {e})"),
            }
            let tls = shared.tls.as_ref().map(|t| t.admin.clone());
            let state = admin::AdminState {
                shared: shared.clone(),
            };
            tracker.spawn(admin::serve(admin, tls, state, token.clone()).in_current_span());
        }
        if let Some(dns) = dns {
            let (shared, tracker_, token) = (shared.clone(), tracker.clone(), token.clone());
            tracker.spawn(dns::serve(dns, shared, tracker_, token).in_current_span());
        }
        // A lone voter leads at once: its first steps take over its own state. Its first
        // client is let in once that is done, so that nobody is told to retry a beacon that
        // answers alone.
        if config.beacons == [config.node] && config.learners.is_empty() {
            let deadline = tokio::time::Instant::now() + LONE_READY_WAIT;
            while !shared.driver.serving() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        info!(addr = %config.node, "listening for beacons and clients");

        tokio::select! {
            _ = accept_loop(&listener, &shared, &tracker) => {}
            _ = shutdown => info!("shutdown requested"),
            // The driver stops the beacon when it can no longer store its state.
            _ = token.cancelled() => {}
        }
        drop(listener);
        token.cancel();
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
            .await
            .is_err()
        {
            warn!("some tasks did not stop within {SHUTDOWN_GRACE:?}; exiting anyway");
        }
        info!("beacon stopped");
    }
}

async fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, tracker: &TaskTracker) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let span = error_span!("conn", %remote);
                tracker.spawn(conn::accept(stream, remote, shared.clone()).instrument(span));
            }
            Err(e) => {
                // Typically out of file descriptors: wait instead of spinning.
                error!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Binds and runs a beacon until `shutdown` completes.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    Server::bind(config).await?.run(shutdown).await;
    Ok(())
}
