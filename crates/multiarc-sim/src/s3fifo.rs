//! S3-FIFO, written from its paper: Yang, Zhang, Qiu, Yue and Vinayak,
//! "FIFO queues are all you need for cache eviction", SOSP '23 (its
//! Algorithm 1), one page per unit and single-threaded. The `s3fifo` row
//! of `multiarc replay`, a reference beside S3ARC ([`crate::s3arc`]), which
//! borrows its small and main queues.
//!
//! - **S** (small): a FIFO of [`SMALL_PERCENT`] of the capacity, where
//!   every page enters unless G remembers it.
//! - **M** (main): a FIFO of the rest of the capacity.
//! - **G** (ghost): a FIFO of ids only, as many as M holds, of pages
//!   evicted from S. A miss on one of them enters M (and leaves G).
//!
//! Each cached page has a 2-bit frequency counter, 0 when it enters,
//! raised by each hit and capped at [`MAX_FREQ`]. A hit does nothing else.
//!
//! When the cache is full, it evicts from S if S holds at least its share
//! (equivalently, with the cache full: M holds at most its share), else from
//! M:
//!
//! - evicting from S: the tail page moves to the head of M if its counter
//!   is at least [`MOVE_TO_MAIN_FREQ`] (its counter cleared), else it
//!   leaves for G and the eviction is done; repeated until a page has left.
//! - evicting from M: the tail page with a counter above 0 goes back to
//!   the head with its counter one lower; the first with 0 is evicted.
//!
//! Choices where the paper leaves room, and why:
//!
//! - **Moving to M takes two hits** (counter at least 2), the paper's
//!   pseudo-code (`if t.freq > 1`) and libCacheSim's default
//!   (`move-to-main-threshold=2`), with which the authors' simulator runs
//!   S3-FIFO. A threshold of 1 would move to M a page hit once in S, which
//!   is less of a filter against pages requested a few times close
//!   together.
//! - **S may run dry while M overshoots.** Algorithm 1 evicts from M inside
//!   S's loop when a move fills M, and S's loop goes on until a page goes to
//!   G, so one insert could evict two pages. Here, as in libCacheSim, a move
//!   never evicts: M may pass its share for a while, and the next eviction
//!   takes from M (S is then under its share). Each miss evicts exactly one
//!   page once the cache is full.
//! - **Small caches**: S's share is `max(1, c / 10)` pages (a share of 0
//!   would let S never evict), M's the rest (0 for one page, where a page
//!   that moves to M is evicted from it next). G remembers M's share of ids.
//! - New pages go to S from the start, also while the cache fills (S then
//!   holds far more than its share, and drains to it by evictions), as in
//!   Algorithm 1. libCacheSim instead puts new pages in M once S is full,
//!   until its first eviction: a difference in the warm-up only.
//!
//! S and M are plain queues (pages leave only from their tails); G, which
//! loses a page from its middle on a ghost hit, is the references' queue
//! with lazy deletion ([`crate::reference`]). Every request is O(1)
//! amortised: a page goes round M at most [`MAX_FREQ`] times per hit.

use crate::reference::{PagePolicy, Places, Queue};
use std::collections::{HashMap, VecDeque};

/// S's share of the capacity, in percent (the paper's 10%).
pub const SMALL_PERCENT: usize = 10;

/// The cap of a page's frequency counter (2 bits).
pub const MAX_FREQ: u8 = 3;

/// The counter a page in S needs at its eviction to move to M.
pub const MOVE_TO_MAIN_FREQ: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fifo {
    Small,
    Main,
}

/// A cached page: which FIFO holds it and its counter.
#[derive(Clone, Copy, Debug)]
struct Page {
    fifo: Fifo,
    freq: u8,
}

/// S3-FIFO with a capacity of `c` pages (Yang et al., SOSP '23).
#[derive(Debug)]
pub struct S3FifoPolicy {
    c: usize,
    small_cap: usize,
    main_cap: usize,
    /// Front = tail (next to leave), back = head (where pages enter).
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    pages: HashMap<u64, Page>,
    ghost: Queue,
    ghost_places: Places<()>,
    stamp: u64,
}

