//! The feed (OpenZFS's `l2arc_feed_thread`): what goes to the second tier.
//!
//! Why from the list tails: the buffers near a list's tail are the ones
//! eviction reaches next. Copying them to the device *before* they are
//! evicted means that most buffers eviction drops already have a copy
//! (`evict_l2_cached`), and that eviction rarely waits for I/O: only the
//! evict thread does, for one batch before a pass, when the tails hold
//! buffers no feed has copied yet (below). A feed looks
//! `headroom x write_max` bytes up the tails of both lists, the one ARC's
//! REPLACE would take from now first (MFU only with `mfu_only`), spread
//! over every sublist, and copies the buffers the tier
//! does not hold yet into one batch of at most `write_max` bytes, written
//! sequentially at the ring's hand (`l2/`). Nothing here runs on a memory
//! hit: the hit path does not know the tier exists.
//!
//! Who feeds: the feed thread, every `feed_interval` (every
//! `feed_min_interval` while feeds fill more than half their batch, ZFS's
//! "feed again"), or, with inline eviction, the inserting thread itself,
//! synchronously, once the cache is full and a batch's worth has been inserted
//! since the last feed (deterministic, for tests and `replay`); and the
//! evict thread, before each pass (`feed_before_eviction`), so that a churn
//! faster than the feed thread's look does not drop uncopied buffers.

use super::{Added, L2Arc};
use crate::arc::{ArcTails, Key};
use crate::mem::sync::{unpoisoned, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs one feed: returns the bytes written to the tier (0 when it has
/// nothing to write, is rebuilding its index, or the write failed; the
/// tier counts its errors).
pub(crate) fn feed_once<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>) -> u64 {
    feed_at_most(tier, arc, tier.feed_config().write_max)
}

/// One feed of a batch of at most `max_bytes` (`feed_once`'s).
fn feed_at_most<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>, max_bytes: u64) -> u64 {
    let config = tier.feed_config();
    feed_tails(
        tier,
        arc,
        max_bytes,
        config.headroom.saturating_mul(config.write_max),
    )
}

/// The evict thread, before a pass that drops about `bytes`: copies the
/// buffers it is about to drop that the tier could hold and no feed has
/// copied yet (at most a feed thread's batch, looking twice that far up
/// the tails of each list, over its sublists). The feed thread looks every few milliseconds, and a scan
/// through a small memory evicts more than that between two looks (issue
/// 24's object benchmark at 32 tasks evicted blocks no feed had copied,
/// and its warm pass went back to the store for them). A pass whose tails
/// are all copied writes nothing (the look is in memory). One batch,
/// written by the evict thread, which holds no ARC lock meanwhile; inserts
/// waiting for room (past the overflow) wait that much longer. The pass
/// spares what it reaches uncopied and calls this again (a bounded number
/// of times: `arc::evict`'s `evict_feeding`); round `round` looks
/// `2^round` times as far up the tails (up to the feed thread's reach),
/// past buffers a batch in flight holds or that are copied already.
pub(super) fn feed_before_eviction<K: Key>(
    tier: &L2Arc<K>,
    arc: &dyn ArcTails<K>,
    bytes: u64,
    round: u32,
) {
    if bytes == 0 {
        return;
    }
    // A whole batch, not just `bytes`: inserts go on while the batch is
    // written, and the pass then evicts what they added too (with `bytes`
    // alone, 32 tasks still had 52 blocks evicted unfed in a cold pass).
    let batch = thread_batch(tier, arc);
    let look = batch
        .saturating_mul(2)
        .saturating_mul(1 << round.min(16))
        .min(reach(tier, arc).max(batch.saturating_mul(2)));
    feed_tails(tier, arc, batch, look);
}

