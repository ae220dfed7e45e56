//! What the tasks of one beacon share: the configuration, the driver's handle, our latest
//! heartbeat for handshakes, the shutdown signal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::handle::{Ctx, DriverHandle, Greeting};
use crate::config::Config;

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
}

impl Shared {
    /// What request handlers have at hand.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            config: &self.config,
            driver: &self.driver,
        }
    }
}
