//! Eviction: the walk over list tails (the ARC's and CAR's REPLACE) and the
//! evict thread that runs it.
//!
//! Why a thread: in the design before OpenZFS 5497 the thread that needed
//! space evicted it itself, so every miss on a full cache walked a list tail
//! under a list lock. Now inserts only account their bytes; when the cache is
//! past its target they wake one dedicated thread that evicts in batches
//! (how inserters talk to it: `evict_handshake.rs`). The thread drives the cache
//! through a narrow interface, [`Evictable`].
//!
//! Who evicts is a type, as the hit mode is: an [`Evictor`], either
//! [`Threaded`] (the evict thread) or [`Inline`] (no thread; each insert
//! runs the walk itself, one buffer per decision, as the papers do: for
//! tests and replay). The cache's insert, resize and wait paths are generic
//! over it, so they do not branch on the choice at run time.

use super::core::Core;
use super::evict_handshake::{EvictHandshake, IDLE_CHECK};
use super::hit_mode::{HitModeImpl, Tail};
use super::key::Key;
use super::stats::Event;
use super::tier::{ArcTails, EvictedCopy, Presence};
use crate::mem::sync::unpoisoned;
use crate::mem::sync::Ordering;
use crate::mem::thread_random;
use crate::mem::{EntryPtr, State};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What one eviction pass achieved.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EvictOutcome {
    pub(crate) freed: u64,
    pub(crate) not_enough: bool,
}

/// What one walk of a state's list did.
#[derive(Clone, Copy, Debug, Default)]
struct Walk {
    /// Bytes taken out of the state.
    freed: u64,
    /// Bytes of referenced or held buffers moved instead (lazy mode).
    moved: u64,
}

/// What the evict thread needs of a cache.
pub(crate) trait Evictable: Send + Sync {
    fn handshake(&self) -> &EvictHandshake;
    fn needs_eviction(&self) -> bool;
    /// Evicts to the target, then trims the ghost lists.
    fn evict_pass(&self) -> EvictOutcome;
    /// Frees retired memory whose readers are gone (also when idle, so
    /// that what the last pass retired does not wait for the next one).
    fn collect_garbage(&self);
}

impl<K: Key, M: HitModeImpl> Evictable for Core<K, M> {
    fn handshake(&self) -> &EvictHandshake {
        &self.handshake
    }

    fn needs_eviction(&self) -> bool {
        Core::needs_eviction(self)
    }

    fn evict_pass(&self) -> EvictOutcome {
        let outcome = evict_to_target(self, false, false);
        trim_ghosts(self);
        Core::collect_garbage(self);
        outcome
    }

    fn collect_garbage(&self) {
        Core::collect_garbage(self);
    }
}

/// What a second tier's feed sees of the lists: their tails, where this
/// walk takes from next.
impl<K: Key, M: HitModeImpl> ArcTails<K> for Core<K, M> {
    fn sublists(&self) -> usize {
        self.config.sublists
    }

    fn evicting_mru_first(&self) -> bool {
        M::evict_from_mru(&self.sizes(), self.p(), false)
    }

    fn tail_keys(&self, mfu: bool, i: usize, budget: u64) -> Vec<(K, u64)> {
        let state = if mfu { State::Mfu } else { State::Mru };
        let mut sl = self.list(state).lock_sublist(i);
        let marker = sl.insert_marker_at_tail();
        let mut out = Vec::new();
        let mut seen = 0u64;
        while seen < budget {
            let Some((_, e)) = sl.step_marker(marker) else {
                break;
            };
            // SAFETY: linked in this sublist, whose lock we hold.
            let e = unsafe { e.header() };
            seen += e.bytes.max(1);
            out.push((e.key.clone(), e.hash));
        }
        sl.remove_marker(marker);
        out
    }

    fn with_live(&self, key: &K, hash: u64, f: &mut dyn FnMut(&[u8], bool)) -> bool {
        let stripe = self.table.stripe(hash).read();
        let Some((e, len)) = stripe.find_with_len(hash, key) else {
            return false;
        };
        // SAFETY: the stripe lock (shared) keeps the entry in the table, so
        // alive, while `stripe` lives; `len` is its slot's.
        let (state, data) = unsafe { (e.header().state(), e.data_prefix(len)) };
        if !state.is_live() {
            return false;
        }
        f(data, state == State::Mfu);
        true
    }

    fn evicted_bytes(&self) -> u64 {
        self.events.get(Event::EvictedBytes)
    }

    fn missed_bytes(&self) -> u64 {
        self.events.get(Event::EvictL2Eligible)
    }

    fn target_bytes(&self) -> u64 {
        self.c()
    }

