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
    let reader = multiarc_sim::trace::TraceReader::new(
        std::io::BufReader::new(file),
        multiarc_sim::trace::TraceFormat::CloudPhysics { block_size },
    );
    Some(
        reader
            .map(|r| r.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .collect(),
    )
}

use multiarc_sim::workload::{Loop, Scan, SimRng, Uniform, Zipf};

/// A seeded, reproducible generator for tests that draw their own values
/// (with `rand::RngExt`).
pub fn rng(seed: u64) -> SimRng {
    multiarc_sim::workload::rng(seed)
}

/// `n` uniformly random ids in `0..universe`.
pub fn random(n: usize, universe: u64, seed: u64) -> Vec<u64> {
    Uniform::new(universe, seed).take(n).collect()
}

/// `0, 1, ..., loop_len - 1, 0, 1, ...`: defeats LRU when the loop is larger
/// than the cache.
pub fn looping(n: usize, loop_len: u64) -> Vec<u64> {
    Loop::new(loop_len).take(n).collect()
}

/// A hot set of `hot` ids read at random, with a one-pass sequential scan of
/// `scan_len` fresh ids interleaved (one scan id after every two hot ones).
pub fn scan_mixed(n: usize, hot: u64, scan_len: u64, seed: u64) -> Vec<u64> {
    let mut hot = Uniform::new(hot, seed);
    let mut scan = Scan::new(1_000_000_001, scan_len);
    (0..n)
        .map(|i| {
            let from_scan = if i % 3 == 2 { scan.next() } else { None };
            from_scan.unwrap_or_else(|| hot.next().expect("endless"))
        })
        .collect()
}

/// `n` ids in `0..universe` drawn from a Zipf distribution with the given
/// exponent (id 0 the most popular).
pub fn zipf(n: usize, universe: u64, exponent: f64, seed: u64) -> Vec<u64> {
    Zipf::new(universe, exponent, seed).take(n).collect()
}
