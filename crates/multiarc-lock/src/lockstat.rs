//! Lock statistics: per lock instance, how often it was acquired, how often
//! it was contended, and how long the contended acquisitions waited. The
//! figures are returned as data ([`Report`]); presenting them (the `multiarc`
//! command prints the layout of illumos `lockstat(8)`) is the caller's job.
//!
//! Tracing is switched on per lock instance with `set_lockstat(Some(id))`
//! ([`crate::LockstatExt::set_lockstat`], or `set_lockstat` of
//! [`crate::RawMutex`] and [`crate::RawRwLock`]). Each
//! distinct [`LockId`] gets a *slot* (a small integer stored in the traced
//! lock's state word). A traced acquisition adds to the counters of its slot
//! in a table owned by the acquiring thread, with plain loads and stores (no
//! locked instruction, no shared cache line); [`snapshot`] merges the tables
//! of all threads. A contended traced acquisition also reads the clock twice.

use crate::LockId;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Slot assignment: slot `s` (from 1) belongs to `ids[s - 1]`.
struct Registry {
    ids: Vec<LockId>,
    slots: BTreeMap<LockId, u32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    ids: Vec::new(),
    slots: BTreeMap::new(),
});

/// Incremented by [`reset`]. A thread's counters belong to the epoch stored
/// in its table; the owner zeroes them on its first record in a new epoch,
/// and [`snapshot`] ignores tables of an old epoch. So `reset` never writes
/// counters another thread is updating.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The counters of one slot in one thread. Written only by the owning
/// thread (a relaxed load and store: no locked instruction), read by
/// [`snapshot`].
#[derive(Default)]
struct SlotCounters {
    acquisitions: AtomicU64,
    contended: AtomicU64,
    wait_ns_total: AtomicU64,
    wait_ns_max: AtomicU64,
}

/// Slots per chunk of a thread's table.
const CHUNK: usize = 64;

/// A fixed block of counters; a thread's table grows by whole chunks, so
/// counters never move while `snapshot` reads them.
struct Chunk([SlotCounters; CHUNK]);

impl Chunk {
    fn new() -> Arc<Chunk> {
        Arc::new(Chunk(std::array::from_fn(|_| SlotCounters::default())))
    }
}

/// One thread's counters, as seen by `snapshot` and `reset`.
struct ThreadTable {
    /// The epoch the counters belong to.
    epoch: AtomicU64,
    /// The chunks, slot `s` in `chunks[s / CHUNK].0[s % CHUNK]`. The mutex
    /// is taken by the owner only to append a chunk.
    chunks: Mutex<Vec<Arc<Chunk>>>,
}

/// The owning thread's handle on its table: its own copy of the chunk list,
/// read without locking.
struct Local {
    table: Arc<ThreadTable>,
    chunks: RefCell<Vec<Arc<Chunk>>>,
}

/// The tables of all threads that ever recorded (kept after a thread exits
/// so that its statistics still count; `reset` drops those of exited threads).
static THREADS: Mutex<Vec<Arc<ThreadTable>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: Local = {
        let table = Arc::new(ThreadTable {
            epoch: AtomicU64::new(EPOCH.load(Acquire)),
            chunks: Mutex::new(Vec::new()),
        });
        lock(&THREADS).push(Arc::clone(&table));
        Local { table, chunks: RefCell::new(Vec::new()) }
    };
}

/// Locks a statistics mutex; the data stays usable after a panic elsewhere.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The slot of `id`, assigning the next free one on first use; `None` if
/// that slot is above `max_slot` (the capacity of the caller's state word).
pub(crate) fn slot_for(id: LockId, max_slot: u32) -> Option<u32> {
    let mut registry = lock(&REGISTRY);
    let slot = match registry.slots.get(&id) {
        Some(&slot) => slot,
        None => {
            let slot = u32::try_from(registry.ids.len() + 1).ok()?;
            registry.ids.push(id);
            registry.slots.insert(id, slot);
            slot
        }
    };
    (slot <= max_slot).then_some(slot)
}

/// Adds `n` to a counter only this thread writes.
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).saturating_add(n), Relaxed);
}

