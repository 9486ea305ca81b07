//! `multiarc lockbench`: our futex mutex against `std`, `parking_lot` and
//! `pthread` mutexes, uncontended and contended.
//!
//! Every thread loops: acquire, increment a counter shared by all threads,
//! release; for a fixed time. The counter must equal the sum of the threads'
//! acquisition counts at the end (a check of mutual exclusion). Reported per
//! lock and thread count: millions of acquisitions per second, the lock's
//! size, and fairness (the fewest acquisitions of any thread divided by the
//! most). Each configuration runs several times; the median run is reported.
//!
//! `--layout` places the counter for every lock alike: `beside` the lock
//! word, in the same allocation, as a `Mutex<u64>` holds it (the default),
//! or `apart`, on a cache line of its own. Under contention the two differ:
//! beside, every waiter's look at the word takes the counter's line from
//! the holder too.

use crate::harness::Bar;
use anyhow::{bail, Result};
use multiarc::lock::poison::LockUnpoisoned;
use multiarc_lock::bench_variants::{PthreadMutexAt, SpinWakeAllMutex, PTHREAD_MUTEX_SIZE};
use multiarc_lock::LockstatExt;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Runs per configuration; the median is reported.
const RUNS: usize = 3;
/// Acquisitions between two looks at the stop flag.
const BATCH: u64 = 64;

/// Every lock `--locks` accepts, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LockName {
    /// Our futex mutex (one row per `--spins` count; `multiarc` is the
    /// lock's default spin count).
    #[value(name = "multiarc")]
    Multiarc,
    /// Our mutex with lock statistics on, to measure their cost (not in
    /// the default set).
    #[value(name = "multiarc-lockstat")]
    MultiarcLockstat,
    /// Our mutex variant that spins and wakes all waiters.
    #[value(name = "multiarc-spinwake")]
    MultiarcSpinwake,
    #[value(name = "std")]
    Std,
    #[value(name = "parking_lot")]
    ParkingLot,
    #[value(name = "pthread")]
    Pthread,
    /// The C library's mutex at byte 48 of a line, its kind (read before
    /// each compare-exchange) alone on the next line.
    #[value(name = "pthread-at48")]
    PthreadAt48,
}

impl LockName {
    /// The row name (as `--locks` spells it, and in the JSON).
    fn name(self) -> &'static str {
        match self {
            LockName::Multiarc => "multiarc",
            LockName::MultiarcLockstat => "multiarc-lockstat",
            LockName::MultiarcSpinwake => "multiarc-spinwake",
            LockName::Std => "std",
            LockName::ParkingLot => "parking_lot",
            LockName::Pthread => "pthread",
            LockName::PthreadAt48 => "pthread-at48",
        }
    }

    /// Measured without `--locks`: all but `multiarc-lockstat`.
    fn is_default(self) -> bool {
        self != LockName::MultiarcLockstat
    }
}

/// Arguments of `multiarc lockbench`.
#[derive(clap::Args)]
pub struct LockbenchArgs {
    /// Thread counts to measure, comma-separated (1 = uncontended).
    #[arg(long, value_parser = crate::cli::thread_count_arg, value_delimiter = ',', default_value = "1,4")]
    threads: Vec<usize>,
    /// Duration of each run in seconds (each configuration runs 3 times).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Only these locks, comma-separated: multiarc, multiarc-spinwake, std,
    /// parking_lot, pthread, pthread-at48 (the default set), and
    /// multiarc-lockstat (our lock with lock statistics on).
    #[arg(long, value_parser = crate::cli::enum_arg::<LockName>("lock"), value_delimiter = ',')]
    locks: Option<Vec<LockName>>,
    /// Spin counts to measure our lock with, comma-separated (see
    /// `multiarc::lock::set_spin_count`; 0 = sleep at once). The row of the
    /// lock's default (`multiarc::lock::DEFAULT_SPIN_COUNT`, the default
    /// here) is `multiarc`, the others `multiarc-spinN`.
    #[arg(long, value_parser = spin_arg, value_delimiter = ',',
          default_values_t = [multiarc_lock::DEFAULT_SPIN_COUNT])]
    spins: Vec<u32>,
    /// Where each lock's counter lives, the same for every lock: beside
    /// the lock word, in its allocation (as a `Mutex<u64>` holds it), or
    /// apart, on a cache line of its own.
    #[arg(long, value_parser = crate::cli::enum_arg::<Layout>("layout"), default_value = "beside")]
    layout: Layout,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// One spin count of `--spins` (0 allowed: no spinning).
