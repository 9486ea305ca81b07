//! The cache workload (`multiarc bench`, the main job): the OpenZFS 5497
//! measurement, in memory.
//!
//! The field report ran fio with T threads, each
//! reading random 8 KiB blocks of its own 512 MiB file, fully cached, and
//! plotted aggregate bandwidth against CPUs. Here each thread owns one
//! file-like object of `--file-bytes`, every block of which is loaded into
//! the cache under test first; then all threads read uniformly random blocks
//! of their own object for `--seconds`, either holding the buffer (touch its
//! first and last byte: the zero-copy path of a storage engine) or copying
//! it out (like `pread`). Rows: multiarc's configurations, the peer caches,
//! `pagecache` (the same files on tmpfs read with `pread`) and `memcpy`
//! (copying random blocks of an equally large array: the ceiling for copy
//! mode).

use crate::cli::{count_arg, enum_arg, enum_name, size_arg, text_table};
use crate::harness::{self, machine, measure, CommonArgs, Machine, Run};
use crate::peers::{self, BenchCache, PEER_NAMES};
use crate::plot;
use anyhow::{bail, Context};
use multiarc::units::meminfo;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A row of `--caches`: multiarc's configurations, the peer caches (as
/// [`peers::build`] names them) and the two baselines, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RowName {
    #[value(name = "multiarc")]
    Multiarc,
    #[value(name = "multiarc-eager")]
    MultiarcEager,
    #[value(name = "multiarc-lazy")]
    MultiarcLazy,
    #[value(name = "multiarc-1list")]
    Multiarc1List,
    #[value(name = "multiarc-s3arc")]
    MultiarcS3arc,
    #[value(name = "multiarc-adaptive")]
    MultiarcAdaptive,
    #[value(name = "multiarc-gen")]
    MultiarcGen,
    #[value(name = "moka")]
    Moka,
    #[value(name = "quick_cache")]
    QuickCache,
    #[value(name = "foyer")]
    Foyer,
    #[value(name = "tinyufo")]
    TinyUfo,
    #[value(name = "concread-arc")]
    ConcreadArc,
    #[value(name = "mutex-lru")]
    MutexLru,
    /// The same files on tmpfs read with `pread` (copy mode only).
    #[value(name = "pagecache")]
    PageCache,
    /// Copying random blocks of an equally large array (copy mode only).
    #[value(name = "memcpy")]
    Memcpy,
}

impl RowName {
    /// The row's name: in `--caches`, the tables and the JSON.
    fn name(self) -> &'static str {
        match self {
            RowName::Multiarc => "multiarc",
            RowName::MultiarcEager => "multiarc-eager",
            RowName::MultiarcLazy => "multiarc-lazy",
            RowName::Multiarc1List => "multiarc-1list",
            RowName::MultiarcS3arc => "multiarc-s3arc",
            RowName::MultiarcAdaptive => "multiarc-adaptive",
            RowName::MultiarcGen => "multiarc-gen",
            RowName::Moka => "moka",
            RowName::QuickCache => "quick_cache",
            RowName::Foyer => "foyer",
            RowName::TinyUfo => "tinyufo",
            RowName::ConcreadArc => "concread-arc",
            RowName::MutexLru => "mutex-lru",
            RowName::PageCache => "pagecache",
            RowName::Memcpy => "memcpy",
        }
    }

    /// A cache (built by [`peers::build`]) rather than a baseline.
    fn is_cache(self) -> bool {
        !matches!(self, RowName::PageCache | RowName::Memcpy)
    }

    /// The modes of `modes` this row runs: baselines only copy.
    fn modes(self, modes: &[Mode]) -> Vec<Mode> {
        modes
            .iter()
            .copied()
            .filter(|&m| self.is_cache() || m == Mode::Copy)
            .collect()
    }
}

/// Whether `row` is a multiarc row other than `multiarc` whose hit mode,
/// policy and sublists are the library's defaults.
fn is_default_under_another_name(row: RowName) -> bool {
    row != RowName::Multiarc
        && peers::MULTIARC_NAMES.contains(&row.name())
        && row != RowName::Multiarc1List
        && peers::multiarc_settings(row.name()) == peers::multiarc_settings("multiarc")
}

/// The cache workload's flags.
#[derive(clap::Args, Debug)]
pub struct CacheArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Bytes of each thread's object (all cached). Default: 32 MiB, so 32
    /// threads read 1 GiB of cached data.
    #[arg(long, value_parser = size_arg, default_value = "32MiB")]
    file_bytes: u64,
    /// Read modes: hold (zero-copy) and/or copy.
    #[arg(long, value_parser = enum_arg::<Mode>("mode"), value_delimiter = ',', default_value = "hold,copy")]
    pub(crate) modes: Vec<Mode>,
    /// Rows to run (default: all). multiarc rows: multiarc (default
    /// configuration), multiarc-eager, multiarc-lazy, multiarc-1list,
    /// multiarc-s3arc (the S3ARC policy, lazy hits), multiarc-adaptive (the
    /// adaptive policy, lazy hits), multiarc-gen (the generations policy,
    /// lazy hits; these two only when named here); peers:
    /// moka, quick_cache, foyer, tinyufo, concread-arc, mutex-lru; baselines:
    /// pagecache, memcpy (copy mode only).
    #[arg(long, value_parser = enum_arg::<RowName>("cache"), value_delimiter = ',')]
    caches: Option<Vec<RowName>>,
    /// Sublists per state for the multiarc rows (default: the library's,
    /// max(CPUs, 4)); `multiarc-1list` always has one.
    #[arg(long, value_parser = count_arg)]
    sublists: Option<usize>,
    /// The seed of the key hashers of the multiarc rows and quick_cache
    /// (its own hasher, foldhash): a number, for runs whose caches place
    /// every key alike, or `random` (the default: a new one per cache, as a
    /// library user gets). The other peers keep their hashers (moka and
    /// concread-arc: random keys). A fixed seed also gives multiarc
    /// foldhash's fixed shared seed (as `replay --seed` does), whose
    /// multiplier clusters runs of consecutive blocks in its table: its
    /// 1-thread hold hits are 7-14% slower than with the default's
    /// multiplier, and every seed below 4,096 places a 32 MiB object alike
    /// (docs/BENCHMARKS.md).
    #[arg(long, value_parser = seed_arg, default_value = "random")]
    seed: Seed,
    /// Slices per repetition of multiarc and of each row the ratio columns
    /// compare it with (the peers and multiarc-1list): such a row runs its
    /// `--seconds` as this many slices of `--seconds / N`, each between two
    /// multiarc slices of its mode, so that each ratio pairs runs a few
    /// tens of milliseconds apart. On the VM measured here a thread's rate
    /// drops by up to 2x for stretches of a tenth of a second to seconds;
    /// short slices keep most pairs within one such stretch
    /// (docs/BENCHMARKS.md).
    #[arg(long, value_parser = count_arg, default_value = "10")]
    slices: usize,
    /// Record multiarc's lock statistics during each measurement and report
    /// the hottest lock instance's share of all acquisitions.
    #[arg(long)]
    lockstat: bool,
    /// Draw throughput against threads into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Fresh processes the repetitions run in, one after another, each a
    /// run of this command for its share of them (at most `--repeat`; the
    /// default, 1, runs them all in this one). The ratio columns then show
    /// the lowest and highest of each process's median, and the JSON each
    /// one (`by_process`): how much a figure moves from one process (its
    /// memory, its caches' hashers) to the next. On the VM measured here
    /// that did not make the main job's one-thread figure repeat more
    /// closely than one process does (docs/BENCHMARKS.md).
    #[arg(long, value_parser = count_arg, default_value = "1")]
    processes: usize,
    /// Internal (`--processes`): run repetitions FROM..TO (from 0, TO
    /// excluded) of `--repeat` and print their runs as one JSON document.
    #[arg(long, hide = true, value_parser = repetitions_arg, value_name = "FROM..TO")]
    repetitions: Option<(usize, usize)>,
}

