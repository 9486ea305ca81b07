//! A differential model of the two tiers: which blocks should be in memory
//! and which on the device after each request of a trace, checked against
//! the cache at small sizes with the feed driven synchronously (inline
//! eviction, one sublist, the eager mode: exactly ARC in memory).
//!
//! The model is written here from the design, not from the code, in the
//! plainest form (lists as queues, the device as a vector of units):
//! - memory is the paper's ARC over pages (Megiddo & Modha, Figure 4),
//!   with one addition: a miss of a page that only the device still holds
//!   (its ghost is gone) counts as a ghost hit of the list it was fed from
//!   (with `l2_readback_as_new`, it is a new page: onto T1, p unchanged);
//! - the feed: on a miss that finds memory full, once a batch's worth of
//!   pages has been inserted since the last feed, it looks `headroom` batches
//!   up the LRU ends of both lists, first the one REPLACE would take from
//!   now (T1 if it is over p, or T2 is empty), and copies the pages the
//!   device does not hold, up to one batch, before anything is evicted;
//! - the device is a ring of 4 KiB units after a header unit: a batch
//!   covers a region from the hand, or from the ring's start when the
//!   region would not end before the ring's end; a read leaves the copy in
//!   place and sets its reference bit;
//! - the device's own history: its copies are on T1 or T2, and what the
//!   hand lets go of is remembered on B1 or B2 (queues, bounded as ARC
//!   bounds them with the ring's units as c); a page written while B1 or
//!   B2 remembers it goes onto T2 and moves the device's p as ARC does;
//! - the hand, walking the copies in the batch's way in device order,
//!   judges the copies of the list that is over its target (T1 is over
//!   when it holds more than p, or T2 is empty) as CAR's clock of that
//!   list does: a referenced one is kept, onto T2 with its bit cleared, an
//!   unreferenced one let go of; a copy of the other list is kept as it is
//!   (list and reference bit), unless more than half the keep budget is
//!   spent and it is unreferenced (then it is let go of). Kept copies stay
//!   where they are, while the keep budget (`ratio` units per new page)
//!   lasts; past it the hand lets go of everything. The new pages fill the free units from the hand in
//!   order, and the log block (a fixed part and an entry per new page and
//!   kept copy, in whole units) comes after them and every kept copy, in
//!   free units; a copy is in the batch's way while the pages or the log
//!   block do not fit before it. With `ratio` 0 the hand lets go of
//!   everything (OpenZFS's ring).
//!
//! With every page one unit, the cache must agree with it on every request
//! and on where every block is at the end.

mod common;

use multiarc::{Cache, HitMode};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;

const BLOCK: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum List {
    T1,
    T2,
    B1,
    B2,
}

/// A page's copy on the device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Copy {
    unit: u64,
    /// Fed from memory's T2.
    mfu: bool,
    /// On the device's T2.
    t2: bool,
    referenced: bool,
}

/// What a batch overwrites: the units it covers from the hand (its log
/// block included), where its new pages go, the copies let go of, and the
/// copies kept (and whether the hand judged them).
struct Plan {
    total: u64,
    placed: Vec<u64>,
    dropped: Vec<u64>,
    kept: Vec<(u64, bool)>,
}

/// Units of a log block describing `entries` copies (the format's 80-byte
/// fixed part, and 24 bytes plus the 8-byte key per entry).
fn log_units(entries: u64) -> u64 {
    (80 + entries * 32).div_ceil(BLOCK as u64)
}

/// Where a request was served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Served {
    Memory,
    Device,
    Miss,
}

