//! The papers' replacement policies, written from their pseudo-code, one
//! page per unit and single-threaded: the references the concurrent cache is
//! tested against, and the `arc`/`lru` rows of `multiarc replay`.
//!
//! - [`ArcPolicy`]: ARC, Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead
//!   Replacement Cache", FAST '03, Figure 4 (cases I to IV and REPLACE).
//! - [`CarPolicy`]: CAR, Bansal & Modha, "CAR: Clock with Adaptive
//!   Replacement", FAST '04, Figure 2.
//! - [`LruPolicy`]: least recently used.
//!
//! The papers' target `p` is a real number; here it is an integer and the
//! adaptation steps are floored (delta1 = max(1, floor(|B2| / |B1|))), the
//! usual reading, which the cache's byte arithmetic reproduces exactly.
//!
//! The lists are queues with lazy deletion: each entry is stamped with the
//! moment it was queued, and an entry whose stamp no longer matches the
//! page's record is skipped. That keeps every operation O(1) amortised.

use std::collections::{HashMap, VecDeque};

/// A single-threaded page cache policy.
pub trait PagePolicy {
    /// Requests `page`: returns true on a hit; on a miss the page is brought
    /// in, evicting as the policy says.
    fn access(&mut self, page: u64) -> bool;
    /// The policy's name (`arc`, `car`, `lru`).
    fn name(&self) -> &'static str;
}

/// An LRU-ordered queue with O(1) removal by lazy deletion: the list the
/// references here are built on, and the crate's other page-based policies
/// ([`crate::lirs`], [`crate::s3fifo`]).
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Front = least recent. `(page, stamp)`; stale entries are skipped.
    entries: VecDeque<(u64, u64)>,
    pub(crate) len: usize,
}

/// Where a page is and the stamp of its queue entry.
pub(crate) type Places<L> = HashMap<u64, (L, u64)>;

/// ARC's adaptation step for a hit in a ghost list of `hit_len` pages (the
/// hit page counted) when the other ghost list holds `other_len`: one
/// page, or the ratio of the two when the other is the longer (the
/// paper's delta1 and delta2, floored).
pub(crate) fn arc_step(hit_len: usize, other_len: usize) -> usize {
    if hit_len == 0 || hit_len >= other_len {
        1
    } else {
        other_len / hit_len
    }
}

impl Queue {
    pub(crate) fn push_mru<L: Copy>(
        &mut self,
        page: u64,
        list: L,
        stamp: &mut u64,
        places: &mut Places<L>,
    ) {
        *stamp += 1;
        self.entries.push_back((page, *stamp));
        self.len += 1;
        places.insert(page, (list, *stamp));
    }

    /// Removes and returns the least recent live page.
    pub(crate) fn pop_lru<L: Copy + PartialEq>(&mut self, list: L, places: &mut Places<L>) -> u64 {
        loop {
            let (page, stamp) = self.entries.pop_front().expect("pop from an empty list");
            if places.get(&page) == Some(&(list, stamp)) {
                places.remove(&page);
                self.len -= 1;
                return page;
            }
        }
    }

    /// The least recent live page, left in place (stale entries in front of
    /// it are dropped); `None` if the queue is empty.
    pub(crate) fn peek_lru<L: Copy + PartialEq>(
        &mut self,
        list: L,
        places: &Places<L>,
    ) -> Option<u64> {
        while let Some(&(page, stamp)) = self.entries.front() {
            if places.get(&page) == Some(&(list, stamp)) {
                return Some(page);
            }
            self.entries.pop_front();
        }
        None
    }

    /// Removes `page`, which `places` says is in this queue (`list`), from
    /// wherever it is: its entry goes stale.
    pub(crate) fn remove<L: Copy + PartialEq>(
        &mut self,
        page: u64,
        list: L,
        places: &mut Places<L>,
    ) {
        let place = places.remove(&page);
        debug_assert!(
            matches!(place, Some((l, _)) if l == list),
            "{page} is not here"
        );
        self.forget();
        self.compact(list, places);
    }

