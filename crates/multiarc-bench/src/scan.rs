//! `multiarc scan`: scan resistance. A hot set of `--hot-fraction` of the
//! cache is read with a Zipf or uniform pattern; then, interleaved one for
//! one with hot reads, a single pass over `--scan-multiple` times the cache
//! size of blocks never seen before; then hot reads alone again. The hot
//! set's hit ratio before, during and after the scan tells whether the
//! policy protected it: ARC keeps blocks seen twice in MFU, where a one-pass
//! scan (which only ever enters MRU) should not reach them; LRU lets the scan
//! flush them.

use crate::cli::{enum_arg, name_arg, size_arg};
use crate::harness::Bar;
use crate::outln;
use crate::policies::{self, POLICY_BYTES_PER_BLOCK};
use anyhow::bail;
use multiarc::units::{check_fits_in_memory, human_bytes};
use multiarc_sim::workload::{Uniform, Zipf};
use serde::Serialize;

/// Arguments of `multiarc scan`.
#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// Cache size.
    #[arg(long, value_parser = size_arg, default_value = "64MiB")]
    cache_bytes: u64,
    /// Block size.
    #[arg(long, value_parser = size_arg, default_value = "8KiB")]
    block_size: u64,
    /// The hot set, as a fraction of the cache.
    #[arg(long, default_value_t = 0.5)]
    hot_fraction: f64,
    /// Hot-set access pattern: zipf or uniform.
    #[arg(long, value_parser = enum_arg::<Pattern>("pattern"), default_value = "zipf")]
    pattern: Pattern,
    /// The scan's length in cache sizes.
    #[arg(long, default_value_t = 10)]
    scan_multiple: u64,
    /// Policies: those of `replay --policy` but opt (default: multiarc,
    /// multiarc-eager, multiarc-s3arc, arc, lru and the peers).
    #[arg(long, value_parser = name_arg, value_delimiter = ',')]
    policy: Option<Vec<String>>,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// The hot set's access pattern (`--pattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Pattern {
    /// Zipf, exponent 0.9.
    Zipf,
    /// Every hot block alike.
    Uniform,
}

impl Pattern {
    /// The name `--pattern` takes (and the JSON and the table show).
    fn name(self) -> &'static str {
        match self {
            Pattern::Zipf => "zipf",
            Pattern::Uniform => "uniform",
        }
    }
}

#[derive(Serialize)]
struct ScanResult {
    policy: String,
    before: f64,
    during: f64,
    after: f64,
    /// during / before.
    protected_share: f64,
}

#[derive(Serialize)]
struct ScanReport {
    config: serde_json::Value,
    results: Vec<ScanResult>,
}

/// Hot-set block ids drawn from a Zipf (exponent 0.9) or uniform pattern
/// over `0..blocks`, from the same seed for every policy.
enum HotSet {
    Zipf(Zipf),
    Uniform(Uniform),
}

impl HotSet {
    const SEED: u64 = 0x1234_5678_9ABC_DEF1;

    fn new(blocks: u64, pattern: Pattern) -> HotSet {
        match pattern {
            Pattern::Zipf => HotSet::Zipf(Zipf::new(blocks, 0.9, Self::SEED)),
            Pattern::Uniform => HotSet::Uniform(Uniform::new(blocks, Self::SEED)),
        }
    }

    fn next(&mut self) -> u64 {
        match self {
            HotSet::Zipf(ids) => ids.next(),
            HotSet::Uniform(ids) => ids.next(),
        }
        .expect("the hot set's ids never end")
    }
}