struct Model {
    c: usize,
    p: usize,
    lists: HashMap<u64, List>,
    /// Front = LRU.
    t1: VecDeque<u64>,
    t2: VecDeque<u64>,
    b1: VecDeque<u64>,
    b2: VecDeque<u64>,
    /// The device: page -> its copy.
    on_device: HashMap<u64, Copy>,
    /// The device's history (front = oldest) and T1 target, in units.
    dev_b1: VecDeque<u64>,
    dev_b2: VecDeque<u64>,
    dev_p: u64,
    /// Units of copies the hand may keep per new page.
    ratio: u64,
    /// The ring's units `[ring_start, ring_end)`, its hand, and whether the
    /// hand went round.
    ring_start: u64,
    ring_end: u64,
    hand: u64,
    wrapped: bool,
    /// Pages in a batch; the feed looks `headroom` batches up each list.
    batch: usize,
    headroom: usize,
    /// Pages inserted since the last feed.
    unfed: usize,
    /// A page read back with no ghost left is a new page (not a ghost hit).
    readback_as_new: bool,
}

impl Model {
    fn new(c: usize, ring_units: u64, batch: usize, ratio: u64) -> Model {
        Model {
            c,
            p: 0,
            lists: HashMap::new(),
            t1: VecDeque::new(),
            t2: VecDeque::new(),
            b1: VecDeque::new(),
            b2: VecDeque::new(),
            on_device: HashMap::new(),
            dev_b1: VecDeque::new(),
            dev_b2: VecDeque::new(),
            dev_p: 0,
            ratio,
            ring_start: 1,
            ring_end: 1 + ring_units,
            hand: 1,
            wrapped: false,
            batch,
            headroom: 2,
            unfed: 0,
            readback_as_new: false,
        }
    }

    fn queue(&mut self, l: List) -> &mut VecDeque<u64> {
        match l {
            List::T1 => &mut self.t1,
            List::T2 => &mut self.t2,
            List::B1 => &mut self.b1,
            List::B2 => &mut self.b2,
        }
    }

    fn unlink(&mut self, x: u64, l: List) {
        let q = self.queue(l);
        let i = q.iter().position(|&y| y == x).expect("listed");
        q.remove(i);
        self.lists.remove(&x);
    }

    fn push(&mut self, x: u64, l: List) {
        self.queue(l).push_back(x);
        self.lists.insert(x, l);
    }

    fn pop(&mut self, l: List) -> u64 {
        let x = self.queue(l).pop_front().expect("non-empty");
        self.lists.remove(&x);
        x
    }