    /// Puts `page` at the MRU end: moved there if `places` says it is in
    /// this queue (`list`; its old entry goes stale), else added.
    pub(crate) fn touch<L: Copy + PartialEq>(
        &mut self,
        page: u64,
        list: L,
        stamp: &mut u64,
        places: &mut Places<L>,
    ) {
        if places.get(&page).is_some_and(|&(l, _)| l == list) {
            self.forget();
        }
        self.push_mru(page, list, stamp, places);
        self.compact(list, places);
    }

    /// Forgets a page that `places` says is here (its entry goes stale).
    pub(crate) fn forget(&mut self) {
        self.len -= 1;
    }

    /// Drops stale entries once they dominate, bounding memory.
    pub(crate) fn compact<L: Copy + PartialEq>(&mut self, list: L, places: &Places<L>) {
        if self.entries.len() > 2 * self.len + 64 {
            self.entries
                .retain(|&(page, stamp)| places.get(&page) == Some(&(list, stamp)));
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArcList {
    T1,
    T2,
    B1,
    B2,
}

/// ARC with a capacity of `c` pages (Megiddo & Modha, Figure 4).
#[derive(Debug)]
pub struct ArcPolicy {
    c: usize,
    p: usize,
    t1: Queue,
    t2: Queue,
    b1: Queue,
    b2: Queue,
    places: Places<ArcList>,
    stamp: u64,
}

impl ArcPolicy {
    /// An empty ARC cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> ArcPolicy {
        assert!(
            capacity_pages > 0,
            "ARC needs a capacity of at least one page"
        );
        ArcPolicy {
            c: capacity_pages,
            p: 0,
            t1: Queue::default(),
            t2: Queue::default(),
            b1: Queue::default(),
            b2: Queue::default(),
            places: HashMap::new(),
            stamp: 0,
        }
    }

    /// The target size of T1.
    pub fn p(&self) -> usize {
        self.p
    }

    /// |T1|, |T2|, |B1|, |B2|.
    pub fn lens(&self) -> (usize, usize, usize, usize) {
        (self.t1.len, self.t2.len, self.b1.len, self.b2.len)
    }

    /// True if `page` is cached (in T1 or T2).
    pub fn contains(&self, page: u64) -> bool {
        matches!(self.places.get(&page), Some((ArcList::T1 | ArcList::T2, _)))
    }

    fn queue(&mut self, list: ArcList) -> &mut Queue {
        match list {
            ArcList::T1 => &mut self.t1,
            ArcList::T2 => &mut self.t2,
            ArcList::B1 => &mut self.b1,
            ArcList::B2 => &mut self.b2,
        }
    }

    fn push_mru(&mut self, page: u64, list: ArcList) {
        let mut stamp = self.stamp;
        let mut places = std::mem::take(&mut self.places);
        self.queue(list)
            .push_mru(page, list, &mut stamp, &mut places);
        self.places = places;
        self.stamp = stamp;
    }

    fn pop_lru(&mut self, list: ArcList) -> u64 {
        let mut places = std::mem::take(&mut self.places);
        let page = self.queue(list).pop_lru(list, &mut places);
        self.places = places;
        page
    }

    /// Moves `page` (in list `from`) to the MRU end of `to`.
    fn move_to(&mut self, page: u64, from: ArcList, to: ArcList) {
        self.queue(from).forget();
        self.push_mru(page, to);
        let places = std::mem::take(&mut self.places);
        self.queue(from).compact(from, &places);
        self.places = places;
    }

    /// REPLACE(x, p): demote the LRU page of T1 or T2 to its ghost list.
    fn replace(&mut self, x_in_b2: bool) {
        let t1 = self.t1.len;
        if t1 >= 1 && ((x_in_b2 && t1 == self.p) || t1 > self.p) {
            let page = self.pop_lru(ArcList::T1);
            self.push_mru(page, ArcList::B1);
        } else {
            let page = self.pop_lru(ArcList::T2);
            self.push_mru(page, ArcList::B2);
        }
    }
}

impl PagePolicy for ArcPolicy {
    fn access(&mut self, x: u64) -> bool {
        let at = self.places.get(&x).map(|&(list, _)| list);
        let (t1, t2, b1, b2) = self.lens();
        match at {
            // Case I: a hit in T1 or T2 moves x to the MRU end of T2.
            Some(list @ (ArcList::T1 | ArcList::T2)) => {
                self.move_to(x, list, ArcList::T2);
                true
            }
            // Case II: a ghost hit in B1 grows p.
            Some(ArcList::B1) => {
                self.p = (self.p + arc_step(b1, b2)).min(self.c);
                self.replace(false);
                self.move_to(x, ArcList::B1, ArcList::T2);
                false
            }
            // Case III: a ghost hit in B2 shrinks p.
            Some(ArcList::B2) => {
                self.p = self.p.saturating_sub(arc_step(b2, b1));
                self.replace(true);
                self.move_to(x, ArcList::B2, ArcList::T2);
                false
            }
            // Case IV: a complete miss.
            None => {
                if t1 + b1 == self.c {
                    if t1 < self.c {
                        self.pop_lru(ArcList::B1);
                        self.replace(false);
                    } else {
                        self.pop_lru(ArcList::T1);
                    }
                } else if t1 + b1 < self.c && t1 + t2 + b1 + b2 >= self.c {
                    if t1 + t2 + b1 + b2 == 2 * self.c {
                        self.pop_lru(ArcList::B2);
                    }
                    self.replace(false);
                }
                self.push_mru(x, ArcList::T1);
                false
            }
        }
    }

    fn name(&self) -> &'static str {
        "arc"
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CarList {
    T1,
    T2,
    B1,
    B2,
}

/// CAR with a capacity of `c` pages (Bansal & Modha, Figure 2).
///
/// T1 and T2 are clocks: queues whose front is the page under the clock
/// hand (the paper's "head"), and whose back is where pages enter (the
/// paper's "tail"). A hit only sets the page's reference bit; REPLACE moves
/// referenced pages on (T1 to the tail of T2, T2 to the tail of T2), clearing
/// their bits, until it finds an unreferenced page to demote to B1 or B2.
///
/// # Where CAR's distance from ARC comes from
///
/// CAR makes two approximations of ARC, and the cache's lazy hit mode (its
/// default, one atomic add per hit) makes both. [`CarPolicy::with_parts`]
/// takes either away, or both, to show which one a trace's distance from
/// ARC is made of (`multiarc replay --policy
/// car,car-eager-t1,car-lru-t2,car-eager-t1-lru-t2,arc`):
///
/// - **T1's late promotion.** A page hit in T1 stays there, counted in
///   |T1|, until the hand finds it and moves it to T2; ARC moves it at the
///   hit. Taken away (`eager_t1`): a hit in T1 moves the page to T2's most
///   recent end at once.
/// - **T2's clock.** A page hit in T2 gets another lap, whenever the hit
///   was; ARC keeps T2 in LRU order. Taken away (`lru_t2`): a hit in T2
///   moves the page to T2's most recent end at once.
///
/// With both taken away it is ARC's LRU lists under CAR's REPLACE rule and
/// directory bounds. These take a lock per hit in a concurrent cache: they
/// are measurements, not candidates for the lazy mode.
///
/// [`CarPolicy::with_t2_aged`] asks how few of T2's moves LRU order needs:
/// a hit moves a T2 page to the most recent end only if it is *old* (more
/// than a fraction of |T2| pages entered T2 after it), and the hand evicts
/// a page at T2's front whatever hits it had while young (those were near
/// the front already, and LRU would evict it about now). Optionally the
/// moves wait for pressure: a page is moved only if some page has left T2
/// since it entered (a cache that evicts nothing takes no lock).
#[derive(Debug)]
pub struct CarPolicy {
    c: usize,
    p: usize,
    eager_t1: bool,
    lru_t2: bool,
    /// Laps of T2's clock a page's hits can buy: 1 is CAR's reference bit.
    t2_laps: u8,
    t1: Queue,
    t2: Queue,
    b1: Queue,
    b2: Queue,
    places: Places<CarList>,
    /// Laps of the hand a page's hits have bought and it has not yet
    /// spent: one per hit, up to `t2_laps` (CAR: its reference bit).
    laps_left: HashMap<u64, u8>,
    stamp: u64,
    /// T2 in aged order (see [`CarPolicy::with_t2_aged`]), if set.
    t2_aged: Option<T2Aged>,
}

/// [`CarPolicy::with_t2_aged`]'s state.
#[derive(Debug)]
struct T2Aged {
    /// A hit moves a page that more than `permille` / 1000 of |T2| pages
    /// entered T2 after.
    permille: u64,
    /// Moves wait until a page has left T2 since this one entered.
    gated: bool,
    /// Pages pushed into T2, and pages that left it, so far.
    pushes: u64,
    departures: u64,
    /// Per page in T2: `pushes` and `departures` when it entered.
    entered: HashMap<u64, (u64, u64)>,
    /// Hits that moved a page (each a lock in a concurrent cache).
    moves: u64,
    name: &'static str,
}

impl CarPolicy {
    /// An empty CAR cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> CarPolicy {
        CarPolicy::with_parts(capacity_pages, false, false)
    }

    /// CAR with either of its approximations of ARC taken away (see the
    /// type's documentation): `eager_t1`, a hit in T1 moves the page to T2
    /// at once; `lru_t2`, a hit in T2 moves the page to T2's most recent
    /// end at once.
    pub fn with_parts(capacity_pages: usize, eager_t1: bool, lru_t2: bool) -> CarPolicy {
        assert!(
            capacity_pages > 0,
            "CAR needs a capacity of at least one page"
        );
        CarPolicy {
            c: capacity_pages,
            p: 0,
            eager_t1,
            lru_t2,
            t2_laps: 1,
            t1: Queue::default(),
            t2: Queue::default(),
            b1: Queue::default(),
            b2: Queue::default(),
            places: HashMap::new(),
            laps_left: HashMap::new(),
            stamp: 0,
            t2_aged: None,
        }
    }

    /// CAR whose T2 keeps an approximate LRU order with few moves (see the
    /// type's documentation): a hit moves a T2 page to the most recent end
    /// if more than `permille` / 1000 of |T2| pages entered T2 after it;
    /// the hand evicts the page at T2's front whatever its hits. With
    /// `gated`, a hit moves a page only if some page left T2 since it
    /// entered. T1 is CAR's. Names: `car-t2-aged-125`, `-250`, `-500`
    /// (any other permille is named `car-t2-aged`), with `-gated`.
    /// `permille` 0 is `car-lru-t2` hit for hit.
    pub fn with_t2_aged(capacity_pages: usize, permille: u32, gated: bool) -> CarPolicy {
        let mut car = CarPolicy::new(capacity_pages);
        let name = match (permille, gated) {
            (125, false) => "car-t2-aged-125",
            (250, false) => "car-t2-aged-250",
            (500, false) => "car-t2-aged-500",
            (125, true) => "car-t2-aged-125-gated",
            (250, true) => "car-t2-aged-250-gated",
            (500, true) => "car-t2-aged-500-gated",
            (_, false) => "car-t2-aged",
            (_, true) => "car-t2-aged-gated",
        };
        car.t2_aged = Some(T2Aged {
            permille: permille.into(),
            gated,
            pushes: 0,
            departures: 0,
            entered: HashMap::new(),
            moves: 0,
            name,
        });
        car
    }

    /// Hits that moved a T2 page so far (`with_t2_aged` only; else `None`).
    pub fn t2_aged_moves(&self) -> Option<u64> {
        self.t2_aged.as_ref().map(|aged| aged.moves)
    }

    /// True if a hit on `page`, in T2, moves it (see [`Self::with_t2_aged`]).
    fn aged_move(&self, page: u64) -> bool {
        let Some(aged) = &self.t2_aged else {
            return false;
        };
        let (pushes, departures) = aged.entered[&page];
        (aged.pushes - pushes) * 1000 > aged.permille * self.t2.len as u64
            && (!aged.gated || aged.departures > departures)
    }

    /// CAR whose T2 clock counts hits: a page in T2 gets a lap of the hand
    /// per hit since the hand last passed it, up to `max_laps` (CAR: 1).
    /// The lazy hit already counts hits in the entry's word; this asks
    /// whether spending them keeps pages that many readers share (issue
    /// 39's hot queries after a scan) without losing ARC's rows.
    pub fn with_t2_hit_laps(capacity_pages: usize, max_laps: u8) -> CarPolicy {
        let mut car = CarPolicy::new(capacity_pages);
        car.t2_laps = max_laps.max(1);
        car
    }

    /// The target size of T1.
    pub fn p(&self) -> usize {
        self.p
    }

    /// |T1|, |T2|, |B1|, |B2|.
    pub fn lens(&self) -> (usize, usize, usize, usize) {
        (self.t1.len, self.t2.len, self.b1.len, self.b2.len)
    }

    fn queue(&mut self, list: CarList) -> &mut Queue {
        match list {
            CarList::T1 => &mut self.t1,
            CarList::T2 => &mut self.t2,
            CarList::B1 => &mut self.b1,
            CarList::B2 => &mut self.b2,
        }
    }

    fn push(&mut self, page: u64, list: CarList) {
        let mut places = std::mem::take(&mut self.places);
        let mut stamp = self.stamp;
        self.queue(list)
            .push_mru(page, list, &mut stamp, &mut places);
        self.places = places;
        self.stamp = stamp;
        if let (CarList::T2, Some(aged)) = (list, &mut self.t2_aged) {
            aged.pushes += 1;
            aged.entered.insert(page, (aged.pushes, aged.departures));
        }
    }

    fn pop(&mut self, list: CarList) -> u64 {
        let mut places = std::mem::take(&mut self.places);
        let page = self.queue(list).pop_lru(list, &mut places);
        self.places = places;
        page
    }

    /// Moves `page` from `from` to the most recent end of T2.
    fn move_to_t2(&mut self, page: u64, from: CarList) {
        let mut places = std::mem::take(&mut self.places);
        self.queue(from).remove(page, from, &mut places);
        self.places = places;
        self.push(page, CarList::T2);
    }

    /// REPLACE: the hand moves referenced pages on until it demotes one to
    /// B1 or B2.
    fn replace(&mut self) {
        loop {
            let (list, ghost) = if self.t1.len >= self.p.max(1) {
                (CarList::T1, CarList::B1)
            } else {
                (CarList::T2, CarList::B2)
            };
            let head = self.pop(list);
            let mut laps = self.laps_left[&head];
            if let (CarList::T2, Some(_)) = (list, &self.t2_aged) {
                // Hits that did not move it came while it was young.
                laps = 0;
            }
            if laps > 0 {
                let left = if list == CarList::T2 { laps - 1 } else { 0 };
                self.laps_left.insert(head, left);
                self.push(head, CarList::T2);
            } else {
                if let (CarList::T2, Some(aged)) = (list, &mut self.t2_aged) {
                    aged.departures += 1;
                    aged.entered.remove(&head);
                }
                self.laps_left.remove(&head);
                self.push(head, ghost);
                return;
            }
        }
    }
}

impl PagePolicy for CarPolicy {
    fn access(&mut self, x: u64) -> bool {
        let at = self.places.get(&x).map(|&(list, _)| list);
        match at {
            Some(CarList::T1) if self.eager_t1 => {
                self.move_to_t2(x, CarList::T1);
                return true;
            }
            Some(CarList::T2) if self.lru_t2 || self.aged_move(x) => {
                if let Some(aged) = &mut self.t2_aged {
                    aged.moves += 1;
                }
                self.move_to_t2(x, CarList::T2);
                return true;
            }
            Some(CarList::T1 | CarList::T2) => {
                let max = self.t2_laps;
                let laps = self.laps_left.entry(x).or_insert(0);
                *laps = (*laps + 1).min(max);
                return true;
            }
            _ => {}
        }
        let in_ghost = at.is_some();
        if self.t1.len + self.t2.len == self.c {
            self.replace();
            // Cache directory replacement.
            if !in_ghost && self.t1.len + self.b1.len == self.c {
                self.pop(CarList::B1);
            } else if !in_ghost
                && self.t1.len + self.t2.len + self.b1.len + self.b2.len == 2 * self.c
            {
                self.pop(CarList::B2);
            }
        }
        match at {
            Some(CarList::B1) => {
                self.p = (self.p + arc_step(self.b1.len, self.b2.len)).min(self.c);
                self.move_to_t2(x, CarList::B1);
            }
            Some(CarList::B2) => {
                self.p = self.p.saturating_sub(arc_step(self.b2.len, self.b1.len));
                self.move_to_t2(x, CarList::B2);
            }
            _ => self.push(x, CarList::T1),
        }
        self.laps_left.insert(x, 0);
        false
    }

    fn name(&self) -> &'static str {
        if let Some(aged) = &self.t2_aged {
            return aged.name;
        }
        match self.t2_laps {
            1 => {}
            2 => return "car-t2-laps-2",
            4 => return "car-t2-laps-4",
            _ => return "car-t2-laps",
        }
        match (self.eager_t1, self.lru_t2) {
            (false, false) => "car",
            (true, false) => "car-eager-t1",
            (false, true) => "car-lru-t2",
            (true, true) => "car-eager-t1-lru-t2",
        }
    }
}

/// LRU with a capacity of `c` pages.
#[derive(Debug)]
pub struct LruPolicy {
    c: usize,
    queue: Queue,
    places: Places<()>,
    stamp: u64,
}

impl LruPolicy {
    /// An empty LRU cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> LruPolicy {
        assert!(
            capacity_pages > 0,
            "LRU needs a capacity of at least one page"
        );
        LruPolicy {
            c: capacity_pages,
            queue: Queue::default(),
            places: HashMap::new(),
            stamp: 0,
        }
    }
}

