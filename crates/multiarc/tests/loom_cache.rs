//! Model checks of the cache's hold / release / evict protocol with loom.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 cargo test --release -p multiarc --test loom_cache`
//!
//! Each model races a reader taking and dropping holds against an inserter
//! whose insert must evict (inline eviction, so the eviction runs on a loom
//! thread). Loom explores the interleavings of the stripe and sublist locks
//! and the hold counter; in every one, a held buffer must not be evicted, the
//! bytes must add up, and after both threads finish the cache must be within
//! its bound, once eviction has caught up, with nothing left held.
#![cfg(loom)]

use loom::thread;
use multiarc::{Builder, Cache, HitMode, Policy};
use std::sync::Arc;

fn cache(max: u64, mode: HitMode) -> Arc<Cache<u64>> {
    cache_with_policy(max, mode, Policy::Arc)
}

fn cache_with_policy(max: u64, mode: HitMode, policy: Policy) -> Arc<Cache<u64>> {
    Arc::new(
        Builder::new()
            .hit_mode(mode)
            .policy(policy)
            .max_bytes(max)
            .min_bytes(1)
            .sublists(1)
            .hash_stripes(2)
            .inline_eviction(true)
            .build()
            .unwrap(),
    )
}

/// `loom::model` with room for the atomics of the hash table's slots (every
/// slot is a loom atomic, and a stripe's growth or drop visits them all):
/// more branches than loom's default allows.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut model = loom::model::Builder::new();
    model.max_branches = 20_000;
    model.check(f);
}

/// Once both threads are done and eviction has caught up (an inline pass that
/// met a busy stripe gives up and counts `evict_not_enough`), the cache is
/// within its bound, nothing is held and every byte is accounted for.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {
        mod eager {
            $( #[test] fn $name() { super::$name(multiarc::HitMode::Eager) } )*
        }
        mod lazy {
            $( #[test] fn $name() { super::$name(multiarc::HitMode::Lazy) } )*
        }
    };
}

in_both_modes!(
    a_held_buffer_is_not_evicted_by_a_concurrent_insert,
    release_races_with_eviction_and_remove,
    two_readers_share_holds,
);

/// Lazy mode only: the evictor finds buffer 1 referenced and moves it to
/// the MFU list, while another thread removes it. Whichever of them drops
/// the last reference must account its bytes, whatever the order.
#[test]
fn lazy_referenced_move_races_with_remove() {
    model(|| {
        let cache = cache(2, HitMode::Lazy);
        drop(cache.insert(1, vec![1]));
        drop(cache.get(&1)); // sets its reference bit
        drop(cache.insert(2, vec![2]));
        let remover = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                cache.remove(&1);
            })
        };
        // The cache is full: this insert's eviction walks the MRU tail,
        // buffer 1 first.
        drop(cache.insert(3, vec![3]));
        remover.join().unwrap();
        check_quiescent(&cache);
    });
}

/// Lazy mode, what the hit path relies on (entry.rs): a hit is one
/// `fetch_add` on the entry's meta word under the shared stripe lock, a
/// release one `fetch_sub` with no lock, and a removal sets the state to
/// `Anon` in one step on the same word. Whichever of the remover and the
/// last releaser sees (Anon, no holds) frees the buffer and its anonymous
/// bytes: exactly one of them, in every order (none: `anon_bytes` stays
/// above zero; both: a double free). The second reader's hold, taken or
/// missed, must not change that.
#[test]
fn lazy_hit_and_release_race_with_remove() {
    model(|| {
        let cache = cache(4, HitMode::Lazy);
        drop(cache.insert(1, vec![7]));
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                if let Some(h) = cache.get(&1) {
                    assert_eq!(h[0], 7);
                    let again = h.clone();
                    drop(h);
                    assert_eq!(again[0], 7);
                }
            })
        };
        let removed = cache.remove(&1);
        assert!(removed);
        reader.join().unwrap();
        check_quiescent(&cache);
        assert_eq!(cache.stats().size, 0);
    });
}

/// Lazy mode, what the probe without a lock relies on (hash.rs,
/// reclaim.rs): a `get` of buffer 1 races with an insert whose eviction
/// makes 1 `Dead`, replaces it in its slot with a ghost and retires it, and
/// (every retirement tries, under loom) frees it once its grace period has
/// passed. The probe must either miss or pin a live buffer with its bytes,
/// and must never reach an entry whose grace period had passed (entries are
/// marked, not freed, under loom; the probe asserts on the mark).
#[test]
fn lazy_probe_races_with_eviction_and_free() {
    model(|| {
        let cache = cache(2, HitMode::Lazy);
        drop(cache.insert(1, vec![1]));
        drop(cache.insert(2, vec![2]));
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                if let Some(h) = cache.get(&1) {
                    assert_eq!(&h[..], &[1]);
                }
            })
        };
        // Full: evicts 1, the MRU tail, unreferenced and (unless the reader
        // holds it) unheld.
        drop(cache.insert(3, vec![3]));
        reader.join().unwrap();
        check_quiescent(&cache);
    });
}

