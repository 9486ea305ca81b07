//! `multiarc replay`: hit ratios of a block trace under many policies and
//! cache sizes. This module is the command: its arguments, the order of the
//! passes, and the report (table, JSON, chart).
//!
//! The trace is streamed, never held in memory: one pass counts requests and
//! distinct blocks (the distinct set is the one O(distinct) structure, needed
//! to turn fractions into capacities), then one pass per capacity drives
//! every policy side by side. Belady's `opt` needs the future: a pass
//! records, for every request, the index of the next request of the same
//! block (`multiarc_sim::opt::NextUses`: 4 bytes per request while the trace
//! has fewer than 2^32 requests, 8 beyond; 400 MB for 100M requests).
//!
//! Where the pieces are:
//! - the trace's input (a regular file, `.zst` decompressed, the format
//!   guessed) is `multiarc_sim::source`, and its parsing (with its limits:
//!   line length, blocks per request) `multiarc_sim::trace`;
//! - the passes, each checked to read what the first read (a trace written
//!   to meanwhile is an error, not an index out of bounds), are
//!   `multiarc_sim::pass`;
//! - the policies by name, and the multiarc ones with a second tier for
//!   `--l2`, are [`crate::policies`].
//!
//! A policy is built with at most the capacity that holds all of the
//! trace's distinct blocks ([`built_capacity`]): past it nothing is evicted
//! and the hits are the same, so `--capacity 1TiB` costs no more memory than
//! the trace. What the policies, opt's next uses and the distinct set need
//! is checked against the machine's available memory.

