//! The hit protocol: what a hit does, what a release does, and what the
//! evictor does with an entry it finds at a list tail. Two implementations,
//! chosen by [`HitMode`] when the cache is built; the cache's code is
//! generic over them, so neither pays for the other at run time.
//!
//! - [`Eager`], the OpenZFS way (exactly ARC): the first hold on a buffer
//!   unlinks it from its sublist and the last release links it back at the
//!   head, so the lists contain exactly the unheld buffers in LRU order. The
//!   invariant: *a live entry in the table with zero holds is linked in its
//!   state's sublist*; holds leave and reach zero only under the stripe lock
//!   (held exclusively), so an evictor holding that lock and seeing an entry
//!   linked knows nobody holds it or can start to.
//! - [`Lazy`], CAR's clocks: buffers stay linked while held; a hit is a
//!   probe of the stripe with no lock and one `fetch_add` on the entry's meta
//!   word, a release one `fetch_sub`, and the evictor does the list work (it
//!   moves referenced buffers instead of evicting them). Since a hold can
//!   start at any time, every step that takes an entry out of use is one
//!   atomic step on that word that sees it unheld: the evictor's
//!   compare-exchange from "live, unheld, unreferenced" to `Dead`, a
//!   removal's swap to `Anon` that sees no hold, a release whose
//!   `fetch_sub` takes the last hold of an `Anon` entry. Whoever takes that
//!   step retires the entry (and makes it `Dead`); it is freed once no probe
//!   can still be reading it (`mem/epoch.rs`). A probe that pins an entry out
//!   of use (a stale slot) adds `HOLD + HIT` and takes both back: in an
//!   `Anon` entry (whose hits the removal cleared) the hits therefore count
//!   such probes, so a release tells the holds of handles from theirs, and
//!   such a probe never retires anything.

use super::config::HitMode;
use super::core::Core;
use super::key::Key;
use super::policy::{self, Sizes};
use super::replacement::TailRule;
use super::stats::Event;
use crate::mem as reclaim;
use crate::mem::meta::{self, HIT, HITS_FOLD_BIT, HITS_MASK, HOLD, HOLD_LIMIT};
use crate::mem::sync::Ordering;
use crate::mem::Probe;
use crate::mem::{EntryPtr, Header, State};

/// What the evictor does with a live entry at a list tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Evict it: it becomes a ghost.
    Evict,
    /// Held (lazy mode): pass over it, to the head of its list.
    Skip,
    /// Referenced (lazy mode): move it to the MFU head, not evicted.
    Promote,
    /// Read ahead, and used since (lazy mode): that use was its first, so
    /// it goes to the head of its own list (MRU), unmarked, not to MFU.
    Requeue,
    /// Hit in a later generation than it was queued in (the generations
    /// policy, MFU): queued again at the end of that generation's segment.
    Keep,
}

/// A way of recording hits. Every method that names a stripe lock expects
/// the caller to hold it as stated. The methods given an entry are `unsafe`:
/// their `# Safety` says what must keep it alive (see `mem::entry`).
pub(crate) trait HitModeImpl: Sized + Send + Sync + 'static {
    /// The builder's name for this mode.
    const MODE: HitMode;
    /// Inline eviction looks at one buffer per decision (CAR re-evaluates
    /// `|T1| >= p` after every move; ARC after every eviction).
    const ONE_CANDIDATE_PER_DECISION: bool;
    /// A ghost hit moves `p` before the replacement (ARC) or after it (CAR).
    const ADAPT_BEFORE_REPLACE: bool;

    /// The replacement's choice of list: evict from MRU?
    fn evict_from_mru(s: &Sizes, p: u64, b2_hit: bool) -> bool;

    /// A lookup: the live entry of `key` with a hold taken, and the hit
    /// counted, with the length of its data; `None` on a miss (counts
    /// nothing).
    fn lookup<K: Key>(core: &Core<K, Self>, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)>;

    /// A lookup for a read that is part of a use already counted (a reader
    /// going through one block in several reads): the live entry of `key`
    /// with a hold taken, and no access counted, so the buffer is neither
    /// promoted nor kept by it; `None` on a miss (counts nothing).
    fn lookup_same_use<K: Key>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
    ) -> Option<(EntryPtr<K>, usize)>;

    /// Takes a hold on live `e` and counts the hit.
    ///
    /// # Safety
    /// `e` is in the table, and the caller holds its stripe lock exclusively.
    unsafe fn hold_locked<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>);

    /// Drops one hold on `e` (a handle's drop). No lock held.
    ///
    /// # Safety
    /// The caller holds a hold on `e` (from `lookup`, `hold_locked` or an
    /// insert) and gives it up here: it does not use `e` after.
    unsafe fn release<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>);

    /// New entry `e` (holding the inserter's holds), whose key hashes to
    /// `hash`, has just entered the table in `state`.
    ///
    /// # Safety
    /// `e` is in the table, and the caller holds its stripe lock exclusively.
    unsafe fn installed<K: Key>(core: &Core<K, Self>, state: State, e: EntryPtr<K>, hash: u64);

    /// `old` has just been taken out of the table (removed or replaced):
    /// takes it out of its state, and frees it unless it is held (then its
    /// last release frees it).
    ///
    /// # Safety
    /// The caller took `old` out of the table under its stripe lock, which it
    /// still holds exclusively, and does not use `old` after.
    unsafe fn detach<K: Key>(core: &Core<K, Self>, old: EntryPtr<K>);

    /// The evictor found live `e` in `state` at a list tail.
    ///
    /// # Safety
    /// `e` is linked in `state`'s list; the caller holds its sublist lock,
    /// and its stripe lock exclusively.
    unsafe fn at_tail<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>, state: State) -> Tail;

    /// Frees `e`: at once when no probe runs without the lock (eager), else
    /// once no probe can be reading it (lazy).
    ///
    /// # Safety
    /// `e` is out of the table and every list, and unheld (lazy: `Dead`):
    /// the caller is its last user, retires it once and does not use it after.
    unsafe fn retire<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>);

    /// Bytes of live buffers held now (statistics; not a hot path).
    fn held_bytes<K: Key>(core: &Core<K, Self>, sizes: &Sizes) -> u64;

    /// Hits so far: (MRU hits, MFU hits).
    fn hits<K: Key>(core: &Core<K, Self>) -> (u64, u64);

    /// `core`, named by its hit mode (what a handle releases its hold to).
    fn core_ref<K: Key>(core: &Core<K, Self>) -> CoreRef<'_, K>;
}

