//! Work assignment's client calls: on a [`Cluster`] (the leader, followed across failovers)
//! add, delete, rebalance and release; on a [`Client`] (one beacon) the list; and
//! [`Assignments`], a service's own assignments followed.

mod assignments;
mod lock;

/// The codes a refusal of this machine carries ([`ClientError::is`]).
pub use super::wire::AssignErrorCode;
pub use assignments::{AssignmentEvent, Assignments};
pub use lock::{Lock, LockOptions, holder as lock_holder, lock_type};

use std::collections::BTreeMap;

use super::wire::AssignCmd as Cmd;
use crate::net::{Client, ClientError, Cluster};
use crate::pb::assign as pb;

impl Client {
    /// The slot groups this beacon holds (`""`: all), with their standbys.
    pub async fn slot_groups(&mut self, name: &str) -> Result<pb::GroupsReply, ClientError> {
        let req = pb::GroupsRequest {
            name: name.to_owned(),
            ..Default::default()
        };
        self.slot_groups_matching(&req).await
    }

    /// The slot groups `req` asks for: a page of them when `req.limit` is set (`next`
    /// continues, `total` counts them all).
    pub async fn slot_groups_matching(
        &mut self,
        req: &pb::GroupsRequest,
    ) -> Result<pb::GroupsReply, ClientError> {
        self.request(Cmd::Groups, req, "the slots request").await
    }

    /// The resources this beacon holds, of one node type (`""`: all).
    pub async fn resources(&mut self, node_type: &str) -> Result<pb::ResourcesReply, ClientError> {
        let req = pb::ResourcesRequest {
            node_type: node_type.to_owned(),
            ..Default::default()
        };
        self.resources_matching(&req).await
    }

    /// The resources `req` asks for: a page of them when `req.limit` is set (`next`
    /// continues, `total` counts them all).
    pub async fn resources_matching(
        &mut self,
        req: &pb::ResourcesRequest,
    ) -> Result<pb::ResourcesReply, ClientError> {
        self.request(Cmd::List, req, "the resources request").await
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
            ..Default::default()
        };
        self.add(req).await
    }

    /// Adds a resource bound to slot `slot` of `group`: it runs wherever that slot's holder
    /// is, and moves with the slot.
    pub async fn add_slot_resource(
        &mut self,
        name: &str,
        group: &str,
        slot: u32,
        weight: u32,
    ) -> Result<pb::ResourceInfo, ClientError> {
        let req = pb::AddResource {
            name: name.to_owned(),
            weight,
            slot_group: group.to_owned(),
            slot,
            ..Default::default()
        };
        self.add(req).await
    }

    async fn add(&mut self, req: pb::AddResource) -> Result<pb::ResourceInfo, ClientError> {
        let reply: pb::ResourceReply = self.call(Cmd::Add, &req, "the resource add").await?;
        Ok(reply.resource.unwrap_or_default())
    }

    /// Creates a slot group of `count` slots for services of `node_type` (idempotent).
    pub async fn create_slots(
        &mut self,
        name: &str,
        node_type: &str,
        count: u32,
    ) -> Result<pb::SlotGroupInfo, ClientError> {
        let req = pb::CreateGroup {
            name: name.to_owned(),
            node_type: node_type.to_owned(),
            count,
        };
        let reply: pb::GroupReply = self
            .call(Cmd::CreateGroup, &req, "the slots create")
            .await?;
        Ok(reply.group.unwrap_or_default())
    }

    /// Deletes a slot group (idempotent); returns it as it was, if it existed.
    pub async fn delete_slots(
        &mut self,
        name: &str,
    ) -> Result<Option<pb::SlotGroupInfo>, ClientError> {
        let req = pb::DeleteGroup {
            name: name.to_owned(),
        };
        let reply: pb::GroupReply = self
            .call(Cmd::DeleteGroup, &req, "the slots delete")
            .await?;
        Ok(reply.group)
    }

    /// Registration `(node_id, term, index)` claims `slot` of `group`, expecting it at
    /// `version` (compare and swap).
    pub async fn claim_slot(
        &mut self,
        group: &str,
        slot: u32,
        version: u64,
        registration: (u32, u64, u64),
    ) -> Result<pb::SlotGroupInfo, ClientError> {
        let req = pb::Claim {
            group: group.to_owned(),
            slot,
            version,
            node_id: registration.0,
            term: registration.1,
            index: registration.2,
        };
        let reply: pb::GroupReply = self.call(Cmd::Claim, &req, "the slot claim").await?;
        Ok(reply.group.unwrap_or_default())
    }

    /// The holder of slot `slot` of `group`, whose grant has fencing token `(term, index)`,
    /// lets it go; returns the group with the slot's next holder (the oldest standby in
    /// rotation, or nobody).
    pub async fn release_slot(
        &mut self,
        group: &str,
        slot: u32,
        term: u64,
        index: u64,
    ) -> Result<pb::SlotGroupInfo, ClientError> {
        let req = pb::ReleaseSlot {
            group: group.to_owned(),
            slot,
            term,
            index,
        };
        let reply: pb::GroupReply = self
            .call(Cmd::ReleaseSlot, &req, "the slot release")
            .await?;
        Ok(reply.group.unwrap_or_default())
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

    /// The resources waiting out a delay window (`assign.delay_ms`) move at the leader's
    /// next tick, of `node_type` (`""`: every type).
    pub async fn reassign_now(&mut self, node_type: &str) -> Result<(), ClientError> {
        let req = pb::Reassign {
            node_type: node_type.to_owned(),
        };
        let _: pb::RebalanceReply = self.call(Cmd::Reassign, &req, "the reassign").await?;
        Ok(())
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
