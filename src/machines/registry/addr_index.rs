//! The registry's index from a live registration's address to its node ID.
//!
//! A map from address to ID held each address a second time (32 bytes, in buckets that
//! round up to a power of two: about 74 bytes per registration at a million, on every
//! beacon), and growing it rehashed every address: every beacon applies the same entries,
//! so all of them grew their map at the same entry (the 917,505th registration), on the same
//! two cores, long enough for a leader change. This table holds each ID with 32 bits of its
//! address's hash (8 bytes, about 19 per registration at a million), reads the address from
//! the record only when those bits match, and grows from the stored bits alone.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::Arc;

use hashbrown::HashTable;

use super::state::{NodeId, NodeRecord};

/// The registrations the index reads addresses from.
pub(super) type Nodes = BTreeMap<NodeId, Arc<NodeRecord>>;

#[derive(Debug, Clone, Default)]
pub(super) struct AddrIndex {
    /// (ID, 32 bits of its address's hash).
    ids: HashTable<(NodeId, u32)>,
    hasher: RandomState,
}

/// The table's hash from the 32 bits kept: multiplied out over 64 bits, so that the bits
/// the table indexes by and the bits it tags with both vary.
fn spread(bits: u32) -> u64 {
    u64::from(bits).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl AddrIndex {
    /// The index of every registration of `nodes`.
    pub(super) fn of(nodes: &Nodes) -> AddrIndex {
        let mut index = AddrIndex::default();
        index.ids.reserve(nodes.len(), |(_, bits)| spread(*bits));
        for record in nodes.values() {
            index.insert(record.addr, record.node_id);
        }
        index
    }

    fn bits(&self, addr: SocketAddr) -> u32 {
        let h = self.hasher.hash_one(addr);
        (h >> 32) as u32 ^ h as u32
    }

    /// The ID registered at `addr`.
    pub(super) fn get(&self, addr: SocketAddr, nodes: &Nodes) -> Option<NodeId> {
        let bits = self.bits(addr);
        self.ids
            .find(spread(bits), |(id, b)| {
                *b == bits && nodes.get(id).is_some_and(|r| r.addr == addr)
            })
            .map(|(id, _)| *id)
    }

    /// Indexes `id` at `addr`. The caller has checked that no other registration holds
    /// `addr`.
    pub(super) fn insert(&mut self, addr: SocketAddr, id: NodeId) {
        let bits = self.bits(addr);
        self.ids
            .insert_unique(spread(bits), (id, bits), |(_, b)| spread(*b));
    }

    /// Forgets `id`, registered at `addr`.
    pub(super) fn remove(&mut self, addr: SocketAddr, id: NodeId) {
        let bits = self.bits(addr);
        if let Ok(entry) = self.ids.find_entry(spread(bits), |(x, _)| *x == id) {
            entry.remove();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: NodeId, port: u16) -> Arc<NodeRecord> {
        Arc::new(NodeRecord {
            node_id: id,
            node_type: "LOGIC".into(),
            addr: SocketAddr::from(([10, 0, 0, 1], port)),
            access_addr: None,
            worker_num: 0,
            metadata: String::new(),
            registered_ms: 0,
            term: 1,
            index: u64::from(id),
            owner: String::new(),
        })
    }

    #[test]
    fn finds_by_address_through_growth_and_forgets_what_is_removed() {
        let mut nodes = Nodes::new();
        let mut index = AddrIndex::default();
        // Enough to grow the table several times.
        for id in 1..=5_000 {
            let r = record(id, 10_000 + id as u16);
            nodes.insert(id, r.clone());
            index.insert(r.addr, id);
        }
        for id in [1, 777, 5_000] {
            let addr = SocketAddr::from(([10, 0, 0, 1], 10_000 + id as u16));
            assert_eq!(index.get(addr, &nodes), Some(id));
        }
        let other = SocketAddr::from(([10, 0, 0, 2], 10_001));
        assert_eq!(index.get(other, &nodes), None, "same port, other host");
        let gone = nodes.remove(&777).unwrap();
        index.remove(gone.addr, 777);
        assert_eq!(index.get(gone.addr, &nodes), None);
        assert_eq!(index.len(), 4_999);
        // Rebuilt from the registrations alone, it answers the same.
        let rebuilt = AddrIndex::of(&nodes);
        assert_eq!(rebuilt.len(), 4_999);
        for (id, r) in &nodes {
            assert_eq!(rebuilt.get(r.addr, &nodes), Some(*id));
        }
    }
}
