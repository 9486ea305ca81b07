//! ARC whose T2 is ordered by coarse generations: a page model of what a
//! lazy hit could keep of ARC's order without a lock (issue 41).
//!
//! The cache's lazy mode is CAR: a hit only counts, and both of CAR's
//! approximations of ARC cost hit ratio on traces nobody tuned on
//! ([`crate::reference::CarPolicy`]). This model asks how much of ARC's
//! order survives when a hit does no more than note *when* it happened, to
//! a coarse generation:
//!
//! - **T1.** A hit moves the page to T2's most recent end at once, as ARC
//!   does. In a concurrent cache that is a lock once per stay in T1, not
//!   once per hit.
//! - **T2.** A hit notes the current generation in the page and moves
//!   nothing. T2 is ordered by (generation, when the page was queued);
//!   REPLACE takes T2's oldest page and, if it was hit in a later
//!   generation than the one it was queued in, queues it again at that
//!   generation and goes on; otherwise it demotes it to B2.
//! - **Generations** advance every `c / per` requests ([`Clock::Requests`]),
//!   or every `c / per` misses ([`Clock::Misses`]: a clock that a cache
//!   could keep without a shared write per hit), or every `c / per` misses
//!   and *first hits* ([`Clock::FirstHits`]): a hit is a first hit when the
//!   generation its page last noted (when it was queued or last hit) is not
//!   the current one. A cache's hit finds that out from the entry's word it
//!   already reads, and only a first hit stores the new generation, so
//!   only a first hit needs to count itself: at most once per page per
//!   generation. With one generation per request the model is ARC, hit for
//!   hit (a unit test checks it).
//!
//! - **Lazy T1** ([`GenerationArcPolicy::with_lazy_t1`]): a T1 hit, too,
//!   only notes its generation, so no hit moves anything. REPLACE, taking
//!   T1's oldest page, queues a page hit since it was queued at the back of
//!   T2 at its hit's generation and goes on. Where ARC reads |T1| (REPLACE's
//!   choice, case IV's bounds), the model reads either the pages in T1 not
//!   hit there (`exact`: what ARC's T1 holds; a cache would count them with
//!   a per-thread counter bumped by a T1 entry's first hit) or every page
//!   in T1 (`raw`: nothing counted on a hit).
//!
//! - **Requeue now** ([`GenerationArcPolicy::with_requeue_now`]): REPLACE
//!   queues a T2 page hit since it was queued at T2's back at the current
//!   generation, not at its hit's: what a list can do (link at the head),
//!   where the ordered map can place a page among older ones.
//!
//! - **Bounded segments** ([`GenerationArcPolicy::with_segments`]): a
//!   cache would keep T2 as a list cut into segments, one per recent
//!   generation, with a page re-queued at the back of its hit's segment.
//!   It can keep only so many: with `k` segments, the generations older
//!   than the newest `k` share the oldest segment, so a page hit in one of
//!   them is re-queued at that segment's back.
//!
//! Everything else (p, the ghosts, the directory) is ARC's, as
//! [`crate::reference::ArcPolicy`] has it.

use crate::reference::{arc_step, PagePolicy, Places, Queue};
use std::collections::{BTreeMap, HashMap};

/// What advances the generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Every `c / per` requests.
    Requests,
    /// Every `c / per` misses.
    Misses,
    /// Every `c / per` misses and first hits (a hit on a page whose noted
    /// generation is an earlier one).
    FirstHits,
}

/// The variants [`GenerationArcPolicy::named`] builds (what the simulator's
/// registries offer by name).
pub const NAMES: &[&str] = &[
    "arc-gen-4",
    "arc-gen-16",
    "arc-gen-64",
    "arc-gen-4-misses",
    "arc-gen-16-misses",
    "arc-gen-4-firsts",
    "arc-gen-8-firsts",
    "arc-gen-16-firsts",
    "arc-gen-4-firsts-k4",
    "arc-gen-4-firsts-k8",
    "arc-gen-4-firsts-k16",
    "arc-gen-16-firsts-k16",
    "arc-gen-16-firsts-k32",
    "arc-gen-16-firsts-k64",
    "arc-gen-16-firsts-k64-at-misses",
    "arc-gen-4-lazy-t1",
    "arc-gen-4-lazy-t1-raw",
    "arc-gen-4-now",
];