use crate::cli::{enum_arg, name_arg};
use crate::harness::Bar;
use crate::peers;
use crate::plot;
use crate::policies::{
    self, built_capacity, can_have_tier, check_room, Policy, TierOptions, MAX_TIER_BLOCKS,
    POLICY_BYTES_PER_BLOCK,
};
use crate::{out, outln};
use anyhow::{bail, Context};
use multiarc::units::{check_fits_in_memory, parse_size, MachineMemory};
use multiarc_sim::distinct::DistinctBlocks;
use multiarc_sim::opt::{NextUseRecorder, NextUses};
use multiarc_sim::pass::Pass;
use multiarc_sim::source::{guess_format, TraceFile, TraceSource};
use multiarc_sim::trace::TraceFormat;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `multiarc replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace file (plain text, or zstd-compressed when it ends in .zst);
    /// a regular file, not a FIFO: it is read once per pass.
    trace: PathBuf,
    /// Trace format: ids, arc (the ARC paper's .lis), cloudphysics, csv.
    /// Default: arc for *.lis[.zst], cloudphysics for a CSV whose header
    /// starts with `version,`, else ids.
    #[arg(long, value_parser = enum_arg::<FormatName>("trace format"))]
    format: Option<FormatName>,
    /// Block size in bytes (at least 1), for cloudphysics byte ranges and
    /// byte capacities.
    #[arg(long, default_value = "8192", value_parser = crate::cli::size_arg)]
    block_size: u64,
    /// Column (0-based) of the block id, for --format csv.
    #[arg(long)]
    id_column: Option<usize>,
    /// The CSV's first line is a header, for --format csv.
    #[arg(long)]
    header: bool,
    /// Cache sizes: fractions of the distinct blocks (0.01), block counts
    /// (5000) or byte sizes (64MiB), comma-separated.
    #[arg(long, value_parser = name_arg, value_delimiter = ',', default_value = "0.01,0.05,0.1,0.2")]
    capacity: Vec<String>,
    /// Policies: multiarc, multiarc-eager, multiarc-lazy, multiarc-s3arc
    /// (the cache with its S3ARC policy), multiarc-adaptive (with its
    /// adaptive policy), multiarc-gen (with its generations policy), arc,
    /// car, lru, s3arc (S3ARC's
    /// page-based model), adaptive (the adaptive policy's), adaptive-mini
    /// (its experts switched by miniature simulations), car-eager-t1,
    /// car-lru-t2, car-eager-t1-lru-t2 (CAR with its approximations of
    /// ARC taken away), car-t2-laps-2, car-t2-laps-4 (T2's hand gives a
    /// lap per hit), car-t2-aged-125, -250, -500, car-t2-aged-125-gated (T2
    /// in aged order), the arc-gen-* variants (ARC with T2 in coarse
    /// generations; `multiarc_sim::generations::NAMES`), s3fifo
    /// (S3-FIFO), lirs (LIRS), opt, and the peers
    /// moka, quick_cache, foyer, tinyufo, concread-arc, mutex-lru. Default:
    /// multiarc, multiarc-s3arc, arc, lru, opt and the peers.
    #[arg(long, value_parser = name_arg, value_delimiter = ',')]
    policy: Option<Vec<String>>,
    /// Second-tier sizes for the multiarc policies (multiarc,
    /// multiarc-eager, multiarc-lazy, multiarc-s3arc, multiarc-adaptive,
    /// multiarc-gen), comma-separated, in the syntax of
    /// --capacity: each multiarc policy runs with memory of each --capacity
    /// plus an L2 (OpenZFS's L2ARC) of each size, on a device file in
    /// --l2-dir, the feed driven synchronously. Other policies run as without it.
    #[arg(long, value_parser = name_arg, value_delimiter = ',')]
    l2: Option<Vec<String>>,
    /// Where the --l2 device files go (default: the system's temporary
    /// directory); they are removed afterwards.
    #[arg(long)]
    l2_dir: Option<PathBuf>,
    /// Feed only MFU buffers to the --l2 tier (OpenZFS's l2arc_mfuonly).
    #[arg(long)]
    l2_mfu_only: bool,
    /// Bytes of copies the --l2 tier's hand may keep where they are per
    /// byte of new buffers (`Builder::l2_keep_ratio`, default 32; 0: it
    /// overwrites whatever it reaches, as OpenZFS's L2ARC does).
    #[arg(long)]
    l2_keep_ratio: Option<u64>,
    /// A copy read back from the --l2 tier enters memory as a new block
    /// (MRU, ARC's p left alone), not as a ghost hit of the list it was
    /// fed from (`Builder::l2_readback_as_new`).
    #[arg(long)]
    l2_readback_as_new: bool,
    /// Seed of the multiarc rows' random choices (`Builder::seed`: their
    /// key hasher and where each eviction walk starts among the sublists).
    /// Those rows evict inline, so a replay with the same seed gives the
    /// same rows in every run, whatever other policies are listed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Draw hit ratio against capacity into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--seed` when not given: fixed, so that a replay gives the same numbers
/// wherever and whenever it runs.
const DEFAULT_SEED: u64 = 0;

/// The trace formats `--format` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FormatName {
    /// One block id per line.
    Ids,
    /// The ARC paper's `.lis` traces.
    Arc,
    /// CloudPhysics CSV traces (byte ranges).
    Cloudphysics,
    /// Any CSV, the block id in `--id-column`.
    Csv,
}

#[derive(Serialize)]
struct ReplayResult {
    policy: String,
    capacity_blocks: u64,
    /// The second tier's size in blocks (0: memory only).
    l2_capacity_blocks: u64,
    /// Hits of either tier.
    hits: u64,
    /// Of them, served by the second tier.
    l2_hits: u64,
    /// Bytes written to the second tier's device (buffers, each in a 4 KiB
    /// unit, and log blocks; 0 without one).
    l2_write_bytes: u64,
    /// Copies its hand kept and wrote again.
    l2_kept: u64,
    /// Blocks memory evicted that the second tier had no copy of (its feed
    /// had not reached them; each replayed block is one byte).
    l2_evicted_uncopied: u64,
    /// Hits of either tier per request.
    hit_ratio: f64,
}

#[derive(Serialize)]
struct ReplayReport {
    trace: String,
    format: String,
    requests: u64,
    distinct: u64,
    /// `--seed`.
    seed: u64,
    results: Vec<ReplayResult>,
}

