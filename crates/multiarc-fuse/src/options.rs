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

    /// The bytes the L2 feed writes at a time (`l2_write_max`): a
    /// sixteenth of the memory target, from 1 MiB to the cache's default of
    /// 32 MiB (and at most a sixteenth of the L2). The feed copies that
    /// many bytes of buffers before it writes them, beside the cache: with
    /// the default, a mount of 160 MiB peaked at 219 MiB of RSS, past the
    /// budget plus 25% that a mount keeps to.
    pub(crate) fn l2_write_max(&self) -> Option<u64> {
        let l2_bytes = self.l2.as_ref().and(self.l2_bytes)?;
        let bytes = (self.max_bytes / 16)
            .clamp(1 << 20, 32 << 20)
            .min(l2_bytes / 16);
        // An L2 too small for a 4 KiB batch is left to the cache, which
        // refuses it as too small.
        Some(bytes / 4096 * 4096).filter(|&b| b > 0)
    }

    /// The cache's memory target `c` at mount: `max_bytes`, less the L2
    /// feed's write batch ([`MountOptions::l2_write_max`]) when there is an
    /// L2, so that the cache and the buffers it copies for the L2 together
    /// keep to `max_bytes` (a mount of 160 MiB with an L2 peaked at 206.5
    /// MiB of RSS without this, 197.8 without an L2).
    pub(crate) fn cache_target(&self) -> u64 {
        self.max_bytes - self.l2_write_max().unwrap_or(0).min(self.max_bytes / 2)
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

#[cfg(test)]
mod tests {
    use super::MountOptions;

    #[test]
    fn the_l2_feed_writes_a_sixteenth_of_memory_at_a_time() {
        const M: u64 = 1 << 20;
        let with = |max_bytes: u64, l2_bytes: u64| {
            let mut o = MountOptions::new("s3://b", "/mnt");
            o.max_bytes = max_bytes;
            o.l2 = Some("/var/cache/l2".into());
            o.l2_bytes = Some(l2_bytes);
            o.l2_write_max()
        };
        assert_eq!(with(160 * M, 640 * M), Some(10 * M));
        assert_eq!(with(8 * M, 256 * M), Some(M), "at least 1 MiB");
        assert_eq!(with(4096 * M, 64 << 30), Some(32 * M), "at most 32 MiB");
        assert_eq!(with(1024 * M, 16 * M), Some(M), "a sixteenth of the L2");
        assert_eq!(with(1024 * M, 64 << 10), Some(4096));
        assert_eq!(with(1024 * M, 4096), None, "left to the cache to refuse");
        assert_eq!(MountOptions::new("s3://b", "/mnt").l2_write_max(), None);
        // The batch comes out of the memory target.
        let mut o = MountOptions::new("s3://b", "/mnt");
        o.max_bytes = 160 * M;
        assert_eq!(o.cache_target(), 160 * M);
        o.l2 = Some("/var/cache/l2".into());
        o.l2_bytes = Some(640 * M);
        assert_eq!(o.cache_target(), 150 * M);
    }
}