impl PagePolicy for LruPolicy {
    fn access(&mut self, page: u64) -> bool {
        let hit = self.places.contains_key(&page);
        if !hit && self.queue.len == self.c {
            self.queue.pop_lru((), &mut self.places);
        }
        self.queue
            .touch(page, (), &mut self.stamp, &mut self.places);
        hit
    }

    fn name(&self) -> &'static str {
        "lru"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Uniform;

    #[test]
    fn arc_keeps_the_papers_invariants() {
        for c in [1, 2, 7, 50] {
            let mut arc = ArcPolicy::new(c);
            let mut r = Uniform::new(3 * c as u64, c as u64);
            for i in 0..20_000u64 {
                let page = if i % 5 == 0 {
                    1000 + i
                } else {
                    r.next().unwrap()
                };
                arc.access(page);
                let (t1, t2, b1, b2) = arc.lens();
                assert!(t1 + t2 <= c, "|T1|+|T2| <= c");
                assert!(t1 + b1 <= c, "|T1|+|B1| <= c");
                assert!(t1 + t2 + b1 + b2 <= 2 * c, "directory <= 2c");
                assert!(arc.p() <= c);
                assert!(arc.contains(page), "the requested page is cached");
            }
        }
    }

    #[test]
    fn arc_by_hand() {
        let mut arc = ArcPolicy::new(2);
        assert!(!arc.access(1));
        assert!(!arc.access(2));
        assert!(arc.access(1)); // case I: 1 -> T2
        assert_eq!(arc.lens(), (1, 1, 0, 0));
        assert!(!arc.access(3)); // case IV: |T1|=1 > p=0, 2 -> B1
        assert_eq!(arc.lens(), (1, 1, 1, 0));
        // Case II: B1 hit, delta 1 -> p = 1; REPLACE: |T1| = 1 is not > p,
        // so T2's LRU page (1) goes to B2; 2 enters T2.
        assert!(!arc.access(2));
        assert_eq!(arc.p(), 1);
        assert_eq!(arc.lens(), (1, 1, 0, 1));
        assert!(arc.contains(3) && arc.contains(2) && !arc.contains(1));
        // Case III: B2 hit, delta 1 -> p = 0; REPLACE with x in B2 and
        // |T1| = 1 > p: T1's page 3 goes to B1.
        assert!(!arc.access(1));
        assert_eq!(arc.p(), 0);
        assert!(arc.contains(1) && arc.contains(2) && !arc.contains(3));
    }

