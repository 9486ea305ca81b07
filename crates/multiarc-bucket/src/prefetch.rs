//! Prefetch of a file read sequentially: the window past a handle's reads
//! is fetched in the background, as several ranged GETs at once, while the
//! reader consumes what came before.
//!
//! FUSE with direct I/O hands the filesystem one read at a time per reader,
//! with no kernel readahead. A readahead that rides on a read's own miss
//! makes that read wait for its whole window, and leaves the store idle
//! while the reader consumes it. Here, once a handle's reads follow one
//! another (the second read that starts where the last one ended), the
//! window past the read is split in chunks fetched concurrently by tasks of
//! the filesystem's runtime, through the cached store (blocks cached,
//! single-flight: a read reaching a chunk in flight waits for it instead of
//! fetching it again; each GET conditional on the handle's ETag). The window
//! is topped up whenever less than half of it is left ahead of the reads.
//! A read elsewhere resets it: random reads never prefetch.
//!
//! A run prefetches only once one of its reads found a block memory did
//! not hold (as Linux reads ahead on a page-cache miss, not on hits): a
//! reader going through bytes that are all cached fetches nothing past
//! them. A query reading its columns again after a scan otherwise runs its
//! window past the last column it reads into bytes it never reads (and
//! which, read ahead unused before, the cache rightly let go first).
//!
//! A handle may carry several runs at once: threads of one process reading
//! one descriptor each through its own part of the file (DuckDB's, on one
//! Parquet file), or the kernel's readahead of a few of them. So a handle
//! keeps up to [`STREAMS`] runs ([`Streams`]): a read continues the run that
//! ended where it starts, or starts a new one in place of the run used
//! least recently.
//!
//! A run replaced after a single read that missed memory was a random read
//! (nothing followed it): [`Streams::advance`] reports it, for the object's
//! [`crate::dense::Density`], which decides when random reads are dense
//! enough to fetch the whole object.

use std::ops::Range;

/// A handle's sequential reading.
#[derive(Debug, Default)]
pub(crate) struct Sequential {
    /// Where the last read ended.
    end: u64,
    /// Reads in a row that started where the one before ended.
    run: u32,
    /// Where the prefetch reaches (exclusive).
    ahead: u64,
    /// A read of this run found a block memory did not hold.
    missed: bool,
    /// The run's window now: [`FIRST_WINDOW`] at its first prefetch,
    /// doubled at each top-up up to the window asked for.
    grown: u64,
}

/// A run's first prefetch window, at most. A Parquet column chunk is
/// often a few MiB: a run that ends there fetched little past it, while
/// a run that goes on (a whole file) reaches the full window after a few
/// top-ups, as Linux's readahead ramps up.
pub(crate) const FIRST_WINDOW: u64 = 2 << 20;

impl Sequential {
    /// Records a read of `span` of an object of `size` bytes and returns
    /// the bytes to prefetch now (empty for none): once the reads are
    /// sequential and less than half the window is left ahead of this one.
    /// The window is [`FIRST_WINDOW`] (or `window` if smaller) at the run's
    /// first prefetch and doubles at each top-up, up to `window` bytes. The prefetch ends on a multiple of
    /// `chunk` where it can (within the window), so that the next top-up
    /// starts on one and is cut into whole chunks, not a chunk and a
    /// sliver of one. Nothing until a read of the run has missed memory
    /// ([`Sequential::missed`]), this one included if `missed` is true.
    pub(crate) fn advance(
        &mut self,
        span: Range<u64>,
        size: u64,
        window: u64,
        chunk: u64,
        missed: bool,
    ) -> Range<u64> {
        if span.start == self.end && span.start > 0 {
            self.run = self.run.saturating_add(1);
        } else {
            self.run = 0;
            self.ahead = 0;
            self.missed = false;
            self.grown = 0;
        }
        self.missed |= missed;
        self.end = span.end;
        if self.run == 0 || window == 0 || !self.missed {
            return 0..0;
        }
        let max = window;
        let window = if self.grown == 0 {
            max.min(FIRST_WINDOW)
        } else {
            self.grown.min(max)
        };
        self.grown = window;
        let from = self.ahead.max(span.end);
        let reach = span.end.saturating_add(window);
        let aligned = reach / chunk.max(1) * chunk.max(1);
        let to = if aligned > from { aligned } else { reach }.min(size);
        if from >= to || from - span.end >= window / 2 {
            return 0..0;
        }
        self.ahead = to;
        self.grown = window.saturating_mul(2).min(max);
        from..to
    }