/// A live page: which list (0 = T1, 1 = T2), its key there, and the
/// generation of its last hit since it was queued (T2 only).
#[derive(Clone, Copy, Debug)]
struct Live {
    list: usize,
    key: (u64, u64),
    hit: Option<u64>,
}

/// ARC with T2 in generation order (see the module's documentation).
#[derive(Debug)]
pub struct GenerationArcPolicy {
    c: usize,
    p: usize,
    /// Ticks (requests or misses) per generation.
    step: u64,
    clock: Clock,
    ticks: u64,
    seq: u64,
    /// T1 and T2, by (generation, sequence): the front is the oldest.
    lists: [BTreeMap<(u64, u64), u64>; 2],
    live: HashMap<u64, Live>,
    b1: Queue,
    b2: Queue,
    ghosts: Places<u8>,
    stamp: u64,
    name: &'static str,
    /// T1 hits only note their generation (see the module's documentation).
    lazy_t1: Option<LazyT1>,
    /// Pages in T1 hit since they were queued there (lazy T1).
    t1_hit: usize,
    /// REPLACE queues a hit T2 page again at the current generation.
    requeue_now: bool,
    /// Segments T2 keeps (`None`: one per generation, unbounded).
    segments: Option<u64>,
    /// Hits that were first hits (the first-hits clock).
    first_hits: u64,
    /// The generation as the last miss left it, when only misses move it
    /// (`with_advance_at_misses`).
    seen: Option<u64>,
}

/// What a lazy T1 counts as |T1| (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyT1 {
    /// The pages in T1 not hit there: ARC's |T1|.
    Exact,
    /// Every page in T1.
    Raw,
}

impl GenerationArcPolicy {
    /// A cache of `capacity_pages` pages (at least 1) whose generation
    /// advances every `capacity_pages / per` ticks of `clock` (at least
    /// one); `per` 0 gives one generation per tick. Its name is `arc-gen`;
    /// [`GenerationArcPolicy::named`] builds the variants the registries
    /// offer, under their names.
    pub fn new(capacity_pages: usize, per: u64, clock: Clock) -> GenerationArcPolicy {
        assert!(capacity_pages > 0, "a capacity of at least one page");
        GenerationArcPolicy {
            c: capacity_pages,
            p: 0,
            step: (capacity_pages as u64)
                .checked_div(per)
                .map_or(1, |s| s.max(1)),
            clock,
            ticks: 0,
            seq: 0,
            lists: Default::default(),
            live: HashMap::new(),
            b1: Queue::default(),
            b2: Queue::default(),
            ghosts: HashMap::new(),
            stamp: 0,
            name: "arc-gen",
            lazy_t1: None,
            t1_hit: 0,
            requeue_now: false,
            segments: None,
            first_hits: 0,
            seen: None,
        }
    }

    /// The same policy with T1 hits that only note their generation,
    /// counting |T1| as `count` says (see the module's documentation).
    pub fn with_lazy_t1(mut self, count: LazyT1) -> GenerationArcPolicy {
        self.lazy_t1 = Some(count);
        self
    }

    /// The same policy whose REPLACE queues a hit T2 page again at the
    /// current generation, at T2's back, as a list can (see the module's
    /// documentation).
    pub fn with_requeue_now(mut self) -> GenerationArcPolicy {
        self.requeue_now = true;
        self
    }

    /// The same policy with T2 cut into `k` segments (at least one; see
    /// the module's documentation).
    pub fn with_segments(mut self, k: u64) -> GenerationArcPolicy {
        self.segments = Some(k.max(1));
        self
    }

    /// The same policy whose generation moves only at misses: a first hit
    /// ticks, and the generation the ticks make is read at the next miss
    /// (after its own tick, before its REPLACE). What `Policy::Generations`
    /// in the cache does, whose hits do not sum the clock's stripes.
    pub fn with_advance_at_misses(mut self) -> GenerationArcPolicy {
        self.seen = Some(self.ticks / self.step);
        self
    }

