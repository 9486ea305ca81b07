//! File data of `multiarc mount`: one cached file state per FUSE inode, one
//! open file description per FUSE file handle.
//!
//! An inode's [`CachedFile`] lives while any handle of it is open; each
//! handle is a description of it, so reads, writes, truncation and sync on
//! an open file go through the handle the kernel names, never through a
//! path. Write-back errors reach each description once, at its next
//! `fsync` or `close` (the kernel's errseq rule). At the last close of a
//! file whose last name is gone its dirty blocks are dropped and the
//! backing file is closed, so its space is freed.

use super::file_state::Seen;
use super::inodes::{Inode, InodeTable};
use super::sys::proc_path;
use fuser::{Errno, FileType};
use multiarc::{BlockKey, Cache};
use multiarc_file::{CachedFile, FileStore, Locking, WriteBack};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// An open FUSE file handle: one open file description.
pub struct Handle {
    pub inode: Arc<Inode>,
    pub file: Arc<CachedFile>,
    /// The write-back's error count when this handle last synced: a flush
    /// with nothing dirty still syncs if errors happened since, so a
    /// write-back error reaches `close`.
    errors_seen: AtomicU64,
}

/// Data settings and state shared by all files of the mount.
pub struct Data {
    cache: Arc<Cache<BlockKey>>,
    writeback: Arc<WriteBack>,
    block_size: usize,
    locking: Locking,
    /// Whether backing files are opened with `O_DIRECT` (cleared, with a
    /// note, the first time the backing filesystem refuses it).
    direct: AtomicBool,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
}

/// The errno for an I/O error: its OS code, else one matching its kind.
pub fn errno(e: &io::Error) -> Errno {
    if let Some(code) = multiarc_file::os_error_code(e) {
        return Errno::from_i32(code);
    }
    use io::ErrorKind::*;
    Errno::from_i32(match e.kind() {
        NotFound => libc::ENOENT,
        PermissionDenied => libc::EACCES,
        AlreadyExists => libc::EEXIST,
        InvalidInput | InvalidData => libc::EINVAL,
        StorageFull => libc::ENOSPC,
        QuotaExceeded => libc::EDQUOT,
        FileTooLarge => libc::EFBIG,
        ReadOnlyFilesystem => libc::EROFS,
        Unsupported => libc::EOPNOTSUPP,
        _ => libc::EIO,
    })
}

/// The errno for a failed data operation (`op`: read, write, close...),
/// after logging the error: the program using the mount sees only the
/// errno, the log says which file and what failed.
pub fn logged_errno(op: &str, e: &io::Error) -> Errno {
    log::error!("{op}: {e}");
    errno(e)
}

/// Another open file description of `file` (a second `open(2)` of it).
fn describe(file: &Arc<CachedFile>) -> Arc<CachedFile> {
    Arc::new(file.open_again())
}

/// Closes the last description of a file: syncs it and reports its
/// write-back error.
fn close_description(file: Arc<CachedFile>) -> io::Result<()> {
    match Arc::try_unwrap(file) {
        Ok(f) => f.close(),
        Err(f) => f.sync_all(),
    }
}

