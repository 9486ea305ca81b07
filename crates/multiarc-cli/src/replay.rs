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
//!
//! Because every pass reopens the trace, it must be a regular file (a FIFO
//! is refused before it is opened), and every pass must read the same
//! requests as the first (a trace written to meanwhile is an error, not an
//! index out of bounds). A policy is built with at most the capacity that
//! holds all of the trace's distinct blocks ([`built_capacity`]): past it
//! nothing is evicted and the hits are the same, so `--capacity 1TiB` costs
//! no more memory than the trace. What the policies, opt's next uses and the
//! distinct set need is checked against the machine's available memory.
//! The trace readers' own limits (line length, blocks per request) are in
//! `multiarc_sim::trace`; the page-based policies (`arc`, `car`, `lru`) and
//! Belady's `opt` are `multiarc_sim`'s too.

use crate::harness::Bar;
use crate::peers::{self, BenchCache};
use crate::plot;
use crate::util::{
    check_fits, check_fits_in_memory, enum_arg, machine_memory_bytes, name_arg, out, outln,
    parse_size,
};
use anyhow::{bail, Context};
use multiarc::{Cache, HitMode};
use multiarc_sim::opt::{OptPolicy, NEVER};
use multiarc_sim::reference::{ArcPolicy, CarPolicy, LruPolicy, PagePolicy};
use multiarc_sim::trace::{TraceFormat, TraceReader};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

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
    /// Second-tier sizes for the multiarc policies (multiarc,
    /// multiarc-eager, multiarc-lazy), comma-separated, in the syntax of
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
    /// Draw hit ratio against capacity into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

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
    /// Hits of either tier per request.
    hit_ratio: f64,
}

/// Where replayed second tiers go, and how they are fed.
struct L2Options {
    /// The `--l2` sizes, as given.
    sizes: Vec<String>,
    dir: PathBuf,
    mfu_only: bool,
    keep_ratio: Option<u64>,
}

/// The multiarc policies, which can have a second tier.
fn has_l2(policy: &str) -> bool {
    matches!(policy, "multiarc" | "multiarc-eager" | "multiarc-lazy")
}

/// A device file for a replayed second tier, removed on drop.
pub(crate) struct L2Device(PathBuf);

