//! The blocks of a file's version that the kernel's page cache was given:
//! what a later open that keeps those pages counts as used again.
//!
//! Why: the kernel serves re-reads from its page cache (`FOPEN_KEEP_CACHE`)
//! without asking the mount, so the mount's cache sees each block used
//! once, keeps it in MRU, and a scan pushes it out first. When the kernel
//! later drops its pages (memory pressure, or a host's proactive reclaim:
//! DAMON's pageout of file pages idle for a minute, on the VM these
//! benchmarks ran on), the re-reads reach the mount and miss. An open that
//! keeps the pages is the one sign the mount gets that the file is used
//! again, so it counts one use of each block the pages were given since
//! the last such open (`BucketFs::open_file`).
//!
//! A version whose pages were given more blocks since the last such open
//! than the mount's memory holds is being read through (a scan, or a file
//! larger than memory): its next open counts nothing, and costs no walk
//! over the blocks.
//!
//! The set is of block ranges, merged as they are added: a reader going
//! through a file in order adds one range. It is bounded: past
//! [`MAX_RANGES`] disjoint ranges, further ones are not recorded (their
//! blocks are then counted once, as without this).

use std::ops::Range;

/// At most this many disjoint ranges per set (16 bytes each).
pub(crate) const MAX_RANGES: usize = 4096;

/// Disjoint, sorted block ranges.
#[derive(Debug, Default)]
pub(crate) struct ServedBlocks {
    ranges: Vec<Range<u64>>,
}

impl ServedBlocks {
    /// Adds blocks `blocks` (merged with the ranges they touch or adjoin).
    /// Returns false if it did not fit (the set is full and they extend no
    /// range).
    pub(crate) fn add(&mut self, blocks: Range<u64>) -> bool {
        if blocks.start >= blocks.end {
            return true;
        }
        // The first range that ends at or after `blocks.start` (adjoining
        // counts): every one before it lies wholly before `blocks`.
        let from = self.ranges.partition_point(|r| r.end < blocks.start);
        // Ranges from `from` that start at or before `blocks.end` overlap or
        // adjoin `blocks`: merged into one.
        let to = from + self.ranges[from..].partition_point(|r| r.start <= blocks.end);
        if from == to {
            if self.ranges.len() >= MAX_RANGES {
                return false;
            }
            self.ranges.insert(from, blocks);
            return true;
        }
        let merged =
            self.ranges[from].start.min(blocks.start)..self.ranges[to - 1].end.max(blocks.end);
        self.ranges.splice(from..to, std::iter::once(merged));
        true
    }

    /// Adds every range of `other`. Returns how many did not fit.
    pub(crate) fn add_all(&mut self, other: ServedBlocks) -> usize {
        other
            .ranges
            .into_iter()
            .filter(|r| !self.add(r.clone()))
            .count()
    }

    /// The blocks, in order.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|r| r.clone())
    }

    /// How many blocks.
    pub(crate) fn len(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    #[cfg(test)]
    fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_when_they_overlap_or_adjoin() {
        let mut s = ServedBlocks::default();
        assert!(s.add(10..12));
        assert!(s.add(0..2));
        assert!(s.add(5..6));
        assert_eq!(s.ranges(), &[0..2, 5..6, 10..12]);
        // Adjoins 0..2 and 5..6 on both sides: one range.
        assert!(s.add(2..5));
        assert_eq!(s.ranges(), &[0..6, 10..12]);
        // Inside a range: nothing changes.
        assert!(s.add(1..3));
        assert_eq!(s.ranges(), &[0..6, 10..12]);
        // Covers several.
        assert!(s.add(4..20));
        assert_eq!(s.ranges(), std::slice::from_ref(&(0..20)));
        assert!(s.add(7..7));
        assert_eq!(s.blocks().count(), 20);
        assert_eq!(s.len(), 20);
    }

    #[test]
    fn a_full_set_still_extends_its_ranges() {
        let mut s = ServedBlocks::default();
        for i in 0..MAX_RANGES as u64 {
            assert!(s.add(3 * i..3 * i + 1));
        }
        assert!(!s.add(1_000_000..1_000_001), "a new range past the bound");
        assert!(s.add(1..2), "extending a range needs no room");
        assert_eq!(s.ranges().len(), MAX_RANGES);
        let mut other = ServedBlocks::default();
        other.add(2_000_000..2_000_002);
        other.add(4..5);
        assert_eq!(s.add_all(other), 1);
        assert_eq!(s.blocks().count(), MAX_RANGES + 2);
    }
}
