//! Starting on a device that may hold data (persistent L2ARC): what the
//! header says the device holds ([`Found`], the triage `L2Arc::open` acts
//! on), and the rebuild thread that finds the records again by walking the
//! log blocks back from the newest.

use super::config::DeviceConfig;
use super::device::{padded, with_path, AlignedBuf, UNIT};
use super::format::{self, decode_log, Header, HeaderProblem};
use super::index::{Rec, MAX_LEN};
use super::L2Arc;
use crate::arc::Key;
use crate::mem::sync::unpoisoned;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// What open found in the device header, and so how the tier starts.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// This cache's header, naming log blocks: the records are found again
    /// from them.
    Usable(Header),
    /// Nothing was ever written (a new or zeroed device).
    Blank,
    /// This cache's header, but no log block written yet.
    NoLog,
    /// Written by a cache of another identity.
    Foreign { theirs: u64, ours: u64 },
    /// Written as a device of another size.
    Resized { was: u64, now: u64 },
    /// Written with keys of another length.
    OtherKeys { was: u32, now: usize },
    /// Usable, but the rebuild is turned off.
    RebuildOff,
    /// Its last run stopped with invalidations not yet written down.
    Dirty,
    /// Not a header, or a torn or damaged one.
    Unreadable,
    /// A header of another format version.
    OtherVersion(u32),
}

impl Found {
    /// Sorts out the header read from a device configured as `device`, for
    /// keys of `key_len` bytes, in this order: a header of another cache,
    /// size or key length; the rebuild turned off; a dirty header; no log
    /// block yet.
    pub(super) fn triage(
        read: Result<Header, HeaderProblem>,
        device: &DeviceConfig,
        key_len: usize,
    ) -> Found {
        match read {
            Ok(h) if h.identity != device.identity => Found::Foreign {
                theirs: h.identity,
                ours: device.identity,
            },
            Ok(h) if h.device_bytes != device.bytes => Found::Resized {
                was: h.device_bytes,
                now: device.bytes,
            },
            Ok(h) if h.key_len as usize != key_len => Found::OtherKeys {
                was: h.key_len,
                now: key_len,
            },
            Ok(_) if !device.rebuild => Found::RebuildOff,
            Ok(h) if h.dirty => Found::Dirty,
            Ok(h) if h.newest.is_none() => Found::NoLog,
            Ok(h) => Found::Usable(h),
            Err(HeaderProblem::Blank) => Found::Blank,
            Err(HeaderProblem::Unreadable) => Found::Unreadable,
            Err(HeaderProblem::Version(v)) => Found::OtherVersion(v),
        }
    }

    /// The header to rebuild from, if any.
    pub(super) fn usable(&self) -> Option<Header> {
        match self {
            Found::Usable(h) => Some(*h),
            _ => None,
        }
    }

    /// The tier starts empty and the user should be told why: it had data
    /// this start does not find again (a blank device, or one without a
    /// log block, has none to lose).
    pub(super) fn worth_saying(&self) -> bool {
        !matches!(self, Found::Usable(_) | Found::Blank | Found::NoLog)
    }
}

/// Why the device starts empty, for the warning.
impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Usable(_) => write!(f, "its records are found again"),
            Found::Blank => write!(f, "it is blank"),
            Found::NoLog => write!(f, "it has no log block yet"),
            Found::Foreign { theirs, ours } => write!(
                f,
                "written by another cache (identity {theirs}, this one {ours})"
            ),
            Found::Resized { was, now } => {
                write!(f, "written as a device of {was} bytes, now {now}")
            }
            Found::OtherKeys { was, now } => {
                write!(f, "written with {was}-byte keys, these are {now} bytes")
            }
            Found::RebuildOff => write!(f, "l2_rebuild is off"),
            Found::Dirty => write!(
                f,
                "its last run stopped before it wrote down which copies rewrites or removals made stale (a crash?)"
            ),
            Found::Unreadable => write!(f, "its header is unreadable"),
            Found::OtherVersion(v) => write!(
                f,
                "its header is of format version {v}, this is {}",
                format::VERSION
            ),
        }
    }
}

