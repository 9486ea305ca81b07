//! Write-back: the bound on dirty bytes and the flusher thread.
//!
//! Dirty blocks are counted against one budget shared by every file opened
//! with the same [`WriteBack`] (a mount shares one across its files, as the
//! kernel's dirty limits span all files). Past `flush_threshold` bytes the
//! flusher is woken; at `dirty_max` writers wait for it. The flusher also
//! runs every `interval`, so data written and never synced still reaches the
//! store.
//!
//! When write-back fails, nothing is dropped and nothing spins:
//! - the blocks stay dirty, and the file's error is reported to each open
//!   description once, at its next `sync_all` or `close` (see `errseq`);
//! - the flusher retries that file with exponential back-off (100 ms up to
//!   30 s; an explicit sync always tries at once);
//! - a writer that must wait for room while write-back makes no progress
//!   and its last attempt failed gets that error (the store's errno: ENOSPC,
//!   EFBIG, EIO) instead of waiting: no writer waits forever on a store
//!   that cannot take the data.
//!
//! This module knows files only through [`Flushable`], which the file layer
//! implements: the dependency points one way.

use multiarc_lock::poison::{unpoisoned, LockUnpoisoned};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the flusher needs of a file.
pub(crate) trait Flushable: Send + Sync {
    /// Writes back every dirty block (without syncing the store); returns
    /// the first error, which the file has also recorded for its readers.
    fn write_back(&self) -> io::Result<()>;
    /// Dirty blocks now.
    fn dirty_blocks(&self) -> usize;
    /// Whether no open description is left (the flusher then forgets the
    /// file once it is clean).
    fn is_closed(&self) -> bool;
    /// The file's name, for messages.
    fn name(&self) -> &str;
    /// The newest write-back error's text, for messages.
    fn last_error_text(&self) -> Option<String>;
}

/// First retry delay after a failed write-back of a file.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// Longest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a waiting writer waits for progress before it takes a failing
/// write-back's error instead.
const WRITER_PATIENCE: Duration = Duration::from_millis(100);

/// A registered file and when the flusher may next retry it.
struct Entry {
    file: Arc<dyn Flushable>,
    /// (consecutive failures, no background retry before).
    backoff: Mutex<(u32, Option<Instant>)>,
}

impl Entry {
    fn due(&self, now: Instant) -> bool {
        let b = self.backoff.lock_unpoisoned();
        b.1.is_none_or(|t| now >= t)
    }

    fn outcome(&self, ok: bool) {
        let mut b = self.backoff.lock_unpoisoned();
        if ok {
            *b = (0, None);
        } else {
            b.0 = b.0.saturating_add(1);
            let delay = BACKOFF_FIRST
                .saturating_mul(1u32 << (b.0 - 1).min(16))
                .min(BACKOFF_MAX);
            b.1 = Some(Instant::now() + delay);
        }
    }
}

fn same_file(a: &Arc<dyn Flushable>, b: &Arc<dyn Flushable>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Limits and timing of write-back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBackConfig {
    /// Most dirty bytes held at once; writers wait beyond it.
    pub dirty_max: u64,
    /// Dirty bytes at which the flusher starts writing back.
    pub flush_threshold: u64,
    /// Time between periodic write-back passes.
    pub interval: Duration,
}

impl Default for WriteBackConfig {
    fn default() -> Self {
        WriteBackConfig {
            dirty_max: 64 << 20,
            flush_threshold: 16 << 20,
            interval: Duration::from_secs(5),
        }
    }
}

/// Write-back figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteBackStats {
    /// Dirty bytes now.
    pub dirty_bytes: u64,
    /// The configured bound.
    pub dirty_max: u64,
    /// Blocks written back.
    pub flushed_blocks: u64,
    /// Bytes written back.
    pub flushed_bytes: u64,
    /// Failed write-back attempts (the data stayed dirty).
    pub write_errors: u64,
    /// Times a writer waited for dirty bytes to drain.
    pub writer_waits: u64,
    /// Writers that got a write-back error instead of waiting (the budget
    /// was full and write-back was failing).
    pub writer_errors: u64,
    /// Dirty blocks dropped unwritten: of files whose last name was removed
    /// before their last close, or past the largest size the store takes
    /// (`EFBIG`). The files' descriptions are told (see `sync_all`).
    pub discarded_blocks: u64,
    /// Flusher passes.
    pub passes: u64,
}

