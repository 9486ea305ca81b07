//! The bucket mount (`s3://bucket[/prefix]`): a bucket through the cache.
//!
//! The filesystem's logic is `multiarc_bucket::BucketFs` (the namespace from
//! listings, reads through `multiarc_object_store::CachedStore`, sequential
//! uploads, the errno rules); this is the FUSE adapter in front of it, plus
//! the control directory (`.multiarc/`: the cache's, the store's and the
//! filesystem's figures, and the tunables). `BucketFs` runs the store's async calls on
//! its own tokio runtime and blocks fuser's threads on them; nothing here
//! runs inside that runtime.
//!
//! The command checks its arguments and that the bucket answers (one
//! listing) before it starts the background mount process, so a bad
//! endpoint, missing bucket or refused credentials give one error line and
//! a non-zero exit, with nothing mounted.

use crate::control::{is_ctl, ControlTree, Controlled, CTL_DIR};
use crate::daemon::{become_mount_process, finish_mount_process, open_log, Ready};
use crate::exporter::{MetricsServer, Sources};
use crate::fuse_ops::{FuseOps, Op};
use crate::options::MountOptions;
use crate::session::{
    check_fuse, check_mountpoint, mount_points, session_ended, start_session, unmount,
};
use anyhow::{anyhow, bail, Context};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use multiarc::metrics::Metric;
use multiarc_bucket::{Attr, BucketConfig, BucketFs, Kind, S3Options, S3Source, ROOT_INO};
use multiarc_object_store::{BuildError, CachedStore};
use object_store::aws::AmazonS3;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// The default metadata TTL of a bucket mount (mountpoint-s3's too).
const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(1);
/// The default block size of a bucket mount: the cached store's measured
/// default.
const DEFAULT_BLOCK_SIZE: u64 = multiarc_object_store::DEFAULT_BLOCK_SIZE;
/// How long the command waits for the bucket's first answer.
const CHECK_TIMEOUT: Duration = Duration::from_secs(20);
/// Handles of control files and directories carry this bit (`BucketFs`'s
/// count up from 1).
const CTL_FH: u64 = 1 << 63;

/// Mounts the bucket `options.backing` names (see [`crate::mount`]):
/// checks, reaches the bucket, then mounts (in the background unless
/// `foreground`).
pub(crate) fn mount(mut options: MountOptions) -> anyhow::Result<()> {
    let text = options.backing.to_string_lossy().into_owned();
    let source = S3Source::parse(&text).map_err(|e| anyhow!(e))?;
    let mountpoint = check_mountpoint(&options)?;
    let bs = options.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    if !bs.is_power_of_two() || !(4096..=64 << 20).contains(&bs) {
        bail!("--block-size {bs} must be a power of two from 4KiB to 64MiB for a bucket");
    }
    if options.max_bytes < bs * 16 {
        bail!(
            "--max-bytes {} is too small: at least 16 blocks ({} bytes) are needed",
            options.max_bytes,
            bs * 16
        );
    }
    if options.read_only && (options.allow_overwrite || options.allow_delete) {
        bail!("--read-only cannot be combined with --allow-overwrite or --allow-delete");
    }
    check_fuse(&options)?;
    options.settle()?;
    open_log(&options)?;
    let s3_options = S3Options::new(options.endpoint.clone(), options.region.clone());
    let store = multiarc_bucket::s3_store(&source, &s3_options)
        .map_err(|e| anyhow!("{source}: {}", one_line(&e)))?;
    if !options.daemon_child {
        // Before anything is mounted or started: a wrong endpoint, a
        // missing bucket or refused credentials are one line here.
        multiarc_bucket::check_bucket(&store, &source, CHECK_TIMEOUT).map_err(|e| anyhow!(e))?;
    }
    let Some(ready) = become_mount_process(&options)? else {
        return Ok(());
    };
    let result = serve(&options, source, store, mountpoint, Arc::clone(&ready));
    finish_mount_process(&ready, result)
}

fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text = format!("{text}: {s_text}");
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

/// How long a mount waits for its L2 device while another cache holds it.
/// An unmount returns once the kernel lets the mount point go; the old
/// mount process then writes what its memory held to the L2 before it
/// exits (seconds for a few GiB), and a mount started meanwhile over the
/// same L2 would otherwise fail at once.
const L2_BUSY_WAIT: Duration = Duration::from_secs(120);

/// Whether `e` says the L2 device is locked by another cache.
fn l2_busy(e: &BuildError) -> bool {
    matches!(e, BuildError::Cache(multiarc::ConfigError::Device { source, .. })
        if source.kind() == std::io::ErrorKind::WouldBlock)
}