impl Drop for L2Device {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The batch size of a replayed second tier of `blocks` blocks behind a
/// memory of `memory` blocks, in 4 KiB units (each 1-byte buffer takes
/// one): at most an eighth of the tier, a quarter of the memory (the
/// synchronous feed runs once a batch's worth has been inserted, so a
/// batch larger than memory would let buffers come and go unfed) and
/// 2048 (8 MiB, OpenZFS's old default); at least 1.
fn l2_batch_units(blocks: u64, memory: u64) -> u64 {
    (blocks / 8).min(memory / 4).clamp(1, 2048)
}

/// Bytes of a device that holds `blocks` one-unit buffers in batches of
/// `batch`: the header, the buffers, a log block for every half batch
/// (batches may be half full), and a batch of slack for the ring's wrap.
fn l2_device_bytes(blocks: u64, batch: u64) -> u64 {
    let log_units = (80 + batch * 32).div_ceil(4096);
    let batches = blocks.div_ceil(batch.div_ceil(2));
    4096 * (1 + blocks + batches * log_units + batch + log_units)
}

/// Builds `policy` (a multiarc one) with `blocks` of memory and a second
/// tier of `l2_blocks`, its device in `dir`.
fn build_tiered(
    policy: &str,
    blocks: u64,
    l2_blocks: u64,
    l2: &L2Options,
) -> anyhow::Result<(Cache<u64>, L2Device)> {
    let dir = &l2.dir;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = dir.join(format!(
        "multiarc-replay-l2-{}-{}.dev",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let device = L2Device(path.clone());
    let batch = l2_batch_units(l2_blocks, blocks);
    let mode = if policy == "multiarc-eager" {
        HitMode::Eager
    } else {
        HitMode::Lazy
    };
    let mut builder = Cache::<u64>::builder();
    if let Some(ratio) = l2.keep_ratio {
        builder = builder.l2_keep_ratio(ratio);
    }
    let cache = builder
        .max_bytes(blocks)
        .min_bytes(1)
        .hit_mode(mode)
        .inline_eviction(true)
        .l2(&path, l2_device_bytes(l2_blocks, batch))
        .l2_write_max(batch * 4096)
        // The synchronous feed runs once a batch's worth has been inserted:
        // two batches up the tails cover what eviction reaches next.
        .l2_headroom(2)
        .l2_rebuild(false)
        .l2_direct(false)
        .l2_mfu_only(l2.mfu_only)
        .build()
        .map_err(|e| anyhow::anyhow!("{policy} with --l2 {l2_blocks} blocks: {e}"))?;
    Ok((cache, device))
}

#[derive(Serialize)]
struct ReplayReport {
    trace: String,
    format: String,
    requests: u64,
    distinct: u64,
    results: Vec<ReplayResult>,
}

fn parse_format(args: &ReplayArgs, source: &dyn TraceSource) -> anyhow::Result<TraceFormat> {
    let name = args.trace.to_string_lossy();
    let chosen = match &args.format {
        Some(f) => *f,
        None if name.contains(".lis") => FormatName::Arc,
        None => {
            // The first bytes of the first line, read as bytes: a binary
            // file is the trace reader's to report, with its line.
            let mut first = Vec::new();
            source
                .open()?
                .take(64)
                .read_until(b'\n', &mut first)
                .map_err(|e| anyhow::anyhow!("{}: line 1: read error: {e}", source.name()))?;
            if first.starts_with(b"version,") {
                FormatName::Cloudphysics
            } else {
                FormatName::Ids
            }
        }
    };
    if args.id_column.is_some() && chosen != FormatName::Csv {
        bail!("--id-column applies to --format csv only");
    }
    Ok(match chosen {
        FormatName::Ids => TraceFormat::Ids,
        FormatName::Arc => TraceFormat::Arc,
        FormatName::Cloudphysics => TraceFormat::CloudPhysics {
            block_size: args.block_size,
        },
        FormatName::Csv => TraceFormat::Csv {
            id_column: args
                .id_column
                .context("--format csv needs --id-column N (0-based)")?,
            header: args.header,
        },
    })
}

/// Where the passes read the trace: opened again for each pass.
pub(crate) trait TraceSource {
    /// How messages name it (the file's path).
    fn name(&self) -> String;
    /// The trace from its start.
    fn open(&self) -> anyhow::Result<Box<dyn BufRead>>;
}

/// A trace file, decompressed when its name ends in `.zst`.
struct TraceFile(PathBuf);

impl TraceFile {
    /// Checks that `path` is a regular file before anything opens it: a
    /// directory fails with its name, and a FIFO (or another file that
    /// cannot be read twice) is refused, since replay reads the trace once
    /// per pass and opening a FIFO would block.
    fn new(path: &Path) -> anyhow::Result<TraceFile> {
        use std::os::unix::fs::FileTypeExt;
        let meta =
            std::fs::metadata(path).with_context(|| format!("opening trace {}", path.display()))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            bail!("trace {} is a directory, not a trace file", path.display());
        }
        if !kind.is_file() {
            let what = if kind.is_fifo() {
                "a FIFO (named pipe)"
            } else if kind.is_char_device() {
                "a character device"
            } else if kind.is_block_device() {
                "a block device"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            bail!(
                "trace {} is {what}: replay reads the trace once per pass (a counting pass, one per capacity, one more for opt), so it must be a regular file; save it to a file first",
                path.display()
            );
        }
        Ok(TraceFile(path.to_path_buf()))
    }
}

impl TraceSource for TraceFile {
    fn name(&self) -> String {
        self.0.display().to_string()
    }

    fn open(&self) -> anyhow::Result<Box<dyn BufRead>> {
        let path = &self.0;
        let file = File::open(path).with_context(|| format!("opening trace {}", path.display()))?;
        Ok(if path.extension().is_some_and(|e| e == "zst") {
            let decoder = zstd::Decoder::new(file)
                .with_context(|| format!("reading zstd trace {}", path.display()))?;
            Box::new(BufReader::new(ZstdErrors(decoder)))
        } else {
            Box::new(BufReader::with_capacity(1 << 20, file))
        })
    }
}

/// Says that a read error came from decompressing (a corrupt or truncated
/// `.zst`, or a file that is not zstd at all).
struct ZstdErrors<R>(R);

impl<R: Read> Read for ZstdErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("not valid zstd data (corrupt or truncated?): {e}"),
            )
        })
    }
}