/// A borrowed core, named by its hit mode: what a handle keeps, to release
/// its hold with that mode's code.
pub(crate) enum CoreRef<'a, K> {
    Lazy(&'a Core<K, Lazy>),
    Eager(&'a Core<K, Eager>),
}

impl<K> Clone for CoreRef<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for CoreRef<'_, K> {}

impl<K: Key> CoreRef<'_, K> {
    /// Drops one hold on `e`, an entry of this core.
    ///
    /// # Safety
    /// As [`HitModeImpl::release`]: the caller holds a hold on `e` and gives
    /// it up here.
    #[inline]
    pub(crate) unsafe fn release(self, e: EntryPtr<K>) {
        // SAFETY: this function's contract.
        unsafe {
            match self {
                CoreRef::Lazy(core) => Lazy::release(core, e),
                CoreRef::Eager(core) => Eager::release(core, e),
            }
        }
    }
}

/// Frees `e` and its anonymous bytes: the caller saw its last hold go while
/// it was `Anon` (or took it out of everything with no hold left).
///
/// # Safety
/// As [`EntryPtr::free`]: the caller is `e`'s last user.
unsafe fn free_anon<K: Key, M>(core: &Core<K, M>, e: EntryPtr<K>) {
    // SAFETY: we are its last user (this function's contract).
    let h = unsafe { e.header() };
    let idx = core.sublist_of(core.hash(&h.key));
    core.sub_bytes(idx, State::Anon, h.bytes);
    // SAFETY: per this function's contract; `h` is not used after.
    unsafe { e.free() };
}

/// Takes ghost `old` off its list and retires it: the same in both hit
/// modes.
///
/// # Safety
/// As [`HitModeImpl::detach`]: the caller took `old` out of the table under
/// its stripe lock, still held, and does not use it after.
unsafe fn detach_ghost<K: Key, M: HitModeImpl>(
    core: &Core<K, M>,
    idx: usize,
    state: State,
    old: EntryPtr<K>,
) {
    // SAFETY: out of the table under the stripe lock we hold, so nobody
    // else frees it (this function's contract).
    let h = unsafe { old.header() };
    core.list(state).remove(h, core.hash(&h.key));
    core.sub_bytes(idx, state, h.bytes);
    // SAFETY: out of the table and now its list. Ghosts are never held (a
    // lazy probe that pins one lets go at once, and `retire` waits for such
    // probes); the caller does not use `old` after.
    unsafe { M::retire(core, old) };
}

/// Taking a hold found `HOLD_LIMIT` holds already: leaked handles, not a
/// workload. Aborts, as `Arc` does on overflow (an error through the log
/// first: a library does not print).
#[cold]
#[inline(never)]
pub(crate) fn too_many_holds() -> ! {
    log::error!("more than 2^23 holds on one buffer (leaked handles?): aborting");
    std::process::abort()
}

/// The OpenZFS protocol (see the module comment).
pub(crate) struct Eager;

impl HitModeImpl for Eager {
    const MODE: HitMode = HitMode::Eager;
    const ONE_CANDIDATE_PER_DECISION: bool = false;
    const ADAPT_BEFORE_REPLACE: bool = true;

    fn evict_from_mru(s: &Sizes, p: u64, b2_hit: bool) -> bool {
        policy::evict_from_mru(s, p, b2_hit)
    }

    /// Eager hit: stripe lock exclusive (a first hold changes list
    /// membership), then the hold and the access.
    fn lookup<K: Key>(core: &Core<K, Self>, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        Self::lookup_locked(core, hash, key, true)
    }

    /// Eager: the hold alone (the buffer leaves its list at its first hold,
    /// as any hold's), no change of state or read-ahead mark.
    fn lookup_same_use<K: Key>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
    ) -> Option<(EntryPtr<K>, usize)> {
        Self::lookup_locked(core, hash, key, false)
    }

    unsafe fn hold_locked<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: in the table, under the stripe lock the caller holds.
        let h = unsafe { e.header() };
        let hash = core.hash(&h.key);
        let state = Self::take_hold(core, h, hash);
        Self::count_access(core, h, hash, state);
    }

    #[inline(never)]
    unsafe fn release<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: our hold keeps it alive until we drop it, below: when that
        // is not the last hold, we use `h` no more; when it is, we hold the
        // stripe lock, under which the entry is in the table (then alive
        // while we hold that lock) or `Anon` (then we are its last user).
        let h = unsafe { e.header() };
        let mut cur = h.meta.load(Ordering::Relaxed);
        while meta::holds(cur) > 1 {
            match h.meta.compare_exchange_weak(
                cur,
                cur - HOLD,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
        // Possibly the last hold: 1 -> 0 happens only under the stripe lock.
        let hash = core.hash(&h.key);
        let _stripe = core.table.write(hash);
        let prev = h.meta.fetch_sub(HOLD, Ordering::AcqRel);
        if meta::holds(prev) != 1 {
            return;
        }
        match meta::state(prev) {
            s @ (State::Mru | State::Mfu) => {
                // SAFETY: in the table (live), under the stripe lock we
                // hold; it leaves its list before it is freed (`detach`,
                // the eviction walk).
                unsafe { core.list(s).push_head(e, hash) };
            }
            // SAFETY: out of the table and every list (Anon), and this was
            // its last hold; new holds are only taken on entries in the
            // table.
            State::Anon => unsafe { free_anon(core, e) },
            s => unreachable!("a held entry in state {s:?}"),
        }
    }

    unsafe fn installed<K: Key>(_: &Core<K, Self>, _: State, _: EntryPtr<K>, _: u64) {
        // Born held (the inserter's hold): off the lists until released.
    }

    unsafe fn detach<K: Key>(core: &Core<K, Self>, old: EntryPtr<K>) {
        // SAFETY: just out of the table under the stripe lock the caller
        // holds: only we (now) or its last release (under that lock) free it.
        let h = unsafe { old.header() };
        let hash = core.hash(&h.key);
        let idx = core.sublist_of(hash);
        let state = h.state();
        match state {
            State::Mru | State::Mfu => {
                core.events.count(Event::Remove);
                if meta::holds(h.word()) == 0 {
                    core.list(state).remove(h, hash);
                    core.sub_bytes(idx, state, h.bytes);
                    // SAFETY: unheld (and no hold can start: it is out of the
                    // table, under the stripe lock), now on no list; `h` is
                    // not used after.
                    unsafe { old.free() };
                } else {
                    h.set_state(State::Anon);
                    core.move_bytes(idx, state, State::Anon, h.bytes);
                }
            }
            // SAFETY: this function's contract, passed on.
            State::MruGhost | State::MfuGhost => unsafe { detach_ghost(core, idx, state, old) },
            State::Anon | State::Dead => unreachable!("an entry out of use in the table"),
        }
    }

    unsafe fn at_tail<K: Key>(_: &Core<K, Self>, e: EntryPtr<K>, _: State) -> Tail {
        debug_assert_eq!(
            // SAFETY: linked, under its sublist lock (the contract).
            meta::holds(unsafe { e.header() }.word()),
            0,
            "a linked eager entry is unheld"
        );
        Tail::Evict
    }

    unsafe fn retire<K: Key>(_: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: per the trait: out of everything and unheld, and eager
        // lookups take the stripe lock, which our caller held when it took
        // `e` out, so no lookup can still be looking at it.
        unsafe { e.free() };
    }

    fn held_bytes<K: Key>(core: &Core<K, Self>, s: &Sizes) -> u64 {
        let (mru_list, _) = core.list(State::Mru).totals();
        let (mfu_list, _) = core.list(State::Mfu).totals();
        (s.mru + s.mfu).saturating_sub(mru_list + mfu_list)
    }

    fn hits<K: Key>(core: &Core<K, Self>) -> (u64, u64) {
        (
            core.events.get(Event::MruHit),
            core.events.get(Event::MfuHit),
        )
    }

    #[inline]
    fn core_ref<K: Key>(core: &Core<K, Self>) -> CoreRef<'_, K> {
        CoreRef::Eager(core)
    }
}

