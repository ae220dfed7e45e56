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

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A node ID (the registry's own type, named here without importing the registry).
type NodeId = u32;

/// IDs per page.
const PAGE: usize = 64;

#[derive(Debug, Clone)]
pub(super) struct IdSlots<T> {
    pages: HashMap<u32, Box<Page<T>>, BuildHasherDefault<IdHasher>>,
}

/// A page's slots and count in one allocation: its slot for an ID is found from the page's
/// address alone, with no read of a header first (a cache miss of its own when a batch of
/// renewals touches pages all over the registry).
#[derive(Debug, Clone)]
struct Page<T> {
    /// Slots holding a value: the page goes when none does.
    used: usize,
    slots: [Option<T>; PAGE],
}

impl<T> Page<T> {
    fn empty() -> Page<T> {
        Page {
            slots: std::array::from_fn(|_| None),
            used: 0,
        }
    }

    /// Takes the value of `slot`, counting it gone.
    fn take(&mut self, slot: usize) -> Option<T> {
        let value = self.slots[slot].take()?;
        self.used -= 1;
        Some(value)
    }

    /// Every ID of page `page` with its value, in order.
    fn iter(&self, page: u32) -> impl Iterator<Item = (NodeId, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(slot, v)| v.as_ref().map(|v| (page * PAGE as u32 + slot as u32, v)))
    }
}

impl<T> Default for IdSlots<T> {
    fn default() -> Self {
        IdSlots {
            pages: HashMap::default(),
        }
    }
}

/// Asks the CPU to start loading `*p` into its cache, without waiting for it or reading it
/// (no effect where there is no such instruction). A batch of renewals touches records and
/// leases scattered over memory; started for the whole batch first, their loads overlap.
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees, whatever `p` is.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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

    /// Starts loading `id`'s slot into the cache ([`prefetch`]).
    pub(super) fn prefetch(&self, id: NodeId) {
        let (page, slot) = at(id);
        if let Some(page) = self.pages.get(&page) {
            prefetch(page.slots.as_ptr().wrapping_add(slot));
        }
    }

    /// `id`'s value, made by `make` if it has none.
    pub(super) fn get_or_insert_with(&mut self, id: NodeId, make: impl FnOnce() -> T) -> &mut T {
        let (page, slot) = at(id);
        let page = self
            .pages
            .entry(page)
            .or_insert_with(|| Box::new(Page::empty()));
        let slot = &mut page.slots[slot];
        if slot.is_none() {
            page.used += 1;
        }
        slot.get_or_insert_with(make)
    }

    pub(super) fn remove(&mut self, id: NodeId) -> Option<T> {
        let (index, slot) = at(id);
        let page = self.pages.get_mut(&index)?;
        let value = page.take(slot)?;
        if page.used == 0 {
            self.pages.remove(&index);
        }
        Some(value)
    }

    /// Every ID with its value, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (NodeId, &T)> {
        self.pages.iter().flat_map(|(page, p)| p.iter(*page))
    }

    #[cfg(test)]
    fn pages(&self) -> usize {
        self.pages.len()
    }
}

/// Values by node ID in pages as [`IdSlots`], the pages in order: a map that walks its
/// IDs in order from any ID (the registry's records, which pages of results list by ID).
/// A `BTreeMap` by ID held each record's ID and pointer in nodes about half full, some 35
/// bytes a registration; a full page holds the pointer alone, and finding an ID walks a
/// tree 64 times smaller.
///
/// Pages are shared between copies and copied on their first change: a copy (a snapshot
/// of the registry, taken on the core thread to compact the log or catch a follower up)
/// costs a pointer per page, not one per value. Copying ten million record pointers took
/// the core thread some 300 ms, long enough for its peers to count the leader gone.
///
/// A page is found by hashing its number; the order of the pages is kept apart, for walks.
/// Finding a page in an ordered map searched a tree twice per renewal (its prefetch and its
/// request): 2.5% of a leader under renewals.
#[derive(Debug, Clone)]
pub struct IdMap<T> {
    pages: HashMap<u32, Arc<Page<T>>, BuildHasherDefault<IdHasher>>,
    /// The numbers of the pages in `pages`, in order.
    order: BTreeSet<u32>,
    len: usize,
}

impl<T> Default for IdMap<T> {
    fn default() -> Self {
        IdMap {
            pages: HashMap::default(),
            order: BTreeSet::new(),
            len: 0,
        }
    }
}

impl<T: PartialEq> PartialEq for IdMap<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T: Eq> Eq for IdMap<T> {}

impl<T> IdMap<T> {
    pub fn get(&self, id: NodeId) -> Option<&T> {
        let (page, slot) = at(id);
        self.pages.get(&page)?.slots[slot].as_ref()
    }

