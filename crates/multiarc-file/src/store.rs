//! Backing stores: where a cached file's blocks live when they are not in
//! memory. The file layer asks a store for byte ranges (one block, or the
//! valid part of the last one) and never for more than it needs, so a store
//! may be a file, a device, an object in memory or, for tests, a wrapper that
//! fails on purpose (`fault.rs`).

use super::error::with_context;
use multiarc_lock::poison::RwLockUnpoisoned;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::RwLock;

/// Block I/O on whatever holds a file's bytes. Implementations must be safe
/// to call from many threads at once, on any offsets.
#[allow(clippy::len_without_is_empty)] // a store's emptiness is never asked
pub trait BackingStore: Send + Sync + 'static {
    /// Reads into `buf` from `offset`, returning how many bytes were read;
    /// fewer than `buf.len()` (even 0) only at the end of the store or on a
    /// short read, which the caller retries for the rest.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, growing the store if needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// The store's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) the store to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes everything written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// What the store is, where two stores can be the same object: a
    /// regular file's (device, inode). Files opened on stores of one
    /// identity share one state (blocks, dirty data, lock), so a second
    /// open can never write older data over the first one's. `None` (the
    /// default): every store is its own object.
    fn identity(&self) -> Option<(u64, u64)> {
        None
    }
}

/// Alignment (and granularity) of direct I/O: the largest logical block size
/// of common devices, so it is valid everywhere.
const DIRECT_ALIGN: usize = 4096;

/// A regular file. With `direct`, aligned block I/O bypasses the kernel's
/// page cache (`O_DIRECT`), so the cache above is the only copy in memory;
/// requests that are not 4 KiB aligned (the partial last block of a file)
/// go through a second, buffered descriptor of the same file.
#[derive(Debug)]
pub struct FileStore {
    file: File,
    direct: Option<File>,
}

impl FileStore {
    /// Opens (creating if missing) `path` for reading and writing through
    /// the kernel's page cache.
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileStore> {
        let path = path.as_ref();
        let file = open_rw(path, 0)?;
        Ok(FileStore { file, direct: None })
    }

    /// Opens (creating if missing) `path` with `O_DIRECT` for aligned I/O.
    /// Fails with a clear error where the filesystem refuses direct I/O
    /// (tmpfs, for one).
    pub fn open_direct(path: impl AsRef<Path>) -> io::Result<FileStore> {
        let path = path.as_ref();
        let file = open_rw(path, 0)?;
        let direct = open_rw(path, libc::O_DIRECT).map_err(|e| {
            with_context(
                &e,
                format_args!(
                    "{}: the filesystem does not support direct I/O (O_DIRECT)",
                    path.display()
                ),
            )
        })?;
        Ok(FileStore {
            file,
            direct: Some(direct),
        })
    }

    /// Whether aligned I/O bypasses the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    fn direct_for(&self, len: usize, offset: u64) -> Option<&File> {
        let aligned = len.is_multiple_of(DIRECT_ALIGN)
            && offset.is_multiple_of(DIRECT_ALIGN as u64)
            && len > 0;
        self.direct.as_ref().filter(|_| aligned)
    }
}

fn open_rw(path: &Path, flags: i32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| with_context(&e, path.display()))
}