fn spin_arg(text: &str) -> Result<u32, String> {
    text.trim()
        .parse::<u32>()
        .map_err(|_| format!("{text:?} is not a whole number"))
}

/// A lock under test: guards one counter.
trait BenchLock: Send + Sync + 'static {
    /// Size of the lock without data, in bytes.
    const SIZE: usize;
    fn new() -> Self;
    /// One acquisition: lock, increment the counter, unlock.
    fn increment(&self);
    /// The counter (after all threads stopped).
    fn count(&self) -> u64;
    /// Checks anything else the lock knows about the finished run, given
    /// the total of the threads' acquisitions (and after `count`).
    fn check(&self, _acquisitions: u64) -> Result<()> {
        Ok(())
    }
}

/// Where the counter a lock guards lives (`--layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Layout {
    /// In the lock's allocation, right after its word (as `Mutex<u64>`).
    Beside,
    /// On a cache line of its own, behind a pointer.
    Apart,
}

/// The data a benchmark lock guards: one counter, laid out per [`Layout`].
trait Counter: Default + Send + 'static {
    fn bump(&mut self);
    fn get(&self) -> u64;
}

/// [`Layout::Beside`]: the counter itself.
#[derive(Default)]
struct Beside(u64);

impl Counter for Beside {
    fn bump(&mut self) {
        self.0 += 1;
    }
    fn get(&self) -> u64 {
        self.0
    }
}

/// [`Layout::Apart`]: the counter on a line of its own.
#[derive(Default)]
struct Apart(Box<OwnLines<u64>>);

impl Counter for Apart {
    fn bump(&mut self) {
        self.0 .0 += 1;
    }
    fn get(&self) -> u64 {
        self.0 .0
    }
}

struct OurMutex<C>(multiarc_lock::Mutex<C>);

impl<C: Counter> BenchLock for OurMutex<C> {
    const SIZE: usize = std::mem::size_of::<multiarc_lock::Mutex<()>>();
    fn new() -> Self {
        OurMutex(multiarc_lock::Mutex::new(C::default()))
    }
    fn increment(&self) {
        self.0.lock().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock().get()
    }
}

/// Our mutex with lock statistics on: what tracing costs.
struct OurTracedMutex<C>(multiarc_lock::Mutex<C>);

const TRACED_CLASS: &str = "lockbench.mutex";

impl<C: Counter> BenchLock for OurTracedMutex<C> {
    const SIZE: usize = std::mem::size_of::<multiarc_lock::Mutex<()>>();
    fn new() -> Self {
        multiarc_lock::lockstat::reset();
        let lock = multiarc_lock::Mutex::new(C::default());
        lock.set_lockstat(Some(multiarc_lock::LockId::new(TRACED_CLASS, 0)));
        OurTracedMutex(lock)
    }
    fn increment(&self) {
        self.0.lock().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock().get()
    }
    fn check(&self, acquisitions: u64) -> Result<()> {
        let report = multiarc_lock::lockstat::snapshot().filter_class_prefix(TRACED_CLASS);
        // The threads' acquisitions plus the one in `count`.
        let recorded = report.total_acquisitions();
        if recorded != acquisitions + 1 {
            bail!(
                "multiarc-lockstat: lock statistics recorded {recorded} acquisitions, expected {}",
                acquisitions + 1
            );
        }
        Ok(())
    }
}

struct SpinWakeAll<C>(SpinWakeAllMutex<C>);

impl<C: Counter> BenchLock for SpinWakeAll<C> {
    const SIZE: usize = std::mem::size_of::<SpinWakeAllMutex<()>>();
    fn new() -> Self {
        SpinWakeAll(SpinWakeAllMutex::new(C::default()))
    }
    fn increment(&self) {
        self.0.lock().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock().get()
    }
}

struct StdMutex<C>(std::sync::Mutex<C>);

impl<C: Counter> BenchLock for StdMutex<C> {
    const SIZE: usize = std::mem::size_of::<std::sync::Mutex<()>>();
    fn new() -> Self {
        StdMutex(std::sync::Mutex::new(C::default()))
    }
    fn increment(&self) {
        self.0.lock_unpoisoned().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock_unpoisoned().get()
    }
}