/// Records one acquisition of the lock traced in `slot` (0 = untraced, a
/// no-op); `wait` is `Some` if the acquisition was contended.
pub(crate) fn record(slot: u32, wait: Option<Duration>) {
    if slot == 0 {
        return;
    }
    // `try_with`: a lock taken in a thread-local destructor is not counted.
    let _ = LOCAL.try_with(|local| {
        // `try_borrow_mut`: never re-entered in practice (recording takes no
        // traced lock), but a nested record is dropped rather than panicking.
        let Ok(mut chunks) = local.chunks.try_borrow_mut() else {
            return;
        };
        let epoch = EPOCH.load(Acquire);
        if local.table.epoch.load(Relaxed) != epoch {
            // First record since a reset: start this thread's counters anew.
            for chunk in chunks.iter() {
                for counters in &chunk.0 {
                    counters.acquisitions.store(0, Relaxed);
                    counters.contended.store(0, Relaxed);
                    counters.wait_ns_total.store(0, Relaxed);
                    counters.wait_ns_max.store(0, Relaxed);
                }
            }
            // Release: a snapshot that sees the new epoch sees the zeroes.
            local.table.epoch.store(epoch, Release);
        }
        let (chunk, index) = (slot as usize / CHUNK, slot as usize % CHUNK);
        while chunks.len() <= chunk {
            let new = Chunk::new();
            lock(&local.table.chunks).push(Arc::clone(&new));
            chunks.push(new);
        }
        let counters = &chunks[chunk].0[index];
        add(&counters.acquisitions, 1);
        if let Some(wait) = wait {
            let ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            add(&counters.contended, 1);
            add(&counters.wait_ns_total, ns);
            if ns > counters.wait_ns_max.load(Relaxed) {
                counters.wait_ns_max.store(ns, Relaxed);
            }
        }
    });
}

/// Clears all recorded statistics (tracing stays on where it is on). Safe
/// to call while traced locks are in use: acquisitions racing with the
/// reset count on one side of it or the other.
pub fn reset() {
    EPOCH.fetch_add(1, AcqRel);
    // Tables only we still reference belong to exited threads.
    lock(&THREADS).retain(|table| Arc::strong_count(table) > 1);
}

/// The summed counters of one slot.
#[derive(Clone, Copy, Default)]
struct Counters {
    acquisitions: u64,
    contended: u64,
    wait_ns_total: u64,
    wait_ns_max: u64,
}

/// The merged statistics of every traced lock instance acquired since the
/// last [`reset`]: one row per [`LockId`], in the order ids were first traced.
pub fn snapshot() -> Report {
    let epoch = EPOCH.load(Acquire);
    let mut merged: Vec<Counters> = Vec::new();
    for table in lock(&THREADS).iter() {
        // Acquire: pairs with the owner's Release after zeroing.
        if table.epoch.load(Acquire) != epoch {
            continue; // nothing recorded since the last reset
        }
        let chunks = lock(&table.chunks);
        if merged.len() < chunks.len() * CHUNK {
            merged.resize(chunks.len() * CHUNK, Counters::default());
        }
        let all = chunks.iter().flat_map(|chunk| chunk.0.iter());
        for (sum, counters) in merged.iter_mut().zip(all) {
            sum.acquisitions += counters.acquisitions.load(Relaxed);
            sum.contended += counters.contended.load(Relaxed);
            let wait = counters.wait_ns_total.load(Relaxed);
            sum.wait_ns_total = sum.wait_ns_total.saturating_add(wait);
            sum.wait_ns_max = sum.wait_ns_max.max(counters.wait_ns_max.load(Relaxed));
        }
    }
    let registry = lock(&REGISTRY);
    let rows = merged
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, counters)| counters.acquisitions > 0)
        // A slot no id was registered for (set directly by unit tests) is skipped.
        .filter_map(|(slot, counters)| {
            Some(LockRow {
                id: *registry.ids.get(slot - 1)?,
                acquisitions: counters.acquisitions,
                contended: counters.contended,
                wait_ns_total: counters.wait_ns_total,
                wait_ns_max: counters.wait_ns_max,
            })
        })
        .collect();
    Report { rows }
}

/// Lock statistics of a set of lock instances (see [`snapshot`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Report {
    /// One row per lock instance (or per class, from [`Report::by_class`]).
    pub rows: Vec<LockRow>,
}

