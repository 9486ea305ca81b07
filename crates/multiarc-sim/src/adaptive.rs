//! The adaptive policy, one page per unit and single-threaded: CAR's rules
//! and S3ARC's as two experts over one set of lists, one deciding at a
//! time. The reference model of the cache's `Policy::Adaptive` in its lazy
//! hit mode (a hit only counts, every move between lists happens at
//! eviction), as [`CarPolicy`](crate::CarPolicy) is of the lazy mode under
//! ARC's rules and [`S3ArcPolicy`](crate::S3ArcPolicy) of `Policy::S3arc`.
//! The cache's differential test (`crates/multiarc/tests/differential.rs`)
//! checks that the two agree request by request, across switches.
//!
//! The lists are ARC's: T1 (recency, where new pages enter), T2
//! (frequency), and their ghosts B1 and B2. Each live page carries a hit
//! count (every hit adds one) and a mark *reused in T2*; each ghost, the
//! mark of the expert that evicted it where the other would not have, and
//! whether it was reused in T2.
//!
//! - **The experts.** Each keeps its own target for T1 (`p`):
//!   - CAR: `p` in `0..=c`, starting at 0, moved by ARC's steps after the
//!     REPLACE that makes room; REPLACE takes T1 while `|T1| >= max(1, p)`;
//!     at a list's tail any hit earns a move to T2's head (its count
//!     cleared); ghosts within `|T1| + |B1| <= c` and all four lists
//!     within `2c`; every ghost hit is admitted to T2.
//!   - S3ARC: `p` within 0.5%..10% of `c`, starting at 10%, moved by
//!     ARC's steps before the REPLACE; REPLACE takes T1 while `|T1| > p`; at
//!     T1's tail two hits promote to T2 and fewer evict, at T2's tail a
//!     count earns another turn with `min(count, 4) - 1` (and the mark
//!     reused); B1 within 80% of `c` and B2 within 50%; a B2 hit is
//!     admitted to T2 only if it was reused there, else to T1.
//!
//!   Both REPLACE rules fall back to the other list when theirs is empty.
//!   Every ghost hit moves both experts' `p`, each by its own rule and at
//!   its own moment (before or after the REPLACE), from the same counts.
//! - **Contested evictions.** A REPLACE decision is contested where the
//!   other expert, with its own `p`, would take the other list; the ghost of
//!   the page it evicts carries the deciding expert's mark. Under S3ARC, a
//!   T1 page evicted with a hit (which CAR would have promoted) is
//!   contested too.
//! - **Regrets and the switch.** A miss on a marked ghost is a regret of
//!   the expert that marked it, after the REPLACE (and CAR's step) for that
//!   miss: the deciding expert's adds one page, the other's takes one off
//!   (not below 0). At [`SWITCH_PERCENT`] of `c` pages the other expert
//!   decides from the next decision on, with its own `p`, and the count
//!   starts again from 0. The ghost lists are trimmed after each insert by
//!   the rules of the expert then deciding.
//!
//! Every fraction of `c` is rounded down, with no floor of one page (the
//! cache counts bytes), so the model matches the cache exactly where a
//! block is one byte; with larger blocks the two round apart.

use crate::reference::PagePolicy;
use std::collections::{HashMap, VecDeque};

/// Regretted pages, in percent of the capacity, at which the other expert
/// takes over (the cache's `ADAPTIVE_SWITCH_PERCENT`).
pub const SWITCH_PERCENT: usize = 200;

/// S3ARC: hits a T1 page needs at its eviction to move to T2.
const PROMOTE_HITS: u64 = crate::s3arc::PROMOTE_FREQ as u64;

/// S3ARC: the largest count a T2 page keeps for its next turn, plus one.
const MAX_FREQ: u64 = crate::s3arc::MAX_FREQ as u64;

/// The expert that decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expert {
    /// CAR's rules (ARC's, in the lazy hit mode).
    Car,
    /// S3ARC's rules.
    S3arc,
}

