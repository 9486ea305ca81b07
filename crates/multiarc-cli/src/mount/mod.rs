//! `multiarc mount`: a backing directory served through the cache with FUSE,
//! or a bucket (`s3://bucket[/prefix]`, `bucket.rs`); `multiarc stats` and
//! `multiarc set`: its control files.
//!
//! The mount process checks its arguments, then (without `--foreground`)
//! starts itself again as the mount process (the same binary and arguments
//! plus a hidden flag) with its stdout a pipe back; that process mounts,
//! tells the waiting one over the pipe that the mount is ready (or why it
//! failed) and serves requests, so the command returns once the mount can be
//! used. Unmounting
//! (`fusermount3 -u`, or SIGINT/SIGTERM/SIGHUP to the mount process) ends the
//! session; every dirty block is written back before the process exits.

#[cfg(feature = "bucket")]
mod bucket;
mod creds;
mod ctl;
mod ctltree;
mod data;
mod fs;
mod fusermount;
mod inodes;

pub use ctl::{run_set, run_stats, SetArgs, StatsArgs};

use crate::util::LockUnpoisoned;
use crate::util::{count_arg, size_arg};
use anyhow::{anyhow, bail, Context};
use fs::{FsConfig, MultiarcFs};
use multiarc::{BlockKey, Cache};
use multiarc_file::{Locking, WriteBack, WriteBackConfig, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct MountArgs {
    /// Directory whose files are served (read and written through the
    /// cache), or a bucket: s3://BUCKET[/PREFIX] (see --endpoint).
    backing: PathBuf,
    /// Empty directory to mount on.
    mountpoint: PathBuf,
    /// Cache size (the ARC's target `c`); changeable at run time through
    /// MOUNTPOINT/.multiarc/tunables/max_bytes.
    #[arg(long, default_value = "256MiB", value_parser = size_arg)]
    max_bytes: u64,
    /// Cache block size: a power of two from 512 bytes to 1 MiB (default
    /// 8KiB); of a bucket, the size of its ranged reads, from 4KiB to
    /// 64MiB (default 256KiB).
    #[arg(long, value_parser = size_arg)]
    block_size: Option<u64>,
    /// How reads and writes of one file exclude each other: range (POSIX
    /// atomicity, byte-range locks), rwsem (one lock per file), torn (none).
    #[arg(long, default_value = "range")]
    locking: Locking,
    /// Stay in the foreground (otherwise return once the mount is ready).
    #[arg(long)]
    foreground: bool,
    /// Threads serving FUSE requests.
    #[arg(long, default_value = "4", value_parser = count_arg)]
    threads: usize,
    /// In the background mode, append the mount's messages (write-back
    /// errors, the final flush) to this file instead of discarding them.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Most dirty (written, not yet written back) bytes held at once;
    /// beyond it writers wait for write-back, or get its error if it keeps
    /// failing.
    #[arg(long, default_value = "64MiB", value_parser = size_arg)]
    dirty_max: u64,
    /// Let every user use the mount (FUSE's allow_other), not only the
    /// user who mounted it; the kernel still checks each access against
    /// the files' owners and modes. Objects a user creates are theirs when
    /// the mount runs as root. Users other than root may ask for it only
    /// where /etc/fuse.conf has the line user_allow_other.
    #[arg(long)]
    allow_other: bool,
    /// Mount even if the mountpoint is not empty (its contents are hidden
    /// while mounted).
    #[arg(long)]
    nonempty: bool,
    /// A second cache tier (OpenZFS's L2ARC) on this file (created, its
    /// space reserved) or block device, of --l2-bytes: blocks about to be
    /// evicted from memory are written there and read back on a miss. It
    /// starts empty at each mount (file ids are not kept across mounts, so
    /// an earlier mount's copies could belong to other files).
    #[arg(long, requires = "l2_bytes")]
    l2: Option<PathBuf>,
    /// The size of the --l2 tier.
    #[arg(long, value_parser = size_arg, requires = "l2")]
    l2_bytes: Option<u64>,
    /// Seconds between periodic write-back passes (for tests).
    #[arg(long, default_value = "5", hide = true, value_parser = seconds_arg)]
    writeback_interval: f64,
    /// Of a bucket: the S3 endpoint, e.g. http://127.0.0.1:3900 (path-style
    /// requests). Default: AWS_ENDPOINT_URL, or AWS. Credentials come from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN).
    #[arg(long)]
    endpoint: Option<String>,
    /// Of a bucket: its region (default: AWS_REGION, or us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Of a bucket: refuse every change (EROFS).
    #[arg(long)]
    read_only: bool,
    /// Of a bucket: let an existing object be replaced, by opening it with
    /// O_TRUNC and writing it anew (refused with EPERM otherwise).
    #[arg(long)]
    allow_overwrite: bool,
    /// Of a bucket: let unlink delete objects (refused with EPERM otherwise).
    #[arg(long)]
    allow_delete: bool,
    /// Of a bucket: how long names, sizes and an object's version are
    /// trusted before the store is asked again (e.g. 1s, 500ms, 0): a
    /// change made elsewhere is seen at the next open after it.
    #[arg(long, value_parser = duration_arg)]
    metadata_ttl: Option<std::time::Duration>,
    /// Of a bucket: read every file with a request to the mount (direct
    /// I/O), not through the kernel's page cache. By default files opened
    /// for reading go through the page cache, kept across opens while the
    /// object is unchanged (same ETag) and dropped at the first open that
    /// finds a new version; files being written, and opens with O_DIRECT,
    /// use direct I/O either way.
    #[arg(long)]
    no_page_cache: bool,
    /// Of a bucket: the page cache, the default (accepted for scripts
    /// written when it was not).
    #[arg(long, hide = true, conflicts_with = "no_page_cache")]
    page_cache: bool,
    /// Internal: this is the background mount process, started by `mount`
    /// without `--foreground`; it reports readiness on its stdout.
    #[arg(long, hide = true)]
    daemon_child: bool,
}

/// Clap value parser of a duration: `1s`, `500ms`, `2m`, `0` (seconds when
/// no unit), up to a day.
fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale <= 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!(
            "{text:?} is not a duration from 0 to 1 day (e.g. 1s, 500ms, 2m)"
        )),
    }
}