impl S3FifoPolicy {
    /// An empty S3-FIFO cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> S3FifoPolicy {
        assert!(
            capacity_pages > 0,
            "S3-FIFO needs a capacity of at least one page"
        );
        let small_cap = (capacity_pages * SMALL_PERCENT / 100).max(1);
        S3FifoPolicy {
            c: capacity_pages,
            small_cap,
            main_cap: capacity_pages - small_cap,
            small: VecDeque::new(),
            main: VecDeque::new(),
            pages: HashMap::new(),
            ghost: Queue::default(),
            ghost_places: HashMap::new(),
            stamp: 0,
        }
    }

    /// |S|, |M|, |G|.
    pub fn lens(&self) -> (usize, usize, usize) {
        (self.small.len(), self.main.len(), self.ghost.len)
    }

    /// True if `page` is cached (in S or M).
    pub fn contains(&self, page: u64) -> bool {
        self.pages.contains_key(&page)
    }

    /// True if `page` is in M.
    pub fn in_main(&self, page: u64) -> bool {
        matches!(self.pages.get(&page), Some(p) if p.fifo == Fifo::Main)
    }

    /// Evicts S's tail pages until one has left for G (moving those hit
    /// twice to M), or S is empty.
    fn evict_small(&mut self) {
        while let Some(page) = self.small.pop_front() {
            let entry = self.pages.get_mut(&page).expect("a page in S is cached");
            if entry.freq >= MOVE_TO_MAIN_FREQ {
                *entry = Page {
                    fifo: Fifo::Main,
                    freq: 0,
                };
                self.main.push_back(page);
            } else {
                self.pages.remove(&page);
                self.remember(page);
                return;
            }
        }
    }

    /// Evicts the first of M's tail pages with a counter of 0, giving each
    /// on the way another turn, one count less.
    fn evict_main(&mut self) {
        while let Some(page) = self.main.pop_front() {
            let entry = self.pages.get_mut(&page).expect("a page in M is cached");
            if entry.freq > 0 {
                entry.freq -= 1;
                self.main.push_back(page);
            } else {
                self.pages.remove(&page);
                return;
            }
        }
    }

    /// Puts `page` at G's head, forgetting G's tail if G is over M's share.
    fn remember(&mut self, page: u64) {
        if self.main_cap == 0 {
            return;
        }
        if self.ghost.len == self.main_cap {
            self.ghost.pop_lru((), &mut self.ghost_places);
        }
        self.ghost
            .push_mru(page, (), &mut self.stamp, &mut self.ghost_places);
    }
}

impl PagePolicy for S3FifoPolicy {
    fn access(&mut self, page: u64) -> bool {
        if let Some(entry) = self.pages.get_mut(&page) {
            entry.freq = (entry.freq + 1).min(MAX_FREQ);
            return true;
        }
        let ghost_hit = self.ghost_places.contains_key(&page);
        if ghost_hit {
            self.ghost.remove(page, (), &mut self.ghost_places);
        }
        while self.small.len() + self.main.len() >= self.c {
            if self.small.len() >= self.small_cap {
                self.evict_small();
            } else {
                self.evict_main();
            }
        }
        let fifo = if ghost_hit {
            self.main.push_back(page);
            Fifo::Main
        } else {
            self.small.push_back(page);
            Fifo::Small
        };
        self.pages.insert(page, Page { fifo, freq: 0 });
        false
    }

    fn name(&self) -> &'static str {
        "s3fifo"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::LruPolicy;
    use crate::workload::{Scan, Uniform, Zipf};

    fn run(policy: &mut impl PagePolicy, trace: &[u64]) -> Vec<bool> {
        trace.iter().map(|&p| policy.access(p)).collect()
    }

    #[test]
    fn by_hand() {
        // c = 2: S's share 1, M's 1, G remembers 1 id.
        let mut s3 = S3FifoPolicy::new(2);
        let trace = [1, 1, 1, 2, 3, 2, 1, 4, 3, 1, 4, 2, 4];
        let expected = [
            false, // 1 -> S
            true,  // 1's counter 1
            true,  // 1's counter 2
            false, // 2 -> S (not full)
            // Full, S at its share: 1 (counter 2) moves to M, counter 0; 2
            // (counter 0) leaves for G. 3 -> S.
            false,
            // 2 is in G: it leaves G. Evict: S at its share, 3 -> G. 2 -> M,
            // which now holds 1 and 2 (over its share of 1).
            false, true, // 1's counter 1
            // M over its share: 1 (counter 1) goes round with 0, 2 (0) is
            // evicted (not to G). 4 -> S.
            false, // 3 is in G: S at its share, 4 -> G. 3 -> M: M = [1, 3].
            false, true, // 1's counter 1
            // 4 is in G. M over its share: 1 goes round, 3 is evicted.
            // 4 -> M: M = [1, 4].
            false, // 2 is nowhere. M over its share: 1 (0) is evicted. 2 -> S.
            false, true, // 4 is in M
        ];
        assert_eq!(run(&mut s3, &trace), expected);
        assert!(s3.in_main(4) && s3.contains(2) && !s3.in_main(2));
        assert_eq!(s3.lens(), (1, 1, 0));
    }

