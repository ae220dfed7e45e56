//! The registry's index from a live registration's address to its node ID.
//!
//! A map from address to ID held each address a second time (32 bytes, in buckets that
//! round up to a power of two: about 74 bytes per registration at a million, on every
//! beacon), and growing it rehashed every address: every beacon applies the same entries,
//! so all of them grew their map at the same entry (the 917,505th registration), on the same
//! two cores, long enough for a leader change. This table holds each ID with 32 bits of its
//! address's hash (8 bytes, about 19 per registration at a million), reads the address from
//! the record only when those bits match, and grows from the stored bits alone.

use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;

use hashbrown::HashTable;

/// A node ID (the registry's own type, named here without importing the registry).
type NodeId = u32;

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
    /// The index of every `(address, ID)` of `live`.
    pub(super) fn of(len: usize, live: impl Iterator<Item = (SocketAddr, NodeId)>) -> AddrIndex {
        let mut index = AddrIndex::default();
        index.ids.reserve(len, |(_, bits)| spread(*bits));
        for (addr, id) in live {
            index.insert(addr, id);
        }
        index
    }

    fn bits(&self, addr: SocketAddr) -> u32 {
        let h = self.hasher.hash_one(addr);
        (h >> 32) as u32 ^ h as u32
    }

    /// The ID registered at `addr`, given where each indexed ID is registered.
    pub(super) fn get(
        &self,
        addr: SocketAddr,
        address_of: impl Fn(NodeId) -> Option<SocketAddr>,
    ) -> Option<NodeId> {
        let bits = self.bits(addr);
        self.ids
            .find(spread(bits), |(id, b)| {
                *b == bits && address_of(*id) == Some(addr)
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
    use std::collections::BTreeMap;

    /// Where each ID of `live` is registered, as the registry answers it.
    fn lookup(live: &BTreeMap<NodeId, SocketAddr>) -> impl Fn(NodeId) -> Option<SocketAddr> + '_ {
        move |id| live.get(&id).copied()
    }

    fn at(host: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, host], port))
    }

    #[test]
    fn finds_by_address_through_growth_and_forgets_what_is_removed() {
        let mut live: BTreeMap<NodeId, SocketAddr> = BTreeMap::new();
        let mut index = AddrIndex::default();
        // Enough to grow the table several times.
        for id in 1..=5_000 {
            live.insert(id, at(1, 10_000 + id as u16));
            index.insert(at(1, 10_000 + id as u16), id);
        }
        for id in [1, 777, 5_000] {
            assert_eq!(
                index.get(at(1, 10_000 + id as u16), lookup(&live)),
                Some(id)
            );
        }
        assert_eq!(
            index.get(at(2, 10_001), lookup(&live)),
            None,
            "same port, other host"
        );
        let gone = live.remove(&777).unwrap();
        index.remove(gone, 777);
        assert_eq!(index.get(gone, lookup(&live)), None);
        assert_eq!(index.len(), 4_999);
        // Rebuilt from the registrations alone, it answers the same.
        let rebuilt = AddrIndex::of(live.len(), live.iter().map(|(id, addr)| (*addr, *id)));
        assert_eq!(rebuilt.len(), 4_999);
        for (id, addr) in &live {
            assert_eq!(rebuilt.get(*addr, lookup(&live)), Some(*id));
        }
    }
}
