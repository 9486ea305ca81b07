//! `multiarc poison`: the FreeBSD 11.2 ARC report's program, against the
//! cache. A cache of `--max-bytes` M; objects A and B each larger than M,
//! read block by block through `get_or_load` (a read-through loader that
//! makes the block's bytes):
//!
//! 1. `--reads` random reads of A (random offsets, random lengths up to
//!    256 KiB);
//! 2. one sequential read of all of B;
//! 3. random reads of A again;
//! 4. `set_max_bytes(M - 1)`;
//! 5. random reads of A again.
//!
//! In the report, phase 3 stayed 30% slower than phase 1 until the one-byte
//! resize of step 4 repaired it. A cache that recovers by itself shows phase
//! 3's final window (its last 20% of reads) within 2 points of phases 1 and 5.

use crate::cli::{enum_arg, size_arg};
use crate::harness::Bar;
use crate::outln;
use anyhow::bail;
use multiarc::units::{check_fits_in_memory, human_bytes};
use multiarc::{BlockKey, Cache, HitMode, Policy};
use rand::RngExt;
use serde::Serialize;
use std::time::Instant;

/// Memory per cache entry beside its bytes (entry, hash slot, list links),
/// a guess on the high side for the memory check.
const BYTES_PER_ENTRY: u64 = 256;

/// Arguments of `multiarc poison`.
#[derive(clap::Args, Debug)]
pub struct PoisonArgs {
    /// The cache size M.
    #[arg(long, value_parser = size_arg, default_value = "128MiB")]
    max_bytes: u64,
    /// Size of object A (read at random; must exceed M).
    #[arg(long, value_parser = size_arg, default_value = "192MiB")]
    a_bytes: u64,
    /// Size of object B (read once, sequentially; must exceed M).
    #[arg(long, value_parser = size_arg, default_value = "256MiB")]
    b_bytes: u64,
    /// Block size of the cache's block API.
    #[arg(long, value_parser = size_arg, default_value = "8KiB")]
    block_size: u64,
    /// Random reads in each of phases 1, 3 and 5.
    #[arg(long, default_value_t = 300_000)]
    reads: u64,
    /// Hit mode: lazy (default) or eager.
    #[arg(long, value_parser = enum_arg::<HitModeArg>("hit mode"), default_value = "lazy")]
    hit_mode: HitModeArg,
    /// The cache's replacement policy: arc (default; CAR's clocks with lazy
    /// hits), s3arc (S3-FIFO's probationary queue with ARC's ghosts and
    /// adaptation; lazy hits only) or adaptive (the two as experts, switched
    /// on regrets; lazy hits only).
    #[arg(long, value_parser = enum_arg::<PolicyArg>("policy"), default_value = "arc")]
    policy: PolicyArg,
    /// Print one JSON document on stdout instead of the report.
    #[arg(long)]
    json: bool,
}

/// `--hit-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum HitModeArg {
    /// [`HitMode::Lazy`].
    Lazy,
    /// [`HitMode::Eager`].
    Eager,
}

impl HitModeArg {
    fn mode(self) -> HitMode {
        match self {
            HitModeArg::Lazy => HitMode::Lazy,
            HitModeArg::Eager => HitMode::Eager,
        }
    }

    /// The name `--hit-mode` takes (and the JSON shows).
    fn name(self) -> &'static str {
        match self {
            HitModeArg::Lazy => "lazy",
            HitModeArg::Eager => "eager",
        }
    }
}

/// `--policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PolicyArg {
    /// [`Policy::Arc`].
    Arc,
    /// [`Policy::S3arc`].
    S3arc,
    /// [`Policy::Adaptive`].
    Adaptive,
}

impl PolicyArg {
    fn policy(self) -> Policy {
        match self {
            PolicyArg::Arc => Policy::Arc,
            PolicyArg::S3arc => Policy::S3arc,
            PolicyArg::Adaptive => Policy::Adaptive,
        }
    }

    /// The name `--policy` takes (and the JSON shows).
    fn name(self) -> &'static str {
        match self {
            PolicyArg::Arc => "arc",
            PolicyArg::S3arc => "s3arc",
            PolicyArg::Adaptive => "adaptive",
        }
    }
}

