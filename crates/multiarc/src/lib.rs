//! multiarc: an embeddable, highly concurrent, scan-resistant block cache.
//!
//! The cache keeps variable-size buffers (blocks of files) under the ARC
//! replacement policy (Megiddo & Modha, FAST '03), with the concurrency
//! design OpenZFS adopted in "5497 lock contention on arcs_mtx": each ARC
//! state's list is a multilist of independently locked sublists, held
//! buffers are off the lists, a dedicated thread evicts in batches, and the
//! hash table and statistics are striped. See the README for the design and
//! the module comments for the reasons behind each piece.
//!
//! ```
//! use multiarc::{BlockKey, Cache};
//!
//! let cache = Cache::<BlockKey>::builder().max_bytes(64 << 20).build()?;
//! let block = cache.get_or_load(BlockKey::new(1, 42), || -> std::io::Result<Vec<u8>> {
//!     Ok(vec![0u8; 8192]) // read the block from storage here
//! }).map_err(|e| std::io::Error::new(e.kind(), e.to_string()))?;
//! assert_eq!(block.len(), 8192);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

// Module layers, each importing only from those above it:
// leaves (config, key, sync, counter, stats, policy, lock), then entry,
// hash, multilist, pending, signal; then shared (the core state); protocol
// (the hit modes); evict (walk and thread); insert; load; cache (facade).
mod cache;
mod config;
mod counter;
mod entry;
mod evict;
mod feed;
mod hash;
mod insert;
mod key;
mod l2;
mod load;
mod multilist;
mod pending;
mod policy;
mod protocol;
mod reclaim;
mod shared;
mod signal;
mod stats;
mod sync;

/// The cache's locks and lock statistics: the [`multiarc_lock`] crate.
pub use multiarc_lock as lock;

pub use cache::{Cache, Handle};
pub use config::{default_sublists, Builder, ConfigError, HitMode, MAX_BYTES};
pub use key::{BlockKey, Key, PersistentKey};
pub use stats::Stats;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