/// One feed of a batch of at most `max_bytes`, looking `budget` bytes up
/// the tails of each list.
fn feed_tails<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>, max_bytes: u64, budget: u64) -> u64 {
    if tier.rebuilding() {
        return 0;
    }
    let config = tier.feed_config();
    // The list eviction takes from next (ARC's REPLACE, as things stand)
    // first: its tail is what goes soonest. `true`: the MFU list.
    let lists: &[bool] = if config.mfu_only {
        &[true]
    } else if arc.evicting_mru_first() {
        &[false, true]
    } else {
        &[true, false]
    };
    // One batch at a time: the feed thread and the evict thread (or two
    // inserting threads, inline) each filling one held two batches'
    // buffers at once, past the memory kept for them (a bucket mount's
    // daemon mapped 26 MiB of batches against the 10 MiB it keeps for the
    // feed, in a scan of TPC-H SF1).
    let _feeding = tier.feeding.lock();
    let mut batch = tier.batch_of(max_bytes);
    let n = arc.sublists();
    'lists: for &mfu in lists {
        let per_sublist = budget.div_ceil(n as u64).max(1);
        let start = (arc.random() % n as u64) as usize;
        let tails: Vec<Vec<(K, u64)>> = (0..n)
            .map(|k| arc.tail_keys(mfu, (start + k) % n, per_sublist))
            .collect();
        // Tail-most first across the sublists (the first of each, then the
        // second of each, ...), as eviction goes round them, so that a
        // batch that fills up has taken what eviction reaches next in
        // every sublist, not one sublist's whole tail.
        let deepest = tails.iter().map(Vec::len).max().unwrap_or(0);
        let by_depth = (0..deepest).flat_map(|d| tails.iter().filter_map(move |t| t.get(d)));
        for (key, hash) in by_depth {
            // Under the key's stripe lock (`with_live`): the entry cannot
            // go, and an insert or removal of the key (which invalidates
            // its copy under the same lock) cannot slip between the copy
            // and its record.
            let mut added = Added::Present;
            arc.with_live(key, *hash, &mut |data, is_mfu| {
                if !config.takes(data.len() as u64, is_mfu) {
                    // Ineligible (eviction counts it so).
                    return;
                }
                added = batch.add(key, data, is_mfu);
            });
            if added == Added::Full {
                break 'lists;
            }
        }
    }
    if batch.is_empty() && !tier.has_pending() {
        return 0;
    }
    // (An empty batch still writes down the tombstones waiting.)
    let bytes = batch.bytes();
    match batch.commit() {
        Ok(_) => bytes,
        Err(e) => {
            log::debug!("l2: a batch of {bytes} bytes was not written: {e}");
            0
        }
    }
}

/// Copies every buffer memory holds that the tier does not (both lists,
/// from their tails up, whole), a batch of `write_max` at a time, until a
/// batch finds nothing left to copy or the ring's size has been written
/// (more would overwrite what this wrote first). For a cache about to
/// close: the feed copies only what eviction will reach soon, so a working
/// set that fits in memory would otherwise never reach the tier, and the
/// next start would fetch it all again. Returns the bytes written.
pub(crate) fn flush<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>) -> u64 {
    let ring = tier.ring_bytes();
    let batch = tier.feed_config().write_max;
    let mut written = 0u64;
    while written < ring {
        let bytes = feed_tails(tier, arc, batch.min(ring - written), u64::MAX);
        if bytes == 0 {
            break;
        }
        written += bytes;
    }
    written
}

/// Inline eviction: feeds synchronously once the cache is full and a batch's
/// worth has been inserted since the last feed (`size`: the insert's bytes,
/// counted as the device will store them, in whole 4 KiB units, since a
/// batch's size is counted so).
pub(super) fn feed_inline<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>, size: u64) {
    let size = size.max(1).next_multiple_of(4096);
    let unfed = tier.unfed.fetch_add(size, Ordering::Relaxed) + size;
    if unfed >= tier.feed_config().write_max && arc.data_bytes() > arc.target_bytes() {
        tier.unfed.store(0, Ordering::Relaxed);
        feed_once(tier, arc);
    }
}

/// How far up the list tails a feed looks: `headroom x write_max`, or all
/// of memory if that is less.
fn reach<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>) -> u64 {
    let c = tier.feed_config();
    c.headroom
        .saturating_mul(c.write_max)
        .min(arc.target_bytes())
}