    /// The variant called `name`, one of [`NAMES`], for `capacity_pages`
    /// pages; `None` for any other name. A name reads as its parts:
    /// `arc-gen-{per}` (generations per cache size, in requests), then
    /// `-misses` or `-firsts` for the clock ([`Clock`]), `-k{k}` for bounded
    /// segments ([`GenerationArcPolicy::with_segments`]), `-at-misses`
    /// ([`GenerationArcPolicy::with_advance_at_misses`]), `-lazy-t1` with
    /// `-raw` for a lazy T1 counted raw
    /// ([`GenerationArcPolicy::with_lazy_t1`]), and `-now`
    /// ([`GenerationArcPolicy::with_requeue_now`]).
    pub fn named(name: &str, capacity_pages: usize) -> Option<GenerationArcPolicy> {
        let name: &'static str = NAMES.iter().find(|&&n| n == name)?;
        let mut rest = name.strip_prefix("arc-gen-")?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let mut take = |part: &str| match rest.strip_prefix(part) {
            Some(after) => {
                rest = after;
                true
            }
            None => false,
        };
        let clock = if take("-misses") {
            Clock::Misses
        } else if take("-firsts") {
            Clock::FirstHits
        } else {
            Clock::Requests
        };
        let mut policy = GenerationArcPolicy::new(capacity_pages, per, clock);
        if take("-k") {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            policy = policy.with_segments(rest[..digits].parse().ok()?);
            rest = &rest[digits..];
        }
        if let Some(after) = rest.strip_prefix("-at-misses") {
            policy = policy.with_advance_at_misses();
            rest = after;
        }
        let mut take = |part: &str| match rest.strip_prefix(part) {
            Some(after) => {
                rest = after;
                true
            }
            None => false,
        };
        if take("-lazy-t1") {
            let count = if take("-raw") {
                LazyT1::Raw
            } else {
                LazyT1::Exact
            };
            policy = policy.with_lazy_t1(count);
        }
        if take("-now") {
            policy = policy.with_requeue_now();
        }
        (rest.is_empty()).then_some(GenerationArcPolicy { name, ..policy })
    }

    /// Hits so far that found their page's noted generation an earlier
    /// one (counted by the first-hits clock only): in a cache, the hits that
    /// store a generation and count themselves.
    pub fn first_hits(&self) -> u64 {
        self.first_hits
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.seen.unwrap_or(self.ticks / self.step)
    }

    /// |T1| or |T2| as ARC's rules read it: a lazy T1's hit pages count
    /// in T2 when counted exactly.
    fn len(&self, list: usize) -> usize {
        match (list, self.lazy_t1) {
            (0, Some(LazyT1::Exact)) => self.lists[0].len() - self.t1_hit,
            (1, Some(LazyT1::Exact)) => self.lists[1].len() + self.t1_hit,
            _ => self.lists[list].len(),
        }
    }

    /// Queues `page` in `list` at generation `generation`.
    fn queue(&mut self, page: u64, list: usize, generation: u64) {
        self.seq += 1;
        let key = (generation, self.seq);
        self.lists[list].insert(key, page);
        self.live.insert(
            page,
            Live {
                list,
                key,
                hit: None,
            },
        );
    }

    /// A lazy T1's hit `page`, just taken out of T1: queued in T2 at its
    /// hit's generation.
    fn t1_hit_to_t2(&mut self, page: u64, generation: u64) {
        self.t1_hit -= 1;
        self.queue(page, 1, generation);
    }

    /// Takes T1's oldest page not hit there out (a lazy T1 queues the hit
    /// ones in T2 at their hit's generation on the way); `None` when every
    /// page of T1 was hit (a raw lazy T1), which leaves T1 empty.
    fn take_t1(&mut self) -> Option<u64> {
        while let Some((_, page)) = self.lists[0].pop_first() {
            match self.live[&page].hit {
                Some(hit) => self.t1_hit_to_t2(page, hit),
                None => {
                    self.live.remove(&page);
                    return Some(page);
                }
            }
        }
        None
    }

    /// Takes T2's oldest page not hit since it was queued out, queueing the
    /// others again at their hit's generation.
    ///
    /// A lazy T1's hit pages count in T2 (exact) but may all still sit in
    /// T1: when T2 itself is empty they go to T2 first, as the cache's
    /// walk of an empty T2 would fall back to T1's, which moves them.
    fn take_t2(&mut self) -> u64 {
        if self.lists[1].is_empty() {
            let hit: Vec<((u64, u64), u64, u64)> = self.lists[0]
                .iter()
                .filter_map(|(&key, &page)| Some((key, page, self.live[&page].hit?)))
                .collect();
            for (key, page, generation) in hit {
                self.lists[0].remove(&key);
                self.t1_hit_to_t2(page, generation);
            }
        }
        loop {
            let (key, page) = self.lists[1].pop_first().expect("T2 is not empty");
            match self.live[&page].hit {
                Some(hit) if hit > key.0 => {
                    let at = if self.requeue_now {
                        self.generation()
                    } else if let Some(k) = self.segments {
                        // The oldest segment holds every older generation.
                        hit.max((self.generation() + 1).saturating_sub(k))
                    } else {
                        hit
                    };
                    self.queue(page, 1, at)
                }
                _ => {
                    self.live.remove(&page);
                    return page;
                }
            }
        }
    }

