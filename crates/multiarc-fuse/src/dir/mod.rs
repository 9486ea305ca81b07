//! The directory mount: a backing directory's files served through the
//! cache (passthrough: every name, attribute and directory operation goes to
//! the backing filesystem; file data goes through `multiarc_file`'s cached
//! files and write-back).
//!
//! Rooms: `sys` (system-call helpers), `file_state` (an inode's data side),
//! `inodes` (the inode table), `data` (open files), `stats` (the figures and
//! tunables), `creds` (the caller's credentials for creating calls), `fs`
//! (the FUSE operations); each imports only those before it.

mod creds;
mod data;
mod file_state;
mod fs;
mod inodes;
mod stats;
mod sys;

use crate::control::{Controlled, CTL_DIR};
use crate::daemon::{become_mount_process, finish_mount_process, open_log, Ready, LOG};
use crate::exporter::{MetricsServer, Sources};
use crate::options::MountOptions;
use crate::session::{
    check_fuse, check_mountpoint, mount_points, session_ended, start_session, unmount,
};
use anyhow::{anyhow, bail, Context};
use fs::{FsConfig, MultiarcFs};
use multiarc::units::check_fits_in_memory;
use multiarc::{BlockKey, Cache};
use multiarc_file::{WriteBack, WriteBackConfig, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// The cache block size of a directory mount when none is given.
const DEFAULT_BLOCK_SIZE: u64 = 8192;

/// Checks the options; returns the canonical backing dir and mountpoint.
fn check_options(options: &MountOptions) -> anyhow::Result<(PathBuf, PathBuf)> {
    for (given, flag) in [
        (options.endpoint.is_some(), "--endpoint"),
        (options.region.is_some(), "--region"),
        (options.read_only, "--read-only"),
        (options.allow_overwrite, "--allow-overwrite"),
        (options.allow_delete, "--allow-delete"),
        (options.metadata_ttl.is_some(), "--metadata-ttl"),
        (options.no_page_cache, "--no-page-cache"),
        (options.page_cache, "--page-cache"),
    ] {
        if given {
            bail!("{flag} is for buckets (s3://BUCKET[/PREFIX]), not a backing directory");
        }
    }
    let b = &options.backing;
    match std::fs::metadata(b) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("backing directory {} does not exist", b.display())
        }
        Err(e) => bail!("backing directory {}: {e}", b.display()),
        Ok(m) if !m.is_dir() => bail!("backing directory {} is not a directory", b.display()),
        Ok(_) => {}
    }
    let mountpoint = check_mountpoint(options)?;
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
    let bs = options.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    if !bs.is_power_of_two() || !(MIN_BLOCK_SIZE as u64..=MAX_BLOCK_SIZE as u64).contains(&bs) {
        bail!("--block-size {bs} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes");
    }
    if options.dirty_max < bs {
        bail!(
            "--dirty-max {} is too small: at least one block ({bs} bytes)",
            options.dirty_max
        );
    }
    check_fits_in_memory(
        &format!("--dirty-max {}", options.dirty_max),
        options.dirty_max,
    )?;
    if options.max_bytes < bs * 16 {
        bail!(
            "--max-bytes {} is too small: at least 16 blocks ({} bytes) are needed",
            options.max_bytes,
            bs * 16
        );
    }
    check_fuse(options)?;
    Ok((backing, mountpoint))
}

/// Mounts the directory `options.backing` (see [`crate::mount`]).
pub(crate) fn mount(mut options: MountOptions) -> anyhow::Result<()> {
    let (backing, mountpoint) = check_options(&options)?;
    // The background mount process repeats the checks; the warnings were
    // shown (and logged) by the command that started it.
    let warn = !options.daemon_child;
    options.settle()?;
    open_log(&options)?;
    if warn && backing.join(CTL_DIR).symlink_metadata().is_ok() {
        let msg = format!(
            "{} is hidden by the mount's control directory \
             (unreachable through {}; it stays in the backing directory)",
            backing.join(CTL_DIR).display(),
            mountpoint.display()
        );
        log::warn!("{msg}");
        if let Some(mut log) = LOG.get() {
            let _ = writeln!(log, "multiarc: warning: {msg}");
        }
    }
    let Some(ready) = become_mount_process(&options)? else {
        return Ok(());
    };
    let result = serve(&options, backing, mountpoint, Arc::clone(&ready));
    finish_mount_process(&ready, result)
}

fn serve(
    options: &MountOptions,
    backing: PathBuf,
    mountpoint: PathBuf,
    ready: Arc<Ready>,
) -> anyhow::Result<()> {
    // The kernel applies the caller's umask to the modes it sends; ours must
    // not apply a second one.
    rustix::process::umask(rustix::fs::Mode::empty());
    let block_size = options.block_size.unwrap_or(DEFAULT_BLOCK_SIZE) as usize;
    // The floor the cache never shrinks below; the L2 feed's share
    // (`cache_target`) never takes the target under it either.
    let min_bytes = (1 << 20).min(options.max_bytes).max(block_size as u64 * 16);
    let cache = Arc::new(
        {
            let builder = Cache::<BlockKey>::builder()
                .max_bytes(options.cache_target().max(min_bytes))
                .min_bytes(min_bytes);
            match (&options.l2, options.l2_bytes) {
                (Some(path), Some(bytes)) => {
                    let builder = builder.l2(path, bytes).l2_rebuild(false);
                    match options.l2_write_max() {
                        Some(write_max) => builder.l2_write_max(write_max),
                        None => builder,
                    }
                }
                _ => builder,
            }
        }
        .build()
        .map_err(|e| anyhow!("cache: {e}"))?,
    );
    let defaults = WriteBackConfig::default();
    let writeback = WriteBack::new(WriteBackConfig {
        dirty_max: options.dirty_max,
        flush_threshold: defaults.flush_threshold.min(options.dirty_max / 4),
        interval: options.writeback_interval,
    })
    .context("write-back")?;
    let fs = MultiarcFs::new(
        FsConfig {
            root: backing.clone(),
            block_size,
            locking: options.locking,
        },
        Arc::clone(&cache),
        Arc::clone(&writeback),
    )
    .with_context(|| format!("backing directory {}", backing.display()))?;
    let _metrics = match options.metrics {
        Some(addr) => Some(MetricsServer::start(
            addr,
            Sources {
                mount: fs.control() as Arc<dyn Controlled>,
                ops: fs.ops(),
            },
        )?),
        None => None,
    };
    let fsname = format!("multiarc:{}", backing.display());
    // Ready once a request is answered: the worker threads are running
    // (starting them can still fail, with too few descriptors for one).
    let msg = format!(
        "mounted {} on {} (cache {} bytes, {}-byte blocks, {} locking, {} threads)",
        backing.display(),
        mountpoint.display(),
        options.max_bytes,
        block_size,
        options.locking,
        options.threads
    );
    let session = start_session(fs, &mountpoint, &fsname, options, &[], ready, msg)?;
    let served = session_ended(session.run());
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
                options.threads
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
    log::info!(
        "unmounted {}; everything written back to {}",
        mountpoint.display(),
        backing.display()
    );
    Ok(())
}
