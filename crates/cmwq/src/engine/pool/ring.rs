//! A lane's worklist: a first-in first-out ring of items whose push is
//! inlined into the queueing path.
//!
//! Why not `VecDeque`: its push is one out-of-line function per element
//! type, so `insert` builds the item on its stack and the push copies it
//! into the buffer. An item is a fat `Arc` and a tag, written as separate
//! stores and read back at once as wider loads for the copy; the CPU
//! cannot forward such a load from the stores, and waits for them to reach
//! its cache (`perf annotate` of `bench --submit work --batch 64` put a
//! fifth of `insert`'s samples and half of the push's there). Here the push
//! writes the item straight into its slot; the slot is read much later, by
//! the worker.
//!
//! A slot holds an `Option`, `None` when free (the `Arc` inside makes the
//! `Option` no bigger), so the ring needs no `unsafe`. The capacity is a
//! power of two and only grows on a push; [`Ring::shrink_to`] and a fresh
//! ring give memory back.

use std::mem;

/// A first-in first-out ring (see the module docs).
pub(crate) struct Ring<T> {
    /// `slots.len()` is the capacity: 0 or a power of two.
    slots: Vec<Option<T>>,
    /// The slot of the oldest element.
    head: usize,
    len: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Ring<T> {
        Ring {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T> Ring<T> {
    /// An empty ring with room for `n` elements before it grows.
    pub(crate) fn with_capacity(n: usize) -> Ring<T> {
        let mut r = Ring::default();
        r.resize(n);
        r
    }

    /// How many elements it holds.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// It holds none.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many it holds before it grows.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The slot of the `i`th oldest element (`i` below the capacity).
    #[inline]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (self.slots.len() - 1)
    }

    /// Appends `v` as the newest element.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, v: T) {
        self.push_back_with(|| v);
    }

    /// Appends what `make` returns as the newest element, made once the
    /// slot is found (after the ring grew, if it had to): nothing has to
    /// keep it across a call, so it goes from registers into the slot.
    /// Always inlined, the point of the type; a free slot holds `None`, so
    /// there is no old value to drop (and no drop code to inline with it).
    #[inline(always)]
    pub(crate) fn push_back_with(&mut self, make: impl FnOnce() -> T) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let s = self.slot(self.len);
        let slot = &mut self.slots[s];
        let old = slot.replace(make());
        debug_assert!(old.is_none(), "a free slot holds nothing");
        mem::forget(old);
        self.len += 1;
    }

    /// Takes the oldest element.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.slots[self.head].take();
        self.head = self.slot(1);
        self.len -= 1;
        v
    }

    /// The elements, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).filter_map(move |i| self.slots[self.slot(i)].as_ref())
    }

    /// Takes out the `i`th oldest element, keeping the others in order.
    pub(crate) fn remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let s = self.slot(i);
        let v = self.slots[s].take();
        // Close the gap: each younger element moves one slot back.
        for j in i..self.len - 1 {
            let (from, to) = (self.slot(j + 1), self.slot(j));
            self.slots[to] = self.slots[from].take();
        }
        self.len -= 1;
        v
    }

    /// Gives back memory down to room for `n` elements (never fewer than it
    /// holds).
    pub(crate) fn shrink_to(&mut self, n: usize) {
        if n.max(self.len).next_power_of_two() < self.slots.len() {
            self.resize(n);
        }
    }

    /// Doubles the room (the first push makes room for 8).
    #[cold]
    fn grow(&mut self) {
        self.resize((2 * self.slots.len()).max(8));
    }

    /// Moves the elements, oldest first, to a buffer of room for `n` (a power
    /// of two, at least what it holds).
    fn resize(&mut self, n: usize) {
        let cap = n.max(self.len).next_power_of_two();
        let mut slots: Vec<Option<T>> = Vec::with_capacity(cap);
        slots.resize_with(cap, || None);
        for (i, s) in slots.iter_mut().enumerate().take(self.len) {
            let from = self.slot(i);
            *s = self.slots[from].take();
        }
        self.slots = slots;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// The ring against `VecDeque` over a mixed run of every operation,
    /// wrapping, growing and shrinking: the same elements in the same order.
    #[test]
    fn it_keeps_the_order_a_deque_keeps() {
        let mut r = Ring::with_capacity(4);
        let mut d = VecDeque::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n in 0..20_000u32 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            match seed % 10 {
                0..=4 => {
                    r.push_back(n);
                    d.push_back(n);
                }
                5..=7 => assert_eq!(r.pop_front(), d.pop_front()),
                8 => {
                    let i = (seed >> 8) as usize % (d.len() + 1);
                    assert_eq!(r.remove(i), d.remove(i));
                }
                _ => r.shrink_to((seed >> 8) as usize % 16),
            }
            assert_eq!(r.len(), d.len());
            assert!(r.capacity() >= r.len() && r.capacity().is_power_of_two());
            assert!(r.iter().eq(d.iter()), "after step {n}");
        }
        let rest: Vec<u32> = std::iter::from_fn(|| r.pop_front()).collect();
        assert_eq!(rest, d.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn shrinking_gives_memory_back_but_keeps_what_it_holds() {
        let mut r = Ring::default();
        assert_eq!(r.capacity(), 0);
        for i in 0..100 {
            r.push_back(i);
        }
        assert_eq!(r.capacity(), 128);
        for _ in 0..95 {
            r.pop_front();
        }
        r.shrink_to(0);
        assert_eq!(r.capacity(), 8);
        assert!(r.iter().copied().eq(95..100));
        r.shrink_to(64);
        assert_eq!(r.capacity(), 8, "shrink_to never grows");
    }

    /// Elements left in the ring are dropped with it, once each.
    #[test]
    fn a_dropped_ring_drops_what_it_holds() {
        let token = std::sync::Arc::new(());
        let mut r = Ring::with_capacity(2);
        for _ in 0..5 {
            r.push_back(token.clone());
        }
        r.pop_front();
        assert_eq!(std::sync::Arc::strong_count(&token), 5);
        drop(r);
        assert_eq!(std::sync::Arc::strong_count(&token), 1);
    }
}
