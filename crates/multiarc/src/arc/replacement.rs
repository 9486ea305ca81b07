//! The replacement policy as a type: [`Replacement`], implemented by ARC's
//! rules ([`ArcRules`]), S3ARC's ([`S3arcRules`]) and the adaptive choice
//! between the two ([`AdaptiveRules`]). The cache picks one when it is
//! built ([`rules`], from [`Policy`]), as it picks its hit mode; the
//! eviction walk and the insert ask it for each decision where the
//! policies differ, and never test which one is on.
//!
//! Each rule is a pure function of sizes and counts (`policy` holds the
//! arithmetic). ARC's and S3ARC's touch no lock and no atomic. The adaptive
//! policy keeps which expert decides and the other's `p` in atomics of its
//! own, and its count of regrets under a leaf lock of its own, where it
//! switches (taken on a miss that finds a marked ghost, never on a hit).

use super::config::Policy;
use super::policy::{self, GhostHit, Sizes};
use crate::lock::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A ghost's mark: no expert is to blame for its eviction (every policy
/// but the adaptive one, and the adaptive one where its experts agreed).
pub(crate) const MARK_NONE: u8 = 0;
/// A ghost's mark: evicted by ARC's rules where S3ARC's would have kept it.
pub(crate) const MARK_ARC: u8 = 1;
/// A ghost's mark: evicted by S3ARC's rules where ARC's would have kept it.
pub(crate) const MARK_S3ARC: u8 = 2;

/// How the lazy hit mode's evictor reads a buffer's hit count at a list
/// tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TailRule {
    /// CAR's clock: any hit is a reference bit that earns one more lap.
    Clock,
    /// S3ARC: in MRU, two hits promote to MFU and fewer evict; in MFU, the
    /// count is a frequency that earns a lap per hit, up to a bound.
    Frequency,
    /// The generations policy: in MRU, any hit promotes (a hit that could
    /// not move its buffer at once); in MFU, a buffer that noted a later
    /// generation than it was queued in is queued again in that one's
    /// segment, and any other is evicted, hit or not.
    Generations,
}

/// A replacement policy's decisions, where ARC and S3ARC differ.
pub(crate) trait Replacement: Send + Sync {
    /// `p` for a cache starting with the target `c`.
    fn initial_p(&self, c: u64) -> u64;

    /// `p` after a ghost hit of `size` bytes (`s`: the sizes with the
    /// ghost still counted).
    fn adapt(&self, p: u64, c: u64, hit: GhostHit, size: u64, s: &Sizes) -> u64;

    /// `p` after the target moved from `old_c` to `new_c`.
    fn rescale_p(&self, p: u64, old_c: u64, new_c: u64) -> u64;

    /// The ghost bytes to drop (from B1, from B2) to keep the history
    /// within its bounds.
    fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64);

    /// REPLACE: evict from MRU (else MFU)? `hit_mode_rule` is the hit
    /// mode's own choice (ARC's in the eager mode, CAR's in the lazy one).
    fn evict_from_mru(
        &self,
        s: &Sizes,
        p: u64,
        b2_hit: bool,
        hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
    ) -> bool;

    /// Whether a ghost hit moves `p` before the REPLACE that makes room
    /// for its buffer (`hit_mode_order`: the hit mode's own order).
    fn adapts_before_replace(&self, hit_mode_order: bool) -> bool;

    /// Laps an eviction walk may make through a list (moving referenced
    /// buffers) before it takes what is left for held.
    fn walk_laps(&self) -> u64;

    /// Whether a hit in the MFU ghost list admits its buffer to MFU
    /// (`reused`: the buffer had been reused while in MFU).
    fn admits_mfu_ghost_to_mfu(&self, reused: bool) -> bool;

    /// How the lazy evictor reads a tail buffer's hit count.
    fn tail_rule(&self) -> TailRule;

    /// The mark for ghosts of buffers evicted from the list this REPLACE
    /// chose (`from_mru`): the deciding expert's, where another expert
    /// would have chosen the other list (adaptive policy only).
    fn list_mark(
        &self,
        _s: &Sizes,
        _b2_hit: bool,
        _hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
        _from_mru: bool,
    ) -> u8 {
        MARK_NONE
    }

    /// The mark for the ghost of an MRU buffer evicted with hits (which
    /// CAR's clock would have promoted): the deciding expert's, if it is
    /// not CAR's (adaptive policy only).
    fn referenced_mru_mark(&self) -> u8 {
        MARK_NONE
    }

    /// A ghost hit: the experts not deciding follow it with their own `p`
    /// (adaptive policy only).
    fn adapt_others(&self, _c: u64, _hit: GhostHit, _size: u64, _s: &Sizes) {}

    /// The target moved from `old_c` to `new_c`: the experts not deciding
    /// rescale their own `p` (adaptive policy only).
    fn rescale_others(&self, _old_c: u64, _new_c: u64) {}

    /// A miss found a ghost of `size` bytes marked `mark`, in a cache of
    /// target `c`: the expert that evicted it regrets it; if that makes the
    /// other expert decide, its `p` goes into `p` (adaptive policy only).
    fn regret(&self, _mark: u8, _size: u64, _c: u64, _p: &crate::mem::sync::AtomicU64) {}

    /// Times the deciding expert changed (adaptive policy only).
    fn switches(&self) -> u64 {
        0
    }
}