impl Data {
    pub fn new(
        cache: Arc<Cache<BlockKey>>,
        writeback: Arc<WriteBack>,
        block_size: usize,
        locking: Locking,
    ) -> Data {
        Data {
            cache,
            writeback,
            block_size,
            locking,
            direct: AtomicBool::new(true),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn open_store(&self, inode: &Inode) -> io::Result<FileStore> {
        inode.with_fd(|fd| {
            let path = proc_path(fd);
            if self.direct.load(Ordering::Relaxed) {
                match FileStore::open_direct(&path) {
                    Ok(s) => return Ok(s),
                    Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                        if self.direct.swap(false, Ordering::Relaxed) {
                            log::info!(
                                "note: {e}; backing files are opened without O_DIRECT \
                                 (the kernel's page cache keeps a second copy of their data)"
                            );
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            FileStore::open(&path)
        })
    }

    /// One more description of `inode`'s cached file, opening the file if
    /// no handle has it open.
    fn acquire(&self, inode: &Inode, name: &str) -> Result<Arc<CachedFile>, Errno> {
        match inode.kind {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Errno::EISDIR),
            // Devices, fifos, sockets: not cached files.
            _ => return Err(Errno::EOPNOTSUPP),
        }
        let mut st = inode.data.lock();
        let now = Seen::of(&inode.stat().map_err(|e| errno(&e))?);
        // Changed behind the mount since the last open or close(2): its
        // cached blocks are not its data any more. (Also checked when other
        // handles are open: the kernel's release of the last one may come
        // after this open. Write-backs of ours while it was open make this
        // drop clean blocks that were still good: only a cost.)
        let changed = st.seen.is_some_and(|seen| seen != now);
        if let Some(file) = &st.file {
            if changed {
                file.invalidate_clean()
                    .map_err(|e| logged_errno("open", &e))?;
            }
            let d = describe(file);
            st.handles += 1;
            st.seen = Some(now);
            return Ok(d);
        }
        let store = self.open_store(inode).map_err(|e| errno(&e))?;
        // The id its blocks had at the last close, so they are found again;
        // a file never opened gets a fresh one from the file layer (ids are
        // the file layer's to give: it re-keys files itself).
        let mut builder = CachedFile::builder(Arc::clone(&self.cache), store)
            .block_size(self.block_size)
            .locking(self.locking)
            .write_back(Arc::clone(&self.writeback))
            .name(name.to_string());
        if let Some(object) = st.object {
            builder = builder.object_id(object);
        }
        let file = builder.open().map_err(|e| errno(&e))?;
        // (A file whose earlier write-back is still being retried is that
        // same state, dirty blocks and all: those stay, being newer.)
        if changed {
            file.invalidate_clean()
                .map_err(|e| logged_errno("open", &e))?;
        }
        let file = Arc::new(file);
        st.seen = Some(now);
        st.object = Some(file.object_id());
        st.file = Some(Arc::clone(&file));
        st.handles = 1;
        Ok(describe(&file))
    }

    /// Gives back a description from [`Data::acquire`]; the last one
    /// closes the cached file: synced if the file still has a name, else
    /// marked unlinked, so its dirty blocks are dropped and its backing
    /// file closed (its space is freed).
    fn put(&self, table: &InodeTable, inode: &Inode, file: Arc<CachedFile>) -> io::Result<()> {
        let (result, retire) = {
            let mut st = inode.data.lock();
            st.handles = st.handles.saturating_sub(1);
            let last = st.handles == 0;
            let primary = if last { st.file.take() } else { None };
            if let Some(p) = &primary {
                // Truncation may have re-keyed it.
                st.object = Some(p.object_id());
            }
            let unlinked = last && inode.unlinked();
            let result = match (last, unlinked) {
                (true, false) => close_description(file),
                (true, true) => {
                    file.set_unlinked(true);
                    drop(file);
                    Ok(())
                }
                // Its errors were reported by flush (close(2)).
                (false, _) => {
                    drop(file);
                    Ok(())
                }
            };
            drop(primary);
            if last {
                st.suspect |= result.is_err();
                st.errors_at_close = self.writeback.stats().write_errors;
            }
            (result, unlinked)
        };
        if retire {
            table.retire(inode);
        }
        table.drop_if_unused(inode.ino);
        result
    }

    /// The last name of `inode`, which no handle has open, was removed:
    /// if the file layer still holds the file (closed files stay with the
    /// flusher until its next pass, and a failed write-back, on a full
    /// backing filesystem, is retried), its dirty blocks are dropped and its
    /// backing file closed now, so removing it frees the space at once.
    pub fn forget_unlinked(&self, inode: &Inode) {
        if inode.kind != FileType::RegularFile {
            return;
        }
        let st = inode.data.lock();
        // Never opened through this inode and nothing dirty anywhere: the
        // file layer cannot be holding it.
        if st.busy() || (st.object.is_none() && self.writeback.stats().dirty_bytes == 0) {
            return;
        }
        let Ok(store) = self.open_store(inode) else {
            return;
        };
        // A live state of the same (dev, ino) comes back as a description.
        if let Ok(file) = CachedFile::builder(Arc::clone(&self.cache), store)
            .block_size(self.block_size)
            .locking(self.locking)
            .write_back(Arc::clone(&self.writeback))
            .open()
        {
            file.set_unlinked(true);
            drop(file);
        }
        drop(st);
    }

    /// Opens a handle of `inode` (`truncate`: `O_TRUNC`).
    pub fn open(
        &self,
        table: &InodeTable,
        inode: &Arc<Inode>,
        truncate: bool,
        name: &str,
    ) -> Result<u64, Errno> {
        let file = self.acquire(inode, name)?;
        if truncate {
            if let Err(e) = file.set_len(0) {
                let _ = self.put(table, inode, file);
                return Err(logged_errno("truncate", &e));
            }
        }
        let errors = self.writeback.stats().write_errors;
        let errors_seen = {
            let st = inode.data.lock();
            if st.suspect || (st.handles == 1 && errors != st.errors_at_close) {
                u64::MAX
            } else {
                errors
            }
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let handle = Arc::new(Handle {
            inode: Arc::clone(inode),
            file,
            errors_seen: AtomicU64::new(errors_seen),
        });
        self.handles.lock().insert(fh, handle);
        Ok(fh)
    }

    pub fn handle(&self, fh: u64) -> Result<Arc<Handle>, Errno> {
        self.handles.lock().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    pub fn release(&self, table: &InodeTable, fh: u64) -> Result<(), Errno> {
        let handle = self.handles.lock().remove(&fh).ok_or(Errno::EBADF)?;
        // (The kernel sends release after every request of the handle was
        // answered, so this is the only reference; if not, the description
        // closes when the last one goes.)
        let (inode, file) = (Arc::clone(&handle.inode), Arc::clone(&handle.file));
        drop(handle);
        self.put(table, &inode, file)
            .map_err(|e| logged_errno("close", &e))
    }

    /// `close(2)` of one descriptor of the handle: write back what this
    /// file has dirty (or report a write-back error since the last sync),
    /// so the error reaches the closing process (as NFS reports it).
    pub fn flush(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handle(fh)?;
        let errors = self.writeback.stats().write_errors;
        if h.file.dirty_bytes() > 0 || errors != h.errors_seen.load(Ordering::Relaxed) {
            h.errors_seen.store(errors, Ordering::Relaxed);
            self.sync(&h).map_err(|e| logged_errno("close", &e))?;
        }
        // What the backing file looks like now that this close has written
        // it: a change after this (the kernel's release comes later, maybe
        // after another program changed the file) is seen at the next open.
        if let Ok(now) = h.inode.stat() {
            h.inode.data.lock().seen = Some(Seen::of(&now));
        }
        Ok(())
    }

    pub fn fsync(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handle(fh)?;
        h.errors_seen
            .store(self.writeback.stats().write_errors, Ordering::Relaxed);
        self.sync(&h).map_err(|e| logged_errno("fsync", &e))?;
        // The backing file as our sync left it (see `flush`).
        if let Ok(now) = h.inode.stat() {
            h.inode.data.lock().seen = Some(Seen::of(&now));
        }
        Ok(())
    }

    /// Syncs a handle's description, noting on its inode whether the file
    /// is known to have a failed write-back.
    fn sync(&self, h: &Handle) -> io::Result<()> {
        let r = h.file.sync_all();
        h.inode.data.lock().suspect = r.is_err();
        r
    }

    /// The cached length of `inode` while it is open (it may be ahead of
    /// the backing file's).
    pub fn len_if_open(&self, inode: &Inode) -> Option<u64> {
        inode.data.lock().file.as_ref().map(|f| f.len())
    }

    /// Truncates or extends `inode` to `size`: through the handle if the
    /// kernel names one, else through the open file, else by opening it
    /// (so cached blocks past the new end go too).
    pub fn set_len(
        &self,
        table: &InodeTable,
        inode: &Arc<Inode>,
        fh: Option<u64>,
        size: u64,
        name: &str,
    ) -> Result<(), Errno> {
        if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
            return h
                .file
                .set_len(size)
                .map_err(|e| logged_errno("truncate", &e));
        }
        let file = self.acquire(inode, name)?;
        let resized = file.set_len(size).map_err(|e| logged_errno("truncate", &e));
        let closed = self.put(table, inode, file);
        resized?;
        closed.map_err(|e| logged_errno("truncate", &e))
    }

    pub fn open_handles(&self) -> usize {
        self.handles.lock().len()
    }

    /// Syncs every open file and writes back everything dirty; returns the
    /// first error.
    pub fn flush_everything(&self) -> io::Result<()> {
        let files: Vec<Arc<CachedFile>> = self
            .handles
            .lock()
            .values()
            .map(|h| Arc::clone(&h.file))
            .collect();
        let mut first = Ok(());
        for f in files {
            if let Err(e) = f.sync_all() {
                log::error!("{e}");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        if let Err(e) = self.writeback.flush_all() {
            log::error!("{e}");
            if first.is_ok() {
                first = Err(e);
            }
        }
        first
    }
}