    #[test]
    fn one_hit_in_small_is_not_enough_for_main() {
        let mut s3 = S3FifoPolicy::new(2);
        // 1 hit once: at its eviction from S it leaves for G, not M.
        assert_eq!(run(&mut s3, &[1, 1, 2, 3]), [false, true, false, false]);
        assert!(!s3.contains(1));
        // Back while in G: admitted to M.
        assert!(!s3.access(1));
        assert!(s3.in_main(1));
    }

    #[test]
    fn main_gives_a_page_a_turn_per_count_up_to_three() {
        // c = 2: S 1, M 1, G 1. Page 1 reaches M (two hits in S), is hit
        // five times there (its counter capped at 3), then survives three
        // evictions from M, each a turn that costs a count, and leaves at
        // the fourth.
        let mut s3 = S3FifoPolicy::new(2);
        let trace = [1, 1, 1, 2, 3, 1, 1, 1, 1, 1];
        let mut expected = vec![false, true, true, false, false];
        expected.extend([true; 5]);
        assert_eq!(run(&mut s3, &trace), expected);
        assert!(s3.in_main(1));
        // Each pair: a ghost hit that puts M over its share (and S's page to
        // G), then a new page whose eviction takes from M: 1 goes round
        // (counter 3 -> 2, 2 -> 1, 1 -> 0) and the other page leaves.
        for (ghost, new) in [(2, 4), (3, 5), (4, 6)] {
            assert!(!s3.access(ghost));
            assert!(s3.in_main(ghost), "{ghost} from G to M");
            assert!(!s3.access(new));
            assert!(s3.in_main(1) && !s3.contains(ghost));
        }
        assert!(!s3.access(5));
        assert!(!s3.access(7)); // 1's counter is 0: evicted
        assert!(!s3.contains(1));
    }

    #[test]
    fn never_holds_more_than_its_capacity() {
        for c in [1, 2, 3, 9, 10, 11, 64] {
            let mut s3 = S3FifoPolicy::new(c);
            let mut r = Uniform::new(4 * c as u64, c as u64);
            for i in 0..20_000u64 {
                let page = if i % 7 == 0 {
                    1 << 40 | i
                } else {
                    r.next().unwrap()
                };
                s3.access(page);
                let (small, main, ghost) = s3.lens();
                assert!(small + main <= c, "c = {c}");
                assert_eq!(small + main, s3.pages.len());
                assert!(ghost <= c - s3.small_cap);
                assert!(s3.contains(page), "the requested page is cached");
            }
        }
    }

    fn hit_ratio(policy: &mut impl PagePolicy, trace: &[u64]) -> f64 {
        let hits = trace.iter().filter(|&&p| policy.access(p)).count();
        hits as f64 / trace.len() as f64
    }

    #[test]
    fn resists_a_one_pass_scan_better_than_lru() {
        // A Zipf working set, a scan of five cache sizes of new ids mixed
        // into it, and the Zipf set again; the hits counted from the scan on.
        let c = 1000;
        let mut zipf = Zipf::new(10_000, 0.9, 41);
        let mut trace: Vec<u64> = zipf.by_ref().take(100_000).collect();
        let warm = trace.len();
        for id in Scan::new(1 << 40, 5 * c as u64) {
            trace.push(id);
            trace.push(zipf.next().unwrap());
        }
        trace.extend(zipf.take(20_000));
        let (mut s3, mut lru) = (S3FifoPolicy::new(c), LruPolicy::new(c));
        run(&mut s3, &trace[..warm]);
        run(&mut lru, &trace[..warm]);
        let s3_ratio = hit_ratio(&mut s3, &trace[warm..]);
        let lru_ratio = hit_ratio(&mut lru, &trace[warm..]);
        assert!(
            s3_ratio > lru_ratio + 0.05,
            "s3fifo {s3_ratio:.3}, lru {lru_ratio:.3}"
        );
    }
}
