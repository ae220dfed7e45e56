//! Following config documents, and a service's effective configuration.
//!
//! The leader answers a watch with the documents followed and then pushes one notice per
//! committed write that changed one of them, at the write's revision. When leadership moves
//! or the connection breaks, [`ConfigWatch`] resumes at the next leader from the revision
//! after the last one it heard: every change once, in order. Only when that beacon no
//! longer keeps changes that old (`COMPACTED`) does it list the documents again and turn the
//! difference into one event.
//!
//! A service follows the documents that concern it with [`ConfigWatch::for_service`]:
//! [`ConfigWatch::effective`] is then its effective configuration (node over type over
//! cluster), current as of [`ConfigWatch::index`], and [`ConfigWatch::next`] waits for the
//! next change. Since a watch starts with a listing, a service that starts after a write
//! still gets it: nothing is pushed and forgotten.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use super::super::wire::ConfigCmd as Cmd;
use crate::net::{ClientError, Cluster, ConnectOptions, Heard, Listing, Notice, Resuming};
use crate::pb::configs as pb;

/// One committed write's changes to the documents followed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigEvent {
    /// The write's revision (its log index).
    pub index: u64,
    /// The documents written, as they are now.
    pub put: Vec<pb::Document>,
    /// The keys deleted.
    pub deleted: Vec<String>,
}

/// A service's effective configuration: for each NAME, the most specific of
/// `id/NODE_ID/NAME` (its registration), `node/ADDR/NAME`, `type/TYPE/NAME` and
/// `cluster/NAME`; and the custom files (`file/NAME`, each with its path).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Effective {
    pub settings: BTreeMap<String, pb::Document>,
    pub files: BTreeMap<String, pb::Document>,
}

impl Effective {
    /// The effective configuration of `service`, from `documents` (any others are
    /// ignored).
    pub fn of<'a>(
        documents: impl IntoIterator<Item = &'a pb::Document>,
        service: &pb::ServiceScope,
    ) -> Effective {
        let type_prefix = format!("type/{}/", service.node_type);
        let node_prefix = format!("node/{}/", service.addr);
        // No registration is node ID 0: its prefix matches no key.
        let id_prefix = format!("id/{}/", service.node_id);
        let mut ranked: BTreeMap<String, (u8, &pb::Document)> = BTreeMap::new();
        let mut files = BTreeMap::new();
        for d in documents {
            let (rank, name) = if let Some(name) = d.key.strip_prefix(id_prefix.as_str()) {
                (4, name)
            } else if let Some(name) = d.key.strip_prefix(node_prefix.as_str()) {
                (3, name)
            } else if let Some(name) = d.key.strip_prefix(type_prefix.as_str()) {
                (2, name)
            } else if let Some(name) = d.key.strip_prefix("cluster/") {
                (1, name)
            } else {
                if let Some(name) = d.key.strip_prefix("file/") {
                    files.insert(name.to_owned(), d.clone());
                }
                continue;
            };
            if ranked.get(name).is_none_or(|(r, _)| *r < rank) {
                ranked.insert(name.to_owned(), (rank, d));
            }
        }
        Effective {
            settings: ranked
                .into_iter()
                .map(|(name, (_, d))| (name, d.clone()))
                .collect(),
            files,
        }
    }

    /// The value of setting `name`, if any scope sets it.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.settings.get(name).map(|d| d.value.as_slice())
    }
}

/// A watch on config documents: those under some prefixes (all when none are given), or
/// those that concern one service.
pub struct ConfigWatch {
    stream: Resuming<pb::WatchRequest>,
    known: BTreeMap<String, pb::Document>,
    pending: VecDeque<ConfigEvent>,
}

/// A watch of the documents under `prefixes`.
fn under(prefixes: Vec<String>) -> pb::WatchRequest {
    pb::WatchRequest {
        prefixes,
        ..Default::default()
    }
}

impl Listing for pb::WatchReply {
    type Item = pb::Document;
    fn index(&self) -> u64 {
        self.index
    }
    fn items(self) -> Vec<pb::Document> {
        self.documents
    }
}

impl Notice for pb::ConfigNotice {
    fn index(&self) -> u64 {
        self.index
    }
}

