//! Work assignment's client calls: on a [`Cluster`] (the leader, followed across failovers)
//! add, delete, rebalance and release; on a [`Client`] (one beacon) the list; and
//! [`Assignments`], a service's own assignments followed.

mod assignments;

pub use assignments::{AssignmentEvent, Assignments};

use std::collections::BTreeMap;

use super::wire::AssignCmd as Cmd;
use crate::client::{Client, ClientError, Cluster};
use crate::pb::assign as pb;

impl Client {
    /// The resources this beacon holds, of one node type (`""`: all).
    pub async fn resources(&mut self, node_type: &str) -> Result<pb::ResourcesReply, ClientError> {
        let req = pb::ResourcesRequest {
            node_type: node_type.to_owned(),
        };
        self.request(Cmd::List, &req, "the resources request").await
    }
}

impl Cluster {
    /// Adds a resource (idempotent by name); returns it with its holder, if one was eligible.
    pub async fn add_resource(
        &mut self,
        name: &str,
        node_type: &str,
        weight: u32,
        labels: BTreeMap<String, String>,
    ) -> Result<pb::ResourceInfo, ClientError> {
        let req = pb::AddResource {
            name: name.to_owned(),
            node_type: node_type.to_owned(),
            weight,
            labels: labels.into_iter().collect(),
        };
        let reply: pb::ResourceReply = self.call(Cmd::Add, &req, "the resource add").await?;
        Ok(reply.resource.unwrap_or_default())
    }

    /// Deletes a resource (idempotent); returns it as it was, if it existed.
    pub async fn delete_resource(
        &mut self,
        name: &str,
    ) -> Result<Option<pb::ResourceInfo>, ClientError> {
        let req = pb::DeleteResource {
            name: name.to_owned(),
        };
        let reply: pb::ResourceReply = self.call(Cmd::Delete, &req, "the resource delete").await?;
        Ok(reply.resource)
    }

    /// Begins moving resources of `node_type` (`""`: every type) from the most to the least
    /// loaded services; each holder is asked to let go first.
    pub async fn rebalance(&mut self, node_type: &str) -> Result<Vec<pb::Move>, ClientError> {
        let req = pb::Rebalance {
            node_type: node_type.to_owned(),
        };
        let reply: pb::RebalanceReply = self.call(Cmd::Rebalance, &req, "the rebalance").await?;
        Ok(reply.moves)
    }

    /// The holder of `name`, whose assignment has fencing token `(term, index)`, lets it go;
    /// returns the resource with its next holder.
    pub async fn release_resource(
        &mut self,
        name: &str,
        term: u64,
        index: u64,
    ) -> Result<pb::ResourceInfo, ClientError> {
        let req = pb::Release {
            name: name.to_owned(),
            term,
            index,
        };
        let reply: pb::ResourceReply = self.call(Cmd::Release, &req, "the release").await?;
        Ok(reply.resource.unwrap_or_default())
    }
}
