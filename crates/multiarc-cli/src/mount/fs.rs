//! The FUSE filesystem of `multiarc mount`: a passthrough of a backing
//! directory whose file data goes through one [`CachedFile`] per open inode,
//! plus the virtual control directory `.multiarc/`.
//!
//! Inodes are numbered by us (the backing filesystem's numbers could collide
//! with the root's 1 and the control files' fixed numbers) and map to paths
//! relative to the backing directory; renames rewrite them. Metadata goes
//! straight to the backing directory; data of regular files goes through the
//! cache, opened with `FOPEN_DIRECT_IO` so the kernel's page cache is not a
//! second copy. A file's `CachedFile` lives while any handle of its inode is
//! open and is synced when the last one is released.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use multiarc::file::{CachedFile, FileStore, Locking, WriteBack};
use multiarc::{BlockKey, Cache};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

const INO_ROOT: u64 = 1;
const INO_CTL: u64 = 2;
const INO_ARCSTATS: u64 = 3;
const INO_TUNABLES: u64 = 4;
const INO_MAX_BYTES: u64 = 5;
const INO_LOCKSTAT: u64 = 6;
/// `tunables/lockstat`: 1 starts recording lock statistics (from zero), 0 stops.
const INO_LOCKSTAT_ON: u64 = 7;
/// First inode number given to backing files.
const FIRST_INO: u64 = 16;

/// How long the kernel may trust names and attributes of backing files.
/// Every change goes through us, so this only bounds staleness from changes
/// made to the backing directory behind the mount's back.
const TTL: Duration = Duration::from_secs(1);
/// Control files change all the time.
const CTL_TTL: Duration = Duration::ZERO;

/// Settings of the mount's files.
#[derive(Clone, Debug)]
pub struct FsConfig {
    pub root: PathBuf,
    pub block_size: usize,
    pub locking: Locking,
}

struct Node {
    /// Relative to the backing root; empty for the root.
    path: PathBuf,
    lookups: u64,
    /// The cache object id of the file's blocks, kept across closes so that
    /// reopening finds them cached (see `open_file`). Inode numbers are never
    /// reused, so the inode number is a safe first id.
    object: Option<u64>,
}

#[derive(Default)]
struct Inodes {
    nodes: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    /// The inode of `path`, created if new; `lookup` counts a kernel lookup.
    fn get_or_insert(&mut self, path: &Path, lookup: bool) -> u64 {
        let add = u64::from(lookup);
        if let Some(&ino) = self.by_path.get(path) {
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.lookups += add;
            }
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                path: path.to_path_buf(),
                lookups: add,
                object: None,
            },
        );
        self.by_path.insert(path.to_path_buf(), ino);
        ino
    }

    fn path(&self, ino: u64) -> Option<PathBuf> {
        self.nodes.get(&ino).map(|n| n.path.clone())
    }

    /// `path` no longer names its inode (unlinked or replaced).
    fn unlink(&mut self, path: &Path) {
        self.by_path.remove(path);
    }

    /// Everything at or below `from` moves to `to`.
    fn rename(&mut self, from: &Path, to: &Path) {
        self.by_path.remove(to);
        let moved: Vec<(u64, PathBuf)> = self
            .nodes
            .iter()
            .filter_map(|(&ino, n)| {
                let rest = n.path.strip_prefix(from).ok()?;
                Some((
                    ino,
                    if rest.as_os_str().is_empty() {
                        to.to_path_buf()
                    } else {
                        to.join(rest)
                    },
                ))
            })
            .collect();
        for (ino, new) in moved {
            let node = self.nodes.get_mut(&ino).expect("listed above");
            if self.by_path.get(&node.path) == Some(&ino) {
                self.by_path.remove(&node.path);
            }
            self.by_path.insert(new.clone(), ino);
            node.path = new;
        }
    }

    fn exchange(&mut self, a: &Path, b: &Path) {
        let tmp = PathBuf::from("\0exchange");
        self.rename(a, &tmp);
        self.rename(b, a);
        self.rename(&tmp, b);
    }
}