/// The feed thread's batch: `write_max`, or an eighth of memory if that is
/// less. A batch's buffers are being written until it commits, and
/// eviction passes over them (`evict_l2_skip`) to take younger buffers,
/// which no feed has copied yet: with a batch the size of memory (16 MiB
/// against 8 MiB in the object benchmark), every eviction during a
/// commit dropped buffers the tier could have held, and the warm pass went
/// back to the store for them. Small batches, fed one after the other
/// while they fill (the thread's "again"), keep the copied buffers ahead
/// of eviction instead. (Inline feeding keeps `write_max`: it feeds
/// between inserts, so nothing is evicted during its commit.)
fn thread_batch<K: Key>(tier: &L2Arc<K>, arc: &dyn ArcTails<K>) -> u64 {
    let share = (arc.target_bytes() / BATCH_SHARE_OF_MEMORY).max(4096);
    tier.feed_config().write_max.min(share)
}

/// `thread_batch`: memory / this.
const BATCH_SHARE_OF_MEMORY: u64 = 8;

/// Memory has filled up once (OpenZFS's `arc_warm`).
fn warm<K>(arc: &dyn ArcTails<K>) -> bool {
    arc.evicted_bytes() > 0 || arc.data_bytes() >= arc.target_bytes()
}

/// The running feed thread; stopped and joined on drop.
pub(crate) struct FeedThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl FeedThread {
    /// Feeds every `interval`, or every `min_interval` after a feed that
    /// wrote more than `busy` bytes (OpenZFS's "feed again"). Two rules keep
    /// it up with a churn that those intervals, made for memories of
    /// gigabytes, would not: it also feeds once eviction has gone through
    /// a quarter of what the last feed looked at (`reach`), so that
    /// eviction never reaches buffers no feed has seen (it looks every
    /// `BUSY_TICK` while eviction moves, every `TICK` while it is idle);
    /// and while eviction still drops buffers the tier could have held
    /// (the feed is behind), it feeds again at once after a feed that
    /// wrote anything, as fast as the device writes. It also feeds again at
    /// once after a feed that filled more than half its batch, whose size
    /// is a share of memory (`thread_batch`): the tails have more to copy.
    pub(crate) fn start<K: Key>(
        tier: Arc<L2Arc<K>>,
        arc: Arc<dyn ArcTails<K>>,
    ) -> std::io::Result<FeedThread> {
        let config = tier.feed_config();
        let (interval, min_interval) = (config.feed_interval, config.feed_min_interval);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let for_thread = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("multiarc-l2-feed".into())
            .spawn(move || {
                let (lock, wake) = &*for_thread;
                let idle_tick = TICK.min(min_interval);
                let mut tick = idle_tick;
                let mut looked_at = arc.evicted_bytes();
                let mut wait = min_interval;
                let mut last = Instant::now();
                let (mut missed, mut evicted) = (arc.missed_bytes(), arc.evicted_bytes());
                let mut again = false;
                loop {
                    if !again {
                        let stopped = unpoisoned(lock.lock());
                        let (stopped, _) =
                            unpoisoned(wake.wait_timeout_while(stopped, tick, |s| !*s));
                        if *stopped {
                            return;
                        }
                        // Look again soon while eviction moves: a memory of
                        // megabytes turns over in tens of milliseconds.
                        let now_evicted = arc.evicted_bytes();
                        tick = if now_evicted != looked_at {
                            BUSY_TICK.min(idle_tick)
                        } else {
                            idle_tick
                        };
                        looked_at = now_evicted;
                        let through = now_evicted.saturating_sub(evicted);
                        if last.elapsed() < wait && through < reach(&tier, &*arc) / 4 {
                            continue;
                        }
                    } else if *unpoisoned(lock.lock()) {
                        return;
                    }
                    let batch = thread_batch(&tier, &*arc);
                    let busy = batch / 2;
                    let wrote = feed_at_most(&tier, &*arc, batch);
                    last = Instant::now();
                    evicted = arc.evicted_bytes();
                    let now_missed = arc.missed_bytes();
                    again = (now_missed > missed && wrote > 0) || wrote > busy;
                    missed = now_missed;
                    // While memory fills, as OpenZFS's warm-up: every
                    // `min_interval`, so the first tails are fed before
                    // eviction reaches them.
                    wait = if wrote > busy || !warm(&*arc) {
                        min_interval
                    } else {
                        interval
                    };
                }
            })?;
        Ok(FeedThread {
            stop,
            handle: Some(handle),
        })
    }
}