/// `--repetitions FROM..TO`.
fn repetitions_arg(text: &str) -> Result<(usize, usize), String> {
    let parsed = text
        .split_once("..")
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((from, to)) if from < to => Ok((from, to)),
        _ => Err(format!(
            "{text:?} is not a range of repetitions FROM..TO with FROM < TO"
        )),
    }
}

/// A read mode of `--modes`: hold the buffer (zero-copy) or copy it out;
/// or `chase`, hold reads one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    Hold,
    Copy,
    /// Hold mode with dependent keys: the block each read asks for mixes in
    /// the first 8 bytes of the block the read before it returned, so no
    /// lookup starts before the last one's data has arrived. A thread's
    /// reads then take the sum of their dependent memory accesses, not the
    /// overlap an out-of-order CPU makes of independent ones: divided by the
    /// time of one dependent DRAM access (`examples/pointer_chase.rs`), a
    /// read's time bounds the cache misses it takes (issue 42).
    Chase,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct BenchResult {
    cache: String,
    mode: Mode,
    threads: usize,
    ops_per_sec: f64,
    mb_per_sec: f64,
    /// Lookups that missed (a fully cached run should have none).
    misses: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_hottest_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_hottest_contended_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_acquisitions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_hottest: Option<String>,
    /// Runs behind this median.
    runs: usize,
    /// Each run's reads per second, in the order they ran. The multiarc row
    /// and the rows the ratio columns compare it with run in `--slices`
    /// slices per repetition, multiarc before and after each slice of
    /// those rows (see [`schedule`]), so they have more runs than the
    /// others; `multiarc_over_this` pairs them.
    ops_per_sec_by_run: Vec<f64>,
    /// The lockstat table of this run (printed for the most threads; in
    /// the JSON only between a `--processes` run and its processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock_table: Option<String>,
    /// A peer's row: multiarc's rate over this row's, each run of this row
    /// paired with the multiarc runs just before and after it (see
    /// [`schedule`]); absent for the multiarc row itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    multiarc_over_this: Option<PairedRatio>,
}

/// multiarc's rate over a row's, run by run: each of the row's runs against
/// the mean of the multiarc runs (same mode and threads) just before and
/// after it. Machine noise that lasts longer than a run or two then falls on
/// both sides of each ratio alike, which a ratio of two medians taken
/// seconds apart does not get.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct PairedRatio {
    median: f64,
    /// The middle half of the ratios: from the first to the third quartile.
    low_quartile: f64,
    high_quartile: f64,
    pairs: usize,
    /// With `--processes` above 1: the median of each process's pairs, in
    /// the order the processes ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    by_process: Vec<f64>,
}

impl PairedRatio {
    fn of(ratios: Vec<f64>) -> Option<PairedRatio> {
        let pairs = ratios.len();
        let [low_quartile, median, high_quartile] = quartiles(ratios)?;
        Some(PairedRatio {
            median,
            low_quartile,
            high_quartile,
            pairs,
            by_process: Vec::new(),
        })
    }
}

/// The first quartile, the median and the third quartile of `values`, each
/// interpolated linearly between the closest ranks; `None` for no values.
fn quartiles(mut values: Vec<f64>) -> Option<[f64; 3]> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let x = q * (values.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x.fract());
        let next = values[(i + 1).min(values.len() - 1)];
        values[i] + f * (next - values[i])
    };
    Some([at(0.25), at(0.5), at(0.75)])
}

/// The runs of repetition `rep` in order, each a row and a mode of that
/// row's (`modes[row]`). With a `reference` row (the multiarc row), the
/// other rows come first, each in all its modes, in an order rotated by
/// one per repetition; then each row the ratio columns compare multiarc
/// with (`paired`: the peers and `multiarc-1list`), in turn (also
/// rotated), mode by mode: multiarc, then `slices` times the row and
/// multiarc again, so that each of the row's runs sits between two
/// multiarc runs of its mode. Without one, the rows in turn, rotated
/// ([`harness::interleaved`]), each in all its modes.
fn schedule(
    modes: &[Vec<Mode>],
    rep: usize,
    reference: Option<usize>,
    paired: &dyn Fn(usize) -> bool,
    slices: usize,
) -> Vec<(usize, Mode)> {
    let all_modes = |r: usize| modes[r].iter().map(move |&mode| (r, mode));
    let Some(m) = reference else {
        return harness::interleaved(modes.len(), rep)
            .flat_map(all_modes)
            .collect();
    };
    let rotated = |keep: &dyn Fn(usize) -> bool| {
        let these: Vec<usize> = (0..modes.len())
            .filter(|&r| r != m && !modes[r].is_empty() && keep(r))
            .collect();
        (0..these.len())
            .map(|k| these[(k + rep) % these.len()])
            .collect::<Vec<_>>()
    };
    let mut order: Vec<(usize, Mode)> = rotated(&|r| !paired(r))
        .into_iter()
        .flat_map(all_modes)
        .collect();
    let compared = rotated(paired);
    if compared.is_empty() {
        order.extend(all_modes(m));
    }
    for o in compared {
        for &mode in &modes[o] {
            if order.last() != Some(&(m, mode)) {
                order.push((m, mode));
            }
            for _ in 0..slices {
                order.extend([(o, mode), (m, mode)]);
            }
        }
    }
    order
}

/// The paired ratios of each row's runs (see [`PairedRatio`]): `runs` in the
/// order they ran, each with its row index and repetition.
fn paired_ratios(runs: &[(usize, usize, BenchResult)], reference: usize) -> Vec<Option<f64>> {
    let same = |a: &BenchResult, b: &BenchResult| a.mode == b.mode && a.threads == b.threads;
    runs.iter()
        .enumerate()
        .map(|(j, (ri, rep, r))| {
            if *ri == reference || r.ops_per_sec <= 0.0 {
                return None;
            }
            let is_pair = |(i, p, m): &&(usize, usize, BenchResult)| {
                *i == reference && p == rep && same(m, r)
            };
            let before = runs[..j].iter().rev().find(is_pair);
            let after = runs[j + 1..].iter().find(is_pair);
            let (before, after) = (
                before.map(|(_, _, m)| m.ops_per_sec),
                after.map(|(_, _, m)| m.ops_per_sec),
            );
            let reference_rate = match (before, after) {
                (Some(a), Some(b)) => (a + b) / 2.0,
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => return None,
            };
            Some(reference_rate / r.ops_per_sec)
        })
        .collect()
}

/// `--seed`: a fixed seed, or none (each cache draws its own).
#[derive(Clone, Copy, Debug)]
struct Seed(Option<u64>);