impl WriteBackStats {
    /// The figures as metrics (component `writeback`; see
    /// `multiarc::metrics`), in the order a mount's `arcstats` shows them.
    pub fn metrics(&self) -> Vec<multiarc::metrics::Metric> {
        use multiarc::metrics::Metric;
        [
            Metric::gauge("dirty_bytes", "Dirty bytes now.", self.dirty_bytes),
            Metric::gauge(
                "dirty_max",
                "The bound on dirty bytes (bytes).",
                self.dirty_max,
            ),
            Metric::counter(
                "flushed_blocks",
                "Blocks written back.",
                self.flushed_blocks,
            ),
            Metric::counter("flushed_bytes", "Bytes written back.", self.flushed_bytes),
            Metric::counter(
                "write_errors",
                "Failed write-back attempts (the data stayed dirty).",
                self.write_errors,
            ),
            Metric::counter(
                "writer_waits",
                "Times a writer waited for dirty bytes to drain.",
                self.writer_waits,
            ),
            Metric::counter(
                "writer_errors",
                "Writers that got a write-back error instead of waiting.",
                self.writer_errors,
            ),
            Metric::counter(
                "discarded_blocks",
                "Dirty blocks dropped unwritten (files removed before their last close, or \
                 past the largest size the store takes).",
                self.discarded_blocks,
            ),
            Metric::counter("flusher_passes", "Flusher passes.", self.passes),
        ]
        .into_iter()
        .map(|m| m.in_component("writeback"))
        .collect()
    }
}

/// The error a failing write-back left for waiting writers.
struct Failing {
    kind: io::ErrorKind,
    code: Option<i32>,
    message: String,
}

pub(crate) struct Shared {
    pub(crate) config: WriteBackConfig,
    dirty_bytes: AtomicU64,
    files: Mutex<Vec<Arc<Entry>>>,
    /// Wakes the flusher: (kicked, stopping).
    wake: Mutex<(bool, bool)>,
    wake_cv: Condvar,
    /// Writers waiting for room.
    room: Mutex<()>,
    room_cv: Condvar,
    /// Set by a failed store write, cleared by a successful one.
    failing: Mutex<Option<Failing>>,
    pub(crate) flushed_blocks: AtomicU64,
    pub(crate) flushed_bytes: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) discarded_blocks: AtomicU64,
    writer_waits: AtomicU64,
    writer_errors: AtomicU64,
    passes: AtomicU64,
}

impl Shared {
    /// The state of a service with `config` (checked by the caller), nothing
    /// dirty, no file registered.
    fn new(config: WriteBackConfig) -> Shared {
        Shared {
            config,
            dirty_bytes: AtomicU64::new(0),
            files: Mutex::new(Vec::new()),
            wake: Mutex::new((false, false)),
            wake_cv: Condvar::new(),
            room: Mutex::new(()),
            room_cv: Condvar::new(),
            failing: Mutex::new(None),
            flushed_blocks: AtomicU64::new(0),
            flushed_bytes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            discarded_blocks: AtomicU64::new(0),
            writer_waits: AtomicU64::new(0),
            writer_errors: AtomicU64::new(0),
            passes: AtomicU64::new(0),
        }
    }

    pub(crate) fn add_dirty(&self, bytes: u64) {
        let now = self.dirty_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if now >= self.config.flush_threshold && now - bytes < self.config.flush_threshold {
            self.kick();
        }
    }

    pub(crate) fn sub_dirty(&self, bytes: u64) {
        self.dirty_bytes.fetch_sub(bytes, Ordering::Relaxed);
        // Taking the lock orders this against a writer between its check
        // and its wait, so the wake-up cannot be lost.
        drop(self.room.lock_unpoisoned());
        self.room_cv.notify_all();
    }

