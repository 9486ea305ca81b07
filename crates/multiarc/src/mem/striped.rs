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

    /// Counter `which` of stripe `stripe` alone (a stripe's share of the
    /// sum; wrapped below zero while a concurrent move is half done).
    pub(crate) fn get(&self, stripe: usize, which: usize) -> u64 {
        self.cells[stripe & (self.cells.len() - 1)][which].load(Ordering::Relaxed)
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

/// A cache's own pseudo-random numbers, for picking where an eviction walk
/// or a second-tier feed starts. Not for anything that needs real
/// randomness: draw `i` is a hash (foldhash, the hash table's own) of the
/// seed and of `i`, counted by one atomic per cache. So the sequence
/// depends on the seed and on the order of draws only, never on which
/// thread draws or on what else runs in the process: with inline eviction
/// and one thread, a cache given the same seed and the same requests makes
/// the same choices. Drawn once per walk, never on a hit.
pub(crate) struct Draws {
    mix: foldhash::fast::FixedState,
    drawn: std::sync::atomic::AtomicU64,
}

impl Draws {
    pub(crate) fn new(seed: u64) -> Self {
        Draws {
            mix: foldhash::fast::FixedState::with_seed(seed),
            drawn: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The next number.
    pub(crate) fn next(&self) -> u64 {
        use std::hash::BuildHasher;
        // Under loom every execution must repeat its choices: the walk
        // always starts at sublist 0 there.
        if cfg!(loom) {
            return 0;
        }
        // Relaxed: the counter only has to hand out each number once.
        let i = self
            .drawn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mix.hash_one(i)
    }
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

    /// Successive draws spread evenly over a few sublists (the eviction
    /// walk takes them modulo the sublist count).
    #[test]
    fn draws_spread_over_sublists() {
        let draws = Draws::new(7);
        for n in [3u64, 8, 13] {
            let mut seen = vec![0u32; n as usize];
            for _ in 0..8000 {
                seen[(draws.next() % n) as usize] += 1;
            }
            let expect = 8000 / n as u32;
            for &c in &seen {
                assert!(c > expect / 2 && c < expect * 3 / 2, "{n}: {seen:?}");
            }
        }
        assert_ne!(draws.next(), draws.next());
    }

    /// The same seed gives the same sequence, whichever thread draws; other
    /// seeds give other sequences.
    #[test]
    fn draws_depend_on_the_seed_only() {
        let here: Vec<u64> = {
            let d = Draws::new(42);
            (0..100).map(|_| d.next()).collect()
        };
        let there = std::thread::spawn(|| {
            let d = Draws::new(42);
            (0..100).map(|_| d.next()).collect::<Vec<u64>>()
        })
        .join()
        .unwrap();
        assert_eq!(here, there);
        let other = Draws::new(43);
        let other: Vec<u64> = (0..100).map(|_| other.next()).collect();
        assert_ne!(here, other);
    }
}
