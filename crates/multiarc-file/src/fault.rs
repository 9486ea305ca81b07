//! A backing store that misbehaves on request, to test that the file layer
//! surfaces read errors, keeps dirty data through write errors, retries
//! short reads and tolerates slow I/O.

use super::store::BackingStore;
use multiarc_lock::poison::LockUnpoisoned;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fault rule does to an I/O it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Reads overlapping the range fail with `EIO`.
    ReadError,
    /// Writes overlapping the range fail with `EIO` (nothing is written).
    WriteError,
    /// Writes overlapping the range fail with this OS error code (say
    /// `ENOSPC` or `EFBIG`); nothing is written.
    WriteErrno(i32),
    /// Reads starting in the range return at most this many bytes.
    ShortRead(usize),
    /// Reads and writes overlapping the range sleep this long first.
    Delay(Duration),
    /// `sync` fails with `EIO` (the rule's range is ignored).
    SyncError,
}

#[derive(Clone, Debug)]
struct Rule {
    bytes: Range<u64>,
    fault: Fault,
    /// How many more times it fires (`None`: until cleared).
    remaining: Option<u64>,
}

/// The faults to inject, shared between a [`FaultStore`] and the test that
/// steers it.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Mutex<Vec<Rule>>,
    fired: std::sync::atomic::AtomicU64,
}

impl FaultPlan {
    /// A plan with no faults.
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// Injects `fault` on I/O overlapping `bytes` until cleared.
    pub fn add(&self, bytes: Range<u64>, fault: Fault) {
        self.push(bytes, fault, None);
    }

    /// Injects `fault` on the next `times` matching I/Os only.
    pub fn add_times(&self, bytes: Range<u64>, fault: Fault, times: u64) {
        self.push(bytes, fault, Some(times));
    }

    fn push(&self, bytes: Range<u64>, fault: Fault, remaining: Option<u64>) {
        self.rules.lock_unpoisoned().push(Rule {
            bytes,
            fault,
            remaining,
        });
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.rules.lock_unpoisoned().clear();
    }

    /// How many faults have fired.
    pub fn fired(&self) -> u64 {
        self.fired.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The first rule matching an I/O of `len` bytes at `offset` accepted by
    /// `want`, consuming one of its firings.
    fn take(&self, offset: u64, len: usize, want: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let end = offset.saturating_add(len.max(1) as u64);
        let mut rules = self.rules.lock_unpoisoned();
        let i = rules
            .iter()
            .position(|r| want(&r.fault) && r.bytes.start < end && offset < r.bytes.end)?;
        let fault = rules[i].fault.clone();
        if let Some(n) = &mut rules[i].remaining {
            *n -= 1;
            if *n == 0 {
                rules.remove(i);
            }
        }
        self.fired
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(fault)
    }
}

/// An injected error: `EIO` unless the rule names another code, with the
/// code kept (as the store's own errors keep theirs).
fn injected(what: &str, offset: u64, code: i32) -> io::Error {
    super::error::with_context(
        &io::Error::from_raw_os_error(code),
        format_args!("injected {what} error at byte {offset}"),
    )
}

/// Wraps a store, injecting the faults of a [`FaultPlan`].
#[derive(Debug)]
pub struct FaultStore<S> {
    inner: S,
    plan: Arc<FaultPlan>,
}

impl<S: BackingStore> FaultStore<S> {
    /// Wraps `inner`; steer it through `plan`.
    pub fn new(inner: S, plan: Arc<FaultPlan>) -> FaultStore<S> {
        FaultStore { inner, plan }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: BackingStore> BackingStore for FaultStore<S> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if let Some(Fault::Delay(d)) = self
            .plan
            .take(offset, buf.len(), |f| matches!(f, Fault::Delay(_)))
        {
            std::thread::sleep(d);
        }
        if self
            .plan
            .take(offset, buf.len(), |f| *f == Fault::ReadError)
            .is_some()
        {
            return Err(injected("read", offset, libc::EIO));
        }
        let mut len = buf.len();
        if let Some(Fault::ShortRead(n)) = self
            .plan
            .take(offset, 1, |f| matches!(f, Fault::ShortRead(_)))
        {
            len = len.min(n);
        }
        self.inner.read_at(&mut buf[..len], offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(Fault::Delay(d)) = self
            .plan
            .take(offset, buf.len(), |f| matches!(f, Fault::Delay(_)))
        {
            std::thread::sleep(d);
        }
        match self.plan.take(offset, buf.len(), |f| {
            matches!(f, Fault::WriteError | Fault::WriteErrno(_))
        }) {
            Some(Fault::WriteErrno(code)) => return Err(injected("write", offset, code)),
            Some(_) => return Err(injected("write", offset, libc::EIO)),
            None => {}
        }
        self.inner.write_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn identity(&self) -> Option<(u64, u64)> {
        self.inner.identity()
    }

    fn sync(&self) -> io::Result<()> {
        if self
            .plan
            .take(0, usize::MAX, |f| *f == Fault::SyncError)
            .is_some()
        {
            return Err(injected("sync", 0, libc::EIO));
        }
        self.inner.sync()
    }
}