/// How often the feed thread looks at eviction's progress while eviction
/// is idle.
const TICK: Duration = Duration::from_millis(50);

/// How often it looks while eviction moves. At 50 ms, 32 tasks scanning
/// through an 8 MiB memory evicted 7-14 MiB between two looks, so blocks
/// went before any feed had seen them (the object benchmark sent 107 KiB
/// per warm query to the store at 32 tasks).
const BUSY_TICK: Duration = Duration::from_millis(5);

impl Drop for FeedThread {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *unpoisoned(lock.lock()) = true;
        wake.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{KeyCodec, L2Config};
    use super::*;
    use crate::arc::Presence;
    use std::path::PathBuf;
    use std::sync::atomic::AtomicU64;

    const UNIT: u64 = 4096;

    /// The ARC as a feed sees it, made up: each list's sublists, tail
    /// first, as `(key, length)`; and what the feed asked of it.
    struct FakeArc {
        /// `[MRU, MFU]`, each a list of sublists.
        tails: [Vec<Vec<(u64, u64)>>; 2],
        mru_first: bool,
        target: u64,
        data: AtomicU64,
        /// The lists whose tails the feed looked at (true: MFU), in order.
        looked: Mutex<Vec<bool>>,
        /// The keys whose bytes the feed asked for, in order.
        asked: Mutex<Vec<u64>>,
    }

    impl FakeArc {
        fn new(mru: Vec<Vec<(u64, u64)>>, mfu: Vec<Vec<(u64, u64)>>, mru_first: bool) -> Self {
            FakeArc {
                tails: [mru, mfu],
                mru_first,
                target: 1 << 30,
                data: AtomicU64::new(2 << 30),
                looked: Mutex::new(Vec::new()),
                asked: Mutex::new(Vec::new()),
            }
        }

        fn looked(&self) -> Vec<bool> {
            self.looked.lock().unwrap().clone()
        }

        fn asked(&self) -> Vec<u64> {
            self.asked.lock().unwrap().clone()
        }
    }

    fn bytes(key: u64, len: u64) -> Vec<u8> {
        (0..len).map(|i| (key * 13 + i) as u8).collect()
    }

    impl ArcTails<u64> for FakeArc {
        fn sublists(&self) -> usize {
            self.tails[0].len()
        }

        fn random(&self) -> u64 {
            0
        }

        fn evicting_mru_first(&self) -> bool {
            self.mru_first
        }

        fn tail_keys(&self, mfu: bool, i: usize, budget: u64) -> Vec<(u64, u64)> {
            self.looked.lock().unwrap().push(mfu);
            let mut seen = 0;
            let mut out = Vec::new();
            for &(key, len) in &self.tails[usize::from(mfu)][i] {
                if seen >= budget {
                    break;
                }
                seen += len.max(1);
                out.push((key, key));
            }
            out
        }

        fn with_live(&self, key: &u64, _hash: u64, f: &mut dyn FnMut(&[u8], bool)) -> bool {
            self.asked.lock().unwrap().push(*key);
            for (list, mfu) in self.tails.iter().zip([false, true]) {
                if let Some(&(_, len)) = list.iter().flatten().find(|(k, _)| k == key) {
                    f(&bytes(*key, len), mfu);
                    return true;
                }
            }
            false
        }

        fn evicted_bytes(&self) -> u64 {
            0
        }

        fn missed_bytes(&self) -> u64 {
            0
        }

        fn target_bytes(&self) -> u64 {
            self.target
        }

        fn data_bytes(&self) -> u64 {
            self.data.load(Ordering::Relaxed)
        }
    }

