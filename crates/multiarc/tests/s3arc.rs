//! The S3ARC policy (`Policy::S3arc`) in the concurrent cache: threads
//! hitting, inserting, loading, removing and resizing while the evict
//! thread evicts over several sublists, and a second tier fed from its
//! lists. (Request by request at one sublist, against its page model:
//! `tests/differential.rs`.)

mod common;

use multiarc::{Builder, Cache, Policy};
use rand::RngExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// `len` bytes that say which key and version they are.
fn stamped(key: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(key as u8) ^ (version as u8); len];
    v[..8].copy_from_slice(&key.to_le_bytes());
    if len >= 16 {
        v[8..16].copy_from_slice(&version.to_le_bytes());
    }
    v
}

/// `bytes` are some version of `key`'s, whole.
fn check(key: u64, bytes: &[u8]) {
    assert!(bytes.len() >= 16, "key {key}: {} bytes", bytes.len());
    let version = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(
        bytes,
        &stamped(key, version, bytes.len())[..],
        "corrupt buffer for key {key}"
    );
}

/// Runs `f` on a thread and fails if it does not finish within `limit`.
fn with_watchdog(limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the run hung (waited {limit:?})"),
    }
}

/// Four threads for a second, with the evict thread and four sublists: no
/// wrong bytes, a held buffer never evicted, and afterwards the cache
/// within its target, each ghost list within its share of `c` (80% and
/// 50%), and no hold or anonymous byte leaked.
#[test]
fn s3arc_with_the_evict_thread_under_concurrent_use() {
    with_watchdog(Duration::from_secs(60), || {
        let cache: Cache<u64> = Builder::new()
            .max_bytes(1 << 20)
            .min_bytes(64 << 10)
            .sublists(4)
            .policy(Policy::S3arc)
            .build()
            .unwrap();
        let stop = AtomicBool::new(false);
        let ops = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (cache, stop, ops) = (&cache, &stop, &ops);
                s.spawn(move || {
                    let mut rng = common::rng(0x53A2 + t);
                    let pinned = (1 << 40) + t;
                    let pin = cache.insert(pinned, stamped(pinned, 0, 4096));
                    let (mut n, mut version) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let r: u64 = rng.random();
                        // A skewed key space: some keys come back often
                        // (counts that protect them), most rarely.
                        let key = if r.is_multiple_of(4) {
                            r >> 8
                        } else {
                            (r >> 8) % 400
                        } % 3000;
                        let len = 512 + ((r >> 40) % 8) as usize * 1024;
                        match r % 100 {
                            0..=59 => {
                                if let Some(h) = cache.get(&key) {
                                    check(key, &h);
                                }
                            }
                            60..=79 => {
                                version += 1;
                                check(key, &cache.insert(key, stamped(key, version, len)));
                            }
                            80..=84 => {
                                cache.remove(&key);
                            }
                            85..=98 => {
                                let h = cache.get_or_load(key, || {
                                    Ok::<_, std::io::Error>(stamped(key, 0, len))
                                });
                                check(key, &h.unwrap());
                            }
                            _ => {
                                let max = [256u64 << 10, 1 << 20][(r >> 20) as usize % 2];
                                cache.set_max_bytes(max).unwrap();
                            }
                        }
                        n += 1;
                        if n.is_multiple_of(1024) {
                            check(pinned, &pin);
                            let again = cache.get(&pinned).expect("a held buffer was evicted");
                            check(pinned, &again);
                        }
                    }
                    ops.fetch_add(n, Ordering::Relaxed);
                });
            }
            std::thread::sleep(Duration::from_secs(1));
            stop.store(true, Ordering::Relaxed);
        });
        assert!(ops.load(Ordering::Relaxed) > 1000, "no progress");
        cache.set_max_bytes(1 << 20).unwrap();
        cache.wait_for_eviction();
        let s = cache.stats();
        assert!(s.size <= s.c, "size above target after eviction: {s:?}");
        assert_eq!(s.held_bytes, 0, "holds leaked: {s:?}");
        assert_eq!(s.anon_bytes, 0, "anonymous bytes leaked: {s:?}");
        assert!(s.mru_ghost_bytes <= s.c * 8 / 10, "{s:?}");
        assert!(s.mfu_ghost_bytes <= s.c / 2, "{s:?}");
        assert!(
            (s.c / 200..=s.c / 10).contains(&s.p),
            "p within 0.5%..10% of c: {s:?}"
        );
        assert!(s.mfu_bytes > 0 && s.mru_ghost_hits > 0, "{s:?}");
    });
}

/// A device file of its own, removed first.
fn device(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("multiarc-s3arc-l2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// With a second tier: what memory evicts is fed to the device (from both
/// lists' tails) and comes back from it with its bytes, counted as a ghost
/// hit of its list, as under ARC.
#[test]
fn s3arc_evicted_buffers_come_back_from_the_second_tier() {
    const BLOCK: usize = 4096;
    let path = device("roundtrip");
    let cache: Cache<u64> = Cache::builder()
        .max_bytes(256 << 10)
        .policy(Policy::S3arc)
        .inline_eviction(true)
        .sublists(1)
        .l2(&path, 16 << 20)
        .l2_write_max(128 << 10)
        .l2_headroom(2)
        .l2_feed_interval(Duration::from_millis(5))
        .l2_feed_min_interval(Duration::from_millis(1))
        .build()
        .unwrap();
    // 1000 keys, each read three times when it is new: hit twice on
    // probation, so promoted to MFU, and evicted from there, where the
    // feed looks. (Buffers read once leave the small MRU queue, at most
    // 10% of memory, often before a feed has looked that far: S3ARC's
    // one-hit wonders mostly never reach the second tier.)
    for k in 0..1000 {
        for _ in 0..3 {
            if cache.get(&k).is_none() {
                drop(cache.insert(k, stamped(k, 1, BLOCK)));
            }
        }
    }
    let before = cache.stats();
    assert!(before.l2_writes > 0, "nothing fed: {before:?}");
    let mut found = 0;
    for k in 0..1000u64 {
        if let Some(h) = cache.get(&k) {
            assert_eq!(*h, stamped(k, 1, BLOCK)[..], "wrong bytes for key {k}");
            found += 1;
        }
    }
    let s = cache.stats();
    // Memory holds 64 blocks; the device the rest, but for what was
    // evicted between two feeds.
    assert!(found >= 900, "only {found} of 1000 found: {s:?}");
    assert!(s.l2_hits >= 800, "{s:?}");
    assert_eq!(s.l2_cksum_bad + s.l2_io_errors, 0, "{s:?}");
    assert!(
        s.mru_ghost_hits + s.mfu_ghost_hits >= s.l2_hits,
        "an L2 hit is history: {s:?}"
    );
    drop(cache);
    let _ = std::fs::remove_file(&path);
}
