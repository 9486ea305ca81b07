//! S3ARC: S3-FIFO's probationary and main queues with ARC's ghost lists
//! and self-tuning split, one page per unit and single-threaded. The
//! reference model of an adaptive policy meant for the concurrent cache,
//! where a hit may do no more than bump a small counter in the entry's meta
//! word: here too a hit only raises the page's counter, and every move
//! between lists happens at eviction.
//!
//! The cache holds two queues, as S3-FIFO does (Yang et al., "FIFO queues
//! are all you need for cache eviction", SOSP '23), and two ghost lists, as
//! ARC does (Megiddo & Modha, FAST '03):
//!
//! - **small** (the cache's T1): a probationary FIFO where every new page
//!   enters. When its head is evicted, a page with [`PROMOTE_FREQ`] hits
//!   since it entered moves on to main (its counter spent); any other page
//!   leaves for ghost_small: one-hit wonders are demoted quickly.
//! - **main** (the cache's T2): a clock whose pages carry a frequency
//!   counter of [`MAX_FREQ`] at most. Its hand gives a page with a count
//!   another turn at the tail, one count less (frequency, as LFU experts
//!   keep it, decaying), and marks it *reused in main*; a page at 0 leaves
//!   for ghost_main, its mark with it.
//! - **ghost_small** (B1, [`GHOST_SMALL_PERCENT`] of `c`): pages recently
//!   demoted from small. A miss on one is admitted straight to main: it has
//!   shown reuse within a distance the cache could serve (S3-FIFO's
//!   ghost-based admission; with a bounded ghost, LIRS's reuse-distance test).
//!   It also grows the target of small by ARC's step.
//! - **ghost_main** (B2, [`GHOST_MAIN_PERCENT`] of `c`): pages recently
//!   evicted from main. A miss on one shrinks the target of small, by
//!   ARC's step. A page that was reused in main (hit there during its last
//!   stay, so given a turn by the hand) is readmitted to main, unmarked: it
//!   has shown frequency, not only one reuse. Any other page enters small
//!   as a new page. (Admitting every ghost_main hit to main, as ARC's case
//!   III does, lets a loop longer than the cache cycle through main and
//!   evict everything else: on the ARC paper's P6 trace at 32,768 pages
//!   that took the hit ratio from 25% to 9%. A loop's pages are promoted
//!   from small once and are not hit again in main before they leave it,
//!   so they are not marked.)
//! - **target** (ARC's `p`, the size small is kept at): ARC's steps
//!   (max(1, |other ghost| / |this ghost|)), within
//!   [`MIN_TARGET_PERMILLE`]..=[`MAX_TARGET_PERMILLE`] of `c`. It starts at
//!   the top, S3-FIFO's 10%.
//!
//! Every bound (the target's and the ghost lists') is its fraction of `c`
//! rounded down, with no floor of one page: the cache (`multiarc`'s
//! `Policy::S3arc`) counts bytes and has no unit to floor at, and with a
//! floor only in pages the two would differ on caches of under 200 pages
//! (a target of 0 against 1). So a cache of fewer than 10 pages keeps a
//! target of 0 (small is evicted first whenever it holds a page), and one
//! page remembers no ghost. The cache's differential test
//! (`crates/multiarc/tests/differential.rs`) checks the two agree request
//! by request.
//!
//! Eviction takes small's head while small is above its target (or main is
//! empty), else main's head, until one page has left for a ghost list.
//! Small and main are plain queues (no page leaves from their middle); the
//! ghost lists use lazy deletion, as the ARC reference does.

use crate::reference::{arc_step, PagePolicy};
use std::collections::{HashMap, VecDeque};

/// The largest value of a page's frequency counter: a page hit four times
/// or more in main stays for four more turns of the hand without a hit.
pub const MAX_FREQ: u8 = 4;

/// The counter a page in small needs at its eviction to be promoted to
/// main: two hits on probation. A page with one hit leaves for
/// ghost_small, and is admitted to main if it comes back while remembered.
pub const PROMOTE_FREQ: u8 = 2;

/// The smallest target for the small queue, in thousandths of the capacity.
pub const MIN_TARGET_PERMILLE: usize = 5;

