//! `multiarc bench --workload randrw|randread|rangelock`: one file, many
//! threads (the XFS range-lock thread).
//!
//! - `randrw`: fio's buffered `randrw` (50% reads, 50% writes) by T threads
//!   on ONE fully cached file, once with 8 KiB aligned I/O and once with
//!   unaligned I/O (random offset, random length from 1 byte to 16 KiB), one
//!   row per locking mode.
//! - `randread`: the same file, reads only: what a range lock costs reads
//!   that never needed it.
//! - `rangelock`: lock/unlock pairs per second of the range lock and of the
//!   rwsem, shared and exclusive, on disjoint ranges (each thread in its own
//!   part of the file) and on one overlapping range.
//!
//! The file's store is in memory (`MemStore`) and the cache holds all of it,
//! so what is measured is the file layer and its locking; writes do go
//! through write-back (the flusher runs, as it would on a real file).

use crate::cli::text_table;
use crate::harness::{self, machine, measure, measure_median, Bar, Machine, Run};
use anyhow::{bail, Context};
use multiarc::lock::poison::{unpoisoned, LockUnpoisoned};
use multiarc::{BlockKey, Cache};
use multiarc_file::{CachedFile, Locking, MemStore, RangeLock, WriteBack, WriteBackConfig};
use serde::Serialize;
use std::sync::Arc;

/// A file workload of `bench --workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileWorkload {
    /// 50% reads, 50% writes.
    RandRw,
    /// Reads only.
    RandRead,
    /// Lock/unlock pairs of the range lock and the rwsem.
    RangeLock,
}

impl FileWorkload {
    /// The name `--workload` takes, and the JSON's `workload`.
    pub fn name(self) -> &'static str {
        match self {
            FileWorkload::RandRw => "randrw",
            FileWorkload::RandRead => "randread",
            FileWorkload::RangeLock => "rangelock",
        }
    }
}

/// The I/O of `randrw` and `randread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileIo {
    /// One aligned 8 KiB block.
    Aligned,
    /// A random offset and a random length from 1 byte to 16 KiB.
    Unaligned,
}

impl FileIo {
    /// The JSON's `io`.
    fn name(self) -> &'static str {
        match self {
            FileIo::Aligned => "8KiB",
            FileIo::Unaligned => "unaligned",
        }
    }
}

/// The I/O kinds of `randrw` and `randread`, in table order.
const FILE_IOS: [FileIo; 2] = [FileIo::Aligned, FileIo::Unaligned];

/// The lock of `rangelock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockKind {
    Range,
    RwSem,
}

impl LockKind {
    /// The JSON's `locking`.
    fn name(self) -> &'static str {
        match self {
            LockKind::Range => "range",
            LockKind::RwSem => "rwsem",
        }
    }
}

/// What the file workloads share with `bench`'s arguments.
pub struct FileBenchArgs<'a> {
    pub workload: FileWorkload,
    pub threads: &'a [usize],
    pub seconds: f64,
    pub repeat: usize,
    pub file_bytes: u64,
    pub block_size: u64,
    pub locking: Vec<Locking>,
    pub json: bool,
}

#[derive(Serialize, Clone, Debug)]
struct FileResult {
    workload: &'static str,
    /// `8KiB` (aligned, one block) or `unaligned`; for `rangelock`,
    /// `disjoint` or `overlapping`.
    io: &'static str,
    locking: &'static str,
    /// `read`, `write` or `mixed` (randrw).
    op: &'static str,
    threads: usize,
    ops_per_sec: f64,
}

#[derive(Serialize)]
struct FileReport {
    machine: Machine,
    workload: &'static str,
    file_bytes: u64,
    block_size: u64,
    seconds: f64,
    repeat: usize,
    results: Vec<FileResult>,
}

/// Largest unaligned I/O.
const UNALIGNED_MAX: u64 = 16 << 10;

pub fn run(a: FileBenchArgs<'_>) -> anyhow::Result<()> {
    let runs = match a.workload {
        FileWorkload::RandRw | FileWorkload::RandRead => {
            a.locking.len() * FILE_IOS.len() * a.threads.len() * a.repeat
        }
        FileWorkload::RangeLock => 2 * 2 * 2 * a.threads.len() * a.repeat,
    };
    let bar = Bar::new(&format!("bench {}", a.workload.name()), runs, a.json);
    let mut results = Vec::new();
    match a.workload {
        FileWorkload::RandRw | FileWorkload::RandRead => file_workload(&a, &bar, &mut results)?,
        FileWorkload::RangeLock => range_lock_workload(&a, &bar, &mut results),
    }
    bar.finish(&format!("{runs} runs"));
    if a.json {
        let report = FileReport {
            machine: machine(),
            workload: a.workload.name(),
            file_bytes: a.file_bytes,
            block_size: a.block_size,
            seconds: a.seconds,
            repeat: a.repeat,
            results,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&a, &results);
    }
    Ok(())
}

