//! The public API's behaviour, one property per test.

use multiarc::{BlockKey, Builder, Cache, HitMode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

fn inline(max: u64, mode: HitMode) -> Cache<u64> {
    Builder::new()
        .max_bytes(max)
        .sublists(1)
        .inline_eviction(true)
        .hit_mode(mode)
        .build()
        .unwrap()
}

fn background(max: u64, mode: HitMode) -> Builder<u64> {
    Builder::new().max_bytes(max).hit_mode(mode)
}

/// Runs each listed test function once per hit mode.
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
    get_insert_remove,
    a_load_overtaken_by_an_insert_or_remove_is_not_cached,
    a_miss_after_an_insert_or_remove_does_not_join_the_stale_load,
    replacing_keeps_old_bytes_for_holders,
    held_buffers_are_never_evicted,
    inline_eviction_keeps_the_byte_bound_and_ghost_bounds,
    background_eviction_brings_size_under_target,
    set_max_bytes_shrinks_in_background_and_grows_at_once,
    get_or_load_runs_the_loader_once_for_concurrent_misses,
    get_or_load_failure_reaches_every_waiter_and_caches_nothing,
    a_panicking_loader_does_not_strand_waiters,
    handles_clone_and_release,
    hash_figures_are_reported,
    insert_slice_and_prefetch_behave_as_insert_alone,
);

/// A cache driven with `prefetch` hints (some for keys never asked for)
/// and `insert_slice` ends exactly as one driven with `insert` alone:
/// same hits, same statistics, same bytes.
fn insert_slice_and_prefetch_behave_as_insert_alone(mode: HitMode) {
    let build = || -> Cache<u64> {
        Builder::new()
            .max_bytes(64)
            .sublists(2)
            .inline_eviction(true)
            .seed(5)
            .hit_mode(mode)
            .build()
            .unwrap()
    };
    let (plain, hinted) = (build(), build());
    // A hot set of 10 keys among a loop over 150.
    let key = |i: u64| {
        if i.is_multiple_of(3) {
            i % 10
        } else {
            (i * 7 + i / 13) % 150
        }
    };
    let (mut plain_hits, mut hinted_hits) = (0, 0);
    for i in 0..5000u64 {
        let k = key(i);
        let bytes = [k as u8; 3];
        if plain.get(&k).is_some() {
            plain_hits += 1;
        } else {
            drop(plain.insert(k, bytes.to_vec()));
        }
        hinted.prefetch(&key(i + 4));
        hinted.prefetch(&(1000 + i));
        if hinted.get(&k).is_some() {
            hinted_hits += 1;
        } else {
            drop(hinted.insert_slice(k, &bytes));
        }
    }
    assert!(plain_hits > 0 && plain_hits < 5000, "{plain_hits} hits");
    assert_eq!(hinted_hits, plain_hits);
    assert_eq!(hinted.stats(), plain.stats());
    for k in 0..150u64 {
        let (p, h) = (plain.get(&k), hinted.get(&k));
        assert_eq!(p.as_deref(), h.as_deref(), "key {k}");
    }
}

fn get_insert_remove(mode: HitMode) {
    let cache: Cache<BlockKey> = Builder::new()
        .max_bytes(1 << 20)
        .hit_mode(mode)
        .build()
        .unwrap();
    let k = BlockKey::new(1, 2);
    assert!(cache.get(&k).is_none());
    let h = cache.insert(k, vec![7; 100]);
    assert_eq!(&h[..], &[7; 100][..]);
    assert_eq!(h.key(), &k);
    drop(h);
    assert_eq!(cache.get(&k).unwrap().len(), 100);
    assert!(cache.remove(&k));
    assert!(!cache.remove(&k));
    assert!(cache.get(&k).is_none());
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.inserts, s.removes), (1, 2, 1, 1));
    assert_eq!(s.size, 0);
}

#[test]
fn eager_second_access_promotes_to_mfu_and_sizes_add_up() {
    let cache = inline(10_000, HitMode::Eager);
    cache.insert(1, vec![0; 1000]);
    cache.insert(2, vec![0; 500]);
    let s = cache.stats();
    assert_eq!((s.mru_bytes, s.mfu_bytes, s.size), (1500, 0, 1500));
    drop(cache.get(&1));
    let s = cache.stats();
    assert_eq!((s.mru_bytes, s.mfu_bytes, s.mru_hits), (500, 1000, 1));
    drop(cache.get(&1));
    assert_eq!(cache.stats().mfu_hits, 1);
}