/// The format `--format` names, or the one the trace's name and first
/// line suggest; with the CSV's and CloudPhysics' settings.
fn parse_format(args: &ReplayArgs, source: &dyn TraceSource) -> anyhow::Result<TraceFormat> {
    let format = match args.format {
        Some(FormatName::Ids) => TraceFormat::Ids,
        Some(FormatName::Arc) => TraceFormat::Arc,
        Some(FormatName::Cloudphysics) => TraceFormat::CloudPhysics {
            block_size: args.block_size,
        },
        Some(FormatName::Csv) => TraceFormat::Csv {
            id_column: args
                .id_column
                .context("--format csv needs --id-column N (0-based)")?,
            header: args.header,
        },
        None => guess_format(source, args.block_size)?,
    };
    if args.id_column.is_some() && !matches!(format, TraceFormat::Csv { .. }) {
        bail!("--id-column applies to --format csv only");
    }
    Ok(format)
}

fn parse_capacity(text: &str, distinct: u64, block_size: u64) -> anyhow::Result<u64> {
    let blocks = if text.contains('.') && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let f: f64 = text.parse().with_context(|| format!("capacity {text:?}"))?;
        if !(f > 0.0 && f <= 1.0) {
            bail!("capacity fraction {text:?} must be in (0, 1]");
        }
        (distinct as f64 * f).round() as u64
    } else if text.chars().all(|c| c.is_ascii_digit()) {
        text.parse().with_context(|| format!("capacity {text:?}"))?
    } else {
        parse_size(text).with_context(|| format!("capacity {text:?}"))? / block_size
    };
    if blocks == 0 {
        bail!("capacity {text:?} is less than one block");
    }
    Ok(blocks)
}

/// What a replay found.
struct Outcome {
    requests: u64,
    distinct: u64,
    /// The capacities asked for, in blocks.
    capacities: Vec<u64>,
    results: Vec<ReplayResult>,
}

/// What to replay a trace under.
struct Plan {
    /// The policies, by name.
    policies: Vec<String>,
    /// The `--capacity` items, as given.
    capacities: Vec<String>,
    /// The `--l2` items, as given (none: memory only).
    tier_sizes: Vec<String>,
    /// Where the second tiers go, and how they are fed.
    tier: TierOptions,
    /// Bytes per block, for byte capacities.
    block_size: u64,
    /// The multiarc rows' seed.
    seed: u64,
}

