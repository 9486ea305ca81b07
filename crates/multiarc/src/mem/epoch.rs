//! Deferred freeing for readers that take no lock: an epoch scheme (as in
//! crossbeam-epoch and userspace RCU), process-wide.
//!
//! Why: the lazy hit path probes its hash stripe without the stripe's lock
//! (`table.rs`), so an entry taken out of the table, or a stripe's slot array
//! replaced by a bigger one, may still be read by a probe that started
//! before. Such memory is *retired* instead of freed, with the epoch of the
//! moment it was retired, and freed once the global epoch has moved on twice
//! since: every reader that could have seen it has left by then.
//!
//! A reader *pins* (`pin`): it writes the global epoch into its thread's
//! record and reads the table; dropping the [`Guard`] clears the record. The
//! epoch advances (in `try_advance`, run by whoever frees memory) when every
//! pinned record shows the current epoch.
//!
//! The reader's side has no atomic read-modify-write and no fence: the
//! record is written with a plain store. What orders that store before the
//! reader's loads of the table is paid by the (rare) side that advances the
//! epoch: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` runs a full memory
//! barrier on every CPU running one of our threads, so after it either a
//! reader's record is visible to the scan, or the reader's later loads see
//! every unlink made before it (the "asymmetric fence" of liburcu's memb
//! flavour and folly's hazard pointers). Where the kernel refuses
//! membarrier, readers fall back to a `SeqCst` fence. Under loom both sides
//! use `SeqCst` fences (loom cannot model membarrier), so the models check
//! the epoch logic with symmetric fences.

use super::sync::{fence, AtomicBool, AtomicU64, Ordering};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::compiler_fence;

use super::sync::LockUnpoisoned;
#[cfg(loom)]
use loom::sync::{Arc, Mutex};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex};

/// One thread's record: 0 when not pinned, else the epoch it pinned with,
/// plus one (epochs are even).
struct Record {
    state: AtomicU64,
}

/// Every thread's record.
struct Registry {
    records: Mutex<Vec<Arc<Record>>>,
    /// `membarrier` works here: readers need no fence.
    asymmetric: AtomicBool,
}

impl Registry {
    fn new() -> Registry {
        Registry {
            records: Mutex::new(Vec::new()),
            asymmetric: AtomicBool::new(register_membarrier()),
        }
    }
}

/// The global epoch (even; starts at 2). A plain static, so that pinning
/// reads it without going through the registry's lazy initialisation.
#[cfg(not(loom))]
static EPOCH: AtomicU64 = AtomicU64::new(2);

#[cfg(not(loom))]
#[inline]
fn global_epoch() -> &'static AtomicU64 {
    &EPOCH
}

#[cfg(loom)]
fn global_epoch() -> &'static AtomicU64 {
    loom::lazy_static! {
        static ref EPOCH: AtomicU64 = AtomicU64::new(2);
    }
    &EPOCH
}

#[cfg(not(loom))]
fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

#[cfg(loom)]
fn registry() -> &'static Registry {
    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry::new();
    }
    &REGISTRY
}

#[cfg(not(loom))]
fn register_membarrier() -> bool {
    // SAFETY: membarrier takes no pointers; a failure is reported by its
    // return value (ENOSYS, EINVAL), and we then use fences instead.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        ) == 0
    }
}

#[cfg(loom)]
fn register_membarrier() -> bool {
    false
}

/// The advancing side's fence (see the module comment).
fn heavy_fence(asymmetric: bool) {
    #[cfg(not(loom))]
    if asymmetric {
        // SAFETY: as in `register_membarrier`; registered, so this cannot
        // fail with EPERM, and any other failure falls back to the fence.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                0,
                0,
            )
        };
        if rc == 0 {
            return;
        }
    }
    let _ = asymmetric;
    fence(Ordering::SeqCst);
}

/// This thread's record, registered on first use and removed at thread exit.
struct Local {
    record: Arc<Record>,
    depth: Cell<u32>,
    asymmetric: bool,
}

impl Local {
    fn register() -> Local {
        let reg = registry();
        let record = Arc::new(Record {
            state: AtomicU64::new(0),
        });
        reg.records.lock_unpoisoned().push(Arc::clone(&record));
        Local {
            record,
            depth: Cell::new(0),
            asymmetric: reg.asymmetric.load(Ordering::Relaxed),
        }
    }
}

// Under loom the records live as long as the model's execution (loom drops
// its lazy statics before the threads' locals, so a destructor could not
// reach the registry).
#[cfg(not(loom))]
impl Drop for Local {
    fn drop(&mut self) {
        let mut records = registry().records.lock_unpoisoned();
        records.retain(|r| !Arc::ptr_eq(r, &self.record));
    }
}