fn seed_arg(s: &str) -> Result<Seed, String> {
    if s == "random" {
        return Ok(Seed(None));
    }
    s.parse::<u64>()
        .map(|n| Seed(Some(n)))
        .map_err(|_| format!("{s:?} is not a seed: give a number from 0 to 2^64 - 1, or random"))
}

#[derive(Serialize)]
struct Config {
    threads: Vec<usize>,
    seconds: f64,
    repeat: usize,
    /// Slices per repetition of multiarc and the rows compared with it.
    slices: usize,
    /// The fresh processes the repetitions ran in.
    processes: usize,
    file_bytes: u64,
    block_size: u64,
    modes: Vec<Mode>,
    caches: Vec<String>,
    policies: Vec<(String, String)>,
    lockstat: bool,
    sublists: usize,
    /// The key hashers' seed (`null`: random per cache).
    seed: Option<u64>,
}

#[derive(Serialize)]
struct Report {
    machine: Machine,
    config: Config,
    results: Vec<BenchResult>,
}

/// A row ready to measure: its cache loaded, its files written, its array
/// filled.
enum Prepared {
    Cache(Box<dyn BenchCache>),
    PageCache(TmpfsDir, Vec<std::fs::File>),
    Memcpy(Vec<u8>),
}

/// Builds and loads `row` for `threads` threads.
fn prepare(
    row: RowName,
    threads: usize,
    blocks: u64,
    block_size: u64,
    sublists: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<Prepared> {
    let block = block_size as usize;
    Ok(match row {
        RowName::PageCache => {
            let dir = TmpfsDir::create()?;
            let files = (0..threads)
                .map(|t| -> anyhow::Result<std::fs::File> {
                    let path = dir.0.join(format!("object-{t}"));
                    let f = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    for b in 0..blocks {
                        f.write_all_at(&block_bytes(key_of(t, b), block), b * block_size)
                            .with_context(|| format!("writing {}", path.display()))?;
                    }
                    Ok(f)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Prepared::PageCache(dir, files)
        }
        RowName::Memcpy => {
            let total = (blocks * threads as u64) as usize * block;
            let mut array = vec![0u8; total];
            for (i, chunk) in array.chunks_mut(block).enumerate() {
                let (t, b) = (i as u64 / blocks, i as u64 % blocks);
                chunk.copy_from_slice(&block_bytes(key_of(t as usize, b), block));
            }
            Prepared::Memcpy(array)
        }
        cache => {
            // Fully cached: capacity above the data set.
            let bytes = blocks * block_size * threads as u64;
            let capacity = bytes + bytes / 4 + (1 << 20);
            let cache = peers::build_with(cache.name(), capacity, block, sublists, seed)?;
            load(&*cache, threads, blocks, block);
            Prepared::Cache(cache)
        }
    })
}

/// One measurement of a prepared row.
fn run_once(
    prepared: &Prepared,
    label: &str,
    mode: Mode,
    threads: usize,
    blocks: u64,
    seconds: f64,
    args: &CacheArgs,
) -> BenchResult {
    let block = args.common.block_size as usize;
    let bs = args.common.block_size;
    match prepared {
        Prepared::Cache(cache) => {
            let tracing = args.lockstat && cache.set_lockstat(true);
            if tracing {
                multiarc::lock::lockstat::reset();
            }
            let run = measure(threads, seconds, block, cache_op(&**cache, mode, blocks));
            let mut r = result(label, mode, threads, run, block);
            if tracing {
                cache.set_lockstat(false);
                let rep = multiarc::lock::lockstat::snapshot();
                r.lock_hottest_share = Some(rep.hottest_acquisition_share());
                r.lock_hottest_contended_share = Some(rep.hottest_contended_share());
                r.lock_acquisitions = Some(rep.total_acquisitions());
                r.lock_hottest = rep
                    .rows
                    .iter()
                    .max_by_key(|row| row.acquisitions)
                    .map(|row| row.id.to_string());
                r.lock_table = Some(rep.table(8));
            }
            r
        }
        Prepared::PageCache(_dir, files) => {
            let run = measure(threads, seconds, block, |t, r, buf| {
                let b = r % blocks;
                let ok = files[t].read_exact_at(buf, b * bs).is_ok();
                if (r >> 52) == 0 {
                    check_block(key_of(t, b), buf);
                }
                ok
            });
            result(label, Mode::Copy, threads, run, block)
        }
        Prepared::Memcpy(array) => {
            let run = measure(threads, seconds, block, |t, r, buf| {
                let b = r % blocks;
                let at = ((t as u64 * blocks + b) as usize) * block;
                buf.copy_from_slice(&array[at..at + block]);
                std::hint::black_box(&buf);
                true
            });
            result(label, Mode::Copy, threads, run, block)
        }
    }
}

/// The bytes of block `block` of thread `thread`'s object: the key in the
/// first and last 8 bytes (so a wrong block is caught), a pattern between.
fn block_bytes(key: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(key % 251) as u8; len];
    let k = key.to_le_bytes();
    let n = len.min(8);
    v[..n].copy_from_slice(&k[..n]);
    if len >= 16 {
        v[len - 8..].copy_from_slice(&k);
    }
    v
}

fn key_of(thread: usize, block: u64) -> u64 {
    ((thread as u64) << 40) | block
}

fn check_block(key: u64, bytes: &[u8]) {
    let k = key.to_le_bytes();
    let n = bytes.len().min(8);
    assert_eq!(&bytes[..n], &k[..n], "block {key:#x}: wrong bytes returned");
}

fn cache_op<'a>(
    cache: &'a dyn BenchCache,
    mode: Mode,
    blocks: u64,
) -> impl Fn(usize, u64, &mut [u8]) -> bool + Sync + 'a {
    move |t, r, buf| {
        let key = match mode {
            // `buf` carries the first word of this thread's last block (its
            // key, or zeros before the first read): the load of it waits for
            // that read's data.
            Mode::Chase => {
                let last = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
                key_of(t, (r ^ last) % blocks)
            }
            Mode::Hold | Mode::Copy => key_of(t, r % blocks),
        };
        let verify = (r >> 52) == 0; // about one read in 4096
        cache.with_value(key, &mut |v| match mode {
            Mode::Hold => {
                std::hint::black_box((v[0], v[v.len() - 1]));
                if verify {
                    check_block(key, v);
                }
            }
            Mode::Copy => {
                buf.copy_from_slice(v);
                if verify {
                    check_block(key, buf);
                }
            }
            Mode::Chase => {
                buf[..8].copy_from_slice(&v[..8]);
                if verify {
                    check_block(key, v);
                }
            }
        })
    }
}

/// A directory on tmpfs for the `pagecache` row, removed on drop.
struct TmpfsDir(PathBuf);

