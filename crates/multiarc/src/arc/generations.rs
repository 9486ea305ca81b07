//! The generations policy's clock (`Policy::Generations`).
//!
//! The generation is a number that advances every `c / 16` bytes of
//! *ticks*: misses (an insert counts its bytes) and first hits (a hit on a
//! buffer that noted an earlier generation counts its bytes, and notes the
//! current one, so a buffer ticks at most once per generation). Ticks go to
//! a striped counter, each thread adding to its own cache line, so a first
//! hit writes no line that other threads write. The generation is read by
//! every hit of the policy: it lives on its own cache line, written once
//! per generation.
//!
//! Who advances it: each insert, after counting its own bytes, sums the
//! stripes and moves the generation on by the whole steps counted since
//! the last advance (one compare-exchange decides who moves it). First hits
//! between two misses therefore count toward the next advance, not at once.
//!
//! A buffer keeps the low byte of the generations it was queued in and last
//! noted (`Header::queued_generation`, `Header::noted_generation`);
//! [`GenerationClock::widen`] reads such a byte as the latest generation
//! with that low byte, at most 255 before the current one. A buffer left
//! unhit and unevicted for 256 generations (16 cache sizes of misses and
//! first hits) is read as younger than it is: the policy's one
//! approximation of its own model beyond the clock's.

use super::config::GENERATIONS_PER_CACHE;
use crate::lock::CachePadded;
use crate::mem::sync::{AtomicU64, Ordering};
use crate::mem::{thread_stripe, Striped};

/// The current generation and the ticks that advance it.
pub(crate) struct GenerationClock {
    /// The current generation: read by every hit, written once per
    /// generation.
    current: CachePadded<AtomicU64>,
    /// Ticks (bytes) already turned into generations.
    counted: AtomicU64,
    /// Bytes of misses and first hits, striped by thread.
    ticks: Striped<1>,
}

impl GenerationClock {
    /// A clock at generation 0, its ticks striped over `stripes` lines.
    pub(crate) fn new(stripes: usize) -> GenerationClock {
        GenerationClock {
            current: CachePadded::new(AtomicU64::new(0)),
            counted: AtomicU64::new(0),
            ticks: Striped::new(stripes),
        }
    }

    /// The current generation.
    #[inline]
    pub(crate) fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// Counts `bytes` of a miss or a first hit, on this thread's stripe.
    #[inline]
    pub(crate) fn tick(&self, bytes: u64) {
        self.ticks.add(thread_stripe(), 0, bytes.max(1));
    }

    /// Moves the generation on by the whole steps of `c / 16` bytes ticked
    /// since the last advance (a cache of target `c`). Concurrent callers:
    /// one of them moves it, the others return.
    pub(crate) fn advance(&self, c: u64) {
        let step = (c / GENERATIONS_PER_CACHE).max(1);
        let counted = self.counted.load(Ordering::Relaxed);
        let steps = self.ticks.sum(0).wrapping_sub(counted) / step;
        if steps == 0 || steps > u64::MAX / 2 / step {
            // Nothing whole yet, or a sum read while a stripe was behind.
            return;
        }
        if self
            .counted
            .compare_exchange(
                counted,
                counted.wrapping_add(steps * step),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.current.fetch_add(steps, Ordering::Relaxed);
        }
    }

    /// The generation whose low byte is `low`: the latest one, at most 255
    /// generations before the current one (none before 0).
    pub(crate) fn widen(&self, low: u8) -> u64 {
        let current = self.current();
        current.saturating_sub(u64::from((current as u8).wrapping_sub(low)))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_generation_advances_by_whole_steps_of_ticks() {
        let clock = GenerationClock::new(4);
        let c = 1_600; // a step of 100 bytes
        clock.tick(99);
        clock.advance(c);
        assert_eq!(clock.current(), 0, "99 of 100 bytes");
        clock.tick(1);
        clock.advance(c);
        assert_eq!(clock.current(), 1);
        clock.tick(350);
        clock.advance(c);
        assert_eq!(
            clock.current(),
            4,
            "three more whole steps, 50 bytes carried"
        );
        clock.tick(50);
        clock.advance(c);
        assert_eq!(clock.current(), 5, "the carried bytes count");
        // Zero-byte ticks still tick.
        for _ in 0..100 {
            clock.tick(0);
        }
        clock.advance(c);
        assert_eq!(clock.current(), 6);
    }

    #[test]
    fn a_low_byte_widens_to_the_latest_generation_it_names() {
        let clock = GenerationClock::new(1);
        clock.tick(300);
        clock.advance(16); // a step of 1 byte: generation 300
        assert_eq!(clock.current(), 300);
        // 300's low byte is 44.
        assert_eq!(clock.widen(44), 300);
        assert_eq!(clock.widen(43), 299);
        assert_eq!(clock.widen(45), 45, "255 generations back, not 301");
        assert_eq!(clock.widen(46), 46);
        let young = GenerationClock::new(1);
        assert_eq!(young.widen(5), 0, "no generation before 0");
    }
}