impl Eager {
    /// The live entry of `key` with a hold taken, under its stripe lock
    /// (exclusive), and the access counted if `access` (else a hold alone:
    /// `lookup_same_use`).
    fn lookup_locked<K: Key>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
        access: bool,
    ) -> Option<(EntryPtr<K>, usize)> {
        let stripe = core.table.write(hash);
        let (e, len) = stripe.find_with_len(hash, key)?;
        // SAFETY: in the table, and we hold its stripe lock (exclusive).
        let h = unsafe { e.header() };
        if !h.state().is_live() {
            return None;
        }
        let state = Self::take_hold(core, h, hash);
        if access {
            Self::count_access(core, h, hash, state);
        }
        Some((e, len))
    }

    /// Takes a hold on live `h` (its stripe lock held exclusively): at its
    /// first hold the buffer leaves its list (see the module comment).
    /// Returns its state.
    fn take_hold<K>(core: &Core<K, Self>, h: &Header<K>, hash: u64) -> State {
        let prev = h.meta.fetch_add(HOLD, Ordering::Acquire);
        if meta::holds(prev) >= HOLD_LIMIT {
            too_many_holds();
        }
        let state = meta::state(prev);
        if meta::holds(prev) == 0 {
            core.list(state).remove(h, hash);
        }
        state
    }

    /// An access to held `h`, found in `state`: the hit counted, and an MRU
    /// buffer's second access promotes it (its first use, if read ahead).
    fn count_access<K>(core: &Core<K, Self>, h: &Header<K>, hash: u64, state: State) {
        if state == State::Mru && h.read_ahead() {
            // The first use of a buffer read ahead (OpenZFS: a demand hit
            // on a prefetched buffer clears the flag and stays in MRU; the
            // last release links it back at the MRU head).
            core.events.count(Event::MruHit);
            core.events.count(Event::ReadAheadHit);
            h.set_read_ahead(false);
        } else if state == State::Mru {
            core.events.count(Event::MruHit);
            // Second access: MRU -> MFU (the paper's case I). The entry is
            // held, so it is on no list: only the state and the bytes move.
            h.set_state(State::Mfu);
            core.move_bytes(core.sublist_of(hash), State::Mru, State::Mfu, h.bytes);
        } else {
            core.events.count(Event::MfuHit);
        }
    }
}

/// CAR's protocol (see the module comment and `mem/entry.rs` for the meta word).
/// With `Policy::S3arc`, the same hits and releases; only what the evictor
/// does with the hit count differs (`s3arc_at_tail`).
pub(crate) struct Lazy;

