//! The generated trace families: seeded, deterministic request streams,
//! each built to stress one thing a policy must adapt to.

use crate::workload::{rng, Zipf};
use rand::RngExt;

/// Where ids that must not meet another part's ids start (noise, scans,
/// one-hit wonders): far above any working set of the corpus.
const APART: u64 = 1 << 40;

/// A generated family with its parameters. Every count is in requests or
/// blocks.
#[derive(Clone, Debug, PartialEq)]
pub enum Family {
    /// A loop over `0..len`, where a share of the requests (`noise`, from
    /// 0 to 1) is instead a uniform id among `noise_universe` others:
    /// LRU's worst case made less regular.
    LoopWithNoise {
        /// Blocks in the loop.
        len: u64,
        /// Share of the requests drawn from the noise.
        noise: f64,
        /// Distinct noise ids.
        noise_universe: u64,
    },
    /// Zipf requests over `universe` ids (exponent `exponent`), and after
    /// every `every` of them a one-pass scan of `scan` blocks never seen
    /// before.
    ZipfWithScans {
        /// Distinct ids of the Zipf part.
        universe: u64,
        /// Zipf exponent.
        exponent: f64,
        /// Blocks in each scan.
        scan: u64,
        /// Zipf requests between scans.
        every: u64,
    },
    /// A Zipf working set of `size` ids whose window moves up by `shift`
    /// ids every `phase` requests: what was hot cools, new ids heat.
    ShiftingWorkingSet {
        /// Ids in the working set.
        size: u64,
        /// Zipf exponent within it.
        exponent: f64,
        /// Requests per phase.
        phase: u64,
        /// Ids the window moves up each phase.
        shift: u64,
    },
    /// Zipf random reads over `universe` ids mixed with sequential runs of
    /// `run` blocks, each from a random start in a region of `region`
    /// blocks (so runs overlap and are read again now and then); `sequential`
    /// of the requests (0 to 1) belong to the runs.
    SequentialAndRandom {
        /// Distinct ids of the random part.
        universe: u64,
        /// Zipf exponent of the random part.
        exponent: f64,
        /// Blocks in the region the runs read.
        region: u64,
        /// Blocks per run.
        run: u64,
        /// Share of the requests in runs.
        sequential: f64,
    },
    /// Zipf requests over `universe` ids, where a share (`once`, 0 to 1)
    /// of the requests is a block requested once and never again.
    OneHitWonders {
        /// Distinct ids of the Zipf part.
        universe: u64,
        /// Zipf exponent.
        exponent: f64,
        /// Share of the requests that are one-hit wonders.
        once: f64,
    },
}

impl Family {
    /// The family's name, as the reports show it.
    pub fn name(&self) -> &'static str {
        match self {
            Family::LoopWithNoise { .. } => "loop-noise",
            Family::ZipfWithScans { .. } => "zipf-scans",
            Family::ShiftingWorkingSet { .. } => "shifting",
            Family::SequentialAndRandom { .. } => "seq-random",
            Family::OneHitWonders { .. } => "one-hit",
        }
    }

    /// `requests` requests of the family, drawn from `seed`.
    pub fn generate(&self, requests: u64, seed: u64) -> Vec<u64> {
        let mut r = rng(seed);
        let mut out = Vec::with_capacity(requests as usize);
        match *self {
            Family::LoopWithNoise {
                len,
                noise,
                noise_universe,
            } => {
                let mut next = 0;
                while (out.len() as u64) < requests {
                    if r.random_bool(noise) {
                        out.push(APART + r.random_range(0..noise_universe));
                    } else {
                        out.push(next);
                        next = (next + 1) % len;
                    }
                }
            }
            Family::ZipfWithScans {
                universe,
                exponent,
                scan,
                every,
            } => {
                let mut zipf = Zipf::new(universe, exponent, seed ^ 0x5ca1);
                let mut scanned = 0;
                while (out.len() as u64) < requests {
                    for _ in 0..every {
                        out.push(zipf.next().expect("endless"));
                    }
                    for _ in 0..scan {
                        out.push(APART + scanned);
                        scanned += 1;
                    }
                }
            }
            Family::ShiftingWorkingSet {
                size,
                exponent,
                phase,
                shift,
            } => {
                let mut zipf = Zipf::new(size, exponent, seed ^ 0x5e7);
                let mut base = 0;
                while (out.len() as u64) < requests {
                    for _ in 0..phase {
                        // Spread the ranks over the window so that the
                        // hottest ids are not the ones the shift drops.
                        let rank = zipf.next().expect("endless");
                        out.push(base + spread(rank, size));
                    }
                    base += shift;
                }
            }
            Family::SequentialAndRandom {
                universe,
                exponent,
                region,
                run,
                sequential,
            } => {
                let mut zipf = Zipf::new(universe, exponent, seed ^ 0x7a9d);
                let (mut at, mut left) = (0, 0);
                while (out.len() as u64) < requests {
                    if r.random_bool(sequential) {
                        if left == 0 {
                            at = r.random_range(0..region.saturating_sub(run).max(1));
                            left = run;
                        }
                        out.push(APART + at);
                        at += 1;
                        left -= 1;
                    } else {
                        out.push(zipf.next().expect("endless"));
                    }
                }
            }
            Family::OneHitWonders {
                universe,
                exponent,
                once,
            } => {
                let mut zipf = Zipf::new(universe, exponent, seed ^ 0x1417);
                let mut fresh = 0;
                while (out.len() as u64) < requests {
                    if r.random_bool(once) {
                        out.push(APART + fresh);
                        fresh += 1;
                    } else {
                        out.push(zipf.next().expect("endless"));
                    }
                }
            }
        }
        out.truncate(requests as usize);
        out
    }
}

