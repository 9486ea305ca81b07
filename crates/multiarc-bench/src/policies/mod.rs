//! The policy registry: every policy `replay` and `scan` run, by name, and
//! the one interface they are driven through.
//!
//! - The simulator's page-based policies: `arc`, `car`, `lru` (from
//!   `multiarc_sim::reference`), `s3arc` (`multiarc_sim::s3arc`),
//!   `adaptive` and `adaptive-mini` (`multiarc_sim::adaptive`), `car-eager-t1`, `car-lru-t2`
//!   and `car-eager-t1-lru-t2` (`CarPolicy::with_parts`), `car-t2-aged-125`, `-250`,
//!   `-500` and `car-t2-aged-125-gated` (`CarPolicy::with_t2_aged`), the `arc-gen-*`
//!   variants (`multiarc_sim::generations::NAMES`), `car-t2-laps-2`
//!   and `car-t2-laps-4` (`CarPolicy::with_t2_hit_laps`),
//!   `s3fifo` (`multiarc_sim::s3fifo`), `lirs` (`multiarc_sim::lirs`) and
//!   Belady's `opt`, which needs each
//!   request's next use (`multiarc_sim::opt::NextUses`).
//! - The concurrent caches, built by [`peers::build`]: multiarc's rows
//!   (`multiarc`, `multiarc-eager`, `multiarc-lazy`, `multiarc-1list`, and
//!   `multiarc-s3arc`: the cache with `Policy::S3arc`, whose reference
//!   model is the page-based `s3arc`; `multiarc-adaptive`: the cache with
//!   `Policy::Adaptive`, whose model is `adaptive`; `multiarc-gen`: the
//!   cache with `Policy::Generations`, whose model is
//!   `arc-gen-16-firsts-k64`) and
//!   the peers (moka, quick_cache, foyer, tinyufo, concread-arc,
//!   mutex-lru), each holding 1-byte values with a capacity counted in
//!   blocks.
//! - The multiarc policies with a second tier ([`tiered`]), for `replay --l2`.

mod tiered;

pub use tiered::{check_room, TierOptions, TieredCache, MAX_TIER_BLOCKS};

use crate::peers::{self, BenchCache};
use anyhow::bail;
use multiarc_sim::adaptive::AdaptivePolicy;
use multiarc_sim::generations::{self, GenerationArcPolicy};
use multiarc_sim::lirs::LirsPolicy;
use multiarc_sim::opt::{NextUses, OptPolicy, NEVER};
use multiarc_sim::reference::{ArcPolicy, CarPolicy, LruPolicy, PagePolicy};
use multiarc_sim::s3arc::S3ArcPolicy;
use multiarc_sim::s3fifo::S3FifoPolicy;

/// `replay`'s policies when `--policy` is not given: multiarc (its
/// default, and with the S3ARC policy), the simulator's ARC, LRU and OPT,
/// and the peers this binary has.
pub fn replay_defaults() -> Vec<String> {
    with_built_peers(&["multiarc", "multiarc-s3arc", "arc", "lru", "opt"])
}

/// `scan`'s policies when `--policy` is not given: multiarc's two hit
/// modes and its S3ARC policy, the simulator's ARC and LRU, and the peers
/// this binary has.
pub fn scan_defaults() -> Vec<String> {
    with_built_peers(&["multiarc", "multiarc-eager", "multiarc-s3arc", "arc", "lru"])
}

/// `first`, then every peer this binary was built with.
fn with_built_peers(first: &[&str]) -> Vec<String> {
    first
        .iter()
        .chain(peers::BUILT_PEERS)
        .map(|s| s.to_string())
        .collect()
}

/// Fails, naming it, on the first of `names` this binary cannot build (an
/// unknown name, or a peer of a build without the `peers` feature): before
/// any long run starts.
pub fn check_names(names: &[String]) -> anyhow::Result<()> {
    for name in names {
        build(name, 1)?;
    }
    Ok(())
}

/// The multiarc policies, which can have a second tier: the multilist
/// rows ([`peers::is_multilist_row`]).
pub fn can_have_tier(name: &str) -> bool {
    peers::is_multilist_row(name)
}