    /// Records the outcome of one store write of write-back.
    pub(crate) fn note_write(&self, result: Result<(), &io::Error>) {
        let mut f = self.failing.lock_unpoisoned();
        *f = result.err().map(|e| Failing {
            kind: e.kind(),
            code: super::error::os_error_code(e),
            message: e.to_string(),
        });
        if result.is_err() {
            drop(f);
            // Waiting writers may now take the error.
            drop(self.room.lock_unpoisoned());
            self.room_cv.notify_all();
        }
    }

    fn failing_error(&self) -> Option<io::Error> {
        let f = self.failing.lock_unpoisoned();
        f.as_ref()
            .map(|f| super::error::rebuilt(f.kind, f.code, f.message.clone()))
    }

    /// Waits until `bytes` more dirty bytes fit under the bound (or nothing
    /// is dirty: a single write larger than the bound must still proceed).
    /// Fails with the write-back's error when no room comes because write-back
    /// is failing: no progress for a while, and the last store write failed.
    pub(crate) fn wait_for_room(&self, bytes: u64) -> io::Result<()> {
        let fits = |d: u64| d == 0 || d.saturating_add(bytes) <= self.config.dirty_max;
        if fits(self.dirty_bytes.load(Ordering::Relaxed)) {
            return Ok(());
        }
        self.writer_waits.fetch_add(1, Ordering::Relaxed);
        let mut g = self.room.lock_unpoisoned();
        let mut progress = self.flushed_blocks.load(Ordering::Relaxed);
        let mut since = Instant::now();
        loop {
            if fits(self.dirty_bytes.load(Ordering::Relaxed)) {
                return Ok(());
            }
            let now = self.flushed_blocks.load(Ordering::Relaxed);
            if now != progress {
                progress = now;
                since = Instant::now();
            } else if since.elapsed() >= WRITER_PATIENCE {
                if let Some(e) = self.failing_error() {
                    self.writer_errors.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            }
            self.kick();
            // Woken by every block cleaned and every failed write; the
            // timeout bounds how long a writer goes without looking.
            g = unpoisoned(self.room_cv.wait_timeout(g, WRITER_PATIENCE / 4)).0;
        }
    }

    pub(crate) fn kick(&self) {
        self.wake.lock_unpoisoned().0 = true;
        self.wake_cv.notify_one();
    }

    pub(crate) fn register(&self, file: Arc<dyn Flushable>) {
        self.files.lock_unpoisoned().push(Arc::new(Entry {
            file,
            backoff: Mutex::new((0, None)),
        }));
    }

    /// Forgets `file` (whose dirty blocks its owner has dropped).
    pub(crate) fn deregister(&self, file: &Arc<dyn Flushable>) {
        self.files
            .lock_unpoisoned()
            .retain(|e| !same_file(&e.file, file));
    }

    fn entries(&self) -> Vec<Arc<Entry>> {
        self.files.lock_unpoisoned().clone()
    }

    /// One pass over every file; files in back-off are skipped unless
    /// `force`. Files closed by their owner leave once they are clean; until
    /// then the flusher keeps retrying them, so a closed file's dirty data is
    /// never dropped while the process lives. Returns the first error.
    fn pass(&self, force: bool) -> io::Result<()> {
        self.passes.fetch_add(1, Ordering::Relaxed);
        let first = self.write_back_files(force);
        self.files
            .lock_unpoisoned()
            .retain(|e| !(e.file.is_closed() && e.file.dirty_blocks() == 0));
        first
    }

    /// Writes back every file (those in back-off only if `force`), noting
    /// each outcome for the back-off; returns the first error.
    fn write_back_files(&self, force: bool) -> io::Result<()> {
        let now = Instant::now();
        let mut first = Ok(());
        for e in self.entries() {
            if !force && !e.due(now) {
                continue;
            }
            let r = e.file.write_back();
            e.outcome(r.is_ok());
            if let Err(err) = r {
                if first.is_ok() {
                    first = Err(err);
                }
            }
        }
        first
    }
}

/// The write-back service: a dirty-byte budget and a flusher thread, shared
/// by the files opened with it. Dropping the last handle (the files hold
/// one) writes everything back and stops the thread.
pub struct WriteBack {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for WriteBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBack")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl WriteBack {
    /// Starts a flusher with `config`. Fails if the bounds are zero or the
    /// threshold exceeds the maximum.
    pub fn new(config: WriteBackConfig) -> std::io::Result<Arc<WriteBack>> {
        let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_owned());
        if config.dirty_max == 0 {
            return Err(invalid("write-back: dirty_max must be above 0"));
        }
        if config.flush_threshold > config.dirty_max {
            return Err(invalid(
                "write-back: flush_threshold must not exceed dirty_max",
            ));
        }
        if config.interval.is_zero() {
            return Err(invalid("write-back: interval must be above 0"));
        }
        let shared = Arc::new(Shared::new(config));
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("multiarc-flush".into())
            .spawn(move || flusher(s))?;
        Ok(Arc::new(WriteBack {
            shared,
            thread: Some(thread),
        }))
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Current figures.
    pub fn stats(&self) -> WriteBackStats {
        let s = &self.shared;
        WriteBackStats {
            dirty_bytes: s.dirty_bytes.load(Ordering::Relaxed),
            dirty_max: s.config.dirty_max,
            flushed_blocks: s.flushed_blocks.load(Ordering::Relaxed),
            flushed_bytes: s.flushed_bytes.load(Ordering::Relaxed),
            write_errors: s.write_errors.load(Ordering::Relaxed),
            writer_waits: s.writer_waits.load(Ordering::Relaxed),
            writer_errors: s.writer_errors.load(Ordering::Relaxed),
            discarded_blocks: s.discarded_blocks.load(Ordering::Relaxed),
            passes: s.passes.load(Ordering::Relaxed),
        }
    }

