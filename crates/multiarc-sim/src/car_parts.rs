//! Where CAR's distance from ARC comes from: CAR with each of its two
//! approximations of ARC taken away, alone or together.
//!
//! CAR (Bansal & Modha, FAST '04) is ARC with clocks: a hit only sets the
//! page's reference bit, and every move happens when the hand comes round.
//! That is two approximations of ARC, and the cache's lazy hit mode (its
//! default, one atomic add per hit) makes both:
//!
//! - **T1's late promotion.** A page hit in T1 stays there, counted in
//!   |T1|, until the hand finds it and moves it to T2; ARC moves it at the
//!   hit. Taken away ([`CarParts::eager_t1`]): a hit in T1 moves the page
//!   to T2's most recent end at once.
//! - **T2's clock.** A page hit in T2 gets another lap, whenever the hit
//!   was; ARC keeps T2 in LRU order. Taken away ([`CarParts::lru_t2`]): a
//!   hit in T2 moves the page to T2's most recent end at once.
//!
//! With neither taken away the policy is [`CarPolicy`](crate::CarPolicy);
//! with both it is ARC's LRU lists under CAR's REPLACE rule and directory
//! bounds. A trace's row under each shows which approximation its
//! distance from ARC is made of (`multiarc replay --policy
//! car,car-eager-t1,car-lru-t2,car-eager-t1-lru-t2,arc`). These take a
//! lock per hit in a concurrent cache: they are measurements, not
//! candidates for the lazy mode.

use crate::reference::{PagePolicy, Places, Queue};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    T1,
    T2,
    B1,
    B2,
}

/// CAR with a capacity of `c` pages, with either of its approximations of
/// ARC taken away: see the [module](self) documentation.
#[derive(Debug)]
pub struct CarParts {
    c: usize,
    p: usize,
    eager_t1: bool,
    lru_t2: bool,
    t1: Queue,
    t2: Queue,
    b1: Queue,
    b2: Queue,
    places: Places<List>,
    referenced: HashMap<u64, bool>,
    stamp: u64,
    name: &'static str,
}

impl CarParts {
    /// CAR of `capacity_pages` pages (at least 1); `eager_t1`: a hit in T1
    /// moves the page to T2 at once; `lru_t2`: a hit in T2 moves the page to
    /// T2's most recent end at once.
    pub fn new(capacity_pages: usize, eager_t1: bool, lru_t2: bool) -> CarParts {
        assert!(
            capacity_pages > 0,
            "CAR needs a capacity of at least one page"
        );
        CarParts {
            c: capacity_pages,
            p: 0,
            eager_t1,
            lru_t2,
            t1: Queue::default(),
            t2: Queue::default(),
            b1: Queue::default(),
            b2: Queue::default(),
            places: HashMap::new(),
            referenced: HashMap::new(),
            stamp: 0,
            name: match (eager_t1, lru_t2) {
                (false, false) => "car",
                (true, false) => "car-eager-t1",
                (false, true) => "car-lru-t2",
                (true, true) => "car-eager-t1-lru-t2",
            },
        }
    }

    /// Whether a hit in T1 moves the page to T2 at once.
    pub fn eager_t1(&self) -> bool {
        self.eager_t1
    }

    /// Whether T2 is kept in LRU order.
    pub fn lru_t2(&self) -> bool {
        self.lru_t2
    }

    fn queue(&mut self, list: List) -> &mut Queue {
        match list {
            List::T1 => &mut self.t1,
            List::T2 => &mut self.t2,
            List::B1 => &mut self.b1,
            List::B2 => &mut self.b2,
        }
    }

    fn push(&mut self, page: u64, list: List) {
        let mut places = std::mem::take(&mut self.places);
        let mut stamp = self.stamp;
        self.queue(list)
            .push_mru(page, list, &mut stamp, &mut places);
        self.places = places;
        self.stamp = stamp;
    }

    fn pop(&mut self, list: List) -> u64 {
        let mut places = std::mem::take(&mut self.places);
        let page = self.queue(list).pop_lru(list, &mut places);
        self.places = places;
        page
    }

