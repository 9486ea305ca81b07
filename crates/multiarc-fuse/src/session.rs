//! A FUSE session: the checks before mounting (the mountpoint, the device,
//! the helper), the mount itself (directly as root, else through
//! fusermount3), the signal thread that unmounts on SIGINT, SIGTERM or
//! SIGHUP, and the report that the mount is ready once its control
//! directory answers.

use crate::control::{ARCSTATS, CTL_DIR};
use crate::daemon::Ready;
use crate::fusermount;
use crate::options::MountOptions;
use anyhow::{anyhow, bail, Context};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The message for a failed mount: names `/dev/fuse` when it could not be
/// opened.
pub(crate) fn mount_error(e: &std::io::Error, mountpoint: &Path, root: bool) -> anyhow::Error {
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

pub(crate) fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Mount points from /proc/self/mountinfo (octal escapes decoded).
pub(crate) fn mount_points() -> Vec<PathBuf> {
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

/// Checks the mountpoint (an empty directory, nothing mounted on it);
/// returns it canonical.
pub(crate) fn check_mountpoint(options: &MountOptions) -> anyhow::Result<PathBuf> {
    let m = &options.mountpoint;
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
    if !options.nonempty
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
pub(crate) fn check_fuse(options: &MountOptions) -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse does not exist: the kernel's FUSE module is not loaded (modprobe fuse) or the device is not available here");
    }
    let root = rustix::process::geteuid().is_root();
    if !root && find_in_path("fusermount3").is_none() && find_in_path("fusermount").is_none() {
        bail!("fusermount3 was not found in PATH: install the fuse3 package (it mounts FUSE filesystems for users other than root)");
    }
    if options.allow_other && !root {
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

/// Mounts `fs` on `mountpoint` (directly as root, else through
/// fusermount3) with `extra` mount options beside the usual ones, starts
/// the signal thread, and a thread that reports `msg` as ready once the
/// control directory answers.
pub(crate) fn start_session<F: fuser::Filesystem>(
    fs: F,
    mountpoint: &Path,
    fsname: &str,
    options: &MountOptions,
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
    config.n_threads = Some(options.threads);
    config.clone_fd = true;
    // Without --allow-other the kernel refuses other users' requests
    // itself (EACCES), and fuser answers only the owner's.
    let acl = if options.allow_other {
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
        let mut mount_options = fusermount::options(fsname, "multiarc", options.allow_other);
        if extra.contains(&fuser::MountOption::RO) {
            mount_options.push_str(",ro");
        }
        let fd = fusermount::mount(&helper, mountpoint, &mount_options)
            .map_err(|e| mount_error(&e, mountpoint, root))?;
        fuser::Session::from_fd(fs, fd, acl, config).map_err(|e| {
            let _ = unmount(mountpoint);
            mount_error(&e, mountpoint, root)
        })?
    };
    spawn_signal_thread(mountpoint.to_path_buf())?;
    let probe = mountpoint.join(CTL_DIR).join(ARCSTATS);
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
                log::info!("signal {sig}: unmounting {}", mountpoint.display());
                crate::notify::notify("STOPPING=1");
                if let Err(e) = unmount(&mountpoint) {
                    log::error!("unmounting {}: {e}", mountpoint.display());
                }
            }
        })
        .context("signal thread")?;
    Ok(())
}

/// What a session's run returned, with the end of an unmounted connection
/// taken as the normal end it is. The lazy unmount (SIGTERM, `fusermount3
/// -u -z`) leaves the kernel to tear the connection down once the last open
/// file goes; a FUSE thread that reads the device after that gets
/// `ECONNABORTED` rather than `ENODEV` (which fuser takes as the end), seen
/// with a SIGTERM under 8 writers and 8 readers on a loaded CI machine. The
/// requests in flight then failed with an error their callers saw, so
/// nothing was acknowledged; the mounts write back what is dirty after the
/// session either way.
pub(crate) fn session_ended(served: std::io::Result<()>) -> std::io::Result<()> {
    match served {
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {
            log::debug!("the kernel ended the FUSE connection: {e}");
            Ok(())
        }
        other => other,
    }
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
    fn an_aborted_connection_is_the_sessions_end_and_other_errors_stay() {
        let aborted = std::io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert!(session_ended(Err(aborted)).is_ok());
        let other = std::io::Error::from_raw_os_error(libc::EIO);
        assert!(session_ended(Err(other)).is_err());
        assert!(session_ended(Ok(())).is_ok());
    }

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
    fn mountinfo_lists_root() {
        assert!(mount_points().contains(&PathBuf::from("/")));
    }
}
