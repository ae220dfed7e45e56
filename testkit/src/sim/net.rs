//! The simulated network: which directed links are cut or slow, when a message sent now
//! arrives, and the queue of everything in flight.
//!
//! A link is one direction between two endpoints. A cut link drops everything; a slow one
//! delivers seconds late but in order (TCP under heavy loss). Other links lose, duplicate,
//! delay and, if the seed says so, reorder messages. Shapes that real networks take are
//! built here: symmetric splits, one-way cuts, rings (each beacon hears only its two
//! neighbours) and bridges (two sides joined by one beacon that hears both).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use beacon::time::Millis;

use crate::rng::SimRng as Rng;

/// How links behave when they are not cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditions {
    /// Chance a message is lost.
    pub loss: f64,
    /// Chance a message arrives twice.
    pub dup: f64,
    /// Messages take `1..=max_delay` ms.
    pub max_delay: u64,
    /// Messages on one link may overtake each other.
    pub reorder: bool,
}

impl Conditions {
    /// A quiet network: every message arrives within 2 ms, in order.
    pub fn quiet() -> Conditions {
        Conditions {
            loss: 0.0,
            dup: 0.0,
            max_delay: 2,
            reorder: false,
        }
    }
}

/// The state of every directed link between endpoints `K`.
#[derive(Debug, Clone)]
pub struct Links<K> {
    cut: BTreeSet<(K, K)>,
    slow: BTreeMap<(K, K), Millis>,
    /// Latest arrival per link, to keep a link in order.
    clock: BTreeMap<(K, K), Millis>,
}

