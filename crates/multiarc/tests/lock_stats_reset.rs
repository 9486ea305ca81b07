//! `lockstat::reset` (alone in its test binary: it clears process-wide state).

use multiarc::lock::lockstat;
use multiarc::lock::{LockId, Mutex};

#[test]
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
