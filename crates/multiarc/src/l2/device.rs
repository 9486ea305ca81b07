//! The second tier's device: a regular file or a block device, opened with
//! `O_DIRECT` where the filesystem allows it, locked exclusively, read and
//! written in whole 4 KiB units from 4 KiB-aligned buffers. Every error
//! names the path.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The device's unit: offsets, lengths and buffers are multiples of it.
pub(super) const UNIT: u64 = 4096;

/// Rounds `n` up to whole units.
pub(super) fn units(n: u64) -> u64 {
    n.div_ceil(UNIT) * UNIT
}

/// The device bytes a buffer of `len` bytes takes: whole units, at least
/// one (an empty buffer still has its own place).
pub(super) fn padded(len: u64) -> u64 {
    units(len).max(UNIT)
}

/// A zeroed buffer whose bytes start at a 4 KiB boundary (`O_DIRECT`
/// needs it), made safely: a larger `Vec` and an aligned window into it.
pub(super) struct AlignedBuf {
    vec: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes (`len` a multiple of the unit).
    pub(super) fn zeroed(len: usize) -> AlignedBuf {
        debug_assert!((len as u64).is_multiple_of(UNIT));
        let vec = vec![0u8; len + UNIT as usize];
        let start = vec.as_ptr().align_offset(UNIT as usize);
        AlignedBuf { vec, start, len }
    }

    /// No bytes, and no allocation.
    pub(super) fn empty() -> AlignedBuf {
        AlignedBuf {
            vec: Vec::new(),
            start: 0,
            len: 0,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.vec[self.start..self.start + self.len]
    }

    /// The allocation and the window of it that holds its first `len`
    /// bytes (no copy).
    pub(super) fn into_window(self, len: usize) -> (Vec<u8>, std::ops::Range<usize>) {
        assert!(len <= self.len);
        (self.vec, self.start..self.start + len)
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.vec[self.start..self.start + self.len]
    }
}

/// Injected failures (tests, and the hidden `Cache::l2_inject_faults`):
/// one relaxed load per I/O when off.
#[derive(Default)]
pub(super) struct Faults {
    pub(super) reads: AtomicBool,
    pub(super) writes: AtomicBool,
    /// Non-zero: the write that brings it to zero fails (tests: a crash
    /// between the writes of one batch).
    pub(super) write_countdown: AtomicU64,
}

/// An open, locked device.
pub(super) struct Device {
    file: File,
    /// Opened with `O_DIRECT`.
    pub(super) direct: bool,
    pub(super) faults: Faults,
}

/// The device at `path` refused, for the reason `what` (not an error of
/// the system's: a setting or the device's state).
pub(super) fn refused(path: &Path, kind: io::ErrorKind, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(kind, format!("l2 device {}: {what}", path.display()))
}

/// `e`, said of the device at `path` while doing `what`: same kind, and
/// the system's error (its errno) kept as the source.
pub(super) fn with_path(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        DeviceError {
            what: format!("l2 device {}: {what}", path.display()),
            source: e,
        },
    )
}