impl TmpfsDir {
    fn create() -> anyhow::Result<TmpfsDir> {
        let base = Path::new("/dev/shm");
        if !is_tmpfs(base) {
            bail!("pagecache row: /dev/shm is not a tmpfs on this machine");
        }
        let dir = base.join(format!("multiarc-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TmpfsDir(dir))
    }
}

impl Drop for TmpfsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_tmpfs(path: &Path) -> bool {
    const TMPFS_MAGIC: rustix::fs::FsWord = 0x0102_1994;
    rustix::fs::statfs(path).is_ok_and(|st| st.f_type == TMPFS_MAGIC)
}

/// The cache workload: `bench` alone.
pub fn run(args: CacheArgs) -> anyhow::Result<()> {
    crate::cli::check_seconds(args.common.seconds)?;
    if args.common.block_size == 0 || args.common.block_size > 16 << 20 {
        bail!(
            "--block-size must be between 1 byte and 16 MiB, got {}",
            args.common.block_size
        );
    }
    if args.modes.contains(&Mode::Chase) && args.common.block_size < 8 {
        bail!(
            "--modes chase reads the next key from a block's first 8 bytes: --block-size must be at least 8, got {}",
            args.common.block_size
        );
    }
    if args.file_bytes < args.common.block_size {
        bail!(
            "--file-bytes ({}) must hold at least one block of --block-size ({})",
            args.file_bytes,
            args.common.block_size
        );
    }
    if let Some(path) = &args.plot {
        plot::available(path)?;
    }
    let modes = args.modes.clone();
    let rows: Vec<RowName> = match &args.caches {
        Some(rows) => rows.clone(),
        // Every row this binary has (no peers without the `peers` feature),
        // one per configuration: a multiarc row that is the default
        // configuration under a second name (`multiarc-lazy` while the lazy
        // mode is the default) would only show the noise between two runs
        // of one thing as a difference.
        None => <RowName as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .filter(|r| !peers::is_missing_peer(r.name()))
            .filter(|r| !is_default_under_another_name(*r))
            // The adaptive policy's hits are the lazy mode's, as the
            // default's and S3ARC's, and the generations policy's a first
            // hit's store more (none in a run without misses): rows on
            // request only.
            .filter(|r| !matches!(r, RowName::MultiarcAdaptive | RowName::MultiarcGen))
            .collect(),
    };
    let names: Vec<String> = rows.iter().map(|r| r.name().to_string()).collect();
    let max_threads = *args
        .common
        .threads
        .iter()
        .max()
        .expect("clap requires a value");
    let row_modes: Vec<Vec<Mode>> = rows.iter().map(|r| r.modes(&modes)).collect();
    // multiarc runs before and after each row it is compared with (see
    // `schedule`), when there are others.
    let reference = rows
        .iter()
        .zip(&row_modes)
        .position(|(r, m)| *r == RowName::Multiarc && !m.is_empty())
        .filter(|_| row_modes.iter().filter(|m| !m.is_empty()).count() > 1);
    let data = args.file_bytes.saturating_mul(max_threads as u64);
    if let Some(avail) = meminfo("MemAvailable:") {
        // Each cache holds the data once (plus its overhead), one at a time,
        // or two with multiarc kept loaded beside the row it is paired with.
        let at_once = if reference.is_some() { 3 } else { 2 };
        if data > avail / at_once {
            bail!(
                "the data set ({} MiB = {max_threads} threads x {} MiB) is more than 1/{at_once} of the available memory ({} MiB); lower --file-bytes or --threads",
                data >> 20,
                args.file_bytes >> 20,
                avail >> 20
            );
        }
    }
    let block = args.common.block_size as usize;
    let blocks = args.file_bytes / args.common.block_size;
    // The rows the ratio columns compare multiarc with run between two
    // multiarc runs (`schedule`).
    let paired =
        |ri: usize| rows[ri] == RowName::Multiarc1List || PEER_NAMES.contains(&rows[ri].name());
    let slices = if reference.is_some() { args.slices } else { 1 };
    let measurements_per_rep =
        schedule(&row_modes, 0, reference, &paired, slices).len() * args.common.threads.len();
    let plan = Plan {
        rows: &rows,
        row_modes: &row_modes,
        reference,
        paired: &paired,
        slices,
        blocks,
    };
    let processes = args.processes;
    if processes > args.common.repeat {
        bail!(
            "--processes ({processes}) must be at most --repeat ({}): each process runs whole repetitions",
            args.common.repeat
        );
    }
    if let Some((from, to)) = args.repetitions {
        if to > args.common.repeat {
            bail!(
                "--repetitions {from}..{to} goes past --repeat ({})",
                args.common.repeat
            );
        }
        // A process of a `--processes` run: its runs, for the one that
        // started it to put together.
        let runs = measure_repetitions(&args, &plan, from..to, &Progress::ToParent)?;
        println!("{}", serde_json::to_string(&ProcessRuns { runs })?);
        return Ok(());
    }
    // What each row's policy is, for the report (not a process's business).
    let mut policies = Vec::new();
    for r in rows.iter().filter(|r| r.is_cache()) {
        let c = peers::build(r.name(), 1 << 20, block)?;
        policies.push((r.name().to_string(), c.policy().to_string()));
    }
    let total_runs = measurements_per_rep * args.common.repeat;
    let bar = harness::Bar::new("bench", total_runs, args.common.json);
    // Every run of every (row, mode, threads), in the order they ran, with
    // its row and repetition, and the process it ran in.
    let (runs, process_of_run) = if processes == 1 {
        let runs = measure_repetitions(&args, &plan, 0..args.common.repeat, &Progress::Bar(&bar))?;
        let process_of_run = vec![0; runs.len()];
        (runs, process_of_run)
    } else {
        run_in_processes(&args, &rows, processes, &bar)?
    };
    bar.finish(&match processes {
        1 => format!("{} runs", runs.len()),
        _ => format!("{} runs in {processes} processes", runs.len()),
    });

    let paired = reference.map(|m| paired_ratios(&runs, m));
    // The median run of each (row, mode, threads), in row order.
    let mut results = Vec::new();
    let mut report_lockstat_table = None;
    for (ri, row) in rows.iter().enumerate() {
        let label = row.name();
        for &threads in &args.common.threads {
            for &mode in &modes {
                let is_this = |(i, _, r): &(usize, usize, BenchResult)| {
                    *i == ri && r.mode == mode && r.threads == threads
                };
                let mut these: Vec<&BenchResult> = runs
                    .iter()
                    .filter(|x| is_this(x))
                    .map(|(_, _, r)| r)
                    .collect();
                if these.is_empty() {
                    continue;
                }
                let by_run: Vec<f64> = these.iter().map(|r| r.ops_per_sec).collect();
                let mut median = (*harness::median_by(&mut these, |r| r.ops_per_sec)).clone();
                median.runs = these.len();
                median.ops_per_sec_by_run = by_run;
                median.multiarc_over_this = paired.as_ref().and_then(|paired| {
                    // This cell's ratios, each with the process it ran in.
                    let ratios: Vec<(usize, f64)> = runs
                        .iter()
                        .zip(paired)
                        .zip(&process_of_run)
                        .filter(|((x, _), _)| is_this(x))
                        .filter_map(|((_, p), &process)| p.map(|p| (process, p)))
                        .collect();
                    let mut ratio = PairedRatio::of(ratios.iter().map(|&(_, r)| r).collect())?;
                    if processes > 1 {
                        ratio.by_process = (0..processes)
                            .filter_map(|process| {
                                let of_it = ratios
                                    .iter()
                                    .filter(|&&(p, _)| p == process)
                                    .map(|&(_, r)| r);
                                quartiles(of_it.collect()).map(|[_, median, _]| median)
                            })
                            .collect();
                    }
                    Some(ratio)
                });
                if let Some(table) = median.lock_table.take() {
                    if threads == max_threads && mode == modes[0] {
                        report_lockstat_table.get_or_insert_with(Vec::new).push((
                            label.to_string(),
                            threads,
                            table,
                        ));
                    }
                }
                results.push(median);
            }
        }
    }

    if let Some(path) = &args.plot {
        let panels: Vec<plot::Panel> = modes
            .iter()
            .map(|&mode| plot::Panel {
                title: format!("{mode:?} mode").to_lowercase(),
                series: names
                    .iter()
                    .filter_map(|name| {
                        let points: Vec<(f64, f64)> = results
                            .iter()
                            .filter(|r| &r.cache == name && r.mode == mode)
                            .map(|r| (r.threads as f64, r.ops_per_sec / 1e6))
                            .collect();
                        (!points.is_empty()).then(|| plot::Series {
                            name: name.clone(),
                            points,
                        })
                    })
                    .collect(),
            })
            .collect();
        plot::panel_chart(
            path,
            &format!(
                "Cached random {} KiB reads: aggregate throughput, median of {} interleaved repetitions",
                args.common.block_size / 1024,
                args.common.repeat
            ),
            "threads",
            "million reads per second",
            &panels,
            &|name| name.starts_with("multiarc"),
        )?;
    }

    let missed: u64 = results.iter().map(|r| r.misses).sum();
    if missed > 0 {
        eprintln!(
            "warning: {missed} lookups missed in a run that should be fully cached; \
             rows with misses measure more than hits (see the misses field)"
        );
    }

    if args.common.json {
        let report = Report {
            machine: machine(),
            config: Config {
                threads: args.common.threads.clone(),
                seconds: args.common.seconds,
                repeat: args.common.repeat,
                slices,
                processes,
                file_bytes: args.file_bytes,
                block_size: args.common.block_size,
                modes,
                caches: names,
                policies,
                lockstat: args.lockstat,
                sublists: args.sublists.unwrap_or_else(multiarc::default_sublists),
                seed: args.seed.0,
            },
            results,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_tables(
        &args, slices, processes, &modes, &names, &policies, &results,
    );
    if let Some(tables) = report_lockstat_table {
        for (name, threads, table) in tables {
            println!(
                "\nlockstat, {name}, {threads} threads (top 8 instances by contention):\n{table}"
            );
        }
    }
    Ok(())
}

/// What the measurement runs: the rows, their modes, multiarc's row (the
/// reference the ratio columns divide by, when there are others), the rows
/// it is compared with, its slices, and each thread's blocks.
struct Plan<'a> {
    rows: &'a [RowName],
    row_modes: &'a [Vec<Mode>],
    reference: Option<usize>,
    paired: &'a dyn Fn(usize) -> bool,
    slices: usize,
    blocks: u64,
}

/// Where a measurement's progress goes: this process's bar, or, in a
/// process of a `--processes` run, a line per run on stderr for the bar of
/// the process that started it.
enum Progress<'a> {
    Bar(&'a harness::Bar),
    ToParent,
}

/// The line a process of a `--processes` run writes to stderr after each
/// run (any other line on its stderr is passed on).
const RUN_DONE_LINE: &str = "multiarc-bench: run done";

impl Progress<'_> {
    fn doing(&self, what: impl FnOnce() -> String) {
        if let Progress::Bar(bar) = self {
            bar.doing(what());
        }
    }

    fn run_done(&self) {
        match self {
            Progress::Bar(bar) => bar.runs_done(1),
            Progress::ToParent => eprintln!("{RUN_DONE_LINE}"),
        }
    }
}

/// A run: its row, its repetition, and what it measured.
type Measured = (usize, usize, BenchResult);

/// The runs of a process of a `--processes` run, on its stdout.
#[derive(Serialize, Deserialize)]
struct ProcessRuns {
    runs: Vec<Measured>,
}

/// Runs repetitions `reps` of every (row, mode, threads) of `plan`, and
/// returns every run in the order they ran.
fn measure_repetitions(
    args: &CacheArgs,
    plan: &Plan,
    reps: std::ops::Range<usize>,
    progress: &Progress,
) -> anyhow::Result<Vec<Measured>> {
    let Plan {
        rows,
        row_modes,
        reference,
        paired,
        slices,
        blocks,
    } = *plan;
    // A run's length: a slice for multiarc and the rows paired with it.
    let seconds_of = |ri: usize| {
        if Some(ri) == reference || paired(ri) {
            args.common.seconds / slices as f64
        } else {
            args.common.seconds
        }
    };
    let avail = meminfo("MemAvailable:").unwrap_or(0);
    let mut runs = Vec::new();
    for &threads in &args.common.threads {
        // Each repetition runs every row, back to back, the order rotated
        // by one row per repetition, so that drift of the machine hits
        // every row alike; each row multiarc is compared with runs in
        // slices, multiarc before and after each, so that those rows' runs
        // pair with multiarc runs next to them in time (`schedule`). Rows
        // stay loaded between repetitions when all of them fit in a
        // quarter of the available memory (a cache costs about 1.5x its
        // data); otherwise each is rebuilt and loaded again for each
        // repetition, but kept over its slices, and multiarc for all its
        // pairs.
        let bytes = blocks * args.common.block_size * threads as u64;
        let keep = (rows.len() as u64).saturating_mul(bytes * 3 / 2) <= avail / 4;
        let mut kept: Vec<Option<Prepared>> = rows.iter().map(|_| None).collect();
        for rep in reps.clone() {
            let order = schedule(row_modes, rep, reference, paired, slices);
            for (k, &(ri, mode)) in order.iter().enumerate() {
                let row = rows[ri];
                let label = row.name();
                let prepared = match kept[ri].take() {
                    Some(p) => p,
                    None => {
                        progress.doing(|| {
                            format!("{label}, {threads} threads: loading {} MiB", bytes >> 20)
                        });
                        prepare(
                            row,
                            threads,
                            blocks,
                            args.common.block_size,
                            args.sublists,
                            args.seed.0,
                        )?
                    }
                };
                progress.doing(|| {
                    format!(
                        "repetition {}/{}, {label}, {threads} threads, {mode:?}",
                        rep + 1,
                        args.common.repeat
                    )
                });
                let r = run_once(
                    &prepared,
                    label,
                    mode,
                    threads,
                    blocks,
                    seconds_of(ri),
                    args,
                );
                runs.push((ri, rep, r));
                progress.run_done();
                // Kept for its next run in this repetition as well.
                if keep || Some(ri) == reference || order[k + 1..].iter().any(|&(r, _)| r == ri) {
                    kept[ri] = Some(prepared);
                }
            }
        }
    }
    Ok(runs)
}

/// Runs the repetitions in `processes` fresh processes of this program, one
/// after another, each a `bench cache` with this run's flags and its share
/// of the repetitions (`--repetitions`); returns their runs in the order
/// they ran, and the process of each.
fn run_in_processes(
    args: &CacheArgs,
    rows: &[RowName],
    processes: usize,
    bar: &harness::Bar,
) -> anyhow::Result<(Vec<Measured>, Vec<usize>)> {
    use std::io::{BufRead, Read};
    let exe = std::env::current_exe().context("finding this program to run its processes")?;
    let repeat = args.common.repeat;
    let (mut runs, mut process_of_run) = (Vec::new(), Vec::new());
    let mut passed_on = Vec::new();
    for p in 0..processes {
        let reps = (p * repeat / processes)..((p + 1) * repeat / processes);
        let which = if reps.len() == 1 {
            format!("repetition {}", reps.end)
        } else {
            format!("repetitions {}-{}", reps.start + 1, reps.end)
        };
        bar.doing(format!(
            "process {}/{processes}: {which} of {repeat}",
            p + 1
        ));
        let mut child = std::process::Command::new(&exe)
            .args(process_args(args, rows, processes, reps.clone()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut stdout = child.stdout.take().expect("piped");
        // Read on its own thread: a process writes its runs at the end,
        // and it would block on a full pipe while this one reads stderr.
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            stdout.read_to_string(&mut text).map(|_| text)
        });
        let mut said = Vec::new();
        for line in std::io::BufReader::new(child.stderr.take().expect("piped")).lines() {
            let line = line.context("reading a bench process's stderr")?;
            if line == RUN_DONE_LINE {
                bar.runs_done(1);
            } else {
                said.push(line);
            }
        }
        let status = child.wait().context("waiting for a bench process")?;
        let text = reader
            .join()
            .expect("the reader does not panic")
            .context("reading a bench process's stdout")?;
        if !status.success() {
            bail!(
                "bench process {} of {processes} ({status}): {}",
                p + 1,
                said.last().map_or("it said nothing", |s| s.as_str())
            );
        }
        let these: ProcessRuns = serde_json::from_str(&text)
            .with_context(|| format!("reading bench process {} of {processes}'s runs", p + 1))?;
        process_of_run.extend(std::iter::repeat_n(p, these.runs.len()));
        runs.extend(these.runs);
        passed_on.extend(said);
    }
    for line in passed_on {
        eprintln!("{line}");
    }
    Ok((runs, process_of_run))
}

/// The command line of a process of a `--processes` run that runs
/// repetitions `reps` with this run's flags (the rows named, as resolved).
fn process_args(
    args: &CacheArgs,
    rows: &[RowName],
    processes: usize,
    reps: std::ops::Range<usize>,
) -> Vec<String> {
    let join = |items: Vec<String>| items.join(",");
    let mut a: Vec<String> = vec!["bench".into(), "cache".into()];
    let mut flag = |name: &str, value: String| a.extend([format!("--{name}"), value]);
    flag(
        "threads",
        join(args.common.threads.iter().map(|t| t.to_string()).collect()),
    );
    flag("seconds", args.common.seconds.to_string());
    flag("repeat", args.common.repeat.to_string());
    flag("block-size", args.common.block_size.to_string());
    flag("file-bytes", args.file_bytes.to_string());
    flag("modes", join(args.modes.iter().map(enum_name).collect()));
    flag(
        "caches",
        join(rows.iter().map(|r| r.name().into()).collect()),
    );
    flag(
        "seed",
        args.seed.0.map_or("random".into(), |s| s.to_string()),
    );
    flag("slices", args.slices.to_string());
    flag("processes", processes.to_string());
    flag("repetitions", format!("{}..{}", reps.start, reps.end));
    if let Some(n) = args.sublists {
        flag("sublists", n.to_string());
    }
    if args.lockstat {
        a.push("--lockstat".into());
    }
    a
}

/// Loads every thread's object, on up to as many loader threads as CPUs.
fn load(cache: &dyn BenchCache, threads: usize, blocks: u64, block: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let loaders = threads.min(cpus).max(1);
    std::thread::scope(|s| {
        for w in 0..loaders {
            s.spawn(move || {
                for t in (w..threads).step_by(loaders) {
                    for b in 0..blocks {
                        let key = key_of(t, b);
                        cache.insert(key, &block_bytes(key, block));
                    }
                }
            });
        }
    });
}

fn result(cache: &str, mode: Mode, threads: usize, run: Run, block: usize) -> BenchResult {
    let ops_per_sec = run.rate();
    BenchResult {
        cache: cache.to_string(),
        mode,
        threads,
        ops_per_sec,
        mb_per_sec: ops_per_sec * block as f64 / 1e6,
        misses: run.misses,
        lock_hottest_share: None,
        lock_hottest_contended_share: None,
        lock_acquisitions: None,
        lock_hottest: None,
        runs: 1,
        ops_per_sec_by_run: Vec::new(),
        lock_table: None,
        multiarc_over_this: None,
    }
}

/// How much a cell's runs vary: ` ±N%`, half the distance between their
/// first and third quartiles against their median (empty for a single
/// run). Not their range: with the default 30 slices of multiarc and the
/// compared rows, one slice caught in a slow stretch of the host would set
/// it.
fn spread(r: &BenchResult) -> String {
    let runs = &r.ops_per_sec_by_run;
    if runs.len() < 2 || r.ops_per_sec <= 0.0 {
        return String::new();
    }
    let Some([low, _, high]) = quartiles(runs.clone()) else {
        return String::new();
    };
    format!(" ±{:.0}%", 50.0 * (high - low) / r.ops_per_sec)
}

/// `1.24x quick_cache (1.20-1.27x)`: multiarc over `peer` run by run, the
/// median of the pairs and their middle half ([`PairedRatio`]); the ratio
/// of the two medians where the runs were not paired.
fn paired_cell(multiarc: &BenchResult, peer: &BenchResult, name: bool) -> String {
    let name = if name {
        format!(" {}", peer.cache)
    } else {
        String::new()
    };
    match &peer.multiarc_over_this {
        Some(p) if p.by_process.len() >= 2 => {
            let (low, high) = p
                .by_process
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &r| {
                    (l.min(r), h.max(r))
                });
            format!("{:.2}x{name} (processes {low:.2}-{high:.2}x)", p.median)
        }
        Some(p) if p.pairs >= 2 => format!(
            "{:.2}x{name} ({:.2}-{:.2}x)",
            p.median, p.low_quartile, p.high_quartile
        ),
        Some(p) => format!("{:.2}x{name}", p.median),
        None => format!("{:.2}x{name}", multiarc.ops_per_sec / peer.ops_per_sec),
    }
}

/// The peer multiarc is least ahead of: the smallest paired ratio
/// ([`PairedRatio`]), which compares runs beside each other in time; the
/// highest median rate where the runs were not paired (rates of two rows
/// measured seconds apart move with the host as much as they differ).
fn best_peer<'a>(peers: impl Iterator<Item = &'a BenchResult>) -> Option<&'a BenchResult> {
    let peers: Vec<&BenchResult> = peers.collect();
    let ratios: Option<Vec<f64>> = peers
        .iter()
        .map(|p| p.multiarc_over_this.as_ref().map(|r| r.median))
        .collect();
    match ratios {
        Some(ratios) => peers
            .into_iter()
            .zip(ratios)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p),
        None => peers
            .into_iter()
            .max_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec)),
    }
}