impl<K: Ord + Copy> Default for Links<K> {
    fn default() -> Self {
        Links {
            cut: BTreeSet::new(),
            slow: BTreeMap::new(),
            clock: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Copy + std::fmt::Debug> Links<K> {
    pub fn is_cut(&self, from: K, to: K) -> bool {
        self.cut.contains(&(from, to))
    }

    /// Whether any link is cut or slow.
    pub fn is_faulty(&self) -> bool {
        !self.cut.is_empty() || !self.slow.is_empty()
    }

    /// Cuts the link `from -> to`.
    pub fn cut(&mut self, from: K, to: K) {
        if from != to {
            self.cut.insert((from, to));
        }
    }

    /// Cuts every link in `pairs`.
    pub fn cut_all(&mut self, pairs: impl IntoIterator<Item = (K, K)>) {
        for (a, b) in pairs {
            self.cut(a, b);
        }
    }

    /// Cuts `a` off from everyone in `all`, both ways.
    pub fn isolate(&mut self, a: K, all: &[K]) {
        for b in all {
            self.cut(a, *b);
            self.cut(*b, a);
        }
    }

    /// Messages from `from` to `to` arrive `late` ms late, in order.
    pub fn slow_down(&mut self, from: K, to: K, late: Millis) {
        self.slow.insert((from, to), late);
    }

    /// Every link works again; returns the links that were cut (their connections are made
    /// anew).
    /// No message on any link arrives after `at` because of the ones before it (the
    /// delays of slow links that healed are over).
    pub fn catch_up(&mut self, at: Millis) {
        for clock in self.clock.values_mut() {
            *clock = (*clock).min(at);
        }
    }

    pub fn heal(&mut self) -> Vec<(K, K)> {
        self.slow.clear();
        std::mem::take(&mut self.cut).into_iter().collect()
    }

    /// When copies of a message sent at `now` on `from -> to` arrive: none if the link is
    /// cut or the message is lost, two if it is duplicated.
    pub fn arrivals(
        &mut self,
        rng: &mut Rng,
        net: &Conditions,
        now: Millis,
        from: K,
        to: K,
    ) -> Vec<Millis> {
        if self.is_cut(from, to) || rng.chance(net.loss) {
            return Vec::new();
        }
        let copies = if rng.chance(net.dup) { 2 } else { 1 };
        let late = self.slow.get(&(from, to)).copied().unwrap_or(0);
        (0..copies)
            .map(|_| {
                let mut at = now + 1 + rng.below(net.max_delay) + late;
                // A slow link is one connection: it keeps its order.
                if !net.reorder || late > 0 {
                    let clock = self.clock.entry((from, to)).or_default();
                    at = at.max(*clock);
                    *clock = at;
                }
                at
            })
            .collect()
    }
}

/// Every link from `side` to the rest of `all` and back.
pub fn split<K: Ord + Copy>(all: &[K], side: &BTreeSet<K>) -> Vec<(K, K)> {
    pairs(all)
        .filter(|(a, b)| side.contains(a) != side.contains(b))
        .collect()
}

/// The links cut by a ring in `order`: each hears only its two neighbours.
pub fn ring<K: Ord + Copy>(order: &[K]) -> Vec<(K, K)> {
    let n = order.len();
    let mut kept = BTreeSet::new();
    for i in 0..n {
        let (a, b) = (order[i], order[(i + 1) % n]);
        kept.insert((a, b));
        kept.insert((b, a));
    }
    pairs(order).filter(|p| !kept.contains(p)).collect()
}

/// The links cut by a bridge: `bridge` hears everyone; `left` and the others hear only
/// their own side.
pub fn bridge<K: Ord + Copy>(all: &[K], bridge: K, left: &BTreeSet<K>) -> Vec<(K, K)> {
    pairs(all)
        .filter(|(a, b)| *a != bridge && *b != bridge && left.contains(a) != left.contains(b))
        .collect()
}

/// Every ordered pair of distinct endpoints.
pub fn pairs<K: Copy>(all: &[K]) -> impl Iterator<Item = (K, K)> + '_ {
    all.iter().enumerate().flat_map(move |(i, a)| {
        all.iter()
            .enumerate()
            .filter(move |(j, _)| *j != i)
            .map(move |(_, b)| (*a, *b))
    })
}

/// Every ring of `all` up to rotation and direction, and every bridge (one beacon joining
/// a split of the rest into two halves), named: the shapes a cluster of five is tried in.
pub fn rings_and_bridges<K: Ord + Copy + std::fmt::Debug>(all: &[K]) -> Vec<(String, Vec<(K, K)>)> {
    let mut shapes = Vec::new();
    let (first, rest) = all.split_first().expect("at least one endpoint");
    for p in permutations(rest) {
        if p.first() > p.last() {
            continue; // the same ring the other way round
        }
        let mut order = vec![*first];
        order.extend(p);
        shapes.push((format!("ring {order:?}"), ring(&order)));
    }
    for b in all {
        let others: Vec<K> = all.iter().copied().filter(|o| o != b).collect();
        let Some((anchor, tail)) = others.split_first() else {
            continue;
        };
        for partner in tail {
            let left: BTreeSet<K> = [*anchor, *partner].into();
            shapes.push((
                format!("bridge {b:?}, {left:?} | rest"),
                bridge(all, *b, &left),
            ));
        }
    }
    shapes
}

fn permutations<K: Copy>(items: &[K]) -> Vec<Vec<K>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

/// Shuffles one round's messages across links while keeping each link's own order, as TCP
/// does: links race each other, but one connection never reorders.
pub fn interleave<K: Ord + Copy, T>(batch: Vec<(K, K, T)>, rng: &mut Rng) -> Vec<(K, K, T)> {
    let mut slots: Vec<(K, K)> = batch.iter().map(|m| (m.0, m.1)).collect();
    for i in (1..slots.len()).rev() {
        slots.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut queues: BTreeMap<(K, K), VecDeque<T>> = BTreeMap::new();
    for (from, to, m) in batch {
        queues.entry((from, to)).or_default().push_back(m);
    }
    slots
        .into_iter()
        .map(|(from, to)| {
            let m = queues
                .get_mut(&(from, to))
                .and_then(VecDeque::pop_front)
                .expect("one message per slot");
            (from, to, m)
        })
        .collect()
}

/// Everything in flight, delivered in order of arrival (ties in order of sending).
#[derive(Debug)]
pub struct Mail<T> {
    items: Vec<(Millis, u64, T)>,
    seq: u64,
}

impl<T> Default for Mail<T> {
    fn default() -> Self {
        Mail {
            items: Vec::new(),
            seq: 0,
        }
    }
}

impl<T> Mail<T> {
    pub fn push(&mut self, at: Millis, item: T) {
        self.seq += 1;
        self.items.push((at, self.seq, item));
    }

    /// Takes out what has arrived by `now` and may be read (`ready`), in order.
    pub fn due(&mut self, now: Millis, ready: impl Fn(&T) -> bool) -> Vec<T> {
        let (mut due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.items)
            .into_iter()
            .partition(|(at, _, item)| *at <= now && ready(item));
        self.items = rest;
        due.sort_by_key(|(at, seq, _)| (*at, *seq));
        due.into_iter().map(|(_, _, item)| item).collect()
    }

    /// Brings the items `which` picks that would arrive after `at` forward to `at`.
    pub fn bring_forward(&mut self, at: Millis, which: impl Fn(&T) -> bool) {
        for item in &mut self.items {
            if item.0 > at && which(&item.2) {
                item.0 = at;
            }
        }
    }

    /// Changes the arrival time of the items `which` picks.
    pub fn reschedule(&mut self, at: Millis, which: impl Fn(&T) -> bool) {
        for item in &mut self.items {
            if which(&item.2) {
                item.0 = at;
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_beacons_have_twelve_rings_and_fifteen_bridges() {
        let shapes = rings_and_bridges(&[0, 1, 2, 3, 4]);
        let rings = shapes.iter().filter(|(n, _)| n.starts_with("ring")).count();
        assert_eq!((rings, shapes.len() - rings), (12, 15));
        // A ring of five keeps 10 of the 20 directed links.
        assert_eq!(ring(&[0, 1, 2, 3, 4]).len(), 10);
        // A bridge over a 2/2 split cuts the 8 links between the halves.
        assert_eq!(bridge(&[0, 1, 2, 3, 4], 0, &[1, 2].into()).len(), 8);
    }

    #[test]
    fn a_link_keeps_its_order_unless_reordering_is_on() {
        let mut rng = Rng::new(3);
        let mut links = Links::<u8>::default();
        let net = Conditions {
            max_delay: 50,
            ..Conditions::quiet()
        };
        let times: Vec<Millis> = (0..50)
            .flat_map(|t| links.arrivals(&mut rng, &net, t, 0, 1))
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        links.cut(0, 1);
        assert!(links.arrivals(&mut rng, &net, 60, 0, 1).is_empty());
        assert_eq!(links.arrivals(&mut rng, &net, 60, 1, 0).len(), 1);
        assert_eq!(links.heal(), vec![(0, 1)]);
        assert!(!links.is_faulty());
    }

    #[test]
    fn mail_comes_in_arrival_order() {
        let mut mail = Mail::default();
        mail.push(5, "b");
        mail.push(3, "a");
        mail.push(9, "c");
        assert_eq!(mail.due(6, |_| true), vec!["a", "b"]);
        mail.reschedule(1, |m| *m == "c");
        assert_eq!(mail.due(6, |_| true), vec!["c"]);
        assert!(mail.is_empty());
    }
}
