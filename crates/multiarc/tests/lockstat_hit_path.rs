//! Which locks a cache hit takes, counted by lockstat: in the eager mode a
//! hit takes its sublist lock (to unlink on the first hold, to relink on the
//! last release) and its hash stripe's; in the lazy mode it takes no lock at
//! all (its probe validates with the stripe's sequence count instead).
//! (One test per binary: lockstat's counters are process-wide.)

use multiarc::lock::lockstat;
use multiarc::{Builder, Cache, HitMode};

fn hit_path_locks(mode: HitMode) -> (u64, u64) {
    let cache: Cache<u64> = Builder::new()
        .max_bytes(1 << 20)
        .hit_mode(mode)
        .build()
        .unwrap();
    for k in 0..100 {
        drop(cache.insert(k, vec![0; 64]));
    }
    cache.wait_for_eviction();
    cache.set_lockstat(true);
    lockstat::reset();
    for round in 0..10 {
        for k in 0..100 {
            let h = cache.get(&k).expect("everything fits");
            assert_eq!(h.len(), 64, "round {round}");
        }
    }
    let report = lockstat::snapshot();
    cache.set_lockstat(false);
    let sublist: u64 = report
        .rows
        .iter()
        .filter(|r| r.id.class.ends_with(".sublist"))
        .map(|r| r.acquisitions)
        .sum();
    let stripe: u64 = report.filter_class_prefix("hash.").total_acquisitions();
    (sublist, stripe)
}

#[test]
fn lazy_hits_take_no_sublist_lock_and_eager_hits_do() {
    let (eager_sublist, eager_stripe) = hit_path_locks(HitMode::Eager);
    // 1000 hits: unlink + relink each.
    assert_eq!(eager_sublist, 2000);
    assert_eq!(eager_stripe, 2000, "lookup + last release");
    let (lazy_sublist, lazy_stripe) = hit_path_locks(HitMode::Lazy);
    assert_eq!(lazy_sublist, 0, "a lazy hit took a sublist lock");
    assert_eq!(lazy_stripe, 0, "a lazy hit took its stripe lock");
}
