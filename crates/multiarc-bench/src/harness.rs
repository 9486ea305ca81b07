//! The measurement harness of the benchmarks: the flags every workload
//! takes ([`CommonArgs`]), the machine a report was measured on, timed runs
//! of N threads for S seconds, medians, the order rows run in within a
//! repetition, and the progress on stderr (a bar on a terminal, plain lines
//! otherwise), which the other long commands, `lockbench`, `replay`,
//! `poison` and `scan`, show too.
//!
//! It depends on no workload: each workload imports it.

use crate::cli::{count_arg, size_arg, thread_count_arg};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use multiarc::lock::poison::{unpoisoned, LockUnpoisoned};
use multiarc::units::meminfo;
use serde::Serialize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
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

/// A benchmark's progress on stderr, counting its runs (or another unit:
/// [`Bar::counting`]), with what runs now beside it. On a terminal, an
/// indicatif bar, redrawn only when told (no ticking thread to disturb the
/// runs). With `--json` or when stderr is not a terminal (a log, a pipe),
/// plain lines instead ([`ProgressLines`]), which a log keeps and which
/// never touch stdout.
pub struct Bar {
    /// The terminal's bar; hidden with `--json` or off a terminal.
    bar: ProgressBar,
    /// Where the bar is hidden: the same progress as lines.
    lines: Option<Mutex<ProgressLines>>,
    started: Instant,
}

impl Bar {
    /// Progress of `total` runs named `name` (`bench`, `bench randrw`): a
    /// bar on a terminal, lines with `json` or off a terminal.
    pub fn new(name: &str, total: usize, json: bool) -> Bar {
        Bar::counting(name, total as u64, "runs", json)
    }

    /// Progress of `total` `unit`s (`reads`, `requests`, `policies`)
    /// named `name`: a bar on a terminal, lines with `json` or off a
    /// terminal.
    pub fn counting(name: &str, total: u64, unit: &str, json: bool) -> Bar {
        if json || !std::io::stderr().is_terminal() {
            return Bar {
                bar: ProgressBar::hidden(),
                lines: Some(Mutex::new(ProgressLines::new(name, total, unit))),
                started: Instant::now(),
            };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
        let style = ProgressStyle::with_template(&format!(
            "{{prefix}} {{bar:30.cyan/blue}} {{human_pos}}/{{human_len}} {unit} [{{elapsed}}, eta {{eta}}] {{wide_msg}}"
        ))
        .expect("a valid progress template")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(name.to_string());
        Bar {
            bar,
            lines: None,
            started: Instant::now(),
        }
    }

    /// The lines' state, when progress goes out as lines.
    fn with_lines(&self, f: impl FnOnce(&mut ProgressLines)) {
        if let Some(lines) = &self.lines {
            f(&mut lines.lock_unpoisoned());
        }
    }

    /// Shows what runs now (`moka, 8 threads, Hold`).
    pub fn doing(&self, what: String) {
        self.with_lines(|l| l.doing(&what));
        self.bar.set_message(what);
    }

    /// Counts `n` runs done.
    pub fn runs_done(&self, n: usize) {
        self.bar.inc(n as u64);
        self.with_lines(|l| l.set_done(l.done + n as u64));
    }

    /// Progress that never shows (for callers that report none).
    #[cfg(test)]
    pub fn hidden() -> Bar {
        Bar {
            bar: ProgressBar::hidden(),
            lines: None,
            started: Instant::now(),
        }
    }

    /// The total, once known (`replay` counts its trace first).
    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
        self.with_lines(|l| l.total = total);
    }

    /// How many units are done.
    pub fn set_done(&self, done: u64) {
        self.bar.set_position(done);
        self.with_lines(|l| l.set_done(done));
    }

    /// Prints `line` above the bar (or as a line of its own), to stay.
    pub fn println(&self, line: String) {
        self.with_lines(|l| l.print(&line));
        self.bar.println(line);
    }