/// A fixed permutation of `0..size` (multiplying by an odd constant modulo
/// the next power of two, skipping what falls past `size`): a rank's place
/// in its window.
fn spread(rank: u64, size: u64) -> u64 {
    let modulus = size.next_power_of_two();
    let mut x = rank;
    loop {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1) & (modulus - 1);
        if x < size {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn families() -> Vec<Family> {
        vec![
            Family::LoopWithNoise {
                len: 100,
                noise: 0.1,
                noise_universe: 1000,
            },
            Family::ZipfWithScans {
                universe: 1000,
                exponent: 0.8,
                scan: 50,
                every: 200,
            },
            Family::ShiftingWorkingSet {
                size: 300,
                exponent: 0.7,
                phase: 1000,
                shift: 100,
            },
            Family::SequentialAndRandom {
                universe: 500,
                exponent: 0.9,
                region: 2000,
                run: 64,
                sequential: 0.3,
            },
            Family::OneHitWonders {
                universe: 500,
                exponent: 0.9,
                once: 0.4,
            },
        ]
    }

    #[test]
    fn every_family_gives_what_was_asked_and_repeats_itself() {
        for f in families() {
            let a = f.generate(10_000, 7);
            assert_eq!(a.len(), 10_000, "{}", f.name());
            assert_eq!(a, f.generate(10_000, 7), "{}", f.name());
            assert_ne!(a, f.generate(10_000, 8), "{}", f.name());
            assert_eq!(f.generate(0, 7).len(), 0);
        }
    }

    #[test]
    fn the_families_have_the_shape_they_claim() {
        let fs = families();
        // Loop: 90% of the requests walk 0..100 in order.
        let l = fs[0].generate(10_000, 1);
        let in_loop: Vec<u64> = l.iter().copied().filter(|&id| id < APART).collect();
        assert!((8_500..9_500).contains(&in_loop.len()), "{}", in_loop.len());
        assert!(in_loop.windows(2).all(|w| w[1] == (w[0] + 1) % 100));
        // Scans: every scanned id appears once, 50 per 250 requests.
        let z = fs[1].generate(10_000, 1);
        let scanned: Vec<u64> = z.iter().copied().filter(|&id| id >= APART).collect();
        assert_eq!(scanned.len(), 2_000);
        assert_eq!(scanned.iter().collect::<HashSet<_>>().len(), 2_000);
        // Shifting: each phase's ids lie in its window.
        let s = fs[2].generate(10_000, 1);
        for (phase, ids) in s.chunks(1000).enumerate() {
            let base = phase as u64 * 100;
            assert!(ids.iter().all(|&id| (base..base + 300).contains(&id)));
        }
        // One-hit wonders: about 40% of requests, all distinct.
        let o = fs[4].generate(10_000, 1);
        let once: Vec<u64> = o.iter().copied().filter(|&id| id >= APART).collect();
        assert!((3_700..4_300).contains(&once.len()), "{}", once.len());
        assert_eq!(once.iter().collect::<HashSet<_>>().len(), once.len());
        // Runs: sequential inside the region.
        let q = fs[3].generate(10_000, 1);
        let runs: Vec<u64> = q.iter().copied().filter(|&id| id >= APART).collect();
        assert!(runs.iter().all(|&id| id < APART + 2000));
        let steps = runs.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(steps * 10 > runs.len() * 9, "{steps} of {}", runs.len());
    }

    #[test]
    fn spread_is_a_permutation() {
        for size in [1, 2, 3, 300, 1024, 1025] {
            let all: HashSet<u64> = (0..size).map(|r| spread(r, size)).collect();
            assert_eq!(all.len() as u64, size);
            assert!(all.iter().all(|&x| x < size));
        }
    }
}
