//! The futex `RwLock`: size, exclusion, writer preference, wake-ups.

use multiarc_lock::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Runs `f` on a thread and fails the test if it does not finish in time.
fn within(seconds: u64, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(seconds)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("did not finish in {seconds} s: lost wake-up?")
        }
    }
}

#[test]
fn an_rwlock_is_two_words() {
    assert_eq!(std::mem::size_of::<RwLock<()>>(), 8);
}

#[test]
fn writers_exclude_everyone_readers_share() {
    within(120, || {
        let lock = Arc::new(RwLock::new((0u64, 0u64)));
        let readers_inside = Arc::new(AtomicU64::new(0));
        let max_readers_inside = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..12)
            .map(|t| {
                let lock = Arc::clone(&lock);
                let inside = Arc::clone(&readers_inside);
                let max_inside = Arc::clone(&max_readers_inside);
                thread::spawn(move || {
                    for i in 0..5_000u64 {
                        if t % 3 == 0 {
                            let mut pair = lock.write();
                            assert_eq!(inside.load(Ordering::SeqCst), 0, "reader inside a write");
                            pair.0 += 1;
                            if i.is_multiple_of(64) {
                                thread::yield_now();
                            }
                            pair.1 += 1;
                        } else {
                            let pair = lock.read();
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            max_inside.fetch_max(now, Ordering::SeqCst);
                            assert_eq!(pair.0, pair.1, "torn write seen by a reader");
                            if i.is_multiple_of(64) {
                                thread::yield_now();
                            }
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*lock.read(), (20_000, 20_000));
    });
}

#[test]
fn readers_hold_the_lock_together() {
    let lock = RwLock::new(1);
    let a = lock.read();
    let b = lock.try_read().expect("a second reader gets in");
    assert!(lock.try_write().is_none());
    assert_eq!(*a + *b, 2);
    drop((a, b));
    let mut w = lock.try_write().expect("free again");
    assert!(lock.try_read().is_none());
    *w = 7;
    drop(w);
    assert_eq!(lock.into_inner(), 7);
}

#[test]
fn a_writer_is_not_starved_by_readers() {
    within(120, || {
        let lock = Arc::new(RwLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        // Readers overlap continuously: without writer preference the lock
        // would never be free of readers.
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _guard = lock.read();
                        thread::sleep(Duration::from_micros(200));
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        for _ in 0..100 {
            *lock.write() += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(*lock.read(), 100);
    });
}

#[test]
fn no_lost_wake_up_with_many_sleeping_readers_and_writers() {
    within(120, || {
        let lock = Arc::new(RwLock::new(0u64));
        let handles: Vec<_> = (0..32)
            .map(|t| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for i in 0..50u64 {
                        if (t + i).is_multiple_of(4) {
                            let mut n = lock.write();
                            *n += 1;
                            if n.is_multiple_of(25) {
                                thread::sleep(Duration::from_millis(2));
                            }
                        } else {
                            let n = lock.read();
                            if i.is_multiple_of(10) {
                                thread::sleep(Duration::from_micros(500));
                            }
                            std::hint::black_box(*n);
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let writes: u64 = (0..32u64)
            .map(|t| (0..50u64).filter(|i| (t + i).is_multiple_of(4)).count() as u64)
            .sum();
        assert_eq!(*lock.read(), writes);
    });
}

#[test]
fn get_mut_and_debug() {
    let mut lock = RwLock::new(String::from("a"));
    lock.get_mut().push('b');
    assert_eq!(format!("{lock:?}"), "RwLock { data: \"ab\" }");
    let guard = lock.write();
    assert_eq!(format!("{lock:?}"), "RwLock { data: <locked> }");
    drop(guard);
}

#[test]
fn the_reader_count_limit_is_enforced() {
    let lock = RwLock::new(());
    let guards: Vec<_> = (0..65_534)
        .map(|_| lock.try_read().expect("room for this reader"))
        .collect();
    assert!(lock.try_read().is_none(), "the count is full");
    assert!(lock.try_write().is_none());
    let overflow = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(lock.read())));
    assert!(overflow.is_err(), "one reader too many must panic");
    drop(guards);
    drop(lock.write());
    assert!(lock.try_write().is_some());
}
