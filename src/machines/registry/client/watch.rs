//! Following the nodes of some types.
//!
//! The leader answers a watch with the current set and then pushes one notice per committed
//! change, each with its log index. When leadership moves or the connection breaks, [`Watch`]
//! resumes at the next leader from the index after the last one it heard: every change
//! once, in order, none missed and none twice. Only when that beacon no longer keeps changes
//! that old (`COMPACTED`: the watch was away longer than `watch.history` covers) does it list
//! the set again and turn the difference between what it knew and the new set into events
//! (changes that cancelled out meanwhile, such as a node that came and went, are then not
//! seen).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::super::state::HealthFilter;
use super::super::wire::{RegistryCmd, filter_to_pb};
use crate::net::{ClientError, Cluster, ConnectOptions, Heard, Listing, Notice, Resuming};
use crate::pb::registry as pb;

/// One change to the set of nodes followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Added(pb::NodeInfo),
    Updated(pb::NodeInfo),
    Removed(pb::NodeInfo),
}

impl WatchEvent {
    pub fn node(&self) -> &pb::NodeInfo {
        match self {
            WatchEvent::Added(n) | WatchEvent::Updated(n) | WatchEvent::Removed(n) => n,
        }
    }
}

/// A watch on the nodes of some types (all types when none are given). A service usually
/// starts one with [`super::Registration::watch_subscriptions`].
pub struct Watch {
    /// The stream at the leader: the log index heard through, resumed after it.
    stream: Resuming<pb::WatchRequest>,
    known: BTreeMap<u32, pb::NodeInfo>,
    pending: VecDeque<WatchEvent>,
    /// Began at a log index rather than from a listing: `known` holds only the nodes heard
    /// of since, so a removal of one never heard of is still told.
    partial: bool,
}

impl Listing for pb::WatchReply {
    type Item = pb::NodeInfo;
    fn index(&self) -> u64 {
        self.index
    }
    fn items(self) -> Vec<pb::NodeInfo> {
        self.nodes
    }
    fn more(&self) -> bool {
        self.more
    }
    fn page(body: bytes::Bytes) -> Option<(Vec<pb::NodeInfo>, bool)> {
        let notice: pb::NodeNotice = prost::Message::decode(body).ok()?;
        notice.listing.then_some((notice.add_nodes, notice.more))
    }
}

impl Notice for pb::NodeNotice {
    fn index(&self) -> u64 {
        self.index
    }
}