/// Replays `source` under every policy of `plan` at every capacity, each
/// multiarc policy once per second-tier size when there are any. Every
/// pass must read what the first one read.
fn replay(
    source: &dyn TraceSource,
    format: TraceFormat,
    plan: &Plan,
    bar: &Bar,
) -> anyhow::Result<Outcome> {
    let Plan {
        policies: policy_names,
        capacities: capacity,
        tier_sizes,
        tier,
        block_size,
        seed,
    } = plan;
    let block_size = *block_size;
    bar.doing("counting requests and distinct blocks".to_string());
    // The distinct set is the one structure that grows with the trace:
    // stop when it would not fit in the memory available at the start.
    let memory = MachineMemory::of_this_machine();
    let mut distinct_set = DistinctBlocks::new();
    let first = Pass::read(source, format, |id| -> anyhow::Result<()> {
        if distinct_set.insert(id) && distinct_set.len().is_multiple_of(1 << 20) {
            if let Some(m) = memory {
                // Doubled while its table grows.
                let bytes = distinct_set.bytes() * 2;
                m.check_fits(
                    &format!(
                        "{}: counting its distinct blocks ({} so far)",
                        source.name(),
                        distinct_set.len()
                    ),
                    bytes,
                )?;
            }
        }
        Ok(())
    })?;
    let requests = first.requests;
    let distinct = distinct_set.len();
    drop(distinct_set);
    let mut capacities = Vec::new();
    for c in capacity {
        let blocks = parse_capacity(c, distinct, block_size)?;
        // What the policies will hold at most: the trace's blocks.
        let built = blocks.min(distinct).max(1);
        check_fits_in_memory(
            &format!(
                "--capacity {c} ({built} blocks in use, {} policies, about {POLICY_BYTES_PER_BLOCK} bytes a block each)",
                policy_names.len()
            ),
            built
                .saturating_mul(policy_names.len() as u64)
                .saturating_mul(POLICY_BYTES_PER_BLOCK),
        )?;
        capacities.push(blocks);
    }
    let mut tier_blocks = Vec::new();
    for c in tier_sizes {
        let blocks =
            parse_capacity(c, distinct, block_size).with_context(|| format!("--l2 {c}"))?;
        if blocks > MAX_TIER_BLOCKS {
            bail!("--l2 {c}: {blocks} blocks is more than a replay's second tier takes (2^36)");
        }
        tier_blocks.push(blocks);
    }
    check_room(&tier_blocks, &tier.dir)?;
    // The rows: each policy, and each multiarc one once per L2 size.
    let rows: Vec<(String, u64)> = policy_names
        .iter()
        .flat_map(|p| -> Vec<(String, u64)> {
            if can_have_tier(p) && !tier_blocks.is_empty() {
                tier_blocks.iter().map(|&b| (p.clone(), b)).collect()
            } else {
                vec![(p.clone(), 0)]
            }
        })
        .collect();
    // The passes still to come: opt's, then one per capacity.
    let opt = policy_names.iter().any(|p| p == "opt");
    let passes = capacities.len() as u64 + opt as u64;
    bar.set_total(requests.saturating_mul(passes));
    let mut done = 0u64;
    let next = if opt {
        bar.doing("opt: next uses".to_string());
        let width = NextUses::bytes_per_request(requests);
        check_fits_in_memory(
            &format!(
                "--policy opt (the next use of each of the trace's {requests} block requests, {width} bytes each)"
            ),
            requests.saturating_mul(width),
        )?;
        let mut recorder = NextUseRecorder::new(requests);
        first.read_again(source, format, "opt", |i, id| -> anyhow::Result<()> {
            recorder.record(i, id);
            if (i + 1).is_multiple_of(1 << 18) {
                bar.set_done(done + i + 1);
            }
            Ok(())
        })?;
        done += requests;
        bar.set_done(done);
        Some(recorder.finish())
    } else {
        None
    };
    let mut results = Vec::new();
    for (ci, &blocks) in capacities.iter().enumerate() {
        let mut running: Vec<(String, u64, Policy, u64)> = rows
            .iter()
            .map(|(p, tier_blocks)| {
                let built = built_capacity(p, blocks, distinct);
                let policy = if *tier_blocks > 0 {
                    policies::build_tiered(p, built, *tier_blocks, tier, *seed)?
                } else {
                    policies::build_replayed(p, built, *seed)?
                };
                Ok((p.clone(), *tier_blocks, policy, 0))
            })
            .collect::<anyhow::Result<_>>()?;
        bar.doing(format!(
            "capacity {blocks} blocks ({}/{})",
            ci + 1,
            capacities.len()
        ));
        // Each request is announced to the policies (a prefetch hint)
        // `LOOKAHEAD` requests before it is driven, in trace order.
        let mut ahead = Lookahead::new();
        first.read_again(
            source,
            format,
            &format!("capacity {blocks}"),
            |i, id| -> anyhow::Result<()> {
                for (_, _, policy, _) in running.iter() {
                    policy.prefetch(id);
                }
                if let Some((j, due)) = ahead.push(i, id) {
                    drive(&mut running, j, due, next.as_ref());
                }
                if (i + 1).is_multiple_of(1 << 18) {
                    bar.set_done(done + i + 1);
                }
                Ok(())
            },
        )?;
        for (j, due) in ahead.drain() {
            drive(&mut running, j, due, next.as_ref());
        }
        done += requests;
        bar.set_done(done);
        for (name, tier_blocks, policy, hits) in running {
            let tier_counts = policy.tier_counts();
            results.push(ReplayResult {
                policy: name,
                capacity_blocks: blocks,
                l2_capacity_blocks: tier_blocks,
                hits,
                l2_hits: tier_counts.hits,
                l2_write_bytes: tier_counts.write_bytes,
                l2_kept: tier_counts.kept,
                l2_evicted_uncopied: tier_counts.evicted_uncopied,
                hit_ratio: hits as f64 / requests as f64,
            });
        }
    }
    Ok(Outcome {
        requests,
        distinct,
        capacities,
        results,
    })
}