    /// Whether the last read (given to [`Sequential::advance`]) continued a
    /// run: started where the one before ended.
    pub(crate) fn in_run(&self) -> bool {
        self.run > 0
    }

    /// Records that the last read (given to [`Sequential::advance`]) found
    /// a block memory did not hold: its run prefetches from its next read.
    pub(crate) fn missed(&mut self) {
        self.missed = true;
    }
}

/// Runs a handle keeps at once.
pub(crate) const STREAMS: usize = 8;

/// One run of a handle, and what it has done.
#[derive(Debug, Default)]
struct Stream {
    sequential: Sequential,
    /// Where the run started (its first read's offset).
    start: u64,
    /// Reads of the run.
    reads: u32,
    /// When it was last used ([`Streams::advance`] calls).
    used: u64,
}

/// The runs of one handle (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Streams {
    streams: Vec<Stream>,
    clock: u64,
    /// The run the last read went to.
    current: usize,
}

/// What [`Streams::advance`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Advance {
    /// The bytes to prefetch now (empty for none).
    pub(crate) ahead: Range<u64>,
    /// The read continued a run.
    pub(crate) in_run: bool,
    /// A run this read replaced had one read, which missed memory, at this
    /// offset: a random read.
    pub(crate) random_miss: Option<u64>,
}

impl Streams {
    /// Records a read of `span`: it continues the run that ended where it
    /// starts (see [`Sequential::advance`] for `size`, `window`, `chunk`,
    /// `missed`), or starts a new run in place of the least recently used
    /// one once [`STREAMS`] are kept.
    pub(crate) fn advance(
        &mut self,
        span: Range<u64>,
        size: u64,
        window: u64,
        chunk: u64,
        missed: bool,
    ) -> Advance {
        self.clock += 1;
        let mut random_miss = None;
        let at = match self
            .streams
            .iter()
            .position(|s| s.sequential.end == span.start && span.start > 0)
        {
            Some(i) => i,
            None if self.streams.len() < STREAMS => {
                self.streams.push(Stream::default());
                self.streams.len() - 1
            }
            None => {
                let (i, old) = self
                    .streams
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.used)
                    .expect("STREAMS > 0");
                if old.reads == 1 && old.sequential.missed {
                    random_miss = Some(old.start);
                }
                self.streams[i] = Stream::default();
                i
            }
        };
        let stream = &mut self.streams[at];
        if stream.reads == 0 {
            stream.start = span.start;
        }
        stream.reads = stream.reads.saturating_add(1);
        stream.used = self.clock;
        self.current = at;
        let ahead = stream.sequential.advance(span, size, window, chunk, missed);
        Advance {
            ahead,
            in_run: stream.sequential.in_run(),
            random_miss,
        }
    }

    /// Records that the read of the run now ending at `end` found a block
    /// memory did not hold (see [`Sequential::missed`]).
    pub(crate) fn missed(&mut self, end: u64) {
        if let Some(s) = self.streams.iter_mut().find(|s| s.sequential.end == end) {
            s.sequential.missed();
        }
    }
}