/// The hidden flag of the background mount process.
const DAEMON_CHILD_FLAG: &str = "--daemon-child";

fn seconds_arg(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds from above 0 to 86400"
        )),
    }
}

/// The `--log` file, opened before the mount process detaches (and before
/// `chdir("/")`).
static LOG: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Where the mount process reports whether the mount came up: its own
/// stderr, or its stdout, a pipe to the `mount` command waiting for it. The
/// first report wins: "ready" once a request was served, or the error that
/// ended the mount before that.
struct Ready {
    pipe: std::sync::Mutex<Option<std::io::Stdout>>,
    foreground: bool,
}

impl Ready {
    /// The mount serves requests: tell the parent (which exits 0) and
    /// detach from its terminal, or print `msg` in the foreground.
    fn ok(&self, msg: &str) {
        if self.foreground {
            eprintln!("multiarc: {msg}");
            return;
        }
        let pipe = self.pipe.lock_unpoisoned().take();
        if let Some(mut pipe) = pipe {
            let _ = pipe.write_all(b"ok\n");
            let _ = pipe.flush();
            // Stdout (the pipe) and stderr now point at /dev/null (or the
            // log): the waiting command has what it waited for.
            detach_stdio();
        }
    }

    /// The mount failed before it was ready: tell the parent, which prints
    /// it and exits non-zero. Returns whether the parent was told.
    fn fail(&self, e: &anyhow::Error) -> bool {
        let pipe = self.pipe.lock_unpoisoned().take();
        match pipe {
            Some(mut pipe) => {
                let line = format!("{e:#}").replace('\n', " ");
                let _ = writeln!(pipe, "{line}");
                let _ = pipe.flush();
                true
            }
            None => false,
        }
    }
}