/// An I/O error of the device, with what the tier was doing.
#[derive(Debug)]
struct DeviceError {
    what: String,
    source: io::Error,
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Bytes free for an unprivileged writer on the filesystem holding `dir`.
fn free_space(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `statvfs` is plain integers, for which all zeros is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid statvfs to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

impl Device {
    /// Opens (creating a missing regular file) and locks the device, and
    /// makes sure `bytes` of it can be written: a block device must be that
    /// large, a regular file gets that much space reserved (refused if the
    /// filesystem does not have it).
    pub(super) fn open(path: &Path, bytes: u64, direct: bool) -> io::Result<Device> {
        let existing = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(with_path(path, "cannot inspect it", e)),
        };
        if let Some(m) = &existing {
            let t = m.file_type();
            if !(t.is_file() || t.is_block_device()) {
                return Err(refused(
                    path,
                    io::ErrorKind::InvalidInput,
                    "not a regular file or a block device",
                ));
            }
        }
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(path)
        };
        let (file, direct) = match open(direct) {
            Ok(f) => (f, direct),
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                log::warn!(
                    "l2 device {}: O_DIRECT refused by the filesystem, using buffered I/O",
                    path.display()
                );
                (
                    open(false).map_err(|e| with_path(path, "cannot open it", e))?,
                    false,
                )
            }
            Err(e) => return Err(with_path(path, "cannot open it", e)),
        };
        // SAFETY: `file`'s descriptor is open for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                refused(
                    path,
                    io::ErrorKind::WouldBlock,
                    "is in use by another cache",
                )
            } else {
                with_path(path, "cannot lock it", e)
            });
        }
        let meta = file
            .metadata()
            .map_err(|e| with_path(path, "cannot inspect it", e))?;
        if meta.file_type().is_block_device() {
            let size = std::io::Seek::seek(&mut &file, std::io::SeekFrom::End(0))
                .map_err(|e| with_path(path, "cannot size it", e))?;
            if bytes > size {
                return Err(refused(
                    path,
                    io::ErrorKind::InvalidInput,
                    format_args!("{bytes} bytes asked, but the block device has {size}"),
                ));
            }
        } else if meta.len() < bytes {
            use std::os::unix::fs::MetadataExt;
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let allocated = meta.blocks().saturating_mul(512);
            let free =
                free_space(dir).map_err(|e| with_path(path, "cannot measure free space", e))?;
            if bytes > free.saturating_add(allocated) {
                if existing.is_none() {
                    let _ = std::fs::remove_file(path);
                }
                return Err(refused(
                    path,
                    io::ErrorKind::StorageFull,
                    format_args!(
                        "{bytes} bytes asked, but its filesystem has {} bytes of free space",
                        free.saturating_add(allocated)
                    ),
                ));
            }
            // SAFETY: a valid descriptor; offset and length are in range.
            let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
            if rc == libc::EOPNOTSUPP || rc == libc::EINVAL {
                file.set_len(bytes)
                    .map_err(|e| with_path(path, "cannot size it", e))?;
            } else if rc != 0 {
                if existing.is_none() {
                    let _ = std::fs::remove_file(path);
                }
                return Err(with_path(
                    path,
                    "cannot reserve its space",
                    io::Error::from_raw_os_error(rc),
                ));
            }
        }
        let mut device = Device {
            file,
            direct,
            faults: Faults::default(),
        };
        if direct {
            // Some filesystems take O_DIRECT at open and refuse its I/O.
            let mut probe = AlignedBuf::zeroed(UNIT as usize);
            if let Err(e) = device.file.read_exact_at(probe.bytes_mut(), 0) {
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(with_path(path, "cannot read it", e));
                }
                log::warn!(
                    "l2 device {}: O_DIRECT refused by the filesystem, using buffered I/O",
                    path.display()
                );
                let file = open(false).map_err(|e| with_path(path, "cannot open it", e))?;
                // The lock stays with the first descriptor's open file
                // description, which `device.file` keeps until replaced;
                // take it on the new one before letting the old one go.
                // SAFETY: a valid descriptor.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                    // Our own lock on the old description: release it by
                    // swapping (drop closes it), then lock again.
                    let old = std::mem::replace(&mut device.file, file);
                    drop(old);
                    // SAFETY: a valid descriptor.
                    if unsafe {
                        libc::flock(device.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)
                    } != 0
                    {
                        return Err(refused(
                            path,
                            io::ErrorKind::WouldBlock,
                            "is in use by another cache",
                        ));
                    }
                } else {
                    device.file = file;
                }
                device.direct = false;
            }
        }
        Ok(device)
    }

    /// Fills `buf` from `offset`.
    pub(super) fn read_at(&self, buf: &mut AlignedBuf, offset: u64) -> io::Result<()> {
        if self.faults.reads.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.file.read_exact_at(buf.bytes_mut(), offset)
    }

    /// Writes `buf` at `offset`.
    pub(super) fn write_at(&self, buf: &AlignedBuf, offset: u64) -> io::Result<()> {
        self.write_range(buf, 0, buf.bytes().len(), offset)
    }

    /// Writes `len` bytes of `buf` from `from` (both whole units, so the
    /// source stays aligned for `O_DIRECT`) at `offset`.
    pub(super) fn write_range(
        &self,
        buf: &AlignedBuf,
        from: usize,
        len: usize,
        offset: u64,
    ) -> io::Result<()> {
        if self.faults.writes.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if self.faults.write_countdown.load(Ordering::Relaxed) != 0
            && self.faults.write_countdown.fetch_sub(1, Ordering::Relaxed) == 1
        {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.file
            .write_all_at(&buf.bytes()[from..from + len], offset)
    }
}
