//! The multiarc mounts as libraries: [`mount`] serves a directory, or a
//! bucket (`s3://BUCKET[/PREFIX]`, with the `bucket` feature), through the
//! cache with FUSE. The `multiarc mount` command is a thin layer over it
//! that turns its flags into [`MountOptions`].
//!
//! ```no_run
//! use multiarc_fuse::{mount, MountOptions};
//! let mut options = MountOptions::new("/srv/data", "/mnt/data");
//! options.max_bytes = 1 << 30;
//! options.foreground = true;
//! mount(options)?; // serves until unmounted (fusermount3 -u, SIGTERM)
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! # How it is built
//!
//! - `options`: what a mount serves and how ([`MountOptions`]).
//! - `control`: the control directory `.multiarc/` both mounts serve
//!   (statistics and tunables), over a mount's [`Controlled`]; and the
//!   client side `multiarc stats` and `multiarc set` use.
//! - `fuse_ops`, `exporter`: the FUSE operations counted and timed, and the
//!   Prometheus endpoint of `--metrics` (the control directory's figures,
//!   the operations, the daemon's memory).
//! - `notify`, `daemon`: systemd's readiness protocol, and the background
//!   mount process and its report of readiness to the command that started
//!   it ([`DAEMON_CHILD_FLAG`]).
//! - `fusermount`, `session`: the checks before mounting, the FUSE session
//!   (directly as root, else through fusermount3), the signal thread that
//!   unmounts, [`unmount`].
//! - `dir`: the directory mount (a passthrough filesystem whose file data
//!   goes through `multiarc_file`'s cached files).
//! - `bucket`: the FUSE adapter in front of `multiarc_bucket::BucketFs`.
//!
//! Each module imports only those listed before it. The library logs
//! through `log` and never prints: the program installs a logger (the
//! mount's messages are at `info`, problems at `warn` and `error`).
//!
//! # Threads
//!
//! FUSE requests are served by `threads` threads of the session, each on
//! its own `/dev/fuse` descriptor; the directory mount's data goes through
//! `multiarc_file` (its write-back thread and the cache's evict thread), the
//! bucket mount's through its store's own runtime. On SIGINT, SIGTERM or
//! SIGHUP a signal thread unmounts lazily; the session then ends, and the
//! directory mount writes back every dirty block before [`mount`] returns.

#[cfg(feature = "bucket")]
mod bucket;
mod control;
mod daemon;
mod dir;
mod exporter;
mod fuse_ops;
mod fusermount;
mod notify;
mod options;
mod session;

pub use control::{
    parse_arcstats, read_arcstats, set_tunables, ControlError, ControlTree, Controlled,
    TunablesSet, ARCSTATS, CTL_DIR, LOCKSTAT, MAX_BYTES, TUNABLES,
};
pub use daemon::{ReportedToCommand, DAEMON_CHILD_FLAG};
pub use notify::NOTIFY_SOCKET;
pub use options::MountOptions;
pub use session::unmount;

/// Mounts `options.backing` on `options.mountpoint` and serves it: in the
/// foreground until it is unmounted, or (without `foreground`) by starting
/// the background mount process and returning once it reports the mount
/// ready. In the background mount process (`daemon_child`) it serves until
/// unmounted; an error it already reported to the waiting command comes
/// back as [`ReportedToCommand`] (not to be printed again).
pub fn mount(options: MountOptions) -> anyhow::Result<()> {
    if options.is_bucket() {
        #[cfg(feature = "bucket")]
        return bucket::mount(options);
        #[cfg(not(feature = "bucket"))]
        anyhow::bail!(
            "{}: this multiarc was built without the `bucket` feature (mounting buckets)",
            options.backing.display()
        );
    }
    dir::mount(options)
}