/// One policy being driven.
pub enum Policy {
    /// A simulator's page-based policy.
    Page(Box<dyn PagePolicy>),
    /// A concurrent cache.
    Cache(Box<dyn BenchCache>),
    /// Belady's OPT.
    Opt(OptPolicy),
    /// multiarc with a second tier (its device file goes with it).
    Tiered(TieredCache),
}

/// What a policy's second tier did (all 0 without one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierCounts {
    /// Hits served by the second tier.
    pub hits: u64,
    /// Bytes written to its device.
    pub write_bytes: u64,
    /// Copies its hand kept and wrote again.
    pub kept: u64,
    /// Bytes memory evicted that the tier could have held and had no copy
    /// of (its feed had not reached them: `Stats::evict_l2_eligible`).
    pub evicted_uncopied: u64,
}

impl Policy {
    /// Requests block `id`, request number `index` of the trace: true on a
    /// hit. `next` is the trace's next uses, which `opt` needs (without
    /// them it takes every block as never used again).
    pub fn access(&mut self, index: u64, id: u64, next: Option<&NextUses>) -> bool {
        match self {
            Policy::Page(p) => p.access(id),
            Policy::Cache(c) => {
                let hit = c.with_value(id, &mut |_| {});
                if !hit {
                    c.insert(id, &[0]);
                }
                hit
            }
            Policy::Opt(o) => o.access(id, next.map_or(NEVER, |n| n.get(index))),
            Policy::Tiered(tiered) => {
                let hit = tiered.cache.get(&id).is_some();
                if !hit {
                    drop(tiered.cache.insert_slice(id, &[0]));
                }
                hit
            }
        }
    }

    /// A hint that block `id` will be requested soon (see
    /// [`multiarc::Cache::prefetch`]; the multiarc rows only).
    #[inline]
    pub fn prefetch(&self, id: u64) {
        match self {
            Policy::Cache(c) => c.prefetch(id),
            Policy::Tiered(tiered) => tiered.cache.prefetch(&id),
            Policy::Page(_) | Policy::Opt(_) => {}
        }
    }

    /// What its second tier did.
    pub fn tier_counts(&self) -> TierCounts {
        match self {
            Policy::Tiered(tiered) => {
                let s = tiered.cache.stats();
                TierCounts {
                    hits: s.l2_hits,
                    write_bytes: s.l2_write_bytes,
                    kept: s.l2_kept,
                    evicted_uncopied: s.evict_l2_eligible,
                }
            }
            _ => TierCounts::default(),
        }
    }
}

/// The largest capacity a policy is built with: 2^48 blocks (past it
/// multiarc's byte arithmetic would overflow). Replay builds its policies
/// with at most [`built_capacity`] and `scan` checks its capacity against
/// the machine's memory first, so this only stops a caller that did neither.
pub const MAX_POLICY_BLOCKS: u64 = 1 << 48;

/// Bytes of memory a policy is assumed to need per block of capacity
/// (entry, list links, hash slot, and as many ghost entries again): an
/// estimate on the high side, for the memory checks.
pub const POLICY_BYTES_PER_BLOCK: u64 = 256;

/// Peers whose capacity is split between shards, so that one shard can fill
/// while the whole could hold every block.
const SHARDED: &[&str] = &["quick_cache", "foyer"];

/// More shards than a sharded peer has (quick_cache: 4 per CPU; foyer: 8).
const MAX_SHARDS: u64 = 1 << 16;

/// The capacity policy `name` is built with when `blocks` is asked for on
/// a trace of `distinct` blocks. A policy that can hold every block of the
/// trace never evicts, so any larger capacity gives the same hits (tested:
/// every request after a block's first is a hit); building it larger would
/// only cost memory, or abort in caches that allocate by capacity (tinyufo,
/// mutex-lru). A sharded peer holds everything once each shard can.
pub fn built_capacity(name: &str, blocks: u64, distinct: u64) -> u64 {
    let holds_all = if SHARDED.contains(&name) {
        distinct.saturating_mul(MAX_SHARDS)
    } else {
        distinct
    };
    blocks.min(holds_all.max(1))
}

