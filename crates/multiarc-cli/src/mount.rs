//! `multiarc mount`: the flags, turned into `multiarc_fuse`'s options.

use multiarc_bench::cli::{count_arg, size_arg};
use multiarc_file::Locking;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct MountArgs {
    /// Directory whose files are served (read and written through the
    /// cache), or a bucket: s3://BUCKET[/PREFIX] (see --endpoint).
    backing: PathBuf,
    /// Empty directory to mount on.
    mountpoint: PathBuf,
    /// Cache size (the ARC's target `c`); with --l2, a sixteenth of it (1
    /// to 32 MiB) is kept for the L2 feed's write batches, so the two keep
    /// to this size together. Changeable at run time through
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
    #[arg(long, default_value = "5", hide = true, value_parser = interval_arg)]
    writeback_interval: std::time::Duration,
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
    #[arg(long, value_parser = seconds_arg)]
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
    /// Serve the mount's metrics in Prometheus's text format at
    /// http://ADDR/metrics (e.g. 127.0.0.1:9854; port 0: any free one,
    /// named in the log).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Internal: this is the background mount process, started by `mount`
    /// without `--foreground`; it reports readiness on its stdout.
    #[arg(long, hide = true)]
    daemon_child: bool,
}

/// A metadata TTL: `1s`, `500ms`, `2m`, or a plain number of seconds (`0`),
/// up to a day.
fn seconds_arg(text: &str) -> Result<std::time::Duration, String> {
    multiarc::units::parse_seconds(text, 86_400.0).map_err(|e| e.to_string())
}

/// The write-back interval: a number of seconds above 0, up to a day.
fn interval_arg(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        _ => Err(format!(
            "{text:?} is not a number of seconds from above 0 to 86400"
        )),
    }
}

impl MountArgs {
    fn into_options(self) -> multiarc_fuse::MountOptions {
        let mut o = multiarc_fuse::MountOptions::new(self.backing, self.mountpoint);
        o.max_bytes = self.max_bytes;
        o.block_size = self.block_size;
        o.locking = self.locking;
        o.foreground = self.foreground;
        o.threads = self.threads;
        o.log = self.log;
        o.dirty_max = self.dirty_max;
        o.allow_other = self.allow_other;
        o.nonempty = self.nonempty;
        o.l2 = self.l2;
        o.l2_bytes = self.l2_bytes;
        o.writeback_interval = self.writeback_interval;
        o.endpoint = self.endpoint;
        o.region = self.region;
        o.read_only = self.read_only;
        o.allow_overwrite = self.allow_overwrite;
        o.allow_delete = self.allow_delete;
        o.metadata_ttl = self.metadata_ttl;
        o.no_page_cache = self.no_page_cache;
        o.page_cache = self.page_cache;
        o.metrics = self.metrics;
        o.daemon_child = self.daemon_child;
        o
    }
}

/// `multiarc mount`; `command_line` is the command's arguments after the
/// program (a mount helper's call already turned into `mount ...`), which
/// the background mount process is started with.
pub fn run(args: MountArgs, command_line: &[std::ffi::OsString]) -> anyhow::Result<()> {
    map_large_buffers_alone();
    let mut options = args.into_options();
    options.command_line = Some(subcommand_first(command_line));
    multiarc_fuse::mount(options)
}

/// `command_line` with the subcommand `mount` first: the global flags given
/// before it (`--log-format json mount ...`) go after it, where they mean
/// the same.
fn subcommand_first(command_line: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut at = None;
    let mut i = 0;
    while i < command_line.len() {
        if command_line[i] == "--log-format" {
            i += 2;
            continue;
        }
        if command_line[i] == "mount" {
            at = Some(i);
            break;
        }
        i += 1;
    }
    let Some(at) = at else {
        return command_line.to_vec();
    };
    let mut out = vec![command_line[at].clone()];
    out.extend_from_slice(&command_line[..at]);
    out.extend_from_slice(&command_line[at + 1..]);
    out
}

/// The daemon's cache frees block buffers all the time (256 KiB each in a
/// bucket mount). Once glibc's adaptive threshold has risen past them, it
/// keeps freed ones in its heaps, one per thread, and the daemon's memory
/// grows past its budget: measured here, a bucket mount of 16 MiB read
/// through twice held 32.5 MiB of anonymous memory, and 20.1 MiB with the
/// threshold fixed at glibc's default of 128 KiB (buffers from there up
/// are mapped and returned on their own). The bucket mount's test
/// `the_daemons_memory_stays_near_its_budget` checks it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn map_large_buffers_alone() {
    // SAFETY: mallopt only sets a parameter of the allocator (glibc
    // serialises it with the allocator's own lock); no pointer is passed.
    let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10) };
    if set != 1 {
        log::debug!("mallopt(M_MMAP_THRESHOLD) was refused");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn map_large_buffers_alone() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subcommand_goes_first_and_global_flags_after_it() {
        let os = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(
            subcommand_first(&os(&["--log-format", "json", "mount", "/a", "mount"])),
            os(&["mount", "--log-format", "json", "/a", "mount"])
        );
        assert_eq!(
            subcommand_first(&os(&["--log-format=json", "mount", "/a", "/b"])),
            os(&["mount", "--log-format=json", "/a", "/b"])
        );
        assert_eq!(
            subcommand_first(&os(&["mount", "/a"])),
            os(&["mount", "/a"])
        );
    }
}
