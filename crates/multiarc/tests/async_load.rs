//! `Cache::get_or_load_async` through the public API: one load for many
//! tasks, a load taken over when the future running it is dropped or its
//! loader panics, a failed load's error for every waiter, threads and tasks
//! sharing one load, a second-tier hit read off the task's thread, and a
//! current-thread runtime that keeps running while a load is slow.

use multiarc::{Cache, HitMode, Stats};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const BLOCK: usize = 4096;

fn data_of(key: u64, who: u8) -> Vec<u8> {
    let mut d = vec![who; BLOCK];
    d[..8].copy_from_slice(&key.to_le_bytes());
    d
}

fn cache(mode: HitMode) -> Arc<Cache<u64>> {
    Arc::new(
        Cache::<u64>::builder()
            .max_bytes(1 << 20)
            .hit_mode(mode)
            .build()
            .unwrap(),
    )
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Polls `f` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// Waits (yielding to the runtime) until `cond` holds; panics after 10 s.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `f`'s output; panics if it takes more than 30 s (a load left pending
/// would otherwise hang the test).
async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("stuck: a caller still waits for a load")
}

/// Waits (blocking this thread) until `cond` holds; panics after 10 s.
fn until_blocking(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// No hold left behind (no handle is alive when this is called).
fn check_settled(s: &Stats) {
    assert_eq!((s.held_bytes, s.anon_bytes), (0, 0), "{s:?}");
}

/// A loader that waits for `go`, then panics.
async fn load_then_panic(go: Arc<Notify>) -> Result<Vec<u8>, std::io::Error> {
    go.notified().await;
    panic!("the loader panics (expected by the test)")
}

fn in_both_modes(test: impl Fn(HitMode)) {
    for mode in [HitMode::Lazy, HitMode::Eager] {
        test(mode);
    }
}

#[test]
fn the_futures_are_send_and_the_owned_one_static() {
    fn assert_send<T: Send>(_: &T) {}
    let cache = cache(HitMode::Lazy);
    let f = cache.get_or_load_async(1, || async { Ok::<_, std::io::Error>(vec![1]) });
    assert_send(&f);
    drop(f);
    fn assert_spawnable<T: Send + 'static>(_: &T) {}
    let f = cache
        .clone()
        .get_or_load_async_owned(1, || async { Ok::<_, std::io::Error>(vec![1]) });
    assert_spawnable(&f);
}

/// Many tasks miss one block at once: one loader runs, every task waits
/// for it (none blocks a runtime thread), all get its bytes.
#[test]
fn many_tasks_on_one_block_run_one_loader() {
    in_both_modes(|mode| {
        const TASKS: u64 = 64;
        let cache = cache(mode);
        let rt = multi_thread();
        let loads = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(Notify::new());
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|i| {
                    let (cache, loads, go) = (cache.clone(), loads.clone(), go.clone());
                    tokio::spawn(async move {
                        let h = cache
                            .get_or_load_async(7, || async move {
                                loads.fetch_add(1, Ordering::SeqCst);
                                go.notified().await;
                                Ok::<_, std::io::Error>(data_of(7, i as u8))
                            })
                            .await
                            .unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            // Every other task is waiting for the one load before it ends.
            until("the waiters", || cache.stats().load_waits == TASKS - 1).await;
            assert_eq!(loads.load(Ordering::SeqCst), 1);
            go.notify_one();
            let mut seen = Vec::new();
            for t in tasks {
                seen.push(within(t).await.unwrap());
            }
            assert!(
                seen.iter().all(|d| *d == seen[0]),
                "{mode:?}: different bytes"
            );
            assert_eq!(&seen[0][..8], &7u64.to_le_bytes());
        });
        let s = cache.stats();
        assert_eq!(
            (s.loads, s.load_waits, s.inserts),
            (1, TASKS - 1, 1),
            "{mode:?}: {s:?}"
        );
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        check_settled(&s);
        assert!(cache.contains(&7));
    });
}

/// The task running a load is aborted (its future dropped) while others
/// wait: the load is abandoned and a waiter takes it over with its own
/// loader; every waiter gets that loader's bytes; nothing is left held.
#[test]
fn a_dropped_loader_is_taken_over_by_a_waiter() {
    in_both_modes(|mode| {
        const WAITERS: u64 = 8;
        let cache = cache(mode);
        let rt = multi_thread();
        let loads = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let leader = {
                let cache = cache.clone();
                tokio::spawn(async move {
                    let r = cache
                        .get_or_load_async(3, || async {
                            std::future::pending::<()>().await;
                            Ok::<_, std::io::Error>(data_of(3, 0xff))
                        })
                        .await;
                    r.map(|h| h.to_vec())
                })
            };
            until("the leader's load", || cache.stats().loads == 1).await;
            let waiters: Vec<_> = (0..WAITERS)
                .map(|i| {
                    let (cache, loads) = (cache.clone(), loads.clone());
                    tokio::spawn(async move {
                        let h = cache
                            .get_or_load_async(3, || async move {
                                loads.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                Ok::<_, std::io::Error>(data_of(3, i as u8))
                            })
                            .await
                            .unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            until("the waiters", || cache.stats().load_waits == WAITERS).await;
            leader.abort();
            assert!(within(leader).await.unwrap_err().is_cancelled());
            let mut seen = Vec::new();
            for t in waiters {
                seen.push(within(t).await.unwrap());
            }
            assert!(
                seen.iter().all(|d| *d == seen[0]),
                "{mode:?}: different bytes"
            );
            assert_ne!(
                seen[0][BLOCK - 1],
                0xff,
                "{mode:?}: the dropped load's bytes"
            );
        });
        // One waiter took the load over; the others waited for it.
        assert_eq!(loads.load(Ordering::SeqCst), 1, "{mode:?}");
        let s = cache.stats();
        assert_eq!(s.loads, 2, "{mode:?}: {s:?}");
        check_settled(&s);
        assert!(cache.contains(&3));
    });
}

/// A future dropped after its first poll, with no other caller: the load
/// is not left pending; the next caller, a thread or a task, loads.
#[test]
fn a_load_dropped_alone_is_not_left_pending() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let mut f = Box::pin(cache.get_or_load_async(5, || async {
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(data_of(5, 1))
        }));
        assert!(poll_once(&mut f).is_pending());
        drop(f);
        // A thread next (on its own, so that a load left pending fails the
        // test instead of hanging it).
        let (tx, rx) = mpsc::channel();
        let thread = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let h = cache
                    .get_or_load(5, || Ok::<_, std::io::Error>(data_of(5, 2)))
                    .unwrap();
                tx.send(h.to_vec()).unwrap();
            })
        };
        let got = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{mode:?}: the dropped load was left pending"));
        assert_eq!(got, data_of(5, 2));
        thread.join().unwrap();
        cache.remove(&5);
        let mut f = Box::pin(cache.get_or_load_async(5, || async {
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(data_of(5, 1))
        }));
        assert!(poll_once(&mut f).is_pending());
        drop(f);
        let mut g = Box::pin(
            cache.get_or_load_async(5, || async { Ok::<_, std::io::Error>(data_of(5, 3)) }),
        );
        match poll_once(&mut g) {
            Poll::Ready(Ok(h)) => assert_eq!(*h, data_of(5, 3)[..]),
            _ => panic!("{mode:?}: the second load did not complete at once"),
        }
        drop(g);
        check_settled(&cache.stats());
    });
}