/// `build`'s store, trying again every 200 ms for up to `wait` while its L2
/// device is in use by another cache (one warning line); any other error,
/// or the same one after `wait`, is returned.
fn build_waiting_for_l2<T>(
    mut build: impl FnMut() -> Result<T, BuildError>,
    wait: Duration,
) -> Result<T, BuildError> {
    let deadline = std::time::Instant::now() + wait;
    let mut warned = false;
    loop {
        match build() {
            Err(e) if l2_busy(&e) && std::time::Instant::now() < deadline => {
                if !warned {
                    log::warn!(
                        "{e}: waiting up to {} s for it (a mount of it that is still \
                         writing its memory to it after an unmount?)",
                        wait.as_secs()
                    );
                    warned = true;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

fn serve(
    options: &MountOptions,
    source: S3Source,
    store: AmazonS3,
    mountpoint: PathBuf,
    ready: Arc<Ready>,
) -> anyhow::Result<()> {
    let ttl = options.metadata_ttl.unwrap_or(DEFAULT_METADATA_TTL);
    let block_size = options.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    let endpoint = options
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        .unwrap_or_else(|| "aws".into());
    let build = || {
        let mut builder = CachedStore::builder(store.clone())
            .max_bytes(options.cache_target())
            .block_size(block_size)
            .metadata_ttl(ttl)
            // `BucketFs` prefetches sequential reads in the background,
            // several GETs at once; the store's readahead would make reads
            // wait.
            .readahead(0)
            // One L2 file must never serve another endpoint's bucket of the
            // same name.
            .namespace(format!("{endpoint} {}", source.bucket));
        if let (Some(path), Some(bytes)) = (&options.l2, options.l2_bytes) {
            builder = builder.l2(path, bytes);
        }
        if let Some(write_max) = options.l2_write_max() {
            builder = builder.configure_cache(move |cache| cache.l2_write_max(write_max));
        }
        builder.build()
    };
    let cached = build_waiting_for_l2(build, L2_BUSY_WAIT).map_err(|e| anyhow!("cache: {e}"))?;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let defaults = BucketConfig::default();
    let config = BucketConfig {
        prefetch_bytes: prefetch_window(options.max_bytes, defaults.prefetch_bytes),
        // An object whose random reads are dense is fetched whole if it
        // takes at most half of what memory and the L2 hold.
        dense_object_max: Some(
            options
                .max_bytes
                .saturating_add(options.l2.as_ref().and(options.l2_bytes).unwrap_or(0))
                / 2,
        ),
        metadata_ttl: ttl,
        read_only: options.read_only,
        allow_overwrite: options.allow_overwrite,
        allow_delete: options.allow_delete,
        uid,
        gid,
        ..defaults
    };
    let root = source.root().unwrap_or_default();
    let fs = BucketFs::new(cached, root, config).context("starting the store's runtime")?;
    // An open that finds a new version tells the kernel to drop the
    // attributes it caches (the old size), through the session's notifier
    // (set once the session exists; opens come only after that).
    let notifier: Arc<OnceLock<fuser::Notifier>> = Arc::new(OnceLock::new());
    let for_fs = Arc::clone(&notifier);
    fs.on_stale_attr(move |ino| {
        if let Some(notifier) = for_fs.get() {
            // Attributes only (a negative offset): the file's pages are
            // dropped by the open's reply (no FOPEN_KEEP_CACHE for a new
            // version), in the opener's context rather than here, where
            // waiting on pages that reads in flight hold could block the
            // threads those reads need.
            if let Err(e) = notifier.inval_inode(INodeNo(ino), -1, 0) {
                log::debug!("invalidating the attributes of inode {ino}: {e}");
            }
        }
    });
    let for_pages = Arc::clone(&notifier);
    fs.on_stale_pages(move |ino| {
        if let Some(notifier) = for_pages.get() {
            // Pages and attributes. Called only while no handle reads the
            // file through the page cache, so no page is locked by a read
            // waiting on this mount's threads.
            if let Err(e) = notifier.inval_inode(INodeNo(ino), 0, 0) {
                log::debug!("invalidating the pages of inode {ino}: {e}");
            }
        }
    });
    let fsname = format!("multiarc:{source}");
    let msg =
        format!(
        "mounted {source} on {} (endpoint {endpoint}, cache {} bytes, {block_size}-byte blocks, \
         metadata TTL {} s, {} threads{}{})",
        mountpoint.display(),
        options.max_bytes,
        ttl.as_secs_f64(),
        options.threads,
        if options.read_only { ", read-only" } else { "" },
        if options.no_page_cache { ", no page cache" } else { "" }
    );
    let extra = if options.read_only {
        vec![fuser::MountOption::RO]
    } else {
        Vec::new()
    };
    let fs = Arc::new(fs);
    let control = Arc::new(BucketControl {
        fs: Arc::clone(&fs),
        block_size: block_size as u32,
    });
    let ops = Arc::new(FuseOps::new());
    let _metrics = match options.metrics {
        Some(addr) => Some(MetricsServer::start(
            addr,
            Sources {
                mount: Arc::clone(&control) as Arc<dyn Controlled>,
                ops: Arc::clone(&ops),
            },
        )?),
        None => None,
    };
    let mount = BucketMount {
        fs,
        ctl: ControlTree::new(),
        control,
        ops,
        block_size: block_size as u32,
        page_cache: !options.no_page_cache,
    };
    let session = start_session(mount, &mountpoint, &fsname, options, &extra, ready, msg)?;
    let _ = notifier.set(session.notifier());
    let served = session_ended(session.run());
    if served.is_err() && mount_points().contains(&mountpoint) {
        let _ = unmount(&mountpoint);
    }
    served.map_err(|e| anyhow!("serving {}: {e}", mountpoint.display()))?;
    log::info!("unmounted {}", mountpoint.display());
    Ok(())
}

/// The FUSE filesystem of a bucket mount.
struct BucketMount {
    fs: Arc<BucketFs<AmazonS3>>,
    /// The control directory's open files.
    ctl: ControlTree,
    /// The figures and tunables (shared with `--metrics`).
    control: Arc<BucketControl>,
    /// The FUSE operations, counted and timed.
    ops: Arc<FuseOps>,
    block_size: u32,
    /// Files are read through the kernel's page cache (unless
    /// `--no-page-cache`).
    page_cache: bool,
}

/// The process (thread group) a request comes from: FUSE names the
/// calling thread. A thread that is gone counts as its own process.
fn process_of(req: &Request) -> u32 {
    let tid = req.pid();
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

fn errno(e: multiarc_bucket::Errno) -> Errno {
    Errno::from_i32(e.0)
}

impl BucketMount {
    fn file_attr(&self, a: &Attr) -> FileAttr {
        let kind = match a.kind {
            Kind::File => FileType::RegularFile,
            Kind::Directory => FileType::Directory,
        };
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: a.mtime,
            mtime: a.mtime,
            ctime: a.mtime,
            crtime: a.mtime,
            kind,
            perm: a.perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: a.uid,
            gid: a.gid,
            rdev: 0,
            blksize: self.block_size,
            flags: 0,
        }
    }

    /// Names in the root that are the control directory's, or anything in
    /// it: not the bucket's to change.
    fn refuse_ctl(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        if is_ctl(parent) || (parent == ROOT_INO && name.as_bytes() == CTL_DIR.as_bytes()) {
            return Err(Errno::EACCES);
        }
        Ok(())
    }

    fn entry(&self, reply: ReplyEntry, r: Result<Attr, multiarc_bucket::Errno>) {
        match r {
            Ok(a) => reply.entry(&self.fs.ttl(), &self.file_attr(&a), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }
}

fn empty(reply: ReplyEmpty, r: Result<(), multiarc_bucket::Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// What the control directory and `--metrics` read of a bucket mount.
struct BucketControl {
    fs: Arc<BucketFs<AmazonS3>>,
    block_size: u32,
}

impl Controlled for BucketControl {
    /// The cache's figures, the store's and the filesystem's, and the
    /// block size.
    fn metrics(&self) -> Vec<Metric> {
        let mut out = self.fs.metrics();
        out.push(
            Metric::gauge(
                "block_size",
                "The cache's block size (bytes).",
                self.block_size as u64,
            )
            .in_component("mount"),
        );
        out
    }

    fn max_bytes(&self) -> u64 {
        self.fs.store().cache().stats().c
    }

    fn set_max_bytes(&self, bytes: u64) -> Result<(), String> {
        self.fs
            .store()
            .cache()
            .set_max_bytes(bytes)
            .map_err(|e| e.to_string())
    }

    fn set_lockstat(&self, on: bool) {
        self.fs.store().cache().set_lockstat(on);
    }
}

impl Filesystem for BucketMount {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // O_TRUNC comes with the open (an overwrite is an open that
        // truncates), not as a separate setattr afterwards.
        let _ = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC);
        if config
            .capabilities()
            .contains(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
        {
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.fs.abandon_uploads();
        // What memory holds goes to the L2 for the next mount: the feed
        // copies only what eviction reaches soon, and a working set that
        // fits in memory would otherwise be fetched again after a restart
        // (TPC-H at scale factor 10 through DataFusion: 602 MB).
        let started = std::time::Instant::now();
        let bytes = self.fs.store().cache().l2_flush();
        if bytes > 0 {
            log::info!(
                "wrote {} MiB that memory held to the L2 in {:.1} s",
                bytes >> 20,
                started.elapsed().as_secs_f64()
            );
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _timer = self.ops.start(Op::Lookup);
        match self.ctl.lookup(parent.0, name.as_bytes()) {
            Some(Ok(ino)) => {
                return reply.entry(&Duration::ZERO, &self.ctl.attr(ino), Generation(0))
            }
            Some(Err(e)) => return reply.error(e),
            None => {}
        }
        self.entry(reply, self.fs.lookup(parent.0, name))
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _timer = self.ops.start(Op::Other);
        if !is_ctl(ino.0) {
            self.fs.forget(ino.0, nlookup);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _timer = self.ops.start(Op::Getattr);
        if is_ctl(ino.0) {
            return reply.attr(&Duration::ZERO, &self.ctl.attr(ino.0));
        }
        match self.fs.getattr(ino.0) {
            Ok(a) => reply.attr(&self.fs.ttl(), &self.file_attr(&a)),
            Err(e) => reply.error(errno(e)),
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
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _timer = self.ops.start(Op::Setattr);
        if is_ctl(ino.0) {
            let owner_or_mode = mode.is_some() || uid.is_some() || gid.is_some();
            return match self.ctl.setattr(ino.0, owner_or_mode) {
                Ok(a) => reply.attr(&Duration::ZERO, &a),
                Err(e) => reply.error(e),
            };
        }
        let owner_or_mode = mode.is_some() || uid.is_some() || gid.is_some();
        match self.fs.setattr(ino.0, size, owner_or_mode) {
            Ok(a) => reply.attr(&self.fs.ttl(), &self.file_attr(&a)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _timer = self.ops.start(Op::Mkdir);
        if let Err(e) = self.refuse_ctl(parent.0, name) {
            return reply.error(e);
        }
        self.entry(reply, self.fs.mkdir(parent.0, name))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _timer = self.ops.start(Op::Unlink);
        if let Err(e) = self.refuse_ctl(parent.0, name) {
            return reply.error(e);
        }
        empty(reply, self.fs.unlink(parent.0, name))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _timer = self.ops.start(Op::Rmdir);
        if let Err(e) = self.refuse_ctl(parent.0, name) {
            return reply.error(e);
        }
        empty(reply, self.fs.rmdir(parent.0, name))
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Rename);
        log::warn!("rename of {name:?}: not supported on a bucket mount");
        reply.error(Errno::EPERM)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _timer = self.ops.start(Op::Open);
        if is_ctl(ino.0) {
            return match self.ctl.open(self.control.as_ref(), ino.0, flags.0) {
                Ok(fh) => reply.opened(FileHandle(CTL_FH | fh), FopenFlags::FOPEN_DIRECT_IO),
                Err(e) => reply.error(e),
            };
        }
        let writing = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let owner = if writing { process_of(req) } else { 0 };
        // O_DIRECT asks for the mount itself (as mountpoint-s3 answers it).
        let page_cache = self.page_cache && flags.0 & libc::O_DIRECT == 0;
        match self.fs.open_file(ino.0, flags.0, owner, page_cache) {
            Ok(opened) => {
                // multiarc_bucket decides, so that every handle's reads,
                // through the kernel's pages or not, are of its version.
                let mut fopen = FopenFlags::empty();
                if opened.keep_cache {
                    fopen |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                if opened.direct_io {
                    fopen |= FopenFlags::FOPEN_DIRECT_IO;
                }
                reply.opened(FileHandle(opened.fh), fopen)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _timer = self.ops.start(Op::Read);
        if fh.0 & CTL_FH != 0 {
            return match self.ctl.read(fh.0 & !CTL_FH, offset, size) {
                Ok(b) => reply.data(&b),
                Err(e) => reply.error(e),
            };
        }
        match self.fs.read(fh.0, offset, size) {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _timer = self.ops.start(Op::Write);
        if fh.0 & CTL_FH != 0 {
            return match self.ctl.write(self.control.as_ref(), ino.0, data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e),
            };
        }
        match self.fs.write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Flush);
        if fh.0 & CTL_FH != 0 {
            return reply.ok();
        }
        // Uploads only at the close by the process that opened the file,
        // not when a child that inherited the descriptor closes it.
        empty(reply, self.fs.flush(fh.0, process_of(req)))
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Release);
        if fh.0 & CTL_FH != 0 {
            self.ctl.release(fh.0 & !CTL_FH);
            return reply.ok();
        }
        empty(reply, self.fs.release(fh.0))
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Fsync);
        if fh.0 & CTL_FH != 0 {
            return reply.ok();
        }
        empty(reply, self.fs.fsync(fh.0))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _timer = self.ops.start(Op::Opendir);
        if is_ctl(ino.0) {
            // The directory's inode rides in the handle, for readdir.
            return match self.ctl.entries(ino.0) {
                Ok(_) => reply.opened(FileHandle(CTL_FH | ino.0), FopenFlags::empty()),
                Err(e) => reply.error(e),
            };
        }
        match self.fs.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _timer = self.ops.start(Op::Readdir);
        let entries: Vec<(u64, FileType, Vec<u8>)> = if fh.0 & CTL_FH != 0 {
            match self.ctl.entries(fh.0 & !CTL_FH) {
                Ok(entries) => entries.into_iter().skip(offset as usize).collect(),
                Err(e) => return reply.error(e),
            }
        } else {
            match self.fs.readdir(fh.0, offset) {
                Ok(entries) => entries
                    .into_iter()
                    .map(|e| {
                        let kind = match e.kind {
                            Kind::File => FileType::RegularFile,
                            Kind::Directory => FileType::Directory,
                        };
                        (e.ino, kind, e.name.into_bytes())
                    })
                    .collect(),
                Err(e) => return reply.error(errno(e)),
            }
        };
        for (i, (ino, kind, name)) in entries.into_iter().enumerate() {
            let next = offset + i as u64 + 1;
            if reply.add(INodeNo(ino), next, kind, OsStr::from_bytes(&name)) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _timer = self.ops.start(Op::Other);
        if fh.0 & CTL_FH != 0 {
            return reply.ok();
        }
        empty(reply, self.fs.release(fh.0))
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _timer = self.ops.start(Op::Statfs);
        // A bucket has no size limit to speak of: plenty of room, as
        // other bucket mounts report.
        let blocks = 1u64 << 40;
        reply.statfs(blocks, blocks, blocks, 1 << 32, 1 << 32, 4096, 1024, 4096)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let _timer = self.ops.start(Op::Create);
        if let Err(e) = self.refuse_ctl(parent.0, name) {
            return reply.error(e);
        }
        match self.fs.create(parent.0, name, process_of(req)) {
            Ok((a, fh)) => reply.created(
                &self.fs.ttl(),
                &self.file_attr(&a),
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }
}

/// A sequential run's prefetch window for a mount of `max_bytes` of
/// memory: at most a sixteenth of it. A query engine keeps many runs going
/// at once (DuckDB: a run per column chunk it reads, on several threads);
/// their windows together must not push out one another's blocks before
/// they are read. Half of memory (the rule before) made DuckDB's cold
/// TPC-H suite at scale factor 1 fetch 618-647 MB through a 160 MiB mount,
/// twice the data; a sixteenth, 393-397 MB.
fn prefetch_window(max_bytes: u64, default: u64) -> u64 {
    default.min(max_bytes / 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn store_over_l2(l2: &std::path::Path) -> Result<CachedStore<InMemory>, BuildError> {
        CachedStore::builder(InMemory::new())
            .max_bytes(4 << 20)
            .l2(l2, 16 << 20)
            .build()
    }

    #[test]
    fn a_mount_waits_for_an_l2_that_another_cache_still_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l2");
        let first = store_over_l2(&path).unwrap();
        // Held throughout: after the wait, the same clear error.
        let e = match build_waiting_for_l2(|| store_over_l2(&path), Duration::from_millis(300)) {
            Ok(_) => panic!("a second store over the L2 the first one holds"),
            Err(e) => e,
        };
        assert!(l2_busy(&e), "{e}");
        assert!(e.to_string().contains("in use by another cache"), "{e}");
        // Let go meanwhile (the first mount process ends): the wait ends
        // with the store.
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            drop(first);
        });
        let started = std::time::Instant::now();
        let second = build_waiting_for_l2(|| store_over_l2(&path), Duration::from_secs(60));
        release.join().unwrap();
        assert!(second.is_ok(), "{:?}", second.err().map(|e| e.to_string()));
        assert!(
            started.elapsed() >= Duration::from_millis(400),
            "the L2 was free before the first store let it go"
        );
        // Any other error comes back at once, without the wait.
        let started = std::time::Instant::now();
        let bad = build_waiting_for_l2(
            || CachedStore::builder(InMemory::new()).build(),
            Duration::from_secs(60),
        );
        assert!(matches!(bad, Err(BuildError::Invalid(_))));
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