#[cfg(not(loom))]
thread_local! {
    static LOCAL: Local = Local::register();
}

#[cfg(loom)]
loom::thread_local! {
    static LOCAL: Local = Local::register();
}

/// A pinned reader: memory retired after `pin` returned is not freed while
/// it lives. Not `Send`: it clears this thread's record.
pub(crate) struct Guard {
    _not_send: PhantomData<*const ()>,
}

/// Pins this thread (see the module comment): a thread-local access, one
/// load of the global epoch and one plain store. `None` while the thread's
/// locals are being destroyed (a lookup from another thread-local's
/// destructor): the caller must then take its lock instead.
#[inline]
pub(crate) fn try_pin() -> Option<Guard> {
    LOCAL
        .try_with(|l| {
            let depth = l.depth.get();
            if depth == 0 {
                // Acquire: an epoch advanced past some retirement happens after
                // that retirement's unlink; loads of the table that follow see
                // the unlink (see `safe_to_free`).
                let e = global_epoch().load(Ordering::Acquire);
                l.record.state.store(e | 1, Ordering::Relaxed);
                if l.asymmetric {
                    compiler_fence(Ordering::SeqCst);
                } else {
                    fence(Ordering::SeqCst);
                }
            }
            l.depth.set(depth + 1);
        })
        .ok()?;
    Some(Guard {
        _not_send: PhantomData,
    })
}

/// [`try_pin`] for callers that cannot run during thread-local destruction.
#[cfg(test)]
pub(crate) fn pin() -> Guard {
    try_pin().expect("pinned outside thread-local destruction")
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // `try_with`: a guard dropped while the thread's locals are being
        // destroyed finds no record (it was pinned by an earlier `with`, so
        // the record exists unless already torn down; nothing to clear then).
        let _ = LOCAL.try_with(|l| {
            let depth = l.depth.get() - 1;
            l.depth.set(depth);
            if depth == 0 {
                // Release: our reads of retired memory come before a scan
                // that sees us unpinned.
                l.record.state.store(0, Ordering::Release);
            }
        });
    }
}

/// The epoch to tag memory retired now with (after it was unlinked).
pub(crate) fn epoch() -> u64 {
    global_epoch().load(Ordering::SeqCst)
}

/// How many times `try_advance` looks again at a reader pinned at an older
/// epoch (a few hundred nanoseconds) before it gives up.
#[cfg(not(loom))]
const SPINS_FOR_A_READER: u32 = 256;
#[cfg(loom)]
const SPINS_FOR_A_READER: u32 = 1;

/// Advances the global epoch if every pinned reader has seen the current
/// one; returns the epoch after the attempt.
pub(crate) fn try_advance() -> u64 {
    let reg = registry();
    // This thread's record (registered now if it had none), by address.
    let own = LOCAL
        .try_with(|l| &*l.record as *const Record)
        .unwrap_or(std::ptr::null());
    let mut records = reg.records.lock_unpoisoned();
    // The fence orders other threads' pins against our scan. With no other
    // thread registered, there is none to order: a thread that registers
    // after this lock is released synchronises with us through it, so its
    // reads see every unlink made before this call, and it cannot reach
    // what was retired before it. Our own record we read in program order.
    // (A process with one reading thread, such as a replay, saves a
    // `membarrier` per advance.)
    if records.iter().any(|r| !std::ptr::eq(&**r, own)) {
        drop(records);
        heavy_fence(reg.asymmetric.load(Ordering::Relaxed));
        records = reg.records.lock_unpoisoned();
    }
    let current = global_epoch().load(Ordering::SeqCst);
    // A reader pinned at an older epoch is usually in the middle of one
    // lookup (tens of nanoseconds): wait a little for it to leave or pin
    // again before giving up. Reading its record again after the fence is
    // sound: a read section that starts after the fence sees every unlink
    // made before it, so it cannot reach memory retired before this call.
    let all_current = records.iter().all(|r| {
        for _ in 0..SPINS_FOR_A_READER {
            let s = r.state.load(Ordering::Acquire);
            if s == 0 || s == (current | 1) {
                return true;
            }
            super::sync::spin_loop();
        }
        false
    });
    drop(records);
    if !all_current {
        return current;
    }
    match global_epoch().compare_exchange(current, current + 2, Ordering::SeqCst, Ordering::SeqCst)
    {
        Ok(_) => current + 2,
        Err(now) => now,
    }
}

/// True when memory retired with tag `retired` may be freed, the global
/// epoch being `now`: two advances have happened since, so every reader
/// pinned when it was unlinked has unpinned.
#[inline]
pub(crate) fn safe_to_free(retired: u64, now: u64) -> bool {
    now >= retired + 4
}