/// The changes a `setattr` asks for.
struct SetAttr {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

struct OpenFile {
    file: Arc<CachedFile>,
    /// A descriptor of the backing file for `fstat` (works after unlink).
    meta: File,
    opens: u64,
}

/// The filesystem.
pub struct MultiarcFs {
    config: FsConfig,
    cache: Arc<Cache<BlockKey>>,
    writeback: Arc<WriteBack>,
    inodes: Mutex<Inodes>,
    open: Mutex<HashMap<u64, OpenFile>>,
    /// Contents of open control files, taken at open (as /proc's seq files
    /// do), so a reader that reads in pieces sees one consistent text.
    ctl_open: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next_ctl_fh: AtomicU64,
    /// Whether `tunables/lockstat` turned lock statistics on.
    lockstat_on: std::sync::atomic::AtomicBool,
    /// Whether backing files are opened with `O_DIRECT` (cleared, with a
    /// note, the first time the backing filesystem refuses it).
    direct: AtomicBool,
    started: SystemTime,
    uid: u32,
    gid: u32,
}

/// The errno for an I/O error: its OS code, else one matching its kind.
fn errno(e: &io::Error) -> Errno {
    if let Some(code) = multiarc::file::os_error_code(e) {
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
fn logged_errno(op: &str, e: &io::Error) -> Errno {
    eprintln!("multiarc: {op}: {e}");
    errno(e)
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::new(secs.unsigned_abs(), 0) + Duration::new(0, nsecs as u32)
    }
}

fn kind_of(m: &Metadata) -> FileType {
    FileType::from_std(m.file_type()).unwrap_or(FileType::RegularFile)
}

fn cpath(p: &Path) -> Result<CString, Errno> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

fn check(rc: libc::c_int) -> Result<(), Errno> {
    if rc == 0 {
        Ok(())
    } else {
        Err(errno(&io::Error::last_os_error()))
    }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        }
    }
}

/// Open flags for data files: no page cache; parallel direct writes (the
/// file's own locking mode decides what may overlap).
fn data_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

impl MultiarcFs {
    pub fn new(config: FsConfig, cache: Arc<Cache<BlockKey>>, writeback: Arc<WriteBack>) -> Self {
        let mut inodes = Inodes {
            next: FIRST_INO,
            ..Inodes::default()
        };
        inodes.nodes.insert(
            INO_ROOT,
            Node {
                path: PathBuf::new(),
                lookups: 1,
                object: None,
            },
        );
        inodes.by_path.insert(PathBuf::new(), INO_ROOT);
        MultiarcFs {
            config,
            cache,
            writeback,
            inodes: Mutex::new(inodes),
            open: Mutex::new(HashMap::new()),
            ctl_open: Mutex::new(HashMap::new()),
            next_ctl_fh: AtomicU64::new(1),
            lockstat_on: std::sync::atomic::AtomicBool::new(false),
            direct: AtomicBool::new(true),
            started: SystemTime::now(),
            // SAFETY: getuid/getgid cannot fail.
            uid: unsafe { libc::geteuid() },
            gid: unsafe { libc::getegid() },
        }
    }