fn replacing_keeps_old_bytes_for_holders(mode: HitMode) {
    let cache = inline(10_000, mode);
    let old = cache.insert(1, vec![1; 10]);
    let new = cache.insert(1, vec![2; 20]);
    assert_eq!(&old[..], &[1; 10][..]);
    assert_eq!(&new[..], &[2; 20][..]);
    assert_eq!(
        cache.stats().anon_bytes,
        10,
        "the replaced, still held buffer is anonymous"
    );
    drop(old);
    let s = cache.stats();
    assert_eq!((s.anon_bytes, s.size, s.mfu_bytes), (0, 20, 20));
    drop(new);
    assert_eq!(&cache.get(&1).unwrap()[..], &[2; 20][..]);
}

fn held_buffers_are_never_evicted(mode: HitMode) {
    let cache = inline(1000, mode);
    let held = cache.insert(0, vec![9; 400]);
    for k in 1..50 {
        drop(cache.insert(k, vec![0; 100]));
    }
    // The held buffer survived every eviction and is still in the table.
    assert_eq!(&held[..], &[9; 400][..]);
    drop(held);
    assert!(cache.get(&0).is_some());
    let s = cache.stats();
    assert!(s.size <= 1000, "{s:?}");
}

fn inline_eviction_keeps_the_byte_bound_and_ghost_bounds(mode: HitMode) {
    let cache = inline(8192 * 10, mode);
    for k in multiarc_sim::workload::Uniform::new(20, 0x2545_F491_4F6C_DD1D).take(1000) {
        if cache.get(&k).is_none() {
            drop(cache.insert(k, vec![0; 8192]));
        }
        let s = cache.stats();
        assert!(s.size <= s.c, "{s:?}");
        assert!(s.mru_bytes + s.mru_ghost_bytes <= s.c, "{s:?}");
        assert!(s.mru_bytes + s.mfu_bytes + s.mru_ghost_bytes + s.mfu_ghost_bytes <= 2 * s.c);
        assert!(s.p <= s.c);
    }
    let s = cache.stats();
    assert!(
        s.evictions > 0 && s.mru_ghost_hits + s.mfu_ghost_hits > 0,
        "{s:?}"
    );
}

fn background_eviction_brings_size_under_target(mode: HitMode) {
    let cache: Cache<u64> = background(1 << 20, mode).build().unwrap();
    for k in 0..1000 {
        drop(cache.insert(k, vec![0; 4096]));
    }
    cache.wait_for_eviction();
    let s = cache.stats();
    assert!(s.size <= 1 << 20, "{s:?}");
    assert!(s.evictions >= 1000 - 256, "{s:?}");
}

fn set_max_bytes_shrinks_in_background_and_grows_at_once(mode: HitMode) {
    let cache: Cache<u64> = background(4 << 20, mode)
        .min_bytes(1 << 20)
        .build()
        .unwrap();
    // Half the cache seen twice (MFU), then a stream of new keys through MRU.
    for k in 0..512 {
        drop(cache.insert(k, vec![0; 4096]));
        drop(cache.get(&k));
    }
    for k in 1000..3000 {
        drop(cache.insert(k, vec![0; 4096]));
        cache.wait_for_eviction();
    }
    // Re-reading recently evicted stream keys hits the MRU ghost list and raises p.
    for k in 2200..2300 {
        drop(cache.insert(k, vec![0; 4096]));
    }
    cache.wait_for_eviction();
    assert!(cache.stats().mru_ghost_hits > 0);
    assert!(cache.set_max_bytes(1000).is_err(), "below min_bytes");
    assert!(cache.set_max_bytes(0).is_err());
    let err = cache.set_max_bytes(u64::MAX).unwrap_err().to_string();
    assert!(err.contains("largest cache"), "{err}");
    let p_before = cache.stats().p;
    assert!(p_before > 0);
    cache.set_max_bytes(2 << 20).unwrap();
    let s = cache.stats();
    assert_eq!(s.c, 2 << 20);
    assert_eq!(cache.max_bytes(), 2 << 20);
    assert_eq!(s.p, p_before / 2, "p keeps its share of c");
    cache.wait_for_eviction();
    assert!(cache.stats().size <= 2 << 20);
    cache.set_max_bytes(8 << 20).unwrap();
    assert_eq!(cache.stats().c, 8 << 20);
    assert_eq!(cache.max_bytes(), 8 << 20);
}

