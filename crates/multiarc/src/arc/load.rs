//! Read-through loads, single-flight: however many threads miss the same key
//! at once, one runs its loader and the others wait for its result
//! (`inflight.rs` has the shared record and its states; `load_async.rs` is
//! the same for tasks, on the same records, so threads and tasks share
//! loads).

use super::core::Core;
use super::evict::Evictor;
use super::hit_mode::HitModeImpl;
use super::inflight::{LoadResult, Pending};
use super::insert::insert_entry_as;
use super::key::Key;
use super::policy::GhostHit;
use super::second_tier::{LoadedBytes, TierRead};
use super::stats::Event;
use crate::mem::sync::Ordering;
use crate::mem::EntryPtr;
use std::sync::Arc;

/// The cached entry of `key` with a hold taken, or its copy in the second
/// tier, or the result of `loader`, cached (see `Cache::get_or_load`).
/// Without a loader (`Cache::get` of a key the second tier holds), a key
/// the tier cannot give back is an `Err(None)`.
pub(crate) fn get_or_load<K, M, V, E, F>(
    core: &Core<K, M>,
    key: K,
    loader: Option<F>,
) -> Result<EntryPtr<K>, Option<Arc<E>>>
where
    K: Key,
    M: HitModeImpl,
    V: Evictor,
    F: FnOnce() -> Result<Vec<u8>, E>,
    E: Send + Sync + 'static,
{
    let hash = core.hash(&key);
    let mut loader = loader;
    loop {
        if let Some((entry, _)) = M::lookup(core, hash, &key) {
            return Ok(entry);
        }
        let pending = {
            let mut stripe = core.table.write(hash);
            if let Some(e) = stripe.find(hash, &key) {
                // SAFETY: in the table, under its stripe lock (held).
                if unsafe { e.header() }.state().is_live() {
                    // SAFETY: as above.
                    unsafe { M::hold_locked(core, e) };
                    return Ok(e);
                }
            }
            if let Some(p) = stripe.per_stripe().find(&key) {
                let p = Arc::clone(p);
                p.waiters.fetch_add(1, Ordering::Relaxed);
                drop(stripe);
                core.events.count(Event::Miss);
                core.events.count(Event::LoadWait);
                match p.wait() {
                    // Our hold was taken for us when it was inserted.
                    LoadResult::Done(entry) => return Ok(entry),
                    LoadResult::Failed(err) => match err.downcast::<E>() {
                        Ok(err) => return Err(Some(err)),
                        // Another caller's loader had another error type:
                        // its error is not ours to return; load ourselves.
                        Err(_) => continue,
                    },
                    LoadResult::Abandoned => continue,
                }
            }
            let p = Arc::new(Pending::new());
            stripe.per_stripe().push(key.clone(), Arc::clone(&p));
            p
        };
        core.events.count(Event::Miss);
        let mut guard = AbandonOnDrop::new(core, hash, &pending);
        // The second tier first: its copy is the cached bytes, verified.
        let (load, l2_origin) = match core.tier.as_deref().and_then(|t| t.read(&key)) {
            Some(read) => {
                let origin = l2_origin(&read);
                (Ok(read.data), origin)
            }
            None => match loader.take() {
                Some(loader) => {
                    core.events.count(Event::Load);
                    (loader().map(LoadedBytes::from), None)
                }
                None => {
                    // Not in the tier after all (a `get`): let any waiter
                    // load with its own loader.
                    guard.disarm();
                    complete_unloaded(core, hash, &pending, LoadResult::Abandoned);
                    return Err(None);
                }
            },
        };
        return finish_load::<K, M, V, E>(
            core, &key, hash, &pending, guard, load, l2_origin, false,
        )
        .map_err(Some);
    }
}

/// What a copy read back from the second tier says of the key's history,
/// for its insert when memory no longer remembers the key (its ghost is
/// gone; a ghost still there is a ghost hit as without the tier). By
/// default the copy is history: a hit of the ghost list of the list it was
/// fed from (OpenZFS's L2-only header), so it adapts `p` and enters MFU.
/// That keeps T1 large where the tier's hits are many, which the feed
/// needs to copy new blocks before eviction drops them (the ARC traces'
/// hit ratios depend on it). With `l2_readback_as_new`, it is a new block
/// to memory, as a miss without the tier: onto MRU, `p` left alone, so
/// that scans that repeat and fit in the tier do not raise `p` to its top
/// and push the hot set out of memory (the object benchmark's Parquet
/// scans).
pub(super) fn l2_origin(read: &TierRead) -> Option<GhostHit> {
    match (read.as_new, read.mfu) {
        (true, _) => None,
        (false, true) => Some(GhostHit::Mfu),
        (false, false) => Some(GhostHit::Mru),
    }
}

