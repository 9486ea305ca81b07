//! Read-through loads for tasks: `get_or_load`'s single flight (`load.rs`)
//! with a loader that is a future, on the same in-flight records
//! (`inflight.rs`), so that threads and tasks missing one key share one
//! load whichever of them runs it. Runtime-agnostic: a waiting task leaves
//! its waker in the record and returns `Pending`; the load's completion
//! wakes it (and the waiting threads). A second-tier hit is read on the
//! cache's I/O threads (`io_pool.rs`), never on the task's thread.
//!
//! Cancellation (the future dropped before it is done):
//! - a task running a load: the load is abandoned, as when a loader panics
//!   (`AbandonOnDrop`): its waiters are woken and retry, and the first to
//!   retry runs its own loader: the load is taken over, never left pending;
//! - a waiting task: it leaves the record, and a hold taken for it, if one
//!   was, is released ([`LoadWait`]'s drop, `inflight.rs`).

use super::core::Core;
use super::evict::Evictor;
use super::hit_mode::HitModeImpl;
use super::inflight::{LoadResult, Pending};
use super::io_pool::IoPool;
use super::key::Key;
use super::load::{finish_load, l2_origin, AbandonOnDrop};
use super::second_tier::{LoadedBytes, Presence, TierRead};
use super::stats::Event;
use crate::mem::sync::Ordering;
use crate::mem::EntryPtr;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// What a caller missing memory does, decided under the key's stripe lock.
enum Role<K> {
    /// The key was cached after all: a hold taken.
    Hit(EntryPtr<K>),
    /// Another caller is loading it: wait for that load.
    Wait(Arc<Pending<K>>),
    /// No one is: load it (the record is registered).
    Load(Arc<Pending<K>>),
}

/// The cached entry of `key` with a hold taken, or its copy in the second
/// tier (read on `io`'s threads), or the result of `loader`'s future,
/// cached (see `Cache::get_or_load_async`).
pub(crate) async fn get_or_load_async<K, M, V, E, F, Fut>(
    core: &Core<K, M>,
    io: &IoPool,
    key: K,
    loader: F,
) -> Result<EntryPtr<K>, Arc<E>>
where
    K: Key,
    M: HitModeImpl,
    V: Evictor,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, E>>,
    E: Send + Sync + 'static,
{
    let hash = core.hash(&key);
    let mut loader = Some(loader);
    loop {
        if let Some((entry, _)) = M::lookup(core, hash, &key) {
            return Ok(entry);
        }
        let role = {
            let mut stripe = core.table.write(hash);
            match stripe.find(hash, &key) {
                // SAFETY: in the table, under its stripe lock (exclusive).
                Some(e) if unsafe { e.header() }.state().is_live() => {
                    // SAFETY: live, in the table, stripe lock exclusive.
                    unsafe { M::hold_locked(core, e) };
                    Role::Hit(e)
                }
                _ => match stripe.per_stripe().find(&key) {
                    Some(p) => {
                        p.waiters.fetch_add(1, Ordering::Relaxed);
                        Role::Wait(Arc::clone(p))
                    }
                    None => {
                        let p = Arc::new(Pending::new());
                        stripe.per_stripe().push(key.clone(), Arc::clone(&p));
                        Role::Load(p)
                    }
                },
            }
        };
        let pending = match role {
            Role::Hit(e) => return Ok(e),
            Role::Wait(p) => {
                core.events.count(Event::Miss);
                core.events.count(Event::LoadWait);
                match LoadWait::new(core, hash, p).await {
                    // Our hold was taken for us when it was inserted.
                    LoadResult::Done(entry) => return Ok(entry),
                    LoadResult::Failed(err) => match err.downcast::<E>() {
                        Ok(err) => return Err(err),
                        // Another caller's loader had another error type:
                        // its error is not ours to return; load ourselves.
                        Err(_) => continue,
                    },
                    LoadResult::Abandoned => continue,
                }
            }
            Role::Load(p) => p,
        };
        core.events.count(Event::Miss);
        let loader = loader.take().expect("a caller loads at most once");
        return run_load::<K, M, V, E, F, Fut>(core, io, &key, hash, &pending, loader, false).await;
    }
}

