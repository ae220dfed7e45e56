//! A linearizability checker for recorded client histories: the Wing and Gong search with
//! Lowe's memoization, as Porcupine runs it.
//!
//! A history is a set of operations, each with the time its client called it and the time
//! the answer came back. It is linearizable for a sequential [`Model`] when every operation
//! can be given one instant between its call and its return such that, taken in the order of
//! those instants, every answer is what the model would have given. The search tries the
//! operations that may go first (called before any pending one returned), applies each to
//! the model, and backtracks when an operation returns before it could be placed; states
//! already tried with the same set of placed operations are skipped.
//!
//! Histories partition by key ([`Model::key`]): operations on different keys never
//! constrain each other, so each key is checked alone (P-compositionality), which keeps the
//! search small.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    /// What is checked apart from other keys (the registry: a service's address).
    type Key: Ord + Clone + Debug;
    type State: Clone + Eq + Hash + Debug;
    type Input: Clone + Debug;
    type Output: Clone + Debug;

    fn key(input: &Self::Input) -> Self::Key;
    fn init() -> Self::State;
    /// The states `input` answered with `output` may leave `state` in: none if the model
    /// could not have given that answer there, more than one when the answer does not say
    /// (an operation whose outcome is unknown may or may not have taken effect).
    fn step(state: &Self::State, input: &Self::Input, output: &Self::Output) -> Vec<Self::State>;
}

/// One operation of a history: asked at `call`, answered at `ret` (any monotonic clock, the
/// same for every client).
#[derive(Debug, Clone)]
pub struct Operation<I, O> {
    pub client: usize,
    pub call: u64,
    pub ret: u64,
    pub input: I,
    pub output: O,
}

impl<I, O> Operation<I, O> {
    /// `client`'s operation `input`, asked at `call` and answered `output` at `ret`.
    pub fn new(client: usize, (call, ret): (u64, u64), input: I, output: O) -> Operation<I, O> {
        Operation {
            client,
            call,
            ret,
            input,
            output,
        }
    }
}

/// A model's operations.
pub type History<M> = Vec<Operation<<M as Model>::Input, <M as Model>::Output>>;

/// A history that no order explains: the key, and its operations by call time.
#[derive(Debug)]
pub struct Violation<M: Model> {
    pub key: M::Key,
    pub operations: History<M>,
    /// The longest prefix of an order the search found before it got stuck.
    pub longest: Vec<usize>,
}

impl<M: Model> std::fmt::Display for Violation<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "not linearizable at key {:?}:", self.key)?;
        for (i, op) in self.operations.iter().enumerate() {
            writeln!(
                f,
                "  #{i} client {} [{}..{}] {:?} -> {:?}",
                op.client, op.call, op.ret, op.input, op.output
            )?;
        }
        write!(f, "  longest order found: {:?}", self.longest)
    }
}

/// Checks `history`, key by key. The error names the first key no order explains.
pub fn check<M: Model>(history: &[Operation<M::Input, M::Output>]) -> Result<(), Violation<M>> {
    let mut keys: BTreeMap<M::Key, History<M>> = BTreeMap::new();
    for op in history {
        keys.entry(M::key(&op.input)).or_default().push(op.clone());
    }
    for (key, mut ops) in keys {
        ops.sort_by_key(|o| (o.call, o.ret));
        if let Err(longest) = check_key::<M>(&ops) {
            return Err(Violation {
                key,
                operations: ops,
                longest,
            });
        }
    }
    Ok(())
}

/// An entry of the search's list: an operation's call or its return.
#[derive(Debug, Clone, Copy)]
struct Entry {
    op: usize,
    is_call: bool,
    /// Index of the matching entry (a call's return, a return's call).
    other: usize,
}

/// Dancing links over the entries (index `len` is the head sentinel).
struct List {
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
}