/// A zeroed buffer of `len` bytes aligned for direct I/O: over-allocated by
/// the alignment, then sliced at the first aligned address (no `unsafe`).
struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn zeroed(len: usize) -> AlignedBuf {
        let bytes = vec![0u8; len + DIRECT_ALIGN];
        let start = bytes.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuf { bytes, start, len }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

impl BackingStore for FileStore {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self.direct_for(buf.len(), offset) {
            Some(direct) => {
                let mut bounce = AlignedBuf::zeroed(buf.len());
                let n = retry_interrupted(|| direct.read_at(bounce.as_mut_slice(), offset))?;
                buf[..n].copy_from_slice(&bounce.as_mut_slice()[..n]);
                Ok(n)
            }
            None => retry_interrupted(|| self.file.read_at(buf, offset)),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self.direct_for(buf.len(), offset) {
            Some(direct) => {
                let mut bounce = AlignedBuf::zeroed(buf.len());
                bounce.as_mut_slice().copy_from_slice(buf);
                direct.write_all_at(bounce.as_mut_slice(), offset)
            }
            None => self.file.write_all_at(buf, offset),
        }
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn identity(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = self.file.metadata().ok()?;
        Some((m.dev(), m.ino()))
    }
}

fn retry_interrupted(mut f: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A store in memory: for tests, benchmarks of the cache itself ("fully
/// cached" needs no disk), and scratch files. It can be given a capacity,
/// past which writes that grow it fail with `ENOSPC`, as a full disk does.
#[derive(Debug, Default)]
pub struct MemStore {
    bytes: RwLock<Vec<u8>>,
    /// Largest length writes may grow it to (`u64::MAX`: unbounded; 0 is
    /// read as unbounded too, so `Default` is).
    capacity: std::sync::atomic::AtomicU64,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// A store holding `bytes`.
    pub fn with_bytes(bytes: Vec<u8>) -> MemStore {
        MemStore {
            bytes: RwLock::new(bytes),
            capacity: Default::default(),
        }
    }

    /// Sets the most bytes the store may hold: a write that would grow it
    /// past them fails with `ENOSPC` (a full filesystem); `u64::MAX` lifts
    /// the bound. Rewriting bytes it already holds always works.
    pub fn set_capacity(&self, bytes: u64) {
        self.capacity
            .store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    fn capacity(&self) -> u64 {
        match self.capacity.load(std::sync::atomic::Ordering::Relaxed) {
            0 => u64::MAX,
            c => c,
        }
    }

    /// A copy of the store's contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes.read_unpoisoned().clone()
    }
}

impl BackingStore for MemStore {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let bytes = self.bytes.read_unpoisoned();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let mut bytes = self.bytes.write_unpoisoned();
        if bytes.len() < end {
            if end as u64 > self.capacity() {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            bytes.resize(end, 0);
        }
        bytes[start..end].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.read_unpoisoned().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        self.bytes.write_unpoisoned().resize(len, 0);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Forwards to the shared store.
macro_rules! forward_store {
    ($($t:ty),*) => {$(
impl<S: BackingStore + ?Sized> BackingStore for $t {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (**self).set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
    fn identity(&self) -> Option<(u64, u64)> {
        (**self).identity()
    }
}
    )*};
}
forward_store!(std::sync::Arc<S>, Box<S>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_store_reads_short_at_the_end_and_grows_on_write() {
        let s = MemStore::new();
        s.write_at(b"abc", 5).unwrap();
        assert_eq!(s.len().unwrap(), 8);
        let mut buf = [9u8; 6];
        assert_eq!(s.read_at(&mut buf, 4).unwrap(), 4);
        assert_eq!(&buf[..4], b"\0abc");
        assert_eq!(s.read_at(&mut buf, 100).unwrap(), 0);
        s.set_len(2).unwrap();
        assert_eq!(s.to_vec(), vec![0, 0]);
    }

    #[test]
    fn file_store_round_trips_and_direct_falls_back_for_unaligned_io() {
        let dir = std::env::temp_dir().join(format!("multiarc-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let s = match FileStore::open_direct(&path) {
            Ok(s) => s,
            // tmpfs and some overlay filesystems refuse O_DIRECT: the
            // buffered store is still tested.
            Err(e) => {
                assert!(e.to_string().contains("O_DIRECT"), "{e}");
                FileStore::open(&path).unwrap()
            }
        };
        let block: Vec<u8> = (0..8192).map(|i| (i % 251) as u8).collect();
        s.write_at(&block, 8192).unwrap();
        s.write_at(b"tail", 16384).unwrap();
        assert_eq!(s.len().unwrap(), 16388);
        let mut back = vec![0u8; 8192];
        assert_eq!(s.read_at(&mut back, 8192).unwrap(), 8192);
        assert_eq!(back, block);
        let mut tail = [0u8; 10];
        assert_eq!(s.read_at(&mut tail, 16384).unwrap(), 4);
        s.sync().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