impl ConfigWatch {
    /// Watches the documents under `prefixes` (none: every document) at the leader of the
    /// cluster reached through `beacons`; [`ConfigWatch::documents`] then holds them.
    pub async fn start(
        beacons: Vec<String>,
        prefixes: Vec<String>,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<ConfigWatch, ClientError> {
        ConfigWatch::begin(beacons, under(prefixes), 0, connect, retry_for).await
    }

    /// Watches the documents that concern the service of type `node_type` at `addr`, with
    /// node ID `node_id` (0: none): `cluster/`, `type/TYPE/`, `node/ADDR/`, `id/NODE_ID/`
    /// and `file/`. [`ConfigWatch::effective`] is its configuration. A registered service
    /// passes its registration's beacons, type, address and node ID.
    pub async fn for_service(
        beacons: Vec<String>,
        node_type: String,
        addr: SocketAddr,
        node_id: u32,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<ConfigWatch, ClientError> {
        let request = pb::WatchRequest {
            service: Some(pb::ServiceScope {
                node_type,
                addr: addr.to_string(),
                node_id,
            }),
            ..Default::default()
        };
        ConfigWatch::begin(beacons, request, 0, connect, retry_for).await
    }

    /// Watches the documents under `prefixes` from revision `from` on (inclusive): no
    /// listing, every change from it on. Refused `COMPACTED` when the leader no longer
    /// keeps changes that old.
    pub async fn resume(
        beacons: Vec<String>,
        prefixes: Vec<String>,
        from: u64,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<ConfigWatch, ClientError> {
        ConfigWatch::begin(beacons, under(prefixes), from.max(1), connect, retry_for).await
    }

    /// A watch not opened yet.
    fn new(cluster: Cluster, request: pb::WatchRequest) -> ConfigWatch {
        ConfigWatch {
            stream: Resuming::new(
                cluster,
                request,
                |r, from| r.start_index = from,
                Cmd::Watch,
                Cmd::Notice,
                "the config watch",
            ),
            known: BTreeMap::new(),
            pending: VecDeque::new(),
        }
    }

    async fn begin(
        beacons: Vec<String>,
        request: pb::WatchRequest,
        from: u64,
        connect: ConnectOptions,
        retry_for: Duration,
    ) -> Result<ConfigWatch, ClientError> {
        let mut watch = ConfigWatch::new(Cluster::new(beacons, connect, retry_for), request);
        let listed = watch.stream.open::<pb::WatchReply>(from).await?;
        watch.known = listed.into_iter().map(|d| (d.key.clone(), d)).collect();
        Ok(watch)
    }

    /// The revision the watch has heard through: the documents known are as of it.
    pub fn index(&self) -> u64 {
        self.stream.index()
    }

    /// The documents known, by key.
    pub fn documents(&self) -> impl Iterator<Item = &pb::Document> {
        self.known.values()
    }

    /// The effective configuration of the service watched (see [`Effective`]); on a watch
    /// of prefixes, that of no service: the cluster's settings and the files.
    pub fn effective(&self) -> Effective {
        let service = self.stream.request().service.clone().unwrap_or_default();
        Effective::of(self.known.values(), &service)
    }

    /// How many times the watch resumed from its revision (a new leader, a broken
    /// connection).
    pub fn resumes(&self) -> u64 {
        self.stream.resumes()
    }

    /// How many times it had to list the documents again (its revision was compacted).
    pub fn resyncs(&self) -> u64 {
        self.stream.resyncs()
    }

    /// The next change. Waits as long as nothing changes; rides out failovers for up to the
    /// `retry_for` given at the start, then fails.
    pub async fn next(&mut self) -> Result<ConfigEvent, ClientError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            match self
                .stream
                .next::<pb::WatchReply, pb::ConfigNotice>()
                .await?
            {
                Heard::Notice(notice) => self.apply(notice),
                Heard::Relisted(fresh) => self.resync(fresh),
            }
        }
    }

    fn apply(&mut self, notice: pb::ConfigNotice) {
        if notice.put.is_empty() && notice.deleted.is_empty() {
            return; // progress
        }
        for d in &notice.put {
            self.known.insert(d.key.clone(), d.clone());
        }
        for key in &notice.deleted {
            self.known.remove(key);
        }
        self.pending.push_back(ConfigEvent {
            index: notice.index,
            put: notice.put,
            deleted: notice.deleted,
        });
    }

    /// Turns the difference between the documents known and `fresh` into one event.
    fn resync(&mut self, fresh: Vec<pb::Document>) {
        let fresh: BTreeMap<String, pb::Document> =
            fresh.into_iter().map(|d| (d.key.clone(), d)).collect();
        let mut event = ConfigEvent {
            index: self.index(),
            ..Default::default()
        };
        for key in self.known.keys() {
            if !fresh.contains_key(key) {
                event.deleted.push(key.clone());
            }
        }
        for (key, d) in &fresh {
            if self.known.get(key) != Some(d) {
                event.put.push(d.clone());
            }
        }
        self.known = fresh;
        if !event.put.is_empty() || !event.deleted.is_empty() {
            self.pending.push_back(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(key: &str, value: &str, revision: u64) -> pb::Document {
        pb::Document {
            key: key.into(),
            value: value.into(),
            revision,
            ..Default::default()
        }
    }

    /// A service runs its watch in a task of its own: the futures must be `Send`.
    #[test]
    fn a_watch_runs_in_a_spawned_task() {
        fn send<T: Send>(_: &T) {}
        let start = ConfigWatch::start(vec![], vec![], ConnectOptions::default(), Duration::ZERO);
        send(&start);
        let mut w = watch(vec![]);
        send(&w.next());
    }

    #[test]
    fn the_most_specific_scope_wins() {
        let docs = [
            doc("cluster/log", "info", 1),
            doc("cluster/port", "7000", 2),
            doc("type/LOGIC/log", "debug", 3),
            doc("type/GATE/port", "9000", 4),
            doc("node/10.0.0.1:80/port", "8000", 5),
            doc("node/10.0.0.2:80/log", "trace", 6),
            doc("file/game", "[game]", 7),
            doc("id/7/log", "off", 8),
        ];
        let scope = |node_type: &str, addr: &str, node_id| pb::ServiceScope {
            node_type: node_type.into(),
            addr: addr.into(),
            node_id,
        };
        let e = Effective::of(&docs, &scope("LOGIC", "10.0.0.1:80", 0));
        assert_eq!(e.get("log"), Some(&b"debug"[..]), "type over cluster");
        assert_eq!(e.get("port"), Some(&b"8000"[..]), "node over cluster");
        assert_eq!(e.settings.len(), 2);
        assert_eq!(e.files.keys().collect::<Vec<_>>(), ["game"]);
        let other = Effective::of(&docs, &scope("GATE", "10.0.0.2:80", 0));
        assert_eq!(other.get("log"), Some(&b"trace"[..]));
        assert_eq!(other.get("port"), Some(&b"9000"[..]));
        let registration = Effective::of(&docs, &scope("GATE", "10.0.0.2:80", 7));
        assert_eq!(
            registration.get("log"),
            Some(&b"off"[..]),
            "its node ID over its address"
        );
    }

    fn watch(known: Vec<pb::Document>) -> ConfigWatch {
        let cluster = Cluster::new(vec![], ConnectOptions::default(), Duration::ZERO);
        let mut w = ConfigWatch::new(cluster, pb::WatchRequest::default());
        w.known = known.into_iter().map(|d| (d.key.clone(), d)).collect();
        w
    }

    #[test]
    fn progress_tells_nothing() {
        let mut w = watch(vec![]);
        w.apply(pb::ConfigNotice {
            index: 9,
            ..Default::default()
        });
        assert_eq!(w.pending.len(), 0);
        w.apply(pb::ConfigNotice {
            index: 10,
            put: vec![doc("cluster/a", "1", 10)],
            deleted: vec![],
        });
        assert_eq!(w.pending.len(), 1);
        assert_eq!(w.documents().count(), 1);
    }

    #[test]
    fn a_resync_tells_the_difference_once() {
        let mut w = watch(vec![doc("cluster/a", "1", 2), doc("cluster/b", "1", 3)]);
        w.resync(vec![doc("cluster/a", "1", 2), doc("cluster/c", "1", 4)]);
        let event = w.pending.pop_front().expect("one event");
        assert_eq!(event.put, vec![doc("cluster/c", "1", 4)]);
        assert_eq!(event.deleted, vec!["cluster/b".to_owned()]);
        assert!(w.pending.is_empty());
        w.resync(vec![doc("cluster/a", "1", 2), doc("cluster/c", "1", 4)]);
        assert!(w.pending.is_empty(), "nothing changed: no event");
    }
}