fn get_or_load_runs_the_loader_once_for_concurrent_misses(mode: HitMode) {
    let cache: Cache<u64> = background(1 << 20, mode).build().unwrap();
    let runs = AtomicUsize::new(0);
    let threads = 8;
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                let h = cache
                    .get_or_load(5, || -> Result<Vec<u8>, ()> {
                        runs.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                        Ok(vec![5; 64])
                    })
                    .unwrap();
                assert_eq!(&h[..], &[5; 64][..]);
            });
        }
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let s = cache.stats();
    assert_eq!(s.loads, 1);
    assert_eq!(s.held_bytes, 0, "every waiter's hold was released");
    assert_eq!(s.evictable_bytes, 64);
}

fn get_or_load_failure_reaches_every_waiter_and_caches_nothing(mode: HitMode) {
    let cache: Cache<u64> = background(1 << 20, mode).build().unwrap();
    let runs = AtomicUsize::new(0);
    let barrier = Barrier::new(4);
    let errors: Vec<Arc<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache
                        .get_or_load(9, || {
                            runs.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(100));
                            Err("disk on fire".to_string())
                        })
                        .unwrap_err()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(errors.iter().all(|e| e.as_str() == "disk on fire"));
    assert!(cache.get(&9).is_none());
    assert_eq!(cache.stats().load_failures, 1);
    // The next load runs again and succeeds.
    let h = cache.get_or_load(9, || Ok::<_, ()>(vec![1])).unwrap();
    assert_eq!(&h[..], &[1]);
}

fn a_panicking_loader_does_not_strand_waiters(mode: HitMode) {
    let cache: Cache<u64> = background(1 << 20, mode).build().unwrap();
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            barrier.wait();
            let _ = cache.get_or_load(3, || -> Result<Vec<u8>, ()> {
                std::thread::sleep(Duration::from_millis(100));
                panic!("loader bug")
            });
        });
        let b = s.spawn(|| {
            barrier.wait();
            std::thread::sleep(Duration::from_millis(20));
            let h = cache.get_or_load(3, || Ok::<_, ()>(vec![3])).unwrap();
            assert_eq!(&h[..], &[3]);
        });
        assert!(a.join().is_err());
        b.join().unwrap();
    });
}

fn handles_clone_and_release(mode: HitMode) {
    let cache = inline(1000, mode);
    let a = cache.insert(1, vec![1; 10]);
    let b = a.clone();
    drop(a);
    assert_eq!(cache.stats().held_bytes, 10);
    drop(b);
    let s = cache.stats();
    assert_eq!((s.held_bytes, s.evictable_bytes), (0, 10));
}

fn hash_figures_are_reported(mode: HitMode) {
    let cache = inline(1 << 30, mode);
    for k in 0..10_000 {
        cache.insert(k, vec![0; 1]);
    }
    let s = cache.stats();
    assert_eq!(s.hash_elements, 10_000);
    assert!(s.hash_chain_max >= 1);
}

#[test]
fn lazy_hits_only_mark_and_the_evictor_promotes() {
    let cache = inline(3, HitMode::Lazy);
    for k in 0..3 {
        drop(cache.insert(k, vec![0; 1]));
    }
    drop(cache.get(&0));
    let s = cache.stats();
    assert_eq!(
        (s.mru_bytes, s.mfu_bytes, s.mru_hits),
        (3, 0, 1),
        "a lazy hit moves nothing"
    );
    // Key 0 is the oldest, but referenced: the evictor moves it to MFU and
    // evicts key 1 instead (CAR).
    drop(cache.insert(3, vec![0; 1]));
    assert!(cache.get(&0).is_some());
    assert!(cache.get(&1).is_none());
    let s = cache.stats();
    assert_eq!((s.mfu_bytes, s.evictions), (1, 1), "{s:?}");
}

