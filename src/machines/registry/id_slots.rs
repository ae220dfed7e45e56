//! Values by node ID, in pages of consecutive IDs.
//!
//! The leader hands node IDs out in order, so the live ones are dense: a page of
//! [`PAGE`] consecutive IDs holds its values in a plain array, found by the ID's page and
//! offset. A hash map from ID to value rounded its buckets up to a power of two and stored
//! the key beside each value: 69 bytes per lease at a million, where a full page holds it
//! in 24. A page whose IDs are all gone is freed. The cost per value is 24 bytes over the
//! share of its page's IDs that are live: below about a third (a range much wider than the
//! registrations, scattered by years of churn) a map would be smaller; pages are kept short
//! so that even a lone live ID in its page costs 1.5 KB, not a large array.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A node ID (the registry's own type, named here without importing the registry).
type NodeId = u32;

/// IDs per page.
const PAGE: usize = 64;

#[derive(Debug, Clone)]
pub(super) struct IdSlots<T> {
    pages: HashMap<u32, Page<T>, BuildHasherDefault<IdHasher>>,
}

#[derive(Debug, Clone)]
struct Page<T> {
    slots: Box<[Option<T>]>,
    /// Slots holding a value: the page goes when none does.
    used: usize,
}

impl<T> Default for IdSlots<T> {
    fn default() -> Self {
        IdSlots {
            pages: HashMap::default(),
        }
    }
}

fn at(id: NodeId) -> (u32, usize) {
    (id / PAGE as u32, id as usize % PAGE)
}

impl<T> IdSlots<T> {
    pub(super) fn get(&self, id: NodeId) -> Option<&T> {
        let (page, slot) = at(id);
        self.pages.get(&page)?.slots[slot].as_ref()
    }

    pub(super) fn contains(&self, id: NodeId) -> bool {
        self.get(id).is_some()
    }

    /// `id`'s value, made by `make` if it has none.
    pub(super) fn get_or_insert_with(&mut self, id: NodeId, make: impl FnOnce() -> T) -> &mut T {
        let (page, slot) = at(id);
        let page = self.pages.entry(page).or_insert_with(|| Page {
            slots: (0..PAGE).map(|_| None).collect(),
            used: 0,
        });
        let slot = &mut page.slots[slot];
        if slot.is_none() {
            page.used += 1;
        }
        slot.get_or_insert_with(make)
    }

    pub(super) fn remove(&mut self, id: NodeId) -> Option<T> {
        let (index, slot) = at(id);
        let page = self.pages.get_mut(&index)?;
        let value = page.slots[slot].take()?;
        page.used -= 1;
        if page.used == 0 {
            self.pages.remove(&index);
        }
        Some(value)
    }

    /// Every ID with its value, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (NodeId, &T)> {
        self.pages.iter().flat_map(|(page, p)| {
            p.slots.iter().enumerate().filter_map(move |(slot, v)| {
                v.as_ref().map(|v| (page * PAGE as u32 + slot as u32, v))
            })
        })
    }

    #[cfg(test)]
    fn pages(&self) -> usize {
        self.pages.len()
    }
}

/// Fibonacci hashing of a node ID: node IDs are small integers the leader hands out itself,
/// so one multiplication hashes them well, where the default SipHash showed in profiles.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by u32 keys; kept correct for any other.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_by_id_across_pages_and_an_empty_page_is_freed() {
        let last = PAGE as NodeId - 1;
        let mut slots: IdSlots<u64> = IdSlots::default();
        for id in [0, 1, last, last + 1, 5_000_000, u32::MAX] {
            *slots.get_or_insert_with(id, || 0) += u64::from(id) + 1;
        }
        assert_eq!(slots.pages(), 4);
        assert_eq!(slots.get(last), Some(&(u64::from(last) + 1)));
        assert_eq!(slots.get(u32::MAX), Some(&(u64::from(u32::MAX) + 1)));
        assert_eq!(slots.get(2), None);
        // Made once: a second call finds it.
        assert_eq!(*slots.get_or_insert_with(1, || 99), 2);
        assert_eq!(slots.remove(last + 1), Some(u64::from(last) + 2));
        assert_eq!(slots.remove(last + 1), None, "gone already");
        assert_eq!(slots.pages(), 3, "its page held nothing else");
        assert_eq!(slots.remove(0), Some(1));
        assert_eq!(
            slots.pages(),
            3,
            "1 and the page's last still on the first page"
        );
        assert!(slots.contains(1) && !slots.contains(0));
    }

    /// Against a map, over a random schedule of inserts and removals.
    #[test]
    fn it_holds_what_a_map_would() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut slots: IdSlots<u32> = IdSlots::default();
        let mut map: std::collections::BTreeMap<NodeId, u32> = Default::default();
        for step in 0..50_000u32 {
            let id = rand(5_000) as NodeId;
            if rand(3) == 0 {
                assert_eq!(slots.remove(id), map.remove(&id), "remove {id} at {step}");
            } else {
                *slots.get_or_insert_with(id, || 0) += step;
                *map.entry(id).or_insert(0) += step;
            }
        }
        for id in 0..5_000 {
            assert_eq!(slots.get(id), map.get(&id), "{id}");
        }
    }
}