/// A load's outcome, for its waiters too (the sync and the async path
/// alike): loaded bytes are inserted and handed to every waiter, an error
/// is shared with them and caches nothing. `guard` is disarmed once the
/// outcome is settled. `read_ahead`: the bytes were loaded ahead of any
/// demand (`insert_entry_as`).
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_load<K: Key, M: HitModeImpl, V: Evictor, E: Send + Sync + 'static>(
    core: &Core<K, M>,
    key: &K,
    hash: u64,
    pending: &Arc<Pending<K>>,
    mut guard: AbandonOnDrop<'_, K, M>,
    load: Result<LoadedBytes, E>,
    l2_origin: Option<GhostHit>,
    read_ahead: bool,
) -> Result<EntryPtr<K>, Arc<E>> {
    match load {
        Ok(data) => {
            let entry = insert_entry_as::<K, M, V>(
                core,
                key.clone(),
                &data,
                Some(pending),
                l2_origin,
                read_ahead,
            );
            guard.disarm();
            complete_done(core, pending, entry);
            Ok(entry)
        }
        Err(err) => {
            core.events.count(Event::LoadFailure);
            let err = Arc::new(err);
            guard.disarm();
            complete_unloaded(
                core,
                hash,
                pending,
                LoadResult::Failed(Arc::clone(&err) as _),
            );
            Err(err)
        }
    }
}

/// Completes a load whose entry `insert_entry` installed (and whose record
/// it forgot), releasing the holds taken for waiting tasks that left
/// meanwhile (`inflight.rs`).
pub(super) fn complete_done<K: Key, M: HitModeImpl>(
    core: &Core<K, M>,
    pending: &Pending<K>,
    entry: EntryPtr<K>,
) {
    for _ in 0..pending.complete(LoadResult::Done(entry)) {
        // SAFETY: a hold the insert took for a waiter that left before the
        // load completed: given up once, for that waiter.
        unsafe { M::release(core, entry) };
    }
}

/// Completes a load that cached nothing (failed or abandoned): forgets its
/// record, then wakes its waiters with `result`.
pub(super) fn complete_unloaded<K: Key, M>(
    core: &Core<K, M>,
    hash: u64,
    pending: &Arc<Pending<K>>,
    result: LoadResult<K>,
) {
    core.table.write(hash).per_stripe().forget(pending);
    // No hold was taken for anyone: nothing to release for waiters that left.
    let _ = pending.complete(result);
}

/// Completes a pending load as abandoned if its loader unwinds, or (async)
/// if the future running it is dropped before it is done: its waiters are
/// woken and retry, and the first to retry loads with its own loader.
pub(super) struct AbandonOnDrop<'a, K: Key, M> {
    core: &'a Core<K, M>,
    hash: u64,
    pending: &'a Arc<Pending<K>>,
    armed: bool,
}

impl<'a, K: Key, M> AbandonOnDrop<'a, K, M> {
    pub(super) fn new(core: &'a Core<K, M>, hash: u64, pending: &'a Arc<Pending<K>>) -> Self {
        AbandonOnDrop {
            core,
            hash,
            pending,
            armed: true,
        }
    }

    /// The load is being completed otherwise: the drop does nothing.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl<K: Key, M> Drop for AbandonOnDrop<'_, K, M> {
    fn drop(&mut self) {
        if self.armed {
            complete_unloaded(self.core, self.hash, self.pending, LoadResult::Abandoned);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::evict::Inline;
    use super::super::hit_mode::{Eager, Lazy};
    use super::super::insert::remove_key;
    use super::super::test_support::{
        core, count, data, insert, release, state_of, Peek, BLOCK as B,
    };
    use super::*;
    use crate::mem::meta;
    use crate::mem::State;
    use std::panic;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// A loader's error.
    #[derive(Debug)]
    struct Failed(u32);

    /// `get_or_load` with inline eviction.
    fn load<M: HitModeImpl, E: Send + Sync + 'static>(
        core: &Core<u64, M>,
        key: u64,
        loader: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<EntryPtr<u64>, Option<Arc<E>>> {
        get_or_load::<u64, M, Inline, E, _>(core, key, Some(loader))
    }

    /// Waits (at most 10 s) until `cond` holds; panics naming `what` if not.
    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn bytes_of(e: EntryPtr<u64>) -> Vec<u8> {
        e.peek_data(e.peek().data_len()).to_vec()
    }

    /// A thread whose end is waited for at most 10 s, so that a caller
    /// left waiting fails the test instead of hanging it.
    struct Timed<T>(mpsc::Receiver<std::thread::Result<T>>);

    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Timed<T> {
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(panic::catch_unwind(panic::AssertUnwindSafe(f)));
        });
        Timed(result)
    }

