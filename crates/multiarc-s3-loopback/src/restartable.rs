//! [`RestartableS3`]: an [`S3Loopback`] on a runtime of its own, for
//! blocking code (tests of filesystems that block on their own runtime),
//! which can be stopped and started again on the same port over the same
//! directory: a store that goes away and comes back.

use multiarc_store_tools::{Keys, S3Loopback, ServedBucket};
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long [`RestartableS3::restart`] retries binding the old port (its
/// connections may linger a moment after the stop).
const REBIND_FOR: Duration = Duration::from_secs(10);

/// A server on its own two-thread runtime: serving from
/// [`RestartableS3::start`] until [`RestartableS3::stop`] or drop, and
/// again after [`RestartableS3::restart`]. Its endpoint, address, bucket
/// and keys, the same after a restart: [`ServedBucket`]'s accessors,
/// through `Deref`.
pub struct RestartableS3 {
    served: ServedBucket,
    /// The server and the runtime its tasks run on, while it serves.
    serving: Option<(tokio::runtime::Runtime, S3Loopback)>,
}

impl RestartableS3 {
    /// Starts a server over `root` with `bucket` (as [`S3Loopback::start`]),
    /// on a port the system chooses, on a runtime of its own. Call it
    /// outside any tokio runtime.
    pub fn start(root: &Path, bucket: &str, keys: Keys) -> io::Result<RestartableS3> {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let (runtime, server) = serve(root, bucket, &keys, any)?;
        Ok(RestartableS3 {
            served: (*server).clone(),
            serving: Some((runtime, server)),
        })
    }

    /// Whether it serves (started, and not stopped since).
    pub fn is_serving(&self) -> bool {
        self.serving.is_some()
    }

    /// Stops serving: the port is closed and open connections dropped (the
    /// runtime shut down). Nothing if stopped already.
    pub fn stop(&mut self) {
        if let Some((runtime, server)) = self.serving.take() {
            drop(server);
            runtime.shutdown_timeout(Duration::from_secs(5));
        }
    }

    /// Serves again, on the same port and over the same directory
    /// (stopping first if it serves); retries the bind for a while.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        let deadline = Instant::now() + REBIND_FOR;
        loop {
            let served = &self.served;
            match serve(served.root(), served.bucket(), served.keys(), served.addr()) {
                Ok(serving) => {
                    self.serving = Some(serving);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("serving again on {}: {e}", self.served.addr()),
                    ))
                }
            }
        }
    }
}

impl std::ops::Deref for RestartableS3 {
    type Target = ServedBucket;

    fn deref(&self) -> &ServedBucket {
        &self.served
    }
}

impl Drop for RestartableS3 {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for RestartableS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestartableS3")
            .field("endpoint", &self.served.endpoint())
            .field("root", &self.served.root())
            .field("bucket", &self.served.bucket())
            .field("serving", &self.serving.is_some())
            .finish_non_exhaustive()
    }
}

fn serve(
    root: &Path,
    bucket: &str,
    keys: &Keys,
    addr: SocketAddr,
) -> io::Result<(tokio::runtime::Runtime, S3Loopback)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("s3-loopback")
        .enable_all()
        .build()?;
    let server = runtime.block_on(S3Loopback::start_on(root, bucket, keys.clone(), addr))?;
    Ok((runtime, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(addr: SocketAddr) -> bool {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
    }

    #[test]
    fn stops_and_serves_again_on_the_same_port_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = RestartableS3::start(dir.path(), "b", Keys::new("k", "s")).unwrap();
        let (addr, endpoint) = (server.addr(), server.endpoint().to_string());
        std::fs::write(server.bucket_dir().join("kept"), b"x").unwrap();
        assert!(accepts(addr));
        server.stop();
        assert!(!server.is_serving());
        assert!(!accepts(addr), "the port still accepts connections");
        server.restart().unwrap();
        assert!(server.is_serving());
        assert_eq!(
            (server.addr(), server.endpoint()),
            (addr, endpoint.as_str())
        );
        assert!(accepts(addr));
        assert!(server.bucket_dir().join("kept").is_file());
        drop(server);
        assert!(!accepts(addr));
    }
}
