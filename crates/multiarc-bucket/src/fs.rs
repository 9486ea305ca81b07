//! [`BucketFs`]: the filesystem operations over a cached store, each a
//! blocking call (run on the filesystem's own tokio runtime).

use crate::dense::Density;
use crate::error::{store_errno, Errno};
use crate::inodes::{Inodes, Node, Remote, Told};
use crate::prefetch::{chunks, Streams};
use crate::served::ServedBlocks;
use crate::upload::Upload;
use crate::{BucketConfig, Kind};
use bytes::Bytes;
use multiarc::metrics::Metric;
use multiarc_lock::poison::{unpoisoned, LockUnpoisoned};
use multiarc_object_store::open_object::{LastBlock, OpenObject};
use multiarc_object_store::CachedStore;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// A file's or directory's attributes, as the kernel is told them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// The inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// The object's size (of a file being written: bytes written so far).
    pub size: u64,
    /// The object's last-modified time (the mount's start for directories).
    pub mtime: SystemTime,
    /// Permission bits (`BucketConfig::file_mode` or `dir_mode`).
    pub perm: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// An open file, as [`BucketFs::open_file`] returns it: the handle and how
/// the kernel is to serve it (FUSE's open flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The handle.
    pub fh: u64,
    /// Keep what the kernel's page cache holds of the file
    /// (`FOPEN_KEEP_CACHE`); otherwise the kernel drops it before the open
    /// returns.
    pub keep_cache: bool,
    /// Bypass the page cache (`FOPEN_DIRECT_IO`): every read reaches the
    /// handle.
    pub direct_io: bool,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The inode number (`.` and `..` included).
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// The name.
    pub name: String,
}

/// Reads of at least this many bytes keep the rest of the block they end
/// in even when they start a run (see `BucketFs::read`).
const KEEP_FROM_READ_SIZE: u32 = 32 << 10;

/// How a handle is being read: its sequential run (for prefetch), the
/// rest of the block its last read ended in, and, for a handle that reads
/// through the kernel's page cache, the blocks its reads gave the kernel
/// (see [`crate::served`]).
#[derive(Default)]
struct Reading {
    streams: Streams,
    last: LastBlock,
    served: ServedBlocks,
}

/// An open file or directory.
enum Handle {
    /// A file open for reading: the version it opened (its metadata as
    /// the store gave it), which its reads serve (from the blocks of it
    /// that memory holds, or through the store: failing with `ESTALE`
    /// once the store has another), and how it is being read (for
    /// prefetch).
    Read {
        meta: ObjectMeta,
        /// `meta`'s version, held open: reads from memory, and the blocks
        /// this handle's reads used lately (the kernel's reads that go
        /// through one block, two or more 128 KiB reads of a 256 KiB block
        /// at once and out of order, count one use of it).
        open: Box<OpenObject>,
        reading: Box<Mutex<Reading>>,
        /// The random misses of the version, shared by its handles.
        density: Arc<Mutex<Density>>,
        /// The inode, if this handle reads through the kernel's page cache
        /// (counted in its `page_readers` until released).
        page_cached: Option<u64>,
    },
    /// A file open for writing, and the process that opened it (whose
    /// close uploads it).
    Write {
        upload: Arc<tokio::sync::Mutex<Upload>>,
        owner: u32,
    },
    Dir(Arc<Vec<DirEntry>>),
}

/// The filesystem's own counters (beside the cached store's).
#[derive(Default)]
struct Counters {
    listings: AtomicU64,
    listings_reused: AtomicU64,
    lookups_remote: AtomicU64,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
    upload_errors: AtomicU64,
    store_errors: AtomicU64,
    deletes: AtomicU64,
    stale_opens: AtomicU64,
    cached_reads_while_failing: AtomicU64,
    attr_invalidations: AtomicU64,
    page_invalidations: AtomicU64,
    reopen_uses: AtomicU64,
    prefetch_requests: AtomicU64,
    prefetch_bytes: AtomicU64,
    dense_objects: AtomicU64,
}

/// What tells the kernel to forget a file's cached attributes.
type AttrInvalidator = Box<dyn Fn(u64) + Send + Sync>;

/// A bucket (or a prefix of one) as a filesystem. See the crate docs for
/// its semantics. Every method blocks on the filesystem's own runtime: call
/// them from plain threads (FUSE's), never from inside an async runtime.
pub struct BucketFs<S: ObjectStore> {
    runtime: tokio::runtime::Runtime,
    store: Arc<CachedStore<S>>,
    config: BucketConfig,
    inodes: Mutex<Inodes>,
    /// Signalled (with `inodes`) when a handle that read a file through the
    /// kernel's page cache is released: replacements wait for it.
    pages_released: Condvar,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    counters: Counters,
    started: SystemTime,
    on_stale_attr: OnceLock<AttrInvalidator>,
    on_stale_pages: OnceLock<AttrInvalidator>,
}

/// A prefix for listing: the empty path (a whole bucket's root) is none.
fn as_prefix(path: &Path) -> Option<&Path> {
    (!path.as_ref().is_empty()).then_some(path)
}

/// The key of `name` in the directory at `dir`; `None` where `name` cannot
/// be part of a key (not UTF-8, `/`, `.`, `..`, empty).
fn child_path(dir: &Path, name: &str) -> Option<Path> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let key = if dir.as_ref().is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", dir.as_ref())
    };
    Path::parse(key).ok()
}

/// Whether `a` and `b` describe one version of one object. Without an
/// ETag or a version id, no two are known to be the same.
fn same_version(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    (a.e_tag.is_some() || a.version.is_some())
        && a.location == b.location
        && a.e_tag == b.e_tag
        && a.version == b.version
        && a.size == b.size
        && a.last_modified == b.last_modified
}

fn remote_of(meta: &ObjectMeta) -> Remote {
    Remote {
        size: meta.size,
        mtime: SystemTime::from(meta.last_modified),
    }
}