    /// A miss is about to insert a page: the feed's turn (see the module
    /// comment).
    /// `p`: ARC's target as the insert's REPLACE will see it (a ghost hit
    /// adapts it first).
    fn feed(&mut self, p: usize) {
        self.unfed += 1;
        if self.unfed < self.batch || self.t1.len() + self.t2.len() < self.c {
            return;
        }
        self.unfed = 0;
        let mut pages: Vec<(u64, bool)> = Vec::new();
        // The list REPLACE takes from next first (not knowing whether the
        // miss to come is a B2 hit).
        let t1_first = !self.t1.is_empty() && (self.t2.is_empty() || self.t1.len() > p);
        let order = if t1_first {
            [(&self.t1, false), (&self.t2, true)]
        } else {
            [(&self.t2, true), (&self.t1, false)]
        };
        'lists: for (list, mfu) in order {
            for &x in list.iter().take(self.headroom * self.batch) {
                if self.on_device.contains_key(&x) {
                    continue;
                }
                if pages.len() == self.batch {
                    break 'lists;
                }
                pages.push((x, mfu));
            }
        }
        if pages.is_empty() {
            return;
        }
        // Each page is written onto T2 if the device's history remembers it.
        let cap = self.ring_end - self.ring_start;
        let pages: Vec<(u64, bool, bool)> = pages
            .into_iter()
            .map(|(x, mfu)| (x, mfu, self.device_take(x, cap)))
            .collect();
        let n = pages.len() as u64;
        let budget = (n * self.ratio).min(cap / 4);
        let mut plan = self.plan(self.hand, n, budget);
        if self.hand + plan.total > self.ring_end {
            self.hand = self.ring_start;
            self.wrapped = true;
            plan = self.plan(self.hand, n, budget);
            if self.hand + plan.total > self.ring_end {
                plan = self.plan(self.hand, n, 0);
            }
        }
        let start = self.hand;
        for x in plan.dropped {
            let copy = self.on_device.remove(&x).expect("on the device");
            if copy.t2 {
                self.dev_b2.push_back(x);
            } else {
                self.dev_b1.push_back(x);
            }
            let t1 = self.on_device.values().filter(|c| !c.t2).count() as u64;
            let t2 = self.on_device.len() as u64 - t1;
            // ARC's bounds: T1 + B1 <= c, everything <= 2c (B2 first).
            while t1 + self.dev_b1.len() as u64 > cap && self.dev_b1.pop_front().is_some() {}
            while t1 + t2 + (self.dev_b1.len() + self.dev_b2.len()) as u64 > 2 * cap
                && (self.dev_b2.pop_front().is_some() || self.dev_b1.pop_front().is_some())
            {
            }
        }
        for (x, judged) in plan.kept {
            let c = self.on_device.get_mut(&x).expect("kept");
            c.t2 |= judged;
            c.referenced &= !judged;
        }
        for ((x, mfu, t2), unit) in pages.into_iter().zip(plan.placed) {
            let copy = Copy {
                unit,
                mfu,
                t2,
                referenced: false,
            };
            self.on_device.insert(x, copy);
        }
        self.hand = start + plan.total;
    }

    /// A page is written: if the device's history remembers it, forget it
    /// there, move p (ARC's rule, sizes before the forgetting) and say T2.
    fn device_take(&mut self, x: u64, cap: u64) -> bool {
        let (b1, b2) = (self.dev_b1.len() as u64, self.dev_b2.len() as u64);
        if let Some(i) = self.dev_b1.iter().position(|&y| y == x) {
            self.dev_b1.remove(i);
            self.dev_p = (self.dev_p + (b2 / b1).max(1)).min(cap);
            true
        } else if let Some(i) = self.dev_b2.iter().position(|&y| y == x) {
            self.dev_b2.remove(i);
            self.dev_p = self.dev_p.saturating_sub((b1 / b2).max(1));
            true
        } else {
            false
        }
    }

    /// What a batch of `n` new pages at `start` overwrites, walking the
    /// copies from `start` in device order while they are in its way.
    fn plan(&self, start: u64, n: u64, budget: u64) -> Plan {
        let mut plan = Plan {
            total: 0,
            placed: Vec::new(),
            dropped: Vec::new(),
            kept: Vec::new(),
        };
        let mut copies: Vec<(u64, u64)> = self
            .on_device
            .iter()
            .filter(|(_, c)| self.wrapped && c.unit >= start)
            .map(|(&x, c)| (c.unit, x))
            .collect();
        copies.sort_unstable();
        let mut t1 = self.on_device.values().filter(|c| !c.t2).count() as u64;
        let mut t2 = self.on_device.len() as u64 - t1;
        let mut cursor = start;
        for (unit, x) in copies {
            while (plan.placed.len() as u64) < n && cursor < unit {
                plan.placed.push(cursor);
                cursor += 1;
            }
            let log = log_units(n + plan.kept.len() as u64);
            if plan.placed.len() as u64 == n && cursor + log <= unit {
                break;
            }
            let c = self.on_device[&x];
            let shrink_t1 = t1 > self.dev_p || t2 == 0;
            // Past half the budget, the other list's unreferenced copies
            // are judged too.
            let passed_half = 2 * plan.kept.len() as u64 > budget;
            let judged = c.t2 != shrink_t1 || (passed_half && !c.referenced);
            if (plan.kept.len() as u64) < budget && (!judged || c.referenced) {
                if judged && !c.t2 {
                    t1 -= 1;
                    t2 += 1;
                }
                plan.kept.push((x, judged));
                cursor = cursor.max(unit + 1);
            } else {
                if c.t2 {
                    t2 -= 1;
                } else {
                    t1 -= 1;
                }
                plan.dropped.push(x);
            }
        }
        while (plan.placed.len() as u64) < n {
            plan.placed.push(cursor);
            cursor += 1;
        }
        plan.total = cursor + log_units(n + plan.kept.len() as u64) - start;
        plan
    }

    fn replace(&mut self, x_in_b2: bool) {
        let t1 = self.t1.len();
        // The paper's rule, falling back to the other list when the chosen
        // one is empty (as the cache does).
        if t1 >= 1 && ((x_in_b2 && t1 == self.p) || t1 > self.p || self.t2.is_empty()) {
            let y = self.pop(List::T1);
            self.push(y, List::B1);
        } else {
            let y = self.pop(List::T2);
            self.push(y, List::B2);
        }
    }

    /// ARC's p after a ghost hit on `list` (`listed`: the page is on it).
    fn adapted_p(&self, list: List, listed: bool) -> usize {
        let (b1, b2) = (
            self.b1.len() + usize::from(!listed && list == List::B1),
            self.b2.len() + usize::from(!listed && list == List::B2),
        );
        if list == List::B1 {
            let delta = if b1 >= b2 { 1 } else { b2 / b1 };
            (self.p + delta).min(self.c)
        } else {
            let delta = if b2 >= b1 { 1 } else { b1 / b2 };
            self.p.saturating_sub(delta)
        }
    }

    fn ghost_hit(&mut self, x: u64, list: List, listed: bool) {
        self.p = self.adapted_p(list, listed);
        if listed {
            self.unlink(x, list);
        }
        if self.t1.len() + self.t2.len() >= self.c {
            self.replace(list == List::B2);
        }
        self.push(x, List::T2);
    }

    fn access(&mut self, x: u64) -> Served {
        let in_memory = matches!(self.lists.get(&x), Some(List::T1 | List::T2));
        let served = match self.on_device.get_mut(&x) {
            Some(c) if !in_memory => {
                c.referenced = true;
                Served::Device
            }
            Some(_) => Served::Device,
            None => Served::Miss,
        };
        match self.lists.get(&x).copied() {
            Some(l @ (List::T1 | List::T2)) => {
                self.unlink(x, l);
                self.push(x, List::T2);
                return Served::Memory;
            }
            Some(l @ (List::B1 | List::B2)) => {
                self.feed(self.adapted_p(l, true));
                self.ghost_hit(x, l, true)
            }
            None => {
                // The copy is read before the insert feeds (and the feed
                // may overwrite it).
                let copy = self.on_device.get(&x).copied();
                let as_ghost = copy.filter(|_| !self.readback_as_new).map(|c| {
                    if c.mfu {
                        List::B2
                    } else {
                        List::B1
                    }
                });
                self.feed(as_ghost.map_or(self.p, |l| self.adapted_p(l, false)));
                if let Some(as_ghost) = as_ghost {
                    self.ghost_hit(x, as_ghost, false);
                    // The history's bounds: |T1| + |B1| <= c, all <= 2c.
                    while self.t1.len() + self.b1.len() > self.c && !self.b1.is_empty() {
                        self.pop(List::B1);
                    }
                    while self.t1.len() + self.t2.len() + self.b1.len() + self.b2.len() > 2 * self.c
                        && !self.b2.is_empty()
                    {
                        self.pop(List::B2);
                    }
                } else {
                    let (t1, t2, b1, b2) =
                        (self.t1.len(), self.t2.len(), self.b1.len(), self.b2.len());
                    if t1 + b1 == self.c {
                        if t1 < self.c {
                            self.pop(List::B1);
                            self.replace(false);
                        } else {
                            self.pop(List::T1);
                        }
                    } else if t1 + b1 < self.c && t1 + t2 + b1 + b2 >= self.c {
                        if t1 + t2 + b1 + b2 == 2 * self.c {
                            self.pop(List::B2);
                        }
                        self.replace(false);
                    }
                    self.push(x, List::T1);
                }
            }
        }
        served
    }
}

