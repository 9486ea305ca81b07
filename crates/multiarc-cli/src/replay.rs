//! `multiarc replay`: hit ratios of a block trace under many policies and
//! cache sizes.
//!
//! The trace is streamed, never held in memory: one pass counts requests and
//! distinct blocks (the distinct set is the one O(distinct) structure, needed
//! to turn fractions into capacities), then one pass per capacity drives
//! every policy side by side. Belady's `opt` needs the future: a pass
//! records, for every request, the index of the next request of the same
//! block (4 bytes per request while the trace has fewer than 2^32 requests,
//! 8 beyond; 400 MB for 100M requests), and its simulation keeps a max-heap
//! of next uses with lazy deletion.

use crate::peers::{self, BenchCache, PEER_NAMES};
use crate::plot;
use crate::util::{name_arg, parse_size, Progress};
use anyhow::{bail, Context};
use multiarc::reference::{ArcPolicy, CarPolicy, LruPolicy, PagePolicy};
use multiarc::trace::{TraceFormat, TraceReader};
use serde::Serialize;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Arguments of `multiarc replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace file (plain text, or zstd-compressed when it ends in .zst).
    trace: PathBuf,
    /// Trace format: ids, arc (the ARC paper's .lis), cloudphysics, csv.
    /// Default: arc for *.lis[.zst], cloudphysics for a CSV whose header
    /// starts with `version,`, else ids.
    #[arg(long)]
    format: Option<String>,
    /// Block size in bytes, for cloudphysics byte ranges and byte capacities.
    #[arg(long, default_value = "8192", value_parser = crate::util::size_arg)]
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
    /// Policies: multiarc, multiarc-eager, multiarc-lazy, arc, car, lru, opt,
    /// and the peers moka, quick_cache, foyer, tinyufo, concread-arc,
    /// mutex-lru. Default: multiarc, arc, lru, opt and the peers.
    #[arg(long, value_parser = name_arg, value_delimiter = ',')]
    policy: Option<Vec<String>>,
    /// Draw hit ratio against capacity into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ReplayResult {
    policy: String,
    capacity_blocks: u64,
    hits: u64,
    hit_ratio: f64,
}

#[derive(Serialize)]
struct ReplayReport {
    trace: String,
    format: String,
    requests: u64,
    distinct: u64,
    results: Vec<ReplayResult>,
}

fn parse_format(args: &ReplayArgs) -> anyhow::Result<TraceFormat> {
    let name = args.trace.to_string_lossy();
    let chosen = match &args.format {
        Some(f) => f.clone(),
        None if name.contains(".lis") => "arc".into(),
        None => {
            let mut first = String::new();
            open(&args.trace)?.read_line(&mut first)?;
            if first.starts_with("version,") {
                "cloudphysics".into()
            } else {
                "ids".into()
            }
        }
    };
    if args.id_column.is_some() && chosen != "csv" {
        bail!("--id-column applies to --format csv only");
    }
    Ok(match chosen.as_str() {
        "ids" => TraceFormat::Ids,
        "arc" => TraceFormat::Arc,
        "cloudphysics" => TraceFormat::CloudPhysics {
            block_size: args.block_size,
        },
        "csv" => TraceFormat::Csv {
            id_column: args
                .id_column
                .context("--format csv needs --id-column N (0-based)")?,
            header: args.header,
        },
        other => bail!("unknown trace format {other:?} (known: ids, arc, cloudphysics, csv)"),
    })
}

/// Opens the trace, decompressing `.zst`.
fn open(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    let file = File::open(path).with_context(|| format!("opening trace {}", path.display()))?;
    Ok(if path.extension().is_some_and(|e| e == "zst") {
        Box::new(BufReader::new(zstd::Decoder::new(file).with_context(
            || format!("reading zstd trace {}", path.display()),
        )?))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, file))
    })
}

/// Streams the trace's block ids through `f`.
fn for_each_block(path: &Path, format: TraceFormat, mut f: impl FnMut(u64)) -> anyhow::Result<u64> {
    let reader: TraceReader<Box<dyn BufRead>> = format
        .reader(open(path)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut n = 0;
    for id in reader {
        let id = id.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        f(id);
        n += 1;
    }
    Ok(n)
}

/// One policy being replayed.
pub(crate) enum Policy {
    Page(Box<dyn PagePolicy>),
    Cache(Box<dyn BenchCache>),
    Opt(Opt),
}

impl Policy {
    pub(crate) fn access(&mut self, index: u64, id: u64, next: &NextUse) -> bool {
        match self {
            Policy::Page(p) => p.access(id),
            Policy::Cache(c) => {
                let hit = c.with_value(id, &mut |_| {});
                if !hit {
                    c.insert(id, &[0]);
                }
                hit
            }
            Policy::Opt(o) => o.access(id, next.get(index)),
        }
    }
}

/// For each request, the index of the next request of the same block
/// (`u64::MAX`: never again).
pub(crate) enum NextUse {
    /// No future known (policies other than `opt`).
    None,
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl NextUse {
    fn get(&self, i: u64) -> u64 {
        match self {
            NextUse::None => u64::MAX,
            NextUse::Narrow(v) => match v[i as usize] {
                u32::MAX => u64::MAX,
                n => n as u64,
            },
            NextUse::Wide(v) => v[i as usize],
        }
    }

    fn compute(
        path: &Path,
        format: TraceFormat,
        requests: u64,
        progress: &mut Progress,
    ) -> anyhow::Result<NextUse> {
        let narrow = requests < u32::MAX as u64;
        let mut next = if narrow {
            NextUse::Narrow(vec![u32::MAX; requests as usize])
        } else {
            NextUse::Wide(vec![u64::MAX; requests as usize])
        };
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut i = 0u64;
        for_each_block(path, format, |id| {
            if let Some(prev) = last.insert(id, i) {
                match &mut next {
                    NextUse::Narrow(v) => v[prev as usize] = i as u32,
                    NextUse::Wide(v) => v[prev as usize] = i,
                    NextUse::None => {}
                }
            }
            i += 1;
            if i.is_multiple_of(1 << 20) {
                progress.update(&format!(
                    "replay: opt: next uses {:.0}%",
                    100.0 * i as f64 / requests as f64
                ));
            }
        })?;
        Ok(next)
    }
}

/// Belady's OPT: on a miss with a full cache, evict the block whose next use
/// is farthest in the future.
pub(crate) struct Opt {
    capacity: usize,
    /// Cached block -> its next use.
    cached: HashMap<u64, u64>,
    /// (next use, block), stale entries skipped.
    heap: BinaryHeap<(u64, u64)>,
}

impl Opt {
    fn new(capacity: usize) -> Opt {
        Opt {
            capacity,
            cached: HashMap::new(),
            heap: BinaryHeap::new(),
        }
    }

    fn access(&mut self, id: u64, next: u64) -> bool {
        let hit = self.cached.contains_key(&id);
        if !hit && self.cached.len() == self.capacity {
            while let Some((when, victim)) = self.heap.pop() {
                if self.cached.get(&victim) == Some(&when) {
                    self.cached.remove(&victim);
                    break;
                }
            }
        }
        self.cached.insert(id, next);
        self.heap.push((next, id));
        if self.heap.len() > 4 * self.capacity + 1024 {
            let cached = &self.cached;
            self.heap
                .retain(|&(when, id)| cached.get(&id) == Some(&when));
        }
        hit
    }
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

pub(crate) fn build_policy(name: &str, blocks: u64) -> anyhow::Result<Policy> {
    Ok(match name {
        "arc" => Policy::Page(Box::new(ArcPolicy::new(blocks as usize))),
        "car" => Policy::Page(Box::new(CarPolicy::new(blocks as usize))),
        "lru" => Policy::Page(Box::new(LruPolicy::new(blocks as usize))),
        "opt" => Policy::Opt(Opt::new(blocks as usize)),
        // Every other row is a concurrent cache holding 1-byte values with a
        // capacity of `blocks` bytes: capacity counted in blocks.
        other => Policy::Cache(peers::build(other, blocks, 1)?),
    })
}

/// Runs the replay.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let format = parse_format(&args)?;
    let policies: Vec<String> = args.policy.clone().unwrap_or_else(|| {
        ["multiarc", "arc", "lru", "opt"]
            .iter()
            .chain(PEER_NAMES)
            .map(|s| s.to_string())
            .collect()
    });
    for p in &policies {
        build_policy(p, 1)?; // unknown names fail before the long passes
    }
    let mut progress = Progress::new(true);
    progress.update("replay: counting requests and distinct blocks");
    let mut distinct_set = HashSet::new();
    let requests = for_each_block(&args.trace, format, |id| {
        distinct_set.insert(id);
    })?;
    let distinct = distinct_set.len() as u64;
    drop(distinct_set);
    let mut capacities = Vec::new();
    for c in &args.capacity {
        capacities.push(parse_capacity(c, distinct, args.block_size)?);
    }
    let next = if policies.iter().any(|p| p == "opt") {
        NextUse::compute(&args.trace, format, requests, &mut progress)?
    } else {
        NextUse::None
    };
    let mut results = Vec::new();
    for (ci, &blocks) in capacities.iter().enumerate() {
        let mut running: Vec<(String, Policy, u64)> = policies
            .iter()
            .map(|p| Ok((p.clone(), build_policy(p, blocks)?, 0)))
            .collect::<anyhow::Result<_>>()?;
        let mut i = 0u64;
        for_each_block(&args.trace, format, |id| {
            for (_, policy, hits) in running.iter_mut() {
                *hits += policy.access(i, id, &next) as u64;
            }
            i += 1;
            if i.is_multiple_of(1 << 18) {
                progress.update(&format!(
                    "replay: capacity {blocks} blocks ({}/{}): {:.0}%",
                    ci + 1,
                    capacities.len(),
                    100.0 * i as f64 / requests as f64
                ));
            }
        })?;
        for (name, _, hits) in running {
            results.push(ReplayResult {
                policy: name,
                capacity_blocks: blocks,
                hits,
                hit_ratio: hits as f64 / requests as f64,
            });
        }
    }
    progress.finish(&format!(
        "replay: {requests} requests, {distinct} distinct blocks"
    ));

    if let Some(path) = &args.plot {
        let series: Vec<plot::Series> = policies
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

    let format_name = match format {
        TraceFormat::Ids => "ids",
        TraceFormat::Arc => "arc",
        TraceFormat::CloudPhysics { .. } => "cloudphysics",
        TraceFormat::Csv { .. } => "csv",
    };
    if args.json {
        let report = ReplayReport {
            trace: args.trace.display().to_string(),
            format: format_name.into(),
            requests,
            distinct,
            results,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{}: {requests} block requests, {distinct} distinct blocks ({format_name}); hit ratio (%)",
        args.trace.display()
    );
    print!("{:<14}", "policy");
    for c in &capacities {
        print!(" {:>10}", c);
    }
    println!();
    for p in &policies {
        print!("{p:<14}");
        for &c in &capacities {
            let r = results
                .iter()
                .find(|r| &r.policy == p && r.capacity_blocks == c)
                .expect("every policy ran at every capacity");
            print!(" {:>10.2}", 100.0 * r.hit_ratio);
        }
        println!();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_is_beladys() {
        // Capacity 2, trace 1 2 3 1 2: when 3 arrives, OPT evicts the block
        // whose next use is farthest (2, used at index 4; 1 is used at 3).
        let trace = [1u64, 2, 3, 1, 2];
        let mut next = vec![u64::MAX; trace.len()];
        for i in 0..trace.len() {
            next[i] = (i + 1..trace.len())
                .find(|&j| trace[j] == trace[i])
                .map_or(u64::MAX, |j| j as u64);
        }
        let mut opt = Opt::new(2);
        let hits: Vec<bool> = trace
            .iter()
            .zip(&next)
            .map(|(&id, &n)| opt.access(id, n))
            .collect();
        assert_eq!(hits, vec![false, false, false, true, false]);
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
