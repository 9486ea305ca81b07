//! Model checks of the async load's hand-over with loom: the in-flight
//! record's waiters, its completion and cancellation (`arc/inflight.rs`).
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 cargo test --release -p multiarc --test loom_async`
//!
//! Each model races two callers of one key, at least one of them a task
//! driven by `loom::future::block_on` (whose waker unparks a loom thread,
//! so a lost wake-up is a deadlock loom reports) or polled once and
//! dropped. In every interleaving: each caller that finishes gets the bytes
//! of the one load that was cached, a load is never left pending (a
//! dropped or abandoned load is taken over), and afterwards no hold is left
//! (a hold taken for a waiter that left is released, whoever releases it).
#![cfg(loom)]

use loom::future::block_on;
use loom::thread;
use multiarc::{Builder, Cache, Stats};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

type Loaded = Result<Vec<u8>, std::io::Error>;

fn cache() -> Arc<Cache<u64>> {
    Arc::new(
        Builder::new()
            .max_bytes(64)
            .min_bytes(1)
            .sublists(1)
            .hash_stripes(2)
            .inline_eviction(true)
            .build()
            .unwrap(),
    )
}

/// `loom::model` with room for the hash table's atomics (see loom_cache.rs).
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut model = loom::model::Builder::new();
    model.max_branches = 20_000;
    model.check(f);
}

/// A loader's future that is pending once (waking its task at once), then
/// gives `bytes`: a load with a window for others to join it.
struct YieldOnce(Option<Vec<u8>>, bool);

impl Future for YieldOnce {
    type Output = Loaded;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Loaded> {
        if !self.1 {
            self.1 = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Ok(self.0.take().expect("polled after done")))
    }
}

fn loads(bytes: u8) -> impl FnOnce() -> YieldOnce {
    move || YieldOnce(Some(vec![bytes]), false)
}

/// A loader that never finishes (its caller is dropped mid-load).
fn never() -> impl FnOnce() -> std::future::Pending<Loaded> {
    std::future::pending
}

fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

fn check_no_holds(s: &Stats) {
    assert_eq!((s.held_bytes, s.anon_bytes), (0, 0), "{s:?}");
}

/// Two tasks miss one key: one loads, the other hits or waits and is woken
/// with the same bytes; one load in all.
#[test]
fn two_tasks_share_one_load() {
    model(|| {
        let cache = cache();
        let other = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || block_on(cache.get_or_load_async(1, loads(1))).unwrap()[0])
        };
        let mine = block_on(cache.get_or_load_async(1, loads(2))).unwrap()[0];
        let theirs = other.join().unwrap();
        assert_eq!(mine, theirs);
        let s = cache.stats();
        assert_eq!(s.loads, 1, "{s:?}");
        check_no_holds(&s);
    });
}

/// The task running the load is dropped mid-load while another task (or
/// it, arriving first) loads: the load is taken over, never left pending,
/// and the survivor gets its own loader's bytes.
#[test]
fn a_dropped_load_is_taken_over() {
    model(|| {
        let cache = cache();
        let dropper = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                let f = std::pin::pin!(cache.get_or_load_async(1, never()));
                // Ready only if the other caller's load was cached first.
                if let Poll::Ready(h) = poll_once(f) {
                    assert_eq!(h.unwrap()[0], 2);
                }
            })
        };
        let mine = block_on(cache.get_or_load_async(1, loads(2))).unwrap()[0];
        assert_eq!(mine, 2);
        dropper.join().unwrap();
        check_no_holds(&cache.stats());
    });
}

/// A thread waits for a task's load that is dropped: the condvar's sleeper
/// is woken too, and loads itself.
#[test]
fn a_dropped_load_wakes_a_waiting_thread() {
    model(|| {
        let cache = cache();
        let dropper = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                let f = std::pin::pin!(cache.get_or_load_async(1, never()));
                if let Poll::Ready(h) = poll_once(f) {
                    assert_eq!(h.unwrap()[0], 2);
                }
            })
        };
        let mine = cache
            .get_or_load(1, || Ok::<_, std::io::Error>(vec![2]))
            .unwrap()[0];
        assert_eq!(mine, 2);
        dropper.join().unwrap();
        check_no_holds(&cache.stats());
    });
}

/// A waiting task is dropped while the load it waits for completes: before
/// the load's record is forgotten (it uncounts itself), between forgetting
/// and completion (the completer releases its hold), or after (it releases
/// its hold itself). No hold is left, in every order.
#[test]
fn a_dropped_waiter_leaves_no_hold() {
    model(|| {
        let cache = cache();
        let loader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || block_on(cache.get_or_load_async(1, loads(1))).unwrap()[0])
        };
        {
            let f = std::pin::pin!(cache.get_or_load_async(1, loads(2)));
            if let Poll::Ready(h) = poll_once(f) {
                assert_eq!(h.unwrap()[0], 1);
            }
        }
        let theirs = loader.join().unwrap();
        assert_eq!(theirs, 1);
        check_no_holds(&cache.stats());
    });
}
