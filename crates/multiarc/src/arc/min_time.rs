//! OpenZFS's `ARC_MINTIME` in the lazy mode: a buffer whose hits all came
//! within a short window of its insert is not a buffer seen twice.
//!
//! OpenZFS (`arc_access`) leaves a buffer in MRU when it is accessed again
//! within about 62 ms of its first access: a scan that reads a block twice
//! in a row (two readers of one file a little apart, a read split in two)
//! has not shown that the block is used again. Without the rule, such
//! blocks enter MFU beside the hot set and push it out (issue 24's object
//! benchmark: 32 tasks' overlapping scans kept 55% of the hot set).
//!
//! In the lazy mode a hit is one atomic add and must stay so: it records no
//! time. So the rule is applied where the evictor reads the hit count: an
//! MRU buffer at the tail whose hits are not zero, but which entered the
//! cache less than the window ago, had all its hits within the window: its
//! count is cleared instead of promoting it, and it is evicted as an
//! unreferenced buffer would be. (A buffer older than the window with hits
//! is promoted, even if those hits came early: the evictor cannot tell, and
//! such a buffer has outlived the window in MRU, which a scan's blocks in a
//! memory turning over faster than the window do not.) Insert times are
//! milliseconds since the cache started, kept in 16 bits (`Header::born`,
//! in what was the header's padding), so ages wrap every 65.5 s: an MRU
//! buffer that old reaches the tail as "young" in one case of about a
//! thousand (with the default window), and loses one promotion.
//!
//! Off unless the builder sets a window (`Builder::mru_min_time`), and only
//! with the evict thread: inline eviction (tests, `multiarc replay`) is
//! deterministic, and a wall-clock window would make its results depend on
//! the speed of the machine.

use std::time::{Duration, Instant};

/// The window and the clock its insert times are read on.
#[derive(Clone, Debug)]
pub(crate) struct MruMinTime {
    window_ms: u16,
    start: Instant,
}

/// The largest window (the stamps are 16 bits of milliseconds).
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(10);

impl MruMinTime {
    /// A window of `window` (at most [`MAX_WINDOW`]); `None` for zero.
    pub(crate) fn new(window: Duration) -> Option<MruMinTime> {
        let ms = window.min(MAX_WINDOW).as_millis() as u16;
        (ms > 0).then(|| MruMinTime {
            window_ms: ms,
            start: Instant::now(),
        })
    }

    /// Now, as an insert stamp: milliseconds since the cache started,
    /// wrapping.
    pub(crate) fn now(&self) -> u16 {
        self.start.elapsed().as_millis() as u16
    }

    /// A buffer stamped `born` is still within the window.
    pub(crate) fn young(&self, born: u16) -> bool {
        self.now().wrapping_sub(born) < self.window_ms
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_young_for_the_window_then_old() {
        assert!(MruMinTime::new(Duration::ZERO).is_none(), "zero: off");
        let long = MruMinTime::new(Duration::from_secs(5)).unwrap();
        assert!(long.young(long.now()), "just stamped: young");
        let short = MruMinTime::new(Duration::from_millis(2)).unwrap();
        let born = short.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!short.young(born), "past the window: old");
        assert!(
            !short.young(born.wrapping_sub(1000)),
            "a stamp from a second ago: old"
        );
    }
}