fn open_file(a: &FileBenchArgs<'_>, locking: Locking) -> anyhow::Result<CachedFile> {
    let cache = Arc::new(
        Cache::<BlockKey>::builder()
            .max_bytes(a.file_bytes * 2 + (64 << 20))
            .build()?,
    );
    let file = CachedFile::builder(cache, MemStore::new())
        .block_size(a.block_size as usize)
        .locking(locking)
        .write_back(WriteBack::new(WriteBackConfig::default())?)
        .name("bench file")
        .open()
        .context("opening the benchmark file")?;
    // Fill it, write it back, and read it all once: fully cached.
    let chunk = vec![0xA5u8; 1 << 20];
    let mut off = 0;
    while off < a.file_bytes {
        let n = chunk.len().min((a.file_bytes - off) as usize);
        file.write_at(&chunk[..n], off)?;
        off += n as u64;
    }
    file.sync_all()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < a.file_bytes {
        off += file.read_at(&mut buf, off)? as u64;
    }
    Ok(file)
}

fn file_workload(
    a: &FileBenchArgs<'_>,
    bar: &Bar,
    results: &mut Vec<FileResult>,
) -> anyhow::Result<()> {
    let bs = a.block_size;
    if a.file_bytes < 4 * UNALIGNED_MAX.max(bs) {
        bail!("--file-bytes must be at least 4 x max(16 KiB, --block-size) for the file workloads");
    }
    // Each locking mode's file is open at once: its store (the file's bytes)
    // and its cache (the file's bytes again, and an entry per block).
    let per_file = a
        .file_bytes
        .saturating_mul(2)
        .saturating_add((a.file_bytes / bs).saturating_mul(256));
    multiarc::units::check_fits_in_memory(
        &format!(
            "--file-bytes {} ({} locking modes, each a file in memory and its cache)",
            multiarc::units::human_bytes(a.file_bytes),
            a.locking.len()
        ),
        per_file.saturating_mul(a.locking.len() as u64),
    )?;
    // One file per mode, all open at once: each repetition measures the
    // modes back to back (rotated by one per repetition, as `bench` does its
    // rows), so drifts of this shared machine's speed hit every mode alike;
    // the median of each is reported.
    let mut files = Vec::new();
    for &locking in &a.locking {
        bar.doing(format!("filling the {locking} file"));
        files.push((locking, open_file(a, locking)?));
    }
    for io in FILE_IOS {
        for &threads in a.threads {
            let mut rates: Vec<Vec<f64>> = vec![Vec::new(); files.len()];
            for rep in 0..a.repeat {
                for i in harness::interleaved(files.len(), rep) {
                    let (locking, file) = &files[i];
                    bar.doing(format!("{locking}, {}, {threads} threads", io.name()));
                    let rate = file_run(a, file, io, threads)
                        .with_context(|| format!("{locking} {} run", io.name()))?;
                    rates[i].push(rate);
                    bar.runs_done(1);
                }
            }
            for ((locking, _), mut r) in files.iter().zip(rates) {
                let median = *harness::median_by(&mut r, |x| *x);
                results.push(FileResult {
                    workload: a.workload.name(),
                    io: io.name(),
                    locking: locking.name(),
                    op: if a.workload == FileWorkload::RandRw {
                        "mixed"
                    } else {
                        "read"
                    },
                    threads,
                    ops_per_sec: median,
                });
            }
        }
    }
    for (_, f) in files {
        f.close()?;
    }
    Ok(())
}

/// One timed run of the file workload; returns its operations per second.
fn file_run(
    a: &FileBenchArgs<'_>,
    file: &CachedFile,
    io: FileIo,
    threads: usize,
) -> anyhow::Result<f64> {
    let size = a.file_bytes;
    let write_pct = if a.workload == FileWorkload::RandRw {
        50
    } else {
        0
    };
    let aligned = io == FileIo::Aligned;
    let failed = std::sync::Mutex::new(None);
    let run = measure(
        threads,
        a.seconds,
        UNALIGNED_MAX as usize,
        |_t, r, buf: &mut [u8]| {
            let (off, len) = if aligned {
                ((r % (size / 8192)) * 8192, 8192usize)
            } else {
                let len = 1 + (r >> 40) % UNALIGNED_MAX;
                (r % (size - len), len as usize)
            };
            let res = if (r >> 20) % 100 < write_pct {
                file.write_at(&buf[..len], off)
            } else {
                file.read_at(&mut buf[..len], off)
            };
            if let Err(e) = res {
                *failed.lock_unpoisoned() = Some(e);
            }
            true
        },
    );
    if let Some(e) = unpoisoned(failed.into_inner()) {
        return Err(e.into());
    }
    Ok(run.rate())
}