fn data_of(key: u64) -> Vec<u8> {
    let mut v = vec![(key % 251) as u8; BLOCK];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v[BLOCK - 8..].copy_from_slice(&key.to_le_bytes());
    v
}

fn run(name: &str, trace: &[u64], memory_pages: usize, device_bytes: u64) {
    // The default keep ratio (32), a tight one (4: the budget runs out
    // often), and none (OpenZFS's ring).
    for ratio in [32, 4, 0] {
        run_with(
            &format!("{name}-keep-{ratio}"),
            trace,
            memory_pages,
            device_bytes,
            ratio,
            false,
        );
    }
}

fn run_with(
    name: &str,
    trace: &[u64],
    memory_pages: usize,
    device_bytes: u64,
    ratio: u64,
    readback_as_new: bool,
) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("l2-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("differential-{name}"));
    let _ = std::fs::remove_file(&path);
    let write_max = 16 * BLOCK as u64;
    let cache = Cache::<u64>::builder()
        .max_bytes((memory_pages * BLOCK) as u64)
        .min_bytes(1)
        .sublists(1)
        .inline_eviction(true)
        .hit_mode(HitMode::Eager)
        .l2(&path, device_bytes)
        .l2_write_max(write_max)
        .l2_headroom(2)
        .l2_keep_ratio(ratio)
        .l2_rebuild(false)
        .l2_readback_as_new(readback_as_new)
        .build()
        .unwrap();
    let ring_units = device_bytes / BLOCK as u64 - 1;
    let mut model = Model::new(
        memory_pages,
        ring_units,
        (write_max / BLOCK as u64) as usize,
        ratio,
    );
    model.readback_as_new = readback_as_new;
    let mut agree = 0usize;
    let mut hits = [0usize; 2];
    let mut model_hits = [0usize; 2];
    for (i, &key) in trace.iter().enumerate() {
        let served = if let Some(h) = cache.get_in_memory(&key) {
            assert!(*h == data_of(key)[..], "{name}: wrong bytes for {key}");
            Served::Memory
        } else if let Some(h) = cache.get(&key) {
            assert!(*h == data_of(key)[..], "{name}: wrong bytes for {key}");
            Served::Device
        } else {
            drop(cache.insert(key, data_of(key)));
            Served::Miss
        };
        let before = (
            model.t1.len(),
            model.t2.len(),
            model.b1.len(),
            model.b2.len(),
            model.p,
            model.lists.get(&key).copied(),
            model.on_device.get(&key).copied(),
        );
        let expected = model.access(key);
        if served != expected && agree == i {
            let s = cache.stats();
            eprintln!(
                "{name}: first disagreement at request {i}, key {key}: cache {served:?}, model {expected:?}; model before (t1, t2, b1, b2, p, list, device) = {before:?}; cache after: p {} mru {} mfu {} b1 {} b2 {}",
                s.p / BLOCK as u64, s.mru_bytes / BLOCK as u64, s.mfu_bytes / BLOCK as u64, s.mru_ghost_bytes / BLOCK as u64, s.mfu_ghost_bytes / BLOCK as u64
            );
        }
        agree += usize::from(served == expected);
        match served {
            Served::Memory => hits[0] += 1,
            Served::Device => hits[1] += 1,
            Served::Miss => {}
        }
        match expected {
            Served::Memory => model_hits[0] += 1,
            Served::Device => model_hits[1] += 1,
            Served::Miss => {}
        }
    }
    let n = trace.len() as f64;
    let ratio = |h: [usize; 2]| (h[0] + h[1]) as f64 / n * 100.0;
    let s = cache.stats();
    eprintln!(
        "{name}: {:.1}% of requests agree; hit ratio {:.2}% (memory {}, device {}) vs the model's {:.2}% ({}, {}); {s:?}",
        agree as f64 / n * 100.0,
        ratio(hits),
        hits[0],
        hits[1],
        ratio(model_hits),
        model_hits[0],
        model_hits[1],
    );
    assert!(hits[1] > 0, "{name}: the device served nothing");
    assert_eq!(
        agree as f64, n,
        "{name}: only {agree} of {n} requests served by the same tier as the model"
    );
    // After the trace: which blocks are where.
    let mut same = 0usize;
    let mut mismatch = [0usize; 3];
    let keys: HashSet<u64> = trace.iter().copied().collect();
    for &k in &keys {
        let in_memory = model
            .lists
            .get(&k)
            .is_some_and(|l| matches!(l, List::T1 | List::T2));
        let on_device = model.on_device.contains_key(&k);
        let memory_agrees = cache.contains(&k) == in_memory;
        if !memory_agrees {
            mismatch[0] += 1;
        } else if cache.l2_contains(&k) != on_device {
            mismatch[if on_device { 1 } else { 2 }] += 1;
        }
        same += usize::from(memory_agrees && cache.l2_contains(&k) == on_device);
    }
    eprintln!(
        "{name}: blocks: {} in another memory state, {} on the model's device only, {} on the cache's only; device blocks: model {}, cache {}",
        mismatch[0],
        mismatch[1],
        mismatch[2],
        model.on_device.len(),
        keys.iter().filter(|k| cache.l2_contains(k)).count()
    );
    assert_eq!(
        same,
        keys.len(),
        "{name}: only {same} of {} blocks in the same tiers as the model",
        keys.len()
    );
}

