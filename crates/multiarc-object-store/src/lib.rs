//! multiarc in front of an object store.
//!
//! [`CachedStore`] wraps any [`object_store::ObjectStore`] (S3, GCS, Azure,
//! an S3-compatible server such as Garage, ...) and is one itself, so a
//! query engine (the `parquet` crate's async reader, DataFusion, ...) uses
//! it unchanged. Reads are served from aligned blocks kept in a multiarc
//! cache: in memory under exact ARC (eager hits, see
//! [`Builder::configure_cache`]; a full scan does not wipe the hot set) and,
//! optionally, in a second tier on a local file or device that survives
//! restarts. Writes, deletes, copies, renames and lists pass through.
//!
//! ```
//! use multiarc_object_store::CachedStore;
//! use object_store::{path::Path, ObjectStore, ObjectStoreExt, PutPayload};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # futures::executor::block_on(async {
//! // Any store: here an in-memory one; in production e.g.
//! // `object_store::aws::AmazonS3Builder::from_env().with_bucket_name(..).build()?`.
//! let bucket = object_store::memory::InMemory::new();
//! let store = CachedStore::builder(bucket)
//!     .max_bytes(256 << 20) // memory for blocks
//!     // .l2("/var/cache/objects.l2", 64 << 30) // a local second tier
//!     .metadata_ttl(Duration::from_secs(10))
//!     .build()?;
//! let path = Path::from("tables/t/part-0.parquet");
//! store.put(&path, PutPayload::from(vec![7u8; 1 << 20])).await?;
//! let store: Arc<dyn ObjectStore> = Arc::new(store);
//! let bytes = store.get_range(&path, 1000..5000).await?; // blocks fetched and cached
//! assert_eq!(bytes.len(), 4000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Reads
//!
//! `get_opts` (with or without a range, and `head`), `get_range`,
//! `get_ranges` and `head` are served from blocks of
//! [`Builder::block_size`] bytes, aligned on multiples of it. A read
//! first takes the object's metadata (ETag, version, size) from the
//! metadata cache, or fetches it with one HEAD shared by the reads that
//! need it meanwhile. Then each block the read covers is looked up in
//! memory, then in the second tier; the missing ones are fetched, adjacent
//! ones together in one ranged GET of at most [`Builder::max_fetch_bytes`],
//! whose body is cut into blocks as it streams in: each block is cached
//! (and its readers woken) as soon as its bytes are in, not when the whole
//! GET has arrived. A body that fails or ends short fails every block not
//! yet complete; the blocks completed before are whole. Concurrent reads of one block, from any task, make one request: the
//! cache's single-flight load ([`multiarc::Cache::get_or_load_async`]),
//! which also reads second-tier copies on the cache's own I/O threads, so
//! no runtime thread blocks on the device. The crate needs no particular
//! async runtime.
//!
//! A read's bytes are gathered (as slices of the cached blocks) before it
//! returns; a whole-object `get` of a very large object holds all of it.
//! Reads that ask for a specific version (`GetOptions::version`), and
//! objects that have neither an ETag nor a version, are passed through
//! uncached. `head` and the HEAD behind the metadata give the object's
//! attributes as the store answered them.
//!
//! # Consistency
//!
//! - **No read mixes versions.** A block is cached under the identity of
//!   the version it belongs to (see *Keys* below), so a block of one
//!   version is never found for another. Every block fetch is conditional
//!   on the version's ETag (`If-Match`, and the version id where the store
//!   has versions), and the response's ETag, version, object size and
//!   length are checked too, because some servers ignore `If-Match`. When
//!   a fetch shows that the object changed, the read drops the metadata
//!   and starts again on the new version (at most three times in a row;
//!   then it fails with `Precondition`). So a read returns all of one
//!   version, or an error: never a mix, never short bytes. An object that
//!   shrank under a read gives an error or the new version, whole.
//! - **How stale.** A read serves the version its metadata names, and
//!   metadata is trusted for the TTL ([`Builder::metadata_ttl`], default
//!   10 s, timed from when its HEAD was sent). So a reader on another node
//!   sees a new version at the latest one TTL after the write completed
//!   (plus a HEAD's round trip), and sooner if its read needs a block it
//!   has not cached (that fetch finds the change). Until then it serves
//!   the old version, whole, from its cache. `Duration::ZERO` checks the
//!   metadata on every read; [`Builder::metadata_forever`] never does, for
//!   immutable data sets.
//! - **Shown with real processes** (`tests/several_nodes.rs`): three reader
//!   processes, each with its own memory-only cached store (TTL 1 s) on
//!   another node of a three-node Garage 2.5.0 cluster on loopback, read
//!   four objects while a writer process rewrites them (six rounds; the
//!   versions are of one size, and every 8 bytes name the object, the
//!   version and the offset). No read (whole, ranged across blocks, or two
//!   ranges at once) mixed versions or came back short; every read that
//!   started more than the TTL after an object's last rewrite returned
//!   gave the new version. Observed staleness (from an object's last
//!   rewrite returning to the end of the last read that still gave an
//!   older version): at most 424 to 826 ms per run over four runs; in
//!   the first, by reader: 598 ms for the reader whose memory holds every
//!   object (only its metadata's expiry shows it the change), 25 and 28
//!   ms for the two whose memory holds a third (a refused block fetch
//!   shows it). With the `If-Match` and ETag checks removed, the test
//!   fails on a mixed read.
//! - **Writes through the store** (`put`, multipart `complete`, `delete`,
//!   `copy`, `rename`) drop the object's metadata and the blocks of the
//!   version it named, and a HEAD that was in flight during a write is not
//!   cached: a read that starts after the write returned sees the new
//!   version. A read concurrent with the write sees either version, whole.
//!   After writing an object some other way, call [`CachedStore::invalidate`]
//!   (or wait for the TTL).
//! - Preconditions of a read (`if_match`, `if_none_match`, dates) are
//!   evaluated against the cached metadata. Each object is consistent on
//!   its own; nothing is promised across objects.
//! - What this assumes of the store: a new ETag (or version) for every
//!   new content at a location, and GET responses whose ETag describes
//!   their body. S3, GCS and Azure do, and so does Garage 2.5.0, which
//!   also refuses a GET whose `If-Match` names an older ETag
//!   (`tests/against_garage.rs`). s3s-fs 0.14.1 does not: it reads a
//!   GET's body and its ETag separately, and a GET racing a PUT can pair
//!   one version's bytes with another's ETag (seen in 5 of 23 racing GETs
//!   here); against it, versions of equal size can then mix (a different
//!   size is caught by the size check).
//!
//! # Keys, and the second tier across restarts
//!
//! A block's key, [`ObjectBlockKey`], is 40 bytes: the SHA-256 digest of the
//! object version's identity (the namespace, the location, the ETag, the
//! version, the size, the last-modified time and the block size, each
//! length-prefixed) and the block's index. The second tier stores the key
//! with each block, checksums the record, and returns a block only for
//! exactly its key. After a restart, a block can therefore be served for
//! another (object, version) only if the two identities have the same
//! SHA-256 digest: for `n` distinct versions ever cached the chance of any
//! such collision is below n²/2²⁵⁷ (under 2⁻¹⁷⁶ for n = 2⁴⁰). An object
//! rewritten while the node was down has a new ETag, so a new identity:
//! its old blocks are never found again (they age out), and the new
//! version is fetched. The namespace ([`Builder::namespace`], by default
//! the inner store's `Display`, e.g. `AmazonS3(bucket)`) keeps one L2 file
//! reused in front of another store from serving the first store's blocks;
//! set it to the endpoint and bucket when buckets of the same name on
//! different endpoints could share an L2 file.
//!
//! # Block size
//!
//! The default, 256 KiB ([`DEFAULT_BLOCK_SIZE`]), was chosen by replaying
//! the requests the `parquet` crate's reader makes for four queries
//! through cached stores of block sizes from 64 KiB to 4 MiB, over a store
//! emulating 20 ms to the first byte (`cargo test -p multiarc-object-store
//! --test against_s3 -- --ignored --nocapture measure_block_sizes`): larger
//! blocks fetch more bytes than the reader asked for without saving
//! requests, smaller ones save few bytes and cost requests. (Measured
//! without readahead: the reader's requests are mostly not sequential.)
//! The figures are in `docs/history/object-store-defaults.md`.
//!
//! # Readahead
//!
//! A read that continues a sequential stream through an object (it starts
//! in the block where an earlier read of the same version ended, or in the
//! next one) and misses fetches, in the same ranged GET as its own missing
//! blocks, a window of blocks past its end; the window starts at twice the
//! read and doubles at each such miss, up to [`Builder::readahead`]
//! (default [`DEFAULT_READAHEAD`]; 0 disables it), as Linux's readahead
//! grows per open file. Any other read starts a new stream with no window,
//! so random reads fetch nothing beyond the blocks they cover. Streams are
//! kept per object version in a table of 64 (the least recently read one
//! is replaced), so several readers of one object each keep theirs.
//! Read-ahead blocks are cached within `max_bytes`, marked as read ahead
//! ([`multiarc::Cache::load_ahead_async`], OpenZFS's prefetch flag): the
//! one read that later consumes such a block is its first use, not its
//! second, so data read once sequentially does not fill the cache's
//! frequency list and push out blocks read ahead but not read yet (or
//! what is read again). [`CachedStore::load_ahead`] does the same for a
//! caller's own prefetch (the bucket mount's). They go through the same
//! single-flight load and the same version checks, never
//! pass the object's end, and stop before the first block that memory or
//! the second tier holds or that another reader is loading
//! ([`multiarc::Cache::is_loading`]): that one is not fetched twice. The
//! readahead is synchronous (it rides on a read's own miss; no background
//! task, so no runtime is needed): a stream still waits one round trip per
//! window, a window that doubles.
//!
//! The default, 8 MiB, was chosen by a sequential read of a 64 MiB object
//! in 128 KiB reads over a store emulating 20 ms per request, with windows
//! from 0 to 16 MiB (`cargo test --release -p multiarc-object-store --test
//! readahead -- --ignored --nocapture measure_readahead`): 8 MiB came
//! within a few percent of 16 MiB's throughput, many times the rate
//! without readahead, and bounds what a stream that stops early fetched
//! for nothing. The figures are in `docs/history/benchmarks-record-2026-11.md`.
//!
//! # Statistics and errors
//!
//! [`CachedStore::stats`] counts requests and bytes sent to the store,
//! block hits per tier, coalesced fetches, reads that waited for another's
//! fetch (single flight), metadata hits and version changes;
//! [`CachedStore::cache`] gives the block cache's own statistics. The
//! store's errors pass through with their kind (`NotFound`,
//! `Precondition`, `NotModified`, `PermissionDenied`, ...), also to every
//! reader that shared a failed fetch.

#![warn(missing_docs)]

// Each module imports only those above it in this list.
mod config;
mod error;
mod key;
mod metadata;
#[cfg(feature = "object-store-013")]
pub mod object_store_013;
pub mod open_object;
mod read;
mod readahead;
mod state;
mod stats;
mod store;
mod used_blocks;

pub use config::{
    BuildError, Builder, DEFAULT_BLOCK_SIZE, DEFAULT_MAX_FETCH, DEFAULT_MAX_METADATA_ENTRIES,
    DEFAULT_METADATA_TTL, DEFAULT_READAHEAD,
};
pub use key::ObjectBlockKey;
pub use stats::CachedStoreStats;
pub use store::CachedStore;
