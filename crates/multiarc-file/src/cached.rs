//! `CachedFile`: `pread`/`pwrite` semantics over a backing store, through
//! the cache.
//!
//! Where each block's current bytes are, in the order a read looks:
//! 1. the file's dirty table (written, not yet written back);
//! 2. the cache (clean copies; `get_or_load` reads through from the store).
//!
//! The invariant that makes this correct: a clean copy in the cache can be
//! stale only while its block is dirty, and then the dirty table answers
//! first. Write-back keeps it: it writes the store, then, under the block's
//! dirty-shard lock, replaces the cached copy with the written bytes and
//! removes the dirty entry, so no reader sees neither. A load that read the
//! store before that write and finishes after it is superseded by the
//! replacing insert and does not land in the cache (see `Cache::insert`).
//!
//! Every buffer, dirty or cached, is a whole block, with zeros past the end
//! of the file (truncation zeroes or drops what lies beyond the new end), so
//! extending a file exposes zeros, never old bytes.
//!
//! One file, one state: a [`CachedFile`] is an open file *description*, and
//! every description of one backing file shares one `FileState` (blocks,
//! dirty table, length, lock). Stores that say what they are
//! ([`BackingStore::identity`], a regular file's device and inode) are
//! looked up in a process-wide registry at open, so a second open of a file
//! whose dirty blocks are still being retried joins them instead of racing
//! them: the newest write of a block always wins. Each description has its
//! own write-back error cursor (`errseq`).

use super::blocks::Blocks;
use super::dirty::{DirtyBlock, DirtyTable};
use super::error::{os_error_code, with_context};
use super::errseq::ErrSeq;
use super::range_lock::{FileRwSem, RangeGuard, RangeLock};
use super::store::BackingStore;
use super::writeback::{Flushable, Shared, WriteBack, WriteBackConfig};
use multiarc::{BlockKey, Cache};
use multiarc_lock::poison::LockUnpoisoned;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Default block size of a cached file.
pub const DEFAULT_BLOCK_SIZE: usize = 8 << 10;
/// Largest block size of a cached file.
pub const MAX_BLOCK_SIZE: usize = 1 << 20;
/// Smallest block size of a cached file.
pub const MIN_BLOCK_SIZE: usize = 512;

/// How reads and writes of one file exclude each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Locking {
    /// A read and an overlapping write are atomic with respect to each other
    /// (POSIX); non-overlapping reads and writes run in parallel. Uses a
    /// [`RangeLock`].
    #[default]
    Range,
    /// One reader-writer lock per file: reads shared, writes exclusive (what
    /// XFS does with `i_rwsem`). Same guarantee as `Range`, less parallelism.
    RwSem,
    /// No file lock: each block is read or written whole, but a read that
    /// overlaps a multi-block write may see some blocks old and some new
    /// (the proposed `POSIX_FADV_TORN_RW`).
    Torn,
}

impl Locking {
    /// The name used on command lines and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Locking::Range => "range",
            Locking::RwSem => "rwsem",
            Locking::Torn => "torn",
        }
    }
}

impl fmt::Display for Locking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Locking {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "range" => Ok(Locking::Range),
            "rwsem" => Ok(Locking::RwSem),
            "torn" => Ok(Locking::Torn),
            _ => Err(format!(
                "unknown locking mode {s:?} (expected range, rwsem or torn)"
            )),
        }
    }
}

enum FileLock {
    Range(RangeLock),
    RwSem(FileRwSem),
    Torn,
}

/// What a file operation holds while it runs.
#[allow(dead_code)] // held for its Drop
enum Held<'a> {
    Range(RangeGuard<'a>),
    Read(multiarc_lock::RwLockReadGuard<'a, ()>),
    Write(multiarc_lock::RwLockWriteGuard<'a, ()>),
    Nothing,
}

impl FileLock {
    fn read(&self, start: u64, end: u64) -> Held<'_> {
        match self {
            FileLock::Range(l) => Held::Range(l.read(start..end)),
            FileLock::RwSem(l) => Held::Read(l.read()),
            FileLock::Torn => Held::Nothing,
        }
    }

    fn write(&self, start: u64, end: u64) -> Held<'_> {
        match self {
            FileLock::Range(l) => Held::Range(l.write(start..end)),
            FileLock::RwSem(l) => Held::Write(l.write()),
            FileLock::Torn => Held::Nothing,
        }
    }
}

/// Object ids given to files that do not choose one: high enough not to
/// meet the small ids applications tend to use for their own objects.
static NEXT_OBJECT: AtomicU64 = AtomicU64::new(1 << 62);

