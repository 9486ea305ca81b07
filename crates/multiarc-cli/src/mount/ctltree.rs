//! The mount's virtual control directory `.multiarc/`: statistics
//! (`arcstats`, `lockstat`) and tunables (`tunables/max_bytes`,
//! `tunables/lockstat`). Its inodes are fixed numbers below
//! [`super::inodes::FIRST_INO`].

use super::inodes::INO_ROOT;
use fuser::{Errno, FileAttr, FileType, INodeNo};
use multiarc::{BlockKey, Cache};
use multiarc_file::WriteBack;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// Name of the control directory at the root of the mount.
pub const CTL_DIR: &str = ".multiarc";
/// The statistics file in the control directory.
pub const ARCSTATS: &str = "arcstats";
/// The directory of writable tunables in the control directory.
pub const TUNABLES: &str = "tunables";
/// The cache-size tunable.
pub const MAX_BYTES: &str = "max_bytes";
/// The lock statistics report in the control directory (illumos lockstat's
/// table: per lock class and instance, acquisitions, contention, waits).
pub const LOCKSTAT: &str = "lockstat";

pub const INO_CTL: u64 = 2;
const INO_ARCSTATS: u64 = 3;
const INO_TUNABLES: u64 = 4;
const INO_MAX_BYTES: u64 = 5;
const INO_LOCKSTAT: u64 = 6;
/// `tunables/lockstat`: 1 starts recording lock statistics (from zero), 0 stops.
const INO_LOCKSTAT_ON: u64 = 7;

/// Whether `ino` is one of the control tree's (not the root's).
pub fn is_ctl(ino: u64) -> bool {
    (INO_CTL..super::inodes::FIRST_INO).contains(&ino)
}

/// The control tree.
pub struct CtlTree {
    cache: Arc<Cache<BlockKey>>,
    writeback: Arc<WriteBack>,
    /// Contents of open control files, taken at open (as /proc's seq files
    /// do), so a reader that reads in pieces sees one consistent text.
    open: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next_fh: AtomicU64,
    /// Whether `tunables/lockstat` turned lock statistics on.
    lockstat_on: AtomicBool,
    started: SystemTime,
    uid: u32,
    gid: u32,
}