/// Builds policy `name` with a capacity of `blocks` blocks.
pub fn build(name: &str, blocks: u64) -> anyhow::Result<Policy> {
    if blocks == 0 || blocks > MAX_POLICY_BLOCKS {
        bail!("{name}: a capacity of {blocks} blocks is outside 1 to 2^48 blocks");
    }
    Ok(match name {
        "arc" => Policy::Page(Box::new(ArcPolicy::new(blocks as usize))),
        "car" => Policy::Page(Box::new(CarPolicy::new(blocks as usize))),
        "lru" => Policy::Page(Box::new(LruPolicy::new(blocks as usize))),
        "s3arc" => Policy::Page(Box::new(S3ArcPolicy::new(blocks as usize))),
        "adaptive" => Policy::Page(Box::new(AdaptivePolicy::new(blocks as usize))),
        "adaptive-mini" => Policy::Page(Box::new(AdaptivePolicy::with_mini_simulations(
            blocks as usize,
        ))),
        "car-eager-t1" => Policy::Page(Box::new(CarPolicy::with_parts(
            blocks as usize,
            true,
            false,
        ))),
        "car-lru-t2" => Policy::Page(Box::new(CarPolicy::with_parts(
            blocks as usize,
            false,
            true,
        ))),
        "car-t2-laps-2" => Policy::Page(Box::new(CarPolicy::with_t2_hit_laps(blocks as usize, 2))),
        "car-t2-laps-4" => Policy::Page(Box::new(CarPolicy::with_t2_hit_laps(blocks as usize, 4))),
        "car-eager-t1-lru-t2" => {
            Policy::Page(Box::new(CarPolicy::with_parts(blocks as usize, true, true)))
        }
        "car-t2-aged-125" | "car-t2-aged-250" | "car-t2-aged-500" | "car-t2-aged-125-gated" => {
            let (permille, gated) = match name {
                "car-t2-aged-125" => (125, false),
                "car-t2-aged-250" => (250, false),
                "car-t2-aged-500" => (500, false),
                _ => (125, true),
            };
            Policy::Page(Box::new(CarPolicy::with_t2_aged(
                blocks as usize,
                permille,
                gated,
            )))
        }
        name if generations::NAMES.contains(&name) => Policy::Page(Box::new(
            GenerationArcPolicy::named(name, blocks as usize).expect("a name it offers"),
        )),
        "s3fifo" => Policy::Page(Box::new(S3FifoPolicy::new(blocks as usize))),
        "lirs" => Policy::Page(Box::new(LirsPolicy::new(blocks as usize))),
        "opt" => Policy::Opt(OptPolicy::new(blocks as usize)),
        // Every other row is a concurrent cache holding 1-byte values with a
        // capacity of `blocks` bytes: capacity counted in blocks.
        other if peers::MULTIARC_NAMES.contains(&other) || peers::PEER_NAMES.contains(&other) => {
            Policy::Cache(peers::build(other, blocks, 1)?)
        }
        other => bail!(
            "unknown policy {other:?} (known: {}, {}, {}, {})",
            PAGE_NAMES.join(", "),
            generations::NAMES.join(", "),
            peers::MULTIARC_NAMES.join(", "),
            peers::PEER_NAMES.join(", ")
        ),
    })
}

/// The simulator's page-based policies, by name, but for the generations
/// model's variants (`multiarc_sim::generations::NAMES`).
pub const PAGE_NAMES: &[&str] = &[
    "arc",
    "car",
    "car-eager-t1",
    "car-lru-t2",
    "car-eager-t1-lru-t2",
    "car-t2-laps-2",
    "car-t2-laps-4",
    "car-t2-aged-125",
    "car-t2-aged-250",
    "car-t2-aged-500",
    "car-t2-aged-125-gated",
    "lru",
    "s3arc",
    "adaptive",
    "adaptive-mini",
    "s3fifo",
    "lirs",
    "opt",
];

/// Like [`build`], for `replay`: a multiarc row evicts inline (no evict
/// thread whose timing would change the hits) and draws its random choices
/// from `seed` (`Builder::seed`), so that the same trace gives the same
/// hits in every run, whatever other rows run beside it. Peers are built
/// by [`peers::build_replayed_peer`] (fixed hashers, settled housekeeping
/// where the peer allows it); the simulator's rows as by [`build`].
pub fn build_replayed(name: &str, blocks: u64, seed: u64) -> anyhow::Result<Policy> {
    let multiarc = peers::MULTIARC_NAMES.contains(&name);
    if !multiarc && !peers::PEER_NAMES.contains(&name) {
        return build(name, blocks);
    }
    if blocks == 0 || blocks > MAX_POLICY_BLOCKS {
        bail!("{name}: a capacity of {blocks} blocks is outside 1 to 2^48 blocks");
    }
    Ok(Policy::Cache(if multiarc {
        peers::build_replayed(name, blocks, seed)?
    } else {
        peers::build_replayed_peer(name, blocks)?
    }))
}