    fn data_bytes(&self) -> u64 {
        self.sizes().data()
    }
}

/// Who evicts: the builder's choice, as a type (see the module comment).
pub(crate) trait Evictor: Send + Sync + 'static {
    /// Before an insert of `size` bytes installs them (they are already
    /// counted as anonymous): makes room, or asks for it. `b2_hit`: the
    /// insert is an MFU-ghost hit (the paper's tie-break).
    fn make_room<K: Key, M: HitModeImpl>(core: &Core<K, M>, size: u64, b2_hit: bool);

    /// After an insert installed its buffer.
    fn after_insert<K: Key, M: HitModeImpl>(core: &Core<K, M>);

    /// After `c` went down.
    fn after_shrink<K: Key, M: HitModeImpl>(core: &Core<K, M>);

    /// Returns once eviction has brought the cache under its target (or
    /// cannot, because the rest is held).
    fn wait<K: Key, M: HitModeImpl>(core: &Core<K, M>);

    /// The evict thread, if this evictor has one (an error: it could not
    /// be started).
    fn start(core: Arc<dyn Evictable>) -> std::io::Result<Option<EvictThread>>;
}

/// The evict thread (OpenZFS's `arc_evict_thread`): inserts account their
/// bytes and wake it; far past the target they wait for it (bounded).
pub(crate) struct Threaded;

impl Evictor for Threaded {
    fn make_room<K: Key, M: HitModeImpl>(core: &Core<K, M>, size: u64, _b2_hit: bool) {
        let c = core.c();
        let data_bytes = core.sizes().data();
        if data_bytes > c {
            if data_bytes > c + core.overflow(c) {
                core.events.count(Event::OverflowWait);
                core.handshake.wait_for_freed(size, || {
                    let c = core.c();
                    core.sizes().data() > c + core.overflow(c)
                });
            } else {
                core.handshake.request();
            }
        }
    }

    fn after_insert<K: Key, M: HitModeImpl>(_: &Core<K, M>) {}

    fn after_shrink<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
        core.handshake.request();
    }

    fn wait<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
        while core.needs_eviction() {
            if !core.handshake.wait_for_pass() {
                return;
            }
        }
    }

    fn start(core: Arc<dyn Evictable>) -> std::io::Result<Option<EvictThread>> {
        EvictThread::start(core).map(Some)
    }
}

/// No thread: every insert evicts exactly enough, synchronously, one buffer
/// per decision (deterministic: tests and replay).
pub(crate) struct Inline;

impl Evictor for Inline {
    fn make_room<K: Key, M: HitModeImpl>(core: &Core<K, M>, size: u64, b2_hit: bool) {
        if let Some(tier) = &core.tier {
            tier.before_room(core, size);
        }
        evict_to_target(core, b2_hit, true);
    }

    fn after_insert<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
        trim_ghosts(core);
    }

    fn after_shrink<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
        evict_to_target(core, false, true);
        trim_ghosts(core);
    }

    fn wait<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
        Self::after_shrink(core);
    }

    fn start(_: Arc<dyn Evictable>) -> std::io::Result<Option<EvictThread>> {
        Ok(None)
    }
}

/// Evicts until the cached data fits in `c` (the ARC's REPLACE, repeated;
/// CAR's in the lazy mode). `b2_hit`: the miss being served was an
/// MFU-ghost hit (the paper's tie-break; only meaningful with inline
/// eviction). `inline`: one buffer per decision, as the papers do (the
/// evict thread takes batches).
pub(crate) fn evict_to_target<K: Key, M: HitModeImpl>(
    core: &Core<K, M>,
    b2_hit: bool,
    inline: bool,
) -> EvictOutcome {
    let mut outcome = EvictOutcome::default();
    // Bytes moved (lazy mode) since anything was freed. Once that exceeds
    // twice the cached bytes, every unheld buffer has lost its reference
    // bit and come round again: what is left is held, so stop.
    let mut moved_since_free = 0u64;
    loop {
        let c = core.c();
        let p = core.p();
        let s = core.sizes();
        if s.data() <= c {
            return outcome;
        }
        let want = s.data() - c;
        let from_mru = M::evict_from_mru(&s, p, b2_hit);
        let (first, second) = if from_mru {
            (State::Mru, State::Mfu)
        } else {
            (State::Mfu, State::Mru)
        };
        let amount = if inline {
            // One buffer at a time, re-deciding each time, as the papers do.
            1
        } else if from_mru && s.mru > p {
            want.min(s.mru - p)
        } else {
            want
        };
        let candidates = if inline && M::ONE_CANDIDATE_PER_DECISION {
            1
        } else {
            usize::MAX
        };
        let mut walk = evict_state(core, first, amount, candidates);
        if walk.freed == 0 && walk.moved == 0 {
            walk = evict_state(core, second, amount, candidates);
        }
        if walk.freed == 0 {
            moved_since_free += walk.moved;
            if walk.moved == 0 || moved_since_free > 2 * (s.mru + s.mfu) {
                core.events.count(Event::EvictNotEnough);
                outcome.not_enough = true;
                return outcome;
            }
            continue;
        }
        moved_since_free = 0;
        outcome.freed += walk.freed;
    }
}

