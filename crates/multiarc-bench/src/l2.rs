//! `multiarc bench --workload l2`: random reads over a working set several
//! times larger than memory and smaller than memory plus the second tier,
//! backed by a file read with `O_DIRECT`: the second tier's throughput
//! against foyer's hybrid cache and against no cache.
//!
//! Rows: `multiarc-l2` (memory plus the L2 tier), `foyer-hybrid` (foyer's
//! memory plus disk cache, the same budgets; with the `peers` feature),
//! `multiarc` (memory only) and `direct` (every read from the backing file).
//! Every row reads the same blocks of the same file; each is warmed first
//! (the working set read twice, in random order, by as many threads as
//! the most measured, at least 8, at the backing store's speed, and for
//! multiarc-l2 fed until the feed has nothing left), then measured like the other
//! workloads: rows interleaved per repetition, medians. Each read is
//! classed as a memory hit, a second-tier hit or a backing read, and the
//! latency of second-tier hits is recorded (p50, p99).

use crate::cli::text_table;
use crate::harness::{self, machine, measure, Bar, Machine};
use anyhow::{bail, Context};
use multiarc::Cache;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A row of `--l2-rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum L2Row {
    #[value(name = "multiarc-l2")]
    MultiarcL2,
    #[value(name = "foyer-hybrid")]
    FoyerHybrid,
    #[value(name = "multiarc")]
    Multiarc,
    #[value(name = "direct")]
    Direct,
}

impl L2Row {
    fn name(self) -> &'static str {
        match self {
            L2Row::MultiarcL2 => "multiarc-l2",
            L2Row::FoyerHybrid => "foyer-hybrid",
            L2Row::Multiarc => "multiarc",
            L2Row::Direct => "direct",
        }
    }
}

/// What `bench` passes on for `--workload l2`.
pub struct L2BenchArgs<'a> {
    pub threads: &'a [usize],
    pub seconds: f64,
    pub repeat: usize,
    pub block_size: u64,
    pub memory: u64,
    pub l2_bytes: u64,
    pub working_set: Option<u64>,
    pub dir: Option<PathBuf>,
    pub backing_latency: Duration,
    pub rows: Vec<L2Row>,
    pub json: bool,
}

#[derive(Serialize, Clone, Debug)]
struct L2Result {
    cache: String,
    threads: usize,
    ops_per_sec: f64,
    mb_per_sec: f64,
    memory_hit_ratio: f64,
    l2_hit_ratio: f64,
    backing_reads: u64,
    l2_hit_p50_us: Option<f64>,
    l2_hit_p99_us: Option<f64>,
    runs: usize,
}

#[derive(Serialize)]
struct L2Config {
    threads: Vec<usize>,
    seconds: f64,
    repeat: usize,
    block_size: u64,
    memory: u64,
    l2_bytes: u64,
    working_set: u64,
    dir: String,
    direct_io: bool,
    backing_latency_us: f64,
}

#[derive(Serialize)]
struct L2Report {
    machine: Machine,
    config: L2Config,
    results: Vec<L2Result>,
}

/// Where a read was served.
#[derive(Clone, Copy)]
enum Served {
    Memory,
    L2,
    Backing,
}

/// The working directory of a run, removed on drop.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A buffer whose bytes start on a 4 KiB boundary (`O_DIRECT`), made safely.
struct Aligned {
    vec: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let vec = vec![0u8; len + 4096];
        let start = vec.as_ptr().align_offset(4096);
        Aligned { vec, start, len }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.vec[self.start..self.start + self.len]
    }
}

/// The backing file, read with `O_DIRECT`; each read then waits
/// `latency` more (`--backing-latency`: a slower store, emulated).
struct Backing {
    file: File,
    block: u64,
    latency: Duration,
}

impl Backing {
    fn read(&self, b: u64) -> std::io::Result<Vec<u8>> {
        let mut buf = Aligned::new(self.block as usize);
        self.file.read_exact_at(buf.bytes_mut(), b * self.block)?;
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
        Ok(buf.bytes_mut().to_vec())
    }
}

fn block_bytes(b: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(b % 251) as u8; len];
    let k = b.to_le_bytes();
    v[..8].copy_from_slice(&k);
    v[len - 8..].copy_from_slice(&k);
    v
}

fn check(b: u64, bytes: &[u8]) {
    let k = b.to_le_bytes();
    assert!(
        bytes[..8] == k && bytes[bytes.len() - 8..] == k,
        "block {b}: wrong bytes returned"
    );
}

pub(crate) fn is_tmpfs(path: &Path) -> bool {
    const TMPFS_MAGIC: rustix::fs::FsWord = 0x0102_1994;
    rustix::fs::statfs(path).is_ok_and(|st| st.f_type == TMPFS_MAGIC)
}

/// A row, ready to read.
enum Prepared {
    Multiarc(Cache<u64>),
    #[cfg(feature = "peers")]
    Foyer(
        Box<foyer::HybridCache<u64, Vec<u8>>>,
        tokio::runtime::Runtime,
    ),
    Direct,
}

impl Prepared {
    fn read(&self, backing: &Backing, b: u64, out: &mut [u8]) -> Served {
        match self {
            Prepared::Multiarc(cache) => {
                if let Some(h) = cache.get_in_memory(&b) {
                    out.copy_from_slice(&h);
                    return Served::Memory;
                }
                let mut loaded = false;
                let h = cache
                    .get_or_load(b, || {
                        loaded = true;
                        backing.read(b)
                    })
                    .unwrap_or_else(|e| panic!("reading block {b} of the backing file: {e}"));
                out.copy_from_slice(&h);
                if loaded {
                    Served::Backing
                } else {
                    Served::L2
                }
            }
            #[cfg(feature = "peers")]
            Prepared::Foyer(cache, rt) => {
                if let Some(e) = cache.memory().get(&b) {
                    out.copy_from_slice(e.value());
                    return Served::Memory;
                }
                if let Ok(Some(e)) = rt.block_on(cache.get(&b)) {
                    out.copy_from_slice(e.value());
                    return Served::L2;
                }
                let data = backing
                    .read(b)
                    .unwrap_or_else(|e| panic!("reading block {b} of the backing file: {e}"));
                out.copy_from_slice(&data);
                cache.insert(b, data);
                Served::Backing
            }
            Prepared::Direct => {
                let data = backing
                    .read(b)
                    .unwrap_or_else(|e| panic!("reading block {b} of the backing file: {e}"));
                out.copy_from_slice(&data);
                Served::Backing
            }
        }
    }
}

fn prepare(row: L2Row, args: &L2BenchArgs, dir: &Path) -> anyhow::Result<Prepared> {
    Ok(match row {
        L2Row::MultiarcL2 => Prepared::Multiarc(
            Cache::<u64>::builder()
                .max_bytes(args.memory)
                .l2(dir.join("multiarc-l2.dev"), args.l2_bytes)
                .l2_rebuild(false)
                .build()
                .map_err(|e| anyhow::anyhow!("multiarc-l2: {e}"))?,
        ),
        L2Row::Multiarc => Prepared::Multiarc(
            Cache::<u64>::builder()
                .max_bytes(args.memory)
                .build()
                .map_err(|e| anyhow::anyhow!("multiarc: {e}"))?,
        ),
        L2Row::Direct => Prepared::Direct,
        #[cfg(feature = "peers")]
        L2Row::FoyerHybrid => {
            use foyer::{BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCacheBuilder};
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("foyer-hybrid: starting its tokio runtime")?;
            let fdir = dir.join("foyer");
            std::fs::create_dir_all(&fdir).context("foyer-hybrid: its directory")?;
            let cache = rt.block_on(async {
                let device = FsDeviceBuilder::new(&fdir)
                    .with_capacity(args.l2_bytes as usize)
                    .with_direct(true)
                    .build()?;
                HybridCacheBuilder::new()
                    .memory(args.memory as usize)
                    .with_weighter(|_k: &u64, v: &Vec<u8>| v.len())
                    .storage()
                    .with_engine_config(BlockEngineConfig::new(device))
                    .build()
                    .await
            });
            let cache = cache.map_err(|e| anyhow::anyhow!("foyer-hybrid: {e}"))?;
            Prepared::Foyer(Box::new(cache), rt)
        }
        #[cfg(not(feature = "peers"))]
        L2Row::FoyerHybrid => return Err(crate::peers::missing_peer_error("foyer-hybrid")),
    })
}

/// The latency of second-tier hits, per thread: microseconds.
struct Latencies(Vec<Mutex<Vec<f32>>>);

impl Latencies {
    fn percentile(&self, q: f64) -> Option<f64> {
        let mut all: Vec<f32> = self
            .0
            .iter()
            .flat_map(|v| v.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .collect();
        if all.is_empty() {
            return None;
        }
        all.sort_by(f32::total_cmp);
        let i = ((all.len() - 1) as f64 * q).round() as usize;
        Some(all[i] as f64)
    }
}

pub fn run(args: L2BenchArgs) -> anyhow::Result<()> {
    let block = args.block_size;
    if !block.is_power_of_two() || !(4096..=1 << 20).contains(&block) {
        bail!("--block-size must be a power of two from 4 KiB to 1 MiB for --workload l2 (O_DIRECT), got {block}");
    }
    let working_set = args.working_set.unwrap_or(args.memory * 4);
    if working_set <= args.memory {
        bail!(
            "--working-set ({working_set}) must be larger than --memory ({}): the workload is about misses in memory",
            args.memory
        );
    }
    if working_set >= args.memory + args.l2_bytes {
        bail!(
            "--working-set ({working_set}) must be smaller than --memory plus --l2-bytes ({})",
            args.memory + args.l2_bytes
        );
    }
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    if is_tmpfs(&base) {
        bail!(
            "--dir {}: a tmpfs; O_DIRECT needs a disk filesystem (give --dir on a disk)",
            base.display()
        );
    }
    let dir = WorkDir(base.join(format!(".multiarc-l2bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).with_context(|| format!("creating {}", dir.0.display()))?;
    let blocks = working_set / block;
    let bar = Bar::counting("bench l2", 0, "runs", args.json);
    bar.doing(format!(
        "writing the {} MiB backing file",
        working_set >> 20
    ));
    let path = dir.0.join("backing");
    {
        let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        for b in 0..blocks {
            f.write_all_at(&block_bytes(b, block as usize), b * block)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        f.sync_all()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| format!("opening {} with O_DIRECT", path.display()))?;
    let backing = Backing {
        file,
        block,
        latency: args.backing_latency,
    };

    let mut prepared = Vec::new();
    for &row in &args.rows {
        bar.doing(format!("{}: warming up", row.name()));
        let started = Instant::now();
        let p = prepare(row, &args, &dir.0)?;
        if !matches!(p, Prepared::Direct) {
            // The working set read twice at random, by as many threads as
            // the most measured (8 at least), at the backing store's speed:
            // the churn the caches see is the one the runs will have.
            let warmers = args.threads.iter().copied().max().unwrap_or(1).max(8) as u64;
            std::thread::scope(|s| {
                for t in 0..warmers {
                    let (p, backing) = (&p, &backing);
                    s.spawn(move || {
                        let mut out = vec![0u8; block as usize];
                        let mut rng = multiarc_sim::workload::rng(17 + t);
                        for _ in 0..(2 * blocks).div_ceil(warmers) {
                            let b = rand::Rng::next_u64(&mut rng) % blocks;
                            p.read(backing, b, &mut out);
                        }
                    });
                }
            });
            if let Prepared::Multiarc(cache) = &p {
                for _ in 0..100 {
                    if cache.l2_feed() == 0 {
                        break;
                    }
                }
            }
        }
        bar.println(format!(
            "{}: warmed up in {:.1} s",
            row.name(),
            started.elapsed().as_secs_f64()
        ));
        prepared.push(p);
    }

    let total = args.threads.len() * args.repeat * args.rows.len();
    bar.set_total(total as u64);
    let mut runs: Vec<(usize, L2Result)> = Vec::new();
    let mut done = 0;
    for &threads in args.threads {
        for rep in 0..args.repeat {
            for ri in harness::interleaved(args.rows.len(), rep) {
                let row = args.rows[ri];
                bar.doing(format!(
                    "repetition {}/{}, {}, {threads} threads",
                    rep + 1,
                    args.repeat,
                    row.name()
                ));
                let p = &prepared[ri];
                let counts: Vec<[std::sync::atomic::AtomicU64; 3]> =
                    (0..threads).map(|_| Default::default()).collect();
                let lat = Latencies((0..threads).map(|_| Mutex::new(Vec::new())).collect());
                let run = measure(threads, args.seconds, block as usize, |t, r, buf| {
                    let b = r % blocks;
                    let started = Instant::now();
                    let served = p.read(&backing, b, buf);
                    if let Served::L2 = served {
                        let us = started.elapsed().as_secs_f64() * 1e6;
                        lat.0[t]
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(us as f32);
                    }
                    if (r >> 54) == 0 {
                        check(b, buf);
                    }
                    counts[t][served as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    true
                });
                let sum = |i: usize| -> u64 {
                    counts
                        .iter()
                        .map(|c| c[i].load(std::sync::atomic::Ordering::Relaxed))
                        .sum()
                };
                let (mem, l2, back) = (sum(0), sum(1), sum(2));
                let n = (mem + l2 + back).max(1) as f64;
                let ops = run.rate();
                runs.push((
                    ri,
                    L2Result {
                        cache: row.name().to_string(),
                        threads,
                        ops_per_sec: ops,
                        mb_per_sec: ops * block as f64 / 1e6,
                        memory_hit_ratio: mem as f64 / n,
                        l2_hit_ratio: l2 as f64 / n,
                        backing_reads: back,
                        l2_hit_p50_us: lat.percentile(0.5),
                        l2_hit_p99_us: lat.percentile(0.99),
                        runs: 1,
                    },
                ));
                done += 1;
                bar.set_done(done as u64);
            }
        }
    }
    bar.finish(&format!("{done} runs"));
    let mut results = Vec::new();
    for (ri, row) in args.rows.iter().enumerate() {
        for &threads in args.threads {
            let mut these: Vec<&L2Result> = runs
                .iter()
                .filter(|(i, r)| *i == ri && r.threads == threads)
                .map(|(_, r)| r)
                .collect();
            if these.is_empty() {
                continue;
            }
            let mut m = (*harness::median_by(&mut these, |r| r.ops_per_sec)).clone();
            m.runs = these.len();
            m.cache = row.name().to_string();
            results.push(m);
        }
    }
    if args.json {
        let report = L2Report {
            machine: machine(),
            config: L2Config {
                threads: args.threads.to_vec(),
                seconds: args.seconds,
                repeat: args.repeat,
                block_size: block,
                memory: args.memory,
                l2_bytes: args.l2_bytes,
                working_set,
                dir: base.display().to_string(),
                direct_io: true,
                backing_latency_us: args.backing_latency.as_secs_f64() * 1e6,
            },
            results,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let latency = if args.backing_latency.is_zero() {
        String::new()
    } else {
        format!(
            " plus {:.0} us per read",
            args.backing_latency.as_secs_f64() * 1e6
        )
    };
    println!(
        "random {} KiB reads over {} MiB (O_DIRECT backing file{latency}), memory {} MiB, second tier {} MiB; medians of {}",
        block >> 10,
        working_set >> 20,
        args.memory >> 20,
        args.l2_bytes >> 20,
        args.repeat
    );
    let mut table = text_table(
        [
            "cache",
            "threads",
            "k reads/s",
            "MB/s",
            "memory hits",
            "L2 hits",
            "L2 p50 us",
            "L2 p99 us",
        ],
        1,
    );
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in &results {
        table.add_row(vec![
            r.cache.clone(),
            r.threads.to_string(),
            format!("{:.1}", r.ops_per_sec / 1e3),
            format!("{:.0}", r.mb_per_sec),
            format!("{:.1}%", 100.0 * r.memory_hit_ratio),
            format!("{:.1}%", 100.0 * r.l2_hit_ratio),
            us(r.l2_hit_p50_us),
            us(r.l2_hit_p99_us),
        ]);
    }
    println!("{table}");
    Ok(())
}
