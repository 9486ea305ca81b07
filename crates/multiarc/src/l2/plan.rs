//! What a batch overwrites, and what the hand keeps: a pure planner. It
//! reads the ring only through [`Holdings`] and writes nothing; `commit.rs`
//! acts on its [`Plan`].
//!
//! A ring that overwrites whatever its hand reaches keeps a FIFO of what
//! memory evicted, about LRU, which loses to ARC wherever frequency matters
//! (measured: 6 points of hit ratio on the CloudPhysics trace at 1% +
//! 10%). So the tier runs ARC over its own records (`history.rs`): T1 and
//! T2, ghosts B1 and B2, a target p, with the ring as the clock of CAR
//! (ARC's clock form). When a batch is about to overwrite copies, the hand
//! judges those of the list over its target as that list's clock would:
//! one read back since it was written gets a second chance (onto T2), one
//! not read back is let go of; the other list's copies are passed over as
//! they are, reference bit and all (their clock has not reached them),
//! until half of what the hand may keep is spent: past that, those not
//! read back are let go of too, and the rest of the budget goes to copies
//! read back (before, a list over its target for long passed over the
//! other list's copies until the budget ran out, and then let go of what
//! followed, read back or not).
//!
//! A kept copy stays where it is: the batch's new buffers go into the gaps
//! between kept copies, and its log block describes the kept copies again
//! (older log blocks are cut off from the chain once the hand has passed
//! them). So keeping costs a log entry (32 bytes), not a write of the copy:
//! an earlier design that wrote kept copies again at the front of the
//! region paid 3.7x OpenZFS's device writes on P6 for a smaller budget and
//! a worse hit ratio (docs/history/l2-third-design.md). What it keeps is bounded (a budget
//! of `keep_ratio` bytes per new byte), so a batch's region, and its log
//! block, stay bounded too.
//!
//! Where the hand's overwrites are found: by a pass over the index
//! (`Index::records_in`), once per batch; at one batch a second that is a
//! few milliseconds for millions of records, and it needs no memory beyond
//! the records themselves (16 bytes each besides the key).

use super::device::UNIT;
use super::format::log_len;
use super::index::Rec;

/// What the planner reads of the tier.
pub(super) trait Holdings<K> {
    /// The cached records meeting units `[start, end)`, in device order.
    fn records_in(&self, start: u64, end: u64) -> Vec<(K, Rec)>;

    /// The tier's lists as they are now.
    fn lists(&self) -> Lists;
}

/// Device bytes of the cached records on T1 and T2, and T1's target.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lists {
    pub(super) t1: u64,
    pub(super) t2: u64,
    pub(super) p: u64,
}

/// What one batch overwrites: the region `[start, start + total)` holds
/// the copies the hand keeps (where they are), the new buffers in the gaps
/// between them (at `placed`, in batch order) and the log block (at
/// `log_at`, after everything else); every record meeting it is either
/// `dropped` or `kept`.
#[derive(Debug)]
pub(super) struct Plan<K> {
    pub(super) total: u64,
    pub(super) log_at: u64,
    pub(super) placed: Vec<u64>,
    pub(super) dropped: Vec<(K, Rec)>,
    /// Kept copies, and whether the hand judged them (then they go onto
    /// T2 with their reference bit cleared) or only passed them over.
    pub(super) kept: Vec<(K, Rec, bool)>,
}

/// The ring a plan is made on.
pub(super) struct Planner<'a, H> {
    pub(super) held: &'a H,
    /// Bytes of an encoded key (log entries and tombstones).
    pub(super) key_len: usize,
    /// The ring's end (bytes).
    pub(super) ring_end: u64,
}