    impl<T> Timed<T> {
        /// The thread's result (`Err` if it panicked).
        fn join(self, what: &str) -> std::thread::Result<T> {
            self.0
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("still waiting after 10 s: {what}"))
        }
    }

    type Loaded = Result<EntryPtr<u64>, Option<Arc<Failed>>>;

    /// A load of key 1 on a thread of its own, whose loader raises
    /// `running`, waits until `ready()` and returns `result()`.
    fn first_load<M: HitModeImpl>(
        core: &Arc<Core<u64, M>>,
        running: &Arc<AtomicBool>,
        ready: impl Fn(&Core<u64, M>) -> bool + Send + 'static,
        result: impl FnOnce() -> Result<Vec<u8>, Failed> + Send + 'static,
    ) -> Timed<Loaded> {
        let (core, flag) = (Arc::clone(core), Arc::clone(running));
        let t = spawn(move || {
            load::<M, Failed>(&core, 1, || {
                flag.store(true, Ordering::SeqCst);
                wait_until("the test lets the first loader finish", || ready(&core));
                result()
            })
        });
        wait_until("the first loader runs", || running.load(Ordering::SeqCst));
        t
    }

    /// A load of key 1 on a thread of its own, whose loader counts its
    /// runs in `runs` and returns `len` bytes.
    fn second_load<M: HitModeImpl>(
        core: &Arc<Core<u64, M>>,
        runs: &Arc<AtomicUsize>,
        len: u64,
    ) -> Timed<Loaded> {
        let (core, runs) = (Arc::clone(core), Arc::clone(runs));
        spawn(move || {
            load::<M, Failed>(&core, 1, || {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(data(1, len))
            })
        })
    }

    /// The first load's loader returns once a second caller waits for it.
    fn a_waiter_came(core: &Core<u64, impl HitModeImpl>) -> bool {
        count(core, Event::LoadWait) == 1
    }

    fn single_flight<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = Arc::new(core::<M>(64 * B));
        let running = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        let first = first_load(&core, &running, a_waiter_came, || Ok(data(1, 100)));
        let second = second_load(&core, &runs, 999);
        let second = second
            .join("the waiter")
            .unwrap()
            .expect("the joined load succeeds");
        let first = first
            .join("the loader")
            .unwrap()
            .expect("the load succeeds");
        assert_eq!(
            runs.load(Ordering::SeqCst),
            0,
            "{mode:?}: single flight: one loader runs for two callers"
        );
        assert!(
            first == second,
            "{mode:?}: both callers get the one loaded entry"
        );
        assert_eq!(
            bytes_of(second),
            data(1, 100),
            "{mode:?}: the loader's bytes"
        );
        assert_eq!(
            meta::holds(first.peek().word()),
            2,
            "{mode:?}: a hold taken for each caller"
        );
        assert_eq!(
            (count(&core, Event::Load), count(&core, Event::Miss)),
            (1, 2),
            "{mode:?}: one load, two misses"
        );
        release(&core, first);
        release(&core, second);
        assert_eq!(state_of(&core, 1), Some(State::Mru), "{mode:?}: cached");
    }

    #[test]
    fn concurrent_misses_of_one_key_run_one_loader() {
        single_flight::<Eager>();
        single_flight::<Lazy>();
    }

    fn failed_load<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = Arc::new(core::<M>(64 * B));
        let running = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        let first = first_load(&core, &running, a_waiter_came, || Err(Failed(7)));
        let second = second_load(&core, &runs, 100).join("the waiter").unwrap();
        let first = first.join("the loader").unwrap();
        let (Err(Some(a)), Err(Some(b))) = (first, second) else {
            panic!("{mode:?}: a failed load fails its caller and every waiter");
        };
        assert!(
            Arc::ptr_eq(&a, &b) && a.0 == 7,
            "{mode:?}: every waiter gets the loader's own error"
        );
        assert_eq!(
            (state_of(&core, 1), core.sizes().data()),
            (None, 0),
            "{mode:?}: a failed load caches nothing"
        );
        assert_eq!(count(&core, Event::LoadFailure), 1, "{mode:?}: counted");
        let e = second_load(&core, &runs, 100)
            .join("a load after the failure")
            .unwrap()
            .expect("loads");
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "{mode:?}: the failed load is forgotten: the next miss loads"
        );
        release(&core, e);
    }

    #[test]
    fn a_failed_load_gives_every_waiter_the_error_and_caches_nothing() {
        failed_load::<Eager>();
        failed_load::<Lazy>();
    }

    fn panicking_loader<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = Arc::new(core::<M>(64 * B));
        let running = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        let first = first_load(&core, &running, a_waiter_came, || {
            panic!("a loader panicking on purpose (the test expects it)")
        });
        let second = second_load(&core, &runs, 200)
            .join("the waiter of a panicking loader")
            .unwrap()
            .expect("the waiter loads for itself");
        assert!(
            first.join("the loader").is_err(),
            "{mode:?}: setup: the loader panicked"
        );
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "{mode:?}: a panicking loader lets its waiter retry with its own loader"
        );
        assert_eq!(
            bytes_of(second),
            data(1, 200),
            "{mode:?}: the waiter gets its own loader's bytes"
        );
        release(&core, second);
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mru),
            "{mode:?}: the retried load is cached"
        );
        assert!(
            core.table
                .write(core.hash(&1))
                .per_stripe()
                .find(&1)
                .is_none(),
            "{mode:?}: no load left in flight"
        );
    }

    #[test]
    fn a_panicking_loader_lets_a_waiter_retry() {
        panicking_loader::<Eager>();
        panicking_loader::<Lazy>();
    }

    fn superseded_load_not_joined<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = Arc::new(core::<M>(64 * B));
        let running = Arc::new(AtomicBool::new(false));
        let go = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        let released = Arc::clone(&go);
        let first = first_load(
            &core,
            &running,
            move |_| released.load(Ordering::SeqCst),
            || Ok(data(1, 100)),
        );
        assert!(!remove_key(&*core, &1), "setup: nothing cached yet");
        let second = second_load(&core, &runs, 200)
            .join("a caller after the removal")
            .unwrap()
            .expect("loads");
        assert_eq!(
            (runs.load(Ordering::SeqCst), count(&core, Event::LoadWait)),
            (1, 0),
            "{mode:?}: a load superseded by a removal is not joined: the new caller loads"
        );
        go.store(true, Ordering::SeqCst);
        let first = first.join("the superseded load").unwrap().expect("loads");
        assert_eq!(
            (bytes_of(first), first.peek().state()),
            (data(1, 100), State::Anon),
            "{mode:?}: the superseded load's bytes go to its caller only"
        );
        assert_eq!(
            count(&core, Event::LoadSuperseded),
            1,
            "{mode:?}: the superseded load counted"
        );
        {
            let _pinned = crate::mem::pin();
            release(&core, first);
        }
        release(&core, second);
        let (e, len) = M::lookup(&core, core.hash(&1), &1).expect("cached");
        assert_eq!(
            e.peek_data(len),
            &data(1, 200)[..],
            "{mode:?}: the cache keeps the newer load's bytes"
        );
        release(&core, e);
        assert_eq!(core.sizes().anon, 0, "{mode:?}: no anonymous bytes left");
    }

    #[test]
    fn a_superseded_load_is_not_joined() {
        superseded_load_not_joined::<Eager>();
        superseded_load_not_joined::<Lazy>();
    }

    fn insert_during_load<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = core::<M>(64 * B);
        let loaded = load::<M, Failed>(&core, 1, || {
            insert(&core, 1, 300);
            Ok(data(1, 100))
        })
        .expect("loads");
        assert_eq!(
            (bytes_of(loaded), loaded.peek().state()),
            (data(1, 100), State::Anon),
            "{mode:?}: a load superseded by an insert returns its bytes, uncached"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.anon),
            (300, 100),
            "{mode:?}: the insert's bytes are cached, the load's are anonymous"
        );
        let _pinned = crate::mem::pin();
        release(&core, loaded);
        assert_eq!(core.sizes().anon, 0, "{mode:?}: freed with the handle");
    }

    #[test]
    fn an_insert_during_a_load_keeps_the_inserted_bytes() {
        insert_during_load::<Eager>();
        insert_during_load::<Lazy>();
    }
}