/// What one pass over the trace read: its block requests, and a
/// fingerprint of their ids in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pass {
    requests: u64,
    fingerprint: u64,
}

/// Streams the trace's block ids through `f`, which may stop the pass with
/// an error.
fn for_each_block(
    source: &dyn TraceSource,
    format: TraceFormat,
    mut f: impl FnMut(u64) -> anyhow::Result<()>,
) -> anyhow::Result<Pass> {
    let reader: TraceReader<Box<dyn BufRead>> = format
        .reader(source.open()?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", source.name()))?;
    let mut pass = Pass {
        requests: 0,
        fingerprint: 0,
    };
    for id in reader {
        let id = id.map_err(|e| anyhow::anyhow!("{}: {e}", source.name()))?;
        f(id)?;
        pass.requests += 1;
        pass.fingerprint =
            (pass.fingerprint.rotate_left(5) ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    Ok(pass)
}

/// The error when a pass did not read what the first one read: the trace
/// changed during the replay (an index past the first pass's count would
/// otherwise be out of bounds for opt, and every hit ratio wrong).
fn changed(source: &dyn TraceSource, first: u64, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} changed while it was replayed: the counting pass read {first} block requests, {what}; replay reads the trace once per pass, so it must not change meanwhile",
        source.name()
    )
}

/// Fails unless `pass` read the same requests as `first`.
fn check_same(source: &dyn TraceSource, first: Pass, pass: Pass, name: &str) -> anyhow::Result<()> {
    if pass.requests != first.requests {
        return Err(changed(
            source,
            first.requests,
            &format!("the {name} pass {}", pass.requests),
        ));
    }
    if pass.fingerprint != first.fingerprint {
        return Err(changed(
            source,
            first.requests,
            &format!("the {name} pass as many but other blocks"),
        ));
    }
    Ok(())
}

/// One policy being replayed.
pub(crate) enum Policy {
    Page(Box<dyn PagePolicy>),
    Cache(Box<dyn BenchCache>),
    Opt(OptPolicy),
    /// multiarc with a second tier (its device file goes with it).
    Tiered {
        cache: Cache<u64>,
        _device: L2Device,
    },
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
            Policy::Tiered { cache, .. } => {
                let hit = cache.get(&id).is_some();
                if !hit {
                    drop(cache.insert(id, vec![0]));
                }
                hit
            }
        }
    }
}