/// The statistics of one traced lock instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LockRow {
    /// The instance (in [`Report::by_class`] rows: the class, with `index`
    /// the number of instances summed).
    pub id: LockId,
    /// Acquisitions (shared and exclusive alike for a reader-writer lock).
    pub acquisitions: u64,
    /// Acquisitions that found the lock unavailable and had to wait.
    pub contended: u64,
    /// Total time the contended acquisitions waited, in nanoseconds.
    pub wait_ns_total: u64,
    /// The longest single wait, in nanoseconds.
    pub wait_ns_max: u64,
}

impl LockRow {
    /// Mean wait of the contended acquisitions in nanoseconds (0 if none).
    pub fn wait_ns_avg(&self) -> u64 {
        self.wait_ns_total.checked_div(self.contended).unwrap_or(0)
    }
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl Report {
    /// Acquisitions of all rows.
    pub fn total_acquisitions(&self) -> u64 {
        self.rows.iter().map(|r| r.acquisitions).sum()
    }

    /// Contended acquisitions of all rows.
    pub fn total_contended(&self) -> u64 {
        self.rows.iter().map(|r| r.contended).sum()
    }

    /// The hottest instance's share of all contended acquisitions (0 when
    /// none were contended): near 1 means one lock serialises everything;
    /// near 1/n means contention is spread evenly over n instances.
    pub fn hottest_contended_share(&self) -> f64 {
        let max = self.rows.iter().map(|r| r.contended).max().unwrap_or(0);
        share(max, self.total_contended())
    }

    /// The busiest instance's share of all acquisitions (0 when none).
    pub fn hottest_acquisition_share(&self) -> f64 {
        let max = self.rows.iter().map(|r| r.acquisitions).max().unwrap_or(0);
        share(max, self.total_acquisitions())
    }

    /// One row per class, summing its instances; `id.index` is the number of
    /// instances, `wait_ns_max` the longest wait of any. Sorted by class.
    pub fn by_class(&self) -> Vec<LockRow> {
        let mut classes: BTreeMap<&'static str, LockRow> = BTreeMap::new();
        for row in &self.rows {
            let class = classes.entry(row.id.class).or_insert(LockRow {
                id: LockId::new(row.id.class, 0),
                acquisitions: 0,
                contended: 0,
                wait_ns_total: 0,
                wait_ns_max: 0,
            });
            class.id.index += 1;
            class.acquisitions += row.acquisitions;
            class.contended += row.contended;
            class.wait_ns_total = class.wait_ns_total.saturating_add(row.wait_ns_total);
            class.wait_ns_max = class.wait_ns_max.max(row.wait_ns_max);
        }
        classes.into_values().collect()
    }

    /// The rows whose class starts with `prefix` (e.g. `"mru."`).
    pub fn filter_class_prefix(&self, prefix: &str) -> Report {
        Report {
            rows: self
                .rows
                .iter()
                .filter(|r| r.id.class.starts_with(prefix))
                .copied()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(class: &'static str, index: u32, acquisitions: u64, contended: u64) -> LockRow {
        LockRow {
            id: LockId::new(class, index),
            acquisitions,
            contended,
            wait_ns_total: contended * 100,
            wait_ns_max: contended * 10,
        }
    }

    #[test]
    fn shares_and_classes() {
        let report = Report {
            rows: vec![
                row("mru.sublist", 0, 100, 30),
                row("mru.sublist", 1, 50, 10),
                row("hash.stripe", 7, 850, 60),
            ],
        };
        assert_eq!(report.total_acquisitions(), 1000);
        assert_eq!(report.total_contended(), 100);
        assert_eq!(report.hottest_contended_share(), 0.6);
        assert_eq!(report.hottest_acquisition_share(), 0.85);
        let classes = report.by_class();
        assert_eq!(classes.len(), 2);
        assert_eq!(classes[0].id, LockId::new("hash.stripe", 1));
        assert_eq!(classes[1].id, LockId::new("mru.sublist", 2));
        assert_eq!(classes[1].acquisitions, 150);
        assert_eq!(classes[1].contended, 40);
        assert_eq!(classes[1].wait_ns_max, 300);
        let mru = report.filter_class_prefix("mru.");
        assert_eq!(mru.rows.len(), 2);
        assert_eq!(mru.hottest_contended_share(), 0.75);
        assert_eq!(Report::default().hottest_contended_share(), 0.0);
    }
}