impl Expert {
    fn other(self) -> Expert {
        match self {
            Expert::Car => Expert::S3arc,
            Expert::S3arc => Expert::Car,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    T1,
    T2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GhostList {
    B1,
    B2,
}

/// A live page.
#[derive(Clone, Copy, Debug)]
struct Live {
    hits: u64,
    reused: bool,
}

/// A remembered page.
#[derive(Clone, Copy, Debug)]
struct Remembered {
    list: GhostList,
    /// The stamp of its entry in the ghost queue (older entries are stale).
    stamp: u64,
    mark: Option<Expert>,
    reused: bool,
}

/// A ghost list: oldest first, with lazy deletion.
#[derive(Debug, Default)]
struct GhostQueue {
    entries: VecDeque<(u64, u64)>,
    len: usize,
}

/// The counts the rules look at, in pages.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    t1: usize,
    t2: usize,
    b1: usize,
    b2: usize,
}

/// The adaptive policy with a capacity of `c` pages: see the
/// [module](self) documentation.
#[derive(Debug)]
pub struct AdaptivePolicy {
    c: usize,
    deciding: Expert,
    /// The deciding expert's `p`.
    p: usize,
    /// The other expert's `p`.
    other_p: usize,
    regrets: usize,
    switches: u64,
    t1: VecDeque<u64>,
    t2: VecDeque<u64>,
    live: HashMap<u64, Live>,
    b1: GhostQueue,
    b2: GhostQueue,
    ghosts: HashMap<u64, Remembered>,
    stamp: u64,
}

/// `c * num / den`, rounded down.
fn fraction(c: usize, num: usize, den: usize) -> usize {
    c * num / den
}

fn s3arc_bounds(c: usize) -> (usize, usize) {
    let min = fraction(c, crate::s3arc::MIN_TARGET_PERMILLE, 1000);
    (
        min,
        fraction(c, crate::s3arc::MAX_TARGET_PERMILLE, 1000).max(min),
    )
}

impl AdaptivePolicy {
    /// An empty cache of `capacity_pages` pages (at least 1), CAR deciding.
    pub fn new(capacity_pages: usize) -> AdaptivePolicy {
        assert!(
            capacity_pages > 0,
            "the adaptive policy needs a capacity of at least one page"
        );
        let c = capacity_pages;
        AdaptivePolicy {
            c,
            deciding: Expert::Car,
            p: 0,
            other_p: s3arc_bounds(c).1,
            regrets: 0,
            switches: 0,
            t1: VecDeque::new(),
            t2: VecDeque::new(),
            live: HashMap::new(),
            b1: GhostQueue::default(),
            b2: GhostQueue::default(),
            ghosts: HashMap::new(),
            stamp: 0,
        }
    }

    /// The expert deciding now.
    pub fn deciding(&self) -> Expert {
        self.deciding
    }

    /// Times the deciding expert changed.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// The deciding expert's target for T1.
    pub fn p(&self) -> usize {
        self.p
    }

    /// |T1|, |T2|, |B1|, |B2|.
    pub fn lens(&self) -> (usize, usize, usize, usize) {
        (self.t1.len(), self.t2.len(), self.b1.len, self.b2.len)
    }

    fn sizes(&self) -> Sizes {
        Sizes {
            t1: self.t1.len(),
            t2: self.t2.len(),
            b1: self.b1.len,
            b2: self.b2.len,
        }
    }

    /// `expert`'s REPLACE: from T1?
    fn evict_from_t1(expert: Expert, s: &Sizes, p: usize) -> bool {
        if s.t1 == 0 {
            return false;
        }
        if s.t2 == 0 {
            return true;
        }
        match expert {
            Expert::Car => s.t1 >= p.max(1),
            Expert::S3arc => s.t1 > p,
        }
    }

    /// `expert`'s `p` after a ghost hit in `hit` (`s` counts the ghost).
    fn adapt(expert: Expert, p: usize, c: usize, hit: GhostList, s: &Sizes) -> usize {
        // ARC's step: one page, or the ratio of the ghost lists when the
        // other is the longer.
        let step = |num: usize, den: usize| if den == 0 || den >= num { 1 } else { num / den };
        let p = match hit {
            GhostList::B1 => (p + step(s.b2, s.b1)).min(c),
            GhostList::B2 => p.saturating_sub(step(s.b1, s.b2)),
        };
        match expert {
            Expert::Car => p,
            Expert::S3arc => {
                let (min, max) = s3arc_bounds(c);
                p.clamp(min, max)
            }
        }
    }

    /// Both experts' `p` after a ghost hit.
    fn adapt_both(&mut self, hit: GhostList) {
        let s = self.sizes();
        self.p = Self::adapt(self.deciding, self.p, self.c, hit, &s);
        self.other_p = Self::adapt(self.deciding.other(), self.other_p, self.c, hit, &s);
    }

    fn push_ghost(&mut self, page: u64, list: GhostList, mark: Option<Expert>, reused: bool) {
        self.stamp += 1;
        let q = match list {
            GhostList::B1 => &mut self.b1,
            GhostList::B2 => &mut self.b2,
        };
        q.entries.push_back((page, self.stamp));
        q.len += 1;
        self.ghosts.insert(
            page,
            Remembered {
                list,
                stamp: self.stamp,
                mark,
                reused,
            },
        );
    }

    /// Forgets the oldest ghost of `list`.
    fn drop_oldest_ghost(&mut self, list: GhostList) {
        let q = match list {
            GhostList::B1 => &mut self.b1,
            GhostList::B2 => &mut self.b2,
        };
        while let Some((page, stamp)) = q.entries.pop_front() {
            if self.ghosts.get(&page).is_some_and(|g| g.stamp == stamp) {
                self.ghosts.remove(&page);
                q.len -= 1;
                return;
            }
        }
        unreachable!("a ghost list with a length has a live entry");
    }

    /// Takes `page`'s ghost out of its list (its queue entry goes stale).
    fn take_ghost(&mut self, page: u64) -> Option<Remembered> {
        let g = self.ghosts.remove(&page)?;
        let q = match g.list {
            GhostList::B1 => &mut self.b1,
            GhostList::B2 => &mut self.b2,
        };
        q.len -= 1;
        if q.entries.len() > 2 * q.len + 64 {
            let ghosts = &self.ghosts;
            q.entries
                .retain(|(p, s)| ghosts.get(p).is_some_and(|g| g.stamp == *s));
        }
        Some(g)
    }

    /// REPLACE: one page leaves T1 or T2 for its ghost list.
    /// (Neither expert's rule looks at whether the miss was in B2.)
    fn replace(&mut self) {
        loop {
            let s = self.sizes();
            let from_t1 = Self::evict_from_t1(self.deciding, &s, self.p);
            let contested = Self::evict_from_t1(self.deciding.other(), &s, self.other_p) != from_t1;
            let list = if from_t1 { List::T1 } else { List::T2 };
            let queue = if from_t1 { &mut self.t1 } else { &mut self.t2 };
            let page = queue.pop_front().expect("REPLACE's list is not empty");
            let live = self.live.get_mut(&page).expect("a listed page is live");
            let promote = match (self.deciding, list) {
                (Expert::Car, _) => live.hits != 0,
                (Expert::S3arc, List::T1) => live.hits >= PROMOTE_HITS,
                (Expert::S3arc, List::T2) => live.hits != 0,
            };
            if promote {
                if self.deciding == Expert::S3arc && list == List::T2 {
                    live.hits = live.hits.min(MAX_FREQ) - 1;
                    live.reused = true;
                } else {
                    live.hits = 0;
                }
                self.t2.push_back(page);
                continue;
            }
            let live = self.live.remove(&page).expect("a listed page is live");
            let mark = if contested || (list == List::T1 && live.hits != 0) {
                // Under CAR a T1 page with a hit is promoted, never here.
                Some(self.deciding)
            } else {
                None
            };
            let (ghost, reused) = match list {
                List::T1 => (GhostList::B1, false),
                List::T2 => (GhostList::B2, live.reused),
            };
            self.push_ghost(page, ghost, mark, reused);
            return;
        }
    }

    /// A regret of `by`'s eviction: may hand the decisions to the other
    /// expert.
    fn regret(&mut self, by: Expert) {
        if by != self.deciding {
            self.regrets = self.regrets.saturating_sub(1);
            return;
        }
        self.regrets += 1;
        if self.regrets >= fraction(self.c, SWITCH_PERCENT, 100).max(1) {
            self.regrets = 0;
            std::mem::swap(&mut self.p, &mut self.other_p);
            self.deciding = self.deciding.other();
            self.switches += 1;
        }
    }

    /// Forgets the oldest ghosts beyond the deciding expert's bounds.
    fn trim_ghosts(&mut self) {
        let s = self.sizes();
        let c = self.c;
        let (b1, b2) = match self.deciding {
            Expert::Car => {
                let b1 = (s.t1 + s.b1).saturating_sub(c).min(s.b1);
                let total = s.t1 + s.t2 + (s.b1 - b1) + s.b2;
                (b1, total.saturating_sub(2 * c).min(s.b2))
            }
            Expert::S3arc => (
                s.b1.saturating_sub(fraction(c, crate::s3arc::GHOST_SMALL_PERCENT, 100)),
                s.b2.saturating_sub(fraction(c, crate::s3arc::GHOST_MAIN_PERCENT, 100)),
            ),
        };
        for _ in 0..b1 {
            self.drop_oldest_ghost(GhostList::B1);
        }
        for _ in 0..b2 {
            self.drop_oldest_ghost(GhostList::B2);
        }
    }
}

impl PagePolicy for AdaptivePolicy {
    fn access(&mut self, x: u64) -> bool {
        if let Some(live) = self.live.get_mut(&x) {
            live.hits += 1;
            return true;
        }
        // A ghost hit moves S3ARC's `p` before the REPLACE, with the ghost
        // still counted; CAR's after it, the ghost counted again.
        let hit = self.ghosts.get(&x).map(|g| g.list);
        let adapt_before = self.deciding == Expert::S3arc;
        if adapt_before {
            if let Some(hit) = hit {
                self.adapt_both(hit);
            }
        }
        let ghost = self.take_ghost(x);
        if self.t1.len() + self.t2.len() >= self.c {
            self.replace();
        }
        if let Some(g) = ghost {
            if !adapt_before {
                let q = match g.list {
                    GhostList::B1 => &mut self.b1,
                    GhostList::B2 => &mut self.b2,
                };
                // Counted again for the step, as CAR's paper has it.
                q.len += 1;
                self.adapt_both(g.list);
                let q = match g.list {
                    GhostList::B1 => &mut self.b1,
                    GhostList::B2 => &mut self.b2,
                };
                q.len -= 1;
            }
            if let Some(by) = g.mark {
                self.regret(by);
            }
        }
        let to_t2 = match ghost {
            Some(g) if g.list == GhostList::B1 => true,
            Some(g) => self.deciding == Expert::Car || g.reused,
            None => false,
        };
        if to_t2 {
            self.t2.push_back(x);
        } else {
            self.t1.push_back(x);
        }
        self.live.insert(
            x,
            Live {
                hits: 0,
                reused: false,
            },
        );
        self.trim_ghosts();
        false
    }

    fn name(&self) -> &'static str {
        "adaptive"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(policy: &mut dyn PagePolicy, trace: &[u64]) -> usize {
        trace.iter().filter(|&&k| policy.access(k)).count()
    }

    #[test]
    fn before_a_switch_it_is_car() {
        let trace: Vec<u64> = (0..20_000u64)
            .map(|i| (i * 7919) % 300 + (i % 3) * 1000)
            .collect();
        let mut model = AdaptivePolicy::new(100);
        let mut car = crate::CarPolicy::new(100);
        for &k in &trace {
            let (a, b) = (model.access(k), car.access(k));
            if model.switches() == 0 {
                assert_eq!(a, b, "block {k}: the model left CAR before a switch");
            }
        }
    }

    #[test]
    fn hot_blocks_among_one_hit_scans_make_it_switch() {
        // A hot set of 300 blocks in a cache of 100, read at random,
        // beside runs of blocks read once: the experts disagree over what
        // to keep, and the misses on what one evicted make it hand over.
        let mut x = 1u64;
        let mut trace = Vec::new();
        let mut next_new = 1_000_000u64;
        for i in 0..40_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (i / 500) % 2 == 1 && i % 2 == 0 {
                trace.push(next_new);
                next_new += 1;
            } else {
                trace.push((x >> 33) % 300);
            }
        }
        let mut model = AdaptivePolicy::new(100);
        let mut car = crate::CarPolicy::new(100);
        let (model_hits, car_hits) = (hits(&mut model, &trace), hits(&mut car, &trace));
        assert!(
            model.switches() > 0,
            "no switch (hits {model_hits}, CAR's {car_hits}, lists {:?})",
            model.lens()
        );
        assert_ne!(
            model_hits,
            car_hits,
            "after {} switches the model still made CAR's hits",
            model.switches()
        );
    }

    #[test]
    fn a_switch_hands_over_the_other_experts_p() {
        let mut model = AdaptivePolicy::new(1000);
        assert_eq!((model.p, model.other_p), (0, 100));
        for _ in 0..1999 {
            model.regret(Expert::Car);
        }
        assert_eq!(model.deciding(), Expert::Car, "1,999 regrets of 2,000");
        model.regret(Expert::S3arc);
        model.regret(Expert::Car);
        assert_eq!(
            model.deciding(),
            Expert::Car,
            "the other expert's regret took one off"
        );
        model.regret(Expert::Car);
        assert_eq!(
            (model.deciding(), model.p, model.other_p, model.regrets),
            (Expert::S3arc, 100, 0, 0)
        );
    }

    #[test]
    fn lists_stay_within_their_bounds() {
        let trace: Vec<u64> = (0..50_000u64)
            .map(|i| if i % 5 == 0 { i } else { (i * 31) % 500 })
            .collect();
        let mut model = AdaptivePolicy::new(200);
        for &k in &trace {
            model.access(k);
            let (t1, t2, b1, b2) = model.lens();
            assert!(t1 + t2 <= 200, "data {t1} + {t2}");
            assert!(t1 + t2 + b1 + b2 <= 400, "lists {t1} {t2} {b1} {b2}");
            assert_eq!(model.live.len(), t1 + t2);
            assert_eq!(model.ghosts.len(), b1 + b2);
        }
    }
}