/// Drops ghosts until the history is within its bounds.
pub(crate) fn trim_ghosts<K: Key, M: HitModeImpl>(core: &Core<K, M>) {
    let (b1, b2) = super::policy::ghost_excess(&core.sizes(), core.c());
    if b1 > 0 {
        evict_state(core, State::MruGhost, b1, usize::MAX);
    }
    if b2 > 0 {
        evict_state(core, State::MfuGhost, b2, usize::MAX);
    }
}

/// Takes at least `amount` bytes out of `state`'s list, from sublist
/// tails, `evict_batch_limit` buffers per sublist visit, starting at a
/// random sublist (OpenZFS `arc_evict_state`), looking at no more than
/// `candidates` buffers. Live buffers become ghosts; ghosts are forgotten.
/// What happens to a live buffer at the tail is the hit protocol's call
/// (`HitModeImpl::at_tail`): evicted, passed over (held) or promoted
/// (referenced).
fn evict_state<K: Key, M: HitModeImpl>(
    core: &Core<K, M>,
    state: State,
    amount: u64,
    candidates: usize,
) -> Walk {
    let list = &core.list(state);
    let n = list.len();
    let start = (thread_random() % n as u64) as usize;
    let batch = core.config.evict_batch_limit;
    // Moves do not free anything: bound how many a visit may make.
    let visit_limit = batch.saturating_mul(8);
    let mut markers: Vec<Option<u32>> = vec![None; n];
    let mut walk = Walk::default();
    let mut examined = 0usize;
    // Entries taken out of everything, freed after their locks are dropped.
    let mut dead: Vec<EntryPtr<K>> = Vec::new();
    let mut idle_rounds = 0;
    'rounds: loop {
        let before = walk;
        for k in 0..n {
            let i = (start + k) % n;
            let mut sl = list.lock_sublist(i);
            let marker = *markers[i].get_or_insert_with(|| sl.insert_marker_at_tail());
            let (mut taken, mut looked) = (0, 0);
            while taken < batch
                && looked < visit_limit
                && walk.freed < amount
                && examined < candidates
            {
                let Some((slot, entry)) = sl.step_marker(marker) else {
                    break;
                };
                // SAFETY: `entry` stays alive while it is linked: freeing it
                // needs its unlinking, under the sublist lock we hold. Once we
                // unlink it below (`take`) it is ours: out of the table and
                // its list, under our stripe lock, and unheld (the protocol
                // said `Evict`) or a ghost, until `retire` after the loop.
                let e = unsafe { entry.header() };
                looked += 1;
                examined += 1;
                let Some(mut stripe) = core.table.stripe(e.hash).try_write() else {
                    // Someone is taking a hold on it (or working on a
                    // neighbour key) right now: pass over it.
                    core.events.count(Event::EvictSkip);
                    continue;
                };
                if state.is_live() {
                    // The second tier's view of it, before the protocol
                    // decides (in the lazy mode, deciding to evict is the
                    // step that makes the entry `Dead`).
                    let l2 = core.tier.as_deref().map(|t| (t, t.presence(&e.key)));
                    if let Some((_, Presence::Writing)) = l2 {
                        // Being copied to the second tier: its write
                        // completes first (OpenZFS's evict_l2_skip).
                        core.events.count(Event::EvictL2Skip);
                        // Not a decision: the walk looks further.
                        examined -= 1;
                        continue;
                    }
                    // SAFETY: linked, under its sublist lock and its stripe
                    // lock (exclusive), both held.
                    match unsafe { M::at_tail(core, entry, state) } {
                        Tail::Promote => {
                            let moving = sl.take(slot);
                            if state == State::Mru {
                                // Referenced in T1: to T2's head (CAR).
                                e.set_state(State::Mfu);
                                // SAFETY: in the table, under the stripe lock
                                // we hold; unlinked before it is freed.
                                unsafe { core.list(State::Mfu).push_head(moving) };
                                core.move_bytes(i, State::Mru, State::Mfu, e.bytes);
                            } else {
                                // SAFETY: as above.
                                unsafe { sl.push_head(moving) };
                            }
                            walk.moved += e.bytes.max(1);
                            continue;
                        }
                        Tail::Skip => {
                            // Held: passed over, to the head so the walk
                            // does not meet it again at once.
                            let held = sl.take(slot);
                            // SAFETY: in the table, under the stripe lock we
                            // hold; unlinked before it is freed.
                            unsafe { sl.push_head(held) };
                            walk.moved += e.bytes.max(1);
                            core.events.count(Event::EvictSkip);
                            continue;
                        }
                        Tail::Evict => {}
                    }
                    if let Some((tier, presence)) = l2 {
                        let event =
                            match tier.classify_eviction(presence, e.bytes, state == State::Mfu) {
                                EvictedCopy::Cached => Event::EvictL2Cached,
                                EvictedCopy::Eligible => Event::EvictL2Eligible,
                                EvictedCopy::Ineligible => Event::EvictL2Ineligible,
                            };
                        core.events.add(event, e.bytes);
                    }
                }
                sl.take(slot);
                if state.is_live() {
                    let ghost = EntryPtr::ghost(e.key.clone(), e.hash, e.bytes, state.ghost());
                    // SAFETY: new; like every entry, it leaves the table and
                    // its list (under their locks) before it is freed.
                    unsafe {
                        stripe.replace(ghost);
                        core.list(state.ghost()).push_head(ghost);
                    }
                    core.move_bytes(i, state, state.ghost(), e.bytes);
                    core.events.count(Event::Eviction);
                    core.events.add(Event::EvictedBytes, e.bytes);
                } else {
                    stripe.remove(e.hash, &e.key);
                    core.sub_bytes(i, state, e.bytes);
                    core.events.count(Event::GhostDropped);
                }
                drop(stripe);
                walk.freed += e.bytes.max(1);
                taken += 1;
                dead.push(entry);
            }
            drop(sl);
            for e in dead.drain(..) {
                // SAFETY: out of the table and its list, and unheld: the
                // protocol said `Evict` (lazy: after making it `Dead`), or a
                // ghost (never held); retired once, here.
                unsafe { M::retire(core, e) };
            }
            if walk.freed >= amount || examined >= candidates {
                break 'rounds;
            }
        }
        if walk.freed == before.freed {
            // A round that freed nothing. In the lazy mode the first such
            // round may have cleared reference bits that make the next
            // one succeed; a second means there is nothing to take.
            idle_rounds += 1;
            if walk.moved == before.moved || idle_rounds >= 2 {
                break;
            }
        }
    }
    for (i, m) in markers.iter().enumerate() {
        if let Some(m) = *m {
            list.lock_sublist(i).remove_marker(m);
        }
    }
    walk
}