    #[test]
    fn car_keeps_the_papers_invariants() {
        for c in [1, 2, 7, 50] {
            let mut car = CarPolicy::new(c);
            let mut r = Uniform::new(3 * c as u64, c as u64 + 9);
            for i in 0..20_000u64 {
                let page = if i % 5 == 0 {
                    1000 + i
                } else {
                    r.next().unwrap()
                };
                car.access(page);
                let (t1, t2, b1, b2) = car.lens();
                assert!(t1 + t2 <= c);
                assert!(t1 + b1 <= c);
                assert!(t1 + t2 + b1 + b2 <= 2 * c);
                assert!(car.p() <= c);
            }
        }
    }

    /// A mix that exercises both lists, both ghosts and `p` both ways.
    fn mixed_trace() -> Vec<u64> {
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
    fn each_approximation_of_car_changes_the_outcome_and_both_away_come_near_arc() {
        let trace = mixed_trace();
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let c = 500;
        let car = hits(&mut CarPolicy::new(c));
        let eager_t1 = hits(&mut CarPolicy::with_parts(c, true, false));
        let lru_t2 = hits(&mut CarPolicy::with_parts(c, false, true));
        let both = hits(&mut CarPolicy::with_parts(c, true, true));
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

    #[test]
    fn t2_hit_laps_of_one_are_car_and_more_change_the_outcome() {
        let trace = mixed_trace();
        let c = 500;
        let (mut car, mut one) = (CarPolicy::new(c), CarPolicy::with_t2_hit_laps(c, 1));
        for &k in &trace {
            assert_eq!(car.access(k), one.access(k), "page {k}");
        }
        assert_eq!(one.name(), "car");
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let two = hits(&mut CarPolicy::with_t2_hit_laps(c, 2));
        assert_ne!(
            two,
            hits(&mut CarPolicy::new(c)),
            "two laps made CAR's hits"
        );
        assert_eq!(CarPolicy::with_t2_hit_laps(c, 4).name(), "car-t2-laps-4");
    }

    #[test]
    fn t2_aged_of_zero_is_lru_t2_and_gated_moves_wait_for_an_eviction() {
        let trace = mixed_trace();
        let c = 500;
        let (mut lru_t2, mut zero) = (
            CarPolicy::with_parts(c, false, true),
            CarPolicy::with_t2_aged(c, 0, false),
        );
        for &k in &trace {
            assert_eq!(lru_t2.access(k), zero.access(k), "page {k}");
        }
        let hits = |p: &mut dyn PagePolicy| trace.iter().filter(|&&k| p.access(k)).count();
        let aged = hits(&mut CarPolicy::with_t2_aged(c, 250, false));
        assert_ne!(
            aged,
            hits(&mut CarPolicy::new(c)),
            "aged T2 made CAR's hits"
        );
        assert_eq!(
            CarPolicy::with_t2_aged(c, 125, true).name(),
            "car-t2-aged-125-gated"
        );

        // 1 and 2 reach T2 by the hand; nothing has left T2 yet.
        let (mut gated, mut ungated) = (
            CarPolicy::with_t2_aged(4, 0, true),
            CarPolicy::with_t2_aged(4, 0, false),
        );
        for p in [&mut gated, &mut ungated] {
            for k in [1, 2, 3, 4, 1, 2, 5] {
                p.access(k);
            }
            assert_eq!(p.lens().1, 2, "T2 holds 1 and 2");
            for _ in 0..3 {
                assert!(p.access(1) && p.access(2));
            }
        }
        assert_eq!(gated.t2_aged_moves(), Some(0), "no eviction from T2 yet");
        assert!(ungated.t2_aged_moves().unwrap() > 0);
        assert_eq!(CarPolicy::new(4).t2_aged_moves(), None);
    }

    #[test]
    fn car_gives_referenced_pages_a_second_chance() {
        let mut car = CarPolicy::new(2);
        car.access(1);
        car.access(2);
        assert!(car.access(1)); // sets 1's bit
        car.access(3); // hand passes 1 (to T2), demotes 2
        assert!(car.access(1));
        assert!(!car.access(2));
    }

    #[test]
    fn lru_matches_a_naive_model() {
        let mut lru = LruPolicy::new(5);
        let mut naive: Vec<u64> = Vec::new();
        for page in Uniform::new(12, 3).take(10_000) {
            let hit = naive.contains(&page);
            naive.retain(|&p| p != page);
            naive.push(page);
            if naive.len() > 5 {
                naive.remove(0);
            }
            assert_eq!(lru.access(page), hit);
        }
    }

    #[test]
    fn lazy_deletion_keeps_queues_bounded() {
        let mut lru = LruPolicy::new(3);
        for _ in 0..10_000 {
            lru.access(1);
        }
        assert!(lru.queue.entries.len() < 100);
    }
}
