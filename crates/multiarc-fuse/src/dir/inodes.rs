//! The inode table of `multiarc mount`: files identified by what they are,
//! not by a path (libfuse's `passthrough_ll` design).
//!
//! Every FUSE inode keeps an `O_PATH` descriptor of its backing object and
//! that object's `(st_dev, st_ino)`. A lookup opens the name relative to its
//! parent's descriptor (`openat(parent, name, O_PATH|O_NOFOLLOW)`) and
//! finds the inode by its key, so every name of a hard-linked file is one
//! FUSE inode, and a rename, a link or an unlink never makes an inode point
//! at another object: operations on an inode use its descriptor (metadata
//! through `/proc/self/fd/N` or `AT_EMPTY_PATH`, data by reopening it).
//! While the descriptor is held the backing filesystem cannot reuse the
//! inode number, so a key never names two objects at once.

use super::file_state::DataState;
use super::sys::{kind_of_mode, Key};
use crate::control::{FIRST_INO, INO_ROOT};
use fuser::FileType;
use parking_lot::{Mutex, RwLock};
use rustix::fs::{Mode, OFlags};
use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

/// One FUSE inode: a backing object the kernel knows.
pub struct Inode {
    pub ino: u64,
    pub key: Key,
    pub kind: FileType,
    /// `O_PATH` descriptor of the backing object; `None` once the object is
    /// gone (its last name removed and nothing open), so that its space is
    /// freed at once rather than when the kernel forgets the inode.
    fd: RwLock<Option<OwnedFd>>,
    /// The cached file while handles are open, and what is remembered
    /// between opens (regular files only).
    pub data: Mutex<DataState>,
}