#[test]
fn tiers_follow_the_model_on_zipf() {
    let trace = common::zipf(40_000, 4_000, 0.9, 11);
    run("zipf", &trace, 200, 4096 + 1700 * BLOCK as u64);
}

#[test]
fn tiers_follow_the_model_on_scans_over_a_hot_set() {
    let trace = common::scan_mixed(40_000, 300, 3_000, 5);
    run("scan", &trace, 200, 4096 + 1700 * BLOCK as u64);
}

/// `l2_readback_as_new`: a page read back with no ghost left is a new page.
#[test]
fn tiers_follow_the_model_with_pages_read_back_as_new() {
    let device = 4096 + 1700 * BLOCK as u64;
    let scans = common::scan_mixed(40_000, 300, 3_000, 5);
    run_with("scan-as-new", &scans, 200, device, 32, true);
    let zipf = common::zipf(40_000, 4_000, 0.9, 11);
    run_with("zipf-as-new", &zipf, 200, device, 32, true);
}

/// A loop a little larger than both tiers, interleaved with Zipf requests:
/// the device's history sees the loop's pages come back (B1) and the
/// Zipf pages' (B2), so its p moves both ways.
#[test]
fn tiers_follow_the_model_on_a_loop_larger_than_both_tiers() {
    let looped = common::looping(30_000, 2_300);
    let hot = common::zipf(30_000, 3_000, 1.0, 7);
    let trace: Vec<u64> = looped
        .into_iter()
        .zip(hot)
        .flat_map(|(l, h)| [l, 100_000 + h])
        .collect();
    run("loop", &trace, 200, 4096 + 1700 * BLOCK as u64);
}

#[test]
fn tiers_follow_the_model_on_the_cloudphysics_trace() {
    let Some(blocks) = common::cloudphysics_blocks(BLOCK as u64) else {
        eprintln!("skipped: ../shared/traces/cloudphysics_io.csv is absent (a newcomer's clone)");
        return;
    };
    let trace: Vec<u64> = blocks.into_iter().take(60_000).collect();
    let distinct = trace.iter().collect::<HashSet<_>>().len();
    run(
        "cloudphysics",
        &trace,
        (distinct / 100).max(16),
        4096 + (distinct as u64 / 10) * BLOCK as u64,
    );
}