/// Waiting tasks dropped before the load completes leave no hold behind
/// (the hold a completed load took for them is released).
#[test]
fn dropped_waiters_leave_no_hold() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let rt = multi_thread();
        rt.block_on(async {
            let go = Arc::new(Notify::new());
            let leader = {
                let (cache, go) = (cache.clone(), go.clone());
                tokio::spawn(async move {
                    let h = cache
                        .get_or_load_async(9, || async move {
                            go.notified().await;
                            Ok::<_, std::io::Error>(data_of(9, 1))
                        })
                        .await
                        .unwrap();
                    h.len()
                })
            };
            until("the leader's load", || cache.stats().loads == 1).await;
            // Waiters polled once, then dropped: some before the load
            // completes, some after (their holds were taken).
            let waiter = || {
                Box::pin(
                    cache.get_or_load_async(9, || async { Ok::<_, std::io::Error>(data_of(9, 2)) }),
                )
            };
            let mut before: Vec<_> = (0..4).map(|_| waiter()).collect();
            let mut after: Vec<_> = (0..4).map(|_| waiter()).collect();
            for f in before.iter_mut().chain(after.iter_mut()) {
                assert!(poll_once(f).is_pending());
            }
            assert_eq!(cache.stats().load_waits, 8);
            drop(before);
            go.notify_one();
            assert_eq!(within(leader).await.unwrap(), BLOCK);
            assert!(
                cache.stats().held_bytes > 0,
                "the completed load's holds for the waiters"
            );
            drop(after);
        });
        let s = cache.stats();
        assert_eq!(s.loads, 1, "{mode:?}: {s:?}");
        check_settled(&s);
    });
}