struct ParkingLotMutex<C>(parking_lot::Mutex<C>);

impl<C: Counter> BenchLock for ParkingLotMutex<C> {
    const SIZE: usize = std::mem::size_of::<parking_lot::Mutex<()>>();
    fn new() -> Self {
        ParkingLotMutex(parking_lot::Mutex::new(C::default()))
    }
    fn increment(&self) {
        self.0.lock().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock().get()
    }
}

/// The C library's mutex (default attributes) at byte `OFFSET` of its
/// allocation ([`PthreadMutexAt`]): `pthread` at 0, `pthread-at48` at 48.
struct Pthread<C, const OFFSET: usize>(PthreadMutexAt<C, OFFSET>);

impl<C: Counter, const OFFSET: usize> BenchLock for Pthread<C, OFFSET> {
    const SIZE: usize = PTHREAD_MUTEX_SIZE;
    fn new() -> Self {
        Pthread(PthreadMutexAt::new(C::default()))
    }
    fn increment(&self) {
        self.0.lock().bump();
    }
    fn count(&self) -> u64 {
        self.0.lock().get()
    }
}

/// One run: acquisitions per thread and the run's duration.
struct Sample {
    per_thread: Vec<u64>,
    elapsed: Duration,
}

impl Sample {
    fn total(&self) -> u64 {
        self.per_thread.iter().sum()
    }

    fn mops(&self) -> f64 {
        self.total() as f64 / self.elapsed.as_secs_f64() / 1e6
    }

    fn fairness(&self) -> f64 {
        let min = self.per_thread.iter().copied().min().unwrap_or(0);
        let max = self.per_thread.iter().copied().max().unwrap_or(0);
        if max == 0 {
            0.0
        } else {
            min as f64 / max as f64
        }
    }
}

/// A value alone on its two cache lines (the adjacent-line prefetcher
/// pairs them).
#[repr(align(128))]
#[derive(Default)]
struct OwnLines<T>(T);

/// Runs `threads` threads hammering one `L` for `duration`.
fn run_once<L: BenchLock>(name: &str, threads: usize, duration: Duration) -> Result<Sample> {
    // The lock and the stop flag each on lines of their own: the threads
    // read the flag every `BATCH` acquisitions, and a flag sharing the
    // lock's line would take it from the holder (false sharing that moved
    // one lock's figure threefold with the heap's layout).
    let lock = Arc::new(OwnLines(L::new()));
    let stop = Arc::new(OwnLines(AtomicBool::new(false)));
    let start_line = Arc::new(Barrier::new(threads + 1));
    // A thread that cannot be started (a process or memory limit) is an
    // error; the ones already waiting at the start line end with the process.
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, stop, start_line) = (lock.clone(), stop.clone(), start_line.clone());
            std::thread::Builder::new()
                .spawn(move || {
                    start_line.wait();
                    let mut acquisitions = 0u64;
                    while !stop.0.load(Ordering::Relaxed) {
                        for _ in 0..BATCH {
                            lock.0.increment();
                        }
                        acquisitions += BATCH;
                    }
                    acquisitions
                })
                .map_err(|e| anyhow::anyhow!("--threads {threads}: starting thread {}: {e}", t + 1))
        })
        .collect::<Result<_>>()?;
    start_line.wait();
    let start = Instant::now();
    std::thread::sleep(duration);
    stop.0.store(true, Ordering::Relaxed);
    let per_thread = handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a {name} benchmark thread panicked"))
        })
        .collect::<Result<Vec<u64>>>()?;
    let sample = Sample {
        per_thread,
        elapsed: start.elapsed(),
    };
    let counted = lock.0.count();
    if counted != sample.total() {
        bail!(
            "{name} with {threads} threads: the counter is {counted} but the threads acquired the lock {} times (mutual exclusion broken)",
            sample.total()
        );
    }
    lock.0.check(sample.total())?;
    Ok(sample)
}

/// One row of the results (also the JSON record).
#[derive(Serialize)]
struct Measurement {
    lock: String,
    threads: usize,
    mops: f64,
    size_bytes: usize,
    fairness: f64,
}

#[derive(Serialize)]
struct Machine {
    cpus: usize,
}

