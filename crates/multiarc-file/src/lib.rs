//! multiarc-file: files read and written through the [`multiarc`] block
//! cache.
//!
//! A storage engine reads and writes files, not cache entries. This crate
//! gives it [`CachedFile`]: `pread`/`pwrite` of any offset and length over a
//! [`BackingStore`] (a regular file, optionally with `O_DIRECT` so the
//! kernel's page cache is not a second cache; or memory), block by block
//! through a [`multiarc::Cache`], with dirty blocks written back by a
//! flusher ([`WriteBack`]) and on [`CachedFile::sync_all`]. It uses only the
//! cache's public API.
//!
//! Pieces, one per module:
//! - `store`: the [`BackingStore`] trait, [`FileStore`], [`MemStore`];
//! - `fault` (feature `test-support`): `FaultStore`, a store that fails,
//!   shortens or delays I/O as its `FaultPlan` says, for tests;
//! - `range_lock`: [`RangeLock`], the byte-range lock behind
//!   [`Locking::Range`], and why it has no tree;
//! - `errseq`: write-back errors, reported once to each open description;
//! - `dirty`: the per-file table of dirty blocks, outside the cache's
//!   eviction domain;
//! - `writeback`: the dirty budget and the flusher thread;
//! - `blocks`: splitting a read or write into per-block pieces;
//! - `cached`: [`CachedFile`] itself, and the invariant that keeps cached
//!   copies, dirty blocks and the store consistent.
//!
//! # Logging
//!
//! The crate prints nothing. What it cannot return to a caller (a write-back
//! that failed when the last description of a file was dropped, dirty blocks
//! left unwritten when a [`WriteBack`] stops) goes to the [`log`] facade at
//! the `warn` and `error` levels; install a logger to see it.
//!
//! # Features
//!
//! * `test-support`: `FaultStore`, `FaultPlan` and `Fault`, test doubles for
//!   the file layer's error paths.

mod blocks;
mod cached;
mod dirty;
mod error;
mod errseq;
#[cfg(feature = "test-support")]
mod fault;
mod range_lock;
mod store;
#[cfg(test)]
mod test_log;
mod writeback;

pub use cached::{
    CachedFile, CachedFileBuilder, Locking, DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE,
};
pub use error::os_error_code;
#[cfg(feature = "test-support")]
pub use fault::{Fault, FaultPlan, FaultStore};
pub use range_lock::{FileRwSem, RangeGuard, RangeLock};
pub use store::{BackingStore, FileStore, MemStore};
pub use writeback::{WriteBack, WriteBackConfig, WriteBackStats};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