    /// Removes the bar and leaves one line: `{name}: {what} in N s`.
    pub fn finish(&self, what: &str) {
        let seconds = self.started.elapsed().as_secs_f64();
        if let Some(lines) = &self.lines {
            let lines = lines.lock_unpoisoned();
            lines.print(&format!("{}: {what} in {seconds:.0} s", lines.name));
            return;
        }
        if self.bar.is_hidden() {
            return;
        }
        let prefix = self.bar.prefix();
        self.bar.finish_and_clear();
        eprintln!("{prefix}: {what} in {seconds:.0} s");
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

/// Progress as plain lines on stderr (`bench object: 3/24 runs, 41 s:
/// repetition 2/5, multiarc-l2, 32 tasks`: the count done, then what runs
/// now): one as a step starts, at most one a second; while a long step
/// runs, one every ten seconds as its count moves. No step line before the
/// first unit is done or a second has gone, so that a command failing at
/// its start leaves its one error line only.
struct ProgressLines {
    name: String,
    unit: String,
    total: u64,
    done: u64,
    what: String,
    started: Instant,
    /// When the last progress line went out.
    last: Option<Instant>,
}

impl ProgressLines {
    /// The least time between two lines for a new step, and for a count.
    const STEP_GAP: Duration = Duration::from_secs(1);
    const COUNT_GAP: Duration = Duration::from_secs(10);

    fn new(name: &str, total: u64, unit: &str) -> ProgressLines {
        ProgressLines {
            name: name.to_string(),
            unit: unit.to_string(),
            total,
            done: 0,
            what: String::new(),
            started: Instant::now(),
            last: None,
        }
    }

    /// A step starts: a line if none went out for a second (the first
    /// line: once a unit is done, or a second after the start).
    fn doing(&mut self, what: &str) {
        what.clone_into(&mut self.what);
        let first_after = if self.done > 0 {
            Duration::ZERO
        } else {
            Self::STEP_GAP
        };
        self.show_after(Self::STEP_GAP, first_after);
    }

    /// The count moves: a line if none went out for ten seconds (the
    /// first: ten seconds after the start). A step that ends is not shown
    /// here: the next one's line says it is done.
    fn set_done(&mut self, done: u64) {
        self.done = done;
        self.show_after(Self::COUNT_GAP, Self::COUNT_GAP);
    }

    /// Prints the progress line if none went out for `gap`, or, before the
    /// first line, if `first_after` has gone since the start.
    fn show_after(&mut self, gap: Duration, first_after: Duration) {
        let now = Instant::now();
        let quiet = match self.last {
            Some(last) => now.duration_since(last) < gap,
            None => now.duration_since(self.started) < first_after,
        };
        if quiet {
            return;
        }
        self.last = Some(now);
        let line = self.line(now.duration_since(self.started));
        self.print(&line);
    }

    /// `{name}: {done}/{total} {unit}, {elapsed} s: {what}` (no `/total`
    /// while it is unknown, no `: what` before the first step).
    fn line(&self, elapsed: Duration) -> String {
        let mut line = format!("{}: {}", self.name, self.done);
        if self.total > 0 {
            line.push_str(&format!("/{}", self.total));
        }
        line.push_str(&format!(" {}, {:.0} s", self.unit, elapsed.as_secs_f64()));
        if !self.what.is_empty() {
            line.push_str(": ");
            line.push_str(&self.what);
        }
        line
    }

    fn print(&self, line: &str) {
        eprintln!("{line}");
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
                // At least one batch per thread, even when the machine is so
                // busy that the stop comes before this thread first runs: a
                // run that counted nothing would report a rate of zero.
                loop {
                    for _ in 0..64 {
                        if !op(t, rand::Rng::next_u64(&mut rng), &mut buf) {
                            missed += 1;
                        }
                    }
                    n += 64;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
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

/// The flags every workload takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Thread counts (comma-separated). Past 2 they oversubscribe this
    /// machine's cores, which is itself part of the test.
    #[arg(long, value_parser = thread_count_arg, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub threads: Vec<usize>,
    /// Seconds each measurement (row, mode, threads) runs.
    #[arg(long, default_value_t = 0.25)]
    pub seconds: f64,
    /// Repetitions: each runs every row once, the rows back to back (their
    /// order rotated by one per repetition); each row's median is reported.
    /// The default (3 x 0.25 s) keeps the cache workload at about two
    /// minutes.
    #[arg(long, value_parser = count_arg, default_value = "3")]
    pub repeat: usize,
    /// Block size.
    #[arg(long, value_parser = size_arg, default_value = "8KiB")]
    pub block_size: u64,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
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
    fn progress_lines_say_the_count_the_time_and_the_step() {
        let mut lines = ProgressLines::new("bench object", 24, "runs");
        assert_eq!(
            lines.line(Duration::from_secs(3)),
            "bench object: 0/24 runs, 3 s"
        );
        lines.doing("repetition 2/5, multiarc-l2, 32 tasks");
        lines.set_done(3);
        assert_eq!(
            lines.line(Duration::from_millis(41_400)),
            "bench object: 3/24 runs, 41 s: repetition 2/5, multiarc-l2, 32 tasks"
        );
        let mut unknown = ProgressLines::new("replay", 0, "requests");
        unknown.set_done(7);
        assert_eq!(unknown.line(Duration::ZERO), "replay: 7 requests, 0 s");
    }

    #[test]
    fn progress_lines_start_with_the_step_after_the_first_unit_done() {
        let mut lines = ProgressLines::new("bench", 3, "runs");
        // A failure at the start: no line before its error.
        lines.doing("first");
        assert_eq!(lines.last, None);
        // The end of a short step shows nothing; the next step does.
        lines.set_done(1);
        assert_eq!(lines.last, None);
        lines.doing("second");
        let first = lines.last.expect("the step after a run done is shown");
        lines.set_done(2);
        lines.doing("third");
        // Within the gaps: nothing new went out.
        assert_eq!(lines.last, Some(first));
        let ten_seconds_ago = first.checked_sub(ProgressLines::COUNT_GAP).unwrap();
        lines.last = Some(ten_seconds_ago);
        lines.set_done(3);
        assert!(lines.last.unwrap() > ten_seconds_ago);
        // A second after the start, a step shows with no unit done yet.
        let mut slow = ProgressLines::new("bench", 3, "runs");
        slow.started = first.checked_sub(ProgressLines::STEP_GAP).unwrap();
        slow.doing("writing");
        assert!(slow.last.is_some());
        // Ten seconds after the start, a count shows (a long first pass).
        let mut long = ProgressLines::new("replay", 0, "requests");
        long.set_done(1 << 18);
        assert_eq!(long.last, None);
        long.started = ten_seconds_ago;
        long.set_done(2 << 18);
        assert!(long.last.is_some());
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