fn new_object_id() -> u64 {
    NEXT_OBJECT.fetch_add(1, Ordering::Relaxed)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The state of one file, shared by its open descriptions and the flusher.
pub(crate) struct FileState {
    name: String,
    cache: Arc<Cache<BlockKey>>,
    store: Box<dyn BackingStore>,
    identity: Option<(u64, u64)>,
    block_size: usize,
    block_shift: u32,
    lock: FileLock,
    locking: Locking,
    /// The cache's key space for this file's blocks; changed by a truncation
    /// that would otherwise have to remove very many cached blocks.
    object: AtomicU64,
    /// The file's length (the store may be shorter until write-back).
    len: AtomicU64,
    /// The largest length the store has shown it takes: lowered when a
    /// write-back fails with `EFBIG`; writes past it fail at once.
    max_len: AtomicU64,
    dirty: DirtyTable,
    generation: AtomicU64,
    /// One write-back (or truncation) at a time per file.
    flush_lock: Mutex<()>,
    /// Write-back errors, reported once to each description.
    errors: ErrSeq,
    /// Open descriptions.
    descriptions: AtomicUsize,
    /// No name is left in the namespace: the last close drops dirty blocks.
    unlinked: AtomicBool,
    /// Whether the flusher knows the file (it forgets an unlinked file at
    /// its last close; a later description registers it again).
    /// Taken to register or forget it, with `descriptions` read under it.
    registered: Mutex<bool>,
    writeback: Arc<Shared>,
    /// The service behind `writeback`, for a later open of the same file.
    writeback_owner: Weak<WriteBack>,
}

/// Live file states by store identity (device, inode).
type Registry = HashMap<(u64, u64), Weak<FileState>>;
static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Default::default);

impl Drop for FileState {
    fn drop(&mut self) {
        if let Some(id) = self.identity {
            let mut reg = REGISTRY.lock_unpoisoned();
            if reg
                .get(&id)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), self as *const FileState))
            {
                reg.remove(&id);
            }
        }
    }
}

impl Flushable for FileState {
    fn write_back(&self) -> io::Result<()> {
        self.flush()
    }

    fn dirty_blocks(&self) -> usize {
        self.dirty.blocks()
    }

    fn is_closed(&self) -> bool {
        self.descriptions.load(Ordering::Acquire) == 0
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn last_error_text(&self) -> Option<String> {
        self.errors.latest_text()
    }
}

/// Truncations dropping more cached blocks than this change the file's
/// object id instead of removing them one by one; the orphans age out.
const MAX_TRUNCATE_REMOVES: u64 = 4096;
/// Most bytes written back in one store write (contiguous dirty blocks).
const MAX_WRITE_RUN: usize = 1 << 20;

impl FileState {
    fn key(&self, block: u64) -> BlockKey {
        BlockKey::new(self.object.load(Ordering::Acquire), block)
    }

    fn dirty_blocks(&self) -> usize {
        self.dirty.blocks()
    }

