//! The credentials of the calls that create objects (files, directories,
//! FIFOs, device nodes, symlinks): those of the process that asked, so a new
//! object belongs to its creator (and to the group of a setgid directory),
//! as on a local filesystem.
//!
//! The thread serving the request switches its own filesystem uid and gid
//! (`setfsuid`/`setfsgid`) and supplementary groups for that one call, and
//! switches back before it answers. Linux keeps credentials per thread and
//! the raw system calls change only the calling thread's (glibc's
//! `setgroups` would change every thread's, so it is not used), so the
//! other worker threads keep serving as the daemon meanwhile. While the
//! fsuid is not 0 the kernel drops the daemon's filesystem capabilities
//! (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, `CAP_FSETID`...), and the backing
//! filesystem checks the call as it would the caller's own; back at fsuid 0
//! they return. The supplementary groups come from the caller's
//! `/proc/PID/status` (the kernel does not send them), as libfuse's
//! `fuse_req_getgroups` takes them; they are only used if that file still
//! shows the request's fsuid and fsgid (the process may be gone, its id
//! reused).
//!
//! Only a daemon running as root switches: another user cannot, and its
//! mount creates every object as itself (as `sshfs` does).

use std::io;

/// The daemon's own filesystem credentials, restored after each switch.
pub(super) struct DaemonCreds {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    /// Whether the daemon may take other users' credentials (it runs as
    /// root).
    switches: bool,
}

/// Who asked: a request's fsuid, fsgid and thread id.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl From<&fuser::Request> for Caller {
    fn from(req: &fuser::Request) -> Caller {
        Caller {
            uid: req.uid(),
            gid: req.gid(),
            pid: req.pid(),
        }
    }
}

/// `-1` as a uid or gid: "no change", for reading the current fsuid/fsgid.
const UNCHANGED: u32 = u32::MAX;

#[cfg(any(target_arch = "x86", target_arch = "arm"))]
mod nr {
    pub const SETFSUID: libc::c_long = libc::SYS_setfsuid32;
    pub const SETFSGID: libc::c_long = libc::SYS_setfsgid32;
    pub const SETGROUPS: libc::c_long = libc::SYS_setgroups32;
    pub const GETGROUPS: libc::c_long = libc::SYS_getgroups32;
}
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
mod nr {
    pub const SETFSUID: libc::c_long = libc::SYS_setfsuid;
    pub const SETFSGID: libc::c_long = libc::SYS_setfsgid;
    pub const SETGROUPS: libc::c_long = libc::SYS_setgroups;
    pub const GETGROUPS: libc::c_long = libc::SYS_getgroups;
}

/// Sets this thread's fsuid; returns the one it has afterwards (the call
/// itself reports only the previous one, and never fails).
fn set_thread_fsuid(uid: u32) -> u32 {
    // SAFETY: setfsuid takes an integer and changes only the calling
    // thread's credentials; it has no memory arguments.
    unsafe {
        libc::syscall(nr::SETFSUID, uid as libc::c_long);
        libc::syscall(nr::SETFSUID, UNCHANGED as libc::c_long) as u32
    }
}

/// Sets this thread's fsgid; returns the one it has afterwards.
fn set_thread_fsgid(gid: u32) -> u32 {
    // SAFETY: as for setfsuid: an integer argument, this thread only.
    unsafe {
        libc::syscall(nr::SETFSGID, gid as libc::c_long);
        libc::syscall(nr::SETFSGID, UNCHANGED as libc::c_long) as u32
    }
}

