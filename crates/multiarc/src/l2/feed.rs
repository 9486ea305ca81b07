//! The feed (OpenZFS's `l2arc_feed_thread`): what goes to the second tier.
//!
//! Why from the list tails: the buffers near a list's tail are the ones
//! eviction reaches next. Copying them to the device *before* they are
//! evicted means that eviction itself never waits for I/O, and that most
//! buffers it drops already have a copy (`evict_l2_cached`). A feed looks
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
//! since the last feed (deterministic, for tests and `replay`).

use super::{Added, Tier};
use crate::arc::{ArcTails, Key};
use crate::mem::sync::{unpoisoned, Ordering};
use crate::mem::thread_random;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs one feed: returns the bytes written to the tier (0 when it has
/// nothing to write, is rebuilding its index, or the write failed; the
/// tier counts its errors).
pub(crate) fn feed_once<K: Key>(tier: &Tier<K>, arc: &dyn ArcTails<K>) -> u64 {
    if tier.rebuilding() {
        return 0;
    }
    let config = tier.feed_config();
    let budget = config.headroom.saturating_mul(config.write_max);
    // The list eviction takes from next (ARC's REPLACE, as things stand)
    // first: its tail is what goes soonest. `true`: the MFU list.
    let lists: &[bool] = if config.mfu_only {
        &[true]
    } else if arc.evicting_mru_first() {
        &[false, true]
    } else {
        &[true, false]
    };
    let mut batch = tier.batch();
    let n = arc.sublists();
    'lists: for &mfu in lists {
        let per_sublist = budget.div_ceil(n as u64).max(1);
        let start = (thread_random() % n as u64) as usize;
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

/// Inline eviction: feeds synchronously once the cache is full and a batch's
/// worth has been inserted since the last feed (`size`: the insert's bytes,
/// counted as the device will store them, in whole 4 KiB units, since a
/// batch's size is counted so).
pub(super) fn feed_inline<K: Key>(tier: &Tier<K>, arc: &dyn ArcTails<K>, size: u64) {
    let size = size.max(1).next_multiple_of(4096);
    let unfed = tier.unfed.fetch_add(size, Ordering::Relaxed) + size;
    if unfed >= tier.feed_config().write_max && arc.data_bytes() > arc.target_bytes() {
        tier.unfed.store(0, Ordering::Relaxed);
        feed_once(tier, arc);
    }
}

/// How far up the list tails a feed looks: `headroom x write_max`, or all
/// of memory if that is less.
fn reach<K: Key>(tier: &Tier<K>, arc: &dyn ArcTails<K>) -> u64 {
    let c = tier.feed_config();
    c.headroom
        .saturating_mul(c.write_max)
        .min(arc.target_bytes())
}

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
    /// half of what the last feed looked at (`reach`), so that eviction
    /// never reaches buffers no feed has seen (it looks every `TICK`); and
    /// while eviction still drops buffers the tier could have held (the
    /// feed is behind), it feeds again at once after a feed that wrote
    /// anything, as fast as the device writes.
    pub(crate) fn start<K: Key>(
        tier: Arc<Tier<K>>,
        arc: Arc<dyn ArcTails<K>>,
    ) -> std::io::Result<FeedThread> {
        let config = tier.feed_config();
        let (interval, min_interval) = (config.feed_interval, config.feed_min_interval);
        let busy = config.write_max / 2;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let for_thread = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("multiarc-l2-feed".into())
            .spawn(move || {
                let (lock, wake) = &*for_thread;
                let tick = TICK.min(min_interval);
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
                        let through = arc.evicted_bytes().saturating_sub(evicted);
                        if last.elapsed() < wait && through < reach(&tier, &*arc) / 2 {
                            continue;
                        }
                    } else if *unpoisoned(lock.lock()) {
                        return;
                    }
                    let wrote = feed_once(&tier, &*arc);
                    last = Instant::now();
                    evicted = arc.evicted_bytes();
                    let now_missed = arc.missed_bytes();
                    again = now_missed > missed && wrote > 0;
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

/// How often the feed thread looks at eviction's progress.
const TICK: Duration = Duration::from_millis(50);

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