/// Memory waiting for its readers to leave: items tagged with their epoch.
pub(crate) struct Limbo<T> {
    items: Vec<(u64, T)>,
}

impl<T> Default for Limbo<T> {
    fn default() -> Self {
        Limbo { items: Vec::new() }
    }
}

impl<T> Limbo<T> {
    /// Adds an item unlinked from every shared structure just now.
    pub(crate) fn retire(&mut self, item: T) {
        self.items.push((epoch(), item));
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Tries to advance the epoch, then hands every item old enough to
    /// `free`. Returns how many are left.
    pub(crate) fn collect(&mut self, free: impl FnMut(T)) -> usize {
        self.collect_advancing(1, free)
    }

    /// As [`Limbo::collect`], trying to advance the epoch up to `advances`
    /// times first (twice frees what was retired just now, when no reader
    /// is pinned).
    pub(crate) fn collect_advancing(&mut self, advances: u32, mut free: impl FnMut(T)) -> usize {
        if self.items.is_empty() {
            return 0;
        }
        let mut now = 0;
        for _ in 0..advances.max(1) {
            now = try_advance();
        }
        let mut i = 0;
        while i < self.items.len() {
            if safe_to_free(self.items[i].0, now) {
                free(self.items.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        self.items.len()
    }

    /// Every item, whatever its age: for the owner's drop, when no reader
    /// can reach them any more.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.items.drain(..).map(|(_, t)| t)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_item_waits_for_a_pinned_reader_and_then_is_freed() {
        let mut limbo = Limbo::default();
        let guard = pin();
        limbo.retire(1u32);
        let mut freed = Vec::new();
        for _ in 0..8 {
            limbo.collect(|x| freed.push(x));
        }
        // Our own pin holds the epoch back (at most one advance).
        assert!(freed.is_empty());
        drop(guard);
        // Other tests of this process pin too (the table's probe loops), and
        // an advance waits for each of them to pin again: retry for a while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while freed.is_empty() && std::time::Instant::now() < deadline {
            limbo.collect(|x| freed.push(x));
        }
        assert_eq!(freed, vec![1]);
    }

    #[test]
    fn a_reader_on_another_thread_holds_the_epoch_back() {
        use std::sync::mpsc;
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let g = pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(g);
        });
        pinned_rx.recv().unwrap();
        let mut limbo = Limbo::default();
        limbo.retire(7u32);
        let mut freed = Vec::new();
        for _ in 0..8 {
            limbo.collect(|x| freed.push(x));
        }
        assert!(freed.is_empty(), "freed under a pinned reader");
        release_tx.send(()).unwrap();
        t.join().unwrap();
        for _ in 0..8 {
            limbo.collect(|x| freed.push(x));
        }
        assert_eq!(freed, vec![7]);
    }
}

/// The epoch logic under loom (symmetric fences): a reader that loaded a
/// pointer while pinned never sees the memory it points to freed, however
/// the writer's unlink, retirement and collections interleave with it.
/// Freeing is a flag here (set by `collect`), so a premature free shows as
/// a reader seeing the flag, not as undefined behaviour.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicPtr;

    struct Node {
        value: u64,
        freed: AtomicBool,
    }

    fn node(value: u64) -> *mut Node {
        Box::into_raw(Box::new(Node {
            value,
            freed: AtomicBool::new(false),
        }))
    }

    #[test]
    fn a_pinned_reader_never_sees_its_node_freed() {
        loom::model(|| {
            let first = node(1);
            let shared = Arc::new(AtomicPtr::new(first));
            let reader = {
                let shared = Arc::clone(&shared);
                loom::thread::spawn(move || {
                    let _pinned = pin();
                    let p = shared.load(Ordering::Acquire);
                    // SAFETY: nodes are deallocated only after both threads
                    // are done; `freed` is what `collect` would have done.
                    let n = unsafe { &*p };
                    assert!(
                        !n.freed.load(Ordering::Relaxed),
                        "a pinned reader's node was freed"
                    );
                    assert!(n.value == 1 || n.value == 2);
                })
            };
            let second = node(2);
            let old = shared.swap(second, Ordering::AcqRel);
            let mut limbo = Limbo::default();
            limbo.retire(old as usize);
            let mut freed = Vec::new();
            for _ in 0..3 {
                limbo.collect(|p| {
                    // SAFETY: as above.
                    unsafe { &*(p as *const Node) }
                        .freed
                        .store(true, Ordering::Relaxed);
                    freed.push(p);
                });
            }
            reader.join().unwrap();
            for p in [first, second] {
                // SAFETY: both threads are done; allocated by `node`.
                drop(unsafe { Box::from_raw(p) });
            }
        });
    }
}
