//! Sequential readahead: which reads continue a sequential stream through
//! an object, and how many blocks past such a read to fetch with it.
//!
//! As Linux's readahead does per open file, but keyed by the object version
//! (an `ObjectStore` has no file handles): a small table of streams, each
//! the version's identity, where its last read ended and its window. A read
//! that starts in the block where a stream's last read ended, or in the
//! next one, continues that stream; any other read starts a new stream
//! (replacing the least recently used one when the table is full), with no
//! window: a random read never fetches more than it covers. When a
//! continuing read misses, it fetches its window of blocks past its end
//! with its own blocks, and the window doubles for the next time, up to the
//! configured maximum. Several readers of one object each keep their own
//! stream, as long as the table has room for them.

use crate::key::ObjectIdentity;
use multiarc::lock::poison::LockUnpoisoned;
use std::ops::Range;
use std::sync::Mutex;

/// Streams followed at once, at most (bounded memory: a few KiB).
const MAX_STREAMS: usize = 64;

/// One sequential stream through one object version.
struct Stream {
    identity: ObjectIdentity,
    /// Where the stream's last read ended (exclusive byte offset).
    end: u64,
    /// Blocks read ahead the last time (0: not yet).
    window: u64,
    /// When the stream was last read (the table's clock), to replace the
    /// least recently used one.
    used: u64,
}

/// The streams of a cached store and its readahead bound.
pub(crate) struct Readahead {
    /// The largest window, in blocks; 0 disables readahead.
    max_blocks: u64,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    streams: Vec<Stream>,
    clock: u64,
}

impl Readahead {
    pub(crate) fn new(max_blocks: u64) -> Readahead {
        Readahead {
            max_blocks,
            table: Mutex::new(Table::default()),
        }
    }

    /// Records a read of bytes `span` (non-empty) of the version
    /// `identity` names, cut in blocks of `block_size`, of `blocks` blocks
    /// in all, and returns the blocks to fetch ahead of it: none unless it
    /// continues a stream and `missed` (it fetches something anyway), else
    /// the stream's window of blocks right past the read, within the
    /// object.
    pub(crate) fn advance(
        &self,
        identity: &ObjectIdentity,
        span: Range<u64>,
        missed: bool,
        block_size: u64,
        blocks: u64,
    ) -> Range<u64> {
        if self.max_blocks == 0 || span.is_empty() {
            return 0..0;
        }
        let first = span.start / block_size;
        let last = (span.end - 1) / block_size;
        let mut table = self.table.lock_unpoisoned();
        table.clock += 1;
        let now = table.clock;
        let continued = table.streams.iter_mut().find(|s| {
            let ended_in = s.end.saturating_sub(1) / block_size;
            s.identity == *identity
                && s.end > 0
                && span.end > s.end
                && (first == ended_in || first == ended_in + 1)
        });
        let stream = match continued {
            Some(stream) => stream,
            None => {
                let fresh = Stream {
                    identity: *identity,
                    end: span.end,
                    window: 0,
                    used: now,
                };
                if table.streams.len() < MAX_STREAMS {
                    table.streams.push(fresh);
                } else if let Some(oldest) = table.streams.iter_mut().min_by_key(|s| s.used) {
                    *oldest = fresh;
                }
                return 0..0;
            }
        };
        stream.end = span.end;
        stream.used = now;
        if !missed {
            return 0..0;
        }
        // The first window: twice the read (at least one block); then
        // twice the last one; at most the maximum.
        stream.window = if stream.window == 0 {
            2 * (last - first + 1)
        } else {
            2 * stream.window
        }
        .min(self.max_blocks);
        let start = (last + 1).min(blocks);
        start..(start + stream.window).min(blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::path::Path;
    use object_store::ObjectMeta;

    const B: u64 = 4096;

    fn identity(name: &str) -> ObjectIdentity {
        let meta = ObjectMeta {
            location: Path::from(name),
            last_modified: Default::default(),
            size: 1 << 30,
            e_tag: Some("e".into()),
            version: None,
        };
        ObjectIdentity::of("ns", &Path::from(name), &meta, B)
    }

    #[test]
    fn a_sequential_stream_gets_a_doubling_window_up_to_the_maximum() {
        let ra = Readahead::new(8);
        let id = identity("a");
        // The first read starts a stream: nothing ahead.
        assert_eq!(ra.advance(&id, 0..100, true, B, 1000), 0..0);
        // Within the block it ended in, a hit: nothing ahead.
        assert_eq!(ra.advance(&id, 100..B, false, B, 1000), 0..0);
        // The next block, missed: twice the read.
        assert_eq!(ra.advance(&id, B..2 * B, true, B, 1000), 2..4);
        assert_eq!(ra.advance(&id, 2 * B..4 * B, false, B, 1000), 0..0);
        assert_eq!(ra.advance(&id, 4 * B..5 * B, true, B, 1000), 5..9);
        assert_eq!(ra.advance(&id, 5 * B..9 * B, false, B, 1000), 0..0);
        assert_eq!(ra.advance(&id, 9 * B..10 * B, true, B, 1000), 10..18);
        assert_eq!(ra.advance(&id, 10 * B..18 * B, false, B, 1000), 0..0);
        // At the maximum.
        assert_eq!(ra.advance(&id, 18 * B..19 * B, true, B, 1000), 19..27);
        // Never past the object's end.
        assert_eq!(ra.advance(&id, 19 * B..20 * B, true, B, 22), 20..22);
        assert_eq!(ra.advance(&id, 20 * B..22 * B, true, B, 22), 22..22);
    }

    #[test]
    fn a_jump_starts_a_new_stream_without_readahead() {
        let ra = Readahead::new(8);
        let id = identity("a");
        ra.advance(&id, 0..B, true, B, 1000);
        assert_eq!(ra.advance(&id, B..2 * B, true, B, 1000), 2..4);
        // Far away: a new stream, nothing ahead.
        assert_eq!(ra.advance(&id, 100 * B..101 * B, true, B, 1000), 0..0);
        // Backwards: nothing ahead.
        assert_eq!(ra.advance(&id, 50 * B..51 * B, true, B, 1000), 0..0);
        // The first stream goes on where it was, with its window.
        assert_eq!(ra.advance(&id, 2 * B..3 * B, true, B, 1000), 3..7);
        // Another object's stream is its own.
        assert_eq!(
            ra.advance(&identity("b"), 3 * B..4 * B, true, B, 1000),
            0..0
        );
        // Disabled: never.
        let off = Readahead::new(0);
        off.advance(&id, 0..B, true, B, 1000);
        assert_eq!(off.advance(&id, B..2 * B, true, B, 1000), 0..0);
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_the_recent_streams() {
        let ra = Readahead::new(8);
        let id = identity("a");
        for i in 0..10 * MAX_STREAMS as u64 {
            ra.advance(&id, i * 10 * B..i * 10 * B + 1, true, B, 1 << 20);
            assert!(ra.table.lock().unwrap().streams.len() <= MAX_STREAMS);
        }
        // The most recent stream is still followed.
        let last = (10 * MAX_STREAMS as u64 - 1) * 10 * B;
        assert_eq!(ra.advance(&id, last + 1..last + B, false, B, 1 << 20), 0..0);
        assert_eq!(
            ra.advance(&id, last + B..last + 2 * B, true, B, 1 << 20),
            last / B + 2..last / B + 4
        );
    }
}
