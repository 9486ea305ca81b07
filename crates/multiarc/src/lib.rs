//! multiarc: an embeddable, highly concurrent, scan-resistant block cache.
//!
//! The cache keeps variable-size buffers (blocks of files) under the ARC
//! replacement policy (Megiddo & Modha, FAST '03), with the concurrency
//! design OpenZFS adopted in "5497 lock contention on arcs_mtx": each ARC
//! state's list is a multilist of independently locked sublists, a
//! dedicated thread evicts in batches, and the hash table and statistics
//! are striped. An optional second tier on a local device (OpenZFS's
//! L2ARC) keeps what memory evicts and survives restarts.
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
//!
//! The crate is four rooms, each importing only from those before it:
//! `mem` (concurrent structures, no policy), `arc` (the ARC; its module
//! comment holds the locking model), `l2` (the second tier, seen by the
//! ARC only through `arc::SecondTier`), and `api` (the facade and builder).

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod api;
mod arc;
mod l2;
mod mem;
pub mod metrics;
pub mod units;

/// The cache's locks and lock statistics: the [`multiarc_lock`] crate.
pub use multiarc_lock as lock;

pub use api::{
    default_sublists, slab_bytes, Builder, Cache, ConfigError, Handle, OwnedHandle, MAX_BYTES,
};
pub use arc::{BlockKey, HitMode, Key, PersistentKey, Policy, Stats};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The design document's examples (the second tier's), compiled as doctests.
#[doc = include_str!("../../../docs/design.md")]
#[cfg(doctest)]
pub struct DesignDoctests;