    pub fn contains_key(&self, id: NodeId) -> bool {
        self.get(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every ID with its value from `from` on, in order.
    pub fn range_from(&self, from: NodeId) -> impl Iterator<Item = (NodeId, &T)> {
        let (first, _) = at(from);
        self.walk(self.order.range(first..))
            .skip_while(move |(id, _)| *id < from)
    }

    /// Every ID with its value, in order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &T)> {
        self.walk(self.order.iter())
    }

    /// The values of the pages numbered by `pages`, in that order.
    fn walk<'a>(
        &'a self,
        pages: impl Iterator<Item = &'a u32> + 'a,
    ) -> impl Iterator<Item = (NodeId, &'a T)> + 'a {
        pages.flat_map(|page| self.pages[page].iter(*page))
    }

    /// Every ID, in order.
    pub fn keys(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.iter().map(|(id, _)| id)
    }

    /// Every value, in the order of its ID.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, v)| v)
    }
}

impl<T: Clone> IdMap<T> {
    /// Sets `id`'s value; returns the one it replaced.
    pub fn insert(&mut self, id: NodeId, value: T) -> Option<T> {
        let (page, slot) = at(id);
        let page = Arc::make_mut(self.pages.entry(page).or_insert_with(|| {
            self.order.insert(page);
            Arc::new(Page::empty())
        }));
        let old = page.slots[slot].replace(value);
        if old.is_none() {
            page.used += 1;
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, id: NodeId) -> Option<T> {
        let (index, slot) = at(id);
        let shared = self.pages.get_mut(&index)?;
        shared.slots[slot].as_ref()?;
        let page = Arc::make_mut(shared);
        let value = page.take(slot)?;
        self.len -= 1;
        if page.used == 0 {
            self.pages.remove(&index);
            self.order.remove(&index);
        }
        Some(value)
    }
}

impl<T: Clone> FromIterator<(NodeId, T)> for IdMap<T> {
    fn from_iter<I: IntoIterator<Item = (NodeId, T)>>(items: I) -> Self {
        let mut map = IdMap::default();
        for (id, value) in items {
            map.insert(id, value);
        }
        map
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

/// Draws below `n` from a xorshift sequence started at `seed`: the random schedules the
/// tests of these maps and of the leases run against plain maps.
#[cfg(test)]
pub(super) fn draws(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
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

    /// Against an ordered map, over a random schedule of inserts and removals: the same
    /// values, the same order from any ID, the same count; and a copy taken along the way
    /// (which shares its pages) keeps what it held while the original changes.
    #[test]
    fn an_id_map_holds_and_walks_what_an_ordered_map_would() {
        let mut rand = draws(0x2545_F491_4F6C_DD1Du64);
        let mut ids: IdMap<u32> = IdMap::default();
        let mut map: std::collections::BTreeMap<NodeId, u32> = Default::default();
        let mut copies = Vec::new();
        for step in 0..50_000u32 {
            if step % 7_000 == 0 {
                copies.push((ids.clone(), map.clone()));
            }
            let id = rand(5_000) as NodeId;
            if rand(3) == 0 {
                assert_eq!(ids.remove(id), map.remove(&id), "remove {id} at {step}");
            } else {
                assert_eq!(ids.insert(id, step), map.insert(id, step), "insert {id}");
            }
            assert_eq!(ids.len(), map.len());
            if step % 5_000 == 0 {
                let from = rand(5_100) as NodeId;
                let walked: Vec<_> = ids.range_from(from).map(|(i, v)| (i, *v)).collect();
                let expected: Vec<_> = map.range(from..).map(|(i, v)| (*i, *v)).collect();
                assert_eq!(walked, expected, "from {from} at {step}");
            }
        }
        assert!(
            ids.iter()
                .map(|(i, v)| (i, *v))
                .eq(map.iter().map(|(i, v)| (*i, *v)))
        );
        assert!(ids.keys().eq(map.keys().copied()));
        let rebuilt: IdMap<u32> = map.iter().map(|(i, v)| (*i, *v)).collect();
        assert!(rebuilt.values().eq(map.values()));
        assert_eq!(ids.is_empty(), map.is_empty());
        assert_eq!(ids.get(u32::MAX), None);
        assert_eq!(copies.len(), 8);
        for (copy, then) in &copies {
            assert_eq!(copy.len(), then.len());
            assert!(
                copy.iter()
                    .map(|(i, v)| (i, *v))
                    .eq(then.iter().map(|(i, v)| (*i, *v))),
                "a copy keeps what it held"
            );
        }
        assert_eq!(ids.order.len(), ids.pages.len(), "every page in order once");
        assert_ne!(&copies[7].0, &ids, "the original moved on");
        assert_eq!(ids.clone(), ids);
    }

    /// Against a map, over a random schedule of inserts and removals.
    #[test]
    fn it_holds_what_a_map_would() {
        let mut rand = draws(0x9E37_79B9_7F4A_7C15u64);
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
