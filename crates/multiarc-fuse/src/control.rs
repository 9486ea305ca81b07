//! The control directory `.multiarc/` at the root of every mount: the
//! statistics (`arcstats`, `lockstat`) and the tunables (`tunables/max_bytes`,
//! `tunables/lockstat`). Both mounts serve the same tree; what it shows and
//! changes comes from the mount through the [`Controlled`] trait. Its inodes
//! are fixed numbers below [`FIRST_INO`], which both filesystems leave free.
//!
//! The client side, what `multiarc stats` and `multiarc set` use, is here
//! too: [`read_arcstats`] and [`set_tunables`].

use fuser::{Errno, FileAttr, FileType, INodeNo};
use multiarc::metrics::Metric;
use multiarc::units::{clamp_cache_target, parse_size};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

/// The root directory's inode (FUSE's).
pub const INO_ROOT: u64 = 1;
/// The control directory's inode.
pub const INO_CTL: u64 = 2;
const INO_ARCSTATS: u64 = 3;
const INO_TUNABLES: u64 = 4;
const INO_MAX_BYTES: u64 = 5;
const INO_LOCKSTAT: u64 = 6;
/// `tunables/lockstat`: 1 starts recording lock statistics (from zero), 0 stops.
const INO_LOCKSTAT_ON: u64 = 7;
/// The first inode number a filesystem may give its own files.
pub const FIRST_INO: u64 = 16;

/// Whether `ino` is one of the control tree's (not the root's).
pub fn is_ctl(ino: u64) -> bool {
    (INO_CTL..FIRST_INO).contains(&ino)
}

/// What a mount's control directory shows and changes: implemented by each
/// mount over its cache. Its metrics are `arcstats`' lines (`stat value`)
/// and what `--metrics` serves.
pub trait Controlled: Send + Sync {
    /// The figures, in `arcstats`' order.
    fn metrics(&self) -> Vec<Metric>;
    /// The cache's target size (`tunables/max_bytes` as read).
    fn max_bytes(&self) -> u64;
    /// Sets the cache's target size; an error for a size the cache refuses
    /// (below its `min_bytes`).
    fn set_max_bytes(&self, bytes: u64) -> Result<(), String>;
    /// Turns the cache's lock statistics on or off.
    fn set_lockstat(&self, on: bool);
}

