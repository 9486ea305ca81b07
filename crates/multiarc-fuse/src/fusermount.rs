//! Mounting as a user other than root, as libfuse does: the setuid helper
//! `fusermount3` opens `/dev/fuse` (which such a user often cannot open),
//! mounts it and passes the descriptor back over a socket (`_FUSE_COMMFD`,
//! `SCM_RIGHTS`).

use rustix::io::FdFlags;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

/// Mounts a FUSE filesystem on `mountpoint` with `fusermount3 -o options`;
/// returns the `/dev/fuse` descriptor to serve it on.
pub fn mount(fusermount: &Path, mountpoint: &Path, options: &str) -> io::Result<OwnedFd> {
    let (ours, theirs) = UnixStream::pair()?;
    // The helper inherits its end (and only for the time of the spawn: no
    // other thread runs yet).
    rustix::io::fcntl_setfd(&theirs, FdFlags::empty())?;
    let child = Command::new(fusermount)
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", fusermount.display())))?;
    drop(theirs);
    let received = receive_fd(&ours);
    drop(ours);
    let out = child.wait_with_output()?;
    match received {
        Ok(Some(fd)) => Ok(fd),
        Ok(None) | Err(_) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr.trim();
            Err(io::Error::other(format!(
                "{} failed ({}){}{}",
                fusermount.display(),
                out.status,
                if why.is_empty() { "" } else { ": " },
                why
            )))
        }
    }
}

fn receive_fd(sock: &UnixStream) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    loop {
        let mut iov = [IoSliceMut::new(&mut byte)];
        match rustix::net::recvmsg(sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = msg {
            if let Some(fd) = fds.next() {
                return Ok(Some(fd));
            }
        }
    }
    Ok(None)
}

/// The `-o` option string for fusermount3 (commas in values would split
/// them, so they are replaced); `allow_other` lets other users in.
pub fn options(fsname: &str, subtype: &str, allow_other: bool) -> String {
    format!(
        "fsname={},subtype={},default_permissions,nodev,nosuid{}",
        fsname.replace(',', "_"),
        subtype.replace(',', "_"),
        if allow_other { ",allow_other" } else { "" }
    )
}