/// Lazy mode: hits are counted in the meta word and folded into the
/// statistics by the evictor when it clears the reference (promoting the
/// buffer). A hit racing with the eviction that folds and promotes buffer 1
/// is neither lost nor counted twice.
#[test]
fn lazy_hits_are_counted_exactly_across_promotion() {
    let mut model = loom::model::Builder::new();
    // Summing the statistics loads every entry's word: more branches than
    // loom's default allows.
    model.max_branches = 20_000;
    model.check(|| {
        let cache = cache(2, HitMode::Lazy);
        drop(cache.insert(1, vec![1]));
        drop(cache.insert(2, vec![2]));
        drop(cache.get(&1)); // referenced: the eviction below promotes it
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || cache.get(&1).is_some() as u64)
        };
        // The cache is full: this insert's eviction meets buffer 1 first.
        drop(cache.insert(3, vec![3]));
        let theirs = reader.join().unwrap();
        let s = cache.stats();
        assert_eq!(s.hits, 1 + theirs, "{s:?}");
        assert_eq!(s.mru_hits + s.mfu_hits, s.hits, "{s:?}");
        assert_eq!(s.anon_bytes, 0, "{s:?}");
    });
}

/// The generations policy: a hit on MRU buffer 1 moves it to MFU itself
/// (a stripe try-lock, then the MRU and MFU sublist locks) while an insert's
/// eviction walks MRU's tail, buffer 1 first. Whichever goes first, the hit
/// is counted once, no byte is lost between the lists, and a buffer the
/// reader holds is not evicted.
#[test]
fn generations_hit_promotion_races_with_eviction() {
    let mut model = loom::model::Builder::new();
    model.max_branches = 20_000;
    model.check(|| {
        let cache = cache_with_policy(2, HitMode::Lazy, Policy::Generations);
        drop(cache.insert(1, vec![1]));
        drop(cache.insert(2, vec![2]));
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || match cache.get(&1) {
                Some(h) => {
                    assert_eq!(&h[..], &[1]);
                    1
                }
                None => 0,
            })
        };
        drop(cache.insert(3, vec![3]));
        let theirs = reader.join().unwrap();
        let s = cache.stats();
        assert_eq!(s.hits, theirs, "{s:?}");
        assert_eq!(s.mru_hits + s.mfu_hits, s.hits, "{s:?}");
        check_quiescent(&cache);
    });
}

/// The generations policy: a hit's move of MRU buffer 1 to MFU races with
/// its removal. Whichever takes the stripe lock first, the buffer ends out
/// of every list, freed once (by the remover or the reader's release), its
/// bytes accounted.
#[test]
fn generations_hit_promotion_races_with_remove() {
    model(|| {
        let cache = cache_with_policy(4, HitMode::Lazy, Policy::Generations);
        drop(cache.insert(1, vec![7]));
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                if let Some(h) = cache.get(&1) {
                    assert_eq!(h[0], 7);
                }
            })
        };
        assert!(cache.remove(&1));
        reader.join().unwrap();
        check_quiescent(&cache);
        assert_eq!(cache.stats().size, 0);
    });
}

fn check_quiescent(cache: &Cache<u64>) {
    cache.wait_for_eviction();
    let s = cache.stats();
    assert!(s.size <= s.c, "{s:?}");
    assert_eq!(s.held_bytes, 0, "{s:?}");
    assert_eq!(s.anon_bytes, 0, "{s:?}");
    assert_eq!(s.evictable_bytes, s.mru_bytes + s.mfu_bytes, "{s:?}");
}

fn a_held_buffer_is_not_evicted_by_a_concurrent_insert(mode: HitMode) {
    model(move || {
        let cache = cache(2, mode);
        drop(cache.insert(1, vec![1]));
        drop(cache.insert(2, vec![2]));
        let reader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                if let Some(h) = cache.get(&1) {
                    assert_eq!(h[0], 1);
                    // Still held: a second lookup must find it, whatever the
                    // inserter evicted meanwhile.
                    let again = cache.get(&1).expect("a held buffer was evicted");
                    assert_eq!(again[0], 1);
                }
            })
        };
        // The cache is full: this insert evicts one buffer.
        drop(cache.insert(3, vec![3]));
        reader.join().unwrap();
        check_quiescent(&cache);
        assert!(cache.get(&3).is_some());
    });
}

fn release_races_with_eviction_and_remove(mode: HitMode) {
    model(move || {
        let cache = cache(2, mode);
        let held = cache.insert(1, vec![1]);
        drop(cache.insert(2, vec![2]));
        let remover = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                cache.remove(&2);
                drop(cache.insert(4, vec![4]));
            })
        };
        // Releasing the last hold races with the other thread's eviction.
        drop(held);
        drop(cache.insert(3, vec![3]));
        remover.join().unwrap();
        check_quiescent(&cache);
    });
}

fn two_readers_share_holds(mode: HitMode) {
    model(move || {
        let cache = cache(1, mode);
        drop(cache.insert(1, vec![1]));
        let other = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                let h = cache.get(&1).expect("nothing evicts here");
                assert_eq!(h[0], 1);
            })
        };
        let h = cache.get(&1).expect("nothing evicts here");
        drop(h);
        other.join().unwrap();
        check_quiescent(&cache);
        assert_eq!(cache.stats().evictable_bytes, 1);
    });
}