#[derive(Serialize)]
struct PhaseResult {
    phase: u32,
    reads: u64,
    reads_per_sec: f64,
    hit_ratio: f64,
    /// Over the phase's last 20% of reads (phase 2: the whole scan).
    final_window_hit_ratio: f64,
    /// The cache's target size and MRU target at the end of the phase.
    c: u64,
    p: u64,
}

#[derive(Serialize)]
struct PoisonConfig {
    max_bytes: u64,
    a_bytes: u64,
    b_bytes: u64,
    block_size: u64,
    reads: u64,
    hit_mode: String,
    policy: String,
}

#[derive(Serialize)]
struct PoisonReport {
    config: PoisonConfig,
    phases: Vec<PhaseResult>,
    /// Phase 3's final window within 2 points of phase 1's and of phase 5's.
    recovered: bool,
}

struct Reader<'a> {
    cache: &'a Cache<BlockKey>,
    block: u64,
}

impl Reader<'_> {
    /// Reads [offset, offset + len) of `object`; returns (hits, lookups).
    fn read(&self, object: u64, offset: u64, len: u64) -> (u64, u64) {
        let (mut hits, mut lookups) = (0, 0);
        for b in offset / self.block..(offset + len).div_ceil(self.block) {
            let mut loaded = false;
            let h = self
                .cache
                .get_or_load(BlockKey::new(object, b), || {
                    loaded = true;
                    Ok::<_, std::convert::Infallible>(vec![(object ^ b) as u8; self.block as usize])
                })
                .unwrap_or_else(|e| match *e {});
            debug_assert_eq!(h[0], (object ^ b) as u8);
            hits += !loaded as u64;
            lookups += 1;
        }
        (hits, lookups)
    }
}

