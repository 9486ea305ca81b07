//! [`MountOptions`]: what a mount serves, where, and how. The `multiarc
//! mount` command fills it from its flags (each field names its flag);
//! errors name the flags too, since that is where a user meets them.

use multiarc_file::Locking;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A mount's settings. [`MountOptions::new`] gives the defaults of
/// `multiarc mount`; the fields marked "of a bucket" apply only when
/// `backing` is `s3://BUCKET[/PREFIX]`, and are refused otherwise.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// The directory whose files are served (read and written through the
    /// cache), or a bucket: `s3://BUCKET[/PREFIX]`.
    pub backing: PathBuf,
    /// The empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Cache size (`--max-bytes`, the ARC's target `c`); changeable at run
    /// time through `MOUNTPOINT/.multiarc/tunables/max_bytes`.
    pub max_bytes: u64,
    /// Cache block size (`--block-size`): a power of two from 512 bytes to
    /// 1 MiB (default 8 KiB); of a bucket, the size of its ranged reads,
    /// from 4 KiB to 64 MiB (default 256 KiB).
    pub block_size: Option<u64>,
    /// How reads and writes of one file exclude each other (`--locking`).
    pub locking: Locking,
    /// Stay in the foreground (`--foreground`); otherwise [`crate::mount`]
    /// returns once the background mount process reports the mount ready.
    pub foreground: bool,
    /// Threads serving FUSE requests (`--threads`).
    pub threads: usize,
    /// In the background, append the mount's messages to this file
    /// (`--log`) instead of discarding them.
    pub log: Option<PathBuf>,
    /// Most dirty bytes held at once (`--dirty-max`); beyond it writers
    /// wait for write-back, or get its error if it keeps failing.
    pub dirty_max: u64,
    /// Let every user use the mount (`--allow-other`, FUSE's allow_other).
    pub allow_other: bool,
    /// Mount even if the mountpoint is not empty (`--nonempty`).
    pub nonempty: bool,
    /// A second cache tier on this file or block device (`--l2`), of
    /// `l2_bytes` (`--l2-bytes`).
    pub l2: Option<PathBuf>,
    /// The size of the `l2` tier.
    pub l2_bytes: Option<u64>,
    /// Time between periodic write-back passes (`--writeback-interval`).
    pub writeback_interval: Duration,
    /// Of a bucket: the S3 endpoint (`--endpoint`; default
    /// `AWS_ENDPOINT_URL`, or AWS).
    pub endpoint: Option<String>,
    /// Of a bucket: its region (`--region`; default `AWS_REGION`, or
    /// us-east-1).
    pub region: Option<String>,
    /// Of a bucket: refuse every change (`--read-only`, EROFS).
    pub read_only: bool,
    /// Of a bucket: let an existing object be replaced (`--allow-overwrite`).
    pub allow_overwrite: bool,
    /// Of a bucket: let unlink delete objects (`--allow-delete`).
    pub allow_delete: bool,
    /// Of a bucket: how long names, sizes and versions are trusted
    /// (`--metadata-ttl`; default 1 s).
    pub metadata_ttl: Option<Duration>,
    /// Of a bucket: read every file with direct I/O, not through the
    /// kernel's page cache (`--no-page-cache`).
    pub no_page_cache: bool,
    /// Of a bucket: `--page-cache`, the default, accepted for scripts.
    pub page_cache: bool,
    /// Serve the mount's metrics in Prometheus's text format at
    /// `http://ADDR/metrics` (`--metrics`, e.g. `127.0.0.1:9854`).
    pub metrics: Option<SocketAddr>,
    /// This is the background mount process (see [`crate::DAEMON_CHILD_FLAG`]).
    pub daemon_child: bool,
    /// The arguments (after the program) to start the background mount
    /// process with, the first naming the subcommand (`mount ...`); by
    /// default this process's own.
    pub command_line: Option<Vec<OsString>>,
}

impl MountOptions {
    /// `backing` on `mountpoint` with `multiarc mount`'s defaults: 256 MiB
    /// of cache, range locking, 4 threads, 64 MiB of dirty data, write-back
    /// every 5 s, in the background.
    pub fn new(backing: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> MountOptions {
        MountOptions {
            backing: backing.into(),
            mountpoint: mountpoint.into(),
            max_bytes: 256 << 20,
            block_size: None,
            locking: Locking::Range,
            foreground: false,
            threads: 4,
            log: None,
            dirty_max: 64 << 20,
            allow_other: false,
            nonempty: false,
            l2: None,
            l2_bytes: None,
            writeback_interval: Duration::from_secs(5),
            endpoint: None,
            region: None,
            read_only: false,
            allow_overwrite: false,
            allow_delete: false,
            metadata_ttl: None,
            no_page_cache: false,
            page_cache: false,
            metrics: None,
            daemon_child: false,
            command_line: None,
        }
    }

    /// Settles what the mount process needs before it starts: the cache
    /// size clamped to the machine's memory (with a warning, shown by the
    /// command and not again by the background process it starts), and the
    /// second tier's path made absolute (the background process leaves the
    /// working directory).
    pub(crate) fn settle(&mut self) -> anyhow::Result<()> {
        let (max_bytes, warning) = multiarc::units::clamp_cache_target(self.max_bytes);
        if let Some(w) = warning.filter(|_| !self.daemon_child) {
            log::warn!("--max-bytes: {w}");
        }
        self.max_bytes = max_bytes;
        if let Some(l2) = &self.l2 {
            self.l2 = Some(
                std::path::absolute(l2)
                    .map_err(|e| anyhow::anyhow!("--l2 {}: {e}", l2.display()))?,
            );
        }
        Ok(())
    }

    /// Whether `backing` names a bucket (`s3://`).
    pub fn is_bucket(&self) -> bool {
        self.backing.to_string_lossy().starts_with("s3://")
    }
}
