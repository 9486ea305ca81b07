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
//!   could keep without a shared write per hit). With one generation per
//!   request the model is ARC, hit for hit (a unit test checks it).
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
}

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
}

impl GenerationArcPolicy {
    /// A cache of `capacity_pages` pages (at least 1) whose generation
    /// advances every `capacity_pages / per` ticks of `clock` (at least
    /// one); `per` 0 gives one generation per tick. Names:
    /// `arc-gen-4`, `-16`, `-64`, `arc-gen-4-misses`, `arc-gen-16-misses`
    /// (`arc-gen` for other values).
    pub fn new(capacity_pages: usize, per: u64, clock: Clock) -> GenerationArcPolicy {
        assert!(capacity_pages > 0, "a capacity of at least one page");
        let name = match (per, clock) {
            (4, Clock::Requests) => "arc-gen-4",
            (16, Clock::Requests) => "arc-gen-16",
            (64, Clock::Requests) => "arc-gen-64",
            (4, Clock::Misses) => "arc-gen-4-misses",
            (16, Clock::Misses) => "arc-gen-16-misses",
            _ => "arc-gen",
        };
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
            name,
        }
    }

    fn generation(&self) -> u64 {
        self.ticks / self.step
    }

    fn len(&self, list: usize) -> usize {
        self.lists[list].len()
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

    /// Takes T1's oldest page out.
    fn take_t1(&mut self) -> u64 {
        let (_, page) = self.lists[0].pop_first().expect("T1 is not empty");
        self.live.remove(&page);
        page
    }

    /// Takes T2's oldest page not hit since it was queued out, queueing the
    /// others again at their hit's generation.
    fn take_t2(&mut self) -> u64 {
        loop {
            let (key, page) = self.lists[1].pop_first().expect("T2 is not empty");
            match self.live[&page].hit {
                Some(hit) if hit > key.0 => self.queue(page, 1, hit),
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
            let page = self.take_t1();
            self.b1.push_mru(page, 1, &mut self.stamp, &mut self.ghosts);
        } else {
            let page = self.take_t2();
            self.b2.push_mru(page, 2, &mut self.stamp, &mut self.ghosts);
        }
    }
}

impl PagePolicy for GenerationArcPolicy {
    fn access(&mut self, x: u64) -> bool {
        if self.clock == Clock::Requests {
            self.ticks += 1;
        }
        if let Some(&Live { list, key, .. }) = self.live.get(&x) {
            let generation = self.generation();
            if list == 0 {
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
                    } else {
                        self.take_t1();
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

    #[test]
    fn coarse_generations_change_the_outcome_and_stay_near_arc() {
        let c = 400;
        let trace = trace();
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let arc = hits(&mut ArcPolicy::new(c));
        let mut coarse = GenerationArcPolicy::new(c, 1, Clock::Misses);
        let coarse_hits = hits(&mut coarse);
        assert_ne!(
            coarse_hits, arc,
            "one generation per cache size made ARC's hits"
        );
        let gap = (coarse_hits as f64 - arc as f64).abs() / trace.len() as f64 * 100.0;
        assert!(gap < 2.0, "{gap:.2} points from ARC");
        assert_eq!(coarse.name(), "arc-gen");
        assert_eq!(
            GenerationArcPolicy::new(c, 4, Clock::Misses).name(),
            "arc-gen-4-misses"
        );
    }
}
