//! Shared by the library's integration tests: deterministic synthetic traces
//! and the shared trace data beside the checkout.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared` beside the checkout (or `$MULTIARC_SHARED`), if present.
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("MULTIARC_SHARED") {
        return Some(PathBuf::from(dir)).filter(|d| d.is_dir());
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    dir.is_dir().then_some(dir)
}

/// The CloudPhysics trace expanded to `block_size` blocks (every block each
/// request overlaps, in order), or `None` where the file is absent.
pub fn cloudphysics_blocks(block_size: u64) -> Option<Vec<u64>> {
    let path = shared_dir()?.join("traces/cloudphysics_io.csv");
    let file = std::fs::File::open(&path).ok()?;
    let reader = multiarc::trace::TraceReader::new(
        std::io::BufReader::new(file),
        multiarc::trace::TraceFormat::CloudPhysics { block_size },
    );
    Some(
        reader
            .map(|r| r.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .collect(),
    )
}

/// A xorshift64 generator: fast, deterministic, good enough for traces.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `n` uniformly random ids in `0..universe`.
pub fn random(n: usize, universe: u64, seed: u64) -> Vec<u64> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.next() % universe).collect()
}

/// `0, 1, ..., loop_len - 1, 0, 1, ...`: defeats LRU when the loop is larger
/// than the cache.
pub fn looping(n: usize, loop_len: u64) -> Vec<u64> {
    (0..n as u64).map(|i| i % loop_len).collect()
}

/// A hot set of `hot` ids read at random, with a one-pass sequential scan of
/// `scan_len` fresh ids interleaved (one scan id after every two hot ones).
pub fn scan_mixed(n: usize, hot: u64, scan_len: u64, seed: u64) -> Vec<u64> {
    let mut r = Rng::new(seed);
    let mut next_scan = 0;
    (0..n)
        .map(|i| {
            if i % 3 == 2 && next_scan < scan_len {
                next_scan += 1;
                1_000_000_000 + next_scan
            } else {
                r.next() % hot
            }
        })
        .collect()
}

/// `n` ids in `0..universe` drawn from a Zipf distribution with the given
/// exponent (id 0 the most popular), by inverting the cumulative weights.
pub fn zipf(n: usize, universe: u64, exponent: f64, seed: u64) -> Vec<u64> {
    let mut cumulative = Vec::with_capacity(universe as usize);
    let mut total = 0.0;
    for i in 1..=universe {
        total += 1.0 / (i as f64).powf(exponent);
        cumulative.push(total);
    }
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let u = r.unit() * total;
            cumulative.partition_point(|&c| c < u) as u64
        })
        .collect()
}
