//! The replacement policy as a type: [`Replacement`], implemented by ARC's
//! rules ([`ArcRules`]) and S3ARC's ([`S3arcRules`]). The cache picks one
//! when it is built ([`rules`], from [`Policy`]), as it picks its hit mode;
//! the eviction walk and the insert ask it for each decision where the
//! policies differ, and never test which one is on.
//!
//! Each rule is a pure function of sizes and counts (`policy` holds the
//! arithmetic); nothing here touches a lock or an atomic.

use super::config::Policy;
use super::policy::{self, GhostHit, Sizes};

/// How the lazy hit mode's evictor reads a buffer's hit count at a list
/// tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TailRule {
    /// CAR's clock: any hit is a reference bit that earns one more lap.
    Clock,
    /// S3ARC: in MRU, two hits promote to MFU and fewer evict; in MFU, the
    /// count is a frequency that earns a lap per hit, up to a bound.
    Frequency,
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

/// The rules of `policy`.
pub(crate) fn rules(policy: Policy) -> &'static dyn Replacement {
    match policy {
        Policy::Arc => &ArcRules,
        Policy::S3arc => &S3arcRules,
    }
}
