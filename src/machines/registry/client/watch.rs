//! Following the nodes of some types.
//!
//! The leader answers a watch with the current set and then pushes one notice per committed
//! change. When leadership moves, the old leader ends the watch; [`Watch`] then watches again
//! at the new leader and turns the difference between what it knew and the new set into
//! events, so the service sees each change once: never once per beacon, never twice after a
//! failover. (Changes that cancel out during the failover, such as a node that came and went,
//! are not seen at all.)

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::client::{Client, ClientError, Cluster, ConnectOptions};
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
    cluster: Cluster,
    types: Vec<String>,
    conn: Option<Client>,
    known: BTreeMap<u32, pb::NodeInfo>,
    pending: VecDeque<WatchEvent>,
    /// Times the watch had to be re-established at a new leader.
    resyncs: u64,
}

impl Watch {
    /// Starts watching `types` at the leader of the cluster reached through `beacons`.
    /// [`Watch::nodes`] then holds the current set.
    pub async fn start(
        beacons: Vec<String>,
        types: Vec<String>,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<Watch, ClientError> {
        let mut watch = Watch {
            cluster: Cluster::new(beacons, connect, retry_for),
            types,
            conn: None,
            known: BTreeMap::new(),
            pending: VecDeque::new(),
            resyncs: 0,
        };
        let initial = watch.subscribe().await?;
        watch.known = initial.into_iter().map(|n| (n.node_id, n)).collect();
        Ok(watch)
    }

    /// The nodes currently known, by node ID.
    pub fn nodes(&self) -> impl Iterator<Item = &pb::NodeInfo> {
        self.known.values()
    }

    /// How many times the watch moved to a new leader.
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// Watches at the leader; returns the set it reports.
    async fn subscribe(&mut self) -> Result<Vec<pb::NodeInfo>, ClientError> {
        let types = self.types.clone();
        let (conn, reply) = self
            .cluster
            .start_stream("the watch request", async |c| c.watch(&types).await)
            .await?;
        self.conn = Some(conn);
        Ok(reply.nodes)
    }

    /// The next change. Waits as long as nothing changes; rides out failovers for up to the
    /// `retry_for` given at the start, then fails.
    pub async fn next(&mut self) -> Result<WatchEvent, ClientError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            let notice = match self.conn.as_mut() {
                Some(conn) => conn.next_notice().await,
                None => Err(ClientError::Closed {
                    addr: String::new(),
                }),
            };
            match notice {
                Ok(notice) => self.apply(notice),
                Err(e) if e.is_retryable() => {
                    self.conn = None;
                    let fresh = self.subscribe().await?;
                    self.resyncs += 1;
                    self.resync(fresh);
                }
                Err(e) => return Err(e),
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
            if self.known.remove(&n.node_id).is_some() {
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
        Watch {
            cluster: Cluster::new(vec![], ConnectOptions::default(), Duration::ZERO),
            types: vec![],
            conn: None,
            known: known.into_iter().map(|n| (n.node_id, n)).collect(),
            pending: VecDeque::new(),
            resyncs: 0,
        }
    }

    #[test]
    fn notices_become_events_once() {
        let mut w = watch(vec![node(1, 1, "")]);
        let notice = pb::NodeNotice {
            index: 5,
            add_nodes: vec![node(2, 2, ""), node(1, 1, "")],
            del_nodes: vec![node(3, 3, "")],
            update_nodes: vec![],
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