/// `range` cut in pieces of at most `chunk` bytes, ending on multiples of
/// `align` (the cached store's blocks) where they can.
pub(crate) fn chunks(range: Range<u64>, chunk: u64, align: u64) -> Vec<Range<u64>> {
    let chunk = (chunk / align).max(1) * align;
    let mut out = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let end = ((at / chunk + 1) * chunk).min(range.end);
        out.push(at..end);
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    #[test]
    fn sequential_reads_prefetch_a_window_that_doubles_up_to_its_size() {
        let mut s = Sequential::default();
        // The first read, and a first read at 0: nothing yet.
        assert_eq!(s.advance(0..M, 100 * M, 8 * M, 1, true), 0..0);
        // The second in a row: the first window (2 MiB) past it.
        assert_eq!(s.advance(M..2 * M, 100 * M, 8 * M, 1, true), 2 * M..4 * M);
        // Less than half the window left: topped up with twice as much...
        assert_eq!(
            s.advance(2 * M..3 * M, 100 * M, 8 * M, 1, true),
            4 * M..7 * M
        );
        // ...and again, up to the window asked for (8 MiB).
        assert_eq!(
            s.advance(3 * M..6 * M, 100 * M, 8 * M, 1, true),
            7 * M..14 * M
        );
        // Half of it or more left ahead: nothing.
        assert_eq!(s.advance(6 * M..7 * M, 100 * M, 8 * M, 1, true), 0..0);
        assert_eq!(
            s.advance(7 * M..11 * M, 100 * M, 8 * M, 1, true),
            14 * M..19 * M
        );
        // Never past the object's end.
        assert_eq!(
            s.advance(11 * M..95 * M, 100 * M, 8 * M, 1, true),
            95 * M..100 * M
        );
        assert_eq!(s.advance(95 * M..100 * M, 100 * M, 8 * M, 1, true), 0..0);
        // A window smaller than the first one is the window.
        let mut small = Sequential::default();
        small.advance(0..M, 100 * M, M, 1, true);
        assert_eq!(small.advance(M..2 * M, 100 * M, M, 1, true), 2 * M..3 * M);
    }

    #[test]
    fn a_read_elsewhere_resets_and_random_reads_never_prefetch() {
        let mut s = Sequential::default();
        s.advance(0..M, 100 * M, 8 * M, 1, true);
        assert_eq!(s.advance(M..2 * M, 100 * M, 8 * M, 1, true), 2 * M..4 * M);
        assert_eq!(
            s.advance(2 * M..3 * M, 100 * M, 8 * M, 1, true),
            4 * M..7 * M
        );
        // A jump: nothing, and the window starts anew (small) after it.
        assert_eq!(s.advance(50 * M..51 * M, 100 * M, 8 * M, 1, true), 0..0);
        assert_eq!(
            s.advance(51 * M..52 * M, 100 * M, 8 * M, 1, true),
            52 * M..54 * M
        );
        let mut r = Sequential::default();
        for i in [7u64, 3, 90, 41, 12, 60] {
            assert_eq!(
                r.advance(i * M..i * M + 8192, 100 * M, 8 * M, 1, true),
                0..0
            );
        }
        // A window of 0: never.
        let mut off = Sequential::default();
        off.advance(0..M, 100 * M, 0, 1, true);
        assert_eq!(off.advance(M..2 * M, 100 * M, 0, 1, true), 0..0);
    }

    #[test]
    fn a_run_prefetches_only_once_one_of_its_reads_missed_memory() {
        let mut s = Sequential::default();
        // Sequential reads all served from memory: nothing.
        for i in 0..6 {
            assert_eq!(
                s.advance(i * M..(i + 1) * M, 100 * M, 8 * M, 1, false),
                0..0
            );
        }
        // One misses (known after it was read): the next one prefetches.
        s.missed();
        assert_eq!(
            s.advance(6 * M..7 * M, 100 * M, 8 * M, 1, false),
            7 * M..9 * M
        );
        // And the run goes on topping up, its reads hits or not.
        assert_eq!(
            s.advance(7 * M..12 * M, 100 * M, 8 * M, 1, false),
            12 * M..16 * M
        );
        // A jump starts a run that has missed nothing yet.
        assert_eq!(s.advance(50 * M..51 * M, 100 * M, 8 * M, 1, false), 0..0);
        assert_eq!(s.advance(51 * M..52 * M, 100 * M, 8 * M, 1, false), 0..0);
        // A read known to miss before it is read counts at once.
        assert_eq!(
            s.advance(52 * M..53 * M, 100 * M, 8 * M, 1, true),
            53 * M..55 * M
        );
        // A miss on a run's first read counts for the run's second.
        let mut f = Sequential::default();
        assert_eq!(f.advance(0..M, 100 * M, 8 * M, 1, false), 0..0);
        f.missed();
        assert_eq!(f.advance(M..2 * M, 100 * M, 8 * M, 1, false), 2 * M..4 * M);
    }

    #[test]
    fn top_ups_start_on_a_chunk_boundary_and_are_whole_chunks() {
        let (window, chunk) = (32 * M, 8 * M);
        let mut s = Sequential::default();
        let read = 128 << 10;
        s.advance(0..read, 1024 * M, window, chunk, true);
        // The first window (2 MiB) is smaller than a chunk.
        assert_eq!(
            s.advance(read..2 * read, 1024 * M, window, chunk, true),
            2 * read..2 * read + 2 * M
        );
        // Each top-up then starts where the last ended; once the window is
        // a chunk or more (the third), they end on a boundary: whole chunks.
        let mut at = 2 * read;
        let mut topped = Vec::new();
        while at < 200 * M {
            let ahead = s.advance(at..at + read, 1024 * M, window, chunk, true);
            if !ahead.is_empty() {
                topped.push(ahead);
            }
            at += read;
        }
        assert!(topped.len() > 5, "{topped:?}");
        for (i, ahead) in topped.iter().enumerate().skip(2) {
            assert_eq!(ahead.end % chunk, 0, "{topped:?}");
            if i > 2 {
                assert_eq!(ahead.start % chunk, 0, "{topped:?}");
            }
            assert!(ahead.end - ahead.start <= window, "{topped:?}");
            if i > 0 {
                assert_eq!(ahead.start, topped[i - 1].end, "{topped:?}");
            }
        }
        // At the object's end, what is left.
        let mut e = Sequential::default();
        e.advance(0..read, 20 * M, window, chunk, true);
        assert_eq!(
            e.advance(read..2 * read, 20 * M, window, chunk, true),
            2 * read..2 * read + 2 * M
        );
    }

    #[test]
    fn chunks_end_on_block_boundaries() {
        let b = 256 << 10;
        assert_eq!(
            chunks(M + 100..5 * M, 2 * M, b),
            vec![M + 100..2 * M, 2 * M..4 * M, 4 * M..5 * M]
        );
        assert_eq!(chunks(0..100, 2 * M, b), vec![0..100]);
        assert!(chunks(5..5, 2 * M, b).is_empty());
        // A chunk smaller than a block is a block.
        assert_eq!(chunks(0..2 * b, 1000, b), vec![0..b, b..2 * b]);
    }

    #[test]
    fn interleaved_runs_of_one_handle_each_prefetch() {
        let mut s = Streams::default();
        let (size, window) = (1024 * M, 8 * M);
        // Four threads, each through its own quarter, their reads
        // interleaved: every run is sequential from its second read.
        let starts = [0, 256 * M, 512 * M, 768 * M];
        for (i, &at) in starts.iter().enumerate() {
            let a = s.advance(at..at + M, size, window, 1, true);
            assert!(!a.in_run, "{i}: {a:?}");
            assert_eq!(a.random_miss, None);
        }
        for (i, &at) in starts.iter().enumerate() {
            let a = s.advance(at + M..at + 2 * M, size, window, 1, true);
            assert!(a.in_run, "{i}: {a:?}");
            assert_eq!(a.ahead, at + 2 * M..at + 4 * M, "{i}");
        }
        // Nothing was a random read, however many runs come after.
        for i in 0..20 {
            let a = s.advance(i * 40 * M + 3..i * 40 * M + 4, size, window, 1, false);
            assert_eq!(a.random_miss, None, "{i}");
        }
    }

    #[test]
    fn a_run_replaced_after_one_missed_read_was_a_random_read() {
        let mut s = Streams::default();
        let size = 1024 * M;
        let offsets: Vec<u64> = (0..20).map(|i| (i * 7919 % 1000) * M + 4096).collect();
        let mut reported = Vec::new();
        for &at in &offsets {
            let a = s.advance(at..at + 8192, size, 8 * M, 1, false);
            // It went to the store.
            s.missed(at + 8192);
            reported.extend(a.random_miss);
        }
        // Each replaced run is reported once, STREAMS reads later.
        assert_eq!(reported, offsets[..offsets.len() - STREAMS]);
        // Reads served from memory are not.
        let mut h = Streams::default();
        for &at in &offsets {
            assert_eq!(
                h.advance(at..at + 8192, size, 8 * M, 1, false).random_miss,
                None
            );
        }
        // Nor a run that went on.
        let mut r = Streams::default();
        r.advance(4096..8192, size, 8 * M, 1, true);
        r.advance(8192..12288, size, 8 * M, 1, true);
        for &at in &offsets {
            assert_eq!(
                r.advance(at + M..at + M + 1, size, 8 * M, 1, false)
                    .random_miss,
                None
            );
        }
    }
}