impl List {
    /// Entries `0..len` in order.
    fn new(len: usize) -> List {
        let head = len;
        // In a ring of len + 1 slots, each entry links to its neighbours and the head closes
        // the ring.
        let next = (0..=len).map(|i| (i + 1) % (len + 1)).collect();
        let prev = (0..=len).map(|i| (i + len) % (len + 1)).collect();
        List { next, prev, head }
    }

    fn first(&self) -> Option<usize> {
        let n = self.next[self.head];
        (n != self.head).then_some(n)
    }

    fn after(&self, i: usize) -> Option<usize> {
        let n = self.next[i];
        (n != self.head).then_some(n)
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = n;
        self.prev[n] = p;
    }

    /// Puts `i` back where it was (the reverse order of unlinking).
    fn relink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = i;
        self.prev[n] = i;
    }
}

/// A set of operations, as bits.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Checks one key's operations (sorted by call); the longest order found when it fails.
fn check_key<M: Model>(ops: &[Operation<M::Input, M::Output>]) -> Result<(), Vec<usize>> {
    // Calls and returns in time order; at the same instant calls come first, so that
    // operations that touch are taken as concurrent (never a false violation).
    let mut times: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        times.push((op.call, false, i));
        times.push((op.ret.max(op.call), true, i));
    }
    times.sort();
    let mut entries: Vec<Entry> = times
        .iter()
        .map(|&(_, is_return, op)| Entry {
            op,
            is_call: !is_return,
            other: 0,
        })
        .collect();
    let mut call_at = vec![0; ops.len()];
    let mut return_at = vec![0; ops.len()];
    for (i, e) in entries.iter().enumerate() {
        if e.is_call {
            call_at[e.op] = i;
        } else {
            return_at[e.op] = i;
        }
    }
    for e in entries.iter_mut() {
        e.other = if e.is_call {
            return_at[e.op]
        } else {
            call_at[e.op]
        };
    }

    let mut list = List::new(entries.len());
    let mut state = M::init();
    let mut placed = Bits::new(ops.len());
    let mut tried: HashSet<(Bits, M::State)> = HashSet::new();
    // The operations placed, with the state before each, and the entry to go on from.
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut longest: Vec<usize> = Vec::new();
    let mut at = list.first();
    while let Some(i) = at {
        let e = entries[i];
        if e.is_call {
            let op = &ops[e.op];
            let mut bits = placed.clone();
            bits.set(e.op);
            // The first state this placement leaves that was not tried with the same
            // operations placed (a state tried so failed, or is being tried).
            let fresh = M::step(&state, &op.input, &op.output)
                .into_iter()
                .find(|next| tried.insert((bits.clone(), next.clone())));
            if let Some(next) = fresh {
                stack.push((i, std::mem::replace(&mut state, next)));
                placed = bits;
                list.unlink(i);
                list.unlink(e.other);
                if stack.len() > longest.len() {
                    longest = stack.iter().map(|(c, _)| entries[*c].op).collect();
                }
                at = list.first();
                continue;
            }
            at = list.after(i);
        } else {
            // An operation returned before it could be placed: undo the last placement.
            let Some((call, before)) = stack.pop() else {
                return Err(longest);
            };
            let op = entries[call].op;
            state = before;
            placed.clear(op);
            list.relink(entries[call].other);
            list.relink(call);
            // The same operation again: the states it may leave that were not tried yet.
            at = Some(call);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register per key: writes set it, reads return it.
    struct Register;

    #[derive(Debug, Clone)]
    enum In {
        Write(u8, u32),
        Read(u8),
    }

    impl Model for Register {
        type Key = u8;
        type State = u32;
        type Input = In;
        type Output = Option<u32>;

        fn key(input: &In) -> u8 {
            match input {
                In::Write(k, _) | In::Read(k) => *k,
            }
        }
        fn init() -> u32 {
            0
        }
        fn step(state: &u32, input: &In, output: &Option<u32>) -> Vec<u32> {
            match input {
                // `None`: the write's outcome is unknown.
                In::Write(_, v) if output.is_none() => vec![*v, *state],
                In::Write(_, v) => vec![*v],
                In::Read(_) => (*output == Some(*state))
                    .then_some(*state)
                    .into_iter()
                    .collect(),
            }
        }
    }

    fn op(
        client: usize,
        call: u64,
        ret: u64,
        input: In,
        output: Option<u32>,
    ) -> Operation<In, Option<u32>> {
        Operation::new(client, (call, ret), input, output)
    }

    #[test]
    fn a_read_overlapping_a_write_may_see_either_value() {
        for seen in [0, 1] {
            let h = vec![
                op(0, 0, 10, In::Write(0, 1), Some(1)),
                op(1, 5, 15, In::Read(0), Some(seen)),
            ];
            assert!(check::<Register>(&h).is_ok(), "read {seen}");
        }
    }

    #[test]
    fn a_read_after_a_write_returned_must_see_it() {
        let h = vec![
            op(0, 0, 10, In::Write(0, 1), Some(1)),
            op(1, 11, 20, In::Read(0), Some(0)),
        ];
        let e = check::<Register>(&h).unwrap_err();
        assert_eq!(e.key, 0);
        assert!(e.to_string().contains("not linearizable at key 0"), "{e}");
    }

    #[test]
    fn two_readers_may_not_see_values_in_opposite_orders() {
        // Writes of 1 and 2 overlap; one reader sees 1 then 2, the other 2 then 1: no single
        // order of the writes explains both.
        let h = vec![
            op(0, 0, 100, In::Write(0, 1), Some(1)),
            op(1, 0, 100, In::Write(0, 2), Some(2)),
            op(2, 10, 20, In::Read(0), Some(1)),
            op(2, 30, 40, In::Read(0), Some(2)),
            op(3, 10, 20, In::Read(0), Some(2)),
            op(3, 30, 40, In::Read(0), Some(1)),
        ];
        assert!(check::<Register>(&h).is_err());
        // The same without the second reader is fine.
        assert!(check::<Register>(&h[..4]).is_ok());
    }

    #[test]
    fn a_write_of_unknown_outcome_may_or_may_not_have_happened() {
        // A write that never answered (returned "at the end of time") explains a read of
        // its value, and a read of the old value too.
        for seen in [0, 7] {
            let h = vec![
                op(0, 0, u64::MAX, In::Write(0, 7), None),
                op(1, 5, 15, In::Read(0), Some(seen)),
                op(1, 20, 30, In::Read(0), Some(seen)),
            ];
            assert!(check::<Register>(&h).is_ok(), "read {seen}");
        }
        // But not a read of it and then the old value again.
        let h = vec![
            op(0, 0, u64::MAX, In::Write(0, 7), None),
            op(1, 5, 15, In::Read(0), Some(7)),
            op(1, 20, 30, In::Read(0), Some(0)),
        ];
        assert!(check::<Register>(&h).is_err());
    }

    #[test]
    fn keys_are_checked_apart() {
        let h = vec![
            op(0, 0, 10, In::Write(0, 1), Some(1)),
            op(1, 11, 20, In::Read(1), Some(0)),
            op(1, 21, 30, In::Read(0), Some(1)),
        ];
        assert!(check::<Register>(&h).is_ok());
    }

    #[test]
    fn a_long_concurrent_history_checks_quickly() {
        // 8 clients, 300 operations over 2 keys, each read returning the last value written
        // before it was called (a real register would be at least this current).
        let mut h = Vec::new();
        let mut last = [0u32; 2];
        let mut t = 0;
        for i in 0..300u32 {
            let k = (i % 2) as u8;
            let client = (i % 8) as usize;
            if i % 3 == 0 {
                h.push(op(client, t, t + 5, In::Write(k, i), Some(i)));
                last[k as usize] = i;
            } else {
                h.push(op(
                    client,
                    t + 6,
                    t + 9,
                    In::Read(k),
                    Some(last[k as usize]),
                ));
            }
            t += 10;
        }
        assert!(check::<Register>(&h).is_ok());
    }
}
