//! System-call helpers of the directory mount: descriptors of backing
//! objects by `O_PATH`, their keys, and stat fields as plain numbers.

use fuser::FileType;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

/// `(st_dev, st_ino)` of a backing object.
pub type Key = (u64, u64);

/// The path through which a descriptor's object can be reopened or changed
/// (a "magic link": it works after the object's names are gone).
pub fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// A stat field as an `i64` whatever its C type on this target.
pub fn int<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(0)
}

pub fn kind_of_mode(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// Opens `name` in the directory `parent` as an `O_PATH` descriptor,
/// without following a symlink.
pub fn open_path_at(parent: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// `(st_dev, st_ino)` of `name` in `parent`, if it exists.
pub fn key_at(parent: &OwnedFd, name: &OsStr) -> Option<Key> {
    rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|s| (s.st_dev, s.st_ino))
}

/// Descriptor helper: a directory descriptor that can be read (an `O_PATH`
/// one cannot), reopened from an inode's descriptor.
pub fn open_dir(fd: &OwnedFd) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        fd.as_fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}
