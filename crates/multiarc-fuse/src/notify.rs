//! systemd's readiness protocol (`sd_notify(3)`), without libsystemd: when
//! the service manager set `NOTIFY_SOCKET`, one datagram per state change
//! (`READY=1` once the mount serves, `STOPPING=1` when a signal unmounts
//! it) goes to that socket (a path, or an abstract name starting with `@`).
//! Without `NOTIFY_SOCKET` nothing is sent. A unit with `Type=notify` runs
//! `multiarc mount --foreground` (the process systemd started must be the
//! one that tells it; see `docs/ops.md`).

use std::io;
use std::os::unix::net::UnixDatagram;

/// The variable the service manager sets.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `state` (e.g. `READY=1`) to the service manager, if it asked for
/// notifications. Errors are logged, not returned: a mount works without
/// its manager hearing of it.
pub(crate) fn notify(state: &str) {
    let Some(socket) = std::env::var_os(NOTIFY_SOCKET) else {
        return;
    };
    if let Err(e) = send(&socket.to_string_lossy(), state) {
        log::warn!("telling the service manager {state:?} on {socket:?}: {e}");
    }
}

fn send(socket: &str, state: &str) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), socket)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reaches_a_path_socket_and_an_abstract_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("multiarc-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixDatagram::bind_addr(&addr).unwrap();
        send(&format!("@{name}"), "STOPPING=1").unwrap();
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        assert!(send(dir.path().join("none").to_str().unwrap(), "READY=1").is_err());
    }
}