/// Points stdin, stdout and stderr at /dev/null (a daemon must not keep its
/// caller's pipes open); stderr at the `--log` file if there is one.
fn detach_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    let _ = rustix::stdio::dup2_stdin(&null);
    let _ = rustix::stdio::dup2_stdout(&null);
    let _ = match LOG.get() {
        Some(log) => rustix::stdio::dup2_stderr(log),
        None => rustix::stdio::dup2_stderr(&null),
    };
}

/// One descriptor per inode the kernel knows: raise the soft limit on
/// open files to the hard one.
fn raise_nofile_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
}

/// The message for a failed mount: names `/dev/fuse` when it could not be
/// opened.
fn mount_error(e: &std::io::Error, mountpoint: &Path, root: bool) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        anyhow!(
            "mounting {}: /dev/fuse: {e}{}",
            mountpoint.display(),
            if root {
                ""
            } else {
                " (users other than root mount through fusermount3: is it installed setuid root?)"
            }
        )
    } else if e.kind() == std::io::ErrorKind::NotFound && find_in_path("fusermount3").is_none() {
        anyhow!(
            "mounting {}: fusermount3 was not found: install the fuse3 package",
            mountpoint.display()
        )
    } else {
        anyhow!("mounting {}: {e}", mountpoint.display())
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Mount points from /proc/self/mountinfo (octal escapes decoded).
fn mount_points() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|field| {
            let b = field.as_bytes();
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\'
                    && i + 3 < b.len()
                    && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
                {
                    let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
                    out.push(v);
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            PathBuf::from(std::ffi::OsStr::from_bytes(&out))
        })
        .collect()
}

/// FUSE's configuration file, where the administrator lets users other
/// than root mount with `allow_other`.
const FUSE_CONF: &str = "/etc/fuse.conf";

/// Whether a `/etc/fuse.conf` text has `user_allow_other` (a line of its
/// own; `#` starts a comment).
fn allows_other(conf: &str) -> bool {
    conf.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .any(|l| l == "user_allow_other")
}

/// The cache block size of a directory mount when none is given.
const DEFAULT_BLOCK_SIZE: u64 = 8192;

/// Checks the arguments; returns the canonical backing dir and mountpoint.
fn check_args(args: &MountArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    for (given, flag) in [
        (args.endpoint.is_some(), "--endpoint"),
        (args.region.is_some(), "--region"),
        (args.read_only, "--read-only"),
        (args.allow_overwrite, "--allow-overwrite"),
        (args.allow_delete, "--allow-delete"),
        (args.metadata_ttl.is_some(), "--metadata-ttl"),
        (args.no_page_cache, "--no-page-cache"),
        (args.page_cache, "--page-cache"),
    ] {
        if given {
            bail!("{flag} is for buckets (s3://BUCKET[/PREFIX]), not a backing directory");
        }
    }
    let b = &args.backing;
    match std::fs::metadata(b) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("backing directory {} does not exist", b.display())
        }
        Err(e) => bail!("backing directory {}: {e}", b.display()),
        Ok(m) if !m.is_dir() => bail!("backing directory {} is not a directory", b.display()),
        Ok(_) => {}
    }
    let mountpoint = check_mountpoint(args)?;
    let backing = b
        .canonicalize()
        .with_context(|| format!("backing directory {}", b.display()))?;
    if mountpoint.starts_with(&backing) || backing.starts_with(&mountpoint) {
        bail!(
            "the mountpoint {} and the backing directory {} must not contain each other",
            mountpoint.display(),
            backing.display()
        );
    }
    let bs = args.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    if !bs.is_power_of_two() || !(MIN_BLOCK_SIZE as u64..=MAX_BLOCK_SIZE as u64).contains(&bs) {
        bail!("--block-size {bs} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes");
    }
    if args.dirty_max < bs {
        bail!(
            "--dirty-max {} is too small: at least one block ({bs} bytes)",
            args.dirty_max
        );
    }
    crate::util::check_fits_in_memory(&format!("--dirty-max {}", args.dirty_max), args.dirty_max)?;
    if args.max_bytes < bs * 16 {
        bail!(
            "--max-bytes {} is too small: at least 16 blocks ({} bytes) are needed",
            args.max_bytes,
            bs * 16
        );
    }
    check_fuse(args)?;
    Ok((backing, mountpoint))
}