/// For each request, the index of the next request of the same block
/// ([`NEVER`]: never again).
pub(crate) enum NextUse {
    /// No future known (policies other than `opt`).
    None,
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl NextUse {
    fn get(&self, i: u64) -> u64 {
        match self {
            NextUse::None => NEVER,
            NextUse::Narrow(v) => match v[i as usize] {
                u32::MAX => NEVER,
                n => n as u64,
            },
            NextUse::Wide(v) => v[i as usize],
        }
    }

    /// The next uses of every request, from one more pass, which must read
    /// what the counting pass `first` read.
    fn compute(
        source: &dyn TraceSource,
        format: TraceFormat,
        first: Pass,
        bar: &Bar,
        done: u64,
    ) -> anyhow::Result<NextUse> {
        let requests = first.requests;
        let narrow = requests < u32::MAX as u64;
        let width: u64 = if narrow { 4 } else { 8 };
        check_fits_in_memory(
            &format!(
                "--policy opt (the next use of each of the trace's {requests} block requests, {width} bytes each)"
            ),
            requests.saturating_mul(width),
        )?;
        let mut next = if narrow {
            NextUse::Narrow(vec![u32::MAX; requests as usize])
        } else {
            NextUse::Wide(vec![NEVER; requests as usize])
        };
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut i = 0u64;
        let pass = for_each_block(source, format, |id| {
            if i >= requests {
                return Err(changed(source, requests, "the opt pass more (it grew)"));
            }
            if let Some(prev) = last.insert(id, i) {
                match &mut next {
                    NextUse::Narrow(v) => v[prev as usize] = i as u32,
                    NextUse::Wide(v) => v[prev as usize] = i,
                    NextUse::None => {}
                }
            }
            i += 1;
            if i.is_multiple_of(1 << 18) {
                bar.set_done(done + i);
            }
            Ok(())
        })?;
        check_same(source, first, pass, "opt")?;
        Ok(next)
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

/// The largest capacity a policy is built with: 2^48 blocks (past it
/// multiarc's byte arithmetic would overflow). Replay builds its policies
/// with at most [`built_capacity`] and `scan` checks its capacity against
/// the machine's memory first, so this only stops a caller that did neither.
pub(crate) const MAX_POLICY_BLOCKS: u64 = 1 << 48;

/// Bytes of memory a policy is assumed to need per block of capacity
/// (entry, list links, hash slot, and as many ghost entries again): an
/// estimate on the high side, for the memory checks.
pub(crate) const POLICY_BYTES_PER_BLOCK: u64 = 256;

/// Peers whose capacity is split between shards, so that one shard can fill
/// while the whole could hold every block.
const SHARDED: &[&str] = &["quick_cache", "foyer"];

/// More shards than a sharded peer has (quick_cache: 4 per CPU; foyer: 8).
const MAX_SHARDS: u64 = 1 << 16;

/// The capacity policy `name` is built with when `blocks` is asked for on
/// a trace of `distinct` blocks. A policy that can hold every block of the
/// trace never evicts, so any larger capacity gives the same hits (tested:
/// every request after a block's first is a hit); building it larger would
/// only cost memory, or abort in caches that allocate by capacity (tinyufo,
/// mutex-lru). A sharded peer holds everything once each shard can.
pub(crate) fn built_capacity(name: &str, blocks: u64, distinct: u64) -> u64 {
    let holds_all = if SHARDED.contains(&name) {
        distinct.saturating_mul(MAX_SHARDS)
    } else {
        distinct
    };
    blocks.min(holds_all.max(1))
}

pub(crate) fn build_policy(name: &str, blocks: u64) -> anyhow::Result<Policy> {
    if blocks == 0 || blocks > MAX_POLICY_BLOCKS {
        bail!("{name}: a capacity of {blocks} blocks is outside 1 to 2^48 blocks");
    }
    Ok(match name {
        "arc" => Policy::Page(Box::new(ArcPolicy::new(blocks as usize))),
        "car" => Policy::Page(Box::new(CarPolicy::new(blocks as usize))),
        "lru" => Policy::Page(Box::new(LruPolicy::new(blocks as usize))),
        "opt" => Policy::Opt(OptPolicy::new(blocks as usize)),
        // Every other row is a concurrent cache holding 1-byte values with a
        // capacity of `blocks` bytes: capacity counted in blocks.
        other => Policy::Cache(peers::build(other, blocks, 1)?),
    })
}

/// What a replay found.
struct Outcome {
    requests: u64,
    distinct: u64,
    /// The capacities asked for, in blocks.
    capacities: Vec<u64>,
    results: Vec<ReplayResult>,
}

/// Replays `source` under every policy at every capacity (`capacity`: the
/// `--capacity` items). Every pass must read what the first one read.
fn replay(
    source: &dyn TraceSource,
    format: TraceFormat,
    policies: &[String],
    capacity: &[String],
    l2_options: &L2Options,
    block_size: u64,
    bar: &Bar,
) -> anyhow::Result<Outcome> {
    bar.doing("counting requests and distinct blocks".to_string());
    // The distinct set is the one structure that grows with the trace:
    // stop when it would not fit in the memory available at the start.
    let memory = machine_memory_bytes();
    let mut distinct_set = HashSet::new();
    let first = for_each_block(source, format, |id| {
        if distinct_set.insert(id) && distinct_set.len().is_multiple_of(1 << 20) {
            if let Some(m) = memory {
                // 8-byte ids plus a control byte, doubled while it grows.
                let bytes = distinct_set.capacity() as u64 * 9 * 2;
                check_fits(
                    &format!(
                        "{}: counting its distinct blocks ({} so far)",
                        source.name(),
                        distinct_set.len()
                    ),
                    bytes,
                    m,
                )?;
            }
        }
        Ok(())
    })?;
    let requests = first.requests;
    let distinct = distinct_set.len() as u64;
    drop(distinct_set);
    let mut capacities = Vec::new();
    for c in capacity {
        let blocks = parse_capacity(c, distinct, block_size)?;
        // What the policies will hold at most: the trace's blocks.
        let built = blocks.min(distinct).max(1);
        check_fits_in_memory(
            &format!(
                "--capacity {c} ({built} blocks in use, {} policies, about {POLICY_BYTES_PER_BLOCK} bytes a block each)",
                policies.len()
            ),
            built
                .saturating_mul(policies.len() as u64)
                .saturating_mul(POLICY_BYTES_PER_BLOCK),
        )?;
        capacities.push(blocks);
    }
    // The passes still to come: opt's, then one per capacity.
    let mut l2_sizes = Vec::new();
    for c in &l2_options.sizes {
        let blocks =
            parse_capacity(c, distinct, block_size).with_context(|| format!("--l2 {c}"))?;
        if blocks > 1 << 36 {
            bail!("--l2 {c}: {blocks} blocks is more than a replay's second tier takes (2^36)");
        }
        l2_sizes.push(blocks);
    }
    if let Some(bytes) = l2_sizes.iter().map(|&b| l2_device_bytes(b, b)).max() {
        let l2_dir = &l2_options.dir;
        if let Ok(st) = rustix::fs::statvfs(l2_dir) {
            let free = st.f_bavail.saturating_mul(st.f_frsize);
            if bytes > free {
                bail!(
                    "--l2: a device of {} MiB does not fit in {} ({} MiB free); use --l2-dir",
                    bytes >> 20,
                    l2_dir.display(),
                    free >> 20
                );
            }
        }
    }
    // The rows: each policy, and each multiarc one once per L2 size.
    let rows: Vec<(String, u64)> = policies
        .iter()
        .flat_map(|p| -> Vec<(String, u64)> {
            if has_l2(p) && !l2_sizes.is_empty() {
                l2_sizes.iter().map(|&b| (p.clone(), b)).collect()
            } else {
                vec![(p.clone(), 0)]
            }
        })
        .collect();
    let opt = policies.iter().any(|p| p == "opt");
    let passes = capacities.len() as u64 + opt as u64;
    bar.set_total(requests.saturating_mul(passes));
    let mut done = 0u64;
    let next = if opt {
        bar.doing("opt: next uses".to_string());
        let next = NextUse::compute(source, format, first, bar, done)?;
        done += requests;
        bar.set_done(done);
        next
    } else {
        NextUse::None
    };
    let mut results = Vec::new();
    for (ci, &blocks) in capacities.iter().enumerate() {
        let mut running: Vec<(String, u64, Policy, u64)> = rows
            .iter()
            .map(|(p, l2_blocks)| {
                let built = built_capacity(p, blocks, distinct);
                let policy = if *l2_blocks > 0 {
                    let (cache, device) = build_tiered(p, built, *l2_blocks, l2_options)?;
                    Policy::Tiered {
                        cache,
                        _device: device,
                    }
                } else {
                    build_policy(p, built)?
                };
                Ok((p.clone(), *l2_blocks, policy, 0))
            })
            .collect::<anyhow::Result<_>>()?;
        bar.doing(format!(
            "capacity {blocks} blocks ({}/{})",
            ci + 1,
            capacities.len()
        ));
        let mut i = 0u64;
        let pass = for_each_block(source, format, |id| {
            if i >= requests {
                return Err(changed(
                    source,
                    requests,
                    &format!("the pass of capacity {blocks} more (it grew)"),
                ));
            }
            for (_, _, policy, hits) in running.iter_mut() {
                *hits += policy.access(i, id, &next) as u64;
            }
            i += 1;
            if i.is_multiple_of(1 << 18) {
                bar.set_done(done + i);
            }
            Ok(())
        })?;
        check_same(source, first, pass, &format!("capacity {blocks}"))?;
        done += requests;
        bar.set_done(done);
        for (name, l2_blocks, policy, hits) in running {
            let (l2_hits, l2_write_bytes, l2_kept) = match &policy {
                Policy::Tiered { cache, .. } => {
                    let s = cache.stats();
                    (s.l2_hits, s.l2_write_bytes, s.l2_kept)
                }
                _ => (0, 0, 0),
            };
            results.push(ReplayResult {
                policy: name,
                capacity_blocks: blocks,
                l2_capacity_blocks: l2_blocks,
                hits,
                l2_hits,
                l2_write_bytes,
                l2_kept,
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

/// Runs the replay.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    if args.block_size == 0 {
        bail!("--block-size must be at least 1 byte");
    }
    let source = TraceFile::new(&args.trace)?;
    let format = parse_format(&args, &source)?;
    if args.plot.is_some() {
        plot::available()?;
    }
    let policies: Vec<String> = args.policy.clone().unwrap_or_else(|| {
        ["multiarc", "arc", "lru", "opt"]
            .iter()
            .chain(peers::BUILT_PEERS)
            .map(|s| s.to_string())
            .collect()
    });
    for p in &policies {
        build_policy(p, 1)?; // unknown names fail before the long passes
    }
    let l2 = args.l2.clone().unwrap_or_default();
    if !l2.is_empty() && !policies.iter().any(|p| has_l2(p)) {
        bail!("--l2 applies to the multiarc policies (multiarc, multiarc-eager, multiarc-lazy), and --policy has none");
    }
    if args.l2.is_none()
        && (args.l2_dir.is_some() || args.l2_mfu_only || args.l2_keep_ratio.is_some())
    {
        bail!("--l2-dir, --l2-mfu-only and --l2-keep-ratio apply with --l2 only");
    }
    let l2_options = L2Options {
        sizes: l2,
        dir: args.l2_dir.clone().unwrap_or_else(std::env::temp_dir),
        mfu_only: args.l2_mfu_only,
        keep_ratio: args.l2_keep_ratio,
    };
    let bar = Bar::counting("replay", 0, "requests", args.json);
    let Outcome {
        requests,
        distinct,
        capacities,
        results,
    } = replay(
        &source,
        format,
        &policies,
        &args.capacity,
        &l2_options,
        args.block_size,
        &bar,
    )?;
    bar.finish(&format!("{requests} requests, {distinct} distinct blocks"));

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
        fn open(&self) -> anyhow::Result<Box<dyn BufRead>> {
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
        let policies: Vec<String> = policies.iter().map(|p| p.to_string()).collect();
        replay(
            &source,
            TraceFormat::Ids,
            &policies,
            &["2".to_string(), "3".to_string()],
            &L2Options {
                sizes: Vec::new(),
                dir: PathBuf::from("."),
                mfu_only: false,
                keep_ratio: None,
            },
            8192,
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
        fn open(&self) -> anyhow::Result<Box<dyn BufRead>> {
            let k = self.opened.get();
            self.opened.set(k + 1);
            if k == self.at {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&self.file.0)?;
                f.write_all(b"1\n2\n")?;
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
                &["opt".to_string(), "lru".to_string()],
                &["2".to_string()],
                &L2Options {
                    sizes: Vec::new(),
                    dir: PathBuf::from("."),
                    mfu_only: false,
                    keep_ratio: None,
                },
                8192,
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
    fn policies_built_with_the_clamped_capacity_never_evict() {
        // Replay builds a policy with built_capacity(), at most the trace's
        // distinct blocks (times the shards, for sharded peers). That
        // changes no hit only if, at that capacity, nothing is evicted:
        // every request after a block's first must hit.
        let trace: Vec<u64> = (0..3000u64)
            .map(|i| (i * 7919) % 97 + (i % 13) * 100)
            .collect();
        let distinct = trace.iter().collect::<HashSet<_>>().len() as u64;
        let next = NextUse::Wide(multiarc_sim::opt::next_uses(&trace));
        for name in ["multiarc", "multiarc-eager", "arc", "car", "lru", "opt"]
            .iter()
            .chain(peers::BUILT_PEERS)
        {
            let built = built_capacity(name, u64::MAX, distinct);
            assert!(built >= distinct, "{name}");
            let mut p = build_policy(name, built).unwrap();
            let hits = trace
                .iter()
                .enumerate()
                .filter(|&(i, &id)| p.access(i as u64, id, &next))
                .count() as u64;
            assert_eq!(
                hits,
                trace.len() as u64 - distinct,
                "{name} at {built} blocks"
            );
            // A capacity below the distinct blocks is built as asked.
            assert_eq!(built_capacity(name, 7, distinct), 7);
        }
        assert!(build_policy("lru", MAX_POLICY_BLOCKS + 1).is_err());
        assert!(build_policy("lru", 0).is_err());
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