    /// Writes back every file's dirty blocks now, back-off or not (without
    /// syncing the stores); returns the first error.
    pub fn flush_all(&self) -> std::io::Result<()> {
        self.shared.write_back_files(true)
    }
}

impl Drop for WriteBack {
    fn drop(&mut self) {
        self.shared.wake.lock_unpoisoned().1 = true;
        self.shared.wake_cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn flusher(shared: Arc<Shared>) {
    loop {
        let stopping = {
            let mut w = shared.wake.lock_unpoisoned();
            if !w.0 && !w.1 {
                w = unpoisoned(shared.wake_cv.wait_timeout(w, shared.config.interval)).0;
            }
            w.0 = false;
            w.1
        };
        let _ = shared.pass(stopping);
        if stopping {
            // Last pass done; what could not be written is logged, since no
            // one is left to call sync_all. The files are let go (they
            // hold this service's state: keeping them would be a cycle).
            let files = std::mem::take(&mut *shared.files.lock_unpoisoned());
            for e in files {
                let n = e.file.dirty_blocks();
                if n > 0 {
                    log::error!(
                        "write-back stopped with {n} dirty blocks of {} not written: {}",
                        e.file.name(),
                        e.file
                            .last_error_text()
                            .unwrap_or_else(|| "no error recorded".into())
                    );
                }
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{os_error_code, with_context};
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    /// A file the tests steer: its dirty blocks, whether it is closed, and
    /// the errno its write-backs fail with (none: a write-back cleans it).
    struct FakeFile {
        name: String,
        dirty: AtomicUsize,
        closed: AtomicBool,
        fail_with: Mutex<Option<i32>>,
        write_backs: AtomicU64,
    }

    impl FakeFile {
        fn new(name: &str, dirty: usize) -> Arc<FakeFile> {
            Arc::new(FakeFile {
                name: name.into(),
                dirty: AtomicUsize::new(dirty),
                closed: AtomicBool::new(false),
                fail_with: Mutex::new(None),
                write_backs: AtomicU64::new(0),
            })
        }

        fn failing(name: &str, dirty: usize, errno: i32) -> Arc<FakeFile> {
            let f = FakeFile::new(name, dirty);
            *f.fail_with.lock_unpoisoned() = Some(errno);
            f
        }

        fn write_backs(&self) -> u64 {
            self.write_backs.load(Ordering::SeqCst)
        }
    }

    impl Flushable for FakeFile {
        fn write_back(&self) -> io::Result<()> {
            self.write_backs.fetch_add(1, Ordering::SeqCst);
            match *self.fail_with.lock_unpoisoned() {
                Some(code) => Err(io::Error::from_raw_os_error(code)),
                None => {
                    self.dirty.store(0, Ordering::SeqCst);
                    Ok(())
                }
            }
        }

        fn dirty_blocks(&self) -> usize {
            self.dirty.load(Ordering::SeqCst)
        }

        fn is_closed(&self) -> bool {
            self.closed.load(Ordering::SeqCst)
        }

        fn name(&self) -> &str {
            &self.name
        }

        fn last_error_text(&self) -> Option<String> {
            self.fail_with
                .lock_unpoisoned()
                .map(|code| io::Error::from_raw_os_error(code).to_string())
        }
    }

    /// Limits `dirty_max` and `flush_threshold`; no periodic pass during a
    /// test.
    fn config(dirty_max: u64, flush_threshold: u64) -> WriteBackConfig {
        WriteBackConfig {
            dirty_max,
            flush_threshold,
            interval: Duration::from_secs(3600),
        }
    }

    fn register(shared: &Shared, file: &Arc<FakeFile>) {
        shared.register(Arc::clone(file) as Arc<dyn Flushable>);
    }

    fn registered(shared: &Shared) -> Vec<String> {
        shared
            .files
            .lock_unpoisoned()
            .iter()
            .map(|e| e.file.name().to_owned())
            .collect()
    }

    fn kicked(shared: &Shared) -> bool {
        std::mem::take(&mut shared.wake.lock_unpoisoned().0)
    }

    /// Polls `done` for up to 10 s.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn new_rejects_a_zero_bound_a_threshold_above_it_and_a_zero_interval() {
        let bad = [
            (config(0, 0), "dirty_max"),
            (config(100, 101), "flush_threshold"),
            (
                WriteBackConfig {
                    interval: Duration::ZERO,
                    ..config(100, 50)
                },
                "interval",
            ),
        ];
        for (c, field) in bad {
            let e = WriteBack::new(c.clone()).expect_err(field);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{c:?}");
            assert!(e.to_string().contains(field), "{c:?}: {e}");
        }
        // A threshold equal to the bound is allowed.
        let wb = WriteBack::new(config(100, 100)).unwrap();
        assert_eq!(wb.stats().dirty_max, 100);
    }

    /// The flusher is woken when the dirty bytes reach the threshold, not at
    /// every write past it; and again after they fell below it.
    #[test]
    fn reaching_the_threshold_kicks_the_flusher_once() {
        let s = Shared::new(config(100, 50));
        s.add_dirty(40);
        assert!(!kicked(&s), "below the threshold");
        s.add_dirty(10);
        assert!(kicked(&s), "reached the threshold");
        s.add_dirty(10);
        assert!(!kicked(&s), "already past it");
        s.sub_dirty(60);
        assert_eq!(s.dirty_bytes.load(Ordering::Relaxed), 0);
        s.add_dirty(70);
        assert!(kicked(&s), "crossed it again in one step");
    }

    /// A writer that fits proceeds at once, as does one larger than the
    /// whole bound when nothing is dirty (it could never fit otherwise).
    #[test]
    fn room_is_given_at_once_when_it_fits_or_nothing_is_dirty() {
        let s = Shared::new(config(100, 50));
        s.wait_for_room(1000).unwrap();
        s.add_dirty(40);
        s.wait_for_room(60).unwrap();
        assert_eq!(s.writer_waits.load(Ordering::Relaxed), 0);
    }

    /// A writer waiting for room proceeds once write-back cleans enough.
    #[test]
    fn a_waiting_writer_proceeds_when_blocks_are_cleaned() {
        let s = Shared::new(config(100, 50));
        s.add_dirty(100);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| s.wait_for_room(10));
            eventually("the writer waits", || {
                s.writer_waits.load(Ordering::Relaxed) == 1
            });
            assert!(!writer.is_finished(), "no room yet");
            s.sub_dirty(10);
            writer.join().unwrap().unwrap();
        });
        assert_eq!(s.writer_errors.load(Ordering::Relaxed), 0);
    }

    /// With the budget full, no progress and the last store write failed, a
    /// writer gets that error (kind, errno, text) after its patience instead
    /// of waiting for ever.
    #[test]
    fn a_writer_gets_the_failing_write_back_error_instead_of_waiting() {
        let s = Shared::new(config(100, 50));
        s.add_dirty(100);
        let cause = with_context(
            &io::Error::from_raw_os_error(libc::ENOSPC),
            "f: write-back of bytes 0..100 failed",
        );
        s.note_write(Err(&cause));
        let start = Instant::now();
        let e = s.wait_for_room(10).unwrap_err();
        assert!(start.elapsed() >= WRITER_PATIENCE, "gave up too early");
        assert_eq!(os_error_code(&e), Some(libc::ENOSPC));
        assert_eq!(e.kind(), cause.kind());
        assert_eq!(e.to_string(), cause.to_string());
        assert_eq!(s.writer_waits.load(Ordering::Relaxed), 1);
        assert_eq!(s.writer_errors.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_successful_store_write_clears_the_failing_error() {
        let s = Shared::new(config(100, 50));
        assert!(s.failing_error().is_none());
        s.note_write(Err(&io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(
            s.failing_error().as_ref().and_then(os_error_code),
            Some(libc::EIO)
        );
        s.note_write(Ok(()));
        assert!(s.failing_error().is_none());
    }

    /// Each failure doubles the wait before the next background retry,
    /// from `BACKOFF_FIRST` up to `BACKOFF_MAX`; a success clears it.
    #[test]
    fn backoff_doubles_up_to_its_cap_and_a_success_clears_it() {
        let e = Entry {
            file: FakeFile::new("backoff", 0),
            backoff: Mutex::new((0, None)),
        };
        let retry_at = |e: &Entry| e.backoff.lock_unpoisoned().1.expect("in back-off");
        assert!(e.due(Instant::now()), "never failed");
        for failures in 1..=12u32 {
            let before = Instant::now();
            e.outcome(false);
            let after = Instant::now();
            let delay = BACKOFF_FIRST
                .saturating_mul(1 << (failures - 1))
                .min(BACKOFF_MAX);
            let at = retry_at(&e);
            assert!(
                at >= before + delay && at <= after + delay,
                "failure {failures}: retry not {delay:?} later"
            );
            assert!(!e.due(before), "failure {failures}: due at once");
            assert!(e.due(at), "failure {failures}: not due at its time");
        }
        assert_eq!(e.backoff.lock_unpoisoned().0, 12);
        // Many failures: the shift stays bounded and the delay capped.
        for _ in 0..100 {
            e.outcome(false);
        }
        assert!(retry_at(&e) <= Instant::now() + BACKOFF_MAX);
        e.outcome(true);
        assert_eq!(*e.backoff.lock_unpoisoned(), (0, None));
        assert!(e.due(Instant::now()));
    }

    /// A pass tries every file not in back-off and returns the first error;
    /// a forced pass (a sync, or the last pass) tries those in back-off too.
    #[test]
    fn a_pass_skips_files_in_backoff_unless_forced() {
        let s = Shared::new(config(100, 50));
        let bad = FakeFile::failing("bad", 1, libc::EIO);
        let good = FakeFile::new("good", 3);
        register(&s, &bad);
        register(&s, &good);
        let e = s.pass(false).unwrap_err();
        assert_eq!(os_error_code(&e), Some(libc::EIO));
        assert_eq!((bad.write_backs(), good.write_backs()), (1, 1));
        assert_eq!(good.dirty_blocks(), 0);
        // `bad` waits out its back-off; the pass succeeds without it.
        s.pass(false).unwrap();
        assert_eq!((bad.write_backs(), good.write_backs()), (1, 2));
        assert!(s.pass(true).is_err());
        assert_eq!(bad.write_backs(), 2);
        assert_eq!(s.passes.load(Ordering::Relaxed), 3);
    }

    /// A closed file stays registered (and retried) while it is dirty and
    /// leaves at the first pass that finds it clean; open files stay.
    #[test]
    fn a_pass_lets_go_of_closed_files_once_they_are_clean() {
        let s = Shared::new(config(100, 50));
        let closed_failing = FakeFile::failing("closed-failing", 2, libc::EIO);
        let closed_ok = FakeFile::new("closed-ok", 1);
        let open_clean = FakeFile::new("open-clean", 0);
        for f in [&closed_failing, &closed_ok] {
            f.closed.store(true, Ordering::SeqCst);
        }
        for f in [&closed_failing, &closed_ok, &open_clean] {
            register(&s, f);
        }
        assert!(s.pass(false).is_err());
        assert_eq!(registered(&s), ["closed-failing", "open-clean"]);
        assert_eq!(Arc::strong_count(&closed_ok), 1, "still held");
        *closed_failing.fail_with.lock_unpoisoned() = None;
        s.pass(true).unwrap();
        assert_eq!(registered(&s), ["open-clean"]);
        assert_eq!(Arc::strong_count(&closed_failing), 1, "still held");
    }

    #[test]
    fn deregister_forgets_only_that_file() {
        let s = Shared::new(config(100, 50));
        let (a, b) = (FakeFile::new("a", 0), FakeFile::new("b", 0));
        register(&s, &a);
        register(&s, &b);
        s.deregister(&(Arc::clone(&a) as Arc<dyn Flushable>));
        assert_eq!(registered(&s), ["b"]);
        // Forgetting a file that is not registered changes nothing.
        s.deregister(&(Arc::clone(&a) as Arc<dyn Flushable>));
        assert_eq!(registered(&s), ["b"]);
    }

    /// Reaching the threshold wakes the flusher thread, which writes back
    /// long before its (one hour) interval; `flush_all` retries a file in
    /// back-off at once.
    #[test]
    fn the_flusher_runs_when_kicked_and_flush_all_ignores_backoff() {
        let wb = WriteBack::new(config(100, 50)).unwrap();
        let file = FakeFile::new("kicked", 1);
        register(wb.shared(), &file);
        wb.shared().add_dirty(50);
        eventually("the flusher writes back", || file.write_backs() >= 1);
        assert_eq!(file.dirty_blocks(), 0);
        let bad = FakeFile::failing("flush-all", 1, libc::EIO);
        register(wb.shared(), &bad);
        let e = wb.flush_all().unwrap_err();
        assert_eq!(os_error_code(&e), Some(libc::EIO));
        let tried = bad.write_backs();
        assert!(wb.flush_all().is_err(), "in back-off, but forced");
        assert!(bad.write_backs() > tried);
        assert!(wb.stats().passes >= 1);
    }

    /// Dropping the service runs a last, forced pass, lets go of every file
    /// (no cycle keeps them), and logs an error for each file left dirty,
    /// naming it, its dirty blocks and its error; a clean one logs nothing.
    #[test]
    fn stopping_writes_back_lets_go_and_logs_what_was_not_written() {
        crate::test_log::capture();
        let wb = WriteBack::new(config(100, 50)).unwrap();
        let clean = FakeFile::new("stop-ok", 2);
        let stuck = FakeFile::failing("stop-stuck", 3, libc::ENOSPC);
        register(wb.shared(), &clean);
        register(wb.shared(), &stuck);
        drop(wb);
        assert_eq!(clean.dirty_blocks(), 0, "not written back at the stop");
        assert!(stuck.write_backs() >= 1, "not tried at the stop");
        assert_eq!(Arc::strong_count(&clean), 1, "still held");
        assert_eq!(Arc::strong_count(&stuck), 1, "still held");
        assert!(crate::test_log::records_with("stop-ok").is_empty());
        let logged = crate::test_log::records_with("stop-stuck");
        assert_eq!(logged.len(), 1, "{logged:?}");
        let (level, text) = &logged[0];
        assert_eq!(*level, log::Level::Error);
        let errno_text = io::Error::from_raw_os_error(libc::ENOSPC).to_string();
        assert!(text.contains("3 dirty blocks"), "{text}");
        assert!(text.contains(&errno_text), "{text}");
    }
}
