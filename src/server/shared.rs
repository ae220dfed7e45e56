//! What the tasks of one beacon share: the configuration, the driver's handle, our latest
//! heartbeat for handshakes, the shutdown signal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::handle::{Ctx, DriverHandle, Greeting};
use crate::config::Config;
use crate::transport::tls::{self, Reloading, TlsError};

/// A beacon's TLS: what it accepts connections with, and (with a CA, as every beacon of a
/// cluster of more than one has) what it dials its peers with.
pub(crate) struct ServerTls {
    /// Shared with the admin HTTP API, which is served over TLS too.
    pub(crate) accept: Arc<Reloading<rustls::ServerConfig>>,
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
            accept: Arc::new(Reloading::new(files.clone(), tls::server_config)?),
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
    /// Our latest heartbeat, for handshakes.
    pub(crate) current: watch::Receiver<Greeting>,
    pub(crate) shutdown: CancellationToken,
    /// One per peer: woken when that peer dials us, so that our own link to it, if down,
    /// retries at once instead of after its backoff (a restarted peer rejoins in a round
    /// trip, not in up to a tick).
    pub(crate) peer_up: HashMap<SocketAddr, Arc<Notify>>,
    /// `None`: plain TCP.
    pub(crate) tls: Option<ServerTls>,
    pub(crate) metrics: Arc<super::metrics::Metrics>,
    /// Refused requests since the last warning about them.
    pub(crate) refusals: super::conn::Refusals,
    /// Where each peer's admin API is, as its handshake said.
    pub(crate) peer_admin: std::sync::Mutex<HashMap<SocketAddr, String>>,
}

impl Shared {
    /// Notes where `peer` serves its admin API (empty: it serves none).
    pub(crate) fn note_peer_admin(&self, peer: SocketAddr, url: &str) {
        let mut known = self.peer_admin.lock().unwrap_or_else(|e| e.into_inner());
        if url.is_empty() {
            known.remove(&peer);
        } else {
            known.insert(peer, url.to_owned());
        }
    }

    /// The core's status, with where each beacon's admin API is: what `show beacon` and the
    /// status page show.
    pub(crate) async fn status(&self) -> Result<crate::pb::BeaconStatus, super::handle::Reject> {
        let mut status = self.driver.status().await?;
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

    /// What request handlers have at hand, for a request from `identity`.
    pub(crate) fn ctx<'a>(&'a self, identity: Option<&'a crate::auth::Identity>) -> Ctx<'a> {
        Ctx {
            config: &self.config,
            driver: &self.driver,
            identity,
        }
    }
}