fn range_lock_workload(a: &FileBenchArgs<'_>, bar: &Bar, results: &mut Vec<FileResult>) {
    let range = RangeLock::default();
    let rwsem = multiarc_file::FileRwSem::new(());
    for lock in [LockKind::Range, LockKind::RwSem] {
        for disjoint in [true, false] {
            let io = if disjoint { "disjoint" } else { "overlapping" };
            for write in [false, true] {
                let op = if write { "write" } else { "read" };
                for &threads in a.threads {
                    bar.doing(format!("{} {op} {io}, {threads} threads", lock.name()));
                    // The lock and the operation are chosen here, each arm
                    // measuring its own closure: nothing is decided per
                    // lock/unlock pair.
                    let run = match (lock, write) {
                        (LockKind::Range, false) => {
                            lock_pairs(a, threads, disjoint, |at| drop(range.read(at..at + 8192)))
                        }
                        (LockKind::Range, true) => {
                            lock_pairs(a, threads, disjoint, |at| drop(range.write(at..at + 8192)))
                        }
                        (LockKind::RwSem, false) => {
                            lock_pairs(a, threads, disjoint, |_| drop(rwsem.read()))
                        }
                        (LockKind::RwSem, true) => {
                            lock_pairs(a, threads, disjoint, |_| drop(rwsem.write()))
                        }
                    };
                    results.push(FileResult {
                        workload: FileWorkload::RangeLock.name(),
                        io,
                        locking: lock.name(),
                        op,
                        threads,
                        ops_per_sec: run.rate(),
                    });
                    bar.runs_done(a.repeat);
                }
            }
        }
    }
}

/// The median of `--repeat` runs of `threads` threads taking and
/// releasing a lock, `pair(start)` locking and unlocking 8 KiB at `start`:
/// disjoint, each thread in its own 1 MiB region (its own stripes), or
/// all on the same 8 KiB.
fn lock_pairs(
    a: &FileBenchArgs<'_>,
    threads: usize,
    disjoint: bool,
    pair: impl Fn(u64) + Sync,
) -> Run {
    if disjoint {
        measure_median(a.repeat, threads, a.seconds, 0, |t, r, _| {
            pair(((t as u64) << 20) + (r % 120) * 8192);
            true
        })
    } else {
        measure_median(a.repeat, threads, a.seconds, 0, |_, _, _| {
            pair(0);
            true
        })
    }
}

fn print_table(a: &FileBenchArgs<'_>, results: &[FileResult]) {
    let m = machine();
    println!(
        "multiarc bench --workload {}: one {} MiB file, {} B blocks, {} s per run, median of {}; {} CPUs ({})",
        a.workload.name(),
        a.file_bytes >> 20,
        a.block_size,
        a.seconds,
        a.repeat,
        m.cpus,
        m.cpu_model
    );
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for r in results {
        let g = (r.io, r.op);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    for (io, op) in groups {
        let rows: Vec<&FileResult> = results
            .iter()
            .filter(|r| r.io == io && r.op == op)
            .collect();
        let mut lockings: Vec<&str> = Vec::new();
        for r in &rows {
            if !lockings.contains(&r.locking) {
                lockings.push(r.locking);
            }
        }
        println!("\n{io}, {op}: ops per second (millions)");
        let range_rwsem = lockings.contains(&"range") && lockings.contains(&"rwsem");
        let range_torn = lockings.contains(&"torn") && lockings.contains(&"range");
        let mut header = vec!["threads"];
        header.extend(&lockings);
        if range_rwsem {
            header.push("range/rwsem");
        }
        if range_torn {
            header.push("range/torn");
        }
        let mut table = text_table(header, 0);
        for &t in a.threads {
            let get = |l: &str| {
                rows.iter()
                    .find(|r| r.locking == l && r.threads == t)
                    .map(|r| r.ops_per_sec)
            };
            let ratio = |x: &str, y: &str| match (get(x), get(y)) {
                (Some(x), Some(y)) => format!("{:.2}x", x / y),
                _ => "-".into(),
            };
            let mut row = vec![t.to_string()];
            for l in &lockings {
                row.push(match get(l) {
                    Some(v) => format!("{:.3}", v / 1e6),
                    None => "-".into(),
                });
            }
            if range_rwsem {
                row.push(ratio("range", "rwsem"));
            }
            if range_torn {
                row.push(ratio("range", "torn"));
            }
            table.add_row(row);
        }
        println!("{}", table.trim_fmt());
    }
}