/// A loader that panics: the waiting callers (tasks and a thread) retry
/// with their own loaders, one of which runs; the panic reaches only the
/// task whose loader panicked.
#[test]
fn a_panicking_loader_lets_waiters_retry() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let rt = multi_thread();
        let loads = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let go = Arc::new(Notify::new());
            let leader = {
                let (cache, go) = (cache.clone(), go.clone());
                tokio::spawn(async move {
                    let r = cache.get_or_load_async(4, || load_then_panic(go)).await;
                    r.map(|h| h.len())
                })
            };
            until("the leader's load", || cache.stats().loads == 1).await;
            let tasks: Vec<_> = (0..4u8)
                .map(|i| {
                    let (cache, loads) = (cache.clone(), loads.clone());
                    tokio::spawn(async move {
                        let h = cache
                            .get_or_load_async(4, || async move {
                                loads.fetch_add(1, Ordering::SeqCst);
                                Ok::<_, std::io::Error>(data_of(4, i))
                            })
                            .await
                            .unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            let thread = {
                let (cache, loads) = (cache.clone(), loads.clone());
                std::thread::spawn(move || {
                    let h = cache
                        .get_or_load(4, || {
                            loads.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, std::io::Error>(data_of(4, 9))
                        })
                        .unwrap();
                    h.to_vec()
                })
            };
            until("the waiters", || cache.stats().load_waits == 5).await;
            go.notify_one();
            assert!(within(leader).await.unwrap_err().is_panic());
            let mut seen = Vec::new();
            for t in tasks {
                seen.push(within(t).await.unwrap());
            }
            seen.push(
                within(tokio::task::spawn_blocking(move || thread.join().unwrap()))
                    .await
                    .unwrap(),
            );
            assert!(
                seen.iter().all(|d| *d == seen[0]),
                "{mode:?}: different bytes"
            );
        });
        // Only the first to retry loaded (the others waited for it or hit).
        assert_eq!(loads.load(Ordering::SeqCst), 1, "{mode:?}");
        check_settled(&cache.stats());
    });
}

/// A failing load: every waiter, task or thread, gets the loader's error
/// (the same one), and nothing is cached.
#[test]
fn a_failed_load_gives_every_waiter_its_error() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let rt = multi_thread();
        rt.block_on(async {
            let go = Arc::new(Notify::new());
            let leader = {
                let (cache, go) = (cache.clone(), go.clone());
                tokio::spawn(async move {
                    let r = cache
                        .get_or_load_async(2, || async move {
                            go.notified().await;
                            Err::<Vec<u8>, _>(std::io::Error::other("the store is down"))
                        })
                        .await;
                    r.map(|h| h.len())
                })
            };
            until("the leader's load", || cache.stats().loads == 1).await;
            let tasks: Vec<_> = (0..4)
                .map(|_| {
                    let cache = cache.clone();
                    tokio::spawn(async move {
                        let r = cache
                            .get_or_load_async(2, || async {
                                Ok::<_, std::io::Error>(data_of(2, 1))
                            })
                            .await;
                        r.map(|h| h.len())
                    })
                })
                .collect();
            let thread = {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    cache
                        .get_or_load(2, || Ok::<_, std::io::Error>(data_of(2, 1)))
                        .map(|h| h.len())
                })
            };
            until("the waiters", || cache.stats().load_waits == 5).await;
            go.notify_one();
            let first = within(leader).await.unwrap().unwrap_err();
            assert_eq!(first.to_string(), "the store is down");
            for t in tasks {
                let err = within(t).await.unwrap().unwrap_err();
                assert!(Arc::ptr_eq(&err, &first), "{mode:?}: another error");
            }
            let err = within(tokio::task::spawn_blocking(move || thread.join().unwrap()))
                .await
                .unwrap()
                .unwrap_err();
            assert!(Arc::ptr_eq(&err, &first), "{mode:?}: another error");
        });
        let s = cache.stats();
        assert_eq!(
            (s.loads, s.load_failures, s.inserts),
            (1, 1, 0),
            "{mode:?}: {s:?}"
        );
        assert!(!cache.contains(&2));
        check_settled(&s);
    });
}

