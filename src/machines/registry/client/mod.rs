//! The registry's client API.
//!
//! - The registry's calls on a [`Client`]: `register`, `report`, `unregister`, `nodes`,
//!   `ids`, `subscriptions`, `watch` and `next_notice`.
//! - [`Registration`]: a service's registration, kept alive in the background, with a signal
//!   when its lease is lost so the service stops using its node ID.
//! - [`Watch`]: the nodes of some types, then every change, resynchronised across failovers.
//! - [`checks`]: health checks run beside the service ([`Registration::run_checks`]).

pub mod checks;
mod registration;
mod watch;

/// The codes a refusal of this machine carries ([`ClientError::is`]).
pub use super::wire::RegistryErrorCode;
pub use checks::Check;
pub use registration::{ClockShare, LeaseLost, REPORTS_PER_LEASE, RegisterOptions, Registration};
pub use watch::{Watch, WatchEvent};

/// A registration's health status and the health filter of a discovery watch.
pub use super::state::{HealthFilter, Status as HealthStatus};

use super::wire::RegistryCmd as Cmd;
use crate::net::{Client, ClientError};
use crate::pb::registry as pb;
use crate::wire::Code;

impl Client {
    /// Registers a service (leader only).
    pub async fn register(
        &mut self,
        req: &pb::RegisterRequest,
    ) -> Result<pb::RegisterReply, ClientError> {
        self.request(Cmd::Register, req, "the registration").await
    }

    /// Reports a service's load, renewing its lease (leader only).
    pub async fn report(
        &mut self,
        req: &pb::NodeReport,
    ) -> Result<pb::NodeReportReply, ClientError> {
        self.request(Cmd::NodeReport, req, "the node report").await
    }

    /// Ends a registration (leader only).
    pub async fn unregister(
        &mut self,
        req: &pb::UnregisterRequest,
    ) -> Result<pb::UnregisterReply, ClientError> {
        self.request(Cmd::Unregister, req, "the unregistration")
            .await
    }

    /// The registrations this beacon holds, optionally of one type and one address.
    pub async fn nodes(
        &mut self,
        node_type: &str,
        addr: &str,
    ) -> Result<pb::NodesReply, ClientError> {
        let req = pb::NodesRequest {
            node_type: node_type.to_owned(),
            addr: addr.to_owned(),
            ..Default::default()
        };
        self.nodes_matching(&req).await
    }

    /// The registrations this beacon holds that match `req` (type, address, node ID), a page
    /// of them when `req.limit` is set (`next_node_id` continues, `total` counts them all).
    pub async fn nodes_matching(
        &mut self,
        req: &pb::NodesRequest,
    ) -> Result<pb::NodesReply, ClientError> {
        self.request(Cmd::Nodes, req, "the nodes request").await
    }

    /// Sets a registration's health or drains it (leader only; role admin): answered with
    /// the registration once the change is committed.
    pub async fn set_health(
        &mut self,
        req: &pb::SetHealthRequest,
    ) -> Result<pb::SetHealthReply, ClientError> {
        self.request(Cmd::SetHealth, req, "the health change").await
    }

    /// The node-ID allocator as this beacon sees it.
    pub async fn ids(&mut self) -> Result<pb::IdsReply, ClientError> {
        self.request(Cmd::Ids, &pb::IdsRequest {}, "the ids request")
            .await
    }

    /// The configured subscriptions, optionally of one type.
    pub async fn subscriptions(
        &mut self,
        node_type: &str,
    ) -> Result<pb::SubscriptionsReply, ClientError> {
        let req = pb::SubscriptionsRequest {
            node_type: node_type.to_owned(),
        };
        self.request(Cmd::Subscriptions, &req, "the subscriptions request")
            .await
    }

    /// Starts a watch on this connection (leader only): the current nodes of `types`;
    /// then [`Client::next_notice`] yields every change.
    pub async fn watch(&mut self, types: &[String]) -> Result<pb::WatchReply, ClientError> {
        self.watch_from(types, 0).await
    }

    /// Starts a watch that resumes at log index `from` (inclusive; 0: from the current set,
    /// as [`Client::watch`]): every change from it on follows, or the beacon refuses with
    /// `COMPACTED` when it no longer holds changes that old.
    pub async fn watch_from(
        &mut self,
        types: &[String],
        from: u64,
    ) -> Result<pb::WatchReply, ClientError> {
        let req = pb::WatchRequest {
            node_types: types.to_vec(),
            start_index: from,
            ..Default::default()
        };
        self.request(Cmd::Watch, &req, "the watch request").await
    }

    /// Waits for the next notice of a watch started with [`Client::watch`] (no timeout: a
    /// quiet cluster sends none). Ends with an error when the beacon ends the watch (it
    /// stopped leading) or the connection fails.
    pub async fn next_notice(&mut self) -> Result<pb::NodeNotice, ClientError> {
        let frame = self.next_pushed("the watch").await?;
        if frame.cmd != Cmd::NodeNotice.code() {
            return Err(ClientError::Mismatch {
                addr: self.addr().to_owned(),
                sent: Cmd::Watch.code(),
                sent_seq: 0,
                got: frame.cmd,
                got_seq: frame.seq,
            });
        }
        self.decode(&frame)
    }
}