/// The largest target for the small queue, in thousandths of the capacity:
/// S3-FIFO's 10%, where it starts.
pub const MAX_TARGET_PERMILLE: usize = 100;

/// How many pages ghost_small remembers, in percent of the capacity.
pub const GHOST_SMALL_PERCENT: usize = 80;

/// How many pages ghost_main remembers, in percent of the capacity.
pub const GHOST_MAIN_PERCENT: usize = 50;

/// The bounds of the small queue's target for a capacity of `c` pages:
/// (min, max), each its fraction of `c` rounded down.
pub(crate) fn target_bounds(c: usize) -> (usize, usize) {
    let min = c * MIN_TARGET_PERMILLE / 1000;
    (min, (c * MAX_TARGET_PERMILLE / 1000).max(min))
}

/// How many pages ghost_small and ghost_main remember for a capacity of `c`
/// pages.
pub(crate) fn ghost_caps(c: usize) -> (usize, usize) {
    (c * GHOST_SMALL_PERCENT / 100, c * GHOST_MAIN_PERCENT / 100)
}

/// Where a page is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// In the small queue, with its counter.
    Small(u8),
    /// In the main queue, with its counter and whether the hand has given
    /// it a turn since it entered main (reused in main).
    Main(u8, bool),
    /// In ghost_small, with the stamp of its queue entry.
    GhostSmall(u64),
    /// In ghost_main, with the stamp of its queue entry and whether it was
    /// reused in main.
    GhostMain(u64, bool),
}

/// A ghost list: FIFO with lazy deletion (an entry whose stamp no longer
/// matches the page's place is stale).
#[derive(Debug, Default)]
struct Ghost {
    entries: VecDeque<(u64, u64)>,
    len: usize,
}

/// S3ARC with a capacity of `c` pages: see the [module](self) documentation.
#[derive(Debug)]
pub struct S3ArcPolicy {
    c: usize,
    target: usize,
    min_target: usize,
    max_target: usize,
    ghost_small_cap: usize,
    ghost_main_cap: usize,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    ghost_small: Ghost,
    ghost_main: Ghost,
    places: HashMap<u64, Place>,
    stamp: u64,
}

