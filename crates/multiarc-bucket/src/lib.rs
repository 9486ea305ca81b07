//! A bucket as a filesystem: the logic behind `multiarc mount
//! s3://bucket[/prefix] MNT`, without FUSE.
//!
//! [`BucketFs`] answers the operations a FUSE adapter forwards (lookup,
//! getattr, readdir, open, read, create, write, flush, release, unlink,
//! mkdir, rmdir) over any [`object_store::ObjectStore`], read through a
//! [`multiarc_object_store::CachedStore`] (aligned blocks in a multiarc
//! cache, single-flight, coalesced ranged GETs, metadata TTL, optional L2).
//! Each operation blocks on the filesystem's own tokio runtime: call them
//! from plain threads (FUSE's), never from inside a runtime.
//!
//! # Namespace
//!
//! Directories are key prefixes: `a/b/c` is the file `c` in the directory
//! `b` in `a`. A directory is listed with one `/`-delimited listing; a name
//! is looked up with a HEAD of its key and a one-entry listing under
//! `name/`, at once. Where both an object `a` and keys under `a/` exist, the
//! directory wins and the object is hidden. Keys that cannot be names (empty
//! parts, `.` or `..`) are not shown. A file's size and mtime are its
//! object's; directories have the mount's start time. Names, kinds and
//! attributes are trusted for the metadata TTL ([`BucketConfig::metadata_ttl`]),
//! which is also how long the kernel may cache them.
//!
//! # Consistency
//!
//! - **Close-to-open.** Opening a file takes the object's current version
//!   (its ETag), as the cached store knows it: checked with a HEAD once the
//!   metadata TTL has passed since the last check. Every read through that
//!   handle serves that version: blocks are cached per version, a read
//!   whose blocks of it memory holds is served from them (whatever the
//!   store holds now), and any other read is conditional on its ETag. No
//!   read mixes two versions. Once the cached store learns of a newer
//!   version (a HEAD after the TTL, or a block fetch that finds the ETag
//!   changed), reads through handles opened on the old one that need the
//!   store fail with `ESTALE`: reopen the file. With a TTL of zero, every
//!   read checks the version with a HEAD (memory hits too).
//!   An open that finds a size or mtime other than what the kernel was
//!   told has the kernel drop its cached attributes
//!   ([`BucketFs::on_stale_attr`]), so `fstat` on the new handle shows the
//!   new version's size at once, not after the TTL.
//! - **The kernel's page cache** ([`BucketFs::open_file`]). A version never
//!   changes, so the pages reads put in the kernel's page cache are kept
//!   across opens of the same version ([`Opened::keep_cache`], FUSE's
//!   `FOPEN_KEEP_CACHE`). An open that finds another version has them
//!   dropped before it returns, unless handles of the older version still
//!   read through them: then it reads with direct I/O, those handles keep
//!   their version's pages, and the kernel is told their version's size
//!   (it cuts reads through its pages at the size it holds). So a handle's
//!   reads are of its version whether the kernel's pages serve them or not.
//!   Files open for writing use direct I/O: no written byte enters the page
//!   cache. A write through this mount sets the kernel's size of the file
//!   itself (0 at a truncating open, then the bytes written), so a
//!   replacement waits until no handle of this mount reads the file
//!   through the pages (new readers meanwhile get direct I/O), for at most
//!   [`BucketConfig::overwrite_wait`], then fails with `EBUSY`.
//!   The kernel serves re-reads from those pages without asking the mount,
//!   so an open that keeps them counts one more use of each block they
//!   were given since the last such open: what the kernel keeps serving
//!   is not taken for data read once, and survives a scan in the mount's
//!   cache for when the kernel drops its pages (`bucket_reopen_uses`).
//! - **Another node's write** is seen at this node's next open once the
//!   TTL has passed since this node last checked the object (at most TTL
//!   plus a HEAD's round trip after the write completed). A file written
//!   through this mount is seen by its next open here at once.
//! - **Listings** are at most a TTL old: an open of a directory within the
//!   TTL of its last listing reads that listing (a query engine globbing
//!   a table's directory for each query sends one LIST per TTL, not one
//!   per query), unless a name in it was written, deleted or removed
//!   through this mount since. Names made here and not uploaded yet are
//!   always listed.
//!
//! # Sequential reads
//!
//! Once a handle's reads follow one another, and one of them has found a
//! block memory did not hold (reads of cached bytes fetch nothing past
//! them, as Linux reads ahead on a page-cache miss), the window past them
//! is fetched in the background as several ranged GETs at once
//! ([`BucketConfig::prefetch_chunk`] each), topped up as the reads
//! advance: 2 MiB at first, doubled at each top-up up to
//! [`BucketConfig::prefetch_bytes`] (as Linux's readahead ramps up); a read that reaches a
//! chunk in flight waits only for its own blocks of it (the cached store
//! caches each block of a GET as its bytes stream in). A read elsewhere
//! stops it. Prefetched blocks are cached as read ahead
//! ([`multiarc_object_store::CachedStore::load_ahead`]): the read that
//! consumes one is its first use, so a file read once from end to end
//! leaves memory first, before the blocks prefetched and not read yet and
//! before what is read again. A block used by two handles (two queries of
//! one file) is read again, and goes to the cache's frequency list, also
//! when it was read ahead. For that, a handle's several reads of one block
//! count one use: each handle keeps the rest of the block its last read
//! ended in ([`multiarc_object_store::open_object::LastBlock`]; a read that goes to the
//! store fetches to the end of its last block), and a read that starts
//! there is served from it without a second lookup; the kernel's reads of
//! one handle that arrive at once or out of order, within
//! [`BucketConfig::same_use_window`] of the one that counted the block's
//! use, look it up without counting an access
//! ([`multiarc_object_store::open_object::OpenObject`]).
//!
//! A handle keeps up to eight runs at once (threads reading one descriptor,
//! each through its own part of the file, are each a run).
//!
//! # Random reads
//!
//! A random read that misses memory fetches its own bytes (to the end of
//! its block), one round trip each. When an object's random misses, across
//! all its handles, have landed in a quarter of its regions (64 equal
//! parts of at least 1 MiB; a miss counts once nothing continued it, so a
//! column chunk read as a run never does), its reads are dense: the blocks
//! the cache does not hold are fetched at once in the background
//! ([`BucketConfig::dense_parallel`] GETs of
//! [`BucketConfig::prefetch_chunk`]), cached as read ahead, and the reads
//! that follow are served from memory. Only objects up to
//! [`BucketConfig::dense_object_max`] are: a sparse reader of a large
//! object never gets it whole.
//!
//! # Writes
//!
//! As mountpoint-s3 does them:
//! - A new file is written sequentially; a write anywhere but at the end
//!   of what was written is `EINVAL`. Writes are buffered up to
//!   [`BucketConfig::part_size`], then streamed as a multipart upload (at
//!   most [`BucketConfig::parts_in_flight`] parts at once).
//! - The object appears in the store whole when the file is closed (FUSE
//!   flush) by the process that opened it, fsynced, or released: one PUT,
//!   or the multipart upload's completion. (A close by another process, a
//!   child that inherited the descriptor across `fork`, does not end the
//!   file.) Before that, other nodes see nothing (or the old object);
//!   this mount shows the file with its size so far and refuses to open it
//!   again (`EBUSY`). A failed upload is aborted (its parts deleted) and
//!   the close gets `EIO`; writes after the upload are `EPERM`. A daemon
//!   killed mid-upload leaves the old object or nothing (the store holds
//!   an incomplete multipart upload until a lifecycle rule removes it).
//! - Opening an existing object for writing is `EPERM` unless
//!   [`BucketConfig::allow_overwrite`], and then only to replace it whole
//!   (`O_TRUNC`). Unlink is `EPERM` unless [`BucketConfig::allow_delete`].
//!   With [`BucketConfig::read_only`], every change is `EROFS`. Changing
//!   mode or owner, rename, links and truncating to another size are `EPERM`
//!   (or not offered); times are accepted and ignored.
//! - `mkdir` makes a directory that exists in this mount only, until a file
//!   is written under it.
//!
//! # Errors
//!
//! A store error is `EIO` to the caller (`ENOENT` for a missing object,
//! `EACCES` for refused credentials, `ESTALE` for a changed object), with
//! the cause in the log. While the store fails, what the cache holds is
//! still served: reads through open handles fall back to their version's
//! cached blocks (also once the metadata TTL has passed), and an open falls
//! back to the version this mount last opened (`bucket_stale_opens`,
//! `bucket_cached_reads_while_failing` in the statistics).