impl Inode {
    /// Runs `f` with the inode's descriptor; ENOENT once the object is gone.
    pub fn with_fd<T>(&self, f: impl FnOnce(&OwnedFd) -> io::Result<T>) -> io::Result<T> {
        // (Two may be held at once: rename and link hold a directory's and
        // another inode's. Only regular files are ever retired, and no
        // operation holds a regular file's descriptor after a directory's,
        // so a waiting `retire` cannot close a cycle.)
        match &*self.fd.read() {
            Some(fd) => f(fd),
            None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    /// `fstat` of the backing object.
    pub fn stat(&self) -> io::Result<rustix::fs::Stat> {
        self.with_fd(|fd| Ok(rustix::fs::fstat(fd)?))
    }

    /// Whether the backing object has no name left.
    pub fn unlinked(&self) -> bool {
        self.stat().map(|s| s.st_nlink == 0).unwrap_or(true)
    }
}

struct Entry {
    inode: Arc<Inode>,
    /// Lookups the kernel has not forgotten yet.
    lookups: u64,
}

/// FUSE inode numbers to inodes, and backing keys to FUSE inode numbers.
pub struct InodeTable {
    inner: Mutex<Tables>,
    root_dev: u64,
}

struct Tables {
    by_ino: HashMap<u64, Entry>,
    by_key: HashMap<Key, u64>,
    /// Next number to try for objects whose own inode number is unusable.
    next_spare: u64,
}

/// Numbers handed out when a backing inode number cannot be used as is
/// (another device, a number below `FIRST_INO`, or already taken).
const SPARE_BASE: u64 = 1 << 62;

impl InodeTable {
    /// A table holding only the root, `root` (the backing directory).
    pub fn new(root: &Path) -> io::Result<InodeTable> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        let key = (st.st_dev, st.st_ino);
        let root = Arc::new(Inode {
            ino: INO_ROOT,
            key,
            kind: FileType::Directory,
            fd: RwLock::new(Some(fd)),
            data: Mutex::new(DataState::default()),
        });
        let mut by_ino = HashMap::new();
        by_ino.insert(
            INO_ROOT,
            Entry {
                inode: root,
                lookups: 1,
            },
        );
        let mut by_key = HashMap::new();
        by_key.insert(key, INO_ROOT);
        Ok(InodeTable {
            inner: Mutex::new(Tables {
                by_ino,
                by_key,
                next_spare: SPARE_BASE,
            }),
            root_dev: st.st_dev,
        })
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Inode>> {
        self.inner
            .lock()
            .by_ino
            .get(&ino)
            .map(|e| Arc::clone(&e.inode))
    }

    /// The inode of the object `key`, if the kernel knows it.
    pub fn by_key(&self, key: Key) -> Option<Arc<Inode>> {
        let t = self.inner.lock();
        let ino = t.by_key.get(&key)?;
        t.by_ino.get(ino).map(|e| Arc::clone(&e.inode))
    }

    /// The number `readdir` reports for `(dev, d_ino)`: the inode's if the
    /// kernel knows it, else the number a lookup would most likely give.
    pub fn readdir_ino(&self, key: Key) -> u64 {
        let t = self.inner.lock();
        match t.by_key.get(&key) {
            Some(&ino) => ino,
            None if key.0 == self.root_dev && key.1 >= FIRST_INO && key.1 < SPARE_BASE => key.1,
            None => key.1 | SPARE_BASE,
        }
    }

    /// Registers one kernel lookup of the object behind `fd` (an `O_PATH`
    /// descriptor): the known inode if its key is in the table (then `fd` is
    /// closed), else a new inode keeping `fd`.
    pub fn lookup_fd(&self, fd: OwnedFd) -> io::Result<Arc<Inode>> {
        let st = rustix::fs::fstat(&fd)?;
        let key = (st.st_dev, st.st_ino);
        let mut t = self.inner.lock();
        if let Some(&ino) = t.by_key.get(&key) {
            let e = t.by_ino.get_mut(&ino).expect("by_key and by_ino agree");
            e.lookups += 1;
            return Ok(Arc::clone(&e.inode));
        }
        let preferred = key.1;
        let ino = if st.st_dev == self.root_dev
            && (FIRST_INO..SPARE_BASE).contains(&preferred)
            && !t.by_ino.contains_key(&preferred)
        {
            preferred
        } else {
            loop {
                let n = t.next_spare;
                t.next_spare = if n == u64::MAX { SPARE_BASE } else { n + 1 };
                if !t.by_ino.contains_key(&n) {
                    break n;
                }
            }
        };
        let inode = Arc::new(Inode {
            ino,
            key,
            kind: kind_of_mode(st.st_mode),
            fd: RwLock::new(Some(fd)),
            data: Mutex::new(DataState::default()),
        });
        t.by_ino.insert(
            ino,
            Entry {
                inode: Arc::clone(&inode),
                lookups: 1,
            },
        );
        t.by_key.insert(key, ino);
        Ok(inode)
    }

    /// One more kernel reference to a known inode (a hard link's entry).
    pub fn add_lookup(&self, ino: u64) {
        if let Some(e) = self.inner.lock().by_ino.get_mut(&ino) {
            e.lookups += 1;
        }
    }

    /// The kernel forgot `n` lookups of `ino`; the inode goes (and its
    /// descriptor is closed) when none is left and no handle is open.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == INO_ROOT {
            return;
        }
        let mut t = self.inner.lock();
        let Some(e) = t.by_ino.get_mut(&ino) else {
            return;
        };
        e.lookups = e.lookups.saturating_sub(n);
        if e.lookups > 0 || e.inode.data.lock().busy() {
            return;
        }
        let e = t.by_ino.remove(&ino).expect("present");
        if t.by_key.get(&e.inode.key) == Some(&ino) {
            t.by_key.remove(&e.inode.key);
        }
    }

    /// Closes the descriptor of an object with no name left and nothing of
    /// it open, so the backing filesystem frees it now, not when the kernel
    /// forgets the inode. Its key leaves the table first: once the
    /// descriptor is closed the backing filesystem may give the number to a
    /// new object, which must get a new inode (and no cached block of this
    /// one).
    pub fn retire(&self, inode: &Inode) {
        {
            let mut t = self.inner.lock();
            if t.by_key.get(&inode.key) == Some(&inode.ino) {
                t.by_key.remove(&inode.key);
            }
        }
        inode.fd.write().take();
    }

    /// After the last handle of `ino` closed: drop the inode if the kernel
    /// has already forgotten it.
    pub fn drop_if_unused(&self, ino: u64) {
        self.forget(ino, 0);
    }

    /// Number of inodes (for the statistics).
    pub fn len(&self) -> usize {
        self.inner.lock().by_ino.len()
    }

    pub fn root(&self) -> Arc<Inode> {
        self.get(INO_ROOT).expect("the root is never forgotten")
    }
}
