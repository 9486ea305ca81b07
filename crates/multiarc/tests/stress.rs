//! Concurrency stress, bounded in time: many threads mix every operation.
//! Checked: every buffer read is the buffer of its key (a checksum of the
//! key and a version is stamped in it), a held buffer is never evicted, the
//! size returns under the target once eviction catches up, and nothing
//! deadlocks (a watchdog fails the test if the run hangs).

use multiarc::{Builder, Cache, HitMode, Policy};
use multiarc_sim::workload::rng;
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A buffer whose bytes are derived from (key, version): readers can check
/// that what they see belongs to the key they asked for.
fn stamped(key: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(16)];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v[8..16].copy_from_slice(&version.to_le_bytes());
    rng(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version).fill_bytes(&mut v[16..]);
    v
}

fn check(key: u64, bytes: &[u8]) {
    assert!(bytes.len() >= 16, "short buffer for key {key}");
    let k = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let version = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(k, key, "buffer of key {k} returned for key {key}");
    assert_eq!(
        bytes,
        &stamped(key, version, bytes.len())[..],
        "corrupt buffer for key {key}"
    );
}

/// Keys drawn evenly from 2000.
fn uniform_key(r: u64) -> u64 {
    (r >> 8) % 2000
}

/// A skewed key space of 3000: some keys come back often (counts that
/// protect them under S3ARC), most rarely.
fn skewed_key(r: u64) -> u64 {
    let key = if r.is_multiple_of(4) {
        r >> 8
    } else {
        (r >> 8) % 400
    };
    key % 3000
}

/// `threads` threads mix every operation on keys drawn by `key_of` from a
/// random word, for `run_for`; then the checks of the module's comment.
fn run_stress(cache: &Cache<u64>, threads: usize, run_for: Duration, key_of: fn(u64) -> u64) {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    const PINNED_BASE: u64 = 1 << 40;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, ops) = (&stop, &ops);
            s.spawn(move || {
                let mut rng = rng(0x1234_5678 + t as u64 * 7919);
                let mut version = 0u64;
                // Each thread pins a key of its own and keeps it held while churning.
                let pinned = PINNED_BASE + t as u64;
                let pin = cache.insert(pinned, stamped(pinned, 0, 4096));
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = rng.next_u64();
                    let key = key_of(r);
                    let len = 512 + ((r >> 40) % 8) as usize * 1024;
                    match r % 100 {
                        0..=59 => {
                            if let Some(h) = cache.get(&key) {
                                check(key, &h);
                            }
                        }
                        60..=79 => {
                            version += 1;
                            let h = cache.insert(key, stamped(key, version, len));
                            check(key, &h);
                        }
                        80..=84 => {
                            cache.remove(&key);
                        }
                        85..=98 => {
                            let h = cache
                                .get_or_load(key, || {
                                    if r.is_multiple_of(7) {
                                        Err("injected load failure")
                                    } else {
                                        Ok(stamped(key, 0, len))
                                    }
                                })
                                .ok();
                            if let Some(h) = h {
                                check(key, &h);
                            }
                        }
                        _ => {
                            let max = [256u64 << 10, 1 << 20, 4 << 20][(r >> 20) as usize % 3];
                            cache.set_max_bytes(max).unwrap();
                        }
                    }
                    n += 1;
                    if n.is_multiple_of(1024) {
                        // The held buffer was never evicted: still there, intact.
                        check(pinned, &pin);
                        let again = cache.get(&pinned).expect("a held buffer was evicted");
                        check(pinned, &again);
                    }
                }
                ops.fetch_add(n, Ordering::Relaxed);
                drop(pin);
            });
        }
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        ops.load(Ordering::Relaxed) > 1000,
        "the stress made no progress"
    );
    cache.set_max_bytes(1 << 20).unwrap();
    cache.wait_for_eviction();
    let s = cache.stats();
    assert!(
        s.size <= s.c,
        "size {} above target {} after eviction: {s:?}",
        s.size,
        s.c
    );
    assert_eq!(s.held_bytes, 0, "holds leaked: {s:?}");
    assert_eq!(s.anon_bytes, 0, "anonymous bytes leaked: {s:?}");
    assert!(s.mru_bytes + s.mru_ghost_bytes <= s.c + 8192, "{s:?}");
}