/// Runs the scenario.
pub fn run(args: ScanArgs) -> anyhow::Result<()> {
    if !(args.hot_fraction > 0.0 && args.hot_fraction < 1.0) {
        bail!(
            "--hot-fraction must be between 0 and 1 (exclusive), got {}",
            args.hot_fraction
        );
    }
    if args.block_size == 0 {
        bail!("--block-size must be greater than 0");
    }
    let capacity = args.cache_bytes / args.block_size;
    let hot_blocks = (capacity as f64 * args.hot_fraction) as u64;
    if hot_blocks < 2 || args.scan_multiple == 0 {
        bail!("the cache must hold at least 4 blocks and the scan must be at least one cache long");
    }
    // The policies simulate the cache: they keep each block's key and list
    // links (and a ghost as many again), not its bytes, one policy at a
    // time; the hot set's generators take constant memory.
    check_fits_in_memory(
        &format!(
            "--cache-bytes {} ({capacity} blocks of {}, about {POLICY_BYTES_PER_BLOCK} bytes of bookkeeping each)",
            human_bytes(args.cache_bytes),
            human_bytes(args.block_size)
        ),
        capacity.saturating_mul(POLICY_BYTES_PER_BLOCK),
    )?;
    let Some(scan_blocks) = capacity.checked_mul(args.scan_multiple) else {
        bail!(
            "--scan-multiple {} times {capacity} blocks is past 2^64 blocks",
            args.scan_multiple
        );
    };
    let policy_names: Vec<String> = args.policy.clone().unwrap_or_else(policies::scan_defaults);
    if policy_names.iter().any(|p| p == "opt") {
        bail!("opt needs the future and does not apply here");
    }
    // A name this binary cannot build fails before any policy runs.
    policies::check_names(&policy_names)?;
    // Before: warm up (10 passes' worth of hot reads), then measure as many.
    let phase_reads = 10 * hot_blocks;
    let bar = Bar::counting("scan", policy_names.len() as u64, "policies", args.json);
    let mut results = Vec::new();
    for name in &policy_names {
        let mut policy = policies::build(name, capacity)?;
        let mut hot = HotSet::new(hot_blocks, args.pattern);
        // No policy here needs the future (opt is refused above).
        let mut access = |id: u64| policy.access(0, id, None);
        for _ in 0..phase_reads {
            access(hot.next());
        }
        let measure = |n: u64,
                       access: &mut dyn FnMut(u64) -> bool,
                       hot: &mut HotSet,
                       scan: &mut Option<u64>| {
            let mut hits = 0;
            for _ in 0..n {
                hits += access(hot.next()) as u64;
                if let Some(next) = scan.as_mut() {
                    access(1 << 40 | *next);
                    *next += 1;
                }
            }
            hits as f64 / n as f64
        };
        bar.doing(name.clone());
        let before = measure(phase_reads, &mut access, &mut hot, &mut None);
        let during = measure(scan_blocks, &mut access, &mut hot, &mut Some(0));
        let after = measure(phase_reads, &mut access, &mut hot, &mut None);
        results.push(ScanResult {
            policy: name.clone(),
            before,
            during,
            after,
            protected_share: during / before,
        });
        bar.runs_done(1);
    }
    bar.finish(&format!("{} policies", policy_names.len()));
    if args.json {
        let report = ScanReport {
            config: serde_json::json!({
                "cache_bytes": args.cache_bytes,
                "block_size": args.block_size,
                "capacity_blocks": capacity,
                "hot_blocks": hot_blocks,
                "pattern": args.pattern.name(),
                "scan_blocks": scan_blocks,
            }),
            results,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    outln!(
        "hot set {hot_blocks} blocks ({} pattern) in a {capacity}-block cache; scan of {scan_blocks} new blocks interleaved 1:1 with hot reads",
        args.pattern.name()
    )?;
    outln!(
        "{:<15} {:>8} {:>8} {:>8} {:>12}",
        "policy",
        "before",
        "during",
        "after",
        "during/before"
    )?;
    for r in &results {
        outln!(
            "{:<15} {:>7.1}% {:>7.1}% {:>7.1}% {:>11.1}%",
            r.policy,
            100.0 * r.before,
            100.0 * r.during,
            100.0 * r.after,
            100.0 * r.protected_share
        )?;
    }
    Ok(())
}