/// Runs the load of `key` registered as `pending` (this caller's): the
/// second tier's copy, or `loader`'s bytes, inserted (read ahead or not).
async fn run_load<K, M, V, E, F, Fut>(
    core: &Core<K, M>,
    io: &IoPool,
    key: &K,
    hash: u64,
    pending: &Arc<Pending<K>>,
    loader: F,
    read_ahead: bool,
) -> Result<EntryPtr<K>, Arc<E>>
where
    K: Key,
    M: HitModeImpl,
    V: Evictor,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, E>>,
    E: Send + Sync + 'static,
{
    // Dropped (the future cancelled, or the loader panicked) before
    // the load completes: abandoned, and a waiter takes it over.
    let guard = AbandonOnDrop::new(core, hash, pending);
    let (load, l2_origin) = match read_tier(core, io, key).await {
        Some(read) => {
            let origin = l2_origin(&read);
            (Ok(read.data), origin)
        }
        None => {
            core.events.count(Event::Load);
            (loader().await.map(LoadedBytes::from), None)
        }
    };
    finish_load::<K, M, V, E>(core, key, hash, pending, guard, load, l2_origin, read_ahead)
}

/// Loads `key` ahead of any demand for it (`Cache::load_ahead_async`):
/// `None` (nothing done, nothing counted: not an access) if memory holds
/// it or another caller is loading it; else this caller's load, from the
/// second tier or `loader`, inserted as read ahead, with a hold for the
/// caller.
pub(crate) async fn load_ahead_async<K, M, V, E, F, Fut>(
    core: &Core<K, M>,
    io: &IoPool,
    key: K,
    loader: F,
) -> Result<Option<EntryPtr<K>>, Arc<E>>
where
    K: Key,
    M: HitModeImpl,
    V: Evictor,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, E>>,
    E: Send + Sync + 'static,
{
    let hash = core.hash(&key);
    let pending = {
        let mut stripe = core.table.write(hash);
        let cached = stripe
            .find(hash, &key)
            // SAFETY: in the table, under its stripe lock (exclusive).
            .is_some_and(|e| unsafe { e.header() }.state().is_live());
        if cached || stripe.per_stripe().find(&key).is_some() {
            return Ok(None);
        }
        let p = Arc::new(Pending::new());
        stripe.per_stripe().push(key.clone(), Arc::clone(&p));
        p
    };
    run_load::<K, M, V, E, F, Fut>(core, io, &key, hash, &pending, loader, true)
        .await
        .map(Some)
}

/// The second tier's copy of `key`, if it holds one: the device read runs
/// on `io`'s threads. A key the tier's index does not hold is asked of the
/// tier here (memory only, so that it counts the miss as the sync path
/// does; in the rare race where the feed writes the key in between, that
/// call reads the device on this thread).
async fn read_tier<K: Key, M>(core: &Core<K, M>, io: &IoPool, key: &K) -> Option<TierRead> {
    let tier = core.tier.as_ref()?;
    if tier.presence(key) != Presence::Cached {
        return tier.read(key);
    }
    let (tier, key) = (Arc::clone(tier), key.clone());
    io.run(move || tier.read(&key)).await.flatten()
}

/// A task waiting for another caller's load (counted in its `waiters`).
/// Dropped before the result is in, it leaves: see `inflight.rs`.
struct LoadWait<'a, K: Key, M: HitModeImpl> {
    core: &'a Core<K, M>,
    hash: u64,
    pending: Arc<Pending<K>>,
    /// Where the record keeps this task's waker.
    ticket: Option<usize>,
    /// The result was taken (with the hold taken for it, if `Done`).
    finished: bool,
}

impl<'a, K: Key, M: HitModeImpl> LoadWait<'a, K, M> {
    fn new(core: &'a Core<K, M>, hash: u64, pending: Arc<Pending<K>>) -> Self {
        LoadWait {
            core,
            hash,
            pending,
            ticket: None,
            finished: false,
        }
    }
}

impl<K: Key, M: HitModeImpl> Future for LoadWait<'_, K, M> {
    type Output = LoadResult<K>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LoadResult<K>> {
        let this = self.get_mut();
        let r = this.pending.poll_result(&mut this.ticket, cx.waker());
        if r.is_ready() {
            this.finished = true;
        }
        r
    }
}

impl<K: Key, M: HitModeImpl> Drop for LoadWait<'_, K, M> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        {
            let mut stripe = self.core.table.write(self.hash);
            if stripe.per_stripe().holds(&self.pending) {
                // Still registered: no hold will be taken for us.
                self.pending.waiters.fetch_sub(1, Ordering::Relaxed);
                drop(stripe);
                self.pending.forget_waker(self.ticket);
                return;
            }
        }
        // Forgotten: if the load is done, our hold was taken; if not yet,
        // the completer releases it.
        if let Some(entry) = self.pending.leave(self.ticket) {
            // SAFETY: the hold the load took for this waiter, which leaves
            // without taking it: given up once.
            unsafe { M::release(self.core, entry) };
        }
    }
}
