//! The FUSE filesystem of `multiarc mount`: a passthrough of a backing
//! directory whose file data goes through the cache, plus the virtual
//! control directory `.multiarc/`.
//!
//! Files are identified by what they are (`inodes.rs`: an `O_PATH`
//! descriptor and the backing `(st_dev, st_ino)` per inode), never by path:
//! namespace operations are `*at()` calls relative to the parent's
//! descriptor, attribute changes go to the inode's own descriptor, and data
//! goes through the handle the kernel names (`data.rs`). Data files are
//! opened with `FOPEN_DIRECT_IO`, so the kernel's page cache is not a second
//! copy; shared mappings are allowed (`FUSE_DIRECT_IO_ALLOW_MMAP`), their
//! pages read and written back through the same handles.
//!
//! Objects are created with the requesting process's credentials
//! (`creds.rs`), so they belong to their creator; everything else runs as
//! the daemon, after the kernel has checked the caller's permissions
//! (`default_permissions`). A write by a process without `CAP_FSETID`
//! clears the file's set-user-ID and set-group-ID bits first.

use super::creds::{Caller, DaemonCreds};
use super::data::{errno, logged_errno, Data};
use super::inodes::{Inode, InodeTable};
use super::stats::DirControl;
use super::sys::{int, key_at, open_dir, open_path_at, proc_path};
use crate::control::{is_ctl, ControlTree, CTL_DIR, INO_CTL, INO_ROOT};
use crate::fuse_ops::{FuseOps, Op};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use multiarc::{BlockKey, Cache};
use multiarc_file::{Locking, WriteBack};
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// The changes a `setattr` asks for, and the handle it names.
struct SetAttr {
    fh: Option<u64>,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

/// The filesystem.
pub struct MultiarcFs {
    config: FsConfig,
    inodes: Arc<InodeTable>,
    data: Arc<Data>,
    ctl: ControlTree,
    /// The figures and tunables of the control directory (and of
    /// `--metrics`, which shares them).
    control: Arc<DirControl>,
    /// The FUSE operations, counted and timed.
    ops: Arc<FuseOps>,
    /// The daemon's credentials, which creating calls leave for the
    /// caller's and come back to.
    creds: DaemonCreds,
}

/// A kernel error number from a rustix one.
fn rerr(e: rustix::io::Errno) -> Errno {
    Errno::from_i32(e.raw_os_error())
}

fn ioerr(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::new(secs.unsigned_abs(), 0) + Duration::new(0, nsecs as u32)
    }
}

fn timespec(t: Option<TimeOrNow>) -> Timespec {
    match t {
        None => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            Timespec {
                tv_sec: d.as_secs() as _,
                tv_nsec: d.subsec_nanos() as _,
            }
        }
    }
}

/// Clears a file's set-user-ID bit, and its set-group-ID bit if it is
/// group-executable (without that it marks mandatory locking, and stays),
/// as the kernel does on a write or truncate by a process without
/// `CAP_FSETID`.
fn kill_suid_sgid(inode: &Inode) -> Result<(), Errno> {
    let st = inode.stat().map_err(|e| errno(&e))?;
    let mode = st.st_mode & 0o7777;
    let mut kept = mode & !libc::S_ISUID;
    if kept & (libc::S_ISGID | libc::S_IXGRP) == libc::S_ISGID | libc::S_IXGRP {
        kept &= !libc::S_ISGID;
    }
    if kept == mode {
        return Ok(());
    }
    inode
        .with_fd(|fd| {
            rustix::fs::chmodat(
                rustix::fs::CWD,
                proc_path(fd),
                Mode::from_raw_mode(kept),
                AtFlags::empty(),
            )
            .map_err(ioerr)
        })
        .map_err(|e| errno(&e))
}

/// Open flags for data files: no page cache; parallel direct writes (the
/// file's own locking mode decides what may overlap).
fn data_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