/// Checks the mountpoint (an empty directory, nothing mounted on it);
/// returns it canonical.
fn check_mountpoint(args: &MountArgs) -> anyhow::Result<PathBuf> {
    let m = &args.mountpoint;
    match std::fs::metadata(m) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("mountpoint {} does not exist", m.display())
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => bail!(
            "mountpoint {} is a disconnected FUSE mount (unmount it first: fusermount3 -u {})",
            m.display(),
            m.display()
        ),
        Err(e) => bail!("mountpoint {}: {e}", m.display()),
        Ok(md) if !md.is_dir() => bail!("mountpoint {} is not a directory", m.display()),
        Ok(_) => {}
    }
    let mountpoint = m
        .canonicalize()
        .with_context(|| format!("mountpoint {}", m.display()))?;
    if mount_points().contains(&mountpoint) {
        bail!(
            "mountpoint {} is busy: something is already mounted there",
            mountpoint.display()
        );
    }
    if !args.nonempty
        && std::fs::read_dir(&mountpoint)
            .with_context(|| format!("mountpoint {}", mountpoint.display()))?
            .next()
            .is_some()
    {
        bail!(
            "mountpoint {} is not empty (mounting would hide its contents; --nonempty to mount anyway)",
            mountpoint.display()
        );
    }
    Ok(mountpoint)
}

/// Checks that FUSE can be used here (the device, the helper for users
/// other than root, `--allow-other`'s permission).
fn check_fuse(args: &MountArgs) -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse does not exist: the kernel's FUSE module is not loaded (modprobe fuse) or the device is not available here");
    }
    let root = rustix::process::geteuid().is_root();
    if !root && find_in_path("fusermount3").is_none() && find_in_path("fusermount").is_none() {
        bail!("fusermount3 was not found in PATH: install the fuse3 package (it mounts FUSE filesystems for users other than root)");
    }
    if args.allow_other && !root {
        let conf = std::fs::read_to_string(FUSE_CONF).unwrap_or_default();
        if !allows_other(&conf) {
            bail!(
                "--allow-other: only root may let other users use a mount unless {FUSE_CONF} \
                 has the line user_allow_other"
            );
        }
    }
    Ok(())
}

pub fn run(mut args: MountArgs) -> anyhow::Result<()> {
    if args.backing.to_string_lossy().starts_with("s3://") {
        #[cfg(feature = "bucket")]
        return bucket::run(args);
        #[cfg(not(feature = "bucket"))]
        bail!(
            "{}: this multiarc was built without the `bucket` feature (mounting buckets)",
            args.backing.display()
        );
    }
    let (backing, mountpoint) = check_args(&args)?;
    // The background mount process repeats the checks; the warnings were
    // printed (and logged) by the command that started it.
    let warn = !args.daemon_child;
    let (max_bytes, warning) = crate::util::clamp_cache_target(args.max_bytes);
    if let Some(w) = warning.filter(|_| warn) {
        eprintln!("multiarc: warning: --max-bytes: {w}");
    }
    args.max_bytes = max_bytes;
    if let Some(l2) = &args.l2 {
        // The background process leaves the working directory.
        args.l2 = Some(std::path::absolute(l2).with_context(|| format!("--l2 {}", l2.display()))?);
    }
    open_log(&args)?;
    if warn && backing.join(ctltree::CTL_DIR).symlink_metadata().is_ok() {
        let msg = format!(
            "multiarc: warning: {} is hidden by the mount's control directory \
             (unreachable through {}; it stays in the backing directory)",
            backing.join(ctltree::CTL_DIR).display(),
            mountpoint.display()
        );
        eprintln!("{msg}");
        if let Some(mut log) = LOG.get() {
            let _ = writeln!(log, "{msg}");
        }
    }
    let ready = become_mount_process(&args)?;
    let result = serve(&args, backing, mountpoint, Arc::clone(&ready));
    finish_mount_process(&args, &ready, result)
}

