//! The data side of an inode (regular files): the cached file while
//! handles are open, and what is remembered between opens.

use super::sys::int;
use multiarc_file::CachedFile;
use std::sync::Arc;

/// What a backing file looked like when its cached blocks were last known
/// to match it: at open, a file that differs was changed behind the mount
/// and its cached blocks are dropped (close-to-open consistency, as NFS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub(super) size: i64,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
}

impl Seen {
    pub(super) fn of(st: &rustix::fs::Stat) -> Seen {
        Seen {
            size: int(st.st_size),
            mtime: (int(st.st_mtime), int(st.st_mtime_nsec)),
            ctime: (int(st.st_ctime), int(st.st_ctime_nsec)),
        }
    }
}

/// The data side of an inode (regular files).
#[derive(Default)]
pub struct DataState {
    /// The file's cached state while handles are open (each handle holds a
    /// description of it).
    pub(super) file: Option<Arc<CachedFile>>,
    pub(super) handles: u64,
    /// The cache object id of the file's blocks, kept across closes so a
    /// reopen finds them cached; never reused for another file.
    pub(super) object: Option<u64>,
    /// The backing file at the last open or `close(2)` (flush).
    pub(super) seen: Option<Seen>,
    /// A write-back of the file failed and no sync succeeded since, or the
    /// write-back had failures while the file was closed: a new handle's
    /// first `close(2)` syncs (so it reports what it must, by errseq) even
    /// with nothing dirty.
    pub(super) suspect: bool,
    /// The write-back's error count at the last close.
    pub(super) errors_at_close: u64,
}

impl DataState {
    /// Whether a handle is open (the inode must stay in the table).
    pub fn busy(&self) -> bool {
        self.handles > 0
    }
}