impl<H> Planner<'_, H> {
    /// What a batch of new buffers of (padded) `sizes` placed from `start`
    /// overwrites, with at most `budget` bytes of copies kept where they
    /// are and a log block carrying `tombstones` keys. `wrapped`: the
    /// ring may hold records in the way (else the buffers go in a row).
    pub(super) fn plan<K>(
        &self,
        wrapped: bool,
        start: u64,
        sizes: &[u64],
        budget: u64,
        tombstones: usize,
    ) -> Plan<K>
    where
        H: Holdings<K>,
    {
        if !wrapped {
            // Nothing in the way: the buffers in a row.
            return self.plan_over(start, sizes, Vec::new(), budget, tombstones);
        }
        let n = sizes.len();
        let used: u64 = sizes.iter().sum();
        let largest = sizes.iter().copied().max().unwrap_or(UNIT);
        // Far enough for the new buffers, the kept copies, the gaps too
        // small for the next buffer (one per kept copy at most) and the
        // log block; looked further if that was not enough.
        let mut reach = start
            + used
            + budget
            + (budget / UNIT + 1) * largest
            + log_len(n + (budget / UNIT) as usize, tombstones, self.key_len);
        loop {
            let end = reach.min(self.ring_end);
            let candidates = self.held.records_in(start / UNIT, end.div_ceil(UNIT));
            let plan = self.plan_over(start, sizes, candidates, budget, tombstones);
            if start + plan.total <= end || end == self.ring_end {
                return plan;
            }
            reach = reach.saturating_mul(2);
        }
    }

    /// `plan` over the records met from `start`, in device order.
    fn plan_over<K>(
        &self,
        start: u64,
        sizes: &[u64],
        candidates: Vec<(K, Rec)>,
        budget: u64,
        tombstones: usize,
    ) -> Plan<K>
    where
        H: Holdings<K>,
    {
        let n = sizes.len();
        let log_bytes = |kept: usize| log_len(n + kept, tombstones, self.key_len);
        let Lists { mut t1, mut t2, p } = self.held.lists();
        let mut plan = Plan {
            total: 0,
            log_at: 0,
            placed: Vec::with_capacity(n),
            dropped: Vec::new(),
            kept: Vec::new(),
        };
        let mut kept_bytes: u64 = 0;
        let mut cursor = start;
        for (key, rec) in candidates {
            let at = rec.unit() as u64 * UNIT;
            // The gap before it takes the next new buffers that fit.
            while plan.placed.len() < n && cursor + sizes[plan.placed.len()] <= at {
                plan.placed.push(cursor);
                cursor += sizes[plan.placed.len() - 1];
            }
            if plan.placed.len() == n && cursor + log_bytes(plan.kept.len()) <= at {
                break;
            }
            // In the way. ARC's replacement, as CAR's two clocks: the list
            // over its target (T1 when it holds more than p, or T2 is
            // empty) is the one judged. A judged copy read back since it
            // was written gets its second chance (onto T2, its bit
            // cleared); one not read back is let go of. The other list's
            // copies are only passed over, reference bit and all (their
            // own clock has not reached them), but not for more than half
            // the budget: past that, a copy of the other list not read
            // back is judged too (let go of). Else, while T1 stays over
            // its target, the T2 copies would be passed over until the
            // budget ran out and then let go of whatever their bit, read
            // back or not; those went to B2, whose hits pushed p down and
            // kept T1 over its target (`other_list_copies_not_read_back_
            // are_judged_past_half_the_budget`). Kept copies stay where
            // they are, described again by the new log block, while the
            // budget lasts.
            let padded = rec.device_bytes();
            let shrink_t1 = t1 > p || t2 == 0;
            let passed_half = kept_bytes.saturating_mul(2) > budget;
            let judged = rec.t2() != shrink_t1 || (passed_half && !rec.referenced());
            let keep = kept_bytes + padded <= budget && (!judged || rec.referenced());
            if keep {
                kept_bytes += padded;
                if judged && !rec.t2() {
                    t1 = t1.saturating_sub(padded);
                    t2 += padded;
                }
                cursor = cursor.max(rec.end() * UNIT);
                plan.kept.push((key, rec, judged));
            } else {
                if rec.t2() {
                    t2 = t2.saturating_sub(padded);
                } else {
                    t1 = t1.saturating_sub(padded);
                }
                plan.dropped.push((key, rec));
            }
        }
        // Past the last record met: the rest in a row.
        while plan.placed.len() < n {
            plan.placed.push(cursor);
            cursor += sizes[plan.placed.len() - 1];
        }
        plan.log_at = cursor;
        plan.total = cursor + log_bytes(plan.kept.len()) - start;
        plan
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const KEY_LEN: usize = 8;

    /// A ring described by its records alone.
    struct Ring {
        records: Vec<(u64, Rec)>,
        lists: Lists,
        /// The unit ranges asked for.
        asked: RefCell<Vec<(u64, u64)>>,
    }

    impl Holdings<u64> for Ring {
        fn records_in(&self, start: u64, end: u64) -> Vec<(u64, Rec)> {
            self.asked.borrow_mut().push((start, end));
            let mut met: Vec<_> = self
                .records
                .iter()
                .filter(|(_, r)| (r.unit() as u64) < end && start < r.end())
                .copied()
                .collect();
            met.sort_unstable_by_key(|(_, r)| r.unit());
            met
        }

        fn lists(&self) -> Lists {
            self.lists
        }
    }

    /// A ring of `records` (key, unit, units long, on T2, read back), its
    /// lists counted from them, T1's target `p` units.
    fn ring(records: &[(u64, u32, u32, bool, bool)], p: u64) -> Ring {
        let records: Vec<(u64, Rec)> = records
            .iter()
            .map(|&(key, unit, len, t2, referenced)| {
                let rec = Rec::cached(unit, len * UNIT as u32, false, t2, key);
                (key, if referenced { rec.read_back() } else { rec })
            })
            .collect();
        let on = |t2: bool| -> u64 {
            records
                .iter()
                .filter(|(_, r)| r.t2() == t2)
                .map(|(_, r)| r.device_bytes())
                .sum()
        };
        Ring {
            lists: Lists {
                t1: on(false),
                t2: on(true),
                p: p * UNIT,
            },
            records,
            asked: RefCell::new(Vec::new()),
        }
    }

    fn planner(held: &Ring, ring_units: u64) -> Planner<'_, Ring> {
        Planner {
            held,
            key_len: KEY_LEN,
            ring_end: ring_units * UNIT,
        }
    }

    fn units(n: u64) -> u64 {
        n * UNIT
    }

    fn keys(v: &[(u64, Rec)]) -> Vec<u64> {
        v.iter().map(|(k, _)| *k).collect()
    }

    fn kept(plan: &Plan<u64>) -> Vec<(u64, bool)> {
        plan.kept
            .iter()
            .map(|(k, _, judged)| (*k, *judged))
            .collect()
    }

    #[test]
    fn before_the_ring_wraps_the_buffers_go_in_a_row_and_nothing_is_read() {
        let held = ring(&[(1, 1, 1, false, false)], 0);
        let sizes = [units(1), units(3), units(2)];
        let plan = planner(&held, 100).plan::<u64>(false, units(1), &sizes, units(8), 2);
        assert_eq!(plan.placed, [units(1), units(2), units(5)]);
        assert_eq!(plan.log_at, units(7));
        assert_eq!(plan.total, units(6) + log_len(3, 2, KEY_LEN));
        assert!(plan.dropped.is_empty() && plan.kept.is_empty());
        assert!(held.asked.borrow().is_empty(), "the index is not read");
    }

    #[test]
    fn with_no_budget_the_hand_lets_go_of_everything_it_reaches() {
        let held = ring(
            &[
                (1, 1, 1, false, true),
                (2, 2, 2, true, true),
                (3, 4, 1, false, false),
                (4, 40, 1, false, true),
            ],
            0,
        );
        let sizes = [units(2), units(2)];
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &sizes, 0, 0);
        assert_eq!(plan.placed, [units(1), units(3)]);
        assert_eq!(plan.log_at, units(5));
        assert_eq!(keys(&plan.dropped), [1, 2, 3], "met by the region");
        assert!(plan.kept.is_empty());
        // The log block's unit reaches key 3's, not key 4's.
        assert_eq!(plan.total, units(4) + log_len(2, 0, KEY_LEN));
    }

    #[test]
    fn a_copy_read_back_on_the_judged_list_is_kept_and_the_new_buffers_go_around_it() {
        // T1 over its target: T1 is judged. Key 2 was read back.
        let held = ring(
            &[
                (1, 1, 1, false, false),
                (2, 2, 1, false, true),
                (3, 3, 2, false, false),
            ],
            0,
        );
        let sizes = [units(1), units(1), units(1)];
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &sizes, units(4), 0);
        assert_eq!(kept(&plan), [(2, true)], "judged: onto T2, bit cleared");
        assert_eq!(keys(&plan.dropped), [1, 3]);
        // Unit 1 (key 1's), then past key 2, into key 3's units.
        assert_eq!(plan.placed, [units(1), units(3), units(4)]);
        assert_eq!(plan.log_at, units(5));
        // The log block describes the kept copy too.
        assert_eq!(plan.total, units(4) + log_len(4, 0, KEY_LEN));
    }

    #[test]
    fn a_buffer_too_large_for_a_gap_goes_after_the_kept_copy_and_keeps_the_batch_order() {
        // T1 (key 9, far off) is over its target and judged: the T2 copies
        // in the way, keys 1 and 2, are passed over, leaving a two-unit gap
        // between them.
        let held = ring(
            &[
                (1, 1, 1, true, false),
                (2, 4, 1, true, false),
                (9, 50, 10, false, false),
            ],
            0,
        );
        let sizes = [units(1), units(3), units(1)];
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &sizes, units(8), 0);
        assert_eq!(kept(&plan), [(1, false), (2, false)], "passed over");
        assert!(plan.dropped.is_empty(), "key 9 lies past the region");
        // The first buffer takes the gap; the 3-unit one does not fit what
        // is left of it, and the last waits for it rather than take that.
        assert_eq!(plan.placed, [units(2), units(5), units(8)]);
        assert_eq!(plan.log_at, units(9));
    }

    #[test]
    fn the_hand_judges_t2_once_t1_is_within_its_target() {
        // p covers T1: T2 is judged; T1's copies are passed over, read back
        // or not.
        let held = ring(
            &[
                (1, 1, 1, false, false),
                (2, 2, 1, true, true),
                (3, 3, 1, true, false),
                (4, 4, 1, false, true),
            ],
            10,
        );
        let sizes = [units(4)];
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &sizes, units(8), 0);
        assert_eq!(kept(&plan), [(1, false), (2, true), (4, false)]);
        assert_eq!(keys(&plan.dropped), [3]);
        // With T2 empty, T1 is judged even within its target.
        let held = ring(&[(1, 1, 1, false, false), (2, 2, 1, false, true)], 10);
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &sizes, units(8), 0);
        assert_eq!(kept(&plan), [(2, true)]);
        assert_eq!(keys(&plan.dropped), [1]);
    }

    #[test]
    fn the_lists_move_as_the_hand_judges() {
        // Three units on T1, p one unit, T2 empty: the first two copies
        // read back go onto T2 (judged); then T1 is within p and T2 is not
        // empty, so the third is only passed over.
        let held = ring(
            &[
                (1, 1, 1, false, true),
                (2, 2, 1, false, true),
                (3, 3, 1, false, true),
            ],
            1,
        );
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &[units(1)], units(8), 0);
        assert_eq!(kept(&plan), [(1, true), (2, true), (3, false)]);
    }

    #[test]
    fn what_is_kept_stays_within_the_budget() {
        // T1 within its target and T2 (key 9, far off) not empty: T1's
        // copies are passed over while the budget lasts.
        let held = ring(
            &[
                (1, 1, 2, false, false),
                (2, 3, 2, false, false),
                (3, 5, 2, false, false),
                (9, 90, 1, true, false),
            ],
            100,
        );
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &[units(1)], units(3), 0);
        assert_eq!(kept(&plan), [(1, false)], "a second would pass the budget");
        assert_eq!(keys(&plan.dropped), [2]);
        // Into key 2's units; its log block ends where key 3 begins.
        assert_eq!(plan.placed, [units(3)]);
        assert_eq!(units(1) + plan.total, units(5));
    }

    #[test]
    fn other_list_copies_not_read_back_are_judged_past_half_the_budget() {
        // p = 0 and T1 not empty (key 9, far off): T1 is over its target
        // and judged; the T2 copies in the way are the other list's. Keys
        // 1-5 were not read back since they were written, 6 and 7 were.
        let t2 = |key: u64, unit: u32, read_back: bool| (key, unit, 1, true, read_back);
        let held = ring(
            &[
                t2(1, 1, false),
                t2(2, 2, false),
                t2(3, 3, false),
                t2(4, 4, false),
                t2(5, 5, false),
                t2(6, 6, true),
                t2(7, 8, true),
                (9, 90, 1, false, false),
            ],
            0,
        );
        let budget = units(4);
        let plan = planner(&held, 100).plan::<u64>(true, units(1), &[units(2)], budget, 0);
        // Within half the budget, T2 copies are passed over, read back or
        // not (1-3); past it, those not read back are let go of (4, 5),
        // and the new buffer goes where they were, so the copy read back
        // (6) is still passed over, bit and all. (Before, T2 copies were
        // passed over until the budget was spent: 1-4 kept, and then 5 and
        // 6 let go of, the copy read back with the one not.)
        assert_eq!(
            kept(&plan),
            [(1, false), (2, false), (3, false), (6, false)],
            "past half the budget, the other list's copies not read back are judged"
        );
        assert_eq!(keys(&plan.dropped), [4, 5]);
        assert_eq!(plan.placed, [units(4)]);
        assert_eq!(plan.log_at, units(7));
        // The same ring with T1 within its target: T2's own clock judges
        // from the first copy on (the new buffer, then the log block, take
        // the units of 1-3).
        let mut held = held;
        held.lists.p = units(100);
        let judged = planner(&held, 100).plan::<u64>(true, units(1), &[units(2)], budget, 0);
        assert_eq!(keys(&judged.dropped), [1, 2, 3]);
        assert_eq!(kept(&judged), []);
        assert_eq!(judged.placed, [units(1)]);
    }

    #[test]
    fn tombstones_lengthen_the_log_block() {
        let held = ring(&[], 0);
        let sizes = [units(1)];
        let without = planner(&held, 1000).plan::<u64>(true, units(1), &sizes, 0, 0);
        let with = planner(&held, 1000).plan::<u64>(true, units(1), &sizes, 0, 500);
        assert_eq!(with.log_at, without.log_at);
        assert_eq!(
            with.total - without.total,
            log_len(1, 500, KEY_LEN) - log_len(1, 0, KEY_LEN)
        );
        assert!(with.total > without.total);
    }

    #[test]
    fn it_looks_no_further_than_the_ring_end() {
        // A batch that does not fit before the ring's end: the plan says
        // so (the caller then starts again from the ring's start).
        let held = ring(&[(1, 16, 1, false, false)], 0);
        let sizes = [units(4), units(4)];
        let plan = planner(&held, 20).plan::<u64>(true, units(15), &sizes, units(8), 0);
        assert_eq!(*held.asked.borrow(), [(15, 20)]);
        assert_eq!(plan.placed, [units(15), units(19)]);
        assert_eq!(plan.total, units(9));
        assert_eq!(keys(&plan.dropped), [1]);
    }

    /// Pseudo-random rings: whatever the records, the plan places the new
    /// buffers and the log block in the region without overlapping each
    /// other or a kept copy, every record the region meets is dropped or
    /// kept (once), and kept bytes stay within the budget.
    #[test]
    fn plans_never_overlap_and_account_for_every_record_they_meet() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let ring_units = 400u64;
        for round in 0..300 {
            let mut records = Vec::new();
            let mut unit = 1 + next(4) as u32;
            let mut key = 0;
            let start = units(1 + next(100));
            while (unit as u64) < ring_units - 8 {
                let len = 1 + next(4) as u32;
                // None straddles the hand (the last batch's region ended
                // there).
                let straddles = (unit as u64) * UNIT < start && start < (unit + len) as u64 * UNIT;
                if !straddles {
                    records.push((key, unit, len, next(2) == 0, next(3) == 0));
                }
                key += 1;
                unit += len + next(3) as u32;
            }
            let held = ring(&records, next(200));
            let sizes: Vec<u64> = (0..1 + next(12)).map(|_| units(1 + next(3))).collect();
            let budget = units(next(16));
            let t = next(50) as usize;
            let plan = planner(&held, ring_units).plan::<u64>(true, start, &sizes, budget, t);
            let end = start + plan.total;
            // Extents in the region: new buffers, kept copies, log block.
            let mut extents: Vec<(u64, u64)> = plan
                .placed
                .iter()
                .zip(&sizes)
                .map(|(&at, &len)| (at, at + len))
                .collect();
            extents.extend(
                plan.kept
                    .iter()
                    .map(|(_, r, _)| (r.unit() as u64 * UNIT, r.end() * UNIT)),
            );
            let log = log_len(sizes.len() + plan.kept.len(), t, KEY_LEN);
            assert_eq!(plan.log_at + log, end, "round {round}");
            extents.push((plan.log_at, end));
            extents.sort_unstable();
            for w in extents.windows(2) {
                assert!(w[0].1 <= w[1].0, "round {round}: overlap {w:?}");
            }
            for &(at, _) in &extents {
                assert!(at >= start, "round {round}: {at} before {start}");
            }
            let placed_in_order = plan.placed.windows(2).all(|w| w[0] < w[1]);
            assert!(placed_in_order, "round {round}: {:?}", plan.placed);
            // Every record the region meets, dropped or kept, once.
            let mut accounted: Vec<u64> = keys(&plan.dropped);
            accounted.extend(plan.kept.iter().map(|(k, _, _)| *k));
            accounted.sort_unstable();
            let before = accounted.len();
            accounted.dedup();
            assert_eq!(before, accounted.len(), "round {round}: twice");
            for (k, r) in &held.records {
                let meets = (r.unit() as u64) * UNIT < end && start < r.end() * UNIT;
                assert!(
                    !meets || accounted.contains(k),
                    "round {round}: key {k} met"
                );
            }
            let kept_bytes: u64 = plan.kept.iter().map(|(_, r, _)| r.device_bytes()).sum();
            assert!(kept_bytes <= budget, "round {round}");
            // A kept copy judged was read back; one let go of was not kept
            // for want of budget or reference.
            for (_, r, judged) in &plan.kept {
                assert!(!judged || r.referenced(), "round {round}");
            }
        }
    }
}
