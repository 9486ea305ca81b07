//! Striped counters: each thread (or each key's sublist) adds to its own
//! cache line, readers sum the stripes. This keeps statistics and per-state
//! byte counts off the hit path's shared cache lines: with one shared atomic,
//! every hit on every core would write the same line.

use super::sync::{AtomicU64, Ordering};
use crate::lock::CachePadded;
use std::cell::Cell;

/// A set of `N` counters striped over cache-padded cells.
pub(crate) struct Striped<const N: usize> {
    cells: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Striped<N> {
    /// `stripes` cells (rounded up to a power of two).
    pub(crate) fn new(stripes: usize) -> Self {
        let n = stripes.max(1).next_power_of_two();
        Striped {
            cells: (0..n)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Adds `delta` (wrapping: counters that go down use two's complement and
    /// are summed with wrapping arithmetic) to counter `which` of stripe `stripe`.
    #[inline]
    pub(crate) fn add(&self, stripe: usize, which: usize, delta: u64) {
        let cell = &self.cells[stripe & (self.cells.len() - 1)];
        cell[which].fetch_add(delta, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn sub(&self, stripe: usize, which: usize, delta: u64) {
        self.add(stripe, which, delta.wrapping_neg());
    }

    /// The sum of counter `which` over all stripes.
    pub(crate) fn sum(&self, which: usize) -> u64 {
        self.cells.iter().fold(0u64, |acc, cell| {
            acc.wrapping_add(cell[which].load(Ordering::Relaxed))
        })
    }
}

thread_local! {
    static THREAD_STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// A small number identifying the calling thread, for picking a stripe.
/// Threads get consecutive numbers on first use, so up to the stripe count
/// they never share a cell.
#[inline]
pub(crate) fn thread_stripe() -> usize {
    // Loom replays each execution and needs every choice to repeat: a
    // process-wide counter would not.
    if cfg!(loom) {
        return 0;
    }
    THREAD_STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        s.set(v);
        v
    })
}

/// A cheap per-thread pseudo-random number, for picking where an eviction
/// pass starts. Not for anything that needs real randomness: it is a hash
/// (foldhash, the hash table's own) of the thread's stripe number and of how
/// many numbers the thread has drawn, not a generator of its own.
pub(crate) fn thread_random() -> u64 {
    use std::hash::BuildHasher;
    if cfg!(loom) {
        return 0;
    }
    thread_local! {
        static DRAWN: Cell<u64> = const { Cell::new(0) };
    }
    let n = DRAWN.with(|d| {
        let n = d.get().wrapping_add(1);
        d.set(n);
        n
    });
    const MIX: foldhash::fast::FixedState =
        foldhash::fast::FixedState::with_seed(0x6D75_6C74_6961_7263);
    MIX.hash_one((thread_stripe() as u64, n))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sums_over_stripes_with_wrapping_subtraction() {
        let c = Striped::<2>::new(3);
        assert_eq!(c.cells.len(), 4);
        c.add(0, 0, 10);
        c.add(5, 0, 7);
        c.sub(2, 0, 4);
        c.add(1, 1, 1);
        assert_eq!(c.sum(0), 13);
        assert_eq!(c.sum(1), 1);
    }

    /// Successive draws of one thread spread evenly over a few sublists
    /// (the eviction walk takes them modulo the sublist count).
    #[test]
    fn thread_random_spreads_over_sublists() {
        for n in [3u64, 8, 13] {
            let mut seen = vec![0u32; n as usize];
            for _ in 0..8000 {
                seen[(thread_random() % n) as usize] += 1;
            }
            let expect = 8000 / n as u32;
            for &c in &seen {
                assert!(c > expect / 2 && c < expect * 3 / 2, "{n}: {seen:?}");
            }
        }
        assert_ne!(thread_random(), thread_random());
    }
}