/// The control tree of one mount: its open control files. What they show
/// and change is the [`Controlled`] mount each call is given.
pub struct ControlTree {
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

impl Default for ControlTree {
    fn default() -> ControlTree {
        ControlTree::new()
    }
}

impl ControlTree {
    /// A tree with no control file open.
    pub fn new() -> ControlTree {
        ControlTree {
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

    /// The attributes of a control inode.
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

    /// The text of the statistics file: `name value` per line.
    pub fn arcstats(&self, mount: &dyn Controlled) -> String {
        let mut out = String::new();
        for m in mount.metrics() {
            out.push_str(&format!("{} {}\n", m.stat, m.value));
        }
        out
    }

    fn read_text(&self, mount: &dyn Controlled, ino: u64) -> Result<String, Errno> {
        match ino {
            INO_ARCSTATS => Ok(self.arcstats(mount)),
            INO_MAX_BYTES => Ok(format!("{}\n", mount.max_bytes())),
            INO_LOCKSTAT => Ok(if self.lockstat_on.load(Ordering::Relaxed) {
                multiarc::lock::lockstat::snapshot().table(20)
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
    pub fn open(&self, mount: &dyn Controlled, ino: u64, flags: i32) -> Result<u64, Errno> {
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        match ino {
            INO_CTL | INO_TUNABLES => Err(Errno::EISDIR),
            INO_ARCSTATS | INO_LOCKSTAT if writing => Err(Errno::EACCES),
            _ => {
                let text = self.read_text(mount, ino)?;
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.open.lock().insert(fh, Arc::new(text.into_bytes()));
                Ok(fh)
            }
        }
    }

    /// Reads an open control file (its text as it was at open).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let text = self.open.lock().get(&fh).cloned().ok_or(Errno::EBADF)?;
        let b = &text[..];
        let start = (offset as usize).min(b.len());
        let end = start.saturating_add(size as usize).min(b.len());
        Ok(b[start..end].to_vec())
    }

    /// Closes a control file.
    pub fn release(&self, fh: u64) {
        self.open.lock().remove(&fh);
    }

    /// Writes a tunable.
    pub fn write(&self, mount: &dyn Controlled, ino: u64, data: &[u8]) -> Result<(), Errno> {
        if ino == INO_LOCKSTAT_ON {
            let on = match std::str::from_utf8(data).map(str::trim) {
                Ok("1") => true,
                Ok("0") => false,
                _ => return Err(Errno::EINVAL),
            };
            if on {
                multiarc::lock::lockstat::reset();
            }
            mount.set_lockstat(on);
            self.lockstat_on.store(on, Ordering::Relaxed);
            return Ok(());
        }
        if ino != INO_MAX_BYTES {
            return Err(Errno::EACCES);
        }
        let text = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
        let bytes = parse_size(text).map_err(|_| Errno::EINVAL)?;
        let (bytes, warning) = clamp_cache_target(bytes);
        if let Some(w) = warning {
            log::warn!("tunables/max_bytes: {w}");
        }
        mount.set_max_bytes(bytes).map_err(|e| {
            log::debug!("tunables/max_bytes {bytes}: {e}");
            Errno::EINVAL
        })
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

/// An error of the client side ([`read_arcstats`], [`set_tunables`]): one
/// line naming the mount, the file or the setting.
#[derive(Debug)]
pub struct ControlError(String);

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ControlError {}

fn fail<T>(text: String) -> Result<T, ControlError> {
    Err(ControlError(text))
}

/// The control directory of `mountpoint`, checking it is a multiarc mount.
fn ctl_dir(mountpoint: &Path) -> Result<PathBuf, ControlError> {
    match std::fs::metadata(mountpoint) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(format!("{} does not exist", mountpoint.display()))
        }
        Err(e) => return fail(format!("{}: {e}", mountpoint.display())),
        Ok(m) if !m.is_dir() => {
            return fail(format!("{} is not a directory", mountpoint.display()))
        }
        Ok(_) => {}
    }
    let dir = mountpoint.join(CTL_DIR);
    if !dir.join(ARCSTATS).is_file() {
        return fail(format!(
            "{} is not a multiarc mount (it has no {CTL_DIR}/{ARCSTATS})",
            mountpoint.display()
        ));
    }
    Ok(dir)
}

/// Parses `name value` lines.
pub fn parse_arcstats(text: &str) -> Result<Vec<(String, u64)>, ControlError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            match (it.next(), it.next().and_then(|v| v.parse().ok()), it.next()) {
                (Some(name), Some(value), None) => Ok((name.to_string(), value)),
                _ => fail(format!("malformed arcstats line {l:?}")),
            }
        })
        .collect()
}

/// The statistics of the mount at `mountpoint`, in the order `arcstats`
/// gives them.
pub fn read_arcstats(mountpoint: &Path) -> Result<Vec<(String, u64)>, ControlError> {
    let path = ctl_dir(mountpoint)?.join(ARCSTATS);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_arcstats(&text),
        Err(e) => fail(format!("reading {}: {e}", path.display())),
    }
}

/// The mount's `min_bytes` (the floor of `max_bytes`), from arcstats.
fn min_bytes(ctl: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(ctl.join(ARCSTATS)).ok()?;
    parse_arcstats(&text)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == "min_bytes")
        .map(|(_, v)| v)
}

/// What [`set_tunables`] did: each tunable's value as the mount reads it
/// back, and the warnings to show (a size clamped to the machine's memory).
#[derive(Debug, Default)]
pub struct TunablesSet {
    /// `(name, value)`, in the order given.
    pub values: Vec<(String, String)>,
    /// Warnings for the user.
    pub warnings: Vec<String>,
}

/// Applies `NAME=VALUE` settings to the mount at `mountpoint` (e.g.
/// `max_bytes=1GiB`, `lockstat=1`). Every setting is checked before any is
/// applied: a bad one changes nothing.
pub fn set_tunables(mountpoint: &Path, settings: &[String]) -> Result<TunablesSet, ControlError> {
    let ctl = ctl_dir(mountpoint)?;
    let dir = ctl.join(TUNABLES);
    let known: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) => return fail(format!("listing {}: {e}", dir.display())),
    };
    let mut warnings = Vec::new();
    let mut checked = Vec::with_capacity(settings.len());
    for setting in settings {
        let Some((name, value)) = setting.split_once('=') else {
            return fail(format!(
                "{setting:?} is not NAME=VALUE (e.g. max_bytes=1GiB)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if !known.iter().any(|k| k == name) {
            return fail(format!(
                "unknown tunable {name:?} (tunables: {})",
                known.join(", ")
            ));
        }
        // Check the value here for a clear message: lockstat is 0 or 1,
        // the rest are sizes.
        let value = if name == LOCKSTAT {
            match value {
                "0" | "1" => value.to_string(),
                _ => return fail(format!("lockstat must be 0 or 1, got {value:?}")),
            }
        } else {
            let bytes = match parse_size(value) {
                Ok(bytes) => bytes,
                Err(e) => return fail(format!("{name}: {e}")),
            };
            if name == MAX_BYTES {
                if let (_, Some(w)) = clamp_cache_target(bytes) {
                    warnings.push(w);
                }
                if let Some(min) = min_bytes(&ctl) {
                    if bytes < min {
                        return fail(format!(
                            "max_bytes={bytes} is below the mount's min_bytes {min} (see arcstats)"
                        ));
                    }
                }
            }
            bytes.to_string()
        };
        checked.push((name.to_string(), value));
    }
    let mut now = Vec::with_capacity(checked.len());
    for (name, value) in checked {
        let path = dir.join(&name);
        match std::fs::write(&path, format!("{value}\n")) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return fail(format!(
                    "the mount refused {name}={value} (out of range: see min_bytes in arcstats)"
                ))
            }
            Err(e) => return fail(format!("writing {}: {e}", path.display())),
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => now.push((name, text.trim().to_string())),
            Err(e) => return fail(format!("reading {}: {e}", path.display())),
        }
    }
    Ok(TunablesSet {
        values: now,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed {
        max: AtomicU64,
    }

    impl Controlled for Fixed {
        fn metrics(&self) -> Vec<Metric> {
            vec![
                Metric::counter("hits", "Hits.", 3),
                Metric::gauge("c", "The target.", self.max_bytes()),
            ]
        }
        fn max_bytes(&self) -> u64 {
            self.max.load(Ordering::Relaxed)
        }
        fn set_max_bytes(&self, bytes: u64) -> Result<(), String> {
            if bytes < 1024 {
                return Err("below min_bytes".into());
            }
            self.max.store(bytes, Ordering::Relaxed);
            Ok(())
        }
        fn set_lockstat(&self, _on: bool) {}
    }

    fn mount() -> Fixed {
        Fixed {
            max: AtomicU64::new(1 << 20),
        }
    }

    #[test]
    fn a_control_file_reads_the_text_it_had_at_open() {
        let (t, m) = (ControlTree::new(), mount());
        let ino = t.lookup(INO_CTL, ARCSTATS.as_bytes()).unwrap().unwrap();
        let fh = t.open(&m, ino, libc::O_RDONLY).unwrap();
        let max = t.lookup(INO_CTL, TUNABLES.as_bytes()).unwrap().unwrap();
        let max = t.lookup(max, MAX_BYTES.as_bytes()).unwrap().unwrap();
        t.write(&m, max, b"2MiB\n").unwrap();
        let text = String::from_utf8(t.read(fh, 0, 4096).unwrap()).unwrap();
        assert_eq!(text, format!("hits 3\nc {}\n", 1 << 20));
        t.release(fh);
        assert_eq!(t.read(fh, 0, 10), Err(Errno::EBADF));
        let fh = t.open(&m, ino, libc::O_RDONLY).unwrap();
        let text = String::from_utf8(t.read(fh, 0, 4096).unwrap()).unwrap();
        assert_eq!(text, format!("hits 3\nc {}\n", 2 << 20));
    }

    #[test]
    fn refused_writes_and_names() {
        let (t, m) = (ControlTree::new(), mount());
        assert_eq!(t.open(&m, INO_ARCSTATS, libc::O_WRONLY), Err(Errno::EACCES));
        assert_eq!(t.write(&m, INO_MAX_BYTES, b"12"), Err(Errno::EINVAL));
        assert_eq!(t.write(&m, INO_MAX_BYTES, b"lots"), Err(Errno::EINVAL));
        assert_eq!(t.write(&m, INO_LOCKSTAT_ON, b"2"), Err(Errno::EINVAL));
        assert_eq!(t.write(&m, INO_ARCSTATS, b"1"), Err(Errno::EACCES));
        assert_eq!(t.lookup(INO_CTL, b"nope"), Some(Err(Errno::ENOENT)));
        assert_eq!(t.lookup(INO_ROOT, b"other"), None);
        assert!(is_ctl(INO_LOCKSTAT_ON) && !is_ctl(INO_ROOT) && !is_ctl(FIRST_INO));
    }

    #[test]
    fn arcstats_lines_parse() {
        assert_eq!(
            parse_arcstats("a 1\n\nb 2\n").unwrap(),
            vec![("a".to_string(), 1), ("b".to_string(), 2)]
        );
        assert!(parse_arcstats("a\n").is_err());
        assert!(parse_arcstats("a 1 2\n").is_err());
        assert!(parse_arcstats("a x\n").is_err());
    }
}
