//! The adaptive policy, one page per unit and single-threaded: CAR's rules
//! and S3ARC's as two experts over one set of lists, one deciding at a
//! time. The reference model of the cache's `Policy::Adaptive` in its lazy
//! hit mode (a hit only counts, every move between lists happens at
//! eviction), as [`CarPolicy`] is of the lazy mode under
//! ARC's rules and [`S3ArcPolicy`] of `Policy::S3arc`.
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
//!
//! # Switched by miniature simulations ([`AdaptivePolicy::with_mini_simulations`])
//!
//! A page model only, not (yet) the cache's: the same lists and experts,
//! but the switch comes from miniature simulations (Waldspurger et al.,
//! "Cache Modeling and Optimization using Miniature Simulations", USENIX
//! ATC '17) instead of regrets. A hash-sampled share of the pages
//! (`max(1%, 512 pages / c)`, at most all) is also fed to a CAR and an
//! S3ARC of `c` times that share; each one's hits are counted with an
//! exponential decay over 10 of its capacities of sampled requests; after
//! 1,000 samples, the expert whose miniature is ahead by more than
//! [`MINI_MARGIN_PERMILLE`] of the sampled requests takes over, with its
//! own `p`. Regrets are then not counted. Its one constant, the margin, was
//! chosen on the tuning corpus only (`multiarc corpus --set tuning
//! --policy adaptive,adaptive-mini`; docs/history has the runs).

use crate::reference::{arc_step, CarPolicy, PagePolicy};
use crate::s3arc::S3ArcPolicy;
use std::collections::{HashMap, VecDeque};

/// Regretted pages, in percent of the capacity, at which the other expert
/// takes over (the cache's `ADAPTIVE_SWITCH_PERCENT`).
pub const SWITCH_PERCENT: usize = 200;

/// Miniature simulations: how far ahead (in thousandths of the sampled
/// requests, over the decay window) the other expert's miniature must be
/// to take over. 5 = half a point of hit ratio; chosen on the tuning set
/// only (29 rows): margins of 0.5 / 1 / 2 / 4 points gave worst rows of
/// -0.31 / -1.27 / -0.46 / -0.31 against `arc` and means of +4.51 / +4.45 /
/// +4.23 / +4.22 (a first version in floating point; this one repeats its
/// half-point row exactly).
pub const MINI_MARGIN_PERMILLE: u64 = 5;

/// Miniature simulations: the smallest miniature, in pages.
const MINI_MIN_PAGES: usize = 512;

/// Miniature simulations: the smallest sampling rate, in thousandths.
const MINI_MIN_RATE_PERMILLE: usize = 10;

/// Miniature simulations: samples before the first switch.
const MINI_WARMUP: u64 = 1_000;

/// Miniature simulations: the decay window, in miniature capacities of
/// sampled requests.
const MINI_WINDOW_CAPACITIES: usize = 10;

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
    /// The miniature simulations that switch experts, if on.
    minis: Option<Box<Minis>>,
}

/// Both experts as miniature page models of a hash-sampled share of the
/// requests (see the module documentation).
#[derive(Debug)]
struct Minis {
    /// A page is sampled when its mixed id is below this.
    threshold: u64,
    car: CarPolicy,
    s3arc: S3ArcPolicy,
    /// Each miniature's hits, decayed: scaled by `(window - 1) / window`
    /// at every sampled request, in fixed point (`SCORE_ONE` a hit).
    car_score: u64,
    s3arc_score: u64,
    window: u64,
    samples: u64,
}

/// A hit in a miniature's decayed score.
const SCORE_ONE: u64 = 1 << 20;

/// SplitMix64's finaliser: the sampling hash of a page id.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Minis {
    fn new(c: usize) -> Minis {
        // The share sampled, in millionths: enough for a miniature of
        // MINI_MIN_PAGES, at least MINI_MIN_RATE_PERMILLE, at most all.
        let ppm = (MINI_MIN_PAGES as u128 * 1_000_000 / c as u128)
            .clamp(MINI_MIN_RATE_PERMILLE as u128 * 1_000, 1_000_000) as u64;
        let pages = ((c as u128 * ppm as u128 / 1_000_000) as usize).max(1);
        Minis {
            threshold: if ppm >= 1_000_000 {
                u64::MAX
            } else {
                ((u64::MAX as u128 * ppm as u128) / 1_000_000) as u64
            },
            car: CarPolicy::new(pages),
            s3arc: S3ArcPolicy::new(pages),
            car_score: 0,
            s3arc_score: 0,
            window: (MINI_WINDOW_CAPACITIES * pages) as u64,
            samples: 0,
        }
    }

    /// Feeds `page` if it is sampled; returns the expert that should
    /// decide, if the miniatures say so.
    fn observe(&mut self, page: u64, deciding: Expert) -> Option<Expert> {
        if self.threshold != u64::MAX && mix(page) >= self.threshold {
            return None;
        }
        let decay = |score: u64, window: u64| score - score / window;
        let (car, s3arc) = (self.car.access(page), self.s3arc.access(page));
        self.car_score = decay(self.car_score, self.window) + u64::from(car) * SCORE_ONE;
        self.s3arc_score = decay(self.s3arc_score, self.window) + u64::from(s3arc) * SCORE_ONE;
        self.samples += 1;
        if self.samples < MINI_WARMUP {
            return None;
        }
        // The scores are hits over about `window` requests: a margin of
        // MINI_MARGIN_PERMILLE of those requests, in the same units.
        let margin = self.window * SCORE_ONE / 1000 * MINI_MARGIN_PERMILLE;
        let (mine, theirs) = match deciding {
            Expert::Car => (self.car_score, self.s3arc_score),
            Expert::S3arc => (self.s3arc_score, self.car_score),
        };
        (theirs > mine + margin).then(|| deciding.other())
    }
}