#[test]
fn lazy_held_buffers_stay_linked_but_are_not_evicted() {
    let cache = inline(2, HitMode::Lazy);
    let held = cache.insert(0, vec![7; 1]);
    drop(cache.insert(1, vec![0; 1]));
    assert_eq!(cache.stats().held_bytes, 1);
    for k in 2..20 {
        drop(cache.insert(k, vec![0; 1]));
    }
    assert_eq!(held[0], 7);
    assert!(cache.get(&0).is_some());
    assert!(cache.remove(&0));
    let s = cache.stats();
    assert_eq!((s.held_bytes, s.anon_bytes), (0, 1), "{s:?}");
    drop(held);
    assert_eq!(cache.stats().anon_bytes, 0);
}

/// Starts a `get_or_load` of key 1 in `s` whose loader returns `[1; 64]`
/// once `changed` is passed; returns when the loader is running (the load
/// is in flight).
fn spawn_blocked_load<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    cache: &'s Cache<u64>,
    changed: &'s Barrier,
) -> std::thread::ScopedJoinHandle<'s, Vec<u8>> {
    let started = std::sync::Arc::new(Barrier::new(2));
    let running = std::sync::Arc::clone(&started);
    let h = s.spawn(move || {
        cache
            .get_or_load(1, || -> Result<Vec<u8>, ()> {
                running.wait();
                changed.wait();
                Ok(vec![1; 64])
            })
            .unwrap()
            .to_vec()
    });
    started.wait();
    h
}

/// A miss that begins after an `insert` or `remove` of its key returned
/// never gets the bytes of a load that began before it (found by the second
/// tier's stress: a caller joined such a load in flight and read the
/// version before the one acknowledged). It loads for itself instead.
fn a_miss_after_an_insert_or_remove_does_not_join_the_stale_load(mode: HitMode) {
    for remove in [false, true] {
        let cache = inline(1 << 20, mode);
        let changed = Barrier::new(2);
        std::thread::scope(|s| {
            let stale = spawn_blocked_load(s, &cache, &changed);
            if remove {
                assert!(!cache.remove(&1));
            } else {
                drop(cache.insert(1, vec![2; 64]));
                // Gone again (evicted or removed): the next caller misses.
                assert!(cache.remove(&1));
            }
            // A new caller, after the change returned, while the old load
            // is still in flight (a thread: were it to join that load, it
            // would wait for `changed`).
            let fresh = s.spawn(|| {
                cache
                    .get_or_load(1, || -> Result<Vec<u8>, ()> { Ok(vec![3; 64]) })
                    .unwrap()
                    .to_vec()
            });
            // Up to 2 s for it to finish on its own; then let the old load
            // end, so that a caller that joined it returns (with the stale
            // bytes) and fails below instead of hanging.
            let mut released = false;
            for _ in 0..2000 {
                if fresh.is_finished() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if !fresh.is_finished() {
                changed.wait();
                released = true;
            }
            let got = fresh.join().unwrap();
            if !released {
                changed.wait();
            }
            assert_eq!(got, vec![3; 64], "joined a load older than the change");
            assert_eq!(stale.join().unwrap(), vec![1; 64]);
        });
    }
}

/// A load that started before an `insert` (or `remove`) of its key may have
/// read bytes the insert replaced: they reach the loading caller, but the
/// cache keeps the inserted bytes (or nothing).
fn a_load_overtaken_by_an_insert_or_remove_is_not_cached(mode: HitMode) {
    for remove in [false, true] {
        let cache = inline(1 << 20, mode);
        let changed = Barrier::new(2);
        std::thread::scope(|s| {
            let loader = spawn_blocked_load(s, &cache, &changed);
            if remove {
                assert!(!cache.remove(&1));
            } else {
                drop(cache.insert(1, vec![2; 64]));
            }
            changed.wait();
            assert_eq!(loader.join().unwrap(), vec![1; 64]);
        });
        match cache.get(&1) {
            Some(h) => {
                assert!(!remove, "a removed key came back from a stale load");
                assert_eq!(&h[..], &[2; 64][..], "the stale load replaced the insert");
            }
            None => assert!(remove, "the insert was lost"),
        }
        let st = cache.stats();
        assert_eq!(st.loads_superseded, 1);
        cache.remove(&1);
        assert_eq!(
            cache.stats().anon_bytes,
            0,
            "the stale buffer was not freed"
        );
    }
}