/// The running evict thread; stopped and joined on drop.
pub(crate) struct EvictThread {
    target: Arc<dyn Evictable>,
    handle: Option<JoinHandle<()>>,
}

impl EvictThread {
    pub(crate) fn start(target: Arc<dyn Evictable>) -> std::io::Result<EvictThread> {
        let for_thread = Arc::clone(&target);
        let handle = std::thread::Builder::new()
            .name("multiarc-evict".into())
            .spawn(move || run(&*for_thread))?;
        Ok(EvictThread {
            target,
            handle: Some(handle),
        })
    }
}

fn run(target: &dyn Evictable) {
    let handshake = target.handshake();
    loop {
        {
            let mut p = handshake.lock();
            loop {
                if p.shutdown {
                    return;
                }
                if handshake.requested.swap(false, Ordering::AcqRel) || target.needs_eviction() {
                    break;
                }
                let (guard, waited) = unpoisoned(handshake.wake.wait_timeout(p, IDLE_CHECK));
                p = guard;
                if waited.timed_out() {
                    drop(p);
                    target.collect_garbage();
                    p = handshake.lock();
                }
            }
        }
        let outcome = target.evict_pass();
        let mut p = handshake.lock();
        p.freed += outcome.freed;
        p.passes += 1;
        if outcome.not_enough {
            p.not_enough += 1;
        }
        handshake.done.notify_all();
        drop(p);
        if outcome.not_enough {
            // Everything left is held: sleep until asked again rather than spin.
            let p = handshake.lock();
            let _ = handshake.wake.wait_timeout(p, IDLE_CHECK);
        }
    }
}

impl Drop for EvictThread {
    fn drop(&mut self) {
        {
            let handshake = self.target.handshake();
            let mut p = handshake.lock();
            p.shutdown = true;
            handshake.wake.notify_all();
            handshake.done.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