    /// Reads block `block` from the store: a whole block, zero-filled past
    /// the store's end. Short reads are retried for the rest.
    fn load(&self, block: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.block_size];
        let base = block << self.block_shift;
        let mut done = 0;
        while done < buf.len() {
            let n = self.store.read_at(&mut buf[done..], base + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(buf)
    }

    /// Runs `f` on `block`'s current bytes.
    fn with_block<R>(&self, block: u64, f: impl FnOnce(&[u8]) -> R) -> io::Result<R> {
        if self.dirty.maybe_dirty(block) {
            let shard = self.dirty.lock(block);
            if let Some(d) = shard.blocks.get(&block) {
                let data = Arc::clone(&d.data);
                drop(shard);
                return Ok(f(&data));
            }
        }
        let h = self
            .cache
            .get_or_load(self.key(block), || self.load(block))
            .map_err(|e| with_context(&e, &self.name))?;
        Ok(f(&h))
    }

    /// Writes `src` into `block` at `at`.
    /// `eof`: the file's length before this write (blocks past it are zeros).
    fn write_block(&self, block: u64, at: usize, src: &[u8], eof: u64) -> io::Result<()> {
        let whole = at == 0 && src.len() == self.block_size;
        loop {
            let mut shard = self.dirty.lock(block);
            let generation = self.generation.fetch_add(1, Ordering::Relaxed);
            if let Some(d) = shard.blocks.get_mut(&block) {
                Arc::make_mut(&mut d.data)[at..at + src.len()].copy_from_slice(src);
                d.generation = generation;
                return Ok(());
            }
            let data = if whole {
                src.to_vec()
            } else {
                // Read-modify-write of a clean block: its bytes are read
                // outside the lock (they may need I/O). If a block of the
                // shard was cleaned meanwhile, the bytes read may predate a
                // write that was dirty at our first look: start again.
                let cleanings = shard.cleanings;
                drop(shard);
                let beyond_eof = (block << self.block_shift) >= eof;
                let mut data = if beyond_eof {
                    vec![0u8; self.block_size]
                } else {
                    self.with_clean_block(block)?
                };
                data[at..at + src.len()].copy_from_slice(src);
                shard = self.dirty.lock(block);
                if shard.cleanings != cleanings {
                    continue;
                }
                if let Some(d) = shard.blocks.get_mut(&block) {
                    // Another writer dirtied it meanwhile: apply ours on top.
                    Arc::make_mut(&mut d.data)[at..at + src.len()].copy_from_slice(src);
                    d.generation = generation;
                    return Ok(());
                }
                data
            };
            // Counted before it can be cleaned (which subtracts it), so the
            // count never dips below zero.
            self.writeback.add_dirty(self.block_size as u64);
            shard.blocks.insert(
                block,
                DirtyBlock {
                    data: Arc::new(data),
                    generation,
                },
            );
            return Ok(());
        }
    }

    /// A copy of a block known not to be dirty (at the caller's last look).
    fn with_clean_block(&self, block: u64) -> io::Result<Vec<u8>> {
        let h = self
            .cache
            .get_or_load(self.key(block), || self.load(block))
            .map_err(|e| with_context(&e, &self.name))?;
        Ok(h.to_vec())
    }

    /// Writes every dirty block back to the store (not syncing it). Blocks
    /// whose write fails stay dirty (but see `EFBIG` in `write_run`); the
    /// first error is returned and recorded for the file's descriptions.
    pub(crate) fn flush(&self) -> io::Result<()> {
        let (r, newest) = self.flush_unrecorded();
        if let Err(e) = &r {
            self.errors.set(e, newest);
        }
        r
    }

    /// `flush` without recording the error; also returns the newest write
    /// generation among the blocks it tried.
    fn flush_unrecorded(&self) -> (io::Result<()>, u64) {
        let _one_at_a_time = self.flush_lock.lock_unpoisoned();
        let mut snapshot: Vec<(u64, u64, Arc<Vec<u8>>)> = Vec::new();
        self.dirty.each_shard(|s| {
            snapshot.extend(
                s.blocks
                    .iter()
                    .map(|(&b, d)| (b, d.generation, Arc::clone(&d.data))),
            )
        });
        let newest = snapshot.iter().map(|&(_, g, _)| g).max().unwrap_or(0);
        if snapshot.is_empty() {
            return (Ok(()), newest);
        }
        snapshot.sort_unstable_by_key(|&(b, _, _)| b);
        let len = self.len.load(Ordering::Acquire);
        let bs = self.block_size as u64;
        let mut first_err = Ok(());
        let mut run_start = 0;
        while run_start < snapshot.len() {
            // A run of consecutive blocks, written with one store write.
            let mut run_end = run_start + 1;
            while run_end < snapshot.len()
                && snapshot[run_end].0 == snapshot[run_end - 1].0 + 1
                && (run_end - run_start + 1) * self.block_size <= MAX_WRITE_RUN
            {
                run_end += 1;
            }
            let run = &snapshot[run_start..run_end];
            run_start = run_end;
            let offset = run[0].0 * bs;
            if offset >= len {
                // Wholly past the end: set_len drops such blocks under the
                // flush lock, so this cannot happen; be safe anyway.
                continue;
            }
            if let Err(e) = self.write_run(run, len) {
                if first_err.is_ok() {
                    first_err = Err(e);
                }
            }
        }
        (first_err, newest)
    }

    /// Writes a run of consecutive dirty blocks (clipped to the file length
    /// `len`) and marks them clean. If the one large write fails, the blocks
    /// are tried one by one, so one bad block keeps only itself dirty.
    fn write_run(&self, run: &[(u64, u64, Arc<Vec<u8>>)], len: u64) -> io::Result<()> {
        let bs = self.block_size as u64;
        let offset = run[0].0 * bs;
        if offset >= len {
            // Wholly past the end: set_len drops such blocks under the flush
            // lock, so this cannot happen; be safe anyway.
            return Ok(());
        }
        let valid = (len - offset).min(run.len() as u64 * bs) as usize;
        let result = if run.len() == 1 {
            self.store.write_at(&run[0].2[..valid], offset)
        } else {
            let mut buf = Vec::with_capacity(run.len() * self.block_size);
            for (_, _, data) in run {
                buf.extend_from_slice(data);
            }
            self.store.write_at(&buf[..valid], offset)
        };
        self.writeback.note_write(result.as_ref().map(|_| ()));
        match result {
            Ok(()) => {
                for (block, generation, _) in run {
                    self.mark_clean(*block, *generation);
                }
                self.writeback
                    .flushed_blocks
                    .fetch_add(run.len() as u64, Ordering::Relaxed);
                self.writeback
                    .flushed_bytes
                    .fetch_add(valid as u64, Ordering::Relaxed);
                Ok(())
            }
            Err(_) if run.len() > 1 => {
                let mut first = Ok(());
                for one in run.chunks(1) {
                    if let Err(e) = self.write_run(one, len) {
                        if first.is_ok() {
                            first = Err(e);
                        }
                    }
                }
                first
            }
            Err(e) => {
                self.writeback.write_errors.fetch_add(1, Ordering::Relaxed);
                if os_error_code(&e) == Some(libc::EFBIG) {
                    // The store takes no byte at or past `offset`: these
                    // blocks can never be written. Keeping them would pin the
                    // dirty budget for good; they are dropped, the error goes
                    // to every description, and later writes past the limit
                    // fail at once (as the kernel fails them).
                    self.discard_from(run[0].0, offset);
                }
                Err(with_context(
                    &e,
                    format_args!(
                        "{}: write-back of bytes {offset}..{} failed",
                        self.name,
                        offset + valid as u64
                    ),
                ))
            }
        }
    }

    /// Drops every dirty block from `block` on and lowers the file's
    /// largest length to `limit` (an `EFBIG` at byte `limit`).
    fn discard_from(&self, block: u64, limit: u64) {
        self.max_len.fetch_min(limit, Ordering::AcqRel);
        self.len.fetch_min(limit, Ordering::AcqRel);
        self.discard_where(|b| b >= block);
    }

    /// Drops the dirty blocks `gone` selects, giving back their budget.
    fn discard_where(&self, gone: impl Fn(u64) -> bool) {
        let mut dropped = 0u64;
        self.dirty.each_shard(|shard| {
            let before = shard.blocks.len();
            shard.blocks.retain(|&b, _| !gone(b));
            let n = before - shard.blocks.len();
            if n > 0 {
                shard.cleanings += 1;
                dropped += n as u64;
            }
        });
        if dropped > 0 {
            self.writeback
                .discarded_blocks
                .fetch_add(dropped, Ordering::Relaxed);
            self.writeback.sub_dirty(dropped * self.block_size as u64);
        }
    }

    /// After `block`'s bytes of `generation` reached the store: if no write
    /// came since, the block becomes clean, its bytes the cached copy.
    fn mark_clean(&self, block: u64, generation: u64) {
        let mut shard = self.dirty.lock(block);
        match shard.blocks.get(&block) {
            Some(d) if d.generation == generation => {}
            _ => return, // rewritten meanwhile: still dirty
        }
        let d = shard.blocks.remove(&block).expect("checked above");
        shard.cleanings += 1;
        let bytes = Arc::try_unwrap(d.data).unwrap_or_else(|shared| (*shared).clone());
        // Still under the shard lock: readers see the dirty bytes or these.
        drop(self.cache.insert(self.key(block), bytes));
        drop(shard);
        self.writeback.sub_dirty(self.block_size as u64);
    }
}

/// A file whose blocks are cached: positional reads and writes of any
/// offset and length, write-back, truncation and sync. Cheap to share
/// between threads (`&CachedFile` is enough for every operation).
///
/// ```
/// use multiarc_file::{CachedFile, MemStore};
/// use multiarc::{BlockKey, Cache};
/// use std::sync::Arc;
///
/// let cache = Arc::new(Cache::<BlockKey>::builder().max_bytes(16 << 20).build()?);
/// let file = CachedFile::builder(cache, MemStore::new()).open()?;
/// file.write_at(b"hello, world", 8190)?;
/// let mut buf = [0u8; 5];
/// assert_eq!(file.read_at(&mut buf, 8197)?, 5);
/// assert_eq!(&buf, b"world");
/// file.sync_all()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A `CachedFile` is one open file description. [`open_again`] (or opening
/// the same regular file again) gives another description of the same file:
/// they share its blocks, dirty data, length and lock, and each has its own
/// write-back error cursor, so each sees a write-back error once.
///
/// [`open_again`]: CachedFile::open_again
pub struct CachedFile {
    state: Arc<FileState>,
    writeback: Arc<WriteBack>,
    /// The write-back error sequence this description has seen (`errseq`).
    seen: Mutex<u64>,
}

impl fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedFile")
            .field("name", &self.state.name)
            .field("block_size", &self.state.block_size)
            .field("locking", &self.state.locking)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// Options for opening a [`CachedFile`].
pub struct CachedFileBuilder<S> {
    cache: Arc<Cache<BlockKey>>,
    store: S,
    block_size: usize,
    locking: Locking,
    writeback: Option<Arc<WriteBack>>,
    object: Option<u64>,
    name: Option<String>,
}

impl<S: BackingStore> CachedFileBuilder<S> {
    /// Block size: a power of two from 512 bytes to 1 MiB (default 8 KiB).
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    /// How reads and writes exclude each other (default [`Locking::Range`]).
    pub fn locking(mut self, locking: Locking) -> Self {
        self.locking = locking;
        self
    }

