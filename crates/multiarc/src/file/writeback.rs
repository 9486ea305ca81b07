//! Write-back: the bound on dirty bytes and the flusher thread.
//!
//! Dirty blocks are counted against one budget shared by every file opened
//! with the same [`WriteBack`] (a mount shares one across its files, as the
//! kernel's dirty limits span all files). Past `flush_threshold` bytes the
//! flusher is woken; at `dirty_max` writers wait for it, so dirty memory is
//! bounded without ever failing a write. The flusher also runs every
//! `interval`, so data written and never synced still reaches the store.
//!
//! A failed write-back keeps the blocks dirty and the error is remembered by
//! the file, to be returned by its next `sync_all` (the kernel's rule for
//! `fsync` after a failed write-back); the flusher retries at its next pass.

use super::cached::FileState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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
    /// Flusher passes.
    pub passes: u64,
}

pub(crate) struct Shared {
    pub(crate) config: WriteBackConfig,
    dirty_bytes: AtomicU64,
    files: Mutex<Vec<Arc<FileState>>>,
    /// Wakes the flusher: (kicked, stopping).
    wake: Mutex<(bool, bool)>,
    wake_cv: Condvar,
    /// Writers waiting for room.
    room: Mutex<()>,
    room_cv: Condvar,
    pub(crate) flushed_blocks: AtomicU64,
    pub(crate) flushed_bytes: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    writer_waits: AtomicU64,
    passes: AtomicU64,
}

impl Shared {
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
        drop(self.room.lock().unwrap_or_else(|e| e.into_inner()));
        self.room_cv.notify_all();
    }

    /// Waits until `bytes` more dirty bytes fit under the bound (or nothing
    /// is dirty: a single write larger than the bound must still proceed).
    pub(crate) fn wait_for_room(&self, bytes: u64) {
        let fits = |d: u64| d == 0 || d + bytes <= self.config.dirty_max;
        if fits(self.dirty_bytes.load(Ordering::Relaxed)) {
            return;
        }
        self.writer_waits.fetch_add(1, Ordering::Relaxed);
        let mut g = self.room.lock().unwrap_or_else(|e| e.into_inner());
        while !fits(self.dirty_bytes.load(Ordering::Relaxed)) {
            self.kick();
            // The timeout only guards against a wake-up lost to a bug; the
            // flusher notifies after every block it cleans.
            g = self
                .room_cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub(crate) fn kick(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
        self.wake_cv.notify_one();
    }

    pub(crate) fn register(&self, file: Arc<FileState>) {
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(file);
    }

    /// One pass over every file. Files closed by their owner leave once
    /// they are clean; until then the flusher keeps retrying them, so a
    /// closed file's dirty data is never dropped while the process lives.
    fn pass(&self) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        let files: Vec<Arc<FileState>> =
            self.files.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for f in &files {
            if let Err(e) = f.flush() {
                f.remember_error(e);
            }
        }
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|f| !(f.is_closed() && f.dirty_blocks() == 0));
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
        let shared = Arc::new(Shared {
            config,
            dirty_bytes: AtomicU64::new(0),
            files: Mutex::new(Vec::new()),
            wake: Mutex::new((false, false)),
            wake_cv: Condvar::new(),
            room: Mutex::new(()),
            room_cv: Condvar::new(),
            flushed_blocks: AtomicU64::new(0),
            flushed_bytes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            writer_waits: AtomicU64::new(0),
            passes: AtomicU64::new(0),
        });
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
            passes: s.passes.load(Ordering::Relaxed),
        }
    }

    /// Writes back every file's dirty blocks now (without syncing the
    /// stores); returns the first error.
    pub fn flush_all(&self) -> std::io::Result<()> {
        let files: Vec<Arc<FileState>> = self
            .shared
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut first = Ok(());
        for f in files {
            if let Err(e) = f.flush() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for WriteBack {
    fn drop(&mut self) {
        self.shared.wake.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.shared.wake_cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn flusher(shared: Arc<Shared>) {
    loop {
        let stopping = {
            let mut w = shared.wake.lock().unwrap_or_else(|e| e.into_inner());
            if !w.0 && !w.1 {
                w = shared
                    .wake_cv
                    .wait_timeout(w, shared.config.interval)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            w.0 = false;
            w.1
        };
        shared.pass();
        if stopping {
            // Last pass done; what could not be written is reported, since
            // no one is left to call sync_all.
            for f in shared
                .files
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let n = f.dirty_blocks();
                if n > 0 {
                    eprintln!(
                        "multiarc: write-back stopped with {n} dirty blocks of {} not written: {}",
                        f.name(),
                        f.last_error_text()
                    );
                }
            }
            return;
        }
    }
}