    /// A fresh tier of 1 MiB on a file under the target directory, with
    /// batches of `write_max` bytes.
    fn tier(name: &str, write_max: u64, mfu_only: bool) -> Arc<L2Arc<u64>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("feed-{name}"));
        let _ = std::fs::remove_file(&path);
        let mut config = L2Config::new(path, 1 << 20, write_max);
        config.feed.mfu_only = mfu_only;
        config.device.rebuild = false;
        let codec = KeyCodec {
            len: 8,
            encode: |k: &u64, out: &mut [u8]| out[..8].copy_from_slice(&k.to_le_bytes()),
            decode: |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap()),
        };
        L2Arc::open(config, codec).unwrap()
    }

    /// `n` keys from `first`, one unit each, tail first.
    fn blocks(first: u64, n: u64) -> Vec<(u64, u64)> {
        (first..first + n).map(|k| (k, UNIT)).collect()
    }

    fn cached(tier: &L2Arc<u64>, keys: impl IntoIterator<Item = u64>) -> Vec<u64> {
        keys.into_iter()
            .filter(|k| tier.presence(k) == Presence::Cached)
            .collect()
    }

    #[test]
    fn feeds_the_tails_in_eviction_order_until_the_batch_is_full() {
        let all = || (10..15).chain(20..22);
        // MRU evicted first: its tail, then (room left) MFU's.
        let tier1 = tier("order-mru", 3 * UNIT, false);
        let arc = FakeArc::new(vec![blocks(10, 5)], vec![blocks(20, 2)], true);
        assert_eq!(feed_once(&tier1, &arc), 3 * UNIT, "a full batch written");
        assert_eq!(
            cached(&tier1, all()),
            [10, 11, 12],
            "the feed takes the tail of the list eviction takes from next, tail first"
        );
        assert_eq!(
            arc.asked(),
            [10, 11, 12, 13],
            "the feed stops at the first buffer the full batch cannot take"
        );
        assert_eq!(
            arc.looked(),
            [false],
            "a full batch ends the feed: MFU not looked at"
        );
        // MFU evicted first.
        let tier2 = tier("order-mfu", 3 * UNIT, false);
        let arc = FakeArc::new(vec![blocks(10, 5)], vec![blocks(20, 2)], false);
        feed_once(&tier2, &arc);
        assert_eq!(
            cached(&tier2, all()),
            [10, 20, 21],
            "MFU evicted first: its tail first, then the MRU tail"
        );
        assert_eq!(arc.looked(), [true, false], "MFU looked at first");
        // What the tier holds is passed over; the next feed takes the rest.
        let arc = FakeArc::new(vec![blocks(10, 5)], vec![blocks(20, 2)], true);
        feed_once(&tier1, &arc);
        assert_eq!(
            cached(&tier1, all()),
            [10, 11, 12, 13, 14, 20],
            "a second feed passes over what the tier holds and takes what follows"
        );
    }

    /// Two feeds at once (the feed thread and the evict thread) fill one
    /// batch at a time: the second copies nothing until the first is
    /// written, so their buffers together stay within one `write_max`.
    #[test]
    fn a_second_feed_waits_for_the_batch_in_flight() {
        let tier = tier("one-at-a-time", 3 * UNIT, false);
        let arc = FakeArc::new(vec![blocks(10, 3)], vec![vec![]], true);
        std::thread::scope(|s| {
            let first = tier.feeding.lock();
            let second = s.spawn(|| feed_once(&tier, &arc));
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                arc.asked().is_empty() && !second.is_finished(),
                "a feed copied while another batch was in flight"
            );
            drop(first);
            assert_eq!(second.join().unwrap(), 3 * UNIT);
        });
        assert_eq!(cached(&tier, 10..13), [10, 11, 12]);
    }

    #[test]
    fn feeds_the_tail_most_buffers_of_every_sublist_first() {
        let tier = tier("sublists", 4 * UNIT, false);
        let arc = FakeArc::new(
            vec![blocks(10, 3), blocks(20, 3)],
            vec![vec![], vec![]],
            true,
        );
        feed_once(&tier, &arc);
        assert_eq!(
            cached(&tier, (10..13).chain(20..23)),
            [10, 11, 20, 21],
            "the feed goes round the sublists by depth, tail-most first"
        );
    }

    #[test]
    fn skips_buffers_too_big_for_a_batch() {
        let tier = tier("too-big", 3 * UNIT, false);
        let mut mru = vec![(10, 3 * UNIT + 1)];
        mru.extend(blocks(11, 3));
        let arc = FakeArc::new(vec![mru], vec![vec![]], true);
        feed_once(&tier, &arc);
        assert_eq!(
            cached(&tier, 10..14),
            [11, 12, 13],
            "a buffer bigger than a batch is passed over, and the feed goes on"
        );
    }

    #[test]
    fn mfu_only_feeds_only_the_mfu_list() {
        let tier = tier("mfu-only", 3 * UNIT, true);
        let arc = FakeArc::new(vec![blocks(10, 2)], vec![blocks(20, 1)], true);
        feed_once(&tier, &arc);
        assert_eq!(
            cached(&tier, [10, 11, 20]),
            [20],
            "mfu_only: only MFU buffers are fed"
        );
        assert_eq!(
            arc.looked(),
            [true],
            "mfu_only: the MRU list is not looked at"
        );
    }

    #[test]
    fn feed_inline_feeds_once_a_batch_was_inserted_and_the_cache_is_full() {
        let tier = tier("inline", 4 * UNIT, false);
        let arc = FakeArc::new(vec![blocks(10, 8)], vec![vec![]], true);
        let fed = |arc: &FakeArc| !arc.looked().is_empty();
        // Not full: no feed, however much is inserted.
        arc.data.store(arc.target, Ordering::Relaxed);
        for _ in 0..8 {
            feed_inline(&tier, &arc, UNIT);
        }
        assert!(
            !fed(&arc),
            "feed_inline: no feed while the cache is not full"
        );
        // Full: a batch's worth inserted, so the next insert feeds.
        arc.data.store(arc.target + 1, Ordering::Relaxed);
        feed_inline(&tier, &arc, UNIT);
        assert!(
            fed(&arc),
            "feed_inline: full and a batch's worth inserted: it feeds"
        );
        assert_eq!(cached(&tier, 10..18), [10, 11, 12, 13], "one batch fed");
        // Counted afresh from the feed, each insert as whole units.
        let arc = FakeArc::new(vec![blocks(10, 8)], vec![vec![]], true);
        for _ in 0..3 {
            feed_inline(&tier, &arc, 1);
        }
        assert!(
            !fed(&arc),
            "feed_inline: less than a batch's worth (in units) since the last feed: no feed"
        );
        feed_inline(&tier, &arc, 1);
        assert!(
            fed(&arc),
            "feed_inline: four one-byte inserts count as four units, a batch's worth"
        );
        assert_eq!(cached(&tier, 10..18), (10..18).collect::<Vec<_>>());
    }

    #[test]
    fn the_feed_threads_batch_is_a_share_of_a_small_memory() {
        let tier = tier("thread-batch", 8 * UNIT, false);
        let mut arc = FakeArc::new(vec![blocks(10, 8)], vec![vec![]], true);
        arc.target = 16 * UNIT;
        assert_eq!(
            thread_batch(&tier, &arc),
            2 * UNIT,
            "a memory of 16 units: batches of an eighth of it"
        );
        assert_eq!(
            feed_at_most(&tier, &arc, thread_batch(&tier, &arc)),
            2 * UNIT
        );
        assert_eq!(
            cached(&tier, 10..18),
            [10, 11],
            "one capped batch: the two tail-most buffers"
        );
        arc.target = 1 << 30;
        assert_eq!(
            thread_batch(&tier, &arc),
            8 * UNIT,
            "a large memory: write_max"
        );
        assert_eq!(
            feed_at_most(&tier, &arc, thread_batch(&tier, &arc)),
            6 * UNIT,
            "the rest of the tails in one batch"
        );
    }
}