impl Watch {
    /// Starts watching the registrations of `types` that are in rotation (passing or
    /// warning, not draining) at the leader of the cluster reached through `beacons`.
    /// [`Watch::nodes`] then holds the current set; one that goes critical or is drained
    /// comes as removed, and as added when it is back.
    pub async fn start(
        beacons: Vec<String>,
        types: Vec<String>,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<Watch, ClientError> {
        Watch::start_with(beacons, types, HealthFilter::Serving, connect, retry_for).await
    }

    /// Like [`Watch::start`], following the registrations `health` admits
    /// ([`HealthFilter::Any`]: every one, whatever its health).
    pub async fn start_with(
        beacons: Vec<String>,
        types: Vec<String>,
        health: HealthFilter,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<Watch, ClientError> {
        let cluster = Cluster::new(beacons, connect, retry_for);
        let mut watch = Watch::new(cluster, types, health, false);
        let initial = watch.stream.open::<pb::WatchReply>(0).await?;
        watch.known = initial.into_iter().map(|n| (n.node_id, n)).collect();
        Ok(watch)
    }

    /// Starts watching `types` from log index `from` (inclusive): no listing, every change
    /// from that index on (a service that kept the index of the last change it handled
    /// picks up there). Refused `COMPACTED` when the leader no longer keeps changes that old.
    pub async fn resume(
        beacons: Vec<String>,
        types: Vec<String>,
        health: HealthFilter,
        from: u64,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<Watch, ClientError> {
        let cluster = Cluster::new(beacons, connect, retry_for);
        let mut watch = Watch::new(cluster, types, health, true);
        watch.stream.open::<pb::WatchReply>(from.max(1)).await?;
        Ok(watch)
    }

    /// A watch not yet subscribed.
    fn new(cluster: Cluster, types: Vec<String>, health: HealthFilter, partial: bool) -> Watch {
        let request = pb::WatchRequest {
            node_types: types,
            start_index: 0,
            health: filter_to_pb(health).into(),
        };
        Watch {
            stream: Resuming::new(
                cluster,
                request,
                |r, from| r.start_index = from,
                RegistryCmd::Watch,
                RegistryCmd::NodeNotice,
                "the watch request",
            ),
            known: BTreeMap::new(),
            pending: VecDeque::new(),
            partial,
        }
    }

    /// The log index the watch has heard through (changes and progress notices): the known
    /// set is the state as of it.
    pub fn index(&self) -> u64 {
        self.stream.index()
    }

    /// How many times the watch resumed from its index (a new leader, a broken connection).
    pub fn resumes(&self) -> u64 {
        self.stream.resumes()
    }

    /// The nodes currently known, by node ID.
    pub fn nodes(&self) -> impl Iterator<Item = &pb::NodeInfo> {
        self.known.values()
    }

    /// How many times the watch had to list the set again (its index was compacted at
    /// the beacon it resumed with).
    pub fn resyncs(&self) -> u64 {
        self.stream.resyncs()
    }

    /// The next change. Waits as long as nothing changes; rides out failovers for up to the
    /// `retry_for` given at the start, then fails.
    pub async fn next(&mut self) -> Result<WatchEvent, ClientError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            match self.stream.next::<pb::WatchReply, pb::NodeNotice>().await? {
                Heard::Notice(notice) => self.apply(notice),
                Heard::Relisted(fresh) => self.resync(fresh),
            }
        }
    }

    fn apply(&mut self, notice: pb::NodeNotice) {
        for n in notice.add_nodes {
            if self.known.get(&n.node_id) != Some(&n) {
                self.known.insert(n.node_id, n.clone());
                self.pending.push_back(WatchEvent::Added(n));
            }
        }
        for n in notice.update_nodes {
            if self.known.get(&n.node_id) != Some(&n) {
                self.known.insert(n.node_id, n.clone());
                self.pending.push_back(WatchEvent::Updated(n));
            }
        }
        for n in notice.del_nodes {
            if self.known.remove(&n.node_id).is_some() || self.partial {
                self.pending.push_back(WatchEvent::Removed(n));
            }
        }
    }

    /// Turns the difference between the known set and `fresh` into events.
    fn resync(&mut self, fresh: Vec<pb::NodeInfo>) {
        let fresh: BTreeMap<u32, pb::NodeInfo> =
            fresh.into_iter().map(|n| (n.node_id, n)).collect();
        for (id, old) in &self.known {
            match fresh.get(id) {
                None => self.pending.push_back(WatchEvent::Removed(old.clone())),
                Some(new) if new.addr != old.addr || new.node_type != old.node_type => {
                    // The ID changed hands: its old holder is gone, a new one came.
                    self.pending.push_back(WatchEvent::Removed(old.clone()));
                    self.pending.push_back(WatchEvent::Added(new.clone()));
                }
                Some(new) if new != old => self.pending.push_back(WatchEvent::Updated(new.clone())),
                Some(_) => {}
            }
        }
        for (id, new) in &fresh {
            if !self.known.contains_key(id) {
                self.pending.push_back(WatchEvent::Added(new.clone()));
            }
        }
        self.known = fresh;
        self.partial = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u32, port: u16, metadata: &str) -> pb::NodeInfo {
        pb::NodeInfo {
            node_id: id,
            node_type: "LOGIC".into(),
            addr: format!("10.0.0.1:{port}"),
            metadata: metadata.into(),
            ..Default::default()
        }
    }

    fn watch(known: Vec<pb::NodeInfo>) -> Watch {
        let cluster = Cluster::new(vec![], ConnectOptions::default(), Duration::ZERO);
        let mut w = Watch::new(cluster, vec![], HealthFilter::Any, false);
        w.known = known.into_iter().map(|n| (n.node_id, n)).collect();
        w
    }

    /// A service runs its watch in a task of its own: the futures must be `Send`.
    #[test]
    fn a_watch_runs_in_a_spawned_task() {
        fn send<T: Send>(_: &T) {}
        let start = Watch::start(vec![], vec![], ConnectOptions::default(), Duration::ZERO);
        send(&start);
        let mut w = watch(vec![]);
        send(&w.next());
    }

    #[test]
    fn notices_become_events_once() {
        let mut w = watch(vec![node(1, 1, "")]);
        let notice = pb::NodeNotice {
            index: 5,
            add_nodes: vec![node(2, 2, ""), node(1, 1, "")],
            del_nodes: vec![node(3, 3, "")],
            ..Default::default()
        };
        w.apply(notice);
        assert_eq!(
            w.pending.drain(..).collect::<Vec<_>>(),
            vec![WatchEvent::Added(node(2, 2, ""))],
            "already-known node 1 and unknown node 3 produce nothing"
        );
    }

    #[test]
    fn a_resync_reports_only_the_difference() {
        let mut w = watch(vec![node(1, 1, ""), node(2, 2, ""), node(3, 3, "")]);
        w.resync(vec![
            node(1, 1, ""),
            node(2, 2, r#"{"v":2}"#),
            node(3, 9, ""),
            node(4, 4, ""),
        ]);
        assert_eq!(
            w.pending.drain(..).collect::<Vec<_>>(),
            vec![
                WatchEvent::Updated(node(2, 2, r#"{"v":2}"#)),
                WatchEvent::Removed(node(3, 3, "")),
                WatchEvent::Added(node(3, 9, "")),
                WatchEvent::Added(node(4, 4, "")),
            ]
        );
        assert_eq!(w.nodes().count(), 4);
    }
}