/// `c * num / den`, rounded down.
fn fraction(c: usize, num: usize, den: usize) -> usize {
    c * num / den
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
            other_p: crate::s3arc::target_bounds(c).1,
            regrets: 0,
            switches: 0,
            t1: VecDeque::new(),
            t2: VecDeque::new(),
            live: HashMap::new(),
            b1: GhostQueue::default(),
            b2: GhostQueue::default(),
            ghosts: HashMap::new(),
            stamp: 0,
            minis: None,
        }
    }

    /// The same lists and experts, switched by miniature simulations
    /// instead of regrets (see the module documentation).
    pub fn with_mini_simulations(capacity_pages: usize) -> AdaptivePolicy {
        AdaptivePolicy {
            minis: Some(Box::new(Minis::new(capacity_pages))),
            ..AdaptivePolicy::new(capacity_pages)
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
        let p = match hit {
            GhostList::B1 => (p + arc_step(s.b1, s.b2)).min(c),
            GhostList::B2 => p.saturating_sub(arc_step(s.b2, s.b1)),
        };
        match expert {
            Expert::Car => p,
            Expert::S3arc => {
                let (min, max) = crate::s3arc::target_bounds(c);
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
    /// The other expert decides from now on, with its own `p`.
    fn switch(&mut self) {
        std::mem::swap(&mut self.p, &mut self.other_p);
        self.deciding = self.deciding.other();
        self.switches += 1;
    }

    fn regret(&mut self, by: Expert) {
        if self.minis.is_some() {
            return;
        }
        if by != self.deciding {
            self.regrets = self.regrets.saturating_sub(1);
            return;
        }
        self.regrets += 1;
        if self.regrets >= fraction(self.c, SWITCH_PERCENT, 100).max(1) {
            self.regrets = 0;
            self.switch();
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
            Expert::S3arc => {
                let (b1, b2) = crate::s3arc::ghost_caps(c);
                (s.b1.saturating_sub(b1), s.b2.saturating_sub(b2))
            }
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
        // The miniatures see the request first; a switch they call for
        // applies from this request's decisions on.
        if let Some(minis) = &mut self.minis {
            if minis.observe(x, self.deciding).is_some() {
                self.switch();
            }
        }
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
        if self.minis.is_some() {
            "adaptive-mini"
        } else {
            "adaptive"
        }
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

    /// A working set of 0.9 times the cache, read at random, replaced by a
    /// new one every 20 caches' worth of requests: CAR follows each shift,
    /// S3ARC's frequency clock holds on to the last set.
    fn shifting_working_set(c: u64, phases: u64) -> Vec<u64> {
        let mut x = 3u64;
        let set = c * 9 / 10;
        (0..phases * 20 * c)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (i / (20 * c)) * 1_000_000 + (x >> 33) % set
            })
            .collect()
    }

    /// `trace` through the miniatures' choice, CAR and S3ARC, each of
    /// `c` pages: the first, and the hits of each.
    fn mini_car_and_s3arc(c: usize, trace: &[u64]) -> (AdaptivePolicy, usize, usize, usize) {
        let mut mini = AdaptivePolicy::with_mini_simulations(c);
        let m = hits(&mut mini, trace);
        let car = hits(&mut crate::CarPolicy::new(c), trace);
        let s3arc = hits(&mut crate::S3ArcPolicy::new(c), trace);
        (mini, m, car, s3arc)
    }

    /// A loop of 1.5 times the cache: CAR keeps none of it, S3ARC part.
    fn loop_longer_than_the_cache(c: u64, rounds: u64) -> Vec<u64> {
        (0..rounds * c * 3 / 2).map(|i| i % (c * 3 / 2)).collect()
    }

    #[test]
    fn miniatures_hand_a_loop_to_s3arc() {
        let trace = loop_longer_than_the_cache(1000, 40);
        let (mini, m, c, s) = mini_car_and_s3arc(1000, &trace);
        assert!(
            s > c + trace.len() / 10,
            "setup: S3ARC {s} far ahead of CAR {c}"
        );
        assert_eq!(
            mini.deciding(),
            Expert::S3arc,
            "{} switches",
            mini.switches()
        );
        assert!(
            m > c + (s - c) / 2,
            "the miniatures' choice kept less than half of S3ARC's lead: {m} (CAR {c}, S3ARC {s})"
        );
    }

    #[test]
    fn miniatures_leave_car_where_it_wins() {
        let trace = shifting_working_set(1000, 30);
        let (mini, m, c, s) = mini_car_and_s3arc(1000, &trace);
        assert!(
            c > s + trace.len() / 50,
            "setup: CAR {c} ahead of S3ARC {s} by 2 points"
        );
        assert_eq!(mini.switches(), 0, "the miniatures switched away from CAR");
        assert_eq!(m, c, "no switch: CAR's decisions, CAR's hits");
    }

    #[test]
    fn miniatures_sample_a_share_of_the_pages() {
        // 512 pages of 1,000: about half the pages; of 1,000,000: 1%.
        for (c, low, high) in [(1_000usize, 0.45, 0.57), (1_000_000, 0.008, 0.012)] {
            let minis = Minis::new(c);
            let sampled = (0..100_000u64)
                .filter(|&p| mix(p) < minis.threshold)
                .count();
            let share = sampled as f64 / 100_000.0;
            assert!(low < share && share < high, "c {c}: {share}");
        }
        assert_eq!(
            Minis::new(100).threshold,
            u64::MAX,
            "small caches: every page"
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
