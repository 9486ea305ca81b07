//! Model checks of the lock state machines with loom: every interleaving (up
//! to the preemption bound) of a few threads, with the futex replaced by an
//! emulation in which a lost wake-up is a deadlock loom reports. The data
//! lives in loom's `UnsafeCell`, so a missing happens-before edge between a
//! release and the next acquisition is reported as a data race.
//!
//! Run with:
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=/work/target-loom cargo test -p multiarc-lock --release --test loom_lock
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use multiarc_lock::{LockId, LockstatExt, Mutex, RwLock};

fn model(preemption_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemption_bound);
    builder.check(f);
}

/// Increments the counter behind `lock` (as an unsynchronised read-modify-write).
fn increment(lock: &Mutex<UnsafeCell<u32>>) {
    let guard = lock.lock();
    // SAFETY: the guard gives exclusive access; loom checks that it does.
    guard.with_mut(|n| unsafe { *n += 1 });
}

fn read(lock: &Mutex<UnsafeCell<u32>>) -> u32 {
    let guard = lock.lock();
    // SAFETY: as in `increment`.
    guard.with(|n| unsafe { *n })
}

fn mutex_threads(threads: u32, traced: bool) {
    let lock = Arc::new(Mutex::new(UnsafeCell::new(0)));
    if traced {
        lock.set_lockstat(Some(LockId::new("loom.mutex", 0)));
    }
    let handles: Vec<_> = (1..threads)
        .map(|_| {
            let lock = Arc::clone(&lock);
            thread::spawn(move || increment(&lock))
        })
        .collect();
    increment(&lock);
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(read(&lock), threads);
}

#[test]
fn mutex_two_threads() {
    model(3, || mutex_threads(2, false));
}

#[test]
fn mutex_three_threads() {
    model(2, || mutex_threads(3, false));
}

#[test]
fn traced_mutex_two_threads() {
    model(3, || mutex_threads(2, true));
}

#[test]
fn mutex_lock_twice_against_try_lock() {
    model(3, || {
        let lock = Arc::new(Mutex::new(UnsafeCell::new(0)));
        let other = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                increment(&lock);
                increment(&lock);
            })
        };
        if let Some(guard) = lock.try_lock() {
            // SAFETY: the guard gives exclusive access.
            guard.with_mut(|n| unsafe { *n += 10 });
        }
        other.join().unwrap();
        let n = read(&lock);
        assert!(n == 2 || n == 12, "{n}");
    });
}

/// Writers keep the two halves equal; readers must never see them differ.
fn rwlock_threads(writers: usize, readers: usize, traced: bool) {
    let lock = Arc::new(RwLock::new((UnsafeCell::new(0u32), UnsafeCell::new(0u32))));
    if traced {
        lock.set_lockstat(Some(LockId::new("loom.rwlock", 0)));
    }
    let mut handles = Vec::new();
    for i in 0..writers + readers {
        let lock = Arc::clone(&lock);
        handles.push(thread::spawn(move || {
            if i < writers {
                let guard = lock.write();
                // SAFETY: the write guard gives exclusive access.
                guard.0.with_mut(|a| unsafe { *a += 1 });
                // SAFETY: as above.
                guard.1.with_mut(|b| unsafe { *b += 1 });
            } else {
                let guard = lock.read();
                // SAFETY: the read guard excludes writers.
                let a = guard.0.with(|a| unsafe { *a });
                // SAFETY: as above.
                let b = guard.1.with(|b| unsafe { *b });
                assert_eq!(a, b);
            }
        }));
    }
    for handle in handles {
        handle.join().unwrap();
    }
    let guard = lock.read();
    // SAFETY: all threads are joined; the read guard excludes writers anyway.
    let total = guard.0.with(|a| unsafe { *a });
    assert_eq!(total as usize, writers);
}

#[test]
fn rwlock_one_writer_two_readers() {
    model(2, || rwlock_threads(1, 2, false));
}

#[test]
fn rwlock_two_writers_one_reader() {
    model(2, || rwlock_threads(2, 1, false));
}

#[test]
fn traced_rwlock_writer_and_reader() {
    model(3, || rwlock_threads(1, 1, true));
}

#[test]
fn traced_rwlock_two_writers_one_reader() {
    model(2, || rwlock_threads(2, 1, true));
}

#[test]
fn rwlock_reader_waits_behind_a_writer() {
    model(3, || {
        let lock = Arc::new(RwLock::new(UnsafeCell::new(0u32)));
        let reader = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                let guard = lock.read();
                // SAFETY: the read guard excludes writers.
                guard.with(|n| unsafe { *n })
            })
        };
        {
            let guard = lock.write();
            // SAFETY: the write guard gives exclusive access.
            guard.with_mut(|n| unsafe { *n = 1 });
        }
        let seen = reader.join().unwrap();
        assert!(seen == 0 || seen == 1);
    });
}