#[derive(Serialize)]
struct Config {
    threads: Vec<usize>,
    seconds: f64,
    runs: usize,
    statistic: &'static str,
    spins: Vec<u32>,
    locks: Vec<String>,
    layout: Layout,
}

#[derive(Serialize)]
struct Document {
    machine: Machine,
    config: Config,
    results: Vec<Measurement>,
}

/// Measures `L` at every thread count: the median of `RUNS` runs each.
fn measure<L: BenchLock>(
    name: &str,
    args: &LockbenchArgs,
    bar: &Bar,
    results: &mut Vec<Measurement>,
) -> Result<()> {
    let duration = Duration::from_secs_f64(args.seconds);
    for &threads in &args.threads {
        let mut samples = Vec::with_capacity(RUNS);
        for run in 1..=RUNS {
            bar.doing(format!("{name}, {threads} threads, run {run}/{RUNS}"));
            samples.push(run_once::<L>(name, threads, duration)?);
            bar.runs_done(1);
        }
        samples.sort_by(|a, b| a.mops().total_cmp(&b.mops()));
        let median = &samples[RUNS / 2];
        results.push(Measurement {
            lock: name.to_string(),
            threads,
            mops: median.mops(),
            size_bytes: L::SIZE,
            fairness: median.fairness(),
        });
    }
    Ok(())
}

/// The locks to measure, in table order, without duplicates.
fn selected_locks(args: &LockbenchArgs) -> Vec<LockName> {
    <LockName as clap::ValueEnum>::value_variants()
        .iter()
        .copied()
        .filter(|l| match &args.locks {
            Some(wanted) => wanted.contains(l),
            None => l.is_default(),
        })
        .collect()
}

/// Measures `lock` (every `--spins` row of ours) with its counter laid out
/// as `C`.
fn measure_lock<C: Counter>(
    lock: LockName,
    args: &LockbenchArgs,
    bar: &Bar,
    results: &mut Vec<Measurement>,
) -> Result<()> {
    let name = lock.name();
    match lock {
        LockName::Multiarc => {
            let before = multiarc_lock::spin_count();
            for &spins in &args.spins {
                multiarc_lock::set_spin_count(spins);
                let row = if spins == multiarc_lock::DEFAULT_SPIN_COUNT {
                    "multiarc".to_string()
                } else {
                    format!("multiarc-spin{spins}")
                };
                let measured = measure::<OurMutex<C>>(&row, args, bar, results);
                multiarc_lock::set_spin_count(before);
                measured?;
            }
        }
        LockName::MultiarcLockstat => measure::<OurTracedMutex<C>>(name, args, bar, results)?,
        LockName::MultiarcSpinwake => measure::<SpinWakeAll<C>>(name, args, bar, results)?,
        LockName::Std => measure::<StdMutex<C>>(name, args, bar, results)?,
        LockName::ParkingLot => measure::<ParkingLotMutex<C>>(name, args, bar, results)?,
        LockName::Pthread => measure::<Pthread<C, 0>>(name, args, bar, results)?,
        LockName::PthreadAt48 => measure::<Pthread<C, 48>>(name, args, bar, results)?,
    }
    Ok(())
}