    /// Shares a write-back service (dirty budget and flusher) with other
    /// files. Default: a service of this file's own with default limits.
    pub fn write_back(mut self, writeback: Arc<WriteBack>) -> Self {
        self.writeback = Some(writeback);
        self
    }

    /// The object id of this file's blocks in the cache (default: a fresh
    /// one, so nothing cached under an earlier id is seen). Reopening a file
    /// with the id it had when closed ([`CachedFile::object_id`]) finds its
    /// blocks still cached, provided nothing changed the store meanwhile. Two
    /// open files must not share one.
    pub fn object_id(mut self, id: u64) -> Self {
        self.object = Some(id);
        self
    }

    /// A name for error messages (a path, say).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Opens the file: its length is the store's. If the store is a file
    /// already open in this process (same device and inode; or closed but
    /// with dirty blocks still being written back), this is a new
    /// description of that file: it shares its blocks, dirty data and write-back
    /// service, and must agree on the cache, block size and locking mode.
    pub fn open(self) -> io::Result<CachedFile> {
        let bs = self.block_size;
        if !bs.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&bs) {
            return Err(invalid(format!(
                "block size {bs} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes"
            )));
        }
        let identity = self.store.identity();
        // Held while this open decides, so two opens of one file cannot both
        // make a state.
        let mut registry = identity.map(|_| REGISTRY.lock_unpoisoned());
        if let (Some(id), Some(reg)) = (identity, registry.as_mut()) {
            // A state closed and clean (the flusher has not let go of it
            // yet) holds nothing newer than the store: start afresh.
            let live = reg
                .get(&id)
                .and_then(Weak::upgrade)
                .filter(|st| st.descriptions.load(Ordering::Acquire) > 0 || st.dirty.blocks() > 0);
            if let Some((state, writeback)) =
                live.and_then(|st| st.writeback_owner.upgrade().map(|wb| (st, wb)))
            {
                let mismatch = if !Arc::ptr_eq(&state.cache, &self.cache) {
                    Some(if state.descriptions.load(Ordering::Acquire) > 0 {
                        "through another cache".to_string()
                    } else {
                        format!(
                            "through another cache: closed, but {} dirty blocks are not written back yet ({})",
                            state.dirty.blocks(),
                            state.errors.latest_text().unwrap_or_else(|| "no error yet".into())
                        )
                    })
                } else if state.block_size != bs {
                    Some(format!("with block size {}", state.block_size))
                } else if state.locking != self.locking {
                    Some(format!("with locking {}", state.locking))
                } else {
                    None
                };
                if let Some(m) = mismatch {
                    return Err(invalid(format!(
                        "{}: the file is already open {m}; open it again the same way",
                        state.name
                    )));
                }
                return Ok(CachedFile::describe(state, writeback));
            }
        }
        let writeback = match self.writeback {
            Some(w) => w,
            None => WriteBack::new(WriteBackConfig::default())?,
        };
        let len = self.store.len()?;
        let object = self.object.unwrap_or_else(new_object_id);
        let state = Arc::new(FileState {
            name: self.name.unwrap_or_else(|| format!("file {object}")),
            cache: self.cache,
            store: Box::new(self.store),
            identity,
            block_size: bs,
            block_shift: bs.trailing_zeros(),
            lock: match self.locking {
                Locking::Range => FileLock::Range(RangeLock::default()),
                Locking::RwSem => FileLock::RwSem(FileRwSem::new(())),
                Locking::Torn => FileLock::Torn,
            },
            locking: self.locking,
            object: AtomicU64::new(object),
            len: AtomicU64::new(len),
            max_len: AtomicU64::new(u64::MAX),
            dirty: DirtyTable::new(64),
            generation: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            errors: ErrSeq::default(),
            descriptions: AtomicUsize::new(0),
            unlinked: AtomicBool::new(false),
            registered: Mutex::new(false),
            writeback: Arc::clone(writeback.shared()),
            writeback_owner: Arc::downgrade(&writeback),
        });
        if let (Some(id), Some(reg)) = (identity, registry.as_mut()) {
            reg.insert(id, Arc::downgrade(&state));
        }
        drop(registry);
        Ok(CachedFile::describe(state, writeback))
    }
}

impl CachedFile {
    /// A new description of `state`.
    fn describe(state: Arc<FileState>, writeback: Arc<WriteBack>) -> CachedFile {
        {
            let mut registered = state.registered.lock_unpoisoned();
            state.descriptions.fetch_add(1, Ordering::AcqRel);
            if !*registered {
                state
                    .writeback
                    .register(Arc::clone(&state) as Arc<dyn Flushable>);
                *registered = true;
            }
        }
        let seen = state.errors.sample();
        CachedFile {
            state,
            writeback,
            seen: Mutex::new(seen),
        }
    }