/// Threads and tasks missing one key share one load, whichever runs it:
/// an async loader with waiting threads, and a thread's loader with
/// waiting tasks.
#[test]
fn sync_and_async_callers_share_one_load() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let rt = multi_thread();
        let loads = Arc::new(AtomicUsize::new(0));
        // A task loads; threads wait.
        rt.block_on(async {
            let go = Arc::new(Notify::new());
            let leader = {
                let (cache, go, loads) = (cache.clone(), go.clone(), loads.clone());
                tokio::spawn(async move {
                    let h = cache
                        .get_or_load_async(10, || async move {
                            loads.fetch_add(1, Ordering::SeqCst);
                            go.notified().await;
                            Ok::<_, std::io::Error>(data_of(10, 1))
                        })
                        .await
                        .unwrap();
                    h.to_vec()
                })
            };
            until("the task's load", || cache.stats().loads == 1).await;
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let (cache, loads) = (cache.clone(), loads.clone());
                    std::thread::spawn(move || {
                        let h = cache
                            .get_or_load(10, || {
                                loads.fetch_add(1, Ordering::SeqCst);
                                Ok::<_, std::io::Error>(data_of(10, 2))
                            })
                            .unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            until("the threads", || cache.stats().load_waits == 3).await;
            go.notify_one();
            assert_eq!(within(leader).await.unwrap(), data_of(10, 1));
            for t in threads {
                let d = within(tokio::task::spawn_blocking(move || t.join().unwrap()))
                    .await
                    .unwrap();
                assert_eq!(d, data_of(10, 1), "{mode:?}");
            }
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1, "{mode:?}");
        // A thread loads; tasks wait.
        let (release, gate) = mpsc::channel::<()>();
        let leader = {
            let (cache, loads) = (cache.clone(), loads.clone());
            std::thread::spawn(move || {
                let h = cache
                    .get_or_load(11, || {
                        loads.fetch_add(1, Ordering::SeqCst);
                        gate.recv().unwrap();
                        Ok::<_, std::io::Error>(data_of(11, 1))
                    })
                    .unwrap();
                h.to_vec()
            })
        };
        until_blocking("the thread's load", || cache.stats().loads == 2);
        rt.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|_| {
                    let (cache, loads) = (cache.clone(), loads.clone());
                    tokio::spawn(async move {
                        let h = cache
                            .get_or_load_async(11, || async move {
                                loads.fetch_add(1, Ordering::SeqCst);
                                Ok::<_, std::io::Error>(data_of(11, 2))
                            })
                            .await
                            .unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            until("the tasks", || cache.stats().load_waits == 3 + 8).await;
            release.send(()).unwrap();
            for t in tasks {
                assert_eq!(within(t).await.unwrap(), data_of(11, 1), "{mode:?}");
            }
        });
        assert_eq!(leader.join().unwrap(), data_of(11, 1));
        assert_eq!(loads.load(Ordering::SeqCst), 2, "{mode:?}");
        check_settled(&cache.stats());
    });
}

/// A current-thread runtime (one thread for every task) with many tasks
/// keeps running while one load is slow: tasks waiting for it do not park
/// the thread. The slow load is released only by another task of the same
/// runtime, after the others are all done, so a parked thread would never
/// finish: a watchdog thread tells that apart from slowness.
#[test]
fn a_current_thread_runtime_runs_on_while_a_load_is_slow() {
    const WAITERS: u64 = 50;
    const OTHERS: u64 = 200;
    let cache = cache(HitMode::Lazy);
    let (done_tx, done_rx) = mpsc::channel();
    let runner = {
        let cache = cache.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(async {
                let go = Arc::new(Notify::new());
                let others_done = Arc::new(AtomicUsize::new(0));
                let mut tasks = Vec::new();
                for _ in 0..WAITERS {
                    let (cache, go) = (cache.clone(), go.clone());
                    tasks.push(tokio::spawn(async move {
                        let h = cache
                            .get_or_load_async(1, || async move {
                                go.notified().await;
                                Ok::<_, std::io::Error>(data_of(1, 1))
                            })
                            .await
                            .unwrap();
                        assert_eq!(*h, data_of(1, 1)[..]);
                    }));
                }
                for k in 100..100 + OTHERS {
                    let (cache, others_done) = (cache.clone(), others_done.clone());
                    tasks.push(tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        let h = cache
                            .get_or_load_async(k, || async move {
                                tokio::task::yield_now().await;
                                Ok::<_, std::io::Error>(data_of(k, 2))
                            })
                            .await
                            .unwrap();
                        assert_eq!(*h, data_of(k, 2)[..]);
                        others_done.fetch_add(1, Ordering::SeqCst);
                    }));
                }
                // The releaser: only when everything else ran.
                let releaser = {
                    let cache = cache.clone();
                    tokio::spawn(async move {
                        while others_done.load(Ordering::SeqCst) < OTHERS as usize
                            || cache.stats().load_waits < WAITERS - 1
                        {
                            tokio::task::yield_now().await;
                        }
                        go.notify_one();
                    })
                };
                releaser.await.unwrap();
                for t in tasks {
                    within(t).await.unwrap();
                }
            });
            done_tx.send(()).unwrap();
        })
    };
    if done_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        panic!("the current-thread runtime stopped: a task parked its thread");
    }
    runner.join().unwrap();
    let s = cache.stats();
    assert_eq!(s.loads, 1 + OTHERS, "{s:?}");
    check_settled(&s);
}

