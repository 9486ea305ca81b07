//! The futex `Mutex`: size, mutual exclusion, wake-ups, API behaviour.

#[cfg(feature = "bench-variants")]
use multiarc_lock::bench_variants::SpinWakeAllMutex;
use multiarc_lock::{set_spin_count, spin_count, Mutex, DEFAULT_SPIN_COUNT};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Runs `f` on a thread and fails the test if it does not finish in time:
/// a lost wake-up shows up as a hang, which this turns into a failure.
fn within(seconds: u64, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(seconds)) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => worker.join().unwrap(), // panicked: re-raise
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("did not finish in {seconds} s: lost wake-up?")
        }
    }
}

#[test]
fn a_mutex_is_one_word() {
    assert_eq!(std::mem::size_of::<Mutex<()>>(), 4);
    assert_eq!(std::mem::size_of::<Mutex<u32>>(), 8);
    #[cfg(feature = "bench-variants")]
    assert_eq!(std::mem::size_of::<SpinWakeAllMutex<()>>(), 4);
}

/// State whose invariant (`a == b`, `log.len() == a`) breaks if two threads
/// are ever inside the critical section at once.
#[derive(Default)]
struct Invariant {
    a: u64,
    b: u64,
    log: Vec<u32>,
}

fn exclusion_stress(threads: u32, iterations: u64) {
    let shared = Arc::new(Mutex::new(Invariant::default()));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for i in 0..iterations {
                    let mut state = shared.lock();
                    assert_eq!(state.a, state.b);
                    state.a += 1;
                    if i.is_multiple_of(64) {
                        thread::yield_now(); // invite others in while held
                    }
                    state.log.push(t);
                    state.b += 1;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let state = Arc::try_unwrap(shared).ok().unwrap().into_inner();
    let total = u64::from(threads) * iterations;
    assert_eq!(
        (state.a, state.b, state.log.len() as u64),
        (total, total, total)
    );
    for t in 0..threads {
        let mine = state.log.iter().filter(|&&x| x == t).count() as u64;
        assert_eq!(mine, iterations, "thread {t}");
    }
}

#[test]
fn mutual_exclusion_under_many_threads() {
    within(120, || exclusion_stress(16, 20_000));
}

#[test]
fn no_lost_wake_up_with_many_sleepers() {
    within(120, || {
        // The holder sleeps inside the critical section, so everyone else
        // goes to sleep on the futex; each release must wake the next one.
        let lock = Arc::new(Mutex::new(0u64));
        let rounds = 20;
        let handles: Vec<_> = (0..32)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for _ in 0..rounds {
                        let mut n = lock.lock();
                        *n += 1;
                        if n.is_multiple_of(50) {
                            thread::sleep(Duration::from_millis(2));
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*lock.lock(), 32 * rounds);
    });
}

#[test]
fn mutual_exclusion_at_several_spin_counts() {
    // The spin count is global; other tests stay correct whatever it is.
    for spins in [0, 3, 200] {
        set_spin_count(spins);
        assert_eq!(spin_count(), spins);
        within(120, || exclusion_stress(8, 10_000));
    }
    set_spin_count(DEFAULT_SPIN_COUNT);
}

#[test]
fn try_lock_fails_while_held_and_succeeds_after() {
    let lock = Mutex::new(5);
    let guard = lock.lock();
    assert!(lock.try_lock().is_none());
    thread::scope(|s| {
        s.spawn(|| assert!(lock.try_lock().is_none()));
    });
    drop(guard);
    let mut guard = lock.try_lock().expect("free after the guard is dropped");
    *guard += 1;
    drop(guard);
    assert_eq!(*lock.lock(), 6);
    assert_eq!(format!("{lock:?}"), "Mutex { data: 6 }");
}

#[test]
fn get_mut_and_into_inner_skip_locking() {
    let mut lock = Mutex::new(vec![1, 2]);
    lock.get_mut().push(3);
    assert_eq!(lock.into_inner(), vec![1, 2, 3]);
}

#[test]
fn a_panic_while_held_does_not_poison() {
    let lock = Arc::new(Mutex::new(1));
    let held = Arc::clone(&lock);
    let result = thread::spawn(move || {
        let _guard = held.lock();
        panic!("dropped with the lock held");
    })
    .join();
    assert!(result.is_err());
    *lock.lock() += 1;
    assert_eq!(*lock.lock(), 2);
}

#[test]
fn unsized_data_behind_the_lock() {
    let lock: &Mutex<[u8]> = &Mutex::new([1u8, 2, 3]);
    lock.lock()[1] = 9;
    assert_eq!(&*lock.lock(), &[1, 9, 3]);
}

#[cfg(feature = "bench-variants")]
#[test]
fn spin_wake_all_variant_excludes() {
    within(120, || {
        let lock = Arc::new(SpinWakeAllMutex::new((0u64, 0u64)));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for i in 0..10_000u64 {
                        let mut pair = lock.lock();
                        assert_eq!(pair.0, pair.1);
                        pair.0 += 1;
                        if i.is_multiple_of(64) {
                            thread::yield_now();
                        }
                        pair.1 += 1;
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let lock = Arc::try_unwrap(lock).ok().unwrap();
        assert_eq!(lock.into_inner(), (80_000, 80_000));
    });
}