    /// Another open description of this file, as a second `open(2)` of it
    /// gives: same blocks, dirty data, length and lock; its own write-back
    /// error cursor (an error no description has seen yet is seen by it too).
    pub fn open_again(&self) -> CachedFile {
        CachedFile::describe(Arc::clone(&self.state), Arc::clone(&self.writeback))
    }

    /// Says whether the file still has a name. When the last description of
    /// a file marked unlinked closes (or is dropped), its dirty blocks are
    /// dropped, since no one can read them any more, and its store is let
    /// go (for a [`FileStore`](super::FileStore), the descriptor is closed, so
    /// the filesystem frees the space). A file given a name again (a link
    /// made to it while open) is written back as usual.
    pub fn set_unlinked(&self, unlinked: bool) {
        self.state.unlinked.store(unlinked, Ordering::Release);
    }

    /// Forgets the file's cached blocks and re-reads its length from the
    /// store, for a store changed behind the cache's back (close-to-open
    /// consistency). Does nothing and returns `false` if the file has dirty
    /// blocks (they are newer than anything the store holds); `true` if it
    /// forgot.
    pub fn invalidate_clean(&self) -> io::Result<bool> {
        let s = &*self.state;
        let _held = s.lock.write(0, u64::MAX);
        let _no_flush = s.flush_lock.lock_unpoisoned();
        if s.dirty.blocks() > 0 {
            return Ok(false);
        }
        let len = s
            .store
            .len()
            .map_err(|e| with_context(&e, format_args!("{}: reading its length", s.name)))?;
        // Every cached block becomes unreachable under the new key, and
        // ages out.
        s.object.store(new_object_id(), Ordering::Release);
        s.len.store(len, Ordering::Release);
        Ok(true)
    }