/// A fresh device path on the disk (O_DIRECT needs one; tmpfs refuses it).
fn device(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("async-load-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// A second-tier hit through the async path: the bytes come back from the
/// device, read on the cache's I/O threads, once for many tasks, with no
/// loader run. Off the polling thread: a first poll returns `Pending` while
/// the read runs (an inline read would finish in it; an I/O thread may win
/// the race now and then, so it is asked of several keys).
#[test]
fn an_l2_hit_is_read_off_the_task_thread() {
    in_both_modes(|mode| {
        let path = device(&format!("l2-hit-{mode:?}"));
        let cache = Arc::new(
            Cache::<u64>::builder()
                .max_bytes(16 * BLOCK as u64)
                .hit_mode(mode)
                .inline_eviction(true)
                .l2(&path, 4 << 20)
                .l2_write_max(128 << 10)
                .build()
                .unwrap(),
        );
        for k in 0..128u64 {
            drop(cache.insert(k, data_of(k, 7)));
        }
        cache.l2_feed();
        let on_device: Vec<u64> = (0..128u64)
            .filter(|k| !cache.contains(k) && cache.l2_contains(k))
            .collect();
        assert!(
            on_device.len() > 16,
            "{mode:?}: {} keys on the device",
            on_device.len()
        );
        let no_loader = || async { Err::<Vec<u8>, _>(std::io::Error::other("must not load")) };
        let rt = multi_thread();
        let before = cache.stats();
        let mut pending_first = 0;
        for &k in &on_device[1..9] {
            let mut f = Box::pin(cache.get_or_load_async(k, no_loader));
            let h = match poll_once(&mut f) {
                Poll::Ready(h) => h,
                Poll::Pending => {
                    pending_first += 1;
                    rt.block_on(within(f))
                }
            }
            .unwrap();
            assert_eq!(*h, data_of(k, 7)[..], "{mode:?}");
        }
        assert!(
            pending_first > 0,
            "{mode:?}: every device read ran on the polling thread"
        );
        let s = cache.stats();
        assert_eq!(s.l2_hits - before.l2_hits, 8, "{mode:?}: {s:?}");
        // Many tasks on one key on the device: one read.
        let k = on_device[0];
        let before = cache.stats();
        rt.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|_| {
                    let cache = cache.clone();
                    tokio::spawn(async move {
                        let h = cache.get_or_load_async(k, no_loader).await.unwrap();
                        h.to_vec()
                    })
                })
                .collect();
            for t in tasks {
                assert_eq!(within(t).await.unwrap(), data_of(k, 7), "{mode:?}");
            }
        });
        let s = cache.stats();
        assert_eq!(s.l2_hits - before.l2_hits, 1, "{mode:?}: {s:?}");
        assert_eq!(s.loads, 0, "{mode:?}: {s:?}");
        assert!(cache.contains(&k));
        // A key the tier does not hold goes to the loader.
        let h = rt
            .block_on(
                cache.get_or_load_async(1000, || async {
                    Ok::<_, std::io::Error>(data_of(1000, 1))
                }),
            )
            .unwrap();
        assert_eq!(*h, data_of(1000, 1)[..]);
        drop(h);
        drop(cache);
        let _ = std::fs::remove_file(&path);
    });
}

