//! The measurement harness of `multiarc bench` (the cache workload in
//! `bench.rs`, the file workloads in `filebench.rs`): the machine a report
//! was measured on, timed runs of N threads for S seconds, medians, the
//! order rows run in within a repetition, and the progress bar (which the
//! other long commands, `lockbench`, `replay`, `poison` and `scan`, show
//! too).
//!
//! It depends on neither benchmark: `bench` -> `filebench` -> `harness`,
//! and `bench` -> `harness`.

use crate::util::meminfo;
use crate::util::{unpoisoned, LockUnpoisoned};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The machine a report was measured on (the `machine` object of the JSON).
#[derive(Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_bytes: u64,
    pub os: String,
}

/// This machine: CPUs, the CPU model (`/proc/cpuinfo`), memory, OS.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
        memory_bytes: meminfo("MemTotal:").unwrap_or(0),
        os: std::env::consts::OS.to_string(),
    }
}

/// A benchmark's progress: a bar on stderr counting its runs (or another
/// unit: [`Bar::counting`]), with what runs now beside it. Hidden (every call a no-op) with `--json` or when
/// stderr is not a terminal (a log or a pipe gets no progress at all). It
/// is redrawn only when told (no ticking thread to disturb the runs).
pub struct Bar {
    bar: ProgressBar,
    started: Instant,
}

impl Bar {
    /// A bar of `total` runs named `name` (`bench`, `bench randrw`);
    /// hidden when `json` or when stderr is not a terminal.
    pub fn new(name: &str, total: usize, json: bool) -> Bar {
        Bar::counting(name, total as u64, "runs", json)
    }