/// Requests a replay announces to its policies before driving them: the
/// memory a request will touch first (multiarc: its hash-table slot) is
/// then fetched while the requests before it run.
const LOOKAHEAD: usize = 8;

/// The requests announced and not yet driven, oldest first.
struct Lookahead {
    /// `(request number, block id)`, request `i` at `i % LOOKAHEAD`.
    ring: [(u64, u64); LOOKAHEAD],
    /// Requests pushed so far.
    pushed: u64,
}

impl Lookahead {
    fn new() -> Lookahead {
        Lookahead {
            ring: [(0, 0); LOOKAHEAD],
            pushed: 0,
        }
    }

    /// Adds request `i` (the next in order) for block `id`; returns the
    /// request now due, once `LOOKAHEAD` are waiting.
    #[inline]
    fn push(&mut self, i: u64, id: u64) -> Option<(u64, u64)> {
        let at = (self.pushed % LOOKAHEAD as u64) as usize;
        self.pushed += 1;
        let due = (self.pushed > LOOKAHEAD as u64).then_some(self.ring[at]);
        self.ring[at] = (i, id);
        due
    }

    /// The requests still waiting, oldest first.
    fn drain(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let waiting = self.pushed.min(LOOKAHEAD as u64);
        (self.pushed - waiting..self.pushed).map(|k| self.ring[(k % LOOKAHEAD as u64) as usize])
    }
}

/// Drives request `i` (block `id`) through every running policy, counting
/// its hits.
#[inline]
fn drive(running: &mut [(String, u64, Policy, u64)], i: u64, id: u64, next: Option<&NextUses>) {
    for (_, _, policy, hits) in running.iter_mut() {
        *hits += policy.access(i, id, next) as u64;
    }
}