/// Opens the `--log` file (before the mount process detaches).
fn open_log(args: &MountArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("--log {}", path.display()))?;
        let _ = LOG.set(file);
    }
    Ok(())
}

/// Without `--foreground`: starts the background mount process and exits
/// with its report (the command itself never returns from here); in that
/// process, or in the foreground, returns where readiness is reported.
fn become_mount_process(args: &MountArgs) -> anyhow::Result<Arc<Ready>> {
    if !args.foreground && !args.daemon_child {
        // Returns only on an error starting the mount process.
        wait_for_mount_process()?;
    }
    raise_nofile_limit();
    Ok(Arc::new(if args.foreground {
        Ready {
            pipe: std::sync::Mutex::new(None),
            foreground: true,
        }
    } else {
        detach()
    }))
}

/// The end of the mount process: an error before the mount was ready goes
/// to the waiting command (which prints it), and a background process
/// exits non-zero on any error.
fn finish_mount_process(
    args: &MountArgs,
    ready: &Ready,
    result: anyhow::Result<()>,
) -> anyhow::Result<()> {
    if let Err(e) = &result {
        if ready.fail(e) {
            // The parent prints it.
            std::process::exit(1);
        }
    }
    if !args.foreground && result.is_err() {
        std::process::exit(1);
    }
    result
}

/// Starts the background mount process (this binary, these arguments and
/// [`DAEMON_CHILD_FLAG`]) with its stdout a pipe, and waits for its report:
/// exits 0 when it says the mount is ready, 1 with its error line when the
/// mount failed. Returns an error when it cannot be started or ends without
/// a report.
fn wait_for_mount_process() -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding this program to start the mount process")?;
    // `multiarc mount ARGS...` becomes `multiarc mount --daemon-child ARGS...`
    // (the flag right after the subcommand, so that it stays an option even
    // after a `--`).
    let mut args = std::env::args_os().skip(1);
    let subcommand = args.next().unwrap_or_else(|| "mount".into());
    let mut child = std::process::Command::new(&exe)
        .arg(subcommand)
        .arg(DAEMON_CHILD_FLAG)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting the mount process {}", exe.display()))?;
    let mut pipe = child.stdout.take().context("the mount process's stdout")?;
    // One line: "ok", or the error. End of file without one: the child died
    // without a word.
    let mut report = Vec::new();
    let mut byte = [0u8; 1];
    while let Ok(1) = pipe.read(&mut byte) {
        if byte[0] == b'\n' {
            break;
        }
        report.push(byte[0]);
    }
    drop(pipe);
    let report = String::from_utf8_lossy(&report);
    let line = report.trim();
    if line == "ok" {
        std::process::exit(0);
    }
    if line.is_empty() {
        let status = child
            .wait()
            .map_or_else(|e| format!("unknown ({e})"), |s| s.to_string());
        bail!("the mount process exited before the mount was ready ({status})");
    }
    // The child's error is already one line of context; print as is. (It
    // exits by itself once it has reported.)
    let _ = child.wait();
    eprintln!("multiarc: error: {line}");
    std::process::exit(1);
}

/// The background mount process: its own session (no controlling terminal,
/// so the terminal's hang-up does not reach it), `/` as its directory (not
/// to keep the caller's busy), and its stdout the pipe to report on.
fn detach() -> Ready {
    let _ = rustix::process::setsid();
    let _ = std::env::set_current_dir("/");
    Ready {
        pipe: std::sync::Mutex::new(Some(std::io::stdout())),
        foreground: false,
    }
}