impl CtlTree {
    pub fn new(cache: Arc<Cache<BlockKey>>, writeback: Arc<WriteBack>) -> CtlTree {
        CtlTree {
            cache,
            writeback,
            open: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            lockstat_on: AtomicBool::new(false),
            started: SystemTime::now(),
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// The control inode `name` in `parent`: `None` where the name is not
    /// the control tree's, `Some(Err)` for a missing name inside it.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Option<Result<u64, Errno>> {
        Some(Ok(match (parent, name) {
            (INO_ROOT, n) if n == CTL_DIR.as_bytes() => INO_CTL,
            (INO_CTL, n) if n == ARCSTATS.as_bytes() => INO_ARCSTATS,
            (INO_CTL, n) if n == TUNABLES.as_bytes() => INO_TUNABLES,
            (INO_TUNABLES, n) if n == MAX_BYTES.as_bytes() => INO_MAX_BYTES,
            (INO_CTL, n) if n == LOCKSTAT.as_bytes() => INO_LOCKSTAT,
            (INO_TUNABLES, n) if n == LOCKSTAT.as_bytes() => INO_LOCKSTAT_ON,
            (p, _) if is_ctl(p) => return Some(Err(Errno::ENOENT)),
            _ => return None,
        }))
    }

    pub fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size) = match ino {
            INO_CTL | INO_TUNABLES => (FileType::Directory, 0o555, 0),
            INO_ARCSTATS | INO_LOCKSTAT => (FileType::RegularFile, 0o444, 0),
            _ => (FileType::RegularFile, 0o644, 0),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The text of the statistics file: `name value` per line; `extra` are
    /// the filesystem's own figures.
    pub fn arcstats(&self, extra: &[(&str, u64)]) -> String {
        let mut out = String::new();
        for (name, value) in self.cache.stats().to_pairs() {
            out.push_str(&format!("{name} {value}\n"));
        }
        let w = self.writeback.stats();
        for (name, value) in [
            ("dirty_bytes", w.dirty_bytes),
            ("dirty_max", w.dirty_max),
            ("flushed_blocks", w.flushed_blocks),
            ("flushed_bytes", w.flushed_bytes),
            ("write_errors", w.write_errors),
            ("writer_waits", w.writer_waits),
            ("flusher_passes", w.passes),
        ]
        .iter()
        .chain(extra)
        {
            out.push_str(&format!("{name} {value}\n"));
        }
        out
    }

    fn read_text(&self, ino: u64, extra: &[(&str, u64)]) -> Result<String, Errno> {
        match ino {
            INO_ARCSTATS => Ok(self.arcstats(extra)),
            INO_MAX_BYTES => Ok(format!("{}\n", self.cache.stats().c)),
            INO_LOCKSTAT => Ok(if self.lockstat_on.load(Ordering::Relaxed) {
                crate::lockstat::table(&multiarc::lock::lockstat::snapshot(), 20)
            } else {
                "lock statistics are off: echo 1 > .multiarc/tunables/lockstat\n".into()
            }),
            INO_LOCKSTAT_ON => Ok(format!(
                "{}\n",
                u8::from(self.lockstat_on.load(Ordering::Relaxed))
            )),
            _ => Err(Errno::EISDIR),
        }
    }

    /// Opens a control file; returns its handle.
    pub fn open(&self, ino: u64, flags: i32, extra: &[(&str, u64)]) -> Result<u64, Errno> {
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        match ino {
            INO_CTL | INO_TUNABLES => Err(Errno::EISDIR),
            INO_ARCSTATS | INO_LOCKSTAT if writing => Err(Errno::EACCES),
            _ => {
                let text = self.read_text(ino, extra)?;
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.open.lock().insert(fh, Arc::new(text.into_bytes()));
                Ok(fh)
            }
        }
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let text = self.open.lock().get(&fh).cloned().ok_or(Errno::EBADF)?;
        let b = &text[..];
        let start = (offset as usize).min(b.len());
        let end = start.saturating_add(size as usize).min(b.len());
        Ok(b[start..end].to_vec())
    }

    pub fn release(&self, fh: u64) {
        self.open.lock().remove(&fh);
    }

    pub fn write(&self, ino: u64, data: &[u8]) -> Result<(), Errno> {
        if ino == INO_LOCKSTAT_ON {
            let on = match std::str::from_utf8(data).map(str::trim) {
                Ok("1") => true,
                Ok("0") => false,
                _ => return Err(Errno::EINVAL),
            };
            if on {
                multiarc::lock::lockstat::reset();
            }
            self.cache.set_lockstat(on);
            self.lockstat_on.store(on, Ordering::Relaxed);
            return Ok(());
        }
        if ino != INO_MAX_BYTES {
            return Err(Errno::EACCES);
        }
        let text = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
        let bytes = crate::util::parse_size(text).map_err(|_| Errno::EINVAL)?;
        let (bytes, warning) = crate::util::clamp_cache_target(bytes);
        if let Some(w) = warning {
            eprintln!("multiarc: warning: tunables/max_bytes: {w}");
        }
        self.cache.set_max_bytes(bytes).map_err(|_| Errno::EINVAL)
    }

    /// `setattr` on a control file: truncating (before writing a tunable)
    /// is fine; nothing else.
    pub fn setattr(&self, ino: u64, changes_owner_or_mode: bool) -> Result<FileAttr, Errno> {
        if changes_owner_or_mode {
            return Err(Errno::EPERM);
        }
        Ok(self.attr(ino))
    }

    /// Entries of a control directory (`.` and `..` first).
    pub fn entries(&self, ino: u64) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        let dir = |name: &str, ino| (ino, FileType::Directory, name.as_bytes().to_vec());
        match ino {
            INO_CTL => Ok(vec![
                dir(".", INO_CTL),
                dir("..", INO_ROOT),
                (INO_ARCSTATS, FileType::RegularFile, ARCSTATS.into()),
                (INO_LOCKSTAT, FileType::RegularFile, LOCKSTAT.into()),
                dir(TUNABLES, INO_TUNABLES),
            ]),
            INO_TUNABLES => Ok(vec![
                dir(".", INO_TUNABLES),
                dir("..", INO_CTL),
                (INO_MAX_BYTES, FileType::RegularFile, MAX_BYTES.into()),
                (INO_LOCKSTAT_ON, FileType::RegularFile, LOCKSTAT.into()),
            ]),
            _ => Err(Errno::ENOTDIR),
        }
    }
}