fn print_tables(
    args: &CacheArgs,
    slices: usize,
    processes: usize,
    modes: &[Mode],
    names: &[String],
    policies: &[(String, String)],
    results: &[BenchResult],
) {
    let m = machine();
    let slicing = if slices > 1 {
        format!(
            " (multiarc and the compared rows: {slices} slices of {} s)",
            args.common.seconds / slices as f64
        )
    } else {
        String::new()
    };
    println!(
        "multiarc bench: {} threads x {} MiB objects, random {} B reads, {} repetitions of {} s per row{slicing} in {processes} process{}; {} CPUs ({}), {} GiB",
        args.common.threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","),
        args.file_bytes >> 20,
        args.common.block_size,
        args.common.repeat,
        args.common.seconds,
        if processes == 1 { "" } else { "es" },
        m.cpus,
        m.cpu_model,
        m.memory_bytes >> 30
    );
    println!("policies:");
    for (name, policy) in policies {
        println!("  {name:<15} {policy}");
    }
    let find = |name: &str, mode: Mode, t: usize| {
        results
            .iter()
            .find(|r| r.cache == name && r.mode == mode && r.threads == t)
    };
    for &mode in modes {
        let cols: Vec<&String> = names
            .iter()
            .filter(|n| {
                args.common
                    .threads
                    .iter()
                    .any(|&t| find(n, mode, t).is_some())
            })
            .collect();
        if cols.is_empty() {
            continue;
        }
        // A table row: the thread count, then each column's cell (`-`
        // where that row did not run).
        let cells = |t: usize, cell: &dyn Fn(&str) -> Option<String>| {
            let mut row = vec![t.to_string()];
            row.extend(cols.iter().map(|c| cell(c).unwrap_or_else(|| "-".into())));
            row
        };
        // Hold mode moves no bytes: its only table is reads per second.
        let tables: &[(&str, f64, &str)] = match mode {
            Mode::Hold => &[("Mops/s", 1e6, "reads")],
            Mode::Chase => &[("Mops/s", 1e6, "dependent reads")],
            Mode::Copy => &[
                ("Mops/s", 1e6, "reads"),
                ("GB/s", 1e9 / args.common.block_size as f64, "bytes copied"),
            ],
        };
        for &(unit, scale, what) in tables {
            println!("\n{mode:?} mode, aggregate {what} per second ({unit}), median of each row's interleaved runs (± half their interquartile range):");
            let ratios = unit == "Mops/s";
            if ratios && processes > 1 {
                println!("(ratios: multiarc over each run of a compared row, against the multiarc runs just before and after it: the median of those pairs, and the lowest and highest of each process's median; best peer: the smallest median)");
            } else if ratios {
                println!("(ratios: multiarc over each run of a compared row, against the multiarc runs just before and after it: the median and the middle half of those pairs; best peer: the smallest median)");
            }
            let mut header = vec!["threads".to_string()];
            header.extend(cols.iter().map(|c| c.to_string()));
            if ratios {
                header.extend(["vs 1list".into(), "vs best peer".into()]);
            }
            let mut table = text_table(header, 0);
            for &t in &args.common.threads {
                let mut row = cells(t, &|c| {
                    find(c, mode, t).map(|r| format!("{:.2}{}", r.ops_per_sec / scale, spread(r)))
                });
                if ratios {
                    let ours = find("multiarc", mode, t);
                    let one = find("multiarc-1list", mode, t);
                    let best_peer = best_peer(PEER_NAMES.iter().filter_map(|p| find(p, mode, t)));
                    row.push(match (ours, one) {
                        (Some(a), Some(b)) => paired_cell(a, b, false),
                        _ => "-".into(),
                    });
                    row.push(match (ours, best_peer) {
                        (Some(a), Some(p)) => paired_cell(a, p, true),
                        _ => "-".into(),
                    });
                }
                table.add_row(row);
            }
            if ratios {
                // `1.05x quick_cache`: the ratios line up on the left.
                let last = table.column_count() - 1;
                if let Some(c) = table.column_mut(last) {
                    c.set_cell_alignment(comfy_table::CellAlignment::Left);
                }
            }
            println!("{}", table.trim_fmt());
        }
        if mode == Mode::Chase {
            // What a dependent read costs one thread: compare it with
            // `examples/pointer_chase.rs`'s time of one dependent load.
            println!(
                "\nChase mode, nanoseconds per read in each thread (threads / aggregate rate):"
            );
            let mut header = vec!["threads".to_string()];
            header.extend(cols.iter().map(|c| c.to_string()));
            let mut table = text_table(header, 0);
            for &t in &args.common.threads {
                table.add_row(cells(t, &|c| {
                    find(c, mode, t).map(|r| format!("{:.1}", t as f64 * 1e9 / r.ops_per_sec))
                }));
            }
            println!("{}", table.trim_fmt());
        }
        if args.lockstat {
            println!("\n{mode:?} mode, multiarc lockstat: hottest lock instance's share of all acquisitions (and of contended ones):");
            let mut header = vec!["row".to_string()];
            header.extend(args.common.threads.iter().map(|t| format!("{t} threads")));
            let mut table = text_table(header, 1);
            for c in cols.iter().filter(|c| c.starts_with("multiarc")) {
                let mut row = vec![c.to_string()];
                for &t in &args.common.threads {
                    row.push(
                        match find(c, mode, t)
                            .and_then(|r| r.lock_hottest_share.zip(r.lock_hottest_contended_share))
                        {
                            Some((h, hc)) => format!("{:.2}% ({:.1}%)", 100.0 * h, 100.0 * hc),
                            None => "-".into(),
                        },
                    );
                }
                table.add_row(row);
            }
            println!("{}", table.trim_fmt());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The flags a process of a `--processes` run gets are this run's, with
    /// the rows as resolved, and its share of the repetitions.
    #[test]
    fn a_process_gets_this_runs_flags_and_its_repetitions() {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: CacheArgs,
        }
        let parse = |args: &[String]| {
            <Command as clap::Parser>::try_parse_from(
                std::iter::once("multiarc").chain(args.iter().map(|a| a.as_str())),
            )
            .map(|c| c.args)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        };
        let given: Vec<String> = [
            "--threads",
            "1,3",
            "--seconds",
            "0.125",
            "--repeat",
            "7",
            "--block-size",
            "4KiB",
            "--file-bytes",
            "3MiB",
            "--modes",
            "copy,chase",
            "--seed",
            "12",
            "--slices",
            "4",
            "--sublists",
            "5",
            "--lockstat",
        ]
        .map(String::from)
        .to_vec();
        let parent = parse(&given);
        let rows = [RowName::Multiarc, RowName::MutexLru, RowName::Memcpy];
        let line = process_args(&parent, &rows, 3, 2..5);
        assert_eq!(line[..2], ["bench", "cache"]);
        let child = parse(&line[2..]);
        assert_eq!(child.common.threads, [1, 3]);
        assert_eq!(child.common.seconds, 0.125);
        assert_eq!(child.common.repeat, 7);
        assert_eq!(child.common.block_size, 4096);
        assert_eq!(child.file_bytes, 3 << 20);
        assert_eq!(child.modes, [Mode::Copy, Mode::Chase]);
        assert_eq!(child.caches, Some(rows.to_vec()));
        assert_eq!(child.seed.0, Some(12));
        assert_eq!(child.slices, 4);
        assert_eq!(child.sublists, Some(5));
        assert!(child.lockstat);
        assert_eq!(child.processes, 3);
        assert_eq!(child.repetitions, Some((2, 5)));
        assert!(!child.common.json && child.plot.is_none());
        // A random seed stays random; no sublists, no lockstat stay so.
        let parent = parse(&["--repeat".to_string(), "2".to_string()]);
        let child = parse(&process_args(&parent, &rows, 2, 0..1)[2..]);
        assert_eq!(
            (child.seed.0, child.sublists, child.lockstat),
            (None, None, false)
        );
        for bad in ["3..3", "4..2", "1", "a..2", "..2"] {
            assert!(repetitions_arg(bad).is_err(), "{bad}");
        }
    }

    /// A one-thread result of `cache` in `mode` at `rate` reads per second.
    fn at_rate(cache: &str, mode: Mode, rate: f64) -> BenchResult {
        let run = Run {
            ops: 1,
            misses: 0,
            elapsed: std::time::Duration::from_secs(1),
        };
        let mut r = result(cache, mode, 1, run, 8192);
        r.ops_per_sec = rate;
        r
    }

    #[test]
    fn row_names_are_the_value_names_and_the_peers_names() {
        for &r in RowName::value_variants() {
            assert_eq!(r.to_possible_value().unwrap().get_name(), r.name());
        }
        let caches: Vec<&str> = RowName::value_variants()
            .iter()
            .filter(|r| r.is_cache())
            .map(|r| r.name())
            .collect();
        let peers: Vec<&str> = peers::MULTIARC_NAMES
            .iter()
            .chain(PEER_NAMES)
            .copied()
            .collect();
        assert_eq!(caches, peers);
        assert_eq!(crate::cli::enum_names::<Mode>(), ["hold", "copy", "chase"]);
    }

    #[test]
    fn the_default_rows_hold_each_configuration_once() {
        let default_mode = multiarc::HitMode::default();
        for &r in RowName::value_variants() {
            let same_as_multiarc = match r {
                RowName::MultiarcLazy => default_mode == multiarc::HitMode::Lazy,
                RowName::MultiarcEager => default_mode == multiarc::HitMode::Eager,
                _ => false,
            };
            assert_eq!(is_default_under_another_name(r), same_as_multiarc, "{r:?}");
        }
    }

    #[test]
    fn multiarc_runs_between_every_two_rows_and_the_others_rotate() {
        use Mode::{Copy as C, Hold as H};
        let all = |_| true;
        // Rows in one mode: the row numbers of the runs.
        let rows = |n: usize| vec![vec![H]; n];
        let order =
            |n: usize, rep: usize, reference: Option<usize>, paired: &dyn Fn(usize) -> bool| {
                schedule(&rows(n), rep, reference, paired, 1)
                    .into_iter()
                    .map(|(r, mode)| {
                        assert_eq!(mode, H);
                        r
                    })
                    .collect::<Vec<_>>()
            };
        assert_eq!(order(3, 0, None, &all), [0, 1, 2]);
        assert_eq!(order(3, 1, None, &all), [1, 2, 0]);
        assert_eq!(order(4, 0, Some(0), &all), [0, 1, 0, 2, 0, 3, 0]);
        assert_eq!(order(4, 1, Some(0), &all), [0, 2, 0, 3, 0, 1, 0]);
        assert_eq!(order(4, 2, Some(0), &all), [0, 3, 0, 1, 0, 2, 0]);
        assert_eq!(order(4, 3, Some(0), &all), [0, 1, 0, 2, 0, 3, 0]);
        assert_eq!(order(3, 1, Some(1), &all), [1, 2, 1, 0, 1]);
        assert_eq!(order(1, 5, Some(0), &all), [0]);
        // Rows 1 and 4 unpaired: first, then multiarc around each other.
        let some = |r| r != 1 && r != 4;
        assert_eq!(order(5, 0, Some(0), &some), [1, 4, 0, 2, 0, 3, 0]);
        assert_eq!(order(5, 1, Some(0), &some), [4, 1, 0, 3, 0, 2, 0]);
        // No compared row: multiarc after the others.
        assert_eq!(order(2, 0, Some(0), &|_| false), [1, 0]);

        // Two modes and slices: a compared row's runs of a mode each sit
        // between two multiarc runs of that mode; an unpaired row (2, copy
        // only) runs once in each of its modes; a row without modes (3)
        // not at all.
        let modes = vec![vec![H, C], vec![H, C], vec![C], vec![]];
        let unpaired = |r| r != 2;
        assert_eq!(
            schedule(&modes, 0, Some(0), &unpaired, 2),
            [
                (2, C),
                (0, H),
                (1, H),
                (0, H),
                (1, H),
                (0, H),
                (0, C),
                (1, C),
                (0, C),
                (1, C),
                (0, C)
            ]
        );
        assert_eq!(
            schedule(&modes, 0, None, &all, 2),
            [(0, H), (0, C), (1, H), (1, C), (2, C)]
        );
    }

    #[test]
    fn each_run_pairs_with_the_multiarc_runs_beside_it() {
        let run = |rate: f64, mode: Mode| at_rate("x", mode, rate);
        let (hold, copy) = (Mode::Hold, Mode::Copy);
        // Row 0 is multiarc. Repetition 0: m(10), row 1 (5), m(30); row 1's
        // copy run pairs with multiarc's copy runs only. Repetition 1: row
        // 2 (4) has a multiarc run after it only, and not the repetition's
        // before it.
        let runs = vec![
            (0, 0, run(10.0, hold)),
            (0, 0, run(7.0, copy)),
            (1, 0, run(5.0, hold)),
            (1, 0, run(3.5, copy)),
            (0, 0, run(30.0, hold)),
            (2, 1, run(4.0, hold)),
            (0, 1, run(8.0, hold)),
        ];
        let p = paired_ratios(&runs, 0);
        assert_eq!(p, [None, None, Some(4.0), Some(2.0), None, Some(2.0), None]);
        let q = PairedRatio::of(vec![4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(
            (q.median, q.low_quartile, q.high_quartile, q.pairs),
            (3.0, 2.0, 4.0, 5)
        );
        let q = PairedRatio::of(vec![1.0, 2.0]).unwrap();
        assert_eq!(
            (q.median, q.low_quartile, q.high_quartile),
            (1.5, 1.25, 1.75)
        );
        assert_eq!(PairedRatio::of(Vec::new()), None);
    }

    #[test]
    fn the_best_peer_is_the_one_multiarc_is_least_ahead_of() {
        let row = |name: &str, rate: f64, ratio: Option<f64>| {
            let mut r = at_rate(name, Mode::Hold, rate);
            r.multiarc_over_this = ratio.and_then(|x| PairedRatio::of(vec![x]));
            r
        };
        // The faster median rate ran in a fast stretch of the host: the
        // paired ratios decide.
        let rows = [row("a", 20.0, Some(1.4)), row("b", 15.0, Some(1.2))];
        assert_eq!(best_peer(rows.iter()).unwrap().cache, "b");
        // Without pairs, the rates.
        let rows = [row("a", 20.0, None), row("b", 15.0, None)];
        assert_eq!(best_peer(rows.iter()).unwrap().cache, "a");
        assert!(best_peer(std::iter::empty()).is_none());
    }

    #[test]
    fn a_cell_says_how_much_its_runs_vary() {
        let mut r = at_rate("multiarc", Mode::Hold, 100.0);
        r.ops_per_sec_by_run = vec![96.0, 100.0, 104.0];
        assert_eq!(spread(&r), " ±2%");
        // The quartiles, not the range: one slow run does not set it.
        r.ops_per_sec_by_run = vec![50.0, 98.0, 100.0, 102.0, 103.0];
        assert_eq!(spread(&r), " ±2%");
        r.ops_per_sec_by_run = vec![100.0];
        assert_eq!(spread(&r), "");
    }

    #[test]
    fn baselines_only_copy() {
        let both = [Mode::Hold, Mode::Copy];
        assert_eq!(RowName::Memcpy.modes(&both), [Mode::Copy]);
        assert_eq!(RowName::PageCache.modes(&[Mode::Hold]), []);
        assert_eq!(RowName::Moka.modes(&both), both);
    }
}