    /// Options for opening `store` through `cache`.
    pub fn builder<S: BackingStore>(cache: Arc<Cache<BlockKey>>, store: S) -> CachedFileBuilder<S> {
        CachedFileBuilder {
            cache,
            store,
            block_size: DEFAULT_BLOCK_SIZE,
            locking: Locking::default(),
            writeback: None,
            object: None,
            name: None,
        }
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.state.len.load(Ordering::Acquire)
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object id under which this file's blocks are cached now. It
    /// changes when a large truncation re-keys the file; to find the cached
    /// blocks again after closing and reopening the file, reopen it with
    /// this id ([`CachedFileBuilder::object_id`]).
    pub fn object_id(&self) -> u64 {
        self.state.object.load(Ordering::Acquire)
    }

    /// The block size.
    pub fn block_size(&self) -> usize {
        self.state.block_size
    }

    /// The locking mode.
    pub fn locking(&self) -> Locking {
        self.state.locking
    }

    /// Dirty bytes of this file (written, not yet written back).
    pub fn dirty_bytes(&self) -> u64 {
        self.state.dirty_blocks() as u64 * self.state.block_size as u64
    }

    /// The write-back service this file uses.
    pub fn write_back(&self) -> &Arc<WriteBack> {
        &self.writeback
    }

    /// Reads into `buf` from `offset`; returns the bytes read, fewer than
    /// `buf.len()` only at the end of the file (0 at or past it), as `pread`.
    /// A store error is returned and nothing half-read is cached.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let end = offset.saturating_add(buf.len() as u64);
        let _held = self.state.lock.read(offset, end);
        let len = self.len();
        if offset >= len {
            return Ok(0);
        }
        let n = (len - offset).min(buf.len() as u64) as usize;
        let s = &*self.state;
        // Always some: `offset + n <= len`.
        let Some(pieces) = Blocks::new(offset, n, s.block_shift) else {
            return Ok(0);
        };
        for p in pieces {
            s.with_block(p.block, |b| {
                buf[p.buf_range()].copy_from_slice(&b[p.block_range()])
            })?;
        }
        Ok(n)
    }

    /// Writes all of `buf` at `offset`, extending the file if needed, and
    /// returns `buf.len()`. The data is dirty until written back (by the
    /// flusher or `sync_all`). Waits while the write-back budget is full,
    /// but not while write-back is failing: then the write fails with the
    /// store's error (`ENOSPC`, `EIO`, ...). A write past the largest size the
    /// store has refused (`EFBIG`) fails at once with `EFBIG`.
    /// If reading a partially written block fails, the bytes before it
    /// are written and their count returned (an error if there are none).
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let s = &*self.state;
        let pieces = Blocks::new(offset, buf.len(), s.block_shift).ok_or_else(|| {
            invalid(format!(
                "{}: write of {} bytes at offset {offset} passes the largest file size",
                s.name,
                buf.len()
            ))
        })?;
        let end = offset + buf.len() as u64;
        if end > s.max_len.load(Ordering::Acquire) {
            return Err(with_context(
                &io::Error::from_raw_os_error(libc::EFBIG),
                format_args!(
                    "{}: write up to byte {end}: the store takes no byte past {}",
                    s.name,
                    s.max_len.load(Ordering::Acquire)
                ),
            ));
        }
        let blocks = pieces.block_count();
        s.writeback
            .wait_for_room(blocks.saturating_mul(s.block_size as u64))
            .map_err(|e| {
                with_context(
                    &e,
                    format_args!(
                        "{}: write of {} bytes at offset {offset}: the dirty budget is full and write-back is failing",
                        s.name,
                        buf.len()
                    ),
                )
            })?;
        let _held = s.lock.write(offset, end);
        // The length grows before the blocks are written: write-back clips
        // what it writes to the length, and must not clip bytes of ours.
        let old_len = s.len.fetch_max(end, Ordering::AcqRel);
        let mut done = 0;
        let mut failed = None;
        for p in pieces {
            if let Err(e) = s.write_block(p.block, p.at, &buf[p.buf_range()], old_len) {
                failed = Some(e);
                break;
            }
            done += p.len;
        }
        if let Some(e) = failed {
            // Give back the length we took but did not write, unless another
            // writer has since moved it.
            let written_end = (offset + done as u64).max(old_len);
            if end > old_len {
                let _ =
                    s.len
                        .compare_exchange(end, written_end, Ordering::AcqRel, Ordering::Relaxed);
            }
            if done == 0 {
                return Err(e);
            }
        }
        Ok(done)
    }