/// ARC's rules: `p` anywhere in `0..=c`, both ghost lists together up to
/// `c` beside the data, the hit mode's REPLACE and order.
pub(crate) struct ArcRules;

impl Replacement for ArcRules {
    fn initial_p(&self, _c: u64) -> u64 {
        // The paper starts with p = 0; ghost hits move it from there.
        0
    }

    fn adapt(&self, p: u64, c: u64, hit: GhostHit, size: u64, s: &Sizes) -> u64 {
        policy::adapt(p, c, hit, size, s)
    }

    fn rescale_p(&self, p: u64, old_c: u64, new_c: u64) -> u64 {
        policy::rescale_p(p, old_c, new_c)
    }

    fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64) {
        policy::ghost_excess(s, c)
    }

    fn evict_from_mru(
        &self,
        s: &Sizes,
        p: u64,
        b2_hit: bool,
        hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
    ) -> bool {
        hit_mode_rule(s, p, b2_hit)
    }

    fn adapts_before_replace(&self, hit_mode_order: bool) -> bool {
        hit_mode_order
    }

    fn walk_laps(&self) -> u64 {
        // Once the bytes moved exceed twice the cached bytes, every unheld
        // buffer has lost its reference bit and come round again.
        2
    }

    fn admits_mfu_ghost_to_mfu(&self, _reused: bool) -> bool {
        true
    }

    fn tail_rule(&self) -> TailRule {
        TailRule::Clock
    }
}

/// S3ARC's rules: S3-FIFO's probationary queue (`p` within 0.5%..10% of
/// `c`, starting at 10%) with ARC's ghost lists, each bounded on its own.
pub(crate) struct S3arcRules;

impl Replacement for S3arcRules {
    fn initial_p(&self, c: u64) -> u64 {
        // The top of its bounds: S3-FIFO's 10%.
        policy::s3arc_p_bounds(c).1
    }

    fn adapt(&self, p: u64, c: u64, hit: GhostHit, size: u64, s: &Sizes) -> u64 {
        policy::s3arc_adapt(p, c, hit, size, s)
    }

    fn rescale_p(&self, p: u64, old_c: u64, new_c: u64) -> u64 {
        policy::s3arc_clamp_p(policy::rescale_p(p, old_c, new_c), new_c)
    }

    fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64) {
        policy::s3arc_ghost_excess(s, c)
    }

    fn evict_from_mru(
        &self,
        s: &Sizes,
        p: u64,
        _b2_hit: bool,
        _hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
    ) -> bool {
        policy::s3arc_evict_from_mru(s, p)
    }

    fn adapts_before_replace(&self, _hit_mode_order: bool) -> bool {
        true
    }

    fn walk_laps(&self) -> u64 {
        // A buffer may go round once per count it keeps (promoted from
        // MRU, then up to S3ARC_MAX_FREQ turns in MFU): one more lap per
        // count.
        policy::S3ARC_MAX_FREQ + 2
    }

    fn admits_mfu_ghost_to_mfu(&self, reused: bool) -> bool {
        // Admitting every MFU-ghost hit to MFU lets a loop longer than the
        // cache cycle through MFU and evict everything else
        // (`multiarc_sim::s3arc`): only a buffer reused in MFU goes
        // back there; the others come back to MRU as new.
        reused
    }

    fn tail_rule(&self) -> TailRule {
        TailRule::Frequency
    }
}

/// The generations policy's rules: ARC's exactly (its REPLACE and order,
/// not CAR's: T1 hits move at the hit, so |T1| is ARC's), with MFU's tail
/// read by generation ([`TailRule::Generations`]).
pub(crate) struct GenerationRules;

impl Replacement for GenerationRules {
    fn initial_p(&self, c: u64) -> u64 {
        ArcRules.initial_p(c)
    }

    fn adapt(&self, p: u64, c: u64, hit: GhostHit, size: u64, s: &Sizes) -> u64 {
        ArcRules.adapt(p, c, hit, size, s)
    }

    fn rescale_p(&self, p: u64, old_c: u64, new_c: u64) -> u64 {
        ArcRules.rescale_p(p, old_c, new_c)
    }

    fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64) {
        ArcRules.ghost_excess(s, c)
    }

    fn evict_from_mru(
        &self,
        s: &Sizes,
        p: u64,
        b2_hit: bool,
        _hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
    ) -> bool {
        // ARC's own REPLACE, whatever the hit mode's.
        policy::evict_from_mru(s, p, b2_hit)
    }

    fn adapts_before_replace(&self, _hit_mode_order: bool) -> bool {
        true
    }

    fn walk_laps(&self) -> u64 {
        // A buffer re-queued once has noted the generation it is queued in,
        // so it is evicted when the walk meets it again, unless hit again.
        ArcRules.walk_laps()
    }

    fn admits_mfu_ghost_to_mfu(&self, reused: bool) -> bool {
        ArcRules.admits_mfu_ghost_to_mfu(reused)
    }

    fn tail_rule(&self) -> TailRule {
        TailRule::Generations
    }
}

/// The adaptive policy: [`ArcRules`] and [`S3arcRules`] as two experts,
/// one deciding at a time (`Policy::Adaptive`'s documentation says how it
/// chooses).
pub(crate) struct AdaptiveRules {
    /// S3ARC's rules decide (else ARC's).
    s3arc_decides: AtomicBool,
    /// The `p` of the expert not deciding, following every ghost hit by
    /// its own rule (the deciding one's is the core's `p`).
    other_p: AtomicU64,
    /// Times the deciding expert changed.
    switches: AtomicU64,
    /// Bytes the deciding expert regretted since it took over, less those
    /// the other one did (`policy::adaptive_regret`). Its lock serialises
    /// regrets, so a switch swaps both `p`s as one step.
    regrets: Mutex<u64>,
}

impl AdaptiveRules {
    pub(crate) fn new(c: u64) -> AdaptiveRules {
        AdaptiveRules {
            s3arc_decides: AtomicBool::new(false),
            // S3ARC's own start, for when it first decides.
            other_p: AtomicU64::new(S3arcRules.initial_p(c)),
            switches: AtomicU64::new(0),
            regrets: Mutex::new(0),
        }
    }

    fn s3arc_decides(&self) -> bool {
        self.s3arc_decides.load(Ordering::Relaxed)
    }

    /// The deciding expert, and the other one.
    fn experts(&self) -> (&'static dyn Replacement, &'static dyn Replacement) {
        if self.s3arc_decides() {
            (&S3arcRules, &ArcRules)
        } else {
            (&ArcRules, &S3arcRules)
        }
    }

    fn deciding(&self) -> &'static dyn Replacement {
        self.experts().0
    }

    /// The deciding expert's mark.
    fn mark(&self) -> u8 {
        if self.s3arc_decides() {
            MARK_S3ARC
        } else {
            MARK_ARC
        }
    }
}