#![warn(missing_docs)]

mod dense;
mod error;
mod fs;
mod inodes;
mod prefetch;
mod s3;
mod served;
mod upload;

pub use error::Errno;
pub use fs::{Attr, BucketFs, DirEntry, Opened};
pub use inodes::{FIRST_INO, ROOT_INO};
pub use s3::{check_bucket, s3_store, S3Options, S3Source};

use std::time::Duration;

/// A file or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An object.
    File,
    /// A key prefix.
    Directory,
}

/// The settings of a [`BucketFs`].
#[derive(Clone, Debug)]
pub struct BucketConfig {
    /// How long names, attributes and an object's version are trusted
    /// before the store is asked again (the cached store's metadata TTL
    /// should be the same). Default 1 s.
    pub metadata_ttl: Duration,
    /// Refuse every change (`EROFS`).
    pub read_only: bool,
    /// Let an existing object be replaced (opened with `O_TRUNC` and written
    /// anew); `EPERM` otherwise.
    pub allow_overwrite: bool,
    /// Let unlink delete objects; `EPERM` otherwise.
    pub allow_delete: bool,
    /// Bytes buffered before an upload turns multipart, and the size of
    /// each part. Default 8 MiB (S3 wants at least 5 MiB).
    pub part_size: usize,
    /// Parts of one file uploaded at once, at most. Default 4.
    pub parts_in_flight: usize,
    /// Bytes prefetched past a handle's reads once they are sequential, in
    /// the background (see the crate docs); 0 disables it. Default 32 MiB.
    /// The cached store's own readahead (which makes a read wait for its
    /// window) is best disabled beside it.
    pub prefetch_bytes: u64,
    /// The size of each ranged GET of a prefetch (the window's chunks are
    /// fetched at once). Default 8 MiB (s3fs fetches ~10 MB parts).
    pub prefetch_chunk: u64,
    /// The largest object fetched whole once its random reads are dense
    /// (see "Random reads" in the crate docs); `None`: half the memory
    /// cache's size, then. A mount with a second tier may allow more.
    pub dense_object_max: Option<u64>,
    /// GETs of [`BucketConfig::prefetch_chunk`] at once while a densely
    /// read object is fetched whole; 0 never fetches one. Default 8.
    pub dense_parallel: usize,
    /// A handle's reads of one block within this long of the read that
    /// counted a use of it are part of that use: they count no access in
    /// the cache (see [`multiarc_object_store::open_object::OpenObject`]). So the
    /// kernel's reads that go through a block in pieces, at once and out
    /// of order, do not make data read once look read again. Default 62 ms
    /// (OpenZFS's `ARC_MINTIME`).
    pub same_use_window: Duration,
    /// How long a write that replaces a file (or creates one of its name)
    /// waits for the handles of this mount that read it through the
    /// kernel's page cache to be closed, before it fails with `EBUSY`
    /// (see [`BucketFs::open_file`]). Default 5 s.
    pub overwrite_wait: Duration,
    /// The runtime's worker threads. Default 2.
    pub runtime_threads: usize,
    /// Owner of every file and directory.
    pub uid: u32,
    /// Group of every file and directory.
    pub gid: u32,
    /// Permission bits of files. Default 0o644.
    pub file_mode: u16,
    /// Permission bits of directories. Default 0o755.
    pub dir_mode: u16,
}

impl Default for BucketConfig {
    fn default() -> BucketConfig {
        BucketConfig {
            metadata_ttl: Duration::from_secs(1),
            read_only: false,
            allow_overwrite: false,
            allow_delete: false,
            part_size: 8 << 20,
            parts_in_flight: 4,
            prefetch_bytes: 32 << 20,
            prefetch_chunk: 8 << 20,
            dense_object_max: None,
            dense_parallel: 8,
            same_use_window: multiarc_object_store::open_object::SAME_USE_WINDOW,
            overwrite_wait: Duration::from_secs(5),
            runtime_threads: 2,
            uid: 0,
            gid: 0,
            file_mode: 0o644,
            dir_mode: 0o755,
        }
    }
}