impl S3ArcPolicy {
    /// An empty S3ARC cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> S3ArcPolicy {
        assert!(
            capacity_pages > 0,
            "S3ARC needs a capacity of at least one page"
        );
        let c = capacity_pages;
        let (min_target, max_target) = target_bounds(c);
        let (ghost_small_cap, ghost_main_cap) = ghost_caps(c);
        S3ArcPolicy {
            c,
            target: max_target,
            min_target,
            max_target,
            ghost_small_cap,
            ghost_main_cap,
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost_small: Ghost::default(),
            ghost_main: Ghost::default(),
            places: HashMap::new(),
            stamp: 0,
        }
    }

    /// The target size of the small queue.
    pub fn target(&self) -> usize {
        self.target
    }

    /// |small|, |main|, |ghost_small|, |ghost_main|.
    pub fn lens(&self) -> (usize, usize, usize, usize) {
        (
            self.small.len(),
            self.main.len(),
            self.ghost_small.len,
            self.ghost_main.len,
        )
    }

    /// True if `page` is cached (in small or main).
    pub fn contains(&self, page: u64) -> bool {
        matches!(
            self.places.get(&page),
            Some(Place::Small(_) | Place::Main(..))
        )
    }

    /// The frequency counter of a cached page.
    pub fn freq(&self, page: u64) -> Option<u8> {
        match self.places.get(&page) {
            Some(Place::Small(f) | Place::Main(f, _)) => Some(*f),
            _ => None,
        }
    }

    /// True if `page` is in the main queue.
    pub fn in_main(&self, page: u64) -> bool {
        matches!(self.places.get(&page), Some(Place::Main(..)))
    }

    /// True if `page` is in main or ghost_main and was reused in main
    /// (given a turn by the hand since it last entered main).
    pub fn reused_in_main(&self, page: u64) -> bool {
        matches!(
            self.places.get(&page),
            Some(Place::Main(_, true) | Place::GhostMain(_, true))
        )
    }

    /// Adds `page` to a ghost list (ghost_main remembering whether it was
    /// `reused` in main), dropping that list's oldest page past its bound.
    fn demote_to_ghost(&mut self, page: u64, small: bool, reused: bool) {
        self.stamp += 1;
        let stamp = self.stamp;
        let (ghost, place) = if small {
            (&mut self.ghost_small, Place::GhostSmall(stamp))
        } else {
            (&mut self.ghost_main, Place::GhostMain(stamp, reused))
        };
        ghost.entries.push_back((page, stamp));
        ghost.len += 1;
        self.places.insert(page, place);
        let cap = if small {
            self.ghost_small_cap
        } else {
            self.ghost_main_cap
        };
        while ghost.len > cap {
            let (old, old_stamp) = ghost.entries.pop_front().expect("a live ghost entry");
            let live = match self.places.get(&old) {
                Some(Place::GhostSmall(s)) => small && *s == old_stamp,
                Some(Place::GhostMain(s, _)) => !small && *s == old_stamp,
                _ => false,
            };
            if live {
                self.places.remove(&old);
                ghost.len -= 1;
            }
        }
        if ghost.entries.len() > 2 * ghost.len + 64 {
            let places = &self.places;
            ghost.entries.retain(|&(p, s)| match places.get(&p) {
                Some(Place::GhostSmall(t)) => small && *t == s,
                Some(Place::GhostMain(t, _)) => !small && *t == s,
                _ => false,
            });
        }
    }

    /// Evicts one page to a ghost list, moving referenced pages on first.
    fn evict(&mut self) {
        loop {
            if self.small.len() > self.target || self.main.is_empty() {
                let page = self.small.pop_front().expect("small is not empty");
                match self.places[&page] {
                    Place::Small(f) if f < PROMOTE_FREQ => {
                        self.demote_to_ghost(page, true, false);
                        return;
                    }
                    _ => {
                        // Referenced on probation: promoted, its counts spent.
                        self.main.push_back(page);
                        self.places.insert(page, Place::Main(0, false));
                    }
                }
            } else {
                let page = self.main.pop_front().expect("main is not empty");
                match self.places[&page] {
                    Place::Main(0, reused) => {
                        self.demote_to_ghost(page, false, reused);
                        return;
                    }
                    Place::Main(f, _) => {
                        // Another turn: reused in main.
                        self.main.push_back(page);
                        self.places.insert(page, Place::Main(f - 1, true));
                    }
                    other => unreachable!("{page} in main is at {other:?}"),
                }
            }
        }
    }

    /// Forgets a ghost page about to be admitted.
    fn leave_ghost(&mut self, small: bool) {
        if small {
            self.ghost_small.len -= 1;
        } else {
            self.ghost_main.len -= 1;
        }
    }
}

impl PagePolicy for S3ArcPolicy {
    fn access(&mut self, x: u64) -> bool {
        let at = self.places.get(&x).copied();
        match at {
            Some(Place::Small(f)) => {
                self.places.insert(x, Place::Small((f + 1).min(MAX_FREQ)));
                return true;
            }
            Some(Place::Main(f, reused)) => {
                self.places
                    .insert(x, Place::Main((f + 1).min(MAX_FREQ), reused));
                return true;
            }
            Some(Place::GhostSmall(_)) => {
                let (gs, gm) = (self.ghost_small.len, self.ghost_main.len);
                self.target = (self.target + arc_step(gs, gm)).min(self.max_target);
                self.leave_ghost(true);
            }
            Some(Place::GhostMain(..)) => {
                let (gs, gm) = (self.ghost_small.len, self.ghost_main.len);
                self.target = self
                    .target
                    .saturating_sub(arc_step(gm, gs))
                    .max(self.min_target);
                self.leave_ghost(false);
            }
            None => {}
        }
        // The ghost entry (if any) goes stale now: x's place changes below.
        self.places.remove(&x);
        if self.small.len() + self.main.len() >= self.c {
            self.evict();
        }
        if matches!(at, Some(Place::GhostSmall(_) | Place::GhostMain(_, true))) {
            self.main.push_back(x);
            self.places.insert(x, Place::Main(0, false));
        } else {
            self.small.push_back(x);
            self.places.insert(x, Place::Small(0));
        }
        false
    }

