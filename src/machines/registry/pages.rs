//! A watch's first answer when the set is large: the leader lists pointers to the
//! registrations as of one log index (on the core thread, a few nanoseconds each), and the
//! watcher's connection turns them into pages of about [`PAGE_BYTES`] as it sends them, so
//! that a registry of any size can be watched (one frame could not carry a million
//! registrations), a listing costs the core no encoding, and a herd of watchers that list
//! again at once holds a page each, not a registry each.

use std::sync::Arc;

use bytes::Bytes;

use super::state::NodeRecord;
use super::wire::record_to_pb;
use crate::machines::watchers::Pages;
use crate::pb::registry as pb;

/// About how many bytes one page of a listing holds.
pub const PAGE_BYTES: usize = 128 << 10;

/// The registrations of a listing as of log index `index`, paged.
pub(crate) struct NodePages {
    items: Vec<Arc<NodeRecord>>,
    next: usize,
    index: u64,
}

impl NodePages {
    pub(crate) fn new(items: Vec<Arc<NodeRecord>>, index: u64) -> NodePages {
        NodePages {
            items,
            next: 0,
            index,
        }
    }

    /// The next page's registrations (none after the last).
    pub(crate) fn take_page(&mut self) -> Vec<pb::NodeInfo> {
        let mut bytes = 0;
        let mut page = Vec::new();
        while let Some(r) = self.items.get(self.next) {
            if !page.is_empty() && bytes >= PAGE_BYTES {
                break;
            }
            // About what the record takes encoded: its strings and a few dozen bytes more.
            bytes += r.metadata.len() + r.node_type.len() + r.owner.len() + 64;
            page.push(record_to_pb(r));
            self.next += 1;
        }
        page
    }

    /// Whether pages are left.
    pub(crate) fn more(&self) -> bool {
        self.next < self.items.len()
    }
}

impl Pages for NodePages {
    fn next_page(&mut self) -> Option<Bytes> {
        if !self.more() {
            return None;
        }
        let add_nodes = self.take_page();
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
            addr: format!("10.0.{}.{}:1", id / 256, id % 256).parse().unwrap(),
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

    #[test]
    fn a_large_listing_goes_in_pages_of_about_128_kib_each_once() {
        let items: Vec<_> = (1..=3000).map(|i| record(i, 900)).collect();
        let mut pages = NodePages::new(items, 77);
        let first = pages.take_page();
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
        let mut small = NodePages::new((1..=10).map(|i| record(i, 10)).collect(), 1);
        assert_eq!(small.take_page().len(), 10);
        assert!(!small.more() && small.next_page().is_none());
    }
}
