//! Splitting an I/O into per-block pieces: the one loop behind
//! [`CachedFile::read_at`](super::CachedFile::read_at) and
//! [`CachedFile::write_at`](super::CachedFile::write_at).

/// One block's share of an I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// The block's index (its first byte is `block << block_shift`).
    pub(crate) block: u64,
    /// The piece's offset within the block.
    pub(crate) at: usize,
    /// The piece's length: at least 1, at most `block_size - at`.
    pub(crate) len: usize,
    /// The piece's offset within the caller's buffer.
    pub(crate) buf: usize,
}

impl Piece {
    /// The piece's range in the caller's buffer.
    pub(crate) fn buf_range(&self) -> std::ops::Range<usize> {
        self.buf..self.buf + self.len
    }

    /// The piece's range in its block.
    pub(crate) fn block_range(&self) -> std::ops::Range<usize> {
        self.at..self.at + self.len
    }
}

/// The pieces of the `len` bytes at `offset`, block by block, in order.
#[derive(Clone, Debug)]
pub(crate) struct Blocks {
    offset: u64,
    len: usize,
    done: usize,
    block_shift: u32,
}

impl Blocks {
    /// The pieces of `len` bytes at `offset` over blocks of `1 << block_shift`
    /// bytes (`block_shift < 64`). `None` if the I/O would pass the last byte
    /// offset `u64::MAX` (its end, `offset + len`, does not fit in a `u64`):
    /// callers report that before splitting.
    pub(crate) fn new(offset: u64, len: usize, block_shift: u32) -> Option<Blocks> {
        debug_assert!(block_shift < 64);
        offset.checked_add(len as u64)?;
        Some(Blocks {
            offset,
            len,
            done: 0,
            block_shift,
        })
    }

    /// How many blocks the I/O touches (0 for an empty one).
    pub(crate) fn block_count(&self) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let end = self.offset + self.len as u64;
        ((end - 1) >> self.block_shift) - (self.offset >> self.block_shift) + 1
    }
}

impl Iterator for Blocks {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.done >= self.len {
            return None;
        }
        // No overflow: `offset + len` fits (checked in `new`).
        let pos = self.offset + self.done as u64;
        let mask = (1u64 << self.block_shift) - 1;
        let at = (pos & mask) as usize;
        let room = (mask + 1 - at as u64).min((self.len - self.done) as u64) as usize;
        let piece = Piece {
            block: pos >> self.block_shift,
            at,
            len: room,
            buf: self.done,
        };
        self.done += room;
        Some(piece)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.done >= self.len {
            0
        } else {
            Blocks::new(
                self.offset + self.done as u64,
                self.len - self.done,
                self.block_shift,
            )
            .map_or(0, |b| b.block_count() as usize)
        };
        (left, Some(left))
    }
}

impl ExactSizeIterator for Blocks {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn pieces(offset: u64, len: usize, shift: u32) -> Vec<(u64, usize, usize, usize)> {
        Blocks::new(offset, len, shift)
            .unwrap()
            .map(|p| (p.block, p.at, p.len, p.buf))
            .collect()
    }

    #[test]
    fn zero_length_yields_nothing() {
        assert_eq!(pieces(0, 0, 12), []);
        assert_eq!(pieces(12345, 0, 12), []);
        assert_eq!(pieces(u64::MAX, 0, 12), []);
        assert_eq!(Blocks::new(7, 0, 12).unwrap().block_count(), 0);
    }

    #[test]
    fn single_byte() {
        assert_eq!(pieces(0, 1, 12), [(0, 0, 1, 0)]);
        assert_eq!(pieces(4095, 1, 12), [(0, 4095, 1, 0)]);
        assert_eq!(pieces(4096, 1, 12), [(1, 0, 1, 0)]);
    }

    #[test]
    fn exactly_one_block() {
        let b = Blocks::new(8192, 4096, 12).unwrap();
        assert_eq!(b.block_count(), 1);
        assert_eq!(b.len(), 1);
        assert_eq!(pieces(8192, 4096, 12), [(2, 0, 4096, 0)]);
        // The same length unaligned spans two blocks.
        assert_eq!(pieces(8193, 4096, 12), [(2, 1, 4095, 0), (3, 0, 1, 4095)]);
    }

    #[test]
    fn unaligned_start_and_end() {
        let b = Blocks::new(4000, 5000, 12).unwrap();
        assert_eq!(b.block_count(), 3);
        assert_eq!(
            b.collect::<Vec<_>>(),
            [
                Piece {
                    block: 0,
                    at: 4000,
                    len: 96,
                    buf: 0
                },
                Piece {
                    block: 1,
                    at: 0,
                    len: 4096,
                    buf: 96
                },
                Piece {
                    block: 2,
                    at: 0,
                    len: 808,
                    buf: 4192
                },
            ]
        );
        let p = Blocks::new(4000, 5000, 12).unwrap().nth(2).unwrap();
        assert_eq!((p.buf_range(), p.block_range()), (4192..5000, 0..808));
    }

    #[test]
    fn pieces_cover_the_buffer_in_order() {
        for shift in [9, 12, 16] {
            for (offset, len) in [(0u64, 1usize), (1, 100_000), (65_535, 3), (123_456, 65_536)] {
                let ps: Vec<Piece> = Blocks::new(offset, len, shift).unwrap().collect();
                assert_eq!(
                    ps.len() as u64,
                    Blocks::new(offset, len, shift).unwrap().block_count()
                );
                let mut next = 0;
                for p in &ps {
                    assert_eq!(p.buf, next);
                    assert!(p.len >= 1 && p.at + p.len <= 1 << shift);
                    assert_eq!((p.block << shift) + p.at as u64, offset + p.buf as u64);
                    next += p.len;
                }
                assert_eq!(next, len);
            }
        }
    }

    #[test]
    fn near_the_largest_offset() {
        // Up to and including byte u64::MAX - 1 (end = u64::MAX): fine.
        let ps = pieces(u64::MAX - 10, 10, 12);
        assert_eq!(ps, [(u64::MAX >> 12, 4095 - 10, 10, 0)]);
        assert_eq!(pieces(u64::MAX - 1, 1, 12), [(u64::MAX >> 12, 4094, 1, 0)]);
        assert_eq!(
            Blocks::new(u64::MAX - 4096, 4096, 12)
                .unwrap()
                .block_count(),
            2
        );
        // An end past u64::MAX is refused, not wrapped.
        assert!(Blocks::new(u64::MAX, 1, 12).is_none());
        assert!(Blocks::new(u64::MAX - 10, 11, 12).is_none());
        assert!(Blocks::new(u64::MAX - 10, usize::MAX, 12).is_none());
    }
}