fn serve(
    args: &MountArgs,
    backing: PathBuf,
    mountpoint: PathBuf,
    ready: Arc<Ready>,
) -> anyhow::Result<()> {
    // The kernel applies the caller's umask to the modes it sends; ours must
    // not apply a second one.
    rustix::process::umask(rustix::fs::Mode::empty());
    let block_size = args.block_size.unwrap_or(DEFAULT_BLOCK_SIZE) as usize;
    let cache = Arc::new(
        {
            let builder = Cache::<BlockKey>::builder()
                .max_bytes(args.max_bytes)
                .min_bytes((1 << 20).min(args.max_bytes).max(block_size as u64 * 16));
            match (&args.l2, args.l2_bytes) {
                (Some(path), Some(bytes)) => builder.l2(path, bytes).l2_rebuild(false),
                _ => builder,
            }
        }
        .build()
        .map_err(|e| anyhow!("cache: {e}"))?,
    );
    let defaults = WriteBackConfig::default();
    let writeback = WriteBack::new(WriteBackConfig {
        dirty_max: args.dirty_max,
        flush_threshold: defaults.flush_threshold.min(args.dirty_max / 4),
        interval: std::time::Duration::from_secs_f64(args.writeback_interval),
    })
    .context("write-back")?;
    let fs = MultiarcFs::new(
        FsConfig {
            root: backing.clone(),
            block_size,
            locking: args.locking,
        },
        Arc::clone(&cache),
        Arc::clone(&writeback),
    )
    .with_context(|| format!("backing directory {}", backing.display()))?;
    let fsname = format!("multiarc:{}", backing.display());
    // Ready once a request is answered: the worker threads are running
    // (starting them can still fail, with too few descriptors for one).
    let msg = format!(
        "mounted {} on {} (cache {} bytes, {}-byte blocks, {} locking, {} threads)",
        backing.display(),
        mountpoint.display(),
        args.max_bytes,
        block_size,
        args.locking,
        args.threads
    );
    let session = start_session(fs, &mountpoint, &fsname, args, &[], ready, msg)?;
    let served = session.run();
    if served.is_err() && mount_points().contains(&mountpoint) {
        // The session failed (its own unmount may have found the mount
        // busy): do not leave a dead mount behind.
        let _ = unmount(&mountpoint);
    }
    // The filesystem (and its open files) is dropped with the session; write
    // back whatever is left and check nothing is.
    let flushed = writeback.flush_all();
    let left = writeback.stats().dirty_bytes;
    drop(writeback);
    served.map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EMFILE) {
            format!(
                " (each of the --threads {} needs a /dev/fuse descriptor, and each file the \
                 kernel knows one: raise the open-file limit, ulimit -n)",
                args.threads
            )
        } else {
            String::new()
        };
        anyhow!("serving {}: {e}{hint}", mountpoint.display())
    })?;
    flushed.context("final write-back")?;
    if left > 0 {
        bail!(
            "{left} dirty bytes could not be written back to {}",
            backing.display()
        );
    }
    eprintln!(
        "multiarc: unmounted {}; everything written back to {}",
        mountpoint.display(),
        backing.display()
    );
    Ok(())
}

