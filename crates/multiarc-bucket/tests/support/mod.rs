//! Test support: an s3s-fs server on 127.0.0.1 on its own runtime (so
//! that the blocking filesystem calls run outside any runtime), and the
//! S3 client to it.
//!
//! (A reusable crate, multiarc-s3-loopback, is being made of this; until
//! then these few lines are here.)

#![allow(dead_code)]

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, RetryConfig};
use std::time::Duration;

pub const ACCESS_KEY: &str = "multiarc-test-key";
pub const SECRET_KEY: &str = "multiarc-test-secret";
pub const BUCKET: &str = "bucket";

/// An s3s-fs server over a temporary directory, serving until dropped
/// (or stopped; it can be started again on the same port and directory).
pub struct S3Server {
    pub endpoint: String,
    pub root: tempfile::TempDir,
    addr: std::net::SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

impl S3Server {
    /// Stops serving: the port is closed and open connections dropped.
    pub fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }

    /// Serves again, on the same port and over the same directory.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match serve(self.root.path(), Some(self.addr)) {
                Ok((runtime, _)) => {
                    self.runtime = Some(runtime);
                    return;
                }
                Err(e) if std::time::Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("rebinding {}: {e}", self.addr),
            }
        }
    }
}

/// Serves s3s-fs over `root` on `addr` (a free port when `None`).
fn serve(
    root: &std::path::Path,
    addr: Option<std::net::SocketAddr>,
) -> std::io::Result<(tokio::runtime::Runtime, std::net::SocketAddr)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs over the directory");
    let service = {
        let mut builder = s3s::service::S3ServiceBuilder::new(fs);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        builder.build()
    };
    let bind = addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap());
    let listener = runtime.block_on(tokio::net::TcpListener::bind(bind))?;
    let addr = listener.local_addr()?;
    runtime.spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let _ = ConnBuilder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    Ok((runtime, addr))
}

/// Starts an s3s-fs server with one bucket, [`BUCKET`].
pub fn start_server() -> S3Server {
    let root = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(root.path().join(BUCKET)).expect("the bucket's directory");
    let (runtime, addr) = serve(root.path(), None).expect("an S3 server on 127.0.0.1");
    S3Server {
        endpoint: format!("http://{addr}"),
        root,
        addr,
        runtime: Some(runtime),
    }
}

/// object_store's S3 client for the server's bucket (few, quick retries).
pub fn s3_client(server: &S3Server) -> AmazonS3 {
    AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_bucket_name(BUCKET)
        .with_access_key_id(ACCESS_KEY)
        .with_secret_access_key(SECRET_KEY)
        .with_region("us-east-1")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(50),
                base: 2.0,
            },
            max_retries: 1,
            retry_timeout: Duration::from_secs(5),
        })
        .build()
        .expect("an S3 client")
}

/// `len` bytes that differ with `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