impl Lazy {
    /// S3ARC's evictor at a list tail (`Policy::S3arc`): the hit count in
    /// the meta word is the buffer's frequency. In MRU, [`S3ARC_PROMOTE_HITS`]
    /// or more move it to MFU with the count cleared, fewer let it be
    /// evicted (its hit folded into the statistics); in MFU, hits give it
    /// another turn with `min(hits, S3ARC_MAX_FREQ) - 1` left in the word
    /// (the rest folded) and mark it reused in MFU (its MFU ghost will be
    /// readmitted to MFU), none let it be evicted. A held buffer that would
    /// be evicted is passed over, as in CAR. Every change is one atomic
    /// step on the word, racing with hits as CAR's are.
    ///
    /// [`S3ARC_PROMOTE_HITS`]: policy::S3ARC_PROMOTE_HITS
    fn s3arc_at_tail<K>(core: &Core<K, Self>, h: &Header<K>, state: State) -> Tail {
        let mut w = h.word();
        loop {
            let hits = meta::hits(w);
            if state == State::Mru && hits >= policy::S3ARC_PROMOTE_HITS {
                let prev = h.meta.fetch_and(!HITS_MASK, Ordering::AcqRel);
                Self::count_hits(core, state, meta::hits(prev));
                return Tail::Promote;
            }
            if state == State::Mfu && hits != 0 {
                let kept = hits.min(policy::S3ARC_MAX_FREQ) - 1;
                match h.meta.compare_exchange(
                    w,
                    (w & !HITS_MASK) | (kept * HIT),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        Self::count_hits(core, state, hits - kept);
                        h.mark_reused_in_mfu();
                        return Tail::Promote;
                    }
                    Err(now) => {
                        w = now;
                        continue;
                    }
                }
            }
            if meta::holds(w) != 0 {
                return Tail::Skip;
            }
            match h.meta.compare_exchange(
                w,
                meta::with_state(w, State::Dead),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // Unheld, so its hits are handles' (an MRU buffer's one
                    // hit): counted now that it leaves the lists.
                    Self::count_hits(core, state, hits);
                    return Tail::Evict;
                }
                Err(now) => w = now,
            }
        }
    }

    /// The evictor at the MRU tail found `h` marked read ahead (ARC, CAR
    /// and S3ARC alike). Its first hit since it was inserted was its first
    /// demand use, and a second hit a second use, as in eager mode (where
    /// the first hit clears the mark and the next promotes). So with one
    /// hit it is requeued at the MRU head, unmarked, where a later hit
    /// promotes it as any MRU buffer's; with two or more it goes to MFU now
    /// (read ahead, then read by two queries before eviction reached it:
    /// read again, not once). A reader that goes through one block in
    /// several reads must count one access per use, or one use counts as
    /// several: the rest of the way with `lookup_same_use`.
    /// The hits are folded into the statistics and the mark cleared either
    /// way. With no hit, `None`: the buffer is unused, and the caller's
    /// rules evict it (it is at the tail; its ghost keeps the mark).
    fn read_ahead_at_tail<K>(core: &Core<K, Self>, h: &Header<K>) -> Option<Tail> {
        if meta::hits(h.word()) == 0 {
            return None;
        }
        let prev = h.meta.fetch_and(!HITS_MASK, Ordering::AcqRel);
        let hits = meta::hits(prev);
        Self::count_hits(core, State::Mru, hits);
        core.events.count(Event::ReadAheadHit);
        h.set_read_ahead(false);
        Some(if hits >= 2 {
            Tail::Promote
        } else {
            Tail::Requeue
        })
    }

    /// Adds `n` hits counted while in `state` to the statistics.
    fn count_hits<K>(core: &Core<K, Self>, state: State, n: u64) {
        if n != 0 {
            let ev = if state == State::Mru {
                Event::MruHit
            } else {
                Event::MfuHit
            };
            core.events.add(ev, n);
        }
    }

    /// A probe that pinned `h` and found it out of use (a ghost, or an
    /// entry on its way out) lets go: it takes back its `HOLD + HIT`, and
    /// never retires the entry (see the module comment; it is pinned, so
    /// whoever retires it meanwhile does not free it under it).
    #[inline]
    fn let_go<K>(h: &Header<K>) {
        h.meta.fetch_sub(HOLD + HIT, Ordering::Release);
    }

    /// A handle's hold on `Anon` `e` went (its `fetch_sub` returned `prev`):
    /// if it was the last one, retires `e`.
    ///
    /// # Safety
    /// The caller just gave up a hold it had on `e` (a handle's, not a
    /// probe's `let_go`), and does not use `e` after.
    #[cold]
    #[inline(never)]
    unsafe fn released_anon<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>, prev: u64) {
        // The hits of an `Anon` entry count the probes that pinned it since
        // it left the table (`detach` cleared the others), each holding
        // `HOLD + HIT` until it lets go: the rest of the holds are handles'.
        if meta::holds(prev) - meta::hits(prev) == 1 {
            // SAFETY: its last handle's hold went with our `fetch_sub`, and
            // only that release retires it (the probes never do).
            unsafe { Self::retire_unheld(core, e) };
        }
    }

    /// Retires `e`, `Anon` with no handle's hold left: makes it `Dead` and
    /// hands it to the garbage bin.
    ///
    /// # Safety
    /// The caller is the one that saw the last handle's hold on `e` go (the
    /// release that took it, or `detach` finding none), so the only one to
    /// retire it; it does not use `e` after.
    unsafe fn retire_unheld<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: nobody else retires it (this function's contract), so it
        // is alive until we do.
        let h = unsafe { e.header() };
        // AcqRel: after the last holders' reads of its bytes (their Release
        // `fetch_sub`s), so before the free; pinned probes may still add and
        // take back their holds meanwhile.
        let _ = h
            .meta
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(meta::with_state(w, State::Dead))
            });
        core.sub_bytes(core.sublist_of(core.hash(&h.key)), State::Anon, h.bytes);
        // SAFETY: out of the table and every list, no handle holds it, and
        // we alone retire it; `h` is not used after.
        unsafe { core.retire(e) };
    }

    /// The lazy lookup (see `lookup`); `ACCESS`: the hit is an access the
    /// policy sees (the generations policy notes its generation and moves
    /// an MRU buffer), not a read within a use already counted.
    #[inline]
    fn probe<K: Key, const ACCESS: bool>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
    ) -> Option<(EntryPtr<K>, usize)> {
        let stripe = core.table.stripe(hash);
        let Some(pinned) = reclaim::try_pin() else {
            return Self::lookup_locked::<K, ACCESS>(core, hash, key);
        };
        for _ in 0..2 {
            let Some(seq) = stripe.begin_probe() else {
                break;
            };
            let Probe::Found(e) = stripe.probe(&pinned, hash, key) else {
                if stripe.unchanged(seq) {
                    return None;
                }
                continue;
            };
            // SAFETY: pinned, and the probe found it in the table: it is
            // freed only after a grace period that waits for us.
            let h = unsafe { e.header() };
            // Acquire: pairs with the Release of the stores that made the
            // entry live (and of the last release before a reuse of its
            // word's state); the entry's memory is ours to read while we
            // are pinned.
            let prev = h.meta.fetch_add(HOLD + HIT, Ordering::Acquire);
            if meta::state(prev).is_live() {
                if prev >= HITS_FOLD_BIT || meta::holds(prev) >= HOLD_LIMIT {
                    Self::hit_slow(core, h, prev);
                }
                // Live when pinned: it was in the table when the probe read
                // its slot, and a hold keeps it from being freed.
                let len = h.buffer_len();
                if ACCESS {
                    Self::note_hit(core, e, h, prev, len);
                }
                return Some((e, len));
            }
            // A ghost, or an entry on its way out: let go; a ghost with the
            // stripe unchanged is a miss, anything else is looked up again.
            Self::let_go(h);
            if meta::state(prev).is_ghost() && stripe.unchanged(seq) {
                return None;
            }
        }
        Self::lookup_locked::<K, ACCESS>(core, hash, key)
    }

    /// What a hit does beyond its hold under the generations policy
    /// (under the others: a load of `Core::generations` and one branch). A
    /// first hit in this generation notes it, with a plain
    /// store, and ticks the clock on this thread's own line; a hit on an MRU
    /// buffer moves it to MFU.
    #[inline]
    fn note_hit<K: Key>(
        core: &Core<K, Self>,
        e: EntryPtr<K>,
        h: &Header<K>,
        prev: u64,
        len: usize,
    ) {
        let Some(clock) = &core.generations else {
            return;
        };
        let now = clock.current() as u8;
        if h.noted_generation() != now {
            h.note_generation(now);
            clock.tick(len as u64);
        }
        if meta::state(prev) == State::Mru {
            Self::promote_hit(core, e);
        }
    }

    /// The generations policy: a hit on MRU buffer `e` (held by the hitter)
    /// moves it to MFU now, as ARC's case I does, if its stripe lock is
    /// free (else the evictor promotes it at MRU's tail). A buffer read
    /// ahead stays: this use is its first (`read_ahead_at_tail`).
    #[cold]
    #[inline(never)]
    fn promote_hit<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: the hitter's hold keeps it alive.
        let h = unsafe { e.header() };
        let hash = core.hash(&h.key);
        let Some(_stripe) = core.table.stripe(hash).try_write() else {
            return;
        };
        // Under the stripe lock, its state moves no more; live entries are
        // in the table and linked in their state's list.
        if h.state() != State::Mru || h.read_ahead() {
            return;
        }
        core.list(State::Mru).remove(h, hash);
        let prev = h.meta.fetch_and(!HITS_MASK, Ordering::AcqRel);
        Self::count_hits(core, State::Mru, meta::hits(prev));
        h.set_state(State::Mfu);
        // SAFETY: in the table, under the stripe lock we hold; it leaves its
        // list before it is freed (`detach`, the eviction walk).
        unsafe { core.push_mfu(e, hash) };
        core.move_bytes(core.sublist_of(hash), State::Mru, State::Mfu, h.bytes);
    }

    /// The lookup under the stripe's shared lock: when probes without it
    /// kept meeting writers.
    #[cold]
    #[inline(never)]
    fn lookup_locked<K: Key, const ACCESS: bool>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
    ) -> Option<(EntryPtr<K>, usize)> {
        let stripe = core.table.stripe(hash).read();
        let (e, len) = stripe.find_with_len(hash, key)?;
        // SAFETY: in the table, and we hold its stripe lock (shared).
        let h = unsafe { e.header() };
        let prev = h.meta.fetch_add(HOLD + HIT, Ordering::Acquire);
        if !meta::state(prev).is_live() {
            // A ghost (entries out of use are out of the table).
            Self::let_go(h);
            return None;
        }
        if prev >= HITS_FOLD_BIT || meta::holds(prev) >= HOLD_LIMIT {
            Self::hit_slow(core, h, prev);
        }
        drop(stripe);
        if ACCESS {
            Self::note_hit(core, e, h, prev, len);
        }
        Some((e, len))
    }

    /// The rare cases of a hit: too many holds, or a hit count that reached
    /// 2^36 (bit 63): whoever clears that bit moves 2^36 hits to the
    /// statistics (counted in the state the word had; a state change racing
    /// with it only moves these hits between MRU and MFU).
    #[cold]
    #[inline(never)]
    fn hit_slow<K>(core: &Core<K, Self>, h: &Header<K>, prev: u64) {
        if meta::holds(prev) >= HOLD_LIMIT {
            too_many_holds();
        }
        let before = h.meta.fetch_and(!HITS_FOLD_BIT, Ordering::Relaxed);
        if before & HITS_FOLD_BIT != 0 {
            Self::count_hits(core, meta::state(before), meta::hits(HITS_FOLD_BIT));
        }
    }
}