    /// Truncates or extends the file to `len` bytes. Blocks past the new end
    /// leave the cache and the dirty table; the store is resized at once.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        let s = &*self.state;
        let _held = s.lock.write(0, u64::MAX);
        let _no_flush = s.flush_lock.lock_unpoisoned();
        let old = self.len();
        s.store
            .set_len(len)
            .map_err(|e| with_context(&e, format_args!("{}: resizing to {len} bytes", s.name)))?;
        if len < old {
            let bs = s.block_size as u64;
            let first_gone = len.div_ceil(bs); // first block wholly past the end
            let partial = (!len.is_multiple_of(bs)).then_some(len / bs);
            let mut dropped = 0u64;
            s.dirty.each_shard(|shard| {
                let before = shard.blocks.len();
                shard.blocks.retain(|&b, _| b < first_gone);
                let gone = before - shard.blocks.len();
                if gone > 0 {
                    shard.cleanings += 1;
                    dropped += gone as u64;
                }
                if let Some(p) = partial {
                    if let Some(d) = shard.blocks.get_mut(&p) {
                        Arc::make_mut(&mut d.data)[(len % bs) as usize..].fill(0);
                    }
                }
            });
            if dropped > 0 {
                s.writeback.sub_dirty(dropped * bs);
            }
            // Cached copies from the (partial) last block on hold bytes past
            // the new end.
            let first_stale = len / bs;
            let last = old.div_ceil(bs);
            if last - first_stale <= MAX_TRUNCATE_REMOVES {
                for b in first_stale..last {
                    s.cache.remove(&s.key(b));
                }
            } else {
                // Re-key the file: every cached block becomes unreachable
                // (and ages out); dirty blocks are keyed by number, unaffected.
                s.object.store(new_object_id(), Ordering::Release);
            }
        }
        s.len.store(len, Ordering::Release);
        Ok(())
    }

    /// Writes every dirty block back and syncs the store. Returns an error
    /// if any write-back or the sync failed, including a background
    /// write-back that failed since this description last looked (reported
    /// once to each description, as the kernel reports it to the next
    /// `fsync` of each open file, even if a retry has since succeeded).
    /// Blocks that could not be written stay dirty.
    pub fn sync_all(&self) -> io::Result<()> {
        let s = &*self.state;
        let done = s.flush().and_then(|()| {
            s.store.sync().map_err(|e| {
                let e = with_context(&e, format_args!("{}: sync", s.name));
                s.errors.set(&e, s.generation.load(Ordering::Relaxed));
                e
            })
        });
        let unseen = {
            let mut seen = self.seen.lock_unpoisoned();
            s.errors.check_and_advance(&mut seen)
        };
        match (done, unseen) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(with_context(&e, "an earlier write-back failed")),
            (Ok(()), None) => Ok(()),
        }
    }

    /// Syncs, then closes this description, returning any error (see
    /// [`sync_all`]). Dropping a description instead does not sync; the
    /// last description of a file to go writes it back, and a failure is
    /// kept for the flusher to retry and reported to later descriptions.
    ///
    /// [`sync_all`]: CachedFile::sync_all
    pub fn close(self) -> io::Result<()> {
        self.sync_all()
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let s = &self.state;
        if s.descriptions.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let unlinked = s.unlinked.load(Ordering::Acquire);
        if !unlinked {
            if let Err(e) = s.flush() {
                log::warn!(
                    "{}: write-back at close failed, {} dirty blocks kept for retry: {e}",
                    s.name,
                    s.dirty.blocks()
                );
                return;
            }
        }
        // Closed: the flusher lets go of the file now rather than at its
        // next pass, so the store (a descriptor) closes with this drop.
        // Unlinked, nobody can read its dirty blocks again: they are dropped,
        // not written. Clean, there is nothing to write. (Unless a
        // description was opened meanwhile: then it stays.)
        let _no_flush = s.flush_lock.lock_unpoisoned();
        let mut registered = s.registered.lock_unpoisoned();
        if s.descriptions.load(Ordering::Acquire) != 0 {
            return;
        }
        if unlinked {
            s.discard_where(|_| true);
        }
        if *registered && s.dirty.blocks() == 0 {
            let me: Arc<dyn Flushable> = Arc::clone(s) as Arc<dyn Flushable>;
            s.writeback.deregister(&me);
            *registered = false;
        }
    }
}

