//! Lock statistics counted by traced locks. Each test uses its own lock
//! classes (the statistics are process-wide and the tests run in parallel).

use multiarc_lock::lockstat::{self, Report};
use multiarc_lock::{LockId, LockstatExt, Mutex, RwLock};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

fn class_report(class: &str) -> Report {
    lockstat::snapshot().filter_class_prefix(class)
}

#[test]
fn every_acquisition_of_a_contended_lock_is_counted() {
    let lock = Arc::new(Mutex::new(0u64));
    lock.set_lockstat(Some(LockId::new("stats.counted", 0)));
    let threads = 4;
    let iterations: u64 = 20_000;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = Arc::clone(&lock);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                for i in 0..iterations {
                    let mut n = lock.lock();
                    *n += 1;
                    if i.is_multiple_of(256) {
                        thread::yield_now();
                    }
                }
                // try_lock acquisitions count too.
                drop(lock.try_lock());
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let total = threads as u64 * iterations;
    assert_eq!(*lock.lock(), total);
    let report = class_report("stats.counted");
    assert_eq!(report.rows.len(), 1);
    let row = report.rows[0];
    assert_eq!(row.id, LockId::new("stats.counted", 0));
    // Every lock() and successful try_lock(), plus the final check above.
    let try_locks = row.acquisitions - total - 1;
    assert!(try_locks <= threads as u64, "{row:?}");
    assert!(row.contended <= row.acquisitions);
    assert!(row.wait_ns_max <= row.wait_ns_total);
    assert_eq!(row.contended > 0, row.wait_ns_total > 0, "{row:?}");
}

#[test]
fn a_blocked_acquisition_is_counted_as_contended_with_its_wait() {
    let lock = Arc::new(Mutex::new(()));
    lock.set_lockstat(Some(LockId::new("stats.blocked", 3)));
    let guard = lock.lock();
    let (arriving, arrived) = mpsc::channel();
    let waiter = {
        let lock = Arc::clone(&lock);
        thread::spawn(move || {
            arriving.send(()).unwrap();
            drop(lock.lock());
        })
    };
    arrived.recv().unwrap();
    // Long enough for the waiter to reach the lock and sleep on it.
    thread::sleep(Duration::from_millis(300));
    drop(guard);
    waiter.join().unwrap();
    let report = class_report("stats.blocked");
    let row = report.rows[0];
    assert_eq!((row.acquisitions, row.contended), (2, 1), "{row:?}");
    assert!(row.wait_ns_max >= 200_000_000, "{row:?}");
    assert_eq!(row.wait_ns_max, row.wait_ns_total);
    assert_eq!(report.hottest_contended_share(), 1.0);
    assert_eq!(row.id, LockId::new("stats.blocked", 3));
    assert_eq!(row.wait_ns_avg(), row.wait_ns_total);
}

#[test]
fn rwlock_read_and_write_acquisitions_are_counted() {
    let lock = Arc::new(RwLock::new(0u64));
    lock.set_lockstat(Some(LockId::new("stats.rw", 0)));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                for _ in 0..5_000 {
                    if t == 0 {
                        *lock.write() += 1;
                    } else {
                        std::hint::black_box(*lock.read());
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(*lock.read(), 5_000);
    let row = class_report("stats.rw").rows[0];
    assert_eq!(row.acquisitions, 20_001);
    assert!(row.contended <= row.acquisitions);
}

#[test]
fn untraced_and_stopped_locks_are_not_counted() {
    let untraced = Mutex::new(());
    drop(untraced.lock());
    let lock = Mutex::new(());
    let id = LockId::new("stats.stopped", 0);
    lock.set_lockstat(Some(id));
    drop(lock.lock());
    drop(lock.lock());
    lock.set_lockstat(None);
    drop(lock.lock());
    let rw = RwLock::new(());
    rw.set_lockstat(Some(LockId::new("stats.stopped", 1)));
    drop(rw.read());
    rw.set_lockstat(None);
    drop(rw.write());
    let report = class_report("stats.stopped");
    let counts: Vec<(u32, u64)> = report
        .rows
        .iter()
        .map(|r| (r.id.index, r.acquisitions))
        .collect();
    assert_eq!(counts, vec![(0, 2), (1, 1)]);
}

#[test]
fn classes_sum_their_instances() {
    let locks: Vec<Mutex<()>> = (0..4).map(|_| Mutex::new(())).collect();
    for (i, lock) in locks.iter().enumerate() {
        lock.set_lockstat(Some(LockId::new("stats.class.sublist", i as u32)));
        let times = if i == 3 { 70 } else { 10 };
        for _ in 0..times {
            drop(lock.lock());
        }
    }
    // A second lock under an existing id shares its row.
    let twin = Mutex::new(());
    twin.set_lockstat(Some(LockId::new("stats.class.sublist", 0)));
    drop(twin.lock());
    let report = class_report("stats.class.");
    assert_eq!(report.total_acquisitions(), 101);
    assert!((report.hottest_acquisition_share() - 70.0 / 101.0).abs() < 1e-12);
    assert_eq!(report.hottest_contended_share(), 0.0);
    let classes = report.by_class();
    assert_eq!(classes.len(), 1);
    assert_eq!(classes[0].id, LockId::new("stats.class.sublist", 4));
    assert_eq!(classes[0].acquisitions, 101);
    assert_eq!(report.total_contended(), 0);
}
