//! A watch's first answer when the set is large: the leader copies the registrations as of
//! one log index (on the core thread: a pointer per page of IDs, see [`IdMap`]), and the
//! watcher's connection picks out what the watch follows and turns it into pages of about
//! [`PAGE_BYTES`] as it sends them, so that a registry of any size can be watched (one frame
//! could not carry a million registrations), a listing costs the core neither the scan nor
//! the encoding, and a herd of watchers that list again at once holds a page each, not a
//! registry each. The first page, which goes in the answer, is picked on the core thread
//! from at most [`FIRST_PAGE_LOOKS`] registrations: a watch of a type few have, among ten
//! million, scanned them all there (190 ms, enough for the peers to count the leader gone).

use std::sync::Arc;

use bytes::Bytes;

use super::id_slots::IdMap;
use super::state::{NodeId, NodeRecord};
use super::wire::record_to_pb;
use crate::machines::watchers::Pages;
use crate::pb::registry as pb;

/// About how many bytes one page of a listing holds.
pub const PAGE_BYTES: usize = 128 << 10;

/// Most registrations the first page looks at (on the core thread); the rest are looked at
/// by the watcher's connection.
pub const FIRST_PAGE_LOOKS: usize = 1 << 16;

/// Most registrations a later page looks at: the connection's task holds its runtime
/// thread while it looks (some 20 ms for this many), so a watch of a rare type among ten
/// million gets a few empty pages rather than one scan of them all.
pub const PAGE_LOOKS: usize = 1 << 20;

/// The registrations a watch follows as of log index `index`, paged.
pub(crate) struct NodePages {
    /// Every registration as of `index` (sharing the state's pages).
    nodes: IdMap<Arc<NodeRecord>>,
    follows: Box<dyn Fn(&NodeRecord) -> bool + Send>,
    /// The next ID to look at; `None` once every one was.
    next: Option<NodeId>,
    index: u64,
}

impl NodePages {
    pub(crate) fn new(
        nodes: IdMap<Arc<NodeRecord>>,
        follows: impl Fn(&NodeRecord) -> bool + Send + 'static,
        index: u64,
    ) -> NodePages {
        NodePages {
            nodes,
            follows: Box::new(follows),
            next: Some(0),
            index,
        }
    }

    /// The first page's registrations, from at most [`FIRST_PAGE_LOOKS`] looked at (a
    /// short or empty page when few of those are followed).
    pub(crate) fn take_first_page(&mut self) -> Vec<pb::NodeInfo> {
        self.take_page(FIRST_PAGE_LOOKS)
    }

    /// The next page's registrations, from at most `looks` looked at.
    fn take_page(&mut self, looks: usize) -> Vec<pb::NodeInfo> {
        let Some(from) = self.next else {
            return Vec::new();
        };
        let mut bytes = 0;
        let mut page = Vec::new();
        self.next = None;
        for (looked, (id, r)) in self.nodes.range_from(from).enumerate() {
            if (!page.is_empty() && bytes >= PAGE_BYTES) || looked == looks {
                self.next = Some(id);
                break;
            }
            if (self.follows)(r) {
                // About what the record takes encoded: its strings and a few dozen bytes
                // more.
                bytes += r.metadata.len() + r.node_type.len() + r.owner.len() + 64;
                page.push(record_to_pb(r));
            }
        }
        page
    }

    /// Whether registrations are left to look at.
    pub(crate) fn more(&self) -> bool {
        self.next.is_some()
    }
}

impl Pages for NodePages {
    /// A page of what is left (empty when none of the registrations it looked at is
    /// followed; the last says the listing is over).
    fn next_page(&mut self) -> Option<Bytes> {
        if !self.more() {
            return None;
        }
        let add_nodes = self.take_page(PAGE_LOOKS);
        let notice = pb::NodeNotice {
            index: self.index,
            add_nodes,
            listing: true,
            more: self.more(),
            ..Default::default()
        };
        Some(Bytes::from(prost::Message::encode_to_vec(&notice)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u32, metadata_bytes: usize) -> Arc<NodeRecord> {
        Arc::new(NodeRecord {
            node_id: id,
            node_type: "LOGIC".into(),
            addr: std::net::SocketAddr::from((
                [10, (id >> 16) as u8, (id >> 8) as u8, id as u8],
                1,
            )),
            access_addr: None,
            worker_num: 0,
            metadata: "x".repeat(metadata_bytes).into(),
            registered_ms: 0,
            term: 1,
            index: u64::from(id),
            owner: "".into(),
            health: None,
        })
    }

    fn map(records: impl Iterator<Item = Arc<NodeRecord>>) -> IdMap<Arc<NodeRecord>> {
        records.map(|r| (r.node_id, r)).collect()
    }

    #[test]
    fn a_large_listing_goes_in_pages_of_about_128_kib_each_once() {
        let items = map((1..=3000).map(|i| record(i, 900)));
        let mut pages = NodePages::new(items, |_| true, 77);
        let first = pages.take_first_page();
        assert!((125..=150).contains(&first.len()), "{}", first.len());
        let mut seen: Vec<u32> = first.iter().map(|n| n.node_id).collect();
        while let Some(body) = pages.next_page() {
            assert!(body.len() <= PAGE_BYTES + 4096, "{}", body.len());
            let notice: pb::NodeNotice = prost::Message::decode(body).unwrap();
            assert!(notice.listing && notice.index == 77);
            assert_eq!(notice.more, pages.more());
            seen.extend(notice.add_nodes.iter().map(|n| n.node_id));
        }
        assert_eq!(
            seen,
            (1..=3000).collect::<Vec<_>>(),
            "every one once, in order"
        );
        // A small set is one page: nothing follows the first answer.
        let mut small = NodePages::new(map((1..=10).map(|i| record(i, 10))), |_| true, 1);
        assert_eq!(small.take_first_page().len(), 10);
        assert!(!small.more() && small.next_page().is_none());
    }

    /// A watch of what few registrations are looks at no more than its share on the core
    /// thread: the first page is short (here empty), the connection looks at the rest, and
    /// the last page says the listing is over.
    #[test]
    fn a_rare_type_is_found_past_the_first_pages_looks() {
        // None among the first page's looks nor the next page's; some among the rest.
        let none_before = (FIRST_PAGE_LOOKS + PAGE_LOOKS) as u32;
        let n = none_before + PAGE_LOOKS as u32 + 10;
        let rare = |id: u32| id > none_before && id % 1000 == 7;
        let items = map((1..=n).map(|i| {
            let mut r = (*record(i, 0)).clone();
            if rare(i) {
                r.node_type = "RARE".into();
            }
            Arc::new(r)
        }));
        let mut pages = NodePages::new(items, |r| r.node_type == "RARE", 5);
        assert!(pages.take_first_page().is_empty());
        assert!(pages.more(), "the rest is left to look at");
        let mut seen = Vec::new();
        let mut last_more = true;
        let mut empty = 0;
        while let Some(body) = pages.next_page() {
            let notice: pb::NodeNotice = prost::Message::decode(body).unwrap();
            assert!(notice.listing && notice.index == 5);
            seen.extend(notice.add_nodes.iter().map(|n| n.node_id));
            empty += usize::from(notice.add_nodes.is_empty() && notice.more);
            last_more = notice.more;
        }
        assert!(!last_more, "the last page says it is the last");
        assert_eq!(
            empty, 1,
            "a page's looks found none: an empty page, more to come"
        );
        assert_eq!(seen, (1..=n).filter(|i| rare(*i)).collect::<Vec<_>>());
    }
}
