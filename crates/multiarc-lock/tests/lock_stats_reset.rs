//! `lockstat::reset` (alone in its test binary: it clears process-wide state,
//! so the two tests run one after the other inside one test function).

use multiarc_lock::lockstat;
use multiarc_lock::{LockId, LockstatExt, Mutex};
use std::sync::mpsc;
use std::sync::Arc;

fn reset_clears_and_tracing_continues() {
    let lock = Mutex::new(());
    lock.set_lockstat(Some(LockId::new("reset.me", 0)));
    std::thread::scope(|s| {
        s.spawn(|| drop(lock.lock()));
    });
    drop(lock.lock());
    assert_eq!(lockstat::snapshot().total_acquisitions(), 2);
    lockstat::reset();
    assert!(lockstat::snapshot().rows.is_empty());
    drop(lock.lock());
    let report = lockstat::snapshot();
    assert_eq!(report.rows.len(), 1);
    assert_eq!(report.rows[0].acquisitions, 1);
}

/// A thread that recorded before a reset starts from zero after it.
fn a_live_thread_starts_anew_after_a_reset() {
    lockstat::reset();
    let lock = Arc::new(Mutex::new(()));
    lock.set_lockstat(Some(LockId::new("reset.live", 0)));
    let (orders, inbox) = mpsc::channel::<u32>();
    let (done, finished) = mpsc::channel::<()>();
    let worker = {
        let lock = Arc::clone(&lock);
        std::thread::spawn(move || {
            for times in inbox {
                for _ in 0..times {
                    drop(lock.lock());
                }
                done.send(()).unwrap();
            }
        })
    };
    orders.send(100).unwrap();
    finished.recv().unwrap();
    assert_eq!(lockstat::snapshot().total_acquisitions(), 100);
    lockstat::reset();
    assert_eq!(lockstat::snapshot().total_acquisitions(), 0);
    orders.send(7).unwrap();
    finished.recv().unwrap();
    assert_eq!(lockstat::snapshot().total_acquisitions(), 7);
    drop(orders);
    worker.join().unwrap();
    // The exited thread's counts remain until the next reset.
    assert_eq!(lockstat::snapshot().total_acquisitions(), 7);
}

#[test]
fn reset() {
    reset_clears_and_tracing_continues();
    a_live_thread_starts_anew_after_a_reset();
}
