//! The cache's own I/O threads, for the async path's second-tier reads: a
//! task that misses memory and finds its key on the device hands the read
//! to these threads and awaits a [`Completion`], so no thread of the
//! caller's runtime blocks on the device. Runtime-agnostic: plain threads,
//! a queue, and a waker.
//!
//! The threads start on the first read (a cache never read that way has
//! none), at most [`IO_THREADS`], and are stopped and joined when the pool
//! is dropped (with the cache). Each thread sleeps on the queue's condvar
//! holding no cache lock; a job is one [`SecondTier::read`](super::SecondTier::read).

use crate::mem::sync::{unpoisoned, LockUnpoisoned};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

/// The most I/O threads a pool starts (second-tier reads in flight at once).
pub(crate) const IO_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// A small pool of I/O threads, started on demand.
pub(crate) struct IoPool {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
}

struct Queue {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
    stopping: bool,
}

impl Default for IoPool {
    fn default() -> Self {
        IoPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    idle: 0,
                    stopping: false,
                }),
                work: Condvar::new(),
            }),
            threads: Mutex::new(Vec::new()),
        }
    }
}

impl IoPool {
    /// Runs `f` on one of the pool's threads and returns the future of its
    /// value (which is `None` if no thread could be started to run it).
    pub(crate) fn run<T, F>(&self, f: F) -> Completion<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slot = Arc::new(Mutex::new(Slot {
            value: None,
            closed: false,
            waker: None,
        }));
        let sender = Sender(Arc::clone(&slot));
        let job: Job = Box::new(move || sender.send(f()));
        let start_one = {
            let mut q = self.shared.queue.lock_unpoisoned();
            q.jobs.push_back(job);
            q.idle < q.jobs.len()
        };
        self.shared.work.notify_one();
        if start_one {
            let mut threads = self.threads.lock_unpoisoned();
            if threads.len() < IO_THREADS {
                let shared = Arc::clone(&self.shared);
                match std::thread::Builder::new()
                    .name("multiarc-io".into())
                    .spawn(move || shared.serve())
                {
                    Ok(t) => threads.push(t),
                    Err(e) if threads.is_empty() => {
                        log::warn!("cannot start an I/O thread for second-tier reads: {e}");
                        // No thread to run them: drop the jobs (their
                        // completions then say so) rather than run them here.
                        drop(threads);
                        let jobs = std::mem::take(&mut self.shared.queue.lock_unpoisoned().jobs);
                        drop(jobs);
                    }
                    // The threads running will get to it.
                    Err(e) => log::warn!("cannot start another I/O thread: {e}"),
                }
            }
        }
        Completion(slot)
    }
}

impl Shared {
    /// An I/O thread: runs jobs until the pool stops and its queue is empty.
    fn serve(&self) {
        let mut q = self.queue.lock_unpoisoned();
        loop {
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                // A job that panics closes its completion (its sender is
                // dropped in the unwind) and leaves the thread serving.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                    log::error!("a second-tier read panicked on an I/O thread");
                }
                q = self.queue.lock_unpoisoned();
            } else if q.stopping {
                return;
            } else {
                q.idle += 1;
                q = unpoisoned(self.work.wait(q));
                q.idle -= 1;
            }
        }
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        self.shared.queue.lock_unpoisoned().stopping = true;
        self.shared.work.notify_all();
        for t in unpoisoned(self.threads.get_mut()).drain(..) {
            let _ = t.join();
        }
    }
}

/// Where a job leaves its value for the task awaiting it.
struct Slot<T> {
    value: Option<T>,
    /// The job is gone without a value (dropped, or it panicked).
    closed: bool,
    waker: Option<Waker>,
}

/// The job's end of a [`Completion`]: sends the value, or on drop without
/// one, closes it; either wakes the awaiting task.
struct Sender<T>(Arc<Mutex<Slot<T>>>);

impl<T> Sender<T> {
    fn send(self, value: T) {
        self.0.lock_unpoisoned().value = Some(value);
        // The drop below wakes the task.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock_unpoisoned();
            s.closed = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The value of a job run on the pool: `Some` once it is done, `None` if
/// the job ended without one (it panicked, or the pool stopped first).
pub(crate) struct Completion<T>(Arc<Mutex<Slot<T>>>);

impl<T> Future for Completion<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.0.lock_unpoisoned();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.closed {
            return Poll::Ready(None);
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::task::Wake;

    /// Wakes a parked thread.
    struct Unpark(std::thread::Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// `f`'s value; panics after 10 s.
    fn block_on<F: Future>(f: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        let start = std::time::Instant::now();
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            let waited = start.elapsed();
            assert!(waited.as_secs() < 10, "a job did not complete");
            std::thread::park_timeout(std::time::Duration::from_secs(10) - waited);
        }
    }

    /// Jobs give their values; a job that panics gives `None` and the pool
    /// goes on serving, within its bound of threads; dropping the pool
    /// joins them.
    #[test]
    fn jobs_complete_and_a_panicking_job_closes_its_completion() {
        let pool = IoPool::default();
        assert_eq!(block_on(pool.run(|| 7)), Some(7));
        // More than the pool's threads: each must survive its job's panic.
        for _ in 0..2 * IO_THREADS {
            let panicked = pool.run(|| -> u32 { panic!("a job panics (expected by the test)") });
            assert_eq!(block_on(panicked), None);
        }
        let many: Vec<_> = (0..32u32).map(|i| pool.run(move || i * 2)).collect();
        for (i, c) in (0u32..).zip(many) {
            assert_eq!(block_on(c), Some(i * 2));
        }
        let threads = pool.threads.lock_unpoisoned().len();
        assert!((1..=IO_THREADS).contains(&threads), "{threads} threads");
        drop(pool);
    }
}
