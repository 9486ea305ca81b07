//! What a filesystem operation answers when it fails: an errno, with the
//! store's errors mapped (and logged, so the cause is in the mount's log).

use std::fmt;

/// A failed operation's error number (`libc::ENOENT`, `libc::EIO`, ...),
/// as the kernel is told.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// No such object or prefix.
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    /// The store failed (unreachable, a server error, ...); the cause is logged.
    pub const EIO: Errno = Errno(libc::EIO);
    /// Refused by the mount's rules: an overwrite without
    /// `allow_overwrite`, a delete without `allow_delete`, a change of
    /// mode or owner, a rename.
    pub const EPERM: Errno = Errno(libc::EPERM);
    /// A write that is not at the end of what was written (uploads are
    /// sequential).
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    /// The mount is read-only.
    pub const EROFS: Errno = Errno(libc::EROFS);
    /// The object changed in the store since this handle opened it: reopen.
    pub const ESTALE: Errno = Errno(libc::ESTALE);
    /// The file is being written through this mount (an open), or is
    /// still read through the kernel's page cache here when a write would
    /// replace it (see `BucketConfig::overwrite_wait`).
    pub const EBUSY: Errno = Errno(libc::EBUSY);
    pub(crate) const EEXIST: Errno = Errno(libc::EEXIST);
    pub(crate) const EISDIR: Errno = Errno(libc::EISDIR);
    pub(crate) const ENOTDIR: Errno = Errno(libc::ENOTDIR);
    pub(crate) const ENOTEMPTY: Errno = Errno(libc::ENOTEMPTY);
    pub(crate) const EBADF: Errno = Errno(libc::EBADF);
    pub(crate) const EACCES: Errno = Errno(libc::EACCES);
    pub(crate) const ENAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Errno {}

/// The errno for a store error met doing `what` (e.g. "reading a/b"):
/// `NotFound` is ENOENT, a refused request EACCES, an object that changed
/// under a read ESTALE, and everything else EIO. All but `NotFound` are
/// logged with their cause.
pub(crate) fn store_errno(what: &str, e: &object_store::Error) -> Errno {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => Errno::ENOENT,
        E::Precondition { .. } => {
            log::warn!("{what}: the object changed in the store since it was opened: {e}");
            Errno::ESTALE
        }
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            log::error!("{what}: the store refused: {e}");
            Errno::EACCES
        }
        E::AlreadyExists { .. } => Errno::EEXIST,
        _ => {
            log::error!("{what}: {e}");
            Errno::EIO
        }
    }
}