impl<S: ObjectStore> BucketFs<S> {
    /// The filesystem over `store`, rooted at `root` (a key prefix; the
    /// empty path for the whole bucket). Starts its runtime.
    pub fn new(store: CachedStore<S>, root: Path, config: BucketConfig) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.runtime_threads.max(1))
            .thread_name("multiarc-bucket")
            .enable_all()
            .build()?;
        Ok(BucketFs {
            runtime,
            store: Arc::new(store),
            config,
            inodes: Mutex::new(Inodes::new(root)),
            pages_released: Condvar::new(),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            counters: Counters::default(),
            started: SystemTime::now(),
            on_stale_attr: OnceLock::new(),
            on_stale_pages: OnceLock::new(),
        })
    }

    /// Sets what tells the kernel to drop the attributes it caches of an
    /// inode (a FUSE adapter: an inode invalidation), called when an open
    /// finds a version whose size or mtime differ from what the kernel
    /// was told. Once; a second call is ignored.
    pub fn on_stale_attr(&self, invalidate: impl Fn(u64) + Send + Sync + 'static) {
        let _ = self.on_stale_attr.set(Box::new(invalidate));
    }

    /// Sets what has the kernel drop the pages it caches of an inode (a
    /// FUSE adapter: an inode invalidation from offset 0), and wait until
    /// it has: called by an open that will read a new version through the
    /// page cache, before any other open may. Once; a second call is
    /// ignored. Without it, only the open's reply (no `keep_cache`) drops
    /// them, which leaves a moment in which another open of the new
    /// version could be answered `keep_cache` and read the old pages.
    pub fn on_stale_pages(&self, invalidate: impl Fn(u64) + Send + Sync + 'static) {
        let _ = self.on_stale_pages.set(Box::new(invalidate));
    }

    /// The cached store the filesystem reads through.
    pub fn store(&self) -> &CachedStore<S> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &BucketConfig {
        &self.config
    }

    /// How long the kernel may trust names and attributes: the metadata TTL.
    pub fn ttl(&self) -> Duration {
        self.config.metadata_ttl
    }

    fn fresh(&self, node: &Node) -> bool {
        node.is_local()
            || node
                .checked
                .is_some_and(|t| t.elapsed() < self.config.metadata_ttl)
    }

    fn attr(&self, ino: u64, node: &Node) -> Attr {
        let (size, mtime, perm) = match node.kind {
            Kind::Directory => (0, self.started, self.config.dir_mode),
            Kind::File => {
                // While handles read a version through the kernel's page
                // cache, the kernel is told that version's size: it cuts
                // their reads at the size it knows, which a newer, shorter
                // version, or a replacement being written through this
                // mount, must not lower under them (handles of the newer
                // one meanwhile read or write with direct I/O, not cut by
                // it).
                let paged = node
                    .page_version
                    .as_ref()
                    .filter(|_| node.page_readers > 0)
                    .map(remote_of);
                match (paged, node.writing, node.remote.as_ref()) {
                    (Some(p), _, _) => (p.size, p.mtime, self.config.file_mode),
                    (None, Some(written), _) => (written, SystemTime::now(), self.config.file_mode),
                    (None, None, Some(r)) => (r.size, r.mtime, self.config.file_mode),
                    (None, None, None) => (0, SystemTime::now(), self.config.file_mode),
                }
            }
        };
        Attr {
            ino,
            kind: node.kind,
            size,
            mtime,
            perm,
            uid: self.config.uid,
            gid: self.config.gid,
        }
    }

    /// The attributes of `ino` as given to the kernel (which caches them
    /// for the TTL): a file's size and mtime are noted, for
    /// [`BucketFs::open`] to see whether the kernel's copy went stale.
    fn tell(&self, inodes: &mut Inodes, ino: u64) -> Result<Attr, Errno> {
        let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
        let attr = self.attr(ino, node);
        if node.kind == Kind::File {
            node.told = Told::Attrs(attr.size, attr.mtime);
        }
        Ok(attr)
    }

    fn store_error(&self, what: &str, e: &object_store::Error) -> Errno {
        if !matches!(e, object_store::Error::NotFound { .. }) {
            self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
        }
        store_errno(what, e)
    }

    /// The parent directory's path, checking it is a directory.
    fn dir_path(&self, ino: u64) -> Result<Path, Errno> {
        let inodes = self.inodes.lock_unpoisoned();
        let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
        if node.kind != Kind::Directory {
            return Err(Errno::ENOTDIR);
        }
        Ok(node.path.clone())
    }

    /// Looks `name` up in `parent`: from what the table knows while it is
    /// fresh, else from the store (a HEAD of the key and a listing of the
    /// prefix, at once; a directory hides an object of the same name).
    /// Counts one kernel reference.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr, Errno> {
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        let dir = self.dir_path(parent)?;
        {
            let mut inodes = self.inodes.lock_unpoisoned();
            if let Some(ino) = inodes.child(parent, name) {
                let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
                if self.fresh(node) {
                    let attr = self.tell(&mut inodes, ino)?;
                    if let Some(node) = inodes.get_mut(ino) {
                        node.lookups += 1;
                    }
                    return Ok(attr);
                }
            }
        }
        let path = child_path(&dir, name).ok_or(Errno::ENOENT)?;
        if name.len() > 1024 {
            return Err(Errno::ENAMETOOLONG);
        }
        self.counters.lookups_remote.fetch_add(1, Ordering::Relaxed);
        let (head, under) = self.runtime.block_on(async {
            let head = self.store.head(&path);
            let under = async {
                use futures::StreamExt;
                self.store.list(Some(&path)).next().await.transpose()
            };
            futures::join!(head, under)
        });
        let what = format!("looking up {path}");
        let is_dir = match under {
            Ok(first) => first.is_some(),
            Err(e) => return Err(self.store_error(&what, &e)),
        };
        // A directory hides an object of its name, and whatever its HEAD
        // answered (some servers fail a HEAD of a key that is a prefix).
        let file = match head {
            _ if is_dir => None,
            Ok(meta) => Some(meta),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(self.store_error(&what, &e)),
        };
        let mut inodes = self.inodes.lock_unpoisoned();
        let ino = match (is_dir, file) {
            (true, _) => inodes.upsert(parent, name, path, Kind::Directory),
            (false, Some(meta)) => {
                let ino = inodes.upsert(parent, name, path, Kind::File);
                if let Some(node) = inodes.get_mut(ino) {
                    node.remote = Some(remote_of(&meta));
                }
                ino
            }
            (false, None) => {
                // A name made here meanwhile stays.
                if let Some(ino) = inodes.child(parent, name) {
                    if let Some(node) = inodes.get_mut(ino).filter(|n| n.is_local()) {
                        node.lookups += 1;
                        return self.tell(&mut inodes, ino);
                    }
                }
                inodes.detach(parent, name);
                return Err(Errno::ENOENT);
            }
        };
        let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
        node.checked = Some(Instant::now());
        node.lookups += 1;
        self.tell(&mut inodes, ino)
    }

    /// The kernel dropped `n` references to `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.lock_unpoisoned().forget(ino, n);
    }

    /// The attributes of `ino`: a file's are fetched again (a HEAD) once
    /// the TTL has passed.
    pub fn getattr(&self, ino: u64) -> Result<Attr, Errno> {
        let path = {
            let mut inodes = self.inodes.lock_unpoisoned();
            let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
            if node.kind == Kind::Directory || self.fresh(node) {
                return self.tell(&mut inodes, ino);
            }
            node.path.clone()
        };
        let meta = self
            .runtime
            .block_on(self.store.head(&path))
            .map_err(|e| self.store_error(&format!("getattr {path}"), &e))?;
        let mut inodes = self.inodes.lock_unpoisoned();
        let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
        node.remote = Some(remote_of(&meta));
        node.checked = Some(Instant::now());
        self.tell(&mut inodes, ino)
    }

    /// `setattr`: times are accepted and ignored (objects have only the
    /// store's); a change of mode or owner is `EPERM`; a size only where it
    /// is already the size (a new or truncated file's 0, as `O_TRUNC` or
    /// `truncate` before writing asks).
    pub fn setattr(&self, ino: u64, size: Option<u64>, mode_or_owner: bool) -> Result<Attr, Errno> {
        if mode_or_owner {
            return Err(Errno::EPERM);
        }
        let mut inodes = self.inodes.lock_unpoisoned();
        let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
        if let Some(size) = size {
            if node.kind == Kind::Directory {
                return Err(Errno::EISDIR);
            }
            if node.writing != Some(size) {
                log::warn!(
                    "{}: changing a file's size to {size} is not supported (objects are written \
                     whole, sequentially)",
                    node.path
                );
                return Err(Errno::EPERM);
            }
        }
        self.tell(&mut inodes, ino)
    }

    /// Lists `ino` (a `/`-delimited listing of its prefix, plus the names
    /// made here and not in the store yet) and opens the result: readdir
    /// reads this snapshot. Entries carry what the listing said (sizes,
    /// times, ETags), so lookups of them within the TTL need no request.
    pub fn opendir(&self, ino: u64) -> Result<u64, Errno> {
        let (dir, parent, kept) = {
            let inodes = self.inodes.lock_unpoisoned();
            let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
            if node.kind != Kind::Directory {
                return Err(Errno::ENOTDIR);
            }
            let kept = node
                .listing
                .clone()
                .filter(|(at, _)| at.elapsed() < self.config.metadata_ttl);
            (node.path.clone(), node.parent, kept)
        };
        let (now, listing) = match kept {
            Some(kept) => {
                self.counters
                    .listings_reused
                    .fetch_add(1, Ordering::Relaxed);
                kept
            }
            None => {
                self.counters.listings.fetch_add(1, Ordering::Relaxed);
                let listing = self
                    .runtime
                    .block_on(self.store.list_with_delimiter(as_prefix(&dir)))
                    .map_err(|e| self.store_error(&format!("listing {dir}"), &e))?;
                (Instant::now(), Arc::new(listing))
            }
        };
        let mut entries = vec![
            DirEntry {
                ino,
                kind: Kind::Directory,
                name: ".".into(),
            },
            DirEntry {
                ino: parent,
                kind: Kind::Directory,
                name: "..".into(),
            },
        ];
        let mut inodes = self.inodes.lock_unpoisoned();
        let mut seen = std::collections::HashSet::new();
        for prefix in &listing.common_prefixes {
            let Some(name) = prefix.filename() else {
                continue;
            };
            let child = inodes.upsert(ino, name, prefix.clone(), Kind::Directory);
            if let Some(node) = inodes.get_mut(child) {
                node.checked = Some(now);
            }
            seen.insert(name.to_string());
            entries.push(DirEntry {
                ino: child,
                kind: Kind::Directory,
                name: name.to_string(),
            });
        }
        for meta in &listing.objects {
            // A directory marker (`dir/`) is the directory itself.
            let Some(name) = meta.location.filename().filter(|_| meta.location != dir) else {
                continue;
            };
            if !seen.insert(name.to_string()) {
                continue;
            }
            let child = inodes.upsert(ino, name, meta.location.clone(), Kind::File);
            if let Some(node) = inodes.get_mut(child) {
                node.remote = Some(remote_of(meta));
                node.checked = Some(now);
            }
            entries.push(DirEntry {
                ino: child,
                kind: Kind::File,
                name: name.to_string(),
            });
        }
        for (child, name, kind) in inodes.local_children(ino) {
            if seen.insert(name.clone()) {
                entries.push(DirEntry {
                    ino: child,
                    kind,
                    name,
                });
            }
        }
        if let Some(node) = inodes.get_mut(ino) {
            node.listing = Some((now, listing));
        }
        drop(inodes);
        Ok(self.insert_handle(Handle::Dir(Arc::new(entries))))
    }

    /// The entries of an open directory from `offset` on (`.` and `..`
    /// first).
    pub fn readdir(&self, fh: u64, offset: u64) -> Result<Vec<DirEntry>, Errno> {
        match &*self.handle(fh)? {
            Handle::Dir(entries) => Ok(entries.iter().skip(offset as usize).cloned().collect()),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn insert_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock_unpoisoned().insert(fh, Arc::new(handle));
        fh
    }

    fn handle(&self, fh: u64) -> Result<Arc<Handle>, Errno> {
        self.handles
            .lock_unpoisoned()
            .get(&fh)
            .cloned()
            .ok_or(Errno::EBADF)
    }

    /// [`BucketFs::open_file`] with direct I/O, returning only the handle.
    pub fn open(&self, ino: u64, flags: i32, owner: u32) -> Result<u64, Errno> {
        self.open_file(ino, flags, owner, false)
            .map(|opened| opened.fh)
    }

    /// Opens a file: for reading, the object's current version (its
    /// metadata, trusted for the TTL: close-to-open consistency); for
    /// writing, only to replace the object whole (`O_TRUNC`) and only with
    /// `allow_overwrite` (`EPERM` otherwise). `owner` is the opening
    /// process (see [`BucketFs::flush`]).
    ///
    /// With `page_cache`, a file opened for reading may be read through the
    /// kernel's page cache, which every handle of the inode shares. A
    /// version never changes, so its pages are kept across opens of it. The
    /// rule that keeps every handle's reads to its own version:
    /// - an open of the version the pages hold keeps them
    ///   ([`Opened::keep_cache`]) and reads through them, and counts one
    ///   more use of the blocks they were given since the last such open
    ///   (`count_reuse`: the kernel's re-reads never reach the mount);
    /// - an open of another version, while no handle reads through the
    ///   pages, has the kernel drop them (no `keep_cache`) and reads through
    ///   them from then on: they become its version's;
    /// - an open of another version while handles of the older one read
    ///   through the pages gets direct I/O ([`Opened::direct_io`]), leaving
    ///   those handles their version's pages, until they are all closed.
    ///
    /// Without `page_cache`, and for writing, the open gets direct I/O
    /// (writes never enter the page cache). An open for writing waits
    /// until no handle reads the file through the page cache (see
    /// [`BucketConfig::overwrite_wait`]).
    pub fn open_file(
        &self,
        ino: u64,
        flags: i32,
        owner: u32,
        page_cache: bool,
    ) -> Result<Opened, Errno> {
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let path = {
            let inodes = self.inodes.lock_unpoisoned();
            let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
            if node.kind == Kind::Directory {
                return Err(Errno::EISDIR);
            }
            if node.writing.is_some() {
                log::warn!("{}: opening a file that is being written", node.path);
                return Err(Errno::EBUSY);
            }
            node.path.clone()
        };
        if writing {
            if self.config.read_only {
                return Err(Errno::EROFS);
            }
            if !self.config.allow_overwrite {
                log::warn!(
                    "{path}: opening an existing object for writing is refused (mount with \
                     --allow-overwrite to replace objects)"
                );
                return Err(Errno::EPERM);
            }
            if flags & libc::O_TRUNC == 0 {
                log::warn!(
                    "{path}: an existing object can only be replaced whole (open it with O_TRUNC)"
                );
                return Err(Errno::EPERM);
            }
            return self.start_upload(ino, path, owner).map(|fh| Opened {
                fh,
                keep_cache: false,
                direct_io: true,
            });
        }
        let meta = match self.runtime.block_on(self.store.head(&path)) {
            Ok(meta) => {
                let remote = remote_of(&meta);
                let mut stale = false;
                if let Some(node) = self.inodes.lock_unpoisoned().get_mut(ino) {
                    // The kernel holds the old size for up to a TTL (an
                    // `fstat` after this open would show it): have it ask.
                    stale = match node.told {
                        Told::Nothing => false,
                        Told::Attrs(size, mtime) => (size, mtime) != (remote.size, remote.mtime),
                        Told::Unknown => true,
                    };
                    if stale {
                        node.told = Told::Nothing;
                    }
                    node.remote = Some(remote);
                    node.checked = Some(Instant::now());
                    node.opened = Some(meta.clone());
                }
                if stale {
                    self.counters
                        .attr_invalidations
                        .fetch_add(1, Ordering::Relaxed);
                    if let Some(invalidate) = self.on_stale_attr.get() {
                        invalidate(ino);
                    }
                }
                meta
            }
            Err(e) => {
                let errno = self.store_error(&format!("opening {path}"), &e);
                // The store cannot be reached: the version this mount last
                // opened, whose cached blocks can still be read.
                let last = self
                    .inodes
                    .lock_unpoisoned()
                    .get(ino)
                    .and_then(|n| n.opened.clone());
                match last {
                    Some(meta) if errno == Errno::EIO => {
                        log::warn!(
                            "{path}: opening the version last seen ({}) while the store fails",
                            meta.e_tag.as_deref().unwrap_or("no ETag")
                        );
                        self.counters.stale_opens.fetch_add(1, Ordering::Relaxed);
                        meta
                    }
                    _ => return Err(errno),
                }
            }
        };
        // The blocks the kept pages were given since the last open that
        // kept them: this open counts one more use of each (below).
        let mut reused = ServedBlocks::default();
        let (keep_cache, page_cached, drop_pages) = {
            let mut inodes = self.inodes.lock_unpoisoned();
            match inodes.get_mut(ino) {
                Some(node) => {
                    // A replacement waits for the pages' readers to close,
                    // and sets the kernel's size as it writes: no reader
                    // may start on the pages meanwhile (one that checked
                    // before the write started gets here after it).
                    let replacing = node.overwrites_waiting > 0 || node.writing.is_some();
                    let same = !node.dropping_pages
                        && !replacing
                        && node
                            .page_version
                            .as_ref()
                            .is_some_and(|v| same_version(v, &meta));
                    if same && page_cache {
                        node.page_readers += 1;
                        reused = std::mem::take(&mut node.served);
                        (true, Some(ino), false)
                    } else if same || replacing || node.page_readers > 0 || node.dropping_pages {
                        // Direct I/O, beside the readers of the pages.
                        (true, None, false)
                    } else if page_cache {
                        if node.page_version.is_some() {
                            // Another version's pages go (a first open
                            // has none to drop).
                            self.counters
                                .page_invalidations
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        node.page_version = None;
                        node.served = ServedBlocks::default();
                        node.dropping_pages = true;
                        node.page_readers = 1;
                        (false, Some(ino), true)
                    } else {
                        node.page_version = None;
                        node.served = ServedBlocks::default();
                        (false, None, false)
                    }
                }
                None => (false, None, false),
            }
        };
        if drop_pages {
            // No handle reads through the pages (none can put the old
            // version's bytes back); once they are gone they become this
            // version's.
            if let Some(invalidate) = self.on_stale_pages.get() {
                invalidate(ino);
            }
            if let Some(node) = self.inodes.lock_unpoisoned().get_mut(ino) {
                node.page_version = Some(meta.clone());
                node.dropping_pages = false;
            }
        }
        let density = {
            let mut inodes = self.inodes.lock_unpoisoned();
            match inodes.get_mut(ino) {
                Some(node) => match &node.density {
                    Some((version, density)) if same_version(version, &meta) => Arc::clone(density),
                    _ => {
                        let density = Arc::new(Mutex::new(Density::new(meta.size)));
                        node.density = Some((meta.clone(), Arc::clone(&density)));
                        density
                    }
                },
                None => Arc::new(Mutex::new(Density::new(meta.size))),
            }
        };
        let open = Box::new(OpenObject::new(
            &self.store,
            &meta,
            self.config.same_use_window,
        ));
        if !reused.is_empty() {
            self.count_reuse(&open, &reused);
        }
        let fh = self.insert_handle(Handle::Read {
            open,
            meta,
            reading: Box::default(),
            density,
            page_cached,
        });
        Ok(Opened {
            fh,
            keep_cache,
            direct_io: page_cached.is_none(),
        })
    }

    /// One use of each block of `blocks` that memory holds (a lookup, as a
    /// read's: a block used before moves from MRU to MFU), for an open
    /// that keeps the kernel's pages of `open`'s version: the re-reads the
    /// kernel serves from them never reach this mount (see
    /// [`crate::served`]). Blocks memory no longer holds are left alone.
    fn count_reuse(&self, open: &OpenObject, blocks: &ServedBlocks) {
        let cache = self.store.cache();
        // More than memory holds: read through, not reused (see
        // `crate::served`).
        if blocks.len() > cache.max_bytes() / self.store.block_size() {
            return;
        }
        let mut used = 0;
        for block in blocks.blocks() {
            let key = open.block_key(block);
            if cache.contains(&key) && cache.get_in_memory(&key).is_some() {
                used += 1;
            }
        }
        self.counters.reopen_uses.fetch_add(used, Ordering::Relaxed);
    }

    /// Starts writing `ino` (new, or replaced whole), once no handle of
    /// this mount reads it through the kernel's page cache (see
    /// [`BucketFs::wait_for_page_readers`]).
    fn start_upload(&self, ino: u64, path: Path, owner: u32) -> Result<u64, Errno> {
        {
            let mut inodes = self.wait_for_page_readers(ino, &path)?;
            let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
            if node.writing.is_some() {
                return Err(Errno::EBUSY);
            }
            node.writing = Some(0);
            // The kernel drops the file's pages and sets its size itself
            // from here on (0 at the truncating open, then the bytes
            // written): what it holds is no version's, and the next open
            // has it ask.
            node.page_version = None;
            node.told = Told::Unknown;
        }
        let upload = Upload::new(
            ino,
            path,
            self.config.part_size,
            self.config.parts_in_flight,
        );
        Ok(self.insert_handle(Handle::Write {
            upload: Arc::new(tokio::sync::Mutex::new(upload)),
            owner,
        }))
    }

    /// The inode table, once no handle reads `ino` through the kernel's
    /// page cache, for a write to start on it; `EBUSY` if some still do
    /// after [`BucketConfig::overwrite_wait`].
    ///
    /// The kernel keeps one size per file, and cuts reads through its
    /// pages at it. A write through this mount sets it (0 at a truncating
    /// open, then the bytes written so far), so a handle reading the old
    /// version through the pages meanwhile would see its file end early,
    /// or pages past its end, whatever size this mount tells the kernel.
    /// So the write waits for those handles to be released; meanwhile
    /// new opens for reading get direct I/O (their reads do not depend on
    /// the kernel's size), and once it has started they get `EBUSY`.
    fn wait_for_page_readers(
        &self,
        ino: u64,
        path: &Path,
    ) -> Result<MutexGuard<'_, Inodes>, Errno> {
        let mut inodes = self.inodes.lock_unpoisoned();
        let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
        if node.page_readers == 0 && !node.dropping_pages {
            return Ok(inodes);
        }
        node.overwrites_waiting += 1;
        let deadline = Instant::now() + self.config.overwrite_wait;
        let outcome = loop {
            let Some(node) = inodes.get(ino) else {
                break Err(Errno::ENOENT);
            };
            if node.page_readers == 0 && !node.dropping_pages {
                break Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                log::warn!(
                    "{path}: still open for reading through the page cache after {:?}: not \
                     replaced (close it first, or mount with --no-page-cache)",
                    self.config.overwrite_wait
                );
                break Err(Errno::EBUSY);
            }
            inodes = unpoisoned(self.pages_released.wait_timeout(inodes, left)).0;
        };
        if let Some(node) = inodes.get_mut(ino) {
            node.overwrites_waiting -= 1;
        }
        outcome.map(|()| inodes)
    }

    /// Reads `size` bytes at `offset` of the version the handle opened
    /// (fewer at its end): from memory if it holds every block of that
    /// version the read covers (whatever version the store holds now),
    /// else through the cached store, conditional on that version's ETag:
    /// `ESTALE` once the cached store knows of another version. So a handle
    /// reads its own version, never another's bytes; after a replacement
    /// it goes on reading it while memory holds it, and fails with `ESTALE`
    /// at its first read memory cannot serve. With a metadata TTL of zero,
    /// every read goes through the cached store (a HEAD each). While the
    /// store fails (`EIO`), what the cache holds of the handle's version is
    /// still served.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Bytes, Errno> {
        let handle = self.handle(fh)?;
        let Handle::Read {
            meta,
            open,
            reading,
            density,
            page_cached,
        } = &*handle
        else {
            return Err(Errno::EBADF);
        };
        let (path, e_tag) = (&meta.location, &meta.e_tag);
        let end = offset.saturating_add(size as u64).min(meta.size);
        if offset >= end {
            return Ok(Bytes::new());
        }
        let block_size = self.store.block_size();
        // A run prefetches once one of its reads missed memory; with a
        // metadata TTL of zero no read is served from memory here (see
        // below), so every read counts as a miss.
        let checked = self.config.metadata_ttl.is_zero();
        let (advance, keep) = {
            let mut reading = reading.lock_unpoisoned();
            if page_cached.is_some() {
                // Whatever this read returns, the kernel keeps in its page
                // cache (if the read fails, the blocks are counted at most
                // once more at the next open: harmless).
                let _ = reading
                    .served
                    .add(offset / block_size..(end - 1) / block_size + 1);
            }
            let advance = reading.streams.advance(
                offset..end,
                meta.size,
                self.config.prefetch_bytes,
                self.config.prefetch_chunk,
                checked,
            );
            // Reads that go on through a block keep its rest: those of a
            // run, and large ones (a run's first read, as far as one can
            // tell); small random reads keep nothing.
            let keep = !checked && (advance.in_run || size >= KEEP_FROM_READ_SIZE);
            (advance, keep)
        };
        self.prefetch(meta, open, advance.ahead);
        if let Some(at) = advance.random_miss {
            if density.lock_unpoisoned().random_miss(at) {
                self.fetch_dense(meta, open);
            }
        }
        // The handle's version, from memory when it holds every block the
        // read covers: no metadata check (the handle reads the version it
        // opened, whatever the store holds now: close-to-open), no request,
        // no hop through the runtime. With a metadata TTL of zero every
        // read checks the version with the store first, as documented.
        // The rest of the block the last read ended in is kept (taken out
        // of the handle for the read, so that reads of one handle at once
        // do not wait for each other): the kernel's reads of 128 KiB go
        // through a block of 256 KiB in two or more reads, which are one
        // use of it, and the cache must count one (`LastBlock` serves reads
        // in order from the kept block; `UsedBlocks` makes those at once or
        // out of order count no further use).
        let mut last = LastBlock::default();
        if !checked {
            if keep {
                last = std::mem::take(&mut reading.lock_unpoisoned().last);
            }
            let read = open.read_in_memory(&self.store, offset..end, keep.then_some(&mut last));
            match read {
                Some(bytes) => {
                    if keep {
                        reading.lock_unpoisoned().last = last;
                    }
                    return Ok(bytes);
                }
                None => {
                    // A small random read of a block only the L2 holds:
                    // that part alone, from the L2.
                    if !keep {
                        if let Some(bytes) = open.read_l2_part(&self.store, offset..end) {
                            return Ok(bytes);
                        }
                    }
                    reading.lock_unpoisoned().streams.missed(end)
                }
            }
        } else if let Ok(true) = self.runtime.block_on(open.is_current(&self.store, path)) {
            // Checked with the store (a HEAD), and still the handle's
            // version: its blocks in memory serve the read, counting one
            // use per block as above (the kernel's reads of one block are
            // not taken for reuse). Otherwise, or on an error, the read
            // goes through the store below, which checks again and
            // reports.
            if let Some(bytes) = open.read_in_memory(&self.store, offset..end, None) {
                return Ok(bytes);
            }
        }
        // Through the store, to the end of the block the read ends in (a
        // block is fetched whole anyway), the rest kept for the next read.
        let fetch_end = if !keep {
            end
        } else {
            end.div_ceil(block_size)
                .saturating_mul(block_size)
                .min(meta.size)
        };
        let options = GetOptions {
            range: Some(GetRange::Bounded(offset..fetch_end)),
            if_match: e_tag.clone(),
            ..GetOptions::default()
        };
        let what = || format!("reading {path} at {offset}");
        let fetched = self
            .runtime
            .block_on(async { self.store.get_opts(path, options).await?.bytes().await });
        let bytes = match fetched {
            Ok(bytes) => bytes,
            Err(e) => {
                let errno = self.store_error(&what(), &e);
                // The store fails (its metadata may have expired, so the
                // cached store cannot vouch for the version): the blocks of
                // this handle's version, if the cache holds them all.
                match self.cached_range(meta, open, offset, end) {
                    Some(bytes) if errno == Errno::EIO => {
                        self.counters
                            .cached_reads_while_failing
                            .fetch_add(1, Ordering::Relaxed);
                        return Ok(bytes);
                    }
                    _ => return Err(errno),
                }
            }
        };
        if bytes.len() as u64 != fetch_end - offset {
            log::error!(
                "{}: {} bytes instead of {}",
                what(),
                bytes.len(),
                fetch_end - offset
            );
            return Err(Errno::EIO);
        }
        // The store's read counted this use of the blocks it covers.
        open.note_use(&self.store, offset..end);
        if fetch_end > end {
            let rest = bytes.slice((end - offset) as usize..);
            open.keep_last(&self.store, end, rest, &mut last);
            reading.lock_unpoisoned().last = last;
        }
        Ok(bytes.slice(..(end - offset) as usize))
    }

    /// Fetches `range` of the version `meta` describes into the cache in
    /// the background: chunks of [`BucketConfig::prefetch_chunk`] bytes,
    /// each a task of the runtime (one ranged GET of the blocks not cached,
    /// conditional on the ETag, cached as read ahead), first polled on the caller's thread so its
    /// blocks are marked as loading before this returns. Failures are only
    /// logged: a read that needs those bytes fetches them itself.
    fn prefetch(&self, meta: &ObjectMeta, open: &OpenObject, range: std::ops::Range<u64>) {
        let block_size = self.store.block_size();
        for chunk in chunks(range, self.config.prefetch_chunk, block_size) {
            let last = (chunk.end - 1) / block_size;
            let cached = (chunk.start / block_size..=last).all(|block| {
                let key = open.block_key(block);
                let cache = self.store.cache();
                cache.contains(&key) || cache.l2_contains(&key) || cache.is_loading(&key)
            });
            if cached {
                continue;
            }
            self.counters
                .prefetch_requests
                .fetch_add(1, Ordering::Relaxed);
            self.counters
                .prefetch_bytes
                .fetch_add(chunk.end - chunk.start, Ordering::Relaxed);
            let store = Arc::clone(&self.store);
            let (path, e_tag) = (meta.location.clone(), meta.e_tag.clone());
            let mut task = Box::pin(async move {
                // Cached as read ahead: the reader's one read of a block
                // later is its first use, so read-once data does not fill
                // the cache's frequency list and push out the prefetched
                // blocks not read yet (`CachedStore::load_ahead`).
                if let Err(e) = store.load_ahead(&path, chunk.clone(), e_tag).await {
                    log::debug!("{path}: prefetching {chunk:?}: {e}");
                }
            });
            // Polled once here, before the read returns: that starts the
            // cache's single-flight loads of the chunk's blocks (marked as
            // loading) and its GET, so the next read waits for them instead
            // of fetching them itself while the task is not running yet.
            let started = self
                .runtime
                .block_on(async { futures::poll!(task.as_mut()) });
            if started.is_pending() {
                self.runtime.spawn(task);
            }
        }
    }

    /// The object's random reads are dense (see [`crate::dense`]): its
    /// blocks the cache does not hold are fetched in the background, in
    /// chunks of [`BucketConfig::prefetch_chunk`], at most
    /// [`BucketConfig::dense_parallel`] GETs at once, cached as read ahead
    /// (each block's read later is its first use). Not for an object
    /// larger than [`BucketConfig::dense_object_max`].
    fn fetch_dense(&self, meta: &ObjectMeta, open: &OpenObject) {
        let limit = self
            .config
            .dense_object_max
            .unwrap_or_else(|| self.store.cache().stats().c / 2);
        if meta.size > limit || self.config.dense_parallel == 0 {
            log::debug!(
                "{}: random reads are dense, but {} bytes are more than the {limit} fetched whole",
                meta.location,
                meta.size
            );
            return;
        }
        let block_size = self.store.block_size();
        let wanted: Vec<_> = chunks(0..meta.size, self.config.prefetch_chunk, block_size)
            .into_iter()
            .filter(|chunk| {
                (chunk.start / block_size..chunk.end.div_ceil(block_size)).any(|block| {
                    let key = open.block_key(block);
                    let cache = self.store.cache();
                    !(cache.contains(&key) || cache.l2_contains(&key) || cache.is_loading(&key))
                })
            })
            .collect();
        log::debug!(
            "{}: random reads are dense: fetching its {} bytes in {} chunks",
            meta.location,
            meta.size,
            wanted.len()
        );
        self.counters.dense_objects.fetch_add(1, Ordering::Relaxed);
        self.counters
            .prefetch_requests
            .fetch_add(wanted.len() as u64, Ordering::Relaxed);
        self.counters.prefetch_bytes.fetch_add(
            wanted.iter().map(|c| c.end - c.start).sum::<u64>(),
            Ordering::Relaxed,
        );
        let store = Arc::clone(&self.store);
        let (path, e_tag) = (meta.location.clone(), meta.e_tag.clone());
        let parallel = self.config.dense_parallel;
        self.runtime.spawn(async move {
            use futures::StreamExt;
            futures::stream::iter(wanted)
                .for_each_concurrent(parallel, |chunk| {
                    let (store, path, e_tag) = (&store, &path, e_tag.clone());
                    async move {
                        if let Err(e) = store.load_ahead(path, chunk.clone(), e_tag).await {
                            log::debug!("{path}: fetching {chunk:?} of a densely read object: {e}");
                        }
                    }
                })
                .await;
        });
    }

    /// Bytes `start..end` of the version `meta` describes, from the blocks
    /// in the cache (memory, or the second tier); `None` unless it holds
    /// every one, whole.
    fn cached_range(
        &self,
        meta: &ObjectMeta,
        open: &OpenObject,
        start: u64,
        end: u64,
    ) -> Option<Bytes> {
        let block_size = self.store.block_size();
        let mut out = Vec::with_capacity((end - start) as usize);
        for block in start / block_size..=(end - 1) / block_size {
            let key = open.block_key(block);
            let cached = self.store.cache().get(&key)?;
            let block_start = block * block_size;
            let block_len = (meta.size - block_start).min(block_size);
            if cached.len() as u64 != block_len {
                return None;
            }
            let from = start.max(block_start) - block_start;
            let to = end.min(block_start + block_len) - block_start;
            out.extend_from_slice(&cached[from as usize..to as usize]);
        }
        Some(out.into())
    }

    /// Creates a new file `name` in `parent`, open for writing: it exists
    /// here (size growing with the writes) and in the store only once
    /// uploaded. `owner` is the creating process (see [`BucketFs::flush`]).
    pub fn create(&self, parent: u64, name: &OsStr, owner: u32) -> Result<(Attr, u64), Errno> {
        if self.config.read_only {
            return Err(Errno::EROFS);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let dir = self.dir_path(parent)?;
        let path = child_path(&dir, name).ok_or(Errno::EINVAL)?;
        let ino = {
            let mut inodes = self.inodes.lock_unpoisoned();
            if let Some(ino) = inodes.child(parent, name) {
                let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
                // The kernel creates only names its lookup did not find:
                // one found here was made meanwhile (here, or in the store).
                let exists = node.remote.is_some() || node.kind == Kind::Directory;
                if node.is_local() || (exists && !self.config.allow_overwrite) {
                    return Err(Errno::EEXIST);
                }
            }
            let ino = inodes.upsert(parent, name, path.clone(), Kind::File);
            inodes.get_mut(ino).ok_or(Errno::ENOENT)?.lookups += 1;
            ino
        };
        let fh = self.start_upload(ino, path, owner)?;
        let attr = self.tell(&mut self.inodes.lock_unpoisoned(), ino)?;
        Ok((attr, fh))
    }

    /// Appends `data` at `offset` to a file open for writing (`EINVAL`
    /// unless `offset` is where the last write ended).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let Handle::Write { upload, .. } = &*self.handle(fh)? else {
            return Err(Errno::EBADF);
        };
        let (ino, written) = self.runtime.block_on(async {
            let mut upload = upload.lock().await;
            upload.write(&*self.store, offset, data).await?;
            Ok::<_, Errno>((upload.ino, upload.written))
        })?;
        if let Some(node) = self.inodes.lock_unpoisoned().get_mut(ino) {
            if node.writing.is_some() {
                node.writing = Some(written);
            }
        }
        Ok(data.len() as u32)
    }

    /// A `close` (FUSE's flush) by process `caller`: a file open for
    /// writing is uploaded now, and takes no more writes, if `caller` is
    /// the process that opened it. A close by another process (a child
    /// that inherited the descriptor across `fork`, and closes it at
    /// `exec` or exit) leaves it open; the upload then happens at the
    /// owner's close, fsync, or the release.
    pub fn flush(&self, fh: u64, caller: u32) -> Result<(), Errno> {
        match &*self.handle(fh)? {
            Handle::Write { upload, owner } if *owner == caller => self.complete(upload),
            _ => Ok(()),
        }
    }

    /// `fsync`: a file open for writing is uploaded now, and takes no more
    /// writes.
    pub fn fsync(&self, fh: u64) -> Result<(), Errno> {
        match &*self.handle(fh)? {
            Handle::Write { upload, .. } => self.complete(upload),
            _ => Ok(()),
        }
    }

    fn complete(&self, upload: &tokio::sync::Mutex<Upload>) -> Result<(), Errno> {
        let (ino, written, result, first_failure) = self.runtime.block_on(async {
            let mut upload = upload.lock().await;
            let result = upload.complete(&*self.store).await;
            let first_failure = result.is_err() && !upload.failure_seen;
            upload.failure_seen |= result.is_err();
            (upload.ino, upload.written, result, first_failure)
        });
        let mut inodes = self.inodes.lock_unpoisoned();
        match result {
            Ok(None) => Ok(()),
            Ok(Some(_put)) => {
                self.counters.uploads.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .upload_bytes
                    .fetch_add(written, Ordering::Relaxed);
                if let Some(parent) = inodes.get(ino).map(|n| n.parent) {
                    inodes.relist(parent);
                }
                if let Some(node) = inodes.get_mut(ino) {
                    node.writing = None;
                    // An older version must not be what an open falls
                    // back to.
                    node.opened = None;
                    node.remote = Some(Remote {
                        size: written,
                        mtime: SystemTime::now(),
                    });
                    node.checked = Some(Instant::now());
                }
                Ok(())
            }
            Err(e) if !first_failure => Err(e),
            Err(e) => {
                self.counters.upload_errors.fetch_add(1, Ordering::Relaxed);
                if let Some(node) = inodes.get_mut(ino) {
                    node.writing = None;
                    // The store has what it had: let the next lookup ask.
                    node.checked = None;
                    if node.remote.is_none() {
                        let (parent, name) = (node.parent, node.name.clone());
                        inodes.detach(parent, &name);
                    }
                }
                Err(e)
            }
        }
    }

    /// Closes a handle; a file still open for writing is uploaded first
    /// (its error is returned, though the kernel does not pass it on).
    pub fn release(&self, fh: u64) -> Result<(), Errno> {
        let Some(handle) = self.handles.lock_unpoisoned().remove(&fh) else {
            return Err(Errno::EBADF);
        };
        match &*handle {
            Handle::Write { upload, .. } => {
                let result = self.complete(upload);
                if let Err(e) = result {
                    let path = self
                        .runtime
                        .block_on(async { upload.lock().await.path.clone() });
                    log::error!("{path}: the upload at release failed: {e}");
                }
                result
            }
            Handle::Read {
                page_cached: Some(ino),
                meta,
                reading,
                ..
            } => {
                let served = std::mem::take(&mut reading.lock_unpoisoned().served);
                if let Some(node) = self.inodes.lock_unpoisoned().get_mut(*ino) {
                    node.page_readers = node.page_readers.saturating_sub(1);
                    // What the pages of this version were given, for the
                    // next open that keeps them.
                    if node
                        .page_version
                        .as_ref()
                        .is_some_and(|v| same_version(v, meta))
                    {
                        let lost = node.served.add_all(served);
                        if lost > 0 {
                            log::debug!(
                                "{}: {lost} block ranges not recorded for reopens",
                                meta.location
                            );
                        }
                    }
                }
                self.pages_released.notify_all();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Removes the object `name` in `parent` (only with `allow_delete`:
    /// `EPERM` otherwise).
    pub fn unlink(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        if self.config.read_only {
            return Err(Errno::EROFS);
        }
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        let path = {
            let inodes = self.inodes.lock_unpoisoned();
            let ino = inodes.child(parent, name).ok_or(Errno::ENOENT)?;
            let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
            if node.kind == Kind::Directory {
                return Err(Errno::EISDIR);
            }
            if node.writing.is_some() {
                return Err(Errno::EBUSY);
            }
            node.path.clone()
        };
        if !self.config.allow_delete {
            log::warn!("{path}: deleting is refused (mount with --allow-delete to allow it)");
            return Err(Errno::EPERM);
        }
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.store_error(&format!("deleting {path}"), &e)),
        }
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
        self.inodes.lock_unpoisoned().detach(parent, name);
        Ok(())
    }

    /// Makes a directory: it exists here until a file is written in it
    /// (the store has no directories, only keys with `/`).
    pub fn mkdir(&self, parent: u64, name: &OsStr) -> Result<Attr, Errno> {
        if self.config.read_only {
            return Err(Errno::EROFS);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let dir = self.dir_path(parent)?;
        let path = child_path(&dir, name).ok_or(Errno::EINVAL)?;
        let mut inodes = self.inodes.lock_unpoisoned();
        if let Some(ino) = inodes.child(parent, name) {
            if inodes
                .get(ino)
                .is_some_and(|n| n.is_local() || self.fresh(n))
            {
                return Err(Errno::EEXIST);
            }
        }
        let ino = inodes.upsert(parent, name, path, Kind::Directory);
        let node = inodes.get_mut(ino).ok_or(Errno::ENOENT)?;
        node.local_dir = true;
        node.lookups += 1;
        self.tell(&mut inodes, ino)
    }

    /// Removes a directory that holds nothing (in the store or here).
    pub fn rmdir(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        if self.config.read_only {
            return Err(Errno::EROFS);
        }
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        let (ino, path) = {
            let inodes = self.inodes.lock_unpoisoned();
            let ino = inodes.child(parent, name).ok_or(Errno::ENOENT)?;
            let node = inodes.get(ino).ok_or(Errno::ENOENT)?;
            if node.kind != Kind::Directory {
                return Err(Errno::ENOTDIR);
            }
            if inodes.has_local_children(ino) {
                return Err(Errno::ENOTEMPTY);
            }
            (ino, node.path.clone())
        };
        let first = self.runtime.block_on(async {
            use futures::StreamExt;
            self.store.list(Some(&path)).next().await.transpose()
        });
        match first {
            Ok(Some(_)) => return Err(Errno::ENOTEMPTY),
            Ok(None) => {}
            Err(e) => return Err(self.store_error(&format!("listing {path}"), &e)),
        }
        let mut inodes = self.inodes.lock_unpoisoned();
        if let Some(node) = inodes.get_mut(ino) {
            node.local_dir = false;
        }
        inodes.detach(parent, name);
        Ok(())
    }

    /// The statistics: the block cache's, the cached store's (requests and
    /// bytes to the store, hits per tier, ...) and the filesystem's own
    /// (listings, remote lookups, uploads, store errors, ...).
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        self.metrics().iter().map(|m| (m.stat, m.value)).collect()
    }

    /// [`BucketFs::stats`] as metrics: the block cache's (component
    /// `cache`), the cached store's (`object_store`) and the filesystem's
    /// own (`bucket`), with their kinds and help (see `multiarc::metrics`).
    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = self.store.cache().stats().metrics();
        out.extend(self.store.stats().metrics());
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let bucket = [
            Metric::counter(
                "bucket_listings",
                "Directory listings (opendir) asked of the store.",
                load(&c.listings),
            ),
            Metric::counter(
                "bucket_listings_reused",
                "Directory opens served by a listing made within the metadata TTL.",
                load(&c.listings_reused),
            ),
            Metric::counter(
                "bucket_remote_lookups",
                "Lookups of a name asked of the store (HEAD and listing).",
                load(&c.lookups_remote),
            ),
            Metric::counter(
                "bucket_uploads",
                "Objects uploaded (at close).",
                load(&c.uploads),
            ),
            Metric::counter(
                "bucket_upload_bytes",
                "Bytes uploaded.",
                load(&c.upload_bytes),
            ),
            Metric::counter(
                "bucket_upload_errors",
                "Uploads that failed (their writer was told at close).",
                load(&c.upload_errors),
            ),
            Metric::counter("bucket_deletes", "Objects deleted.", load(&c.deletes)),
            Metric::counter(
                "bucket_store_errors",
                "Store errors an operation met, not-found left out.",
                load(&c.store_errors),
            ),
            Metric::gauge(
                "bucket_kept_blocks",
                "Blocks handles keep for their next read now.",
                multiarc_object_store::open_object::kept_blocks(&self.store),
            ),
            Metric::counter(
                "bucket_stale_opens",
                "Opens that served the version last seen because the store failed.",
                load(&c.stale_opens),
            ),
            Metric::counter(
                "bucket_attr_invalidations",
                "Times the kernel was told to drop an inode's cached attributes.",
                load(&c.attr_invalidations),
            ),
            Metric::counter(
                "bucket_page_invalidations",
                "Opens of a new version that had the kernel drop the older one's cached pages.",
                load(&c.page_invalidations),
            ),
            Metric::counter(
                "bucket_reopen_uses",
                "Block uses counted by opens that kept the kernel's pages (re-reads the kernel serves).",
                load(&c.reopen_uses),
            ),
            Metric::counter(
                "bucket_prefetch_requests",
                "Prefetch requests sent for sequential readers.",
                load(&c.prefetch_requests),
            ),
            Metric::counter(
                "bucket_prefetch_bytes",
                "Bytes asked for by prefetch requests.",
                load(&c.prefetch_bytes),
            ),
            Metric::counter(
                "bucket_dense_objects",
                "Objects fetched whole because their random reads were dense.",
                load(&c.dense_objects),
            ),
            Metric::counter(
                "bucket_cached_reads_while_failing",
                "Reads served from the cache while the store failed.",
                load(&c.cached_reads_while_failing),
            ),
            Metric::gauge(
                "bucket_inodes",
                "Inodes the filesystem knows now.",
                self.inodes.lock_unpoisoned().len() as u64,
            ),
            Metric::gauge(
                "bucket_open_handles",
                "Open file and directory handles now.",
                self.handles.lock_unpoisoned().len() as u64,
            ),
        ];
        out.extend(bucket.into_iter().map(|m| m.in_component("bucket")));
        out
    }

    /// Aborts every upload still open (the mount is going away without
    /// their files being closed): nothing partial is left in the store.
    pub fn abandon_uploads(&self) {
        let handles: Vec<_> = self
            .handles
            .lock_unpoisoned()
            .drain()
            .map(|(_, h)| h)
            .collect();
        self.runtime.block_on(async {
            for handle in handles {
                if let Handle::Write { upload, .. } = &*handle {
                    upload.lock().await.abandon().await;
                }
            }
        });
    }
}

impl<S: ObjectStore> Drop for BucketFs<S> {
    fn drop(&mut self) {
        self.abandon_uploads();
    }
}
