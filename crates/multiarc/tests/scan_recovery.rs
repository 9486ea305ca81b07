//! Scan recovery: the FreeBSD 11.2 report's program, scaled down, against
//! the library with its production configuration (background evict thread,
//! default sublists). A cache of M bytes; objects A and B each larger than M.
//!
//! 1. random reads of A (random offsets, lengths up to 256 KiB, block by
//!    block through `get_or_load`);
//! 2. one sequential read of all of B;
//! 3. random reads of A again;
//! 4. `set_max_bytes(M - 1)`;
//! 5. random reads of A again.
//!
//! In the report, phase 3 stayed 30% slower until step 4's one-byte resize.
//! Here the cache must recover by itself: phase 3's hit ratio over its last
//! 20% of reads is within 2 points of phase 1's and of phase 5's, the target
//! size does not collapse, and the adaptation keeps working (ghost hits move
//! `p` in phase 3).

mod common;

use multiarc::{BlockKey, Builder, Cache, HitMode};
use multiarc_sim::workload::SimRng;
use rand::RngExt;

const BLOCK: u64 = 8192;
const M: u64 = 8 << 20;
const A_BYTES: u64 = 12 << 20;
const B_BYTES: u64 = 24 << 20;
const READS: usize = 60_000;

struct Phase {
    /// Lowest and highest `p` seen (sampled every 500 reads).
    p_range: (u64, u64),
    hits: u64,
    lookups: u64,
    window_hits: u64,
    window_lookups: u64,
}

impl Phase {
    fn ratio(&self) -> f64 {
        self.hits as f64 / self.lookups as f64
    }
    fn window_ratio(&self) -> f64 {
        self.window_hits as f64 / self.window_lookups as f64
    }
}

/// Reads [offset, offset + len) of `object` block by block; counts hits.
fn read(cache: &Cache<BlockKey>, object: u64, offset: u64, len: u64) -> (u64, u64) {
    let (mut hits, mut lookups) = (0, 0);
    for block in offset / BLOCK..(offset + len).div_ceil(BLOCK) {
        let mut loaded = false;
        let h = cache
            .get_or_load(BlockKey::new(object, block), || {
                loaded = true;
                Ok::<_, std::io::Error>(vec![object as u8; BLOCK as usize])
            })
            .unwrap();
        assert_eq!(h[0], object as u8);
        hits += !loaded as u64;
        lookups += 1;
    }
    (hits, lookups)
}

fn random_reads(cache: &Cache<BlockKey>, rng: &mut SimRng) -> Phase {
    let mut p = Phase {
        p_range: (u64::MAX, 0),
        hits: 0,
        lookups: 0,
        window_hits: 0,
        window_lookups: 0,
    };
    for i in 0..READS {
        let len = rng.random_range(1..=256 << 10);
        let offset = rng.random_range(0..A_BYTES - len);
        let (h, l) = read(cache, 1, offset, len);
        p.hits += h;
        p.lookups += l;
        if i % 500 == 0 {
            let now = cache.stats().p;
            p.p_range = (p.p_range.0.min(now), p.p_range.1.max(now));
        }
        if i >= READS * 4 / 5 {
            p.window_hits += h;
            p.window_lookups += l;
        }
    }
    p
}

fn scenario(mode: HitMode) {
    let cache: Cache<BlockKey> = Builder::new()
        .max_bytes(M)
        .min_bytes(M / 4)
        .hit_mode(mode)
        .build()
        .unwrap();
    let mut rng = common::rng(5);
    let p1 = random_reads(&cache, &mut rng);
    let mut b = 0;
    while b < B_BYTES {
        read(&cache, 2, b, 128 << 10);
        b += 128 << 10;
    }
    let before3 = cache.stats();
    let p3 = random_reads(&cache, &mut rng);
    let after3 = cache.stats();
    cache.set_max_bytes(M - 1).unwrap();
    let p5 = random_reads(&cache, &mut rng);
    let s = cache.stats();
    eprintln!(
        "{mode:?}: phase 1 {:.3} (final window {:.3}), phase 3 {:.3} ({:.3}), phase 5 {:.3} ({:.3}); \
         p after the scan {}, in phase 3 {:?}; c {}",
        p1.ratio(),
        p1.window_ratio(),
        p3.ratio(),
        p3.window_ratio(),
        p5.ratio(),
        p5.window_ratio(),
        before3.p,
        p3.p_range,
        s.c
    );
    let (w1, w3, w5) = (p1.window_ratio(), p3.window_ratio(), p5.window_ratio());
    assert!(
        w1 > 0.3,
        "phase 1 barely hits ({w1:.3}): the scenario is mis-sized"
    );
    assert!(
        (w3 - w1).abs() <= 0.02,
        "{mode:?}: phase 3 {w3:.3} vs phase 1 {w1:.3}"
    );
    assert!(
        (w3 - w5).abs() <= 0.02,
        "{mode:?}: phase 3 {w3:.3} vs phase 5 {w5:.3}"
    );
    assert_eq!(after3.c, M, "the target size must not move by itself");
    assert_eq!(s.c, M - 1);
    let ghost_hits = |s: &multiarc::Stats| s.mru_ghost_hits + s.mfu_ghost_hits;
    assert!(
        ghost_hits(&after3) > ghost_hits(&before3),
        "no ghost hits in phase 3: the adaptation is not running"
    );
    assert!(
        p3.p_range.1 > p3.p_range.0,
        "p stuck at {} through phase 3",
        p3.p_range.0
    );
    assert!(s.size <= M + M / 8, "{s:?}");
}

#[test]
fn lazy_recovers_from_a_scan_by_itself() {
    scenario(HitMode::Lazy);
}

#[test]
fn eager_recovers_from_a_scan_by_itself() {
    scenario(HitMode::Eager);
}