    fn name(&self) -> &'static str {
        "s3arc"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Uniform, Zipf};

    #[test]
    fn keeps_its_bounds_on_mixed_workloads() {
        for c in [1, 2, 7, 50, 1000] {
            let mut s3 = S3ArcPolicy::new(c);
            let mut uniform = Uniform::new(3 * c as u64, c as u64);
            let mut zipf = Zipf::new(4 * c as u64, 0.9, c as u64 + 1);
            for i in 0..30_000u64 {
                let page = match i % 7 {
                    0 => 1_000_000 + i,
                    1 | 2 => uniform.next().unwrap(),
                    _ => zipf.next().unwrap(),
                };
                s3.access(page);
                let (small, main, gs, gm) = s3.lens();
                assert!(small + main <= c, "at most c pages cached");
                assert!(gs <= s3.ghost_small_cap && gm <= s3.ghost_main_cap);
                assert!((s3.min_target..=s3.max_target).contains(&s3.target()));
                assert!(s3.contains(page), "the requested page is cached");
                let f = s3.freq(page).unwrap();
                assert!(f <= MAX_FREQ);
            }
        }
    }

    #[test]
    fn a_hit_only_raises_the_counter() {
        let mut s3 = S3ArcPolicy::new(4);
        for page in 1..=4 {
            assert!(!s3.access(page));
        }
        let before = (s3.lens(), s3.target());
        for expected in [1, 2, 3, 4, 4] {
            assert!(s3.access(2));
            assert_eq!(s3.freq(2), Some(expected), "saturates at MAX_FREQ");
        }
        assert_eq!((s3.lens(), s3.target()), before);
        assert!(!s3.in_main(2), "no move on a hit");
    }

    #[test]
    fn probation_promotes_twice_hit_pages_and_demotes_the_rest() {
        // c = 10: target 1, ghost_small 8 pages, ghost_main 5.
        let mut s3 = S3ArcPolicy::new(10);
        for page in 1..=10 {
            s3.access(page);
        }
        s3.access(1);
        s3.access(1); // 1: two hits on probation
        s3.access(2); // 2: one hit
        assert!(!s3.access(11));
        // Small's head 1 moved on to main, its counter spent; 2 was demoted.
        assert!(s3.in_main(1) && s3.freq(1) == Some(0));
        assert!(!s3.contains(2));
        assert_eq!(s3.lens(), (9, 1, 1, 0));
        // 2 comes back while ghost_small remembers it: straight to main,
        // and small's next unreferenced head (3) is demoted in its place.
        assert!(!s3.access(2));
        assert!(s3.in_main(2));
        assert!(!s3.contains(3));
        assert_eq!(s3.lens(), (8, 2, 1, 0));
        // A page that was never cached enters small.
        assert!(!s3.access(12));
        assert!(s3.contains(12) && !s3.in_main(12));
    }

    #[test]
    fn the_main_clock_spends_a_count_per_turn() {
        // c = 10, target 1: 1..=9 hit twice on probation, 10 never.
        let mut s3 = S3ArcPolicy::new(10);
        for page in 1..=9 {
            for _ in 0..3 {
                s3.access(page);
            }
        }
        s3.access(10);
        // The first eviction promotes 1..=9 (counters spent); small is then
        // at its target (10 alone), so main's head 1, at 0, leaves.
        s3.access(11);
        assert_eq!(s3.lens(), (2, 8, 0, 1));
        assert!((2..=9).all(|p| s3.in_main(p) && s3.freq(p) == Some(0)));
        assert!(matches!(s3.places.get(&1), Some(Place::GhostMain(..))));
        // Small above its target: its unreferenced head 10 is demoted.
        assert!(s3.access(2));
        assert!(!s3.access(12));
        assert_eq!(s3.lens(), (2, 8, 1, 1));
        // 10 comes back from ghost_small into main (11 is demoted for it).
        assert!(!s3.access(10));
        assert!(s3.in_main(10));
        assert_eq!(s3.lens(), (1, 9, 1, 1));
        // Small is at its target, so the next eviction is main's: its head
        // 2 has a count and goes round once more, one count less; 3, at 0,
        // leaves for ghost_main.
        assert!(!s3.access(13));
        assert!(s3.in_main(2) && s3.freq(2) == Some(0));
        assert!(matches!(s3.places.get(&3), Some(Place::GhostMain(..))));
        assert_eq!(s3.lens(), (2, 8, 1, 2));
    }

    #[test]
    fn ghost_main_readmits_to_main_only_pages_reused_there() {
        // c = 100: target 10, ghost_main 50 pages.
        let mut s3 = S3ArcPolicy::new(100);
        for page in 1..=100 {
            for _ in 0..3 {
                s3.access(page);
            }
        }
        // The first eviction promotes 1..=90 (small is then at its target)
        // and main's head 1, never hit there, leaves unmarked.
        s3.access(1000);
        assert!(matches!(
            s3.places.get(&1),
            Some(Place::GhostMain(_, false))
        ));
        // 2 is hit in main: at the next eviction the hand gives it a turn
        // and marks it.
        assert!(s3.access(2));
        s3.access(1001);
        assert!(s3.in_main(2) && s3.reused_in_main(2));
        // New pages hit twice on probation move on to main and push main's
        // pages out, until 2 (its count spent) leaves too.
        let mut page = 2000;
        while s3.contains(2) {
            assert!(page < 3000, "2 never left main");
            for _ in 0..3 {
                s3.access(page);
            }
            page += 1;
        }
        assert!(matches!(s3.places.get(&2), Some(Place::GhostMain(_, true))));
        let unmarked = (3..=100)
            .chain(2000..page)
            .find(|p| matches!(s3.places.get(p), Some(Place::GhostMain(_, false))))
            .expect("a page in ghost_main never hit in main");
        // Both come back: the unmarked page enters small as a new page, 2
        // (reused in main) goes back to main, unmarked; each shrinks the
        // target.
        let target = s3.target();
        assert!(!s3.access(unmarked));
        assert!(s3.contains(unmarked) && !s3.in_main(unmarked));
        assert_eq!(s3.target(), target - 1);
        assert!(!s3.access(2));
        assert!(s3.in_main(2) && !s3.reused_in_main(2));
        assert_eq!(s3.target(), target - 2);
    }

    #[test]
    fn ghost_hits_move_the_target_by_arcs_steps() {
        // c = 1000: target between 5 and 100, starting at 100.
        let mut s3 = S3ArcPolicy::new(1000);
        // Pages hit twice on probation go to main; a long run of them
        // overflows main, whose unreferenced pages go to ghost_main.
        for page in 0..3000 {
            for _ in 0..3 {
                s3.access(page);
            }
        }
        let (_, _, gs, gm) = s3.lens();
        assert_eq!(gs, 0);
        assert!(gm > 0);
        assert_eq!(s3.target(), 100);
        // A ghost_main hit shrinks the target by max(1, gs / gm) = 1 and
        // enters small as a new page (it is not admitted to main).
        let back = (0..3000).find(|p| matches!(s3.places.get(p), Some(Place::GhostMain(..))));
        let back = back.expect("a page in ghost_main");
        assert!(!s3.access(back));
        assert_eq!(s3.target(), 99);
        assert!(s3.contains(back) && !s3.in_main(back));
        // A one-hit page demoted from small and requested again grows it
        // back and is admitted to main.
        s3.access(5000);
        for page in 6000..6200 {
            s3.access(page);
        }
        assert!(matches!(s3.places.get(&5000), Some(Place::GhostSmall(_))));
        let (_, _, gs, gm) = s3.lens();
        let step = if gs >= gm { 1 } else { gm / gs };
        assert!(!s3.access(5000));
        assert_eq!(s3.target(), (99 + step).min(100));
        assert!(s3.in_main(5000));
    }

    #[test]
    fn a_scan_does_not_flush_pages_with_reuse() {
        let mut s3 = S3ArcPolicy::new(100);
        for _ in 0..4 {
            for page in 0..50 {
                s3.access(page);
            }
        }
        for page in 1000..11_000 {
            assert!(!s3.access(page));
        }
        for page in 0..50 {
            assert!(s3.access(page), "{page} was flushed by the scan");
        }
    }

    #[test]
    fn a_loop_longer_than_the_cache_keeps_part_of_it() {
        // LRU never hits a loop of 150 pages in 100; S3ARC keeps some.
        let mut s3 = S3ArcPolicy::new(100);
        let hits = (0..15_000u64).filter(|i| s3.access(i % 150)).count();
        assert!(hits > 15_000 / 4, "{hits} hits");
    }
}