fn reply_attr(reply: ReplyAttr, ttl: Duration, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.attr(&ttl, &a),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_entry(reply: ReplyEntry, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

impl MultiarcFs {
    pub fn new(
        config: FsConfig,
        cache: Arc<Cache<BlockKey>>,
        writeback: Arc<WriteBack>,
    ) -> io::Result<Self> {
        let inodes = Arc::new(InodeTable::new(&config.root)?);
        let data = Arc::new(Data::new(
            Arc::clone(&cache),
            Arc::clone(&writeback),
            config.block_size,
            config.locking,
        ));
        let control = Arc::new(DirControl {
            cache,
            writeback,
            data: Arc::clone(&data),
            inodes: Arc::clone(&inodes),
            block_size: config.block_size,
        });
        Ok(MultiarcFs {
            inodes,
            data,
            ctl: ControlTree::new(),
            control,
            ops: Arc::new(FuseOps::new()),
            config,
            creds: DaemonCreds::current()?,
        })
    }

    /// The mount's figures and tunables, shared with `--metrics`.
    pub fn control(&self) -> Arc<DirControl> {
        Arc::clone(&self.control)
    }

    /// The mount's FUSE operations, shared with `--metrics`.
    pub fn ops(&self) -> Arc<FuseOps> {
        Arc::clone(&self.ops)
    }

    fn inode(&self, ino: u64) -> Result<Arc<Inode>, Errno> {
        self.inodes.get(ino).ok_or(Errno::ENOENT)
    }

    /// The parent directory's inode for an operation on `name` in it;
    /// the control directory's name in the root is refused.
    fn parent(&self, parent: u64, name: &OsStr) -> Result<Arc<Inode>, Errno> {
        if is_ctl(parent) || (parent == INO_ROOT && name == CTL_DIR) {
            return Err(Errno::EACCES);
        }
        let p = self.inode(parent)?;
        if p.kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        Ok(p)
    }

    /// The backing object's path now, for messages (it may have changed or
    /// gone since; never used to reach the file).
    fn display_name(&self, inode: &Inode) -> String {
        inode
            .with_fd(|fd| std::fs::read_link(proc_path(fd)))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| format!("inode {}", inode.ino))
    }

    fn attr_of(&self, inode: &Inode) -> Result<FileAttr, Errno> {
        let st = inode.stat().map_err(|e| errno(&e))?;
        let mut a = FileAttr {
            ino: INodeNo(inode.ino),
            size: int(st.st_size) as u64,
            blocks: int(st.st_blocks) as u64,
            atime: time(int(st.st_atime), int(st.st_atime_nsec)),
            mtime: time(int(st.st_mtime), int(st.st_mtime_nsec)),
            ctime: time(int(st.st_ctime), int(st.st_ctime_nsec)),
            crtime: UNIX_EPOCH,
            kind: inode.kind,
            perm: (st.st_mode & 0o7777) as u16,
            nlink: int(st.st_nlink) as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: int(st.st_rdev) as u32,
            blksize: self.config.block_size as u32,
            flags: 0,
        };
        // An open file's size may be ahead of the backing file's.
        if let Some(len) = self.data.len_if_open(inode) {
            a.size = len;
            a.blocks = a.blocks.max(len.div_ceil(512));
        }
        Ok(a)
    }

    /// Looks `name` up in `parent` (one kernel lookup) and returns its
    /// attributes.
    fn lookup_at(&self, parent: &Inode, name: &OsStr) -> Result<FileAttr, Errno> {
        let fd = parent
            .with_fd(|p| open_path_at(p, name))
            .map_err(|e| errno(&e))?;
        self.register(fd)
    }

    /// Registers one kernel lookup of the object behind `fd` (`O_PATH`).
    fn register(&self, fd: OwnedFd) -> Result<FileAttr, Errno> {
        let inode = self.inodes.lookup_fd(fd).map_err(|e| errno(&e))?;
        match self.attr_of(&inode) {
            Ok(a) => Ok(a),
            Err(e) => {
                self.inodes.forget(inode.ino, 1);
                Err(e)
            }
        }
    }

    /// After `name` in `parent` lost a name (unlink, rmdir, rename over it):
    /// if the object `key` has no name left and nothing of it is open, its
    /// descriptor is closed now so the backing filesystem frees it.
    fn name_removed(&self, key: Option<(u64, u64)>) {
        let Some(inode) = key.and_then(|k| self.inodes.by_key(k)) else {
            return;
        };
        // Only regular files hold space worth freeing early, and only for
        // them is it known whether something has them open (a directory or
        // fifo can be open without a handle of ours: fstat must still work).
        if inode.kind != FileType::RegularFile || !inode.unlinked() {
            return;
        }
        if inode.data.lock().busy() {
            return; // the last close retires it
        }
        self.data.forget_unlinked(&inode);
        self.inodes.retire(&inode);
    }

    fn do_setattr(&self, ino: u64, set: SetAttr) -> Result<FileAttr, Errno> {
        let SetAttr {
            fh,
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = set;
        if is_ctl(ino) {
            return self
                .ctl
                .setattr(ino, mode.is_some() || uid.is_some() || gid.is_some());
        }
        let inode = self.inode(ino)?;
        let symlink = inode.kind == FileType::Symlink;
        if let Some(mode) = mode {
            if symlink {
                return Err(Errno::EOPNOTSUPP);
            }
            // Through the descriptor's magic link: the object itself, even
            // with no name left.
            inode
                .with_fd(|fd| {
                    rustix::fs::chmodat(
                        rustix::fs::CWD,
                        proc_path(fd),
                        Mode::from_raw_mode(mode & 0o7777),
                        AtFlags::empty(),
                    )
                    .map_err(ioerr)
                })
                .map_err(|e| errno(&e))?;
        }
        if uid.is_some() || gid.is_some() {
            inode
                .with_fd(|fd| {
                    rustix::fs::chownat(
                        fd,
                        "",
                        uid.map(rustix::fs::Uid::from_raw),
                        gid.map(rustix::fs::Gid::from_raw),
                        AtFlags::EMPTY_PATH,
                    )
                    .map_err(ioerr)
                })
                .map_err(|e| errno(&e))?;
        }
        if let Some(size) = size {
            match inode.kind {
                FileType::RegularFile => {
                    let name = self.display_name(&inode);
                    self.data.set_len(&self.inodes, &inode, fh, size, &name)?;
                }
                FileType::Directory => return Err(Errno::EISDIR),
                _ => return Err(Errno::EINVAL),
            }
        }
        if atime.is_some() || mtime.is_some() {
            let times = Timestamps {
                last_access: timespec(atime),
                last_modification: timespec(mtime),
            };
            inode
                .with_fd(|fd| {
                    rustix::fs::utimensat(fd, "", &times, AtFlags::EMPTY_PATH).map_err(ioerr)
                })
                .map_err(|e| errno(&e))?;
        }
        self.attr_of(&inode)
    }

    fn entries(&self, ino: u64) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        if is_ctl(ino) {
            return self.ctl.entries(ino);
        }
        let inode = self.inode(ino)?;
        if inode.kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        let dir = |name: &str, ino| (ino, FileType::Directory, name.as_bytes().to_vec());
        let mut out = vec![dir(".", ino), dir("..", INO_ROOT)];
        if ino == INO_ROOT {
            out.push(dir(CTL_DIR, INO_CTL));
        }
        let fd = inode.with_fd(open_dir).map_err(|e| errno(&e))?;
        let dev = inode.key.0;
        let d = rustix::fs::Dir::new(fd).map_err(rerr)?;
        for entry in d {
            let entry = entry.map_err(rerr)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if ino == INO_ROOT && name == CTL_DIR.as_bytes() {
                continue; // shadowed by the control directory
            }
            use rustix::fs::FileType as T;
            let kind = match entry.file_type() {
                T::Directory => FileType::Directory,
                T::Symlink => FileType::Symlink,
                T::Fifo => FileType::NamedPipe,
                T::Socket => FileType::Socket,
                T::CharacterDevice => FileType::CharDevice,
                T::BlockDevice => FileType::BlockDevice,
                _ => FileType::RegularFile,
            };
            let child = self.inodes.readdir_ino((dev, entry.ino()));
            out.push((child, kind, name.to_vec()));
        }
        Ok(out)
    }

    /// Syncs every open file and writes back everything dirty.
    pub fn flush_everything(&self) -> io::Result<()> {
        self.data.flush_everything()
    }
}

impl Filesystem for MultiarcFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Shared mappings of direct-I/O files (SQLite's WAL index, for
        // one): the kernel keeps mapped pages coherent with our direct reads
        // and writes (writes back dirty mapped pages before a direct I/O
        // on their range, drops them after a direct write), and mapped pages
        // are read and written back through our read and write, so the
        // cache stays the one copy the files are read from.
        if config
            .capabilities()
            .contains(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
        {
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        } else {
            log::info!(
                "note: this kernel cannot map direct-I/O files shared \
                 (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6): shared writable mmap fails with ENODEV"
            );
        }
        Ok(())
    }

    fn destroy(&mut self) {
        let _ = self.flush_everything();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _timer = self.ops.start(Op::Lookup);
        match self.ctl.lookup(parent.0, name.as_bytes()) {
            Some(Ok(ino)) => return reply.entry(&CTL_TTL, &self.ctl.attr(ino), Generation(0)),
            Some(Err(e)) => return reply.error(e),
            None => {}
        }
        let r = self
            .parent(parent.0, name)
            .and_then(|p| self.lookup_at(&p, name));
        reply_entry(reply, r)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _timer = self.ops.start(Op::Other);
        self.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _timer = self.ops.start(Op::Getattr);
        if is_ctl(ino.0) {
            return reply.attr(&CTL_TTL, &self.ctl.attr(ino.0));
        }
        reply_attr(reply, TTL, self.inode(ino.0).and_then(|i| self.attr_of(&i)))
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
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _timer = self.ops.start(Op::Setattr);
        let ttl = if is_ctl(ino.0) { CTL_TTL } else { TTL };
        let set = SetAttr {
            fh: fh.map(|f| f.0),
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        let r = self.do_setattr(ino.0, set);
        reply_attr(reply, ttl, r)
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _timer = self.ops.start(Op::Other);
        let r = self.inode(ino.0).and_then(|i| {
            i.with_fd(|fd| rustix::fs::readlinkat(fd, "", Vec::new()).map_err(ioerr))
                .map_err(|e| errno(&e))
        });
        match r {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _timer = self.ops.start(Op::Other);
        let r = self.parent(parent.0, name).and_then(|p| {
            let perm = Mode::from_raw_mode(mode & 0o7777);
            p.with_fd(|pfd| {
                self.creds.as_caller(Caller::from(req), || {
                    if mode & libc::S_IFMT == libc::S_IFREG || mode & libc::S_IFMT == 0 {
                        let fd = rustix::fs::openat(
                            pfd,
                            name,
                            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
                            perm,
                        )
                        .map_err(ioerr)?;
                        drop(fd);
                    } else {
                        rustix::fs::mknodat(
                            pfd,
                            name,
                            rustix::fs::FileType::from_raw_mode(mode),
                            perm,
                            rdev.into(),
                        )
                        .map_err(ioerr)?;
                    }
                    Ok(())
                })
            })
            .map_err(|e| errno(&e))?;
            self.lookup_at(&p, name)
        });
        reply_entry(reply, r)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _timer = self.ops.start(Op::Mkdir);
        let r = self.parent(parent.0, name).and_then(|p| {
            p.with_fd(|pfd| {
                self.creds.as_caller(Caller::from(req), || {
                    rustix::fs::mkdirat(pfd, name, Mode::from_raw_mode(mode & 0o7777))
                        .map_err(ioerr)
                })
            })
            .map_err(|e| errno(&e))?;
            self.lookup_at(&p, name)
        });
        reply_entry(reply, r)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _timer = self.ops.start(Op::Unlink);
        let r = self.parent(parent.0, name).and_then(|p| {
            let key = p.with_fd(|pfd| Ok(key_at(pfd, name))).unwrap_or(None);
            p.with_fd(|pfd| rustix::fs::unlinkat(pfd, name, AtFlags::empty()).map_err(ioerr))
                .map_err(|e| errno(&e))?;
            self.name_removed(key);
            Ok(())
        });
        reply_empty(reply, r)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _timer = self.ops.start(Op::Rmdir);
        let r = self.parent(parent.0, name).and_then(|p| {
            let key = p.with_fd(|pfd| Ok(key_at(pfd, name))).unwrap_or(None);
            p.with_fd(|pfd| rustix::fs::unlinkat(pfd, name, AtFlags::REMOVEDIR).map_err(ioerr))
                .map_err(|e| errno(&e))?;
            self.name_removed(key);
            Ok(())
        });
        reply_empty(reply, r)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _timer = self.ops.start(Op::Other);
        let r = self.parent(parent.0, link_name).and_then(|p| {
            p.with_fd(|pfd| {
                self.creds.as_caller(Caller::from(req), || {
                    rustix::fs::symlinkat(target, pfd, link_name).map_err(ioerr)
                })
            })
            .map_err(|e| errno(&e))?;
            self.lookup_at(&p, link_name)
        });
        reply_entry(reply, r)
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
        let _timer = self.ops.start(Op::Rename);
        let r = (|| {
            let from = self.parent(parent.0, name)?;
            let to = self.parent(newparent.0, newname)?;
            let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
            // The object a plain rename replaces loses a name.
            let victim = if exchange {
                None
            } else {
                to.with_fd(|t| Ok(key_at(t, newname))).unwrap_or(None)
            };
            from.with_fd(|f| {
                to.with_fd(|t| {
                    rustix::fs::renameat_with(
                        f,
                        name,
                        t,
                        newname,
                        rustix::fs::RenameFlags::from_bits_retain(flags.bits()),
                    )
                    .map_err(ioerr)
                })
            })
            .map_err(|e| errno(&e))?;
            self.name_removed(victim);
            Ok(())
        })();
        reply_empty(reply, r)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _timer = self.ops.start(Op::Other);
        let r = (|| {
            if is_ctl(ino.0) {
                return Err(Errno::EACCES);
            }
            let inode = self.inode(ino.0)?;
            let to = self.parent(newparent.0, newname)?;
            // Through the magic link: the object itself, not whatever has
            // its old name now (this needs no privilege, unlike
            // AT_EMPTY_PATH).
            inode
                .with_fd(|fd| {
                    to.with_fd(|t| {
                        rustix::fs::linkat(
                            rustix::fs::CWD,
                            proc_path(fd),
                            t,
                            newname,
                            AtFlags::SYMLINK_FOLLOW,
                        )
                        .map_err(ioerr)
                    })
                })
                .map_err(|e| errno(&e))?;
            // The new name is the same inode: count the lookup on it.
            self.inodes.add_lookup(inode.ino);
            self.attr_of(&inode)
        })();
        reply_entry(reply, r)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _timer = self.ops.start(Op::Open);
        let flags = flags.0;
        if is_ctl(ino.0) {
            return match self.ctl.open(self.control.as_ref(), ino.0, flags) {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
                Err(e) => reply.error(e),
            };
        }
        let r = self.inode(ino.0).and_then(|inode| {
            let truncate = flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY;
            let name = self.display_name(&inode);
            self.data.open(&self.inodes, &inode, truncate, &name)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), data_open_flags()),
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
        let _timer = self.ops.start(Op::Read);
        if is_ctl(ino.0) {
            return match self.ctl.read(fh.0, offset, size) {
                Ok(b) => reply.data(&b),
                Err(e) => reply.error(e),
            };
        }
        let r = self.data.handle(fh.0).and_then(|h| {
            let mut buf = vec![0u8; size as usize];
            let n = h
                .file
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
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _timer = self.ops.start(Op::Write);
        if is_ctl(ino.0) {
            return match self.ctl.write(self.control.as_ref(), ino.0, data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e),
            };
        }
        let r = self.data.handle(fh.0).and_then(|h| {
            // A writer without CAP_FSETID (the kernel says which): as a
            // local filesystem does, the write takes away the set-user-ID
            // and set-group-ID bits first.
            if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                kill_suid_sgid(&h.inode)?;
            }
            h.file
                .write_at(data, offset)
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
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Flush);
        if is_ctl(ino.0) {
            return reply.ok();
        }
        reply_empty(reply, self.data.flush(fh.0))
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
        let _timer = self.ops.start(Op::Release);
        if is_ctl(ino.0) {
            self.ctl.release(fh.0);
            return reply.ok();
        }
        reply_empty(reply, self.data.release(&self.inodes, fh.0))
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Fsync);
        if is_ctl(ino.0) {
            return reply.ok();
        }
        reply_empty(reply, self.data.fsync(fh.0))
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _timer = self.ops.start(Op::Readdir);
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
        let _timer = self.ops.start(Op::Other);
        if is_ctl(ino.0) {
            return reply.ok();
        }
        let r = self.inode(ino.0).and_then(|i| {
            i.with_fd(|fd| {
                let d = open_dir(fd)?;
                rustix::fs::fsync(d.as_fd()).map_err(ioerr)
            })
            .map_err(|e| errno(&e))
        });
        reply_empty(reply, r)
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _timer = self.ops.start(Op::Statfs);
        let r = self
            .inodes
            .root()
            .with_fd(|fd| rustix::fs::fstatvfs(fd).map_err(ioerr))
            .map_err(|e| errno(&e));
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
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _timer = self.ops.start(Op::Create);
        let r = (|| {
            let p = self.parent(parent.0, name)?;
            // Made by the caller, and new: never through a symlink or onto a
            // file put there behind the mount's back.
            let o =
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            // The new object itself, not whatever has its name a moment
            // later: its O_PATH descriptor comes from the open one.
            let path_fd = p
                .with_fd(|pfd| {
                    let created = self.creds.as_caller(Caller::from(req), || {
                        rustix::fs::openat(pfd, name, o, Mode::from_raw_mode(mode & 0o7777))
                            .map_err(ioerr)
                    });
                    match created {
                        Ok(fd) => rustix::fs::open(
                            proc_path(&fd),
                            OFlags::PATH | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(ioerr),
                        // Made behind the mount's back since the kernel's
                        // lookup: without O_EXCL, the file as it is.
                        Err(e)
                            if e.raw_os_error() == Some(libc::EEXIST)
                                && flags & libc::O_EXCL == 0 =>
                        {
                            let fd = open_path_at(pfd, name)?;
                            let st = rustix::fs::fstat(&fd).map_err(ioerr)?;
                            if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                                return Err(io::Error::from_raw_os_error(libc::ELOOP));
                            }
                            Ok(fd)
                        }
                        Err(e) => Err(e),
                    }
                })
                .map_err(|e| errno(&e))?;
            let attr = self.register(path_fd)?;
            let inode = self.inode(attr.ino.0)?;
            let truncate = flags & libc::O_TRUNC != 0;
            let name = self.display_name(&inode);
            match self.data.open(&self.inodes, &inode, truncate, &name) {
                Ok(fh) => Ok((self.attr_of(&inode)?, fh)),
                Err(e) => {
                    self.inodes.forget(inode.ino, 1);
                    Err(e)
                }
            }
        })();
        match r {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                data_open_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Other);
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let r = self.data.handle(fh.0).and_then(|h| {
            let end = offset.saturating_add(length);
            if end > h.file.len() {
                h.file
                    .set_len(end)
                    .map_err(|e| logged_errno("fallocate", &e))?;
            }
            Ok(())
        });
        reply_empty(reply, r)
    }
}