/// Runs the benchmark.
pub fn run(args: PoisonArgs) -> anyhow::Result<()> {
    let mode = args.hit_mode.mode();
    if args.block_size == 0 || args.max_bytes < args.block_size.saturating_mul(2) {
        bail!(
            "--max-bytes ({}) must hold at least two blocks of --block-size ({})",
            args.max_bytes,
            args.block_size
        );
    }
    // The cache holds up to M of blocks (plus its overflow margin) and
    // keeps an entry per block, cached or ghost.
    let blocks = args.max_bytes / args.block_size;
    check_fits_in_memory(
        &format!(
            "--max-bytes {} ({blocks} blocks of --block-size {})",
            human_bytes(args.max_bytes),
            human_bytes(args.block_size)
        ),
        args.max_bytes
            .saturating_add(args.max_bytes >> 8)
            .saturating_add(blocks.saturating_mul(2 * BYTES_PER_ENTRY)),
    )?;
    for (name, bytes) in [("--a-bytes", args.a_bytes), ("--b-bytes", args.b_bytes)] {
        if bytes <= args.max_bytes {
            bail!(
                "{name} ({bytes}) must be larger than --max-bytes ({})",
                args.max_bytes
            );
        }
    }
    if args.reads < 5 {
        bail!("--reads must be at least 5");
    }
    let cache: Cache<BlockKey> = Cache::builder()
        .max_bytes(args.max_bytes)
        .min_bytes((args.max_bytes / 4).max(1))
        .hit_mode(mode)
        .policy(args.policy.policy())
        .build()
        .map_err(|e| anyhow::anyhow!("--policy {}: {e}", args.policy.name()))?;
    let reader = Reader {
        cache: &cache,
        block: args.block_size,
    };
    let mut rng = multiarc_sim::workload::rng(0xF00D);
    let phase2_reads = args.b_bytes.div_ceil(256 << 10);
    let bar = Bar::counting(
        "poison",
        args.reads.saturating_mul(3).saturating_add(phase2_reads),
        "reads",
        args.json,
    );
    let mut done = 0u64;
    let mut phases = Vec::new();
    for phase in 1..=5u32 {
        if phase == 4 {
            cache.set_max_bytes(args.max_bytes - 1)?;
            bar.println("phase 4: set_max_bytes(M - 1)".to_string());
            continue;
        }
        let started = Instant::now();
        let (mut hits, mut lookups, mut w_hits, mut w_lookups) = (0u64, 0u64, 0u64, 0u64);
        let (mut last_report, mut since_hits, mut since_lookups) = (Instant::now(), 0u64, 0u64);
        bar.doing(format!("phase {phase}"));
        let reads = if phase == 2 { phase2_reads } else { args.reads };
        for i in 0..reads {
            let (h, l) = if phase == 2 {
                let offset = i * (256 << 10);
                reader.read(2, offset, (256 << 10).min(args.b_bytes - offset))
            } else {
                // Up to 256 KiB, and shorter than A (--a-bytes > --max-bytes
                // >= 2 blocks, so A has at least 2 bytes).
                let len = rng.random_range(1..=(256 << 10).min(args.a_bytes - 1));
                let offset = rng.random_range(0..args.a_bytes - len);
                reader.read(1, offset, len)
            };
            hits += h;
            lookups += l;
            since_hits += h;
            since_lookups += l;
            if phase == 2 || i >= reads - reads / 5 {
                w_hits += h;
                w_lookups += l;
            }
            if (i + 1) % 4096 == 0 {
                bar.set_done(done + i + 1);
            }
            if (i + 1) % 100_000 == 0 {
                let secs = last_report.elapsed().as_secs_f64();
                bar.println(format!(
                    "phase {phase}: {} reads, {:.0} reads/s, hit ratio {:.3} (last 100k: {:.3})",
                    i + 1,
                    100_000.0 / secs,
                    hits as f64 / lookups as f64,
                    since_hits as f64 / since_lookups as f64
                ));
                last_report = Instant::now();
                since_hits = 0;
                since_lookups = 0;
            }
        }
        let s = cache.stats();
        let r = PhaseResult {
            phase,
            reads,
            reads_per_sec: reads as f64 / started.elapsed().as_secs_f64(),
            hit_ratio: hits as f64 / lookups as f64,
            final_window_hit_ratio: w_hits as f64 / w_lookups.max(1) as f64,
            c: s.c,
            p: s.p,
        };
        done += reads;
        bar.set_done(done);
        bar.println(format!(
            "phase {phase} done: {} reads, {:.0} reads/s, hit ratio {:.3}, final window {:.3}, c {} p {}",
            r.reads, r.reads_per_sec, r.hit_ratio, r.final_window_hit_ratio, r.c, r.p
        ));
        phases.push(r);
    }
    bar.finish(&format!("{done} reads in 5 phases"));
    let w = |k: u32| {
        phases
            .iter()
            .find(|p| p.phase == k)
            .map(|p| p.final_window_hit_ratio)
            .expect("phase ran")
    };
    let (w1, w3, w5) = (w(1), w(3), w(5));
    let recovered = (w3 - w1).abs() <= 0.02 && (w3 - w5).abs() <= 0.02;
    if args.json {
        let report = PoisonReport {
            config: PoisonConfig {
                max_bytes: args.max_bytes,
                a_bytes: args.a_bytes,
                b_bytes: args.b_bytes,
                block_size: args.block_size,
                reads: args.reads,
                hit_mode: args.hit_mode.name().to_string(),
                policy: args.policy.name().to_string(),
            },
            phases,
            recovered,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!("phase  reads     reads/s  hit ratio  final window")?;
        for p in &phases {
            outln!(
                "{:>5} {:>6} {:>11.0} {:>10.3} {:>13.3}",
                p.phase,
                p.reads,
                p.reads_per_sec,
                p.hit_ratio,
                p.final_window_hit_ratio
            )?;
        }
        outln!(
            "phase 3 final window {w3:.3}: {:+.3} vs phase 1, {:+.3} vs phase 5 -> {}",
            w3 - w1,
            w3 - w5,
            if recovered {
                "recovered by itself (within 2 points)"
            } else {
                "NOT recovered (more than 2 points off)"
            }
        )?;
    }
    Ok(())
}
