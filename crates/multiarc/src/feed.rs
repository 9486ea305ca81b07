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

use crate::counter::thread_random;
use crate::entry::State;
use crate::key::Key;
use crate::l2::Added;
use crate::multilist::Multilist;
use crate::protocol::HitProtocol;
use crate::shared::Core;
use crate::sync::{unpoisoned, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs one feed: returns the bytes written to the tier (0 when it has
/// nothing to write, is rebuilding its index, or the write failed; the
/// tier counts its errors).
pub(crate) fn feed_once<K: Key, M: HitProtocol>(core: &Core<K, M>) -> u64 {
    let Some(tier) = core.l2.as_deref() else {
        return 0;
    };
    if tier.rebuilding() {
        return 0;
    }
    let config = tier.config();
    let budget = config.headroom.saturating_mul(config.write_max);
    // The list eviction takes from next (ARC's REPLACE, as things stand)
    // first: its tail is what goes soonest.
    let p = core.p.load(Ordering::Acquire);
    let lists: &[State] = if config.mfu_only {
        &[State::Mfu]
    } else if M::evict_from_mru(&core.sizes(), p, false) {
        &[State::Mru, State::Mfu]
    } else {
        &[State::Mfu, State::Mru]
    };
    let mut batch = tier.batch();
    'lists: for &state in lists {
        let list = &core.lists[state as usize];
        let n = list.len();
        let per_sublist = budget.div_ceil(n as u64).max(1);
        let start = (thread_random() % n as u64) as usize;
        let tails: Vec<Vec<(K, u64)>> = (0..n)
            .map(|k| tail_keys(list, (start + k) % n, per_sublist))
            .collect();
        // Tail-most first across the sublists (the first of each, then the
        // second of each, ...), as eviction goes round them, so that a
        // batch that fills up has taken what eviction reaches next in
        // every sublist, not one sublist's whole tail.
        let deepest = tails.iter().map(Vec::len).max().unwrap_or(0);
        let by_depth = (0..deepest).flat_map(|d| tails.iter().filter_map(move |t| t.get(d)));
        for (key, hash) in by_depth.cloned() {
            // Under the key's stripe lock: the entry cannot go, and an
            // insert or removal of the key (which invalidates its copy
            // under the same lock) cannot slip between the copy and
            // its record.
            let stripe = core.table.stripe(hash).read();
            let Some((e, len)) = stripe.find_with_len(hash, &key) else {
                continue;
            };
            let now = e.state();
            if !now.is_live() || (config.mfu_only && now != State::Mfu) {
                continue;
            }
            if len as u64 > config.write_max {
                // Ineligible (eviction counts it so).
                continue;
            }
            match batch.add(&key, e.data_prefix(len), now == State::Mfu) {
                Added::Copied | Added::Present => {}
                Added::Full => break 'lists,
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
        Err(_) => 0,
    }
}

/// Inline eviction: feeds synchronously once the cache is full and a batch's
/// worth has been inserted since the last feed (`size`: the insert's bytes,
/// counted as the device will store them, in whole 4 KiB units, since a
/// batch's size is counted so).
pub(crate) fn feed_inline<K: Key, M: HitProtocol>(core: &Core<K, M>, size: u64) {
    let Some(tier) = core.l2.as_deref() else {
        return;
    };
    let size = size.max(1).next_multiple_of(4096);
    let unfed = core.l2_unfed.fetch_add(size, Ordering::Relaxed) + size;
    if unfed >= tier.config().write_max && core.sizes().data() > core.c() {
        core.l2_unfed.store(0, Ordering::Relaxed);
        feed_once(core);
    }
}

/// Keys and hashes of the entries within `budget` bytes of sublist `i`'s
/// tail, tail first (the sublist lock is held only while they are read).
fn tail_keys<K: Key>(list: &Multilist<K>, i: usize, budget: u64) -> Vec<(K, u64)> {
    let mut sl = list.sublist(i).lock();
    let marker = sl.insert_marker_at_tail();
    let mut out = Vec::new();
    let mut seen = 0u64;
    while seen < budget {
        let Some((_, e)) = sl.step_marker(marker) else {
            break;
        };
        seen += e.bytes.max(1);
        out.push((e.key.clone(), e.hash));
    }
    sl.remove_marker(marker);
    out
}

/// What the feed thread needs of a cache.
pub(crate) trait Feedable: Send + Sync {
    /// One feed; bytes written.
    fn feed(&self) -> u64;
    /// Bytes eviction has dropped so far that the tier could have held but
    /// did not (`evict_l2_eligible`): the feed fell behind.
    fn missed(&self) -> u64;
    /// Bytes evicted so far.
    fn evicted(&self) -> u64;
    /// How far up the list tails a feed looks: `headroom x write_max`, or
    /// all of memory if that is less.
    fn reach(&self) -> u64;
    /// Memory has filled up once (OpenZFS's `arc_warm`).
    fn warm(&self) -> bool;
}

impl<K: Key, M: HitProtocol + Send + Sync> Feedable for Core<K, M> {
    fn feed(&self) -> u64 {
        feed_once(self)
    }

    fn missed(&self) -> u64 {
        self.events.get(crate::stats::Event::EvictL2Eligible)
    }

    fn evicted(&self) -> u64 {
        self.events.get(crate::stats::Event::EvictedBytes)
    }

    fn reach(&self) -> u64 {
        let config = self.l2.as_deref().map(|t| t.config());
        let look = config.map_or(0, |c| c.headroom.saturating_mul(c.write_max));
        look.min(self.c())
    }

    fn warm(&self) -> bool {
        self.evicted() > 0 || self.sizes().data() >= self.c()
    }
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
    pub(crate) fn start(
        target: Arc<dyn Feedable>,
        interval: Duration,
        min_interval: Duration,
        busy: u64,
    ) -> FeedThread {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let for_thread = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("multiarc-l2-feed".into())
            .spawn(move || {
                let (lock, wake) = &*for_thread;
                let tick = TICK.min(min_interval);
                let mut wait = min_interval;
                let mut last = Instant::now();
                let (mut missed, mut evicted) = (target.missed(), target.evicted());
                let mut again = false;
                loop {
                    if !again {
                        let stopped = unpoisoned(lock.lock());
                        let (stopped, _) =
                            unpoisoned(wake.wait_timeout_while(stopped, tick, |s| !*s));
                        if *stopped {
                            return;
                        }
                        let through = target.evicted().saturating_sub(evicted);
                        if last.elapsed() < wait && through < target.reach() / 2 {
                            continue;
                        }
                    } else if *unpoisoned(lock.lock()) {
                        return;
                    }
                    let wrote = target.feed();
                    last = Instant::now();
                    evicted = target.evicted();
                    let now_missed = target.missed();
                    again = now_missed > missed && wrote > 0;
                    missed = now_missed;
                    // While memory fills, as OpenZFS's warm-up: every
                    // `min_interval`, so the first tails are fed before
                    // eviction reaches them.
                    wait = if wrote > busy || !target.warm() {
                        min_interval
                    } else {
                        interval
                    };
                }
            })
            .expect("spawning the multiarc l2 feed thread");
        FeedThread {
            stop,
            handle: Some(handle),
        }
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
