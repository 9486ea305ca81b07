//! [`S3Loopback`]: an S3 server in-process, on loopback: [s3s-fs] over a
//! local directory, on `127.0.0.1` at a free port, with one bucket and SigV4
//! authentication by one key pair. A real S3 endpoint (HTTP, signatures,
//! ranged GETs, ETags) without a separate process: `multiarc bench
//! --workload object` serves its data from one when no `--endpoint` is
//! given, and the tests read through one.
//!
//! The server runs as tasks on the tokio runtime that [`S3Loopback::start`]
//! is called on; it stops, closing its connections, when the handle is
//! dropped or [`S3Loopback::shutdown`] is awaited (and with the runtime).
//! Objects are files under `root/bucket/`; what is there when the server
//! starts is served. What s3s-fs 0.14.1 does not do: honour `If-Match`
//! (it ignores it), answer ranged GETs without hashing the whole object
//! (it computes the object's MD5 on every GET: the cost grows with the
//! object's size, not the range's), list for rclone, or HEAD `dir/`.
//!
//! [s3s-fs]: https://crates.io/crates/s3s-fs

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// The one key pair the server accepts (SigV4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
}

impl Keys {
    /// A key pair.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Keys {
        Keys {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
        }
    }
}

/// Where a server listens and what it serves: the endpoint its clients
/// use, its bucket over a directory, the key pair it accepts.
/// [`S3Loopback`] dereferences to its own (and the tests' restartable
/// server to its).
#[derive(Clone, Debug)]
pub struct ServedBucket {
    endpoint: String,
    addr: SocketAddr,
    root: PathBuf,
    bucket: String,
    keys: Keys,
}

impl ServedBucket {
    /// The endpoint URL: `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The directory the server serves (its buckets are directories in it).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The directory that holds the bucket's objects (object `a/b` is the
    /// file `bucket_dir()/a/b`).
    pub fn bucket_dir(&self) -> PathBuf {
        self.root.join(&self.bucket)
    }

    /// The key pair the server accepts.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }
}

/// A running server. Dropping it stops the server. Its endpoint, address,
/// bucket and keys: [`ServedBucket`]'s accessors, through `Deref`.
pub struct S3Loopback {
    served: ServedBucket,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl S3Loopback {
    /// Starts a server over `root` (created if missing) with the bucket
    /// `bucket` (the directory `root/bucket`, created if missing), on
    /// 127.0.0.1 at a port the system chooses, accepting `keys`. Must be
    /// called on a tokio runtime with I/O enabled; the server's tasks run
    /// on it.
    pub async fn start(root: &Path, bucket: &str, keys: Keys) -> io::Result<S3Loopback> {
        S3Loopback::start_on(root, bucket, keys, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// As [`S3Loopback::start`], listening on `addr` (port 0: one the
    /// system chooses); for instance the address of a server stopped
    /// before, to serve its clients again.
    pub async fn start_on(
        root: &Path,
        bucket: &str,
        keys: Keys,
        addr: SocketAddr,
    ) -> io::Result<S3Loopback> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        if bucket.is_empty() || bucket.contains('/') || bucket.starts_with('.') {
            return Err(invalid(format!("{bucket:?} is not a bucket name")));
        }
        let bucket_dir = root.join(bucket);
        std::fs::create_dir_all(&bucket_dir).map_err(|e| {
            io::Error::new(e.kind(), format!("creating {}: {e}", bucket_dir.display()))
        })?;
        let fs = s3s_fs::FileSystem::new(root)
            .map_err(|e| io::Error::other(format!("s3s-fs over {}: {e:?}", root.display())))?;
        let service = {
            let mut builder = s3s::service::S3ServiceBuilder::new(fs);
            builder.set_auth(s3s::auth::SimpleAuth::from_single(
                keys.access_key.as_str(),
                keys.secret_key.as_str(),
            ));
            builder.build()
        };
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // The connections: aborted when this set is dropped, so they
            // end with the server.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let socket = match accepted {
                            Ok((socket, _)) => socket,
                            Err(e) => {
                                log::debug!("s3 loopback {addr}: accept: {e}");
                                continue;
                            }
                        };
                        // Replies go out whole: without it, Nagle's
                        // algorithm holds a reply's tail for the client's
                        // delayed ACK (tens of ms per request).
                        if let Err(e) = socket.set_nodelay(true) {
                            log::debug!("s3 loopback {addr}: TCP_NODELAY: {e}");
                        }
                        let service = service.clone();
                        connections.spawn(async move {
                            if let Err(e) = ConnBuilder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(socket), service)
                                .await
                            {
                                log::debug!("s3 loopback {addr}: connection: {e}");
                            }
                        });
                    }
                    // Reap finished connections as they end.
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        log::debug!("s3 loopback serving {} on {addr}", root.display());
        Ok(S3Loopback {
            served: ServedBucket {
                endpoint: format!("http://{addr}"),
                addr,
                root: root.to_path_buf(),
                bucket: bucket.to_string(),
                keys,
            },
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Stops the server: no new connection is accepted, open ones are
    /// closed; returns once its task has ended.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl std::ops::Deref for S3Loopback {
    type Target = ServedBucket;

    fn deref(&self) -> &ServedBucket {
        &self.served
    }
}

impl Drop for S3Loopback {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for S3Loopback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Loopback")
            .field("endpoint", &self.served.endpoint)
            .field("root", &self.served.root)
            .field("bucket", &self.served.bucket)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The status line of an unsigned `GET /bucket/` sent to `addr`.
    async fn status_line(addr: SocketAddr) -> io::Result<String> {
        let mut socket = tokio::net::TcpStream::connect(addr).await?;
        socket
            .write_all(b"GET /bucket/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await?;
        let text = String::from_utf8_lossy(&answer);
        Ok(text.lines().next().unwrap_or("").to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_http_refuses_unsigned_requests_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let server = S3Loopback::start(dir.path(), "bucket", Keys::new("k", "s"))
            .await
            .unwrap();
        assert!(server.endpoint().starts_with("http://127.0.0.1:"));
        assert!(server.bucket_dir().is_dir());
        let status = status_line(server.addr()).await.unwrap();
        assert!(status.starts_with("HTTP/1.1 403"), "{status}");
        let addr = server.addr();
        server.shutdown().await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_server_stops() {
        let dir = tempfile::tempdir().unwrap();
        let server = S3Loopback::start(dir.path(), "b", Keys::new("k", "s"))
            .await
            .unwrap();
        let addr = server.addr();
        drop(server);
        // The accept task is aborted; give the runtime a moment to drop it.
        let mut refused = false;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(refused, "the port still accepts connections");
    }

    #[tokio::test]
    async fn bad_bucket_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["", "a/b", ".."] {
            let err = S3Loopback::start(dir.path(), name, Keys::new("k", "s"))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
    }
}