    /// Moves `page` from `from` to the most recent end of T2.
    fn move_to_t2(&mut self, page: u64, from: List) {
        let mut places = std::mem::take(&mut self.places);
        self.queue(from).remove(page, from, &mut places);
        self.places = places;
        self.push(page, List::T2);
    }

    /// CAR's REPLACE: the hand moves referenced pages on until it demotes
    /// one to B1 or B2.
    fn replace(&mut self) {
        loop {
            if self.t1.len >= self.p.max(1) {
                let head = self.pop(List::T1);
                if self.referenced[&head] {
                    self.referenced.insert(head, false);
                    self.push(head, List::T2);
                } else {
                    self.referenced.remove(&head);
                    self.push(head, List::B1);
                    return;
                }
            } else {
                let head = self.pop(List::T2);
                if self.referenced[&head] {
                    self.referenced.insert(head, false);
                    self.push(head, List::T2);
                } else {
                    self.referenced.remove(&head);
                    self.push(head, List::B2);
                    return;
                }
            }
        }
    }
}

impl PagePolicy for CarParts {
    fn access(&mut self, x: u64) -> bool {
        let at = self.places.get(&x).map(|&(list, _)| list);
        match at {
            Some(List::T1) if self.eager_t1 => {
                self.move_to_t2(x, List::T1);
                return true;
            }
            Some(List::T2) if self.lru_t2 => {
                self.move_to_t2(x, List::T2);
                return true;
            }
            Some(List::T1 | List::T2) => {
                self.referenced.insert(x, true);
                return true;
            }
            _ => {}
        }
        let in_ghost = at.is_some();
        if self.t1.len + self.t2.len == self.c {
            self.replace();
            // Cache directory replacement.
            if !in_ghost && self.t1.len + self.b1.len == self.c {
                self.pop(List::B1);
            } else if !in_ghost
                && self.t1.len + self.t2.len + self.b1.len + self.b2.len == 2 * self.c
            {
                self.pop(List::B2);
            }
        }
        match at {
            Some(ghost @ (List::B1 | List::B2)) => {
                let (b1, b2) = (self.b1.len, self.b2.len);
                if ghost == List::B1 {
                    let delta = if b1 >= b2 { 1 } else { b2 / b1 };
                    self.p = (self.p + delta).min(self.c);
                } else {
                    let delta = if b2 >= b1 { 1 } else { b1 / b2 };
                    self.p = self.p.saturating_sub(delta);
                }
                self.move_to_t2(x, ghost);
            }
            _ => self.push(x, List::T1),
        }
        self.referenced.insert(x, false);
        false
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArcPolicy, CarPolicy};

    /// A mix that exercises both lists, both ghosts and `p` both ways.
    fn trace() -> Vec<u64> {
        let mut x = 7u64;
        (0..60_000u64)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (i / 4_000) % 3 {
                    0 => (x >> 33) % 400,
                    1 => 10_000 + i % 900,
                    _ => (x >> 33) % 3_000,
                }
            })
            .collect()
    }

    #[test]
    fn with_nothing_taken_away_it_is_car() {
        for c in [1, 7, 100, 500] {
            let mut parts = CarParts::new(c, false, false);
            let mut car = CarPolicy::new(c);
            for (i, &k) in trace().iter().enumerate() {
                assert_eq!(parts.access(k), car.access(k), "@{c}: request {i}");
            }
        }
    }

    #[test]
    fn each_part_changes_the_outcome_and_both_come_near_arc() {
        let trace = trace();
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let c = 500;
        let car = hits(&mut CarPolicy::new(c));
        let eager_t1 = hits(&mut CarParts::new(c, true, false));
        let lru_t2 = hits(&mut CarParts::new(c, false, true));
        let both = hits(&mut CarParts::new(c, true, true));
        let arc = hits(&mut ArcPolicy::new(c));
        assert_ne!(eager_t1, car, "eager T1 made CAR's hits");
        assert_ne!(lru_t2, car, "LRU T2 made CAR's hits");
        let gap = |h: usize| (h as f64 - arc as f64).abs() / trace.len() as f64 * 100.0;
        assert!(
            gap(both) < gap(car) && gap(both) < 0.1,
            "both taken away: {:.3} points from ARC (CAR {:.3})",
            gap(both),
            gap(car)
        );
    }
}