/// Runs `f` on a thread and fails if it does not finish within `limit`.
fn with_watchdog(limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    let started = Instant::now();
    match rx.recv_timeout(limit) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: re-raise its panic.
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "stress run hung (no progress after {:?})",
                started.elapsed()
            )
        }
    }
}

#[test]
fn stress_default_sublists() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .build()
            .unwrap();
        run_stress(&cache, 8, Duration::from_secs(2), uniform_key);
    });
}

#[test]
fn stress_one_sublist_small_batches() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .sublists(1)
            .evict_batch_limit(1)
            .hash_stripes(4)
            .build()
            .unwrap();
        run_stress(&cache, 6, Duration::from_secs(2), uniform_key);
    });
}

#[test]
fn stress_inline_eviction() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .sublists(3)
            .inline_eviction(true)
            .build()
            .unwrap();
        run_stress(&cache, 4, Duration::from_secs(2), uniform_key);
    });
}

#[test]
fn stress_lazy_default_sublists() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .hit_mode(HitMode::Lazy)
            .build()
            .unwrap();
        run_stress(&cache, 8, Duration::from_secs(2), uniform_key);
    });
}

#[test]
fn stress_lazy_one_sublist_inline() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .sublists(1)
            .evict_batch_limit(1)
            .hash_stripes(4)
            .inline_eviction(true)
            .hit_mode(HitMode::Lazy)
            .build()
            .unwrap();
        run_stress(&cache, 6, Duration::from_secs(2), uniform_key);
    });
}

/// S3ARC (`Policy::S3arc`) with the evict thread over four sublists, on a
/// skewed key space; besides the common checks, each ghost list within its
/// share of `c` (80% and 50%), `p` within 0.5%..10% of `c`, and both MFU and
/// ghost admission in use.
#[test]
fn stress_s3arc_four_sublists() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .sublists(4)
            .policy(Policy::S3arc)
            .build()
            .unwrap();
        run_stress(&cache, 4, Duration::from_secs(1), skewed_key);
        let s = cache.stats();
        assert!(s.mru_ghost_bytes <= s.c * 8 / 10, "{s:?}");
        assert!(s.mfu_ghost_bytes <= s.c / 2, "{s:?}");
        assert!(
            (s.c / 200..=s.c / 10).contains(&s.p),
            "p within 0.5%..10% of c: {s:?}"
        );
        assert!(s.mfu_bytes > 0 && s.mru_ghost_hits > 0, "{s:?}");
    });
}

/// The adaptive policy (`Policy::Adaptive`) with the evict thread over four
/// sublists, on a skewed key space, with a target that moves (each expert's
/// `p` rescaled): besides the common checks, its experts must have switched
/// (regrets counted and `p` swapped while other threads miss, hit and
/// evict), and `p` and the history stay within ARC's widest bounds.
#[test]
fn stress_adaptive_four_sublists() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(256 << 10)
            .min_bytes(64 << 10)
            .sublists(4)
            .policy(Policy::Adaptive)
            .build()
            .unwrap();
        // Rounds of a second until the experts have switched (at most 8):
        // on a loaded machine (the other stress tests beside it on 2 CPUs)
        // one second has made too few misses for a switch about one run in
        // five, with or without a bug.
        for _round in 0..8 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    for i in 0..20 {
                        std::thread::sleep(Duration::from_millis(50));
                        cache
                            .set_max_bytes(if i % 2 == 0 { 192 << 10 } else { 256 << 10 })
                            .unwrap();
                    }
                });
                run_stress(&cache, 4, Duration::from_secs(1), skewed_key);
            });
            cache.wait_for_eviction();
            if cache.stats().policy_switches > 0 {
                break;
            }
        }
        let s = cache.stats();
        eprintln!("adaptive stress: {} switches", s.policy_switches);
        assert!(s.policy_switches > 0, "no switch of experts: {s:?}");
        assert!(s.p <= s.c, "{s:?}");
        assert!(s.mru_ghost_bytes + s.mfu_ghost_bytes <= 2 * s.c, "{s:?}");
    });
}