/// Sets this thread's supplementary groups (the raw call: this thread only).
fn set_thread_groups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: the kernel reads `groups.len()` gid_t (u32) values from the
    // slice's pointer, which stays valid for the call.
    let r = unsafe {
        libc::syscall(
            nr::SETGROUPS,
            groups.len() as libc::c_long,
            groups.as_ptr() as libc::c_long,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// This thread's supplementary groups.
fn thread_groups() -> io::Result<Vec<u32>> {
    // SAFETY: with a size of 0 the kernel writes nothing and returns the
    // count.
    let n = unsafe { libc::syscall(nr::GETGROUPS, 0 as libc::c_long, 0 as libc::c_long) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups = vec![0u32; n as usize];
    // SAFETY: the kernel writes at most `groups.len()` u32 values into the
    // vector's buffer, which has that many.
    let got = unsafe {
        libc::syscall(
            nr::GETGROUPS,
            groups.len() as libc::c_long,
            groups.as_mut_ptr() as libc::c_long,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(got as usize);
    Ok(groups)
}

/// The supplementary groups of the thread `pid` from `/proc/PID/status`,
/// if its filesystem uid and gid there are `uid` and `gid` (otherwise the
/// process is not, or no longer, the one that asked).
fn caller_groups(caller: Caller) -> Option<Vec<u32>> {
    if caller.pid == 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{}/status", caller.pid)).ok()?;
    groups_of_status(&text, caller.uid, caller.gid)
}

/// The `Groups:` of a `/proc/PID/status` text whose filesystem uid and gid
/// (the fourth number of its `Uid:` and `Gid:` lines) are `uid` and `gid`.
pub(super) fn groups_of_status(text: &str, uid: u32, gid: u32) -> Option<Vec<u32>> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| rest.split_whitespace().map(str::parse::<u32>))
    };
    let fs_id = |name: &str| field(name)?.nth(3)?.ok();
    if fs_id("Uid:")? != uid || fs_id("Gid:")? != gid {
        return None;
    }
    field("Groups:")?.collect::<Result<Vec<u32>, _>>().ok()
}

impl DaemonCreds {
    /// The credentials of the calling thread (the daemon's, read before
    /// the worker threads start).
    pub(super) fn current() -> io::Result<DaemonCreds> {
        let uid = set_thread_fsuid(UNCHANGED);
        let gid = set_thread_fsgid(UNCHANGED);
        Ok(DaemonCreds {
            uid,
            gid,
            groups: thread_groups()?,
            switches: rustix::process::geteuid().is_root(),
        })
    }

    /// Runs `f` (one creating call) with `caller`'s filesystem credentials
    /// on this thread, and restores the daemon's before returning, whether
    /// `f` failed or not.
    pub(super) fn as_caller<T>(
        &self,
        caller: Caller,
        f: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        if !self.switches || (caller.uid == self.uid && caller.gid == self.gid) {
            return f();
        }
        let switched = Switched::to(self, caller)?;
        let result = f();
        drop(switched);
        result
    }

    /// Puts this thread back on the daemon's credentials; if that fails
    /// the process ends: a worker thread must never go on serving as
    /// another user.
    fn restore(&self) {
        let uid = set_thread_fsuid(self.uid);
        let gid = set_thread_fsgid(self.gid);
        let groups = set_thread_groups(&self.groups);
        if uid != self.uid || gid != self.gid || groups.is_err() {
            log::error!(
                "fatal: a worker thread could not take back the mount's credentials \
                 (fsuid {uid}, fsgid {gid}, groups {groups:?}): stopping rather than serve as \
                 another user"
            );
            std::process::abort();
        }
    }
}

/// A thread switched to a caller's credentials; dropping it switches back
/// (also if the call panicked).
struct Switched<'a> {
    daemon: &'a DaemonCreds,
}

impl<'a> Switched<'a> {
    fn to(daemon: &'a DaemonCreds, caller: Caller) -> io::Result<Switched<'a>> {
        let groups = caller_groups(caller).unwrap_or_default();
        // From here on, whatever fails, the drop switches back.
        let switched = Switched { daemon };
        set_thread_groups(&groups)?;
        if set_thread_fsgid(caller.gid) != caller.gid {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        if set_thread_fsuid(caller.uid) != caller.uid {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        Ok(switched)
    }
}

impl Drop for Switched<'_> {
    fn drop(&mut self) {
        self.daemon.restore();
    }
}

/// This thread's filesystem uid and gid (for tests).
#[cfg(test)]
pub(super) fn thread_fs_ids() -> (u32, u32) {
    (set_thread_fsuid(UNCHANGED), set_thread_fsgid(UNCHANGED))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\n\
        Uid:\t1000\t1000\t1000\t1001\nGid:\t100\t100\t100\t101\n\
        FDSize:\t64\nGroups:\t4 24 27 \nNStgid:\t1\n";

    #[test]
    fn groups_come_from_status_when_the_fs_ids_match() {
        assert_eq!(groups_of_status(STATUS, 1001, 101), Some(vec![4, 24, 27]));
        // Another process by now (or the ids changed): not trusted.
        assert_eq!(groups_of_status(STATUS, 1000, 100), None);
        assert_eq!(groups_of_status("Uid:\t0\n", 0, 0), None);
        let none = STATUS.replace("Groups:\t4 24 27 ", "Groups:\t");
        assert_eq!(groups_of_status(&none, 1001, 101), Some(vec![]));
    }

    /// A call that fails under another user's credentials leaves the thread
    /// with the daemon's, and another thread is not affected meanwhile.
    #[test]
    fn a_failed_call_switches_back_and_other_threads_keep_theirs() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: switching credentials needs root");
            return;
        }
        let daemon = DaemonCreds::current().unwrap();
        let closed = std::env::temp_dir().join(format!("multiarc-creds-{}", std::process::id()));
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let before = thread_fs_ids();
        let (tx, rx) = std::sync::mpsc::channel();
        let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            // Reports its ids while the main thread is switched.
            back_rx.recv().unwrap();
            tx.send(thread_fs_ids()).unwrap();
        });
        let caller = Caller {
            uid: 65534,
            gid: 65534,
            pid: std::process::id(),
        };
        let r: io::Result<()> = daemon.as_caller(caller, || {
            assert_eq!(thread_fs_ids(), (65534, 65534));
            back_tx.send(()).unwrap();
            assert_eq!(
                rx.recv().unwrap(),
                before,
                "another thread was switched too"
            );
            // Root could create a file there; 65534 cannot.
            std::fs::File::create(closed.join("f")).map(|_| ())
        });
        let _ = std::fs::remove_dir(&closed);
        assert_eq!(
            r.map_err(|e| e.kind()),
            Err(io::ErrorKind::PermissionDenied)
        );
        other.join().unwrap();
        assert_eq!(thread_fs_ids(), before);
        assert_eq!(thread_groups().unwrap(), daemon.groups);
    }
}