impl HitModeImpl for Lazy {
    const MODE: HitMode = HitMode::Lazy;
    const ONE_CANDIDATE_PER_DECISION: bool = true;
    const ADAPT_BEFORE_REPLACE: bool = false;

    fn evict_from_mru(s: &Sizes, p: u64, _b2_hit: bool) -> bool {
        policy::car_evict_from_mru(s, p)
    }

    /// The lazy hit path: `get` to the atomic.
    ///
    /// Cost of a `get` hit plus its handle's drop, in atomic read-modify-
    /// writes and the cache lines they write:
    ///
    /// 1. the hold, the reference bit and the hit count: one `lock xadd` of
    ///    `HOLD + HIT` on the entry's meta word, the line that also holds the
    ///    key compared just before and the first data bytes;
    /// 2. the handle's drop: one `lock xadd` (subtracting `HOLD`) on the
    ///    same line.
    ///
    /// Two RMWs on one line, both the entry's own: no lock (the probe reads
    /// the stripe's sequence count and slots, and writes nothing shared), no
    /// statistics counter (the hit is counted by step 1), no fence (pinning
    /// is one plain store to this thread's own record, `mem/epoch.rs`). Reads:
    /// this thread's record, the stripe line (sequence count, slot array,
    /// mask), the slot (one word: tag, entry address), the entry line (key,
    /// meta word, length).
    #[inline]
    fn lookup<K: Key>(core: &Core<K, Self>, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        Self::probe::<K, true>(core, hash, key)
    }

