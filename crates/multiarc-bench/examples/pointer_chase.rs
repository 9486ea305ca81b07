//! The time of one dependent load that misses the CPU caches on this
//! machine: a chain of loads through a random cycle over a working set,
//! each load's address taken from the one before (so none overlaps
//! another), on ordinary 4 KiB pages as the caches' tables and entries are.
//! Issue 42 asks how many such misses a cache hit costs where hardware
//! counters are not available (this VM exposes none to `perf stat`): a hit
//! of `t` ns costs at most about `t / chase` of them.
//!
//! ```text
//! cargo run --release -p multiarc-bench --example pointer_chase -- [WORKING_SET_MIB ...]
//! ```
//!
//! Default working sets: 1, 16, 256 and 4096 MiB (L2, L3, past L3, far
//! past it). Prints one line per working set: nanoseconds per dependent
//! load, the median of 5 runs of 10 million loads.

use std::hint::black_box;
use std::time::Instant;

/// One cache line: the index of the next line, and padding.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line {
    next: u64,
    _pad: [u64; 7],
}

/// A random cycle through `lines` lines (Sattolo's algorithm: one cycle
/// through all of them).
fn cycle(lines: usize, seed: u64) -> Vec<Line> {
    let mut order: Vec<u64> = (0..lines as u64).collect();
    let mut x = seed | 1;
    for i in (1..lines).rev() {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = (r % i as u64) as usize;
        order.swap(i, j);
    }
    let mut v = vec![
        Line {
            next: 0,
            _pad: [0; 7]
        };
        lines
    ];
    for w in 0..lines {
        let from = order[w] as usize;
        let to = order[(w + 1) % lines];
        v[from].next = to;
    }
    v
}

fn chase(v: &[Line], steps: u64) -> f64 {
    let mut at = 0u64;
    let started = Instant::now();
    for _ in 0..steps {
        at = v[at as usize].next;
    }
    black_box(at);
    started.elapsed().as_nanos() as f64 / steps as f64
}

fn main() {
    let sets: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .unwrap_or_else(|_| panic!("{a:?}: give working sets in MiB"))
        })
        .collect();
    let sets = if sets.is_empty() {
        vec![1, 16, 256, 4096]
    } else {
        sets
    };
    for mib in sets {
        let lines = (mib << 20) as usize / std::mem::size_of::<Line>();
        let v = cycle(lines.max(2), 0x5EED ^ mib);
        chase(&v, 1_000_000); // warm the pages and the TLB's upper levels
        let mut runs: Vec<f64> = (0..5).map(|_| chase(&v, 10_000_000)).collect();
        runs.sort_by(f64::total_cmp);
        println!(
            "{mib} MiB: {:.1} ns per dependent load (median of 5; {:.1}-{:.1})",
            runs[2], runs[0], runs[4]
        );
    }
}
