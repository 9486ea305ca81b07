//! The S3ARC policy (`Policy::S3arc`) with a second tier fed from its
//! lists. (Under concurrent use with the evict thread:
//! `tests/stress.rs`; request by request at one sublist, against its page
//! model: `tests/differential.rs`.)

use multiarc::{Cache, Policy};
use std::path::PathBuf;
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