    /// Lazy: a lookup, then its hit taken back (a second atomic, only on
    /// this path). Taken back from a live entry's count only: an `Anon`
    /// entry's hits count probes (module comment), and a count the evictor
    /// folded meanwhile has already gone to the statistics (the hit then
    /// counted: rare, and only ever one). Under the generations policy it
    /// notes no generation and moves nothing.
    fn lookup_same_use<K: Key>(
        core: &Core<K, Self>,
        hash: u64,
        key: &K,
    ) -> Option<(EntryPtr<K>, usize)> {
        let (e, len) = Self::probe::<K, false>(core, hash, key)?;
        // SAFETY: the lookup's hold keeps it alive.
        let h = unsafe { e.header() };
        let _ = h
            .meta
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                (meta::state(w).is_live() && meta::hits(w) != 0).then_some(w - HIT)
            });
        Some((e, len))
    }

    unsafe fn hold_locked<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: in the table, under the stripe lock the caller holds.
        let h = unsafe { e.header() };
        let prev = h.meta.fetch_add(HOLD + HIT, Ordering::Relaxed);
        if prev >= HITS_FOLD_BIT || meta::holds(prev) >= HOLD_LIMIT {
            Self::hit_slow(core, h, prev);
        }
        if let Some(clock) = &core.generations {
            // The generations policy: the hit's generation is noted (an MRU
            // buffer is promoted by the evictor, whose walk sees the hit:
            // the caller holds the stripe lock a move would take).
            let now = clock.current() as u8;
            if h.noted_generation() != now {
                h.note_generation(now);
                clock.tick(h.bytes);
            }
        }
    }

    /// The other half of the hit path: one `fetch_sub`, no lock. Release
    /// ordering so that whoever frees the entry (Acquire on the same word)
    /// comes after our reads of its bytes.
    #[inline]
    unsafe fn release<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: the caller's hold keeps it alive until this `fetch_sub`.
        let prev = unsafe { e.header() }
            .meta
            .fetch_sub(HOLD, Ordering::Release);
        if meta::state(prev) == State::Anon {
            // SAFETY: the caller's hold, just given up (the contract).
            unsafe { Self::released_anon(core, e, prev) };
        }
    }

    unsafe fn installed<K: Key>(core: &Core<K, Self>, state: State, e: EntryPtr<K>, hash: u64) {
        // Buffers are linked even while held (under the generations policy
        // a new MFU buffer in the segment of the generation its insert
        // noted in it).
        // SAFETY: in the table, under the stripe lock the caller holds; it
        // leaves its list before it is freed (`detach`, the eviction walk).
        unsafe {
            match state {
                State::Mfu => core.push_mfu(e, hash),
                _ => core.list(state).push_head(e, hash),
            }
        };
    }

    unsafe fn detach<K: Key>(core: &Core<K, Self>, old: EntryPtr<K>) {
        // SAFETY: out of the table under the stripe lock the caller holds,
        // and live or a ghost, so nobody else retires it until our swap to
        // `Anon` below (releases retire `Anon` entries only); after it, we
        // use it only if it was unheld (`retire_unheld`).
        let h = unsafe { old.header() };
        let hash = core.hash(&h.key);
        let idx = core.sublist_of(hash);
        let state = h.state();
        match state {
            State::Mru | State::Mfu => {
                core.events.count(Event::Remove);
                core.list(state).remove(h, hash);
                core.move_bytes(idx, state, State::Anon, h.bytes);
                // One step: to Anon, hits folded out. Releases, and holds of
                // probes that read its slot before it left, may race with it.
                let prev = match h
                    .meta
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                        Some(meta::with_state(w & !HITS_MASK, State::Anon))
                    }) {
                    Ok(w) | Err(w) => w,
                };
                Self::count_hits(core, state, meta::hits(prev));
                if meta::holds(prev) == 0 {
                    // Unheld (a probe that pins it from now on lets go).
                    // SAFETY: we made it `Anon` and saw no hold: no release
                    // will retire it, and probes never do.
                    unsafe { Self::retire_unheld(core, old) };
                }
            }
            // SAFETY: this function's contract, passed on.
            State::MruGhost | State::MfuGhost => unsafe { detach_ghost(core, idx, state, old) },
            State::Anon | State::Dead => unreachable!("an entry out of use in the table"),
        }
    }

    unsafe fn at_tail<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>, state: State) -> Tail {
        // SAFETY: linked, under its sublist lock (the contract); and only
        // our compare-exchange below can make it `Dead` (to be retired).
        let h = unsafe { e.header() };
        if state == State::Mru && h.read_ahead() {
            if let Some(tail) = Self::read_ahead_at_tail(core, h) {
                return tail;
            }
        }
        let rule = core.replacement.tail_rule();
        if rule == TailRule::Frequency {
            return Self::s3arc_at_tail(core, h, state);
        }
        // The generations policy reads an MFU buffer's generations, not its
        // hits: a hit there earns no move by itself.
        let generations = rule == TailRule::Generations;
        // Holds and hits can start at any time (probes take no lock), so
        // the eviction is a compare-exchange from the word that says
        // "unheld, unreferenced" to `Dead`; Acquire orders the reads of
        // released holds before the free. Every look after a failed one
        // starts again from the hits. (The generations policy: a hit's
        // noted generation is stored before its release, whose Release that
        // Acquire reads, so a look after it sees the generation too.)
        let mut w = h.word();
        loop {
            if meta::hits(w) != 0 {
                // Referenced: clear the bit (fold its count into the
                // statistics) and move it (CAR: T1 -> T2 head, T2 -> T2
                // head; generations: T1 -> T2, a hit that could not move it).
                let prev = h.meta.fetch_and(!HITS_MASK, Ordering::AcqRel);
                Self::count_hits(core, state, meta::hits(prev));
                if !generations || state == State::Mru {
                    return Tail::Promote;
                }
                w = prev & !HITS_MASK;
            }
            if generations && state == State::Mfu && h.noted_generation() != h.queued_generation() {
                // Hit in a later generation than it was queued in.
                return Tail::Keep;
            }
            if meta::holds(w) != 0 {
                return Tail::Skip;
            }
            match h.meta.compare_exchange(
                w,
                meta::with_state(w, State::Dead),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Tail::Evict,
                Err(now) => w = now,
            }
        }
    }

    unsafe fn retire<K: Key>(core: &Core<K, Self>, e: EntryPtr<K>) {
        // SAFETY: this function's contract (`Core::retire`'s).
        unsafe { core.retire(e) };
    }

    fn held_bytes<K: Key>(core: &Core<K, Self>, _: &Sizes) -> u64 {
        // Held buffers stay linked: count them on the lists (O(entries), one
        // sublist lock at a time, so no cost on the hit path).
        let mut held = 0;
        for st in [State::Mru, State::Mfu] {
            core.list(st).for_each(|e| {
                if meta::holds(e.word()) != 0 {
                    held += e.bytes;
                }
            });
        }
        held
    }

    fn hits<K: Key>(core: &Core<K, Self>) -> (u64, u64) {
        // Folded counts plus those still in the words of linked entries.
        let (mut mru, mut mfu) = (
            core.events.get(Event::MruHit),
            core.events.get(Event::MfuHit),
        );
        core.list(State::Mru)
            .for_each(|e| mru += meta::hits(e.word()));
        core.list(State::Mfu)
            .for_each(|e| mfu += meta::hits(e.word()));
        (mru, mfu)
    }

    #[inline]
    fn core_ref<K: Key>(core: &Core<K, Self>) -> CoreRef<'_, K> {
        CoreRef::Lazy(core)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::insert::remove_key;
    use super::super::test_support::{
        at_tail, core, count, hit, insert, insert_held, keys, lookup, release, s3arc_core,
        state_of, Peek, BLOCK as B,
    };
    use super::*;

    #[test]
    fn eager_first_hold_unlinks_and_last_release_relinks_at_the_head() {
        let core = core::<Eager>(16 * B);
        insert(&core, 1, B);
        insert(&core, 2, B);
        assert!(hit(&core, 1) && hit(&core, 2), "setup: both cached");
        assert_eq!(keys(&core, State::Mfu), [2, 1], "setup: MFU in hit order");
        let first = lookup(&core, 1).expect("cached");
        assert_eq!(
            keys(&core, State::Mfu),
            [2],
            "eager: a first hold unlinks the buffer from its sublist"
        );
        let second = lookup(&core, 1).expect("cached");
        release(&core, second);
        assert_eq!(
            keys(&core, State::Mfu),
            [2],
            "eager: a release that is not the last leaves the buffer unlinked"
        );
        release(&core, first);
        assert_eq!(
            keys(&core, State::Mfu),
            [1, 2],
            "eager: the last release links the buffer back at the head"
        );
        assert_eq!(
            meta::holds(first.peek().word()),
            0,
            "eager: every hold released"
        );
    }

    #[test]
    fn eager_mru_hit_moves_the_buffer_and_its_bytes_to_mfu() {
        let core = core::<Eager>(16 * B);
        insert(&core, 1, 100);
        insert(&core, 2, 300);
        let s = core.sizes();
        assert_eq!((s.mru, s.mfu), (400, 0), "setup: both in MRU");
        let e = lookup(&core, 1).expect("cached");
        assert_eq!(
            e.peek().state(),
            State::Mfu,
            "eager: an MRU hit moves the buffer to MFU"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.mfu, s.anon),
            (300, 100, 0),
            "eager: an MRU hit moves the buffer's bytes from MRU to MFU"
        );
        assert_eq!(
            count(&core, Event::MruHit),
            1,
            "eager: counted as an MRU hit"
        );
        release(&core, e);
        assert_eq!(keys(&core, State::Mfu), [1], "eager: released into MFU");
        assert_eq!(
            keys(&core, State::Mru),
            [2],
            "eager: the other buffer stays in MRU"
        );
        assert!(hit(&core, 1));
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.mfu),
            (300, 100),
            "eager: an MFU hit moves no bytes"
        );
        assert_eq!(
            Eager::hits(&core),
            (1, 1),
            "eager: one MRU hit, then one MFU hit"
        );
    }

    #[test]
    fn eager_releasing_a_removed_entry_frees_it_and_its_bytes() {
        let core = core::<Eager>(16 * B);
        let held = insert_held(&core, 1, 500);
        insert(&core, 2, 700);
        assert!(remove_key(&core, &1), "a cached buffer was removed");
        assert_eq!(state_of(&core, 1), None, "eager: removed from the table");
        assert_eq!(
            held.peek().state(),
            State::Anon,
            "eager: a removed buffer still held becomes Anon"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.anon),
            (700, 500),
            "eager: a removed held buffer's bytes move to anon"
        );
        release(&core, held);
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.anon),
            (700, 0),
            "eager: the last release of an Anon buffer frees its bytes"
        );
        assert!(remove_key(&core, &2));
        assert!(
            keys(&core, State::Mru).is_empty(),
            "eager: removing an unheld buffer unlinks it"
        );
        assert_eq!(
            core.sizes().data(),
            0,
            "eager: removing an unheld buffer frees its bytes at once"
        );
        assert_eq!(
            count(&core, Event::Remove),
            2,
            "eager: both removals counted"
        );
    }

    #[test]
    fn lazy_hit_sets_the_reference_bit_and_the_hold_in_one_word() {
        let core = core::<Lazy>(16 * B);
        let e = insert_held(&core, 1, B);
        release(&core, e);
        let w = e.peek().word();
        assert_eq!(
            (meta::holds(w), meta::hits(w)),
            (0, 0),
            "lazy: an insert leaves the buffer unreferenced"
        );
        let h = lookup(&core, 1).expect("cached");
        assert!(h == e, "lazy: the hit finds the inserted entry");
        let w = e.peek().word();
        assert_eq!(
            (meta::holds(w), meta::hits(w), meta::state(w)),
            (1, 1, State::Mru),
            "lazy: a hit takes a hold and sets the reference bit in the meta word, state unchanged"
        );
        assert_eq!(
            keys(&core, State::Mru),
            [1],
            "lazy: a held buffer stays linked"
        );
        assert_eq!(
            count(&core, Event::MruHit),
            0,
            "lazy: a hit writes no statistics counter"
        );
        release(&core, h);
        let w = e.peek().word();
        assert_eq!(
            (meta::holds(w), meta::hits(w)),
            (0, 1),
            "lazy: a release drops the hold and keeps the reference bit"
        );
        assert_eq!(
            Lazy::hits(&core),
            (1, 0),
            "lazy: hits still in the words are counted by hits()"
        );
    }

    #[test]
    fn lazy_at_tail_promotes_referenced_skips_held_and_evicts_the_rest() {
        let core = core::<Lazy>(16 * B);
        let entry = |state: State, holds: u64, hits: u64| {
            let e = EntryPtr::new(7u64, &[0; 10], state, holds);
            e.peek().meta.fetch_add(hits * HIT, Ordering::Relaxed);
            e
        };
        let referenced = entry(State::Mru, 0, 3);
        assert_eq!(
            at_tail(&core, referenced, State::Mru),
            Tail::Promote,
            "lazy: a referenced buffer at the tail is promoted"
        );
        assert_eq!(
            meta::hits(referenced.peek().word()),
            0,
            "lazy: promotion clears the reference bit"
        );
        assert_eq!(
            count(&core, Event::MruHit),
            3,
            "lazy: promotion folds the hits into the statistics of the buffer's state"
        );
        let held_referenced = entry(State::Mfu, 1, 2);
        assert_eq!(
            at_tail(&core, held_referenced, State::Mfu),
            Tail::Promote,
            "lazy: the reference bit comes before the hold"
        );
        assert_eq!(
            (
                count(&core, Event::MfuHit),
                meta::holds(held_referenced.peek().word())
            ),
            (2, 1),
            "lazy: MFU hits folded as MFU hits, the hold kept"
        );
        let held = entry(State::Mru, 2, 0);
        let before = held.peek().word();
        assert_eq!(
            at_tail(&core, held, State::Mru),
            Tail::Skip,
            "lazy: a held, unreferenced buffer is skipped"
        );
        assert_eq!(
            held.peek().word(),
            before,
            "lazy: a skip changes nothing in the word"
        );
        let idle = entry(State::Mru, 0, 0);
        assert_eq!(
            at_tail(&core, idle, State::Mru),
            Tail::Evict,
            "lazy: an unheld, unreferenced buffer is evicted"
        );
        assert_eq!(
            idle.peek().state(),
            State::Dead,
            "lazy: the eviction decision makes the entry Dead in the same step"
        );
        for e in [referenced, held_referenced, held, idle] {
            // SAFETY: made above, never in the table or a list, and no
            // other thread has seen it.
            unsafe { e.free() };
        }
    }

    #[test]
    fn lazy_removal_of_a_held_entry_makes_it_anon_and_the_last_release_retires_it() {
        let core = core::<Lazy>(16 * B);
        let first = insert_held(&core, 1, 500);
        let second = lookup(&core, 1).expect("cached");
        assert!(remove_key(&core, &1), "a cached buffer was removed");
        assert_eq!(
            first.peek().state(),
            State::Anon,
            "lazy: a removed buffer still held becomes Anon"
        );
        assert!(
            keys(&core, State::Mru).is_empty(),
            "lazy: removal unlinks the buffer"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.anon),
            (0, 500),
            "lazy: a removed held buffer's bytes move to anon"
        );
        assert_eq!(
            (count(&core, Event::MruHit), meta::hits(first.peek().word())),
            (1, 0),
            "lazy: removal folds the entry's hits into the statistics"
        );
        release(&core, second);
        assert_eq!(
            (first.peek().state(), core.sizes().anon),
            (State::Anon, 500),
            "lazy: a release that is not the last leaves the Anon buffer"
        );
        // Pinned: the retired entry's memory stays while we look at it.
        let pinned = crate::mem::pin();
        release(&core, first);
        assert_eq!(
            first.peek().state(),
            State::Dead,
            "lazy: the last release of an Anon buffer retires it (Dead)"
        );
        assert_eq!(
            core.sizes().anon,
            0,
            "lazy: the last release of an Anon buffer frees its bytes"
        );
        let unheld = insert_held(&core, 2, 300);
        release(&core, unheld);
        assert!(remove_key(&core, &2));
        assert_eq!(
            unheld.peek().state(),
            State::Dead,
            "lazy: removing an unheld buffer retires it at once"
        );
        assert_eq!(core.sizes().data(), 0, "lazy: and frees its bytes");
        drop(pinned);
    }

    #[test]
    fn lazy_hit_counts_are_folded_into_the_statistics_once() {
        let core = core::<Lazy>(4 * B);
        for k in 1..=4 {
            insert(&core, k, B);
        }
        for k in [1, 1, 1, 2] {
            assert!(hit(&core, k));
        }
        assert_eq!(Lazy::hits(&core), (4, 0), "lazy: hits in the words counted");
        assert_eq!(
            count(&core, Event::MruHit),
            0,
            "lazy: nothing folded before the walk"
        );
        // Full: the walk meets 1 then 2 at the MRU tail, referenced, and
        // promotes them (folding their hits), then evicts 3.
        insert(&core, 5, B);
        assert_eq!(
            (state_of(&core, 1), state_of(&core, 2), state_of(&core, 3)),
            (Some(State::Mfu), Some(State::Mfu), Some(State::MruGhost)),
            "lazy: referenced tails promoted to MFU, the next unreferenced one evicted"
        );
        assert_eq!(
            count(&core, Event::MruHit),
            4,
            "lazy: the walk folds the promoted buffers' hits as MRU hits"
        );
        assert_eq!(
            Lazy::hits(&core),
            (4, 0),
            "lazy: folded hits are not counted twice"
        );
        assert!(hit(&core, 1));
        assert_eq!(
            Lazy::hits(&core),
            (4, 1),
            "lazy: a hit in MFU counts as MFU"
        );
        assert!(remove_key(&core, &1));
        assert_eq!(
            (count(&core, Event::MfuHit), Lazy::hits(&core)),
            (1, (4, 1)),
            "lazy: removal folds the MFU hit once"
        );
    }

    #[test]
    fn s3arc_hit_is_the_lazy_hit() {
        let core = s3arc_core(16 * B);
        insert(&core, 1, B);
        let e = lookup(&core, 1).expect("cached");
        let w = e.peek().word();
        assert_eq!(
            (meta::holds(w), meta::hits(w), meta::state(w)),
            (1, 1, State::Mru),
            "s3arc: a hit takes a hold and adds a hit in the meta word, state unchanged"
        );
        assert_eq!(keys(&core, State::Mru), [1], "s3arc: no list move on a hit");
        assert_eq!(
            (count(&core, Event::MruHit), core.sizes().mru),
            (0, B),
            "s3arc: a hit writes no statistics counter and moves no bytes"
        );
        release(&core, e);
        assert!(hit(&core, 1) && hit(&core, 1));
        assert_eq!(meta::hits(e.peek().word()), 3, "s3arc: hits keep counting");
        assert_eq!(
            Lazy::hits(&core),
            (3, 0),
            "s3arc: hits in the words counted"
        );
    }

    #[test]
    fn s3arc_at_tail_reads_the_hit_count_as_a_frequency() {
        let core = s3arc_core(16 * B);
        let entry = |state: State, holds: u64, hits: u64| {
            let e = EntryPtr::new(7u64, &[0; 10], state, holds);
            e.peek().meta.fetch_add(hits * HIT, Ordering::Relaxed);
            e
        };
        let once = entry(State::Mru, 0, 1);
        assert_eq!(
            at_tail(&core, once, State::Mru),
            Tail::Evict,
            "s3arc: one hit on probation is not enough: evicted"
        );
        assert_eq!(
            once.peek().state(),
            State::Dead,
            "s3arc: evicted in one step"
        );
        assert_eq!(
            count(&core, Event::MruHit),
            1,
            "s3arc: the evicted buffer's hit is folded into the statistics"
        );
        let twice = entry(State::Mru, 0, 2);
        assert_eq!(
            at_tail(&core, twice, State::Mru),
            Tail::Promote,
            "s3arc: two hits on probation: promoted to MFU"
        );
        assert_eq!(
            (meta::hits(twice.peek().word()), count(&core, Event::MruHit)),
            (0, 3),
            "s3arc: promotion spends the count (folded as MRU hits)"
        );
        let held_once = entry(State::Mru, 1, 1);
        assert_eq!(
            at_tail(&core, held_once, State::Mru),
            Tail::Skip,
            "s3arc: a held buffer that would be evicted is passed over"
        );
        let frequent = entry(State::Mfu, 0, 6);
        assert!(!frequent.peek().reused_in_mfu());
        assert_eq!(at_tail(&core, frequent, State::Mfu), Tail::Promote);
        assert_eq!(
            (
                meta::hits(frequent.peek().word()),
                count(&core, Event::MfuHit)
            ),
            (3, 3),
            "s3arc: MFU keeps min(hits, 4) - 1 for the next turn, the rest folded"
        );
        assert!(
            frequent.peek().reused_in_mfu(),
            "s3arc: a turn in MFU marks the buffer reused there"
        );
        for _ in 0..3 {
            assert_eq!(at_tail(&core, frequent, State::Mfu), Tail::Promote);
        }
        assert_eq!(
            (
                meta::hits(frequent.peek().word()),
                count(&core, Event::MfuHit)
            ),
            (0, 6),
            "s3arc: one count per turn, each folded once"
        );
        let held = entry(State::Mfu, 1, 0);
        assert_eq!(at_tail(&core, held, State::Mfu), Tail::Skip);
        assert_eq!(
            at_tail(&core, frequent, State::Mfu),
            Tail::Evict,
            "s3arc: an MFU buffer with no count left is evicted"
        );
        for e in [once, twice, held_once, frequent, held] {
            // SAFETY: made above, never in the table or a list, and no
            // other thread has seen it.
            unsafe { e.free() };
        }
    }
}