/// The rebuild's state, for `wait_rebuild` and `shutdown`.
pub(super) struct Rebuild {
    running: AtomicBool,
    done: Mutex<bool>,
    finished: Condvar,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Rebuild {
    /// The state of a tier that rebuilds (`running`) or starts empty.
    pub(super) fn new(running: bool) -> Rebuild {
        Rebuild {
            running: AtomicBool::new(running),
            done: Mutex::new(!running),
            finished: Condvar::new(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        }
    }
}

impl<K: Key> L2Arc<K> {
    /// Starts the rebuild thread on the records `h` names.
    pub(super) fn start_rebuild(self: &Arc<Self>, h: Header) -> io::Result<()> {
        self.index.set_rebuilding(true);
        let t = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("multiarc-l2-rebuild".into())
            .spawn(move || t.rebuild_from(h))
            .map_err(|e| with_path(&self.device_config.path, "cannot start its rebuild", e))?;
        *unpoisoned(self.rebuild.thread.lock()) = Some(handle);
        Ok(())
    }

    /// True while the index is being rebuilt (the feed waits).
    pub(crate) fn rebuilding(&self) -> bool {
        self.rebuild.running.load(Ordering::Acquire)
    }

    /// Blocks until the rebuild (if any) is over.
    pub(crate) fn wait_rebuild(&self) {
        let mut done = unpoisoned(self.rebuild.done.lock());
        while !*done {
            done = unpoisoned(self.rebuild.finished.wait(done));
        }
    }

    /// Stops the rebuild thread, if it runs, and waits for it.
    pub(super) fn stop_rebuild(&self) {
        self.rebuild.stop.store(true, Ordering::Relaxed);
        let handle = unpoisoned(self.rebuild.thread.lock()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// The rebuild thread: walks the log blocks back from the header's
    /// newest, restoring records newest first.
    fn rebuild_from(&self, h: Header) {
        let started = Instant::now();
        let ring_len = self.ring_end - self.ring_start;
        let top = h.newest.offset + h.newest.len as u64;
        // How far back from the newest data's end `x` is, in (0, ring_len].
        let back = |x: u64| ((top + ring_len - x - 1) % ring_len) + 1;
        let mut ptr = h.newest;
        let mut covered = 0u64;
        let mut blocks = 0u64;
        while !ptr.is_none() && !self.rebuild.stop.load(Ordering::Relaxed) {
            let log_end = ptr.offset + ptr.len as u64;
            if ptr.offset < self.ring_start
                || log_end > self.ring_end
                || !(ptr.len as u64).is_multiple_of(UNIT)
            {
                break;
            }
            let mut b = AlignedBuf::zeroed(ptr.len as usize);
            if let Err(e) = self.device.read_at(&mut b, ptr.offset) {
                self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                log::debug!(
                    "l2 device {}: rebuild stopped, cannot read a log block: {e}",
                    self.device_config.path.display()
                );
                break;
            }
            blocks += 1;
            let Some(log) = decode_log(b.bytes(), &ptr, self.codec.len) else {
                break;
            };
            // Its batch, [start, log_end): intact, not under the trim, and
            // older than everything walked so far.
            if log.start < self.ring_start || log.start > ptr.offset {
                break;
            }
            let (lo, hi) = (log.start, log_end);
            if lo < h.trim.1 && h.trim.0 < hi {
                break;
            }
            let span = back(lo);
            if span <= covered {
                break;
            }
            covered = span;
            for e in &log.entries {
                let end = e.offset + padded(e.len as u64);
                if e.offset < lo
                    || end > ptr.offset
                    || e.offset % UNIT != 0
                    || e.len as u64 > MAX_LEN
                {
                    continue;
                }
                let key = (self.codec.decode)(&e.key);
                let rec = Rec::cached((e.offset / UNIT) as u32, e.len, e.mfu, e.t2, e.cksum);
                self.index.restore(key, rec);
            }
            // Older blocks' entries of these keys are stale.
            for t in &log.tombstones {
                self.index.tombstone((self.codec.decode)(t));
            }
            if log.generation == 0 || log.prev.generation + 1 != log.generation {
                break;
            }
            ptr = log.prev;
        }
        self.counters
            .rebuild_blocks
            .store(blocks, Ordering::Relaxed);
        self.counters
            .rebuild_ms
            .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.index.set_rebuilding(false);
        self.rebuild.running.store(false, Ordering::Release);
        *unpoisoned(self.rebuild.done.lock()) = true;
        self.rebuild.finished.notify_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::index::Index;
    use super::super::test_support::{codec, config, data, path, write};
    use super::super::L2Config;
    use super::*;
    use crate::arc::Presence;
    use std::path::PathBuf;

    fn header(identity: u64, bytes: u64, key_len: u32) -> Header {
        Header {
            identity,
            device_bytes: bytes,
            key_len,
            newest: format::LogPtr {
                offset: 4096,
                len: 4096,
                cksum: 1,
                generation: 1,
            },
            trim: (0, 0),
            dirty: false,
        }
    }

    #[test]
    fn triage_starts_empty_what_does_not_match_and_says_why_when_data_is_lost() {
        let device = DeviceConfig {
            identity: 7,
            ..DeviceConfig::new(PathBuf::from("/dev/l2"), 1 << 20)
        };
        let triage = |h: Result<Header, HeaderProblem>| Found::triage(h, &device, 8);
        let good = header(7, 1 << 20, 8);
        assert_eq!(triage(Ok(good)), Found::Usable(good));
        assert_eq!(triage(Ok(good)).usable(), Some(good));
        let cases = [
            (
                triage(Ok(header(9, 1 << 20, 8))),
                "written by another cache (identity 9, this one 7)".to_string(),
            ),
            (
                triage(Ok(header(7, 2 << 20, 8))),
                "written as a device of 2097152 bytes, now 1048576".to_string(),
            ),
            (
                triage(Ok(header(7, 1 << 20, 16))),
                "written with 16-byte keys, these are 8 bytes".to_string(),
            ),
            (
                triage(Ok(Header { dirty: true, ..good })),
                "its last run stopped before it wrote down which copies rewrites or removals made stale (a crash?)".to_string(),
            ),
            (
                triage(Err(HeaderProblem::Unreadable)),
                "its header is unreadable".to_string(),
            ),
            (
                triage(Err(HeaderProblem::Version(1))),
                format!("its header is of format version 1, this is {}", format::VERSION),
            ),
        ];
        for (found, why) in cases {
            assert!(
                found.worth_saying() && found.usable().is_none(),
                "{found:?}"
            );
            assert_eq!(found.to_string(), why);
        }
        // Nothing to lose: started empty silently.
        let unwritten = Header {
            newest: format::LogPtr::default(),
            ..good
        };
        for found in [triage(Err(HeaderProblem::Blank)), triage(Ok(unwritten))] {
            assert!(
                !found.worth_saying() && found.usable().is_none(),
                "{found:?}"
            );
        }
        // The rebuild turned off: said, after a mismatch, before dirt.
        let off = DeviceConfig {
            rebuild: false,
            ..device.clone()
        };
        let found = Found::triage(
            Ok(Header {
                dirty: true,
                ..good
            }),
            &off,
            8,
        );
        assert_eq!(found, Found::RebuildOff);
        assert_eq!(found.to_string(), "l2_rebuild is off");
        let found = Found::triage(Ok(header(9, 1 << 20, 8)), &off, 8);
        assert!(matches!(found, Found::Foreign { .. }));
    }

    #[test]
    fn a_restart_finds_the_records_again() {
        let p = path("restart");
        let n;
        {
            let tier = L2Arc::open(config(&p, 4 << 20, 256 << 10), codec()).unwrap();
            for i in 0..10 {
                write(&tier, (i * 20..i * 20 + 20).map(|k| (k, 8192)));
            }
            n = tier.records();
            tier.shutdown();
        }
        let tier = L2Arc::open(config(&p, 4 << 20, 256 << 10), codec()).unwrap();
        tier.wait_rebuild();
        assert!(tier.records() * 100 >= n * 95, "{} of {n}", tier.records());
        for k in 0..200 {
            assert_eq!(tier.read(&k).expect("found again").data, data(k, 8192));
        }
        assert_eq!(tier.figures().rebuild_blocks, 10);
        // Another identity, size or key length: empty.
        drop(tier);
        let mut other = config(&p, 4 << 20, 256 << 10);
        other.device.identity = 9;
        let tier = L2Arc::open(other, codec()).unwrap();
        tier.wait_rebuild();
        assert_eq!(tier.records(), 0);
    }

    #[test]
    fn a_crash_between_the_writes_of_a_batch_loses_only_that_batch() {
        // Commit writes the header (naming the region), the batch, the
        // header again: fail each in turn, as a crash there would leave it.
        for failing in 1..=3u64 {
            let p = path(&format!("torn-{failing}"));
            let c: L2Config = config(&p, 1 << 20, 64 << 10);
            {
                let tier = L2Arc::open(c.clone(), codec()).unwrap();
                // Fill the ring once, so the torn batch overwrites data.
                for i in 0..20u64 {
                    write(&tier, (i * 14..i * 14 + 14).map(|k| (k, 4096)));
                }
                tier.device
                    .faults
                    .write_countdown
                    .store(failing, Ordering::Relaxed);
                let mut b = tier.batch();
                for k in 1000..1014 {
                    b.add(&k, &data(k, 4096), false);
                }
                assert!(b.commit().is_err());
                assert_eq!(tier.presence(&1000), Presence::Absent);
                tier.shutdown();
            }
            let tier = L2Arc::open(c, codec()).unwrap();
            tier.wait_rebuild();
            assert!(tier.records() > 0, "failing write {failing}: nothing found");
            for k in (0..280).chain(1000..1014) {
                if let Some(r) = tier.read(&k) {
                    assert_eq!(r.data, data(k, 4096), "failing write {failing}: key {k}");
                }
            }
            assert_eq!(tier.figures().cksum_bad, 0, "failing write {failing}");
        }
    }

    #[test]
    fn a_rebuild_does_not_bring_back_what_was_invalidated() {
        let index: Index<u64> = Index::new();
        let rec = Rec::cached(5, 100, false, false, 1);
        index.set_rebuilding(true);
        index.invalidate(&7);
        assert!(!index.restore(7, rec), "invalidated during the rebuild");
        assert!(index.restore(8, rec));
        assert!(
            !index.restore(8, Rec::cached(9, 100, false, false, 2)),
            "a newer record stays"
        );
        index.set_rebuilding(false);
        assert!(index.restore(7, rec), "tombstones go with the rebuild");
    }
}