    /// A bar of `total` `unit`s (`reads`, `requests`, `policies`) named
    /// `name`; hidden when `json` or when stderr is not a terminal.
    pub fn counting(name: &str, total: u64, unit: &str, json: bool) -> Bar {
        let bar = if json || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let bar =
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
            let style = ProgressStyle::with_template(&format!(
                "{{prefix}} {{bar:30.cyan/blue}} {{human_pos}}/{{human_len}} {unit} [{{elapsed}}, eta {{eta}}] {{wide_msg}}"
            ))
            .expect("a valid progress template")
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(name.to_string());
            bar
        };
        Bar {
            bar,
            started: Instant::now(),
        }
    }

    /// Shows what runs now (`moka, 8 threads, Hold`).
    pub fn doing(&self, what: String) {
        self.bar.set_message(what);
    }

    /// Counts `n` runs done.
    pub fn runs_done(&self, n: usize) {
        self.bar.inc(n as u64);
    }

    /// A bar that never shows (for callers that report no progress).
    #[cfg(test)]
    pub fn hidden() -> Bar {
        Bar {
            bar: ProgressBar::hidden(),
            started: Instant::now(),
        }
    }

    /// The total, once known (`replay` counts its trace first).
    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// How many units are done.
    pub fn set_done(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// Prints `line` above the bar, to stay (nothing when hidden).
    pub fn println(&self, line: String) {
        self.bar.println(line);
    }

    /// Removes the bar and, on a terminal, leaves one line: `{name}: {what}
    /// in N s`.
    pub fn finish(&self, what: &str) {
        if self.bar.is_hidden() {
            return;
        }
        let prefix = self.bar.prefix();
        self.bar.finish_and_clear();
        eprintln!(
            "{prefix}: {what} in {:.0} s",
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// A benchmark that ends early (an error) leaves no bar behind its error
/// line.
impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

/// One timed run of all threads.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Operations of all threads.
    pub ops: u64,
    /// Operations whose `op` returned false (a lookup that missed).
    pub misses: u64,
    /// From the start line opening to the last thread stopping.
    pub elapsed: Duration,
}

impl Run {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

/// The median of `items` by `key` (the upper one of an even count); sorts
/// `items`. Panics when `items` is empty.
pub fn median_by<T>(items: &mut [T], key: impl Fn(&T) -> f64) -> &T {
    items.sort_by(|a, b| key(a).total_cmp(&key(b)));
    &items[items.len() / 2]
}

/// The order of `rows` rows in repetition `rep`: every row once, back to
/// back, rotated by one row per repetition, so that a drift of the (shared)
/// machine's speed hits every row alike.
pub fn interleaved(rows: usize, rep: usize) -> impl Iterator<Item = usize> {
    (0..rows).map(move |k| (k + rep) % rows)
}

/// Runs [`measure`] `repeat` times; returns the run with the median
/// throughput.
pub fn measure_median<F>(repeat: usize, threads: usize, seconds: f64, block: usize, op: F) -> Run
where
    F: Fn(usize, u64, &mut [u8]) -> bool + Sync,
{
    let mut runs: Vec<Run> = (0..repeat)
        .map(|_| measure(threads, seconds, block, &op))
        .collect();
    *median_by(&mut runs, Run::rate)
}

/// The start line of the measuring threads: they run once it opens, or
/// give up if it is closed because a thread could not be started (a
/// `Barrier` would keep the started ones, and the scope, waiting forever).
struct StartLine {
    state: std::sync::Mutex<Option<bool>>,
    cv: std::sync::Condvar,
}

impl StartLine {
    fn new() -> StartLine {
        StartLine {
            state: std::sync::Mutex::new(None),
            cv: std::sync::Condvar::new(),
        }
    }

    /// Waits for the start; true to run, false to give up.
    fn wait(&self) -> bool {
        let mut g = self.state.lock_unpoisoned();
        loop {
            if let Some(go) = *g {
                return go;
            }
            g = unpoisoned(self.cv.wait(g));
        }
    }

    fn release(&self, go: bool) {
        *self.state.lock_unpoisoned() = Some(go);
        self.cv.notify_all();
    }
}

/// Runs `op(thread, rng, buf)` in `threads` threads for `seconds`, `buf`
/// being each thread's own `block` bytes and `rng` fresh random bits; `op`
/// returns false for a miss. A thread that cannot be started (out of memory
/// or of threads) ends the command with one clear error line.
pub fn measure<F>(threads: usize, seconds: f64, block: usize, op: F) -> Run
where
    F: Fn(usize, u64, &mut [u8]) -> bool + Sync,
{
    let stop = AtomicBool::new(false);
    let start_line = StartLine::new();
    // Each run draws its own streams: a workload that misses must not
    // read the blocks of the run before it again (reproducible still: the
    // n-th run of a process always draws the same).
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let (stop, start_line, op) = (&stop, &start_line, &op);
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                if !start_line.wait() {
                    return (0, 0);
                }
                // Xoshiro256++: uniform 64-bit draws, seeded per thread
                // and run.
                let mut rng = multiarc_sim::workload::rng(0x5EED ^ (t as u64) << 32 ^ run << 16);
                let mut buf = vec![0u8; block];
                let (mut n, mut missed) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        if !op(t, rand::Rng::next_u64(&mut rng), &mut buf) {
                            missed += 1;
                        }
                    }
                    n += 64;
                }
                std::hint::black_box(&buf);
                (n, missed)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    start_line.release(false);
                    for h in handles {
                        let _ = h.join();
                    }
                    eprintln!(
                        "multiarc: error: could not start bench thread {t} of {threads}: {e}"
                    );
                    std::process::exit(1);
                }
            }
        }
        start_line.release(true);
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        let (mut ops, mut misses) = (0, 0);
        for h in handles {
            let (n, m) = h.join().expect("bench thread panicked");
            ops += n;
            misses += m;
        }
        Run {
            ops,
            misses,
            elapsed: start.elapsed(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_rotate_by_one_per_repetition() {
        assert_eq!(interleaved(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(interleaved(3, 1).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(interleaved(3, 5).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(interleaved(0, 2).count(), 0);
    }

    #[test]
    fn medians_take_the_middle_run() {
        assert_eq!(*median_by(&mut [3.0, 1.0, 2.0], |x| *x), 2.0);
        assert_eq!(*median_by(&mut [4.0, 1.0, 3.0, 2.0], |x| *x), 3.0);
    }

    #[test]
    fn a_json_run_has_no_bar() {
        let bar = Bar::new("bench", 3, true);
        assert!(bar.bar.is_hidden());
        bar.doing("x".into());
        bar.runs_done(1);
        bar.finish("3 runs");
    }

    #[test]
    fn a_short_run_counts_every_thread() {
        let run = measure(2, 0.02, 8, |t, _, buf| {
            buf[0] = t as u8;
            t == 0
        });
        assert!(run.ops > 0 && run.misses > 0 && run.misses < run.ops);
        assert!(run.rate() > 0.0);
        let m = machine();
        assert!(m.cpus >= 1 && !m.os.is_empty());
    }
}