/// The write-back of one file: runs of dirty blocks, a run that fails, the
/// generation check that keeps a newer write dirty, and what a close that
/// cannot write back leaves.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fault, FaultPlan, FaultStore, MemStore};
    use std::time::Duration;

    const BS: usize = 4096;

    /// A 4 KiB-block file on a fault-injecting memory store, with its own
    /// write-back service whose flusher never runs on its own during a test.
    fn faulty_file(name: &str) -> (CachedFile, Arc<FaultPlan>, Arc<FaultStore<MemStore>>) {
        let cache = Arc::new(Cache::builder().max_bytes(1 << 20).build().unwrap());
        let plan = FaultPlan::new();
        let store = Arc::new(FaultStore::new(MemStore::new(), Arc::clone(&plan)));
        let writeback = WriteBack::new(WriteBackConfig {
            dirty_max: 1 << 20,
            flush_threshold: 1 << 20,
            interval: Duration::from_secs(3600),
        })
        .unwrap();
        let file = CachedFile::builder(cache, Arc::clone(&store))
            .block_size(BS)
            .write_back(writeback)
            .name(name)
            .open()
            .unwrap();
        (file, plan, store)
    }

    fn is_dirty(s: &FileState, block: u64) -> bool {
        s.dirty.lock(block).blocks.contains_key(&block)
    }

    fn generation_of(s: &FileState, block: u64) -> u64 {
        s.dirty.lock(block).blocks[&block].generation
    }

    /// Three consecutive dirty blocks go out as one store write; when that
    /// fails they are tried one by one, so only the block the store refuses
    /// stays dirty, and the error names its bytes.
    #[test]
    fn a_failed_run_is_retried_block_by_block() {
        let (file, plan, store) = faulty_file("run");
        let data: Vec<u8> = (0..3 * BS).map(|i| (i % 251) as u8).collect();
        file.write_at(&data, 0).unwrap();
        plan.add(BS as u64..2 * BS as u64, Fault::WriteError);
        let s = &*file.state;
        let e = s.flush().unwrap_err();
        assert_eq!(os_error_code(&e), Some(libc::EIO));
        assert!(e.to_string().contains("bytes 4096..8192"), "{e}");
        // The run, then blocks 0 (written), 1 (refused) and 2 (written).
        assert_eq!(plan.fired(), 2);
        assert_eq!([0, 1, 2].map(|b| is_dirty(s, b)), [false, true, false]);
        let stats = file.write_back().stats();
        assert_eq!(
            (stats.flushed_blocks, stats.write_errors, stats.dirty_bytes),
            (2, 1, BS as u64)
        );
        let stored = store.inner().to_vec();
        assert_eq!(stored[..BS], data[..BS]);
        assert_eq!(stored[2 * BS..], data[2 * BS..]);
        assert!(
            stored[BS..2 * BS].iter().all(|&b| b == 0),
            "refused bytes written"
        );
        // Once the store takes it, the block goes out and nothing is dirty.
        plan.clear();
        s.flush().unwrap();
        assert_eq!(store.inner().to_vec(), data);
        assert_eq!(file.write_back().stats().dirty_bytes, 0);
    }

    /// A block written back is marked clean only if no write came since its
    /// bytes were taken: an older generation leaves the newer data dirty.
    /// Marked clean, it leaves the dirty table for the cache, with the
    /// written bytes, and gives back its budget.
    #[test]
    fn mark_clean_cleans_only_the_generation_written() {
        let (file, _plan, _store) = faulty_file("generations");
        let s = &*file.state;
        file.write_at(&[b'a'; BS], 0).unwrap();
        let first = generation_of(s, 0);
        file.write_at(b"b", 0).unwrap();
        let second = generation_of(s, 0);
        assert!(second > first);
        let cleanings = s.dirty.lock(0).cleanings;
        s.mark_clean(0, first);
        assert!(is_dirty(s, 0), "a newer write was marked clean");
        assert_eq!(s.dirty.lock(0).cleanings, cleanings);
        assert!(s.cache.get(&s.key(0)).is_none());
        assert_eq!(file.write_back().stats().dirty_bytes, BS as u64);
        s.mark_clean(0, second);
        assert!(!is_dirty(s, 0));
        assert_eq!(s.dirty.lock(0).cleanings, cleanings + 1);
        let cached = s
            .cache
            .get(&s.key(0))
            .expect("the written bytes are cached");
        assert_eq!(cached[0], b'b');
        assert!(cached[1..].iter().all(|&b| b == b'a'));
        assert_eq!(file.write_back().stats().dirty_bytes, 0);
    }

    /// Write-back writes whole blocks but never past the file's length: the
    /// store ends where the file does.
    #[test]
    fn write_back_stops_at_the_file_length() {
        let (file, _plan, store) = faulty_file("clipped");
        let len = BS + 904;
        file.write_at(&vec![7u8; len], 0).unwrap();
        file.state.flush().unwrap();
        assert_eq!(store.len().unwrap(), len as u64);
        let stats = file.write_back().stats();
        assert_eq!((stats.flushed_blocks, stats.flushed_bytes), (2, len as u64));
    }

    /// When the last description goes and its write-back fails, the blocks
    /// stay dirty for the flusher and a warning names the file; nothing is
    /// printed.
    #[test]
    fn a_failed_write_back_at_the_last_close_is_logged_and_kept() {
        crate::test_log::capture();
        let (file, plan, store) = faulty_file("last-close-test");
        let writeback = Arc::clone(file.write_back());
        file.write_at(&[1u8; BS], 0).unwrap();
        plan.add(0..u64::MAX, Fault::WriteErrno(libc::ENOSPC));
        drop(file);
        let logged = crate::test_log::records_with("last-close-test");
        assert_eq!(logged.len(), 1, "{logged:?}");
        let (level, text) = &logged[0];
        assert_eq!(*level, log::Level::Warn);
        assert!(
            text.contains("write-back at close failed, 1 dirty blocks kept for retry"),
            "{text}"
        );
        assert_eq!(writeback.stats().dirty_bytes, BS as u64);
        plan.clear();
        writeback.flush_all().unwrap();
        assert_eq!(writeback.stats().dirty_bytes, 0);
        assert_eq!(store.inner().to_vec(), vec![1u8; BS]);
    }
}
