//! [`UsedBlocks`]: which blocks one reader used lately, so that the reads
//! that make up one use of a block count one access in the cache.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Reads of one block by one reader within this long of the read that
/// counted its use are part of that use (OpenZFS's `ARC_MINTIME`, 62 ms,
/// the same idea: accesses that close together are one).
pub const SAME_USE_WINDOW: Duration = Duration::from_millis(62);

/// Blocks remembered per reader: a direct-mapped table (block index modulo
/// its size), so 32 consecutive blocks (8 MiB of 256 KiB blocks, more than
/// the kernel's reads of one file have in flight at once) fit together.
const SLOTS: usize = 32;

/// Bits of a slot that hold the time (milliseconds, wrapping every 17
/// minutes, the longest window).
const TIME_BITS: u32 = 20;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// The blocks one reader (a file handle, say) used lately, for
/// an [`OpenObject`](crate::open_object::OpenObject)'s: one per reader of
/// one object version, empty at first.
///
/// ARC tells data read once from data read again by counting accesses. A
/// reader that goes through a block in several reads (a mount's 128 KiB
/// reads of a 256 KiB block, reads that straddle blocks) would count one
/// use as two, and a scan read that way would look like reuse: its blocks
/// would fill the frequency list and push out what is read again. With
/// this, the first read of a block counts its use, and the reader's reads
/// of it within the window (usually [`SAME_USE_WINDOW`]) after it count none
/// ([`multiarc::Cache::get_in_memory_same_use`]). Unlike
/// [`LastBlock`](crate::open_object::LastBlock), it holds no block, and it works for
/// reads that run at once or out of order (several threads serving one
/// file's reads): a block's use is claimed by one compare-exchange. A
/// reader that reads a block again later (a database's hot page) counts a
/// use again, once per window at most. Blocks that share a slot only make
/// a read count again.
pub(crate) struct UsedBlocks {
    /// Per slot: the block index + 1 (0: empty) above [`TIME_BITS`], and
    /// the time of the counted use below.
    slots: [AtomicU64; SLOTS],
    start: Instant,
    window_ms: u64,
}

impl Default for UsedBlocks {
    /// With a window of [`SAME_USE_WINDOW`].
    fn default() -> Self {
        UsedBlocks::with_window(SAME_USE_WINDOW)
    }
}

impl std::fmt::Debug for UsedBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsedBlocks").finish_non_exhaustive()
    }
}

impl UsedBlocks {
    /// With reads of a block within `window` of the read that counted its
    /// use part of that use (at most 17 minutes; longer is taken as that).
    pub(crate) fn with_window(window: Duration) -> Self {
        UsedBlocks {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
            start: Instant::now(),
            window_ms: (window.as_millis() as u64).min(TIME_MASK),
        }
    }

    /// True if a read of `block` now starts a use of it (and records that
    /// use); false if it is part of the use started within the window.
    pub(crate) fn starts_use(&self, block: u64) -> bool {
        let now = self.start.elapsed().as_millis() as u64 & TIME_MASK;
        self.starts_use_at(block, now)
    }

    fn starts_use_at(&self, block: u64, now: u64) -> bool {
        let tag = block.wrapping_add(1) << TIME_BITS;
        let slot = &self.slots[block as usize % SLOTS];
        let mut seen = slot.load(Ordering::Relaxed);
        loop {
            let same_block = seen & !TIME_MASK == tag;
            if same_block && now.wrapping_sub(seen) & TIME_MASK < self.window_ms {
                return false;
            }
            match slot.compare_exchange_weak(seen, tag | now, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now_seen) => seen = now_seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_read_again_within_the_window_is_one_use() {
        let used = UsedBlocks::default();
        assert!(used.starts_use_at(7, 1000));
        assert!(!used.starts_use_at(7, 1000));
        assert!(!used.starts_use_at(7, 1000 + 62 - 1));
        // The window runs from the counted use, not from the last read: a
        // block read without pause still counts a use per window.
        assert!(used.starts_use_at(7, 1000 + 62));
        assert!(!used.starts_use_at(7, 1000 + 62 + 1));
    }

    #[test]
    fn blocks_are_told_apart_and_a_shared_slot_only_counts_again() {
        let used = UsedBlocks::default();
        assert!(used.starts_use_at(0, 5));
        assert!(used.starts_use_at(1, 5));
        assert!(!used.starts_use_at(0, 6));
        assert!(!used.starts_use_at(1, 6));
        // Block 32 shares block 0's slot: it takes it, and block 0 counts
        // again.
        assert!(used.starts_use_at(32, 7));
        assert!(used.starts_use_at(0, 8));
        // Large block indexes are distinct too.
        assert!(used.starts_use_at(1 << 40, 9));
        assert!(!used.starts_use_at(1 << 40, 10));
        assert!(used.starts_use_at((1 << 40) + 32, 10));
    }

    #[test]
    fn the_clock_wrapping_keeps_the_window() {
        let used = UsedBlocks::default();
        assert!(used.starts_use_at(3, TIME_MASK - 10));
        assert!(!used.starts_use_at(3, 5), "16 ms later, across the wrap");
        assert!(used.starts_use_at(3, 60), "71 ms later");
    }

    #[test]
    fn reads_at_once_count_one_use() {
        let used = std::sync::Arc::new(UsedBlocks::default());
        let counted: usize = (0..4)
            .map(|_| {
                let used = std::sync::Arc::clone(&used);
                std::thread::spawn(move || (0..8).filter(|_| used.starts_use_at(5, 100)).count())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(counted, 1, "32 reads of one block at one time: one use");
    }
}