impl Replacement for AdaptiveRules {
    fn initial_p(&self, c: u64) -> u64 {
        // ARC's rules decide first.
        ArcRules.initial_p(c)
    }

    fn adapt(&self, p: u64, c: u64, hit: GhostHit, size: u64, s: &Sizes) -> u64 {
        self.deciding().adapt(p, c, hit, size, s)
    }

    fn rescale_p(&self, p: u64, old_c: u64, new_c: u64) -> u64 {
        self.deciding().rescale_p(p, old_c, new_c)
    }

    fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64) {
        self.deciding().ghost_excess(s, c)
    }

    fn evict_from_mru(
        &self,
        s: &Sizes,
        p: u64,
        b2_hit: bool,
        hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
    ) -> bool {
        self.deciding().evict_from_mru(s, p, b2_hit, hit_mode_rule)
    }

    fn adapts_before_replace(&self, hit_mode_order: bool) -> bool {
        self.deciding().adapts_before_replace(hit_mode_order)
    }

    fn walk_laps(&self) -> u64 {
        // S3ARC's, the larger: a switch from it leaves frequencies behind.
        S3arcRules.walk_laps().max(ArcRules.walk_laps())
    }

    fn admits_mfu_ghost_to_mfu(&self, reused: bool) -> bool {
        self.deciding().admits_mfu_ghost_to_mfu(reused)
    }

    fn tail_rule(&self) -> TailRule {
        self.deciding().tail_rule()
    }

    fn list_mark(
        &self,
        s: &Sizes,
        b2_hit: bool,
        hit_mode_rule: fn(&Sizes, u64, bool) -> bool,
        from_mru: bool,
    ) -> u8 {
        let other = self.experts().1;
        let other_p = self.other_p.load(Ordering::Relaxed);
        if other.evict_from_mru(s, other_p, b2_hit, hit_mode_rule) != from_mru {
            self.mark()
        } else {
            MARK_NONE
        }
    }

    fn referenced_mru_mark(&self) -> u8 {
        if self.s3arc_decides() {
            MARK_S3ARC
        } else {
            MARK_NONE
        }
    }

    fn adapt_others(&self, c: u64, hit: GhostHit, size: u64, s: &Sizes) {
        let other = self.experts().1;
        let _ = self
            .other_p
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(other.adapt(p, c, hit, size, s))
            });
    }

    fn rescale_others(&self, old_c: u64, new_c: u64) {
        let other = self.experts().1;
        let _ = self
            .other_p
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(other.rescale_p(p, old_c, new_c))
            });
    }

    fn regret(&self, mark: u8, size: u64, c: u64, p: &crate::mem::sync::AtomicU64) {
        if mark == MARK_NONE {
            return;
        }
        let mut regrets = self.regrets.lock();
        let by_deciding = mark == self.mark();
        let switch;
        (*regrets, switch) = policy::adaptive_regret(*regrets, by_deciding, size, c);
        if switch {
            let mine = p.swap(
                self.other_p.load(Ordering::Relaxed),
                crate::mem::sync::Ordering::AcqRel,
            );
            self.other_p.store(mine, Ordering::Relaxed);
            self.s3arc_decides
                .store(!self.s3arc_decides(), Ordering::Relaxed);
            self.switches.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn switches(&self) -> u64 {
        self.switches.load(Ordering::Relaxed)
    }
}

/// The rules of `policy`, for a cache starting with the target `c`.
pub(crate) fn rules(policy: Policy, c: u64) -> Box<dyn Replacement> {
    match policy {
        Policy::Arc => Box::new(ArcRules),
        Policy::S3arc => Box::new(S3arcRules),
        Policy::Adaptive => Box::new(AdaptiveRules::new(c)),
        Policy::Generations => Box::new(GenerationRules),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The lazy hit mode's own REPLACE rule (CAR's).
    fn car(s: &Sizes, p: u64, _b2_hit: bool) -> bool {
        policy::car_evict_from_mru(s, p)
    }

    fn sizes(mru: u64, mfu: u64) -> Sizes {
        Sizes {
            mru,
            mfu,
            ..Sizes::default()
        }
    }

    #[test]
    fn adaptive_starts_with_arcs_rules_and_marks_only_contested_choices() {
        let rules = AdaptiveRules::new(1000);
        assert_eq!(rules.initial_p(1000), 0, "ARC's start");
        assert_eq!(rules.tail_rule(), TailRule::Clock, "CAR's clock decides");
        assert_eq!(
            rules.other_p.load(Ordering::Relaxed),
            100,
            "S3ARC waits with its own start, 10% of c"
        );
        // MRU 500 bytes, MFU 500: S3ARC (p 100) evicts from MRU.
        let s = sizes(500, 500);
        assert_eq!(
            rules.list_mark(&s, false, car, true),
            MARK_NONE,
            "both experts take MRU: no one to blame"
        );
        assert_eq!(
            rules.list_mark(&s, false, car, false),
            MARK_ARC,
            "ARC takes MFU where S3ARC would take MRU: ARC's call"
        );
        assert_eq!(
            rules.referenced_mru_mark(),
            MARK_NONE,
            "CAR never evicts a referenced MRU buffer"
        );
    }

    #[test]
    fn adaptive_switches_after_the_deciding_experts_regrets_and_swaps_p() {
        let rules = AdaptiveRules::new(1000);
        let p = crate::mem::sync::AtomicU64::new(700);
        // Regrets of 10 bytes each, in a cache of 1000.
        let needed = (1000 * policy::ADAPTIVE_SWITCH_PERCENT / 100).div_ceil(10);
        for i in 1..needed {
            rules.regret(MARK_ARC, 10, 1000, &p);
            assert_eq!(rules.switches(), 0, "after {i} regrets: still ARC");
        }
        rules.regret(MARK_NONE, 10, 1000, &p);
        rules.regret(MARK_S3ARC, 10, 1000, &p);
        assert_eq!(rules.switches(), 0, "unmarked, or the other's: no switch");
        rules.regret(MARK_ARC, 10, 1000, &p);
        assert_eq!(rules.switches(), 0, "the other's regret took its bytes off");
        rules.regret(MARK_ARC, 10, 1000, &p);
        assert_eq!(rules.switches(), 1, "the bytes reached: S3ARC decides");
        assert_eq!(rules.tail_rule(), TailRule::Frequency);
        assert_eq!(
            (
                p.load(crate::mem::sync::Ordering::Relaxed),
                rules.other_p.load(Ordering::Relaxed)
            ),
            (100, 700),
            "S3ARC's p decides, ARC's waits"
        );
        assert_eq!(rules.referenced_mru_mark(), MARK_S3ARC);
        assert_eq!(
            rules.list_mark(&sizes(500, 500), false, car, true),
            MARK_S3ARC,
            "S3ARC takes MRU where ARC (p 700) would take MFU"
        );
        // Ghost hits move both p's, each by its own rule.
        let s = Sizes {
            mru_ghost: 10,
            mfu_ghost: 10,
            ..sizes(500, 500)
        };
        rules.adapt_others(1000, GhostHit::Mru, 10, &s);
        assert_eq!(rules.other_p.load(Ordering::Relaxed), 710, "ARC's step");
        assert_eq!(
            rules.adapt(100, 1000, GhostHit::Mru, 10, &s),
            100,
            "S3ARC's bound"
        );
        // One regret as large as the bound switches back at once.
        rules.regret(
            MARK_S3ARC,
            1000 * policy::ADAPTIVE_SWITCH_PERCENT / 100,
            1000,
            &p,
        );
        assert_eq!(rules.switches(), 2, "and back");
        assert_eq!(p.load(crate::mem::sync::Ordering::Relaxed), 710);
    }

    #[test]
    fn adaptive_rescales_the_waiting_experts_p_too() {
        let rules = AdaptiveRules::new(1000);
        rules.rescale_others(1000, 2000);
        assert_eq!(rules.other_p.load(Ordering::Relaxed), 200);
    }
}
