//! Write-back error reporting, by the kernel's `errseq_t` rule.
//!
//! A write-back runs long after the `write` it writes back returned, so its
//! error can only be reported later, at an `fsync` or `close`. PostgreSQL
//! learned in 2018 what goes wrong when that report is lost or given to the
//! wrong caller; Linux 4.13 answered with `errseq_t`, and this is the same
//! rule:
//! - a file keeps its latest write-back error and a sequence number, bumped
//!   when a new error follows one that somebody has already seen;
//! - each open file description keeps the sequence number it last saw, and
//!   its next `sync_all`/`close` reports the error if the number moved;
//! - a description opened while an error is pending that no one has seen yet
//!   sees it too (so an error of a file nobody had open is not lost).
//!
//! So every description sees each error once, however many there are, and a
//! retry that later succeeds does not hide the error from one that has not
//! looked yet.

use multiarc_lock::poison::LockUnpoisoned;
use std::io;
use std::sync::Mutex;

/// A remembered error: io::Error is not Clone, so its parts.
#[derive(Clone, Debug)]
struct Saved {
    kind: io::ErrorKind,
    code: Option<i32>,
    message: String,
}

#[derive(Debug, Default)]
struct State {
    seq: u64,
    seen: bool,
    error: Option<Saved>,
    /// Newest write generation among the failures recorded.
    error_generation: u64,
    /// `error_generation` when the error was last seen.
    reported_generation: u64,
}

/// A file's write-back error and its sequence number.
#[derive(Debug, Default)]
pub(crate) struct ErrSeq {
    state: Mutex<State>,
}

impl ErrSeq {
    /// Records a write-back error (the newest one is kept) of an attempt
    /// whose newest data was written at `generation`. A retry of data whose
    /// failure was already reported, failing the same way, is not news and
    /// does not bump the sequence (the kernel never retries, so it has no
    /// such case; each description's own `sync_all` still fails while its
    /// write-back fails). New data failing, or a new kind of failure, is.
    pub(crate) fn set(&self, e: &io::Error, generation: u64) {
        let code = super::error::os_error_code(e);
        let mut s = self.state.lock_unpoisoned();
        let same = s
            .error
            .as_ref()
            .is_some_and(|old| old.code == code && old.kind == e.kind());
        if s.seen && same && generation <= s.reported_generation {
            return;
        }
        if s.error.is_none() || s.seen {
            s.seq += 1;
            s.seen = false;
        }
        s.error_generation = s.error_generation.max(generation);
        s.error = Some(Saved {
            kind: e.kind(),
            code,
            message: e.to_string(),
        });
    }

    /// The cursor of a description opened now: behind by one if an error is
    /// pending that no description has seen.
    pub(crate) fn sample(&self) -> u64 {
        let s = self.state.lock_unpoisoned();
        if s.error.is_some() && !s.seen {
            s.seq - 1
        } else {
            s.seq
        }
    }

    /// The error a description whose cursor is `*cursor` has not seen yet,
    /// if any; moves the cursor past it and marks it seen.
    pub(crate) fn check_and_advance(&self, cursor: &mut u64) -> Option<io::Error> {
        let mut s = self.state.lock_unpoisoned();
        if *cursor == s.seq {
            return None;
        }
        *cursor = s.seq;
        s.seen = true;
        s.reported_generation = s.error_generation;
        s.error
            .as_ref()
            .map(|e| super::error::rebuilt(e.kind, e.code, e.message.clone()))
    }

    /// The newest error's text, for logs.
    pub(crate) fn latest_text(&self) -> Option<String> {
        let s = self.state.lock_unpoisoned();
        s.error.as_ref().map(|e| e.message.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enospc() -> io::Error {
        io::Error::from_raw_os_error(libc::ENOSPC)
    }

    #[test]
    fn each_description_sees_each_error_once() {
        let e = ErrSeq::default();
        let mut a = e.sample();
        let mut b = e.sample();
        assert!(e.check_and_advance(&mut a).is_none());
        e.set(&enospc(), 1);
        let seen = e.check_and_advance(&mut a).expect("a sees it");
        assert_eq!(
            super::super::error::os_error_code(&seen),
            Some(libc::ENOSPC)
        );
        assert!(e.check_and_advance(&mut a).is_none(), "only once");
        assert!(e.check_and_advance(&mut b).is_some(), "b sees it too");
        assert!(e.check_and_advance(&mut b).is_none());
        // A second error after the first was seen is a new one for both.
        e.set(&io::Error::from_raw_os_error(libc::EIO), 1);
        assert!(e.check_and_advance(&mut a).is_some());
        assert!(e.check_and_advance(&mut b).is_some());
    }

    #[test]
    fn an_unseen_error_is_seen_by_a_description_opened_later() {
        let e = ErrSeq::default();
        e.set(&enospc(), 1);
        let mut late = e.sample();
        assert!(e.check_and_advance(&mut late).is_some());
        // Seen now: a description opened after that does not see it.
        let mut later = e.sample();
        assert!(e.check_and_advance(&mut later).is_none());
    }

    #[test]
    fn a_retry_failing_with_the_reported_code_is_not_reported_again() {
        let e = ErrSeq::default();
        let mut a = e.sample();
        e.set(&enospc(), 1);
        assert!(e.check_and_advance(&mut a).is_some());
        e.set(&enospc(), 1);
        let mut b = e.sample();
        assert!(e.check_and_advance(&mut a).is_none());
        assert!(e.check_and_advance(&mut b).is_none());
        e.set(&enospc(), 2);
        assert!(
            e.check_and_advance(&mut a).is_some(),
            "new data failing is news"
        );
        e.set(&io::Error::from_raw_os_error(libc::EIO), 2);
        assert!(e.check_and_advance(&mut a).is_some(), "a new code is news");
    }

    #[test]
    fn repeated_errors_before_anyone_looks_are_one_report() {
        let e = ErrSeq::default();
        let mut a = e.sample();
        e.set(&enospc(), 1);
        e.set(&enospc(), 1);
        assert!(e.check_and_advance(&mut a).is_some());
        assert!(e.check_and_advance(&mut a).is_none());
    }
}
