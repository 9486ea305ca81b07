//! Checksums per sector of a large buffer, kept in memory beside its
//! record (`index.rs`), so that a read of part of the buffer
//! (`L2Arc::read_part`) reads and verifies only the sectors it covers. The
//! record's own checksum covers the whole buffer, so checking it needs all
//! of the buffer: a random 8 KiB read of a 256 KiB block would read 32
//! times what it returns, and wait for it (247 against 60 us for one
//! `O_DIRECT` read on this machine's disk).
//!
//! They live in memory only; the device format does not change. A batch's
//! buffers get them when the batch is written (`commit.rs`); a record that
//! a rebuild brought back gets them at its first whole read, which verified
//! the bytes they are taken from.

use super::checksum::checksum;
use std::ops::Range;

/// The bytes one sector checksum covers (a multiple of the device unit, so
/// that a sector's read stays aligned for `O_DIRECT`).
pub(super) const SECTOR: u64 = 16 << 10;

/// A buffer of `len` bytes gets sector checksums: it is at least 64 KiB
/// (a smaller one is read whole).
pub(super) fn worth(len: u64) -> bool {
    len >= 64 << 10
}

/// The checksum of each sector of `data` (the last may be short).
pub(super) fn sums(data: &[u8]) -> Box<[u64]> {
    data.chunks(SECTOR as usize).map(checksum).collect()
}

/// Whether `data`, the bytes of whole sectors read from the device (the
/// last may be short), has the checksums `sums`, sector by sector.
pub(super) fn verify(data: &[u8], sums: &[u64]) -> bool {
    let sectors = data.chunks(SECTOR as usize);
    sectors.len() == sums.len() && sectors.zip(sums).all(|(s, &sum)| checksum(s) == sum)
}

/// The sectors that bytes `range` of a buffer meet (`range` not empty).
pub(super) fn covering(range: &Range<u64>) -> Range<usize> {
    (range.start / SECTOR) as usize..range.end.div_ceil(SECTOR) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_takes_every_sector_a_range_meets() {
        assert_eq!(covering(&(0..1)), 0..1);
        assert_eq!(covering(&(0..SECTOR)), 0..1);
        assert_eq!(covering(&(SECTOR - 1..SECTOR + 1)), 0..2);
        assert_eq!(covering(&(3 * SECTOR..3 * SECTOR + 8192)), 3..4);
    }

    #[test]
    fn sums_cover_a_short_last_sector() {
        let data: Vec<u8> = (0..(2 * SECTOR + 100)).map(|i| i as u8).collect();
        let s = sums(&data);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2], checksum(&data[2 * SECTOR as usize..]));
        assert!(!worth((64 << 10) - 1) && worth(64 << 10));
        // What `sums` took, `verify` accepts; one byte changed, or a
        // sector missing, it refuses.
        assert!(verify(&data, &s));
        let mut damaged = data.clone();
        damaged[SECTOR as usize + 7] ^= 1;
        assert!(!verify(&damaged, &s));
        assert!(!verify(&data[..2 * SECTOR as usize], &s));
    }
}