/// Runs the replay.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    if args.block_size == 0 {
        bail!("--block-size must be at least 1 byte");
    }
    let source = TraceFile::new(&args.trace)?;
    let format = parse_format(&args, &source)?;
    if let Some(path) = &args.plot {
        plot::available(path)?;
    }
    let policy_names: Vec<String> = args
        .policy
        .clone()
        .unwrap_or_else(policies::replay_defaults);
    // Unknown names fail before the long passes.
    policies::check_names(&policy_names)?;
    let tier_sizes = args.l2.clone().unwrap_or_default();
    if !tier_sizes.is_empty() && !policy_names.iter().any(|p| can_have_tier(p)) {
        let tiered: Vec<&str> = peers::MULTIARC_NAMES
            .iter()
            .copied()
            .filter(|p| can_have_tier(p))
            .collect();
        bail!(
            "--l2 applies to the multiarc policies ({}), and --policy has none",
            tiered.join(", ")
        );
    }
    if args.l2.is_none()
        && (args.l2_dir.is_some()
            || args.l2_mfu_only
            || args.l2_keep_ratio.is_some()
            || args.l2_readback_as_new)
    {
        bail!(
            "--l2-dir, --l2-mfu-only, --l2-keep-ratio and --l2-readback-as-new apply with --l2 only"
        );
    }
    let plan = Plan {
        policies: policy_names,
        capacities: args.capacity.clone(),
        tier_sizes,
        tier: TierOptions {
            dir: args.l2_dir.clone().unwrap_or_else(std::env::temp_dir),
            mfu_only: args.l2_mfu_only,
            keep_ratio: args.l2_keep_ratio,
            readback_as_new: args.l2_readback_as_new,
        },
        block_size: args.block_size,
        seed: args.seed,
    };
    let bar = Bar::counting("replay", 0, "requests", args.json);
    let Outcome {
        requests,
        distinct,
        capacities,
        results,
    } = replay(&source, format, &plan, &bar)?;
    bar.finish(&format!("{requests} requests, {distinct} distinct blocks"));

    if let Some(path) = &args.plot {
        let series: Vec<plot::Series> = plan
            .policies
            .iter()
            .map(|p| plot::Series {
                name: p.clone(),
                points: results
                    .iter()
                    .filter(|r| &r.policy == p)
                    .map(|r| (r.capacity_blocks as f64, 100.0 * r.hit_ratio))
                    .collect(),
            })
            .collect();
        plot::line_chart(
            path,
            &format!("Hit ratio: {}", args.trace.display()),
            "cache size (blocks)",
            "hit ratio (%)",
            &series,
            true,
        )?;
    }

    let format_name = format.name();
    if args.json {
        let report = ReplayReport {
            trace: args.trace.display().to_string(),
            format: format_name.into(),
            requests,
            distinct,
            seed: args.seed,
            results,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    outln!(
        "{}: {requests} block requests, {distinct} distinct blocks ({format_name}); hit ratio (%)",
        args.trace.display()
    )?;
    // One line per policy and second-tier size, in the order they ran.
    let mut lines: Vec<(&str, u64)> = Vec::new();
    for r in &results {
        if !lines.contains(&(r.policy.as_str(), r.l2_capacity_blocks)) {
            lines.push((&r.policy, r.l2_capacity_blocks));
        }
    }
    let width = lines
        .iter()
        .map(|(p, l2)| {
            if *l2 > 0 {
                p.len() + 4 + l2.to_string().len()
            } else {
                p.len()
            }
        })
        .max()
        .unwrap_or(0)
        .max(14);
    out!("{:<width$}", "policy")?;
    for c in &capacities {
        out!(" {:>10}", c)?;
    }
    outln!()?;
    for &(p, l2) in &lines {
        let label = if l2 > 0 {
            format!("{p}+l2 {l2}")
        } else {
            p.to_string()
        };
        out!("{label:<width$}")?;
        for &c in &capacities {
            let r = results
                .iter()
                .find(|r| r.policy == p && r.l2_capacity_blocks == l2 && r.capacity_blocks == c)
                .expect("every policy ran at every capacity");
            out!(" {:>10.2}", 100.0 * r.hit_ratio)?;
        }
        outln!()?;
    }
    if lines.iter().any(|&(_, l2)| l2 > 0) {
        outln!("(multiarc+l2 N: memory of the column's size plus a second tier of N blocks; hits of both tiers)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use multiarc_sim::source::SourceError;
    use std::io::BufRead;

    /// `policies` at `capacities` blocks, no second tier.
    fn plan(policies: &[&str], capacities: &[&str]) -> Plan {
        Plan {
            policies: policies.iter().map(|p| p.to_string()).collect(),
            capacities: capacities.iter().map(|c| c.to_string()).collect(),
            tier_sizes: Vec::new(),
            tier: TierOptions {
                dir: PathBuf::from("."),
                mfu_only: false,
                keep_ratio: None,
                readback_as_new: false,
            },
            block_size: 8192,
            seed: DEFAULT_SEED,
        }
    }

    /// A trace whose `k`-th opening reads `texts[k]` (the last one from
    /// then on): a file written to between passes.
    struct Changing {
        texts: Vec<String>,
        opened: std::cell::Cell<usize>,
    }

    impl TraceSource for Changing {
        fn name(&self) -> String {
            "changing.ids".into()
        }
        fn open(&self) -> Result<Box<dyn BufRead>, SourceError> {
            let k = self.opened.get();
            self.opened.set(k + 1);
            let text = self.texts[k.min(self.texts.len() - 1)].clone();
            Ok(Box::new(std::io::Cursor::new(text.into_bytes())))
        }
    }

    fn replay_texts(texts: &[String], policies: &[&str]) -> anyhow::Result<Outcome> {
        let source = Changing {
            texts: texts.to_vec(),
            opened: std::cell::Cell::new(0),
        };
        replay(
            &source,
            TraceFormat::Ids,
            &plan(policies, &["2", "3"]),
            &Bar::hidden(),
        )
    }

    fn ids(n: u64) -> String {
        (0..n).map(|i| format!("{}\n", i % 5)).collect()
    }

    #[test]
    fn a_trace_that_changes_between_passes_is_an_error_not_a_panic() {
        let same = ids(40);
        let grown = ids(41);
        let shrunk = ids(39);
        let other: String = (0..40).map(|i| format!("{}\n", i % 7)).collect();
        assert_eq!(
            replay_texts(std::slice::from_ref(&same), &["opt", "lru"])
                .unwrap()
                .requests,
            40
        );
        // Passes: count, opt's next uses, capacity 2, capacity 3. The trace
        // changes after the count (opt's pass sees it) or after opt's pass
        // (a capacity pass sees it, with next uses for 40 requests only:
        // index 40 was out of bounds).
        // A concurrent cache's row: a peer where there are peers.
        let cache = if cfg!(feature = "peers") {
            "moka"
        } else {
            "multiarc"
        };
        for (policies, passes) in [(&["opt", "lru"][..], 4), (&["lru", cache][..], 3)] {
            for changed in [&grown, &shrunk, &other] {
                for at in 1..passes {
                    let mut texts = vec![same.clone(); at];
                    texts.push(changed.clone());
                    let e = match replay_texts(&texts, policies) {
                        Ok(_) => panic!("{policies:?}, change at pass {at}: no error"),
                        Err(e) => e.to_string(),
                    };
                    assert!(
                        e.contains("changing.ids changed while it was replayed")
                            && e.contains("40 block requests"),
                        "{e}"
                    );
                }
            }
        }
    }

    /// A trace file that gets lines appended just before its `at`-th
    /// opening (0-based): `echo ... >> trace` while replay runs.
    struct AppendedTo {
        file: TraceFile,
        at: usize,
        opened: std::cell::Cell<usize>,
    }

    impl TraceSource for AppendedTo {
        fn name(&self) -> String {
            self.file.name()
        }
        fn open(&self) -> Result<Box<dyn BufRead>, SourceError> {
            let k = self.opened.get();
            self.opened.set(k + 1);
            if k == self.at {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.file.path())
                    .and_then(|mut f| f.write_all(b"1\n2\n"))
                    .expect("appending to the trace");
            }
            self.file.open()
        }
    }

    #[test]
    fn a_trace_file_appended_to_between_passes_is_an_error() {
        let dir =
            std::env::temp_dir().join(format!("multiarc-replay-append-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grows.ids");
        // Passes with opt: count, opt's next uses, one per capacity.
        for at in 1..=2 {
            std::fs::write(&path, ids(40)).unwrap();
            let source = AppendedTo {
                file: TraceFile::new(&path).unwrap(),
                at,
                opened: std::cell::Cell::new(0),
            };
            let e = replay(
                &source,
                TraceFormat::Ids,
                &plan(&["opt", "lru"], &["2"]),
                &Bar::hidden(),
            )
            .err()
            .unwrap_or_else(|| panic!("appended before pass {at}: no error"))
            .to_string();
            assert!(
                e.contains(&*path.to_string_lossy()) && e.contains("changed while it was replayed"),
                "{e}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lookahead_hands_back_every_request_once_in_order() {
        for n in [0u64, 1, 7, 8, 9, 100] {
            let mut ahead = Lookahead::new();
            let mut out = Vec::new();
            for i in 0..n {
                out.extend(ahead.push(i, i * 10));
            }
            out.extend(ahead.drain());
            let want: Vec<(u64, u64)> = (0..n).map(|i| (i, i * 10)).collect();
            assert_eq!(out, want, "{n} requests");
        }
    }

    #[test]
    fn capacities() {
        assert_eq!(parse_capacity("0.1", 1000, 8192).unwrap(), 100);
        assert_eq!(parse_capacity("5000", 1000, 8192).unwrap(), 5000);
        assert_eq!(parse_capacity("64MiB", 1000, 8192).unwrap(), 8192);
        assert!(parse_capacity("0", 1000, 8192).is_err());
        assert!(parse_capacity("1.5", 1000, 8192).is_err());
        assert!(parse_capacity("abc", 1000, 8192).is_err());
    }
}