/// Mounts `fs` on `mountpoint` (directly as root, else through
/// fusermount3) with `extra` mount options beside the usual ones, starts
/// the signal thread, and a thread that reports `msg` as ready once the
/// control directory answers.
fn start_session<F: fuser::Filesystem>(
    fs: F,
    mountpoint: &Path,
    fsname: &str,
    args: &MountArgs,
    extra: &[fuser::MountOption],
    ready: Arc<Ready>,
    msg: String,
) -> anyhow::Result<fuser::Session<F>> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(fsname.to_string()),
        fuser::MountOption::Subtype("multiarc".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    config.mount_options.extend_from_slice(extra);
    config.n_threads = Some(args.threads);
    config.clone_fd = true;
    // Without --allow-other the kernel refuses other users' requests
    // itself (EACCES), and fuser answers only the owner's.
    let acl = if args.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    config.acl = acl;
    let root = rustix::process::geteuid().is_root();
    let session = if root {
        fuser::Session::new(fs, mountpoint, &config)
            .map_err(|e| mount_error(&e, mountpoint, root))?
    } else {
        // As libfuse does: the setuid helper opens /dev/fuse and mounts.
        let helper = find_in_path("fusermount3")
            .or_else(|| find_in_path("fusermount"))
            .ok_or_else(|| {
                anyhow!("fusermount3 was not found in PATH: install the fuse3 package")
            })?;
        let mut options = fusermount::options(fsname, "multiarc", args.allow_other);
        if extra.contains(&fuser::MountOption::RO) {
            options.push_str(",ro");
        }
        let fd = fusermount::mount(&helper, mountpoint, &options)
            .map_err(|e| mount_error(&e, mountpoint, root))?;
        fuser::Session::from_fd(fs, fd, acl, config).map_err(|e| {
            let _ = unmount(mountpoint);
            mount_error(&e, mountpoint, root)
        })?
    };
    spawn_signal_thread(mountpoint.to_path_buf())?;
    let probe = mountpoint.join(ctltree::CTL_DIR).join(ctltree::ARCSTATS);
    std::thread::Builder::new()
        .name("multiarc-ready".into())
        .spawn(move || {
            if std::fs::metadata(&probe).is_ok() {
                ready.ok(&msg);
            }
        })
        .context("ready thread")?;
    Ok(session)
}

/// SIGINT, SIGTERM and SIGHUP unmount (lazily, so open files finish); the
/// session then ends and everything is written back.
fn spawn_signal_thread(mountpoint: PathBuf) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).context("signals")?;
    std::thread::Builder::new()
        .name("multiarc-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!(
                    "multiarc: signal {sig}: unmounting {}",
                    mountpoint.display()
                );
                if let Err(e) = unmount(&mountpoint) {
                    eprintln!("multiarc: unmounting {}: {e}", mountpoint.display());
                }
            }
        })
        .context("signal thread")?;
    Ok(())
}

/// Unmounts `mountpoint` (lazily): directly as root, else via fusermount3.
pub fn unmount(mountpoint: &Path) -> anyhow::Result<()> {
    if rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::DETACH).is_ok() {
        return Ok(());
    }
    let bin = find_in_path("fusermount3").unwrap_or_else(|| "fusermount".into());
    let out = std::process::Command::new(bin)
        .args(["-u", "-z", "--"])
        .arg(mountpoint)
        .output()
        .context("running fusermount3")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_dev_fuse_is_named() {
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        let msg = mount_error(&e, Path::new("/mnt/x"), false).to_string();
        assert!(
            msg.contains("/dev/fuse") && msg.contains("Permission denied"),
            "{msg}"
        );
        assert!(msg.contains("fusermount3"), "{msg}");
        let msg = mount_error(&e, Path::new("/mnt/x"), true).to_string();
        assert!(msg.contains("/dev/fuse"), "{msg}");
    }

    #[test]
    fn user_allow_other_is_found_only_as_a_line_of_its_own() {
        assert!(allows_other("# comment\nuser_allow_other\n"));
        assert!(allows_other("  user_allow_other  # yes\n"));
        assert!(!allows_other("#user_allow_other\n"));
        assert!(!allows_other("mount_max = 1000\n"));
        assert!(!allows_other(""));
    }

    #[test]
    fn durations_parse() {
        use std::time::Duration;
        assert_eq!(duration_arg("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(duration_arg("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration_arg("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration_arg("0"), Ok(Duration::ZERO));
        assert_eq!(duration_arg("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "x", "-1s", "2d", "100000s"] {
            assert!(duration_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mountinfo_lists_root() {
        assert!(mount_points().contains(&PathBuf::from("/")));
    }
}