    /// ARC's REPLACE.
    fn replace(&mut self, x_in_b2: bool) {
        let t1 = self.len(0);
        if t1 >= 1 && ((x_in_b2 && t1 == self.p) || t1 > self.p) {
            if let Some(page) = self.take_t1() {
                self.b1.push_mru(page, 1, &mut self.stamp, &mut self.ghosts);
                return;
            }
        }
        let page = self.take_t2();
        self.b2.push_mru(page, 2, &mut self.stamp, &mut self.ghosts);
    }
}

impl PagePolicy for GenerationArcPolicy {
    fn access(&mut self, x: u64) -> bool {
        if self.clock == Clock::Requests {
            self.ticks += 1;
        }
        if let Some(&Live { list, key, hit }) = self.live.get(&x) {
            let generation = self.generation();
            if self.clock == Clock::FirstHits && hit.unwrap_or(key.0) != generation {
                // A first hit: it notes the generation it read, then counts.
                self.ticks += 1;
                self.first_hits += 1;
            }
            if list == 0 && self.lazy_t1.is_some() {
                // Case I from a lazy T1: the generation is noted, and the
                // page counts in T2 from now (exact) for ARC's rules.
                if let Some(page) = self.live.get_mut(&x) {
                    if page.hit.replace(generation).is_none() {
                        self.t1_hit += 1;
                    }
                }
            } else if list == 0 {
                // Case I from T1: to T2's most recent end now.
                self.lists[0].remove(&key);
                self.queue(x, 1, generation);
            } else {
                // Case I in T2: only the generation is noted.
                if let Some(page) = self.live.get_mut(&x) {
                    page.hit = Some(generation);
                }
            }
            return true;
        }
        if self.clock == Clock::Misses {
            self.ticks += 1;
        }
        let generation = self.generation();
        if self.clock == Clock::FirstHits {
            // The page is queued at the generation read, then counted.
            self.ticks += 1;
        }
        if self.seen.is_some() {
            self.seen = Some(self.ticks / self.step);
        }
        let (t1, t2) = (self.len(0), self.len(1));
        let (b1, b2) = (self.b1.len, self.b2.len);
        match self.ghosts.get(&x).map(|&(which, _)| which) {
            // Case II.
            Some(1) => {
                self.p = (self.p + arc_step(b1, b2)).min(self.c);
                self.replace(false);
                self.b1.remove(x, 1, &mut self.ghosts);
                self.queue(x, 1, generation);
            }
            // Case III.
            Some(_) => {
                self.p = self.p.saturating_sub(arc_step(b2, b1));
                self.replace(true);
                self.b2.remove(x, 2, &mut self.ghosts);
                self.queue(x, 1, generation);
            }
            // Case IV.
            None => {
                if t1 + b1 == self.c {
                    if t1 < self.c {
                        self.b1.pop_lru(1, &mut self.ghosts);
                        self.replace(false);
                    } else if self.take_t1().is_none() {
                        // A raw lazy T1 that was all hit pages: they went
                        // to T2, which gives one up instead.
                        self.take_t2();
                    }
                } else if t1 + b1 < self.c && t1 + t2 + b1 + b2 >= self.c {
                    if t1 + t2 + b1 + b2 == 2 * self.c {
                        self.b2.pop_lru(2, &mut self.ghosts);
                    }
                    self.replace(false);
                }
                self.queue(x, 0, generation);
            }
        }
        false
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ArcPolicy;
    use crate::workload::{Loop, Scan, Uniform, Zipf};

    fn trace() -> Vec<u64> {
        // A Zipf hot set, a loop and a scan, interleaved (the simulator's
        // seeded generators).
        let mut hot = Zipf::new(300, 0.9, 7);
        let mut wide = Uniform::new(3_000, 8);
        let mut looped = Loop::new(900).map(|k| 1_000 + k);
        let mut scan = Scan::new(10_000, 20_000);
        (0..60_000u64)
            .map(|i| match i % 5 {
                0 | 1 => hot.next(),
                2 => looped.next(),
                3 => scan.next(),
                _ => wide.next(),
            })
            .map(|k| k.expect("each generator has enough ids"))
            .collect()
    }

    /// `policy`'s hits on [`trace`], and how many points of hit ratio they
    /// are above ARC's at capacity `c` (below: negative).
    fn hits_and_points_from_arc(policy: &mut dyn PagePolicy, c: usize) -> (usize, f64) {
        let trace = trace();
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let arc = hits(&mut ArcPolicy::new(c));
        let these = hits(policy);
        (
            these,
            (these as f64 - arc as f64) / trace.len() as f64 * 100.0,
        )
    }

    #[test]
    fn one_generation_per_request_is_arc_hit_for_hit() {
        let c = 400;
        let (mut arc, mut generations) = (
            ArcPolicy::new(c),
            GenerationArcPolicy::new(c, 0, Clock::Requests),
        );
        for &k in &trace() {
            assert_eq!(arc.access(k), generations.access(k), "page {k}");
        }
    }

    /// A lazy T1 moves nothing on a hit, and the policy still runs every
    /// case of ARC on a mixed trace, whichever |T1| it reads, near ARC.
    #[test]
    fn a_lazy_t1_notes_hits_and_stays_near_arc() {
        let c = 400;
        for (count, name) in [
            (LazyT1::Exact, "arc-gen-4-lazy-t1"),
            (LazyT1::Raw, "arc-gen-4-lazy-t1-raw"),
        ] {
            let mut lazy = GenerationArcPolicy::named(name, c).expect("a known name");
            assert_eq!(lazy.lazy_t1, Some(count), "{name}");
            let (_, gap) = hits_and_points_from_arc(&mut lazy, c);
            assert!(gap.abs() < 2.0, "{name}: {gap:.2} points from ARC");
            // Every page is in one list once, and the hit count of T1 is
            // the hit pages T1 holds.
            let in_lists = lazy.lists[0].len() + lazy.lists[1].len();
            assert_eq!(in_lists, lazy.live.len(), "{name}");
            assert!(in_lists <= c, "{name}");
            let t1_hit = lazy.lists[0]
                .values()
                .filter(|page| lazy.live[page].hit.is_some())
                .count();
            assert_eq!(t1_hit, lazy.t1_hit, "{name}");
        }
    }

    /// Re-queueing at the current generation is a different order from
    /// re-queueing at the hit's (it changes the hits), still near ARC.
    #[test]
    fn requeue_now_changes_the_order() {
        let c = 400;
        let mut now = GenerationArcPolicy::named("arc-gen-4-now", c).expect("a known name");
        assert!(now.requeue_now);
        let (now_hits, gap) = hits_and_points_from_arc(&mut now, c);
        let (at_hit, _) =
            hits_and_points_from_arc(&mut GenerationArcPolicy::new(c, 4, Clock::Requests), c);
        assert_ne!(
            now_hits, at_hit,
            "the head and the hit's generation gave the same hits"
        );
        assert!(gap.abs() < 2.0, "{gap:.2} points from ARC");
    }

    /// The first-hits clock counts every miss, and a hit only when its page
    /// last noted an earlier generation: a page hit again and again within
    /// one generation counts once at most.
    #[test]
    fn first_hits_count_a_page_once_per_generation() {
        let mut g = GenerationArcPolicy::named("arc-gen-4-firsts", 100).expect("a known name");
        assert_eq!((g.clock, g.step), (Clock::FirstHits, 25));
        for k in 0..10 {
            assert!(!g.access(k));
        }
        assert_eq!(g.ticks, 10, "one tick per miss");
        // Queued in generation 0 and hit in it: no first hit, however often
        // (the first of them moves each page from T1 to T2).
        for _ in 0..5 {
            for k in 0..10 {
                assert!(g.access(k));
            }
        }
        assert_eq!(g.ticks, 10, "hits within the page's generation");
        for k in 100..115 {
            assert!(!g.access(k));
        }
        assert_eq!(g.generation(), 1, "25 ticks make a generation");
        for _ in 0..3 {
            for k in 0..10 {
                assert!(g.access(k));
            }
        }
        assert_eq!(g.ticks, 35, "one first hit per page in generation 1");
        assert_eq!(g.first_hits(), 10);
        let (_, gap) =
            hits_and_points_from_arc(&mut GenerationArcPolicy::new(400, 4, Clock::FirstHits), 400);
        assert!(gap.abs() < 2.0, "{gap:.2} points from ARC");
    }

    /// With the generation moved at misses only, first hits tick but the
    /// generation they make is read at the next miss.
    #[test]
    fn advance_at_misses_moves_the_generation_at_the_next_miss() {
        let mut g = GenerationArcPolicy::new(100, 4, Clock::FirstHits).with_advance_at_misses();
        for k in 0..25 {
            assert!(!g.access(k));
        }
        assert_eq!((g.ticks, g.generation()), (25, 1), "the 25th miss moved it");
        for k in 0..25 {
            assert!(g.access(k), "page {k}");
        }
        assert_eq!(g.first_hits(), 25, "queued in generation 0, hit in 1");
        assert_eq!(
            (g.ticks, g.generation()),
            (50, 1),
            "first hits do not move it"
        );
        assert!(!g.access(1_000));
        assert_eq!((g.ticks, g.generation()), (51, 2), "the next miss does");
    }

    /// Bounded segments change where an old hit page is re-queued, so
    /// with one segment the order is another one; with as many segments as
    /// generations ever seen it is the unbounded model's.
    #[test]
    fn bounded_segments_merge_old_generations() {
        let c = 400;
        let hits = |p: &mut GenerationArcPolicy| trace().iter().filter(|&&k| p.access(k)).count();
        let unbounded = hits(&mut GenerationArcPolicy::new(c, 4, Clock::FirstHits));
        let all =
            hits(&mut GenerationArcPolicy::new(c, 4, Clock::FirstHits).with_segments(1 << 40));
        assert_eq!(all, unbounded);
        let one = hits(&mut GenerationArcPolicy::new(c, 4, Clock::FirstHits).with_segments(1));
        assert_ne!(
            one, unbounded,
            "one segment gave the unbounded order's hits"
        );
    }

    #[test]
    fn coarse_generations_change_the_outcome_and_stay_near_arc() {
        let c = 400;
        let mut coarse = GenerationArcPolicy::new(c, 1, Clock::Misses);
        let (coarse_hits, gap) = hits_and_points_from_arc(&mut coarse, c);
        assert_ne!(
            gap, 0.0,
            "one generation per cache size made ARC's hits ({coarse_hits})"
        );
        assert!(gap.abs() < 2.0, "{gap:.2} points from ARC");
        assert_eq!(coarse.name(), "arc-gen");
    }

    /// Every offered name builds the variant its parts name, under that
    /// name; no other name builds anything.
    #[test]
    fn names_build_the_variants_they_name() {
        for &name in NAMES {
            let g = GenerationArcPolicy::named(name, 1_600).expect(name);
            assert_eq!(g.name(), name);
        }
        let parts = |name| {
            let g = GenerationArcPolicy::named(name, 1_600).expect(name);
            (g.step, g.clock, g.segments, g.lazy_t1, g.requeue_now)
        };
        assert_eq!(
            parts("arc-gen-4"),
            (400, Clock::Requests, None, None, false)
        );
        assert_eq!(
            parts("arc-gen-16-misses"),
            (100, Clock::Misses, None, None, false)
        );
        assert_eq!(
            parts("arc-gen-4-firsts-k8"),
            (400, Clock::FirstHits, Some(8), None, false)
        );
        assert_eq!(
            parts("arc-gen-16-firsts-k64-at-misses"),
            (100, Clock::FirstHits, Some(64), None, false)
        );
        assert_eq!(
            parts("arc-gen-4-lazy-t1"),
            (400, Clock::Requests, None, Some(LazyT1::Exact), false)
        );
        assert_eq!(
            parts("arc-gen-4-now"),
            (400, Clock::Requests, None, None, true)
        );
        let at_misses = GenerationArcPolicy::named("arc-gen-16-firsts-k64-at-misses", 1_600);
        assert_eq!(at_misses.expect("a known name").seen, Some(0));
        for unknown in ["arc-gen", "arc-gen-5", "arc-gen-4-k8", "arc", ""] {
            assert!(
                GenerationArcPolicy::named(unknown, 100).is_none(),
                "{unknown}"
            );
        }
    }
}