    fn real(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.config.root.clone()
        } else {
            self.config.root.join(rel)
        }
    }

    fn path_of(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.inodes.lock().path(ino).ok_or(Errno::ENOENT)
    }

    /// The backing path of `name` in directory `parent` (relative).
    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        if is_ctl(parent) {
            return Err(Errno::EACCES);
        }
        if parent == INO_ROOT && name == CTL_DIR {
            return Err(Errno::EACCES);
        }
        Ok(self.path_of(parent)?.join(name))
    }

    fn attr_from(&self, ino: u64, m: &Metadata) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: m.size(),
            blocks: m.blocks(),
            atime: time(m.atime(), m.atime_nsec()),
            mtime: time(m.mtime(), m.mtime_nsec()),
            ctime: time(m.ctime(), m.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind_of(m),
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            blksize: self.config.block_size as u32,
            flags: 0,
        }
    }

    /// Attributes of a backing inode: from the open file if there is one
    /// (its size may be ahead of the backing file), else from the path.
    fn stat(&self, ino: u64) -> Result<FileAttr, Errno> {
        {
            let open = self.open.lock();
            if let Some(of) = open.get(&ino) {
                let m = of.meta.metadata().map_err(|e| errno(&e))?;
                let mut a = self.attr_from(ino, &m);
                a.size = of.file.len();
                a.blocks = a.blocks.max(a.size.div_ceil(512));
                return Ok(a);
            }
        }
        let path = self.path_of(ino)?;
        let m = fs::symlink_metadata(self.real(&path)).map_err(|e| errno(&e))?;
        Ok(self.attr_from(ino, &m))
    }

    /// Registers a looked-up (or created) `path` and returns its attributes.
    fn lookup_path(&self, path: &Path) -> Result<FileAttr, Errno> {
        fs::symlink_metadata(self.real(path)).map_err(|e| errno(&e))?;
        let ino = self.inodes.lock().get_or_insert(path, true);
        self.stat(ino)
    }

    fn ctl_attr(&self, ino: u64) -> FileAttr {
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

    /// The text of the statistics file: `name value` per line.
    pub fn arcstats(&self) -> String {
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
            ("open_files", self.open.lock().len() as u64),
            ("block_size", self.config.block_size as u64),
        ] {
            out.push_str(&format!("{name} {value}\n"));
        }
        out
    }

    fn ctl_read(&self, ino: u64) -> Result<String, Errno> {
        match ino {
            INO_ARCSTATS => Ok(self.arcstats()),
            INO_MAX_BYTES => Ok(format!("{}\n", self.cache.stats().c)),
            INO_LOCKSTAT => Ok(if self.lockstat_on.load(Ordering::Relaxed) {
                multiarc::lock::lockstat::snapshot().to_table(20)
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

    fn ctl_write(&self, ino: u64, data: &[u8]) -> Result<(), Errno> {
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
        self.cache.set_max_bytes(bytes).map_err(|_| Errno::EINVAL)
    }

    fn open_store(&self, real: &Path) -> io::Result<FileStore> {
        if self.direct.load(Ordering::Relaxed) {
            match FileStore::open_direct(real) {
                Ok(s) => return Ok(s),
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    if self.direct.swap(false, Ordering::Relaxed) {
                        eprintln!(
                            "multiarc: note: {e}; backing files are opened without O_DIRECT \
                             (the kernel's page cache keeps a second copy of their data)"
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        FileStore::open(real)
    }

    /// Opens (or shares) the cached file of `ino`, counting one more handle.
    fn open_file(&self, ino: u64, path: &Path) -> Result<Arc<CachedFile>, Errno> {
        let mut open = self.open.lock();
        if let Some(of) = open.get_mut(&ino) {
            of.opens += 1;
            return Ok(Arc::clone(&of.file));
        }
        let real = self.real(path);
        let m = fs::symlink_metadata(&real).map_err(|e| errno(&e))?;
        if m.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !m.is_file() {
            // Devices, fifos, sockets: not cached files.
            return Err(Errno::EOPNOTSUPP);
        }
        let meta = File::open(&real).map_err(|e| errno(&e))?;
        let store = self.open_store(&real).map_err(|e| errno(&e))?;
        let object = self
            .inodes
            .lock()
            .nodes
            .get(&ino)
            .and_then(|n| n.object)
            .unwrap_or(ino);
        let file = CachedFile::builder(Arc::clone(&self.cache), store)
            .object_id(object)
            .block_size(self.config.block_size)
            .locking(self.config.locking)
            .write_back(Arc::clone(&self.writeback))
            .name(real.display().to_string())
            .open()
            .map_err(|e| errno(&e))?;
        let file = Arc::new(file);
        open.insert(
            ino,
            OpenFile {
                file: Arc::clone(&file),
                meta,
                opens: 1,
            },
        );
        Ok(file)
    }

    fn file(&self, ino: u64) -> Result<Arc<CachedFile>, Errno> {
        self.open
            .lock()
            .get(&ino)
            .map(|of| Arc::clone(&of.file))
            .ok_or(Errno::EBADF)
    }

    /// Releases one handle of `ino`; the last one syncs and closes the file.
    fn release_file(&self, ino: u64) -> Result<(), Errno> {
        let last = {
            let mut open = self.open.lock();
            match open.get_mut(&ino) {
                None => return Err(Errno::EBADF),
                Some(of) if of.opens > 1 => {
                    of.opens -= 1;
                    return Ok(());
                }
                Some(of) => Arc::clone(&of.file),
            }
        };
        // Sync outside the table's lock; a new open meanwhile shares the file.
        let synced = last.sync_all();
        drop(last);
        let closing = {
            let mut open = self.open.lock();
            let of = open.get_mut(&ino).ok_or(Errno::EBADF)?;
            of.opens -= 1;
            if of.opens == 0 {
                open.remove(&ino)
            } else {
                None
            }
        };
        // Remember where the blocks are cached for the next open.
        if let Some(of) = &closing {
            if let Some(n) = self.inodes.lock().nodes.get_mut(&ino) {
                n.object = Some(of.file.object_id());
            }
        }
        // Dropping the last reference writes back anything written since the
        // sync (nothing: no handle was open) and closes the file.
        drop(closing);
        self.forget_if_unused(ino);
        synced.map_err(|e| logged_errno("close", &e))
    }

    fn forget_if_unused(&self, ino: u64) {
        if ino < FIRST_INO {
            return;
        }
        let open = self.open.lock();
        let mut inodes = self.inodes.lock();
        let unused = inodes
            .nodes
            .get(&ino)
            .is_some_and(|n| n.lookups == 0 && !open.contains_key(&ino));
        if unused {
            let n = inodes.nodes.remove(&ino).expect("checked above");
            if inodes.by_path.get(&n.path) == Some(&ino) {
                inodes.by_path.remove(&n.path);
            }
        }
    }

    /// Syncs every open file and writes back everything dirty; returns the
    /// first error.
    pub fn flush_everything(&self) -> io::Result<()> {
        let files: Vec<Arc<CachedFile>> = self
            .open
            .lock()
            .values()
            .map(|of| Arc::clone(&of.file))
            .collect();
        let mut first = Ok(());
        for f in files {
            if let Err(e) = f.sync_all() {
                eprintln!("multiarc: {e}");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        if let Err(e) = self.writeback.flush_all() {
            eprintln!("multiarc: {e}");
            if first.is_ok() {
                first = Err(e);
            }
        }
        first
    }

    fn do_setattr(&self, ino: u64, set: SetAttr) -> Result<FileAttr, Errno> {
        let SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = set;
        if is_ctl(ino) {
            // Truncating max_bytes before writing it is fine; nothing else.
            if mode.is_some() || uid.is_some() || gid.is_some() {
                return Err(Errno::EPERM);
            }
            return Ok(self.ctl_attr(ino));
        }
        let real = self.real(&self.path_of(ino)?);
        if let Some(mode) = mode {
            fs::set_permissions(&real, fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|e| errno(&e))?;
        }
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::lchown(&real, uid, gid).map_err(|e| errno(&e))?;
        }
        if let Some(size) = size {
            let open = self.open.lock().get(&ino).map(|of| Arc::clone(&of.file));
            match open {
                Some(f) => f.set_len(size).map_err(|e| logged_errno("truncate", &e))?,
                None if fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) => {
                    // Through the cached file, so cached blocks past the new
                    // end go too (they would reappear on a later extension).
                    let f = self.open_file(ino, &self.path_of(ino)?)?;
                    let resized = f.set_len(size).map_err(|e| errno(&e));
                    drop(f);
                    self.release_file(ino)?;
                    resized?;
                }
                None => OpenOptions::new()
                    .write(true)
                    .open(&real)
                    .and_then(|f| f.set_len(size))
                    .map_err(|e| errno(&e))?,
            }
        }
        if atime.is_some() || mtime.is_some() {
            let c = cpath(&real)?;
            let times = [timespec(atime), timespec(mtime)];
            // SAFETY: a valid C string and two timespecs.
            check(unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })?;
        }
        self.stat(ino)
    }

    fn entries(&self, ino: u64) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        let dir = |name: &str, ino| (ino, FileType::Directory, name.as_bytes().to_vec());
        match ino {
            INO_CTL => {
                return Ok(vec![
                    dir(".", INO_CTL),
                    dir("..", INO_ROOT),
                    (INO_ARCSTATS, FileType::RegularFile, ARCSTATS.into()),
                    (INO_LOCKSTAT, FileType::RegularFile, LOCKSTAT.into()),
                    dir(TUNABLES, INO_TUNABLES),
                ])
            }
            INO_TUNABLES => {
                return Ok(vec![
                    dir(".", INO_TUNABLES),
                    dir("..", INO_CTL),
                    (INO_MAX_BYTES, FileType::RegularFile, MAX_BYTES.into()),
                    (INO_LOCKSTAT_ON, FileType::RegularFile, LOCKSTAT.into()),
                ])
            }
            INO_ARCSTATS | INO_MAX_BYTES | INO_LOCKSTAT | INO_LOCKSTAT_ON => {
                return Err(Errno::ENOTDIR)
            }
            _ => {}
        }
        let path = self.path_of(ino)?;
        let mut out = vec![dir(".", ino), dir("..", INO_ROOT)];
        if ino == INO_ROOT {
            out.push(dir(CTL_DIR, INO_CTL));
        }
        let rd = fs::read_dir(self.real(&path)).map_err(|e| errno(&e))?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| errno(&e))?;
            let name = entry.file_name();
            if ino == INO_ROOT && name == CTL_DIR {
                continue; // shadowed by the control directory
            }
            let kind = entry
                .file_type()
                .ok()
                .and_then(FileType::from_std)
                .unwrap_or(FileType::RegularFile);
            names.push((name, kind));
        }
        let mut inodes = self.inodes.lock();
        for (name, kind) in names {
            let child = inodes.get_or_insert(&path.join(&name), false);
            out.push((child, kind, name.as_bytes().to_vec()));
        }
        Ok(out)
    }

    fn make_entry(&self, path: &Path, reply: ReplyEntry) {
        match self.lookup_path(path) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
}

fn is_ctl(ino: u64) -> bool {
    (INO_CTL..FIRST_INO).contains(&ino)
}

impl Filesystem for MultiarcFs {
    fn init(&mut self, _req: &Request, _config: &mut KernelConfig) -> io::Result<()> {
        Ok(())
    }

    fn destroy(&mut self) {
        let _ = self.flush_everything();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ctl = match (parent.0, name.as_bytes()) {
            (INO_ROOT, n) if n == CTL_DIR.as_bytes() => Some(INO_CTL),
            (INO_CTL, n) if n == ARCSTATS.as_bytes() => Some(INO_ARCSTATS),
            (INO_CTL, n) if n == TUNABLES.as_bytes() => Some(INO_TUNABLES),
            (INO_TUNABLES, n) if n == MAX_BYTES.as_bytes() => Some(INO_MAX_BYTES),
            (INO_CTL, n) if n == LOCKSTAT.as_bytes() => Some(INO_LOCKSTAT),
            (INO_TUNABLES, n) if n == LOCKSTAT.as_bytes() => Some(INO_LOCKSTAT_ON),
            (p, _) if is_ctl(p) => return reply.error(Errno::ENOENT),
            _ => None,
        };
        if let Some(ino) = ctl {
            return reply.entry(&CTL_TTL, &self.ctl_attr(ino), Generation(0));
        }
        match self.child(parent.0, name) {
            Ok(path) => self.make_entry(&path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if let Some(n) = self.inodes.lock().nodes.get_mut(&ino.0) {
            n.lookups = n.lookups.saturating_sub(nlookup);
        }
        self.forget_if_unused(ino.0);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if is_ctl(ino.0) {
            return reply.attr(&CTL_TTL, &self.ctl_attr(ino.0));
        }
        match self.stat(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let ttl = if is_ctl(ino.0) { CTL_TTL } else { TTL };
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.do_setattr(ino.0, set) {
            Ok(a) => reply.attr(&ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self
            .path_of(ino.0)
            .and_then(|p| fs::read_link(self.real(&p)).map_err(|e| errno(&e)));
        match r {
            Ok(target) => reply.data(target.as_os_str().as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = self.child(parent.0, name).and_then(|path| {
            let real = self.real(&path);
            if mode & libc::S_IFMT == libc::S_IFREG || mode & libc::S_IFMT == 0 {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode & 0o7777)
                    .open(&real)
                    .map_err(|e| errno(&e))?;
            } else {
                let c = cpath(&real)?;
                // SAFETY: a valid C string.
                check(unsafe { libc::mknod(c.as_ptr(), mode, rdev as libc::dev_t) })?;
            }
            Ok(path)
        });
        match r {
            Ok(path) => self.make_entry(&path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self.child(parent.0, name).and_then(|path| {
            fs::DirBuilder::new()
                .mode(mode & 0o7777)
                .create(self.real(&path))
                .map_err(|e| errno(&e))?;
            Ok(path)
        });
        match r {
            Ok(path) => self.make_entry(&path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent.0, name).and_then(|path| {
            fs::remove_file(self.real(&path)).map_err(|e| errno(&e))?;
            self.inodes.lock().unlink(&path);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent.0, name).and_then(|path| {
            fs::remove_dir(self.real(&path)).map_err(|e| errno(&e))?;
            self.inodes.lock().unlink(&path);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.child(parent.0, link_name).and_then(|path| {
            std::os::unix::fs::symlink(target, self.real(&path)).map_err(|e| errno(&e))?;
            Ok(path)
        });
        match r {
            Ok(path) => self.make_entry(&path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let from = self.child(parent.0, name)?;
            let to = self.child(newparent.0, newname)?;
            let (rf, rt) = (cpath(&self.real(&from))?, cpath(&self.real(&to))?);
            // Hold the inode table across the rename so lookups see either
            // the old names or the new ones.
            let mut inodes = self.inodes.lock();
            // SAFETY: valid C strings.
            check(unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    rf.as_ptr(),
                    libc::AT_FDCWD,
                    rt.as_ptr(),
                    flags.bits(),
                )
            })?;
            if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                inodes.exchange(&from, &to);
            } else {
                inodes.rename(&from, &to);
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let from = self.path_of(ino.0)?;
            let to = self.child(newparent.0, newname)?;
            fs::hard_link(self.real(&from), self.real(&to)).map_err(|e| errno(&e))?;
            // The new name is the same inode: count the lookup on it.
            let mut inodes = self.inodes.lock();
            inodes.by_path.insert(to, ino.0);
            if let Some(n) = inodes.nodes.get_mut(&ino.0) {
                n.lookups += 1;
            }
            drop(inodes);
            self.stat(ino.0)
        })();
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let flags = flags.0;
        if is_ctl(ino.0) {
            let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
            return match ino.0 {
                INO_CTL | INO_TUNABLES => reply.error(Errno::EISDIR),
                INO_ARCSTATS | INO_LOCKSTAT if writing => reply.error(Errno::EACCES),
                _ => match self.ctl_read(ino.0) {
                    Ok(text) => {
                        let fh = self.next_ctl_fh.fetch_add(1, Ordering::Relaxed);
                        self.ctl_open.lock().insert(fh, Arc::new(text.into_bytes()));
                        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
                    }
                    Err(e) => reply.error(e),
                },
            };
        }
        let r = (|| {
            let path = self.path_of(ino.0)?;
            let file = self.open_file(ino.0, &path)?;
            if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
                if let Err(e) = file.set_len(0) {
                    drop(file);
                    let _ = self.release_file(ino.0);
                    return Err(errno(&e));
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.opened(FileHandle(ino.0), data_open_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if is_ctl(ino.0) {
            let text = self.ctl_open.lock().get(&fh.0).cloned();
            return match text.ok_or(Errno::EBADF) {
                Ok(text) => {
                    let b = &text[..];
                    let start = (offset as usize).min(b.len());
                    let end = start.saturating_add(size as usize).min(b.len());
                    reply.data(&b[start..end])
                }
                Err(e) => reply.error(e),
            };
        }
        let r = self.file(ino.0).and_then(|f| {
            let mut buf = vec![0u8; size as usize];
            let n = f
                .read_at(&mut buf, offset)
                .map_err(|e| logged_errno("read", &e))?;
            buf.truncate(n);
            Ok(buf)
        });
        match r {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if is_ctl(ino.0) {
            return match self.ctl_write(ino.0, data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e),
            };
        }
        let r = self.file(ino.0).and_then(|f| {
            f.write_at(data, offset)
                .map_err(|e| logged_errno("write", &e))
        });
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): write back what this file has dirty, so a write-back
        // error reaches the closing process (as NFS reports it at close).
        if is_ctl(ino.0) {
            return reply.ok();
        }
        match self.file(ino.0) {
            Ok(f) if f.dirty_bytes() > 0 => match f.sync_all() {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(logged_errno("close", &e)),
            },
            _ => reply.ok(),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if is_ctl(ino.0) {
            self.ctl_open.lock().remove(&fh.0);
            return reply.ok();
        }
        match self.release_file(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if is_ctl(ino.0) {
            return reply.ok();
        }
        match self
            .file(ino.0)
            .and_then(|f| f.sync_all().map_err(|e| logged_errno("fsync", &e)))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.entries(ino.0) {
            Ok(entries) => {
                for (i, (child, kind, name)) in
                    entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(child), i as u64 + 1, kind, OsStr::from_bytes(&name)) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if is_ctl(ino.0) {
            return reply.ok();
        }
        let r = self.path_of(ino.0).and_then(|p| {
            File::open(self.real(&p))
                .and_then(|d| d.sync_all())
                .map_err(|e| errno(&e))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let r = (|| {
            let c = cpath(&self.config.root)?;
            // SAFETY: zeroed statvfs is a valid out-parameter.
            let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: a valid C string and out-pointer.
            check(unsafe { libc::statvfs(c.as_ptr(), &mut s) })?;
            Ok(s)
        })();
        match r {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let path = self.child(parent.0, name)?;
            let real = self.real(&path);
            let mut o = OpenOptions::new();
            o.write(true).mode(mode & 0o7777);
            if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            } else {
                o.create(true);
            }
            o.open(&real).map_err(|e| errno(&e))?;
            let attr = self.lookup_path(&path)?;
            let ino = attr.ino.0;
            let file = self.open_file(ino, &path)?;
            if flags & libc::O_TRUNC != 0 {
                file.set_len(0).map_err(|e| errno(&e))?;
            }
            Ok((self.stat(ino)?, ino))
        })();
        match r {
            Ok((attr, ino)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(ino),
                data_open_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let r = self.file(ino.0).and_then(|f| {
            let end = offset.saturating_add(length);
            if end > f.len() {
                f.set_len(end).map_err(|e| errno(&e))?;
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