/// Builds `name` (a multiarc policy, see [`can_have_tier`]) with `blocks`
/// of memory and a second tier of `tier_blocks`, its random choices drawn
/// from `seed`.
pub fn build_tiered(
    name: &str,
    blocks: u64,
    tier_blocks: u64,
    options: &TierOptions,
    seed: u64,
) -> anyhow::Result<Policy> {
    if !can_have_tier(name) {
        bail!("{name} has no second tier (the multiarc policies have)");
    }
    Ok(Policy::Tiered(tiered::build(
        name,
        blocks,
        tier_blocks,
        options,
        seed,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn policies_built_with_the_clamped_capacity_never_evict() {
        // Replay builds a policy with built_capacity(), at most the trace's
        // distinct blocks (times the shards, for sharded peers). That
        // changes no hit only if, at that capacity, nothing is evicted:
        // every request after a block's first must hit.
        let trace: Vec<u64> = (0..3000u64)
            .map(|i| (i * 7919) % 97 + (i % 13) * 100)
            .collect();
        let distinct = trace.iter().collect::<HashSet<_>>().len() as u64;
        let next = NextUses::from(multiarc_sim::opt::next_uses(&trace));
        for name in [
            "multiarc",
            "multiarc-eager",
            "multiarc-s3arc",
            "multiarc-adaptive",
            "multiarc-gen",
            "arc",
            "car",
            "lru",
            "s3arc",
            "adaptive",
            "adaptive-mini",
            "car-eager-t1",
            "car-lru-t2",
            "car-eager-t1-lru-t2",
            "s3fifo",
            "lirs",
            "opt",
        ]
        .iter()
        .chain(peers::BUILT_PEERS)
        {
            let built = built_capacity(name, u64::MAX, distinct);
            assert!(built >= distinct, "{name}");
            // As replay builds it: a multiarc row with inline eviction
            // (an evict thread's timing under load once evicted a block
            // here, a miss that replay itself would never see).
            let mut p = build_replayed(name, built, 0).unwrap();
            let hits = trace
                .iter()
                .enumerate()
                .filter(|&(i, &id)| p.access(i as u64, id, Some(&next)))
                .count() as u64;
            assert_eq!(
                hits,
                trace.len() as u64 - distinct,
                "{name} at {built} blocks"
            );
            // A capacity below the distinct blocks is built as asked.
            assert_eq!(built_capacity(name, 7, distinct), 7);
        }
        assert!(build("lru", MAX_POLICY_BLOCKS + 1).is_err());
        assert!(build("lru", 0).is_err());
    }

    #[test]
    fn the_default_lists_are_names_this_binary_builds() {
        for list in [replay_defaults(), scan_defaults()] {
            check_names(&list).unwrap();
            for peer in peers::BUILT_PEERS {
                assert!(list.iter().any(|p| p == peer), "{peer}");
            }
        }
        let e = check_names(&["lru".to_string(), "magic".to_string()]).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        if !cfg!(feature = "peers") {
            let e = check_names(&["moka".to_string()]).unwrap_err();
            assert!(e.to_string().contains("`peers` feature"), "{e}");
        }
    }

    #[test]
    fn only_the_multiarc_policies_have_a_second_tier() {
        for name in [
            "multiarc",
            "multiarc-eager",
            "multiarc-lazy",
            "multiarc-s3arc",
            "multiarc-adaptive",
            "multiarc-gen",
        ] {
            assert!(can_have_tier(name), "{name}");
        }
        for name in ["multiarc-1list", "arc", "opt", "moka"] {
            assert!(!can_have_tier(name), "{name}");
        }
        let options = TierOptions {
            dir: std::env::temp_dir(),
            mfu_only: false,
            keep_ratio: None,
            readback_as_new: false,
        };
        assert!(build_tiered("lru", 10, 10, &options, 0).is_err());
    }
}