/// An owned handle from a spawned task: the future is `'static` (given to
/// `tokio::spawn` as it is), the handle leaves the task and outlives the
/// caller's `Arc` of the cache, and its hold is released when it goes.
#[test]
fn an_owned_handle_leaves_its_task() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        let rt = multi_thread();
        let (a, b) = rt.block_on(async {
            let spawn = |i: u8| {
                tokio::spawn(
                    cache
                        .clone()
                        .get_or_load_async_owned(21, move || async move {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            Ok::<_, std::io::Error>(data_of(21, i))
                        }),
                )
            };
            let (a, b) = (spawn(1), spawn(2));
            (
                within(a).await.unwrap().unwrap(),
                within(b).await.unwrap().unwrap(),
            )
        });
        assert_eq!(*a, *b, "{mode:?}: two loads");
        assert_eq!(*a.key(), 21);
        let s = cache.stats();
        assert_eq!(s.loads, 1, "{mode:?}: {s:?}");
        assert!(s.held_bytes >= BLOCK as u64, "{mode:?}: {s:?}");
        let c = a.clone();
        drop((a, b));
        let s = cache.stats();
        assert!(s.held_bytes >= BLOCK as u64, "{mode:?}: {s:?}");
        drop(c);
        check_settled(&cache.stats());
        // An owned handle outlives the cache value: its bytes stay readable.
        let h = rt
            .block_on(
                cache.clone().get_or_load_async_owned(22, || async {
                    Ok::<_, std::io::Error>(data_of(22, 3))
                }),
            )
            .unwrap();
        drop(cache);
        assert_eq!(*h, data_of(22, 3)[..]);
        drop(h);
    });
}

/// `is_loading` is true exactly while a load of the key is in flight (a
/// hint for prefetchers: not while it is cached, nor after it was dropped).
#[test]
fn is_loading_tells_a_load_in_flight() {
    in_both_modes(|mode| {
        let cache = cache(mode);
        assert!(!cache.is_loading(&9));
        let go = Arc::new(Notify::new());
        let mut f = Box::pin(cache.get_or_load_async(9, || {
            let go = go.clone();
            async move {
                go.notified().await;
                Ok::<_, std::io::Error>(data_of(9, 1))
            }
        }));
        assert!(poll_once(&mut f).is_pending());
        assert!(cache.is_loading(&9), "{mode:?}");
        assert!(!cache.is_loading(&10), "{mode:?}");
        go.notify_one();
        match poll_once(&mut f) {
            Poll::Ready(Ok(h)) => assert_eq!(*h, data_of(9, 1)[..]),
            _ => panic!("{mode:?}: the load did not complete"),
        }
        drop(f);
        assert!(!cache.is_loading(&9), "{mode:?}: cached, not loading");
        assert!(cache.contains(&9));
        cache.remove(&9);
        let mut g = Box::pin(cache.get_or_load_async(9, || async {
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(data_of(9, 2))
        }));
        assert!(poll_once(&mut g).is_pending());
        assert!(cache.is_loading(&9), "{mode:?}");
        drop(g);
        assert!(!cache.is_loading(&9), "{mode:?}: the dropped load is over");
        check_settled(&cache.stats());
    });
}
