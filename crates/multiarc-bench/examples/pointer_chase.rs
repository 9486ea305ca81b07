//! The time of one dependent load that misses the CPU caches on this
//! machine: a chain of loads through a random cycle over a working set,
//! each load's address taken from the one before (so none overlaps
//! another), on ordinary 4 KiB pages as the caches' tables and entries are.
//! Issue 42 asks how many such misses a cache hit costs where hardware
//! counters are not available (this VM exposes none to `perf stat`): a hit
//! of `t` ns costs at most about `t / chase` of them.
//!
//!
//! Hits that do not depend on each other overlap: the CPU issues the next
//! hit's loads while the last one's are in flight. `--chains K` runs K
//! independent cycles in one loop, so that K misses can be in flight at
//! once, and prints the time per load then: the floor that overlapped
//! misses reach on this machine. A hit that fetches `m` far lines costs at
//! least about `m` times that floor, however well it overlaps; that is the
//! physical bound issue 42 asks for.
//!
//! ```text
//! cargo run --release -p multiarc-bench --example pointer_chase -- [--chains 1,2,4,8,16] [WORKING_SET_MIB ...]
//! ```
//!
//! Default working sets: 1, 16, 256 and 4096 MiB (L2, L3, past L3, far
//! past it); default chains: 1. Prints one line per working set and chain
//! count: nanoseconds per load, the median of 5 runs of 10 million loads.

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

/// `K` chains through the same cycle, started `lines / K` apart, advanced
/// in turn: each load depends on its own chain's last one only, so up to
/// `K` misses are in flight. Returns nanoseconds per load (all chains).
fn chase_overlapped<const K: usize>(v: &[Line], steps: u64) -> f64 {
    let mut at = [0u64; K];
    let mut here = 0u64;
    let apart = (v.len() / K).max(1);
    for (k, slot) in at.iter_mut().enumerate() {
        *slot = here;
        let walk = if k + 1 < K { apart } else { 0 };
        for _ in 0..walk {
            here = v[here as usize].next;
        }
    }
    let rounds = steps / K as u64;
    let started = Instant::now();
    for _ in 0..rounds {
        for a in at.iter_mut() {
            *a = v[*a as usize].next;
        }
    }
    black_box(at);
    started.elapsed().as_nanos() as f64 / (rounds * K as u64) as f64
}

fn run(v: &[Line], chains: usize, steps: u64) -> f64 {
    match chains {
        1 => chase(v, steps),
        2 => chase_overlapped::<2>(v, steps),
        4 => chase_overlapped::<4>(v, steps),
        8 => chase_overlapped::<8>(v, steps),
        16 => chase_overlapped::<16>(v, steps),
        32 => chase_overlapped::<32>(v, steps),
        _ => unreachable!("checked when parsed"),
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("pointer_chase: {problem}");
    eprintln!("usage: pointer_chase [--chains 1,2,4,8,16,32] [WORKING_SET_MIB ...]");
    std::process::exit(2)
}

fn main() {
    let mut sets: Vec<u64> = Vec::new();
    let mut chain_counts = vec![1usize];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--chains" {
            let list = args
                .next()
                .unwrap_or_else(|| usage("--chains needs a list, e.g. 1,2,4,8"));
            chain_counts = list
                .split(',')
                .map(|c| match c.trim().parse() {
                    Ok(n @ (1 | 2 | 4 | 8 | 16 | 32)) => n,
                    _ => usage(&format!("--chains {c:?}: give 1, 2, 4, 8, 16 or 32")),
                })
                .collect();
        } else {
            match a.parse() {
                Ok(mib) if mib > 0 => sets.push(mib),
                _ => usage(&format!(
                    "{a:?}: give working sets in MiB (a whole number above 0)"
                )),
            }
        }
    }
    if sets.is_empty() {
        sets = vec![1, 16, 256, 4096];
    }
    for mib in sets {
        let lines = (mib << 20) as usize / std::mem::size_of::<Line>();
        let v = cycle(lines.max(2), 0x5EED ^ mib);
        chase(&v, 1_000_000); // warm the pages and the TLB's upper levels
        for &chains in &chain_counts {
            let mut runs: Vec<f64> = (0..5).map(|_| run(&v, chains, 10_000_000)).collect();
            runs.sort_by(f64::total_cmp);
            let what = if chains == 1 {
                "ns per dependent load".to_string()
            } else {
                format!("ns per load, {chains} chains in flight")
            };
            println!(
                "{mib} MiB: {:.1} {what} (median of 5; {:.1}-{:.1})",
                runs[2], runs[0], runs[4]
            );
        }
    }
}
