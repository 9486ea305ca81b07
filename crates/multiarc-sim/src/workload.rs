//! Workload generators: streams of block ids for simulations, benchmarks
//! and tests, on `rand` and `rand_distr`.
//!
//! - [`Uniform`]: ids drawn uniformly from `0..universe`.
//! - [`Zipf`]: ids in `0..universe` with Zipf-distributed popularity (id 0
//!   the most popular), drawn by `rand_distr`'s rejection-inversion sampler
//!   in O(1) time and memory (no table of cumulative weights).
//! - [`Scan`]: one sequential pass over `len` ids from `first`.
//! - [`Loop`]: `0, 1, ..., len - 1` over and over (LRU's worst case when the
//!   loop is larger than the cache).
//!
//! The random ones are seeded and deterministic: the same seed gives the
//! same ids on every platform and run, since [`SimRng`] is a generator
//! whose output `rand` guarantees to be reproducible (Xoshiro256++, not
//! `SmallRng`, whose algorithm may change between `rand` releases). All of
//! them are iterators; `take(n)` bounds the infinite ones.

use rand::distr::Distribution;
use rand::SeedableRng;

/// The generator behind every random workload: portable and reproducible.
pub type SimRng = rand::rngs::Xoshiro256PlusPlus;

/// A [`SimRng`] seeded with `seed`, for callers that draw their own values
/// (offsets, lengths) with `rand`'s `RngExt`.
pub fn rng(seed: u64) -> SimRng {
    SimRng::seed_from_u64(seed)
}

/// Ids drawn uniformly from `0..universe`, for ever.
#[derive(Clone, Debug)]
pub struct Uniform {
    rng: SimRng,
    ids: rand::distr::Uniform<u64>,
}

impl Uniform {
    /// Uniform ids in `0..universe` (`universe` at least 1), seeded by
    /// `seed`.
    pub fn new(universe: u64, seed: u64) -> Uniform {
        assert!(universe > 0, "a uniform workload needs at least one id");
        Uniform {
            rng: rng(seed),
            ids: rand::distr::Uniform::new(0, universe).expect("0 < universe"),
        }
    }
}

impl Iterator for Uniform {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        Some(self.ids.sample(&mut self.rng))
    }
}

/// Ids in `0..universe` whose popularity follows Zipf's law with exponent
/// `s`: id `k` is requested with probability proportional to
/// `1 / (k + 1)^s`. Id 0 is the most popular. For ever.
#[derive(Clone, Debug)]
pub struct Zipf {
    rng: SimRng,
    ranks: rand_distr::Zipf<f64>,
    universe: u64,
}

impl Zipf {
    /// Zipf ids in `0..universe` (`universe` at least 1) with exponent
    /// `exponent` (at least 0; 0 is uniform), seeded by `seed`.
    pub fn new(universe: u64, exponent: f64, seed: u64) -> Zipf {
        assert!(universe > 0, "a Zipf workload needs at least one id");
        let ranks = rand_distr::Zipf::new(universe as f64, exponent)
            .unwrap_or_else(|e| panic!("Zipf over {universe} ids, exponent {exponent}: {e}"));
        Zipf {
            rng: rng(seed),
            ranks,
            universe,
        }
    }
}

impl Iterator for Zipf {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // Ranks are 1..=universe (as floats); ids start at 0.
        let rank = self.ranks.sample(&mut self.rng) as u64;
        Some(rank.clamp(1, self.universe) - 1)
    }
}

/// One sequential pass: `first, first + 1, ..., first + len - 1`.
#[derive(Clone, Debug)]
pub struct Scan {
    next: u64,
    left: u64,
}

impl Scan {
    /// A scan of `len` ids from `first` (which must not run past
    /// `u64::MAX`).
    pub fn new(first: u64, len: u64) -> Scan {
        assert!(
            len == 0 || first.checked_add(len - 1).is_some(),
            "a scan of {len} ids from {first} runs past u64::MAX"
        );
        Scan {
            next: first,
            left: len,
        }
    }
}

impl Iterator for Scan {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        let id = self.next;
        self.left -= 1;
        self.next = self.next.wrapping_add(1);
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, usize::try_from(self.left).ok())
    }
}

/// `0, 1, ..., len - 1`, then again, for ever.
#[derive(Clone, Debug)]
pub struct Loop {
    len: u64,
    next: u64,
}

impl Loop {
    /// A loop over `0..len` (`len` at least 1).
    pub fn new(len: u64) -> Loop {
        assert!(len > 0, "a loop needs at least one id");
        Loop { len, next: 0 }
    }
}

impl Iterator for Loop {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let id = self.next;
        self.next = if id + 1 == self.len { 0 } else { id + 1 };
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn seeded_generators_repeat_themselves() {
        let a: Vec<u64> = Uniform::new(1000, 1).take(100).collect();
        assert_eq!(a, Uniform::new(1000, 1).take(100).collect::<Vec<_>>());
        assert_ne!(a, Uniform::new(1000, 2).take(100).collect::<Vec<_>>());
        let z: Vec<u64> = Zipf::new(1000, 0.9, 1).take(100).collect();
        assert_eq!(z, Zipf::new(1000, 0.9, 1).take(100).collect::<Vec<_>>());
    }

    #[test]
    fn uniform_covers_its_universe_evenly() {
        let mut counts = [0u32; 10];
        for id in Uniform::new(10, 3).take(100_000) {
            counts[id as usize] += 1;
        }
        for (id, &n) in counts.iter().enumerate() {
            assert!((9_000..11_000).contains(&n), "id {id}: {n} of 100000");
        }
        assert!(Uniform::new(1, 0).take(100).all(|id| id == 0));
    }

    #[test]
    fn zipf_ranks_by_popularity() {
        let universe = 1000;
        let n = 200_000;
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for id in Zipf::new(universe, 0.9, 5).take(n) {
            assert!(id < universe);
            *counts.entry(id).or_default() += 1;
        }
        let c = |id| counts.get(&id).copied().unwrap_or(0) as f64;
        assert!(c(0) > c(1) && c(1) > c(9) && c(9) > c(99));
        // P(0) = 1 / H(1000, 0.9), H about 12.3 for these parameters.
        let h: f64 = (1..=universe).map(|k| (k as f64).powf(-0.9)).sum();
        let expected = n as f64 / h;
        assert!((c(0) - expected).abs() < 0.05 * expected, "{}", c(0));
        // Exponent 0 is uniform.
        let flat: Vec<u64> = Zipf::new(4, 0.0, 1).take(40_000).collect();
        for id in 0..4 {
            let k = flat.iter().filter(|&&x| x == id).count();
            assert!((9_000..11_000).contains(&k), "id {id}: {k}");
        }
    }

    #[test]
    fn scans_and_loops() {
        assert_eq!(Scan::new(5, 3).collect::<Vec<_>>(), vec![5, 6, 7]);
        assert_eq!(Scan::new(5, 0).count(), 0);
        assert_eq!(Scan::new(u64::MAX, 1).collect::<Vec<_>>(), vec![u64::MAX]);
        assert_eq!(
            Loop::new(3).take(7).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2, 0]
        );
        assert!(Loop::new(1).take(5).all(|id| id == 0));
    }
}
