//! FUSE operations counted and timed, per kind of operation: how many, and
//! a histogram of their latency (from the request's arrival at the
//! filesystem to its reply). Each filesystem starts a [`Timer`] at the top
//! of an operation; the timer records when it is dropped.
//!
//! The counters are striped: a thread adds to its own stripe (chosen once
//! per thread), so threads serving reads at once do not share a cache line;
//! a scrape sums the stripes.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// The kinds of operation counted; the rest are [`Op::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Lookup,
    Getattr,
    Setattr,
    Open,
    Read,
    Write,
    Flush,
    Release,
    Fsync,
    Create,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Opendir,
    Readdir,
    Statfs,
    Other,
}

impl Op {
    pub(crate) const ALL: [Op; 18] = [
        Op::Lookup,
        Op::Getattr,
        Op::Setattr,
        Op::Open,
        Op::Read,
        Op::Write,
        Op::Flush,
        Op::Release,
        Op::Fsync,
        Op::Create,
        Op::Mkdir,
        Op::Unlink,
        Op::Rmdir,
        Op::Rename,
        Op::Opendir,
        Op::Readdir,
        Op::Statfs,
        Op::Other,
    ];

    /// The `op` label.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Lookup => "lookup",
            Op::Getattr => "getattr",
            Op::Setattr => "setattr",
            Op::Open => "open",
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Release => "release",
            Op::Fsync => "fsync",
            Op::Create => "create",
            Op::Mkdir => "mkdir",
            Op::Unlink => "unlink",
            Op::Rmdir => "rmdir",
            Op::Rename => "rename",
            Op::Opendir => "opendir",
            Op::Readdir => "readdir",
            Op::Statfs => "statfs",
            Op::Other => "other",
        }
    }
}

/// The histogram's bucket bounds, in seconds (the last bucket, `+Inf`, is
/// the count).
pub(crate) const BOUNDS: [f64; 12] = [
    10e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3, 250e-3, 1.0,
];
const BOUNDS_NS: [u64; 12] = [
    10_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    50_000_000,
    250_000_000,
    1_000_000_000,
];

/// One op's figures in one stripe: the count, the summed nanoseconds and
/// the (non-cumulative) bucket counts.
struct Cells {
    count: AtomicU64,
    sum_ns: AtomicU64,
    buckets: [AtomicU64; BOUNDS.len()],
}

impl Cells {
    fn new() -> Cells {
        Cells {
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A stripe: every op's cells, alone on its cache lines.
#[repr(align(128))]
struct Stripe([Cells; Op::ALL.len()]);

/// Stripes per mount: enough that the FUSE threads of a mount (4 by
/// default) rarely share one.
const STRIPES: usize = 16;

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next thread's stripe.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

fn my_stripe() -> usize {
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        s.get()
    })
}

/// A mount's FUSE operations: counts and latency histograms per [`Op`].
pub(crate) struct FuseOps {
    stripes: Box<[Stripe]>,
}

/// One op's figures, summed over the stripes.
pub(crate) struct OpFigures {
    pub(crate) op: Op,
    pub(crate) count: u64,
    pub(crate) sum_seconds: f64,
    /// Cumulative counts at each of [`BOUNDS`].
    pub(crate) cumulative: [u64; BOUNDS.len()],
}

impl FuseOps {
    pub(crate) fn new() -> FuseOps {
        FuseOps {
            stripes: (0..STRIPES)
                .map(|_| Stripe(std::array::from_fn(|_| Cells::new())))
                .collect(),
        }
    }

    /// Starts timing an operation of kind `op`: recorded when the timer is
    /// dropped.
    pub(crate) fn start(&self, op: Op) -> Timer<'_> {
        Timer {
            ops: self,
            op,
            started: Instant::now(),
        }
    }

    fn record(&self, op: Op, ns: u64) {
        let cells = &self.stripes[my_stripe()].0[op as usize];
        cells.count.fetch_add(1, Ordering::Relaxed);
        cells.sum_ns.fetch_add(ns, Ordering::Relaxed);
        if let Some(i) = BOUNDS_NS.iter().position(|&b| ns <= b) {
            cells.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every op's figures, summed over the stripes (ops never seen left
    /// out).
    pub(crate) fn figures(&self) -> Vec<OpFigures> {
        Op::ALL
            .iter()
            .filter_map(|&op| {
                let mut count = 0;
                let mut sum_ns = 0;
                let mut buckets = [0u64; BOUNDS.len()];
                for stripe in self.stripes.iter() {
                    let cells = &stripe.0[op as usize];
                    count += cells.count.load(Ordering::Relaxed);
                    sum_ns += cells.sum_ns.load(Ordering::Relaxed);
                    for (b, c) in buckets.iter_mut().zip(&cells.buckets) {
                        *b += c.load(Ordering::Relaxed);
                    }
                }
                if count == 0 {
                    return None;
                }
                let mut cumulative = [0u64; BOUNDS.len()];
                let mut running = 0;
                for (c, b) in cumulative.iter_mut().zip(buckets) {
                    running += b;
                    *c = running;
                }
                Some(OpFigures {
                    op,
                    count,
                    sum_seconds: sum_ns as f64 / 1e9,
                    cumulative,
                })
            })
            .collect()
    }
}

/// An operation being timed (see [`FuseOps::start`]).
pub(crate) struct Timer<'a> {
    ops: &'a FuseOps,
    op: Op,
    started: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        let ns = self.started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.ops.record(self.op, ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_counted_into_cumulative_buckets() {
        let ops = FuseOps::new();
        ops.record(Op::Read, 5_000);
        ops.record(Op::Read, 300_000);
        ops.record(Op::Read, 2_000_000_000);
        std::thread::scope(|s| {
            s.spawn(|| ops.record(Op::Read, 20_000));
        });
        drop(ops.start(Op::Write));
        let figures = ops.figures();
        assert_eq!(figures.len(), 2, "only the ops seen");
        let read = &figures[0];
        assert_eq!((read.op, read.count), (Op::Read, 4));
        assert!((read.sum_seconds - 2.000325).abs() < 1e-9);
        // <= 10us: 1; <= 50us: 2; ... <= 500us: 3; <= 1s: 3 (2 s is past).
        assert_eq!(read.cumulative[0], 1);
        assert_eq!(read.cumulative[1], 2);
        assert_eq!(read.cumulative[4], 3);
        assert_eq!(read.cumulative[BOUNDS.len() - 1], 3);
        assert_eq!(figures[1].op, Op::Write);
        assert_eq!(Op::ALL.len(), Op::Other as usize + 1);
    }
}