/// Runs `multiarc lockbench`.
pub fn run(args: LockbenchArgs) -> Result<()> {
    crate::cli::check_seconds(args.seconds)?;
    let locks = selected_locks(&args);
    let rows: usize = locks
        .iter()
        .map(|&l| {
            if l == LockName::Multiarc {
                args.spins.len()
            } else {
                1
            }
        })
        .sum();
    let runs = rows * args.threads.len() * RUNS;
    let bar = Bar::new("lockbench", runs, args.json);
    let mut results = Vec::new();
    for &lock in &locks {
        match args.layout {
            Layout::Beside => measure_lock::<Beside>(lock, &args, &bar, &mut results)?,
            Layout::Apart => measure_lock::<Apart>(lock, &args, &bar, &mut results)?,
        }
    }
    bar.finish(&format!("{runs} runs"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.json {
        let document = Document {
            machine: Machine { cpus },
            config: Config {
                threads: args.threads.clone(),
                seconds: args.seconds,
                runs: RUNS,
                statistic: "median",
                spins: args.spins.clone(),
                locks: locks.iter().map(|l| l.name().to_string()).collect(),
                layout: args.layout,
            },
            results,
        };
        crate::outln!("{}", serde_json::to_string_pretty(&document)?)?;
    } else {
        crate::out!("{}", table(&args, cpus, &results))?;
    }
    Ok(())
}

/// The human table: one row per lock, per thread count Macq/s and fairness.
fn table(args: &LockbenchArgs, cpus: usize, results: &[Measurement]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Lock benchmark: each thread loops lock, increment a shared counter, unlock for {} s;",
        args.seconds
    );
    let (place, flag) = match args.layout {
        Layout::Beside => ("beside the lock word, in its allocation", "beside"),
        Layout::Apart => ("on a cache line of its own", "apart"),
    };
    let _ = writeln!(out, "the counter {place} (--layout {flag}).");
    let _ = writeln!(
        out,
        "median of {RUNS} runs; {cpus} CPUs. Macq/s = million acquisitions per second (all threads);"
    );
    let _ = writeln!(
        out,
        "fair = fewest acquisitions of any thread / most (1 = perfectly fair)."
    );
    let _ = writeln!(out);
    let mut header = vec!["lock".to_string(), "bytes".to_string()];
    for threads in &args.threads {
        header.push(format!("{threads} thr Macq/s"));
        header.push("fair".to_string());
    }
    let mut table = crate::cli::text_table(header, 1);
    let mut names: Vec<&str> = Vec::new();
    for m in results {
        if !names.contains(&m.lock.as_str()) {
            names.push(&m.lock);
        }
    }
    for name in names {
        let rows: Vec<&Measurement> = results.iter().filter(|m| m.lock == name).collect();
        let mut row = vec![name.to_string(), rows[0].size_bytes.to_string()];
        for threads in &args.threads {
            match rows.iter().find(|m| m.threads == *threads) {
                Some(m) => {
                    row.push(format!("{:.1}", m.mops));
                    row.push(format!("{:.2}", m.fairness));
                }
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        table.add_row(row);
    }
    let _ = writeln!(out, "{}", table.trim_fmt());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lock_keeps_count_under_contention() {
        let d = Duration::from_millis(30);
        for sample in [
            run_once::<OurMutex<Beside>>("multiarc", 3, d).unwrap(),
            run_once::<OurMutex<Apart>>("multiarc", 3, d).unwrap(),
            run_once::<OurTracedMutex<Beside>>("multiarc-lockstat", 3, d).unwrap(),
            run_once::<SpinWakeAll<Apart>>("multiarc-spinwake", 3, d).unwrap(),
            run_once::<StdMutex<Beside>>("std", 3, d).unwrap(),
            run_once::<ParkingLotMutex<Apart>>("parking_lot", 3, d).unwrap(),
            run_once::<Pthread<Beside, 0>>("pthread", 3, d).unwrap(),
            run_once::<Pthread<Apart, 0>>("pthread", 3, d).unwrap(),
            run_once::<Pthread<Beside, 48>>("pthread-at48", 3, d).unwrap(),
        ] {
            assert_eq!(sample.per_thread.len(), 3);
            assert!(sample.total() > 0);
            assert!((0.0..=1.0).contains(&sample.fairness()));
        }
    }

    #[test]
    fn sizes_are_reported() {
        assert_eq!(OurMutex::<Beside>::SIZE, 4);
        assert_eq!(SpinWakeAll::<Apart>::SIZE, 4);
    }

    #[test]
    fn fairness_is_min_over_max() {
        let sample = Sample {
            per_thread: vec![50, 100, 80],
            elapsed: Duration::from_secs(1),
        };
        assert_eq!(sample.fairness(), 0.5);
        assert_eq!(sample.mops(), 230.0 / 1e6);
    }

    #[test]
    fn lock_names_are_the_value_names() {
        for &l in <LockName as clap::ValueEnum>::value_variants() {
            let v = clap::ValueEnum::to_possible_value(&l).unwrap();
            assert_eq!(v.get_name(), l.name());
        }
        assert_eq!(
            crate::cli::enum_names::<LockName>().join(","),
            "multiarc,multiarc-lockstat,multiarc-spinwake,std,parking_lot,pthread,pthread-at48"
        );
    }

    #[test]
    fn spin_counts_accept_zero() {
        assert_eq!(spin_arg("0"), Ok(0));
        assert_eq!(spin_arg("40"), Ok(40));
        assert!(spin_arg("x").is_err());
    }
}
