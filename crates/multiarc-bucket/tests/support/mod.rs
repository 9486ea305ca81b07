//! Test support: an S3 server (multiarc-s3-loopback's, s3s-fs) on
//! 127.0.0.1 on its own runtime (so that the blocking filesystem calls run
//! outside any runtime), which a test can stop and start again, and the S3
//! client to it. Shared with multiarc-cli's bucket tests.

#![allow(dead_code)]

use multiarc_s3_loopback::{Keys, RestartableS3};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, RetryConfig};
use std::time::Duration;

pub const ACCESS_KEY: &str = "multiarc-test-key";
pub const SECRET_KEY: &str = "multiarc-test-secret";
pub const BUCKET: &str = "bucket";

/// A server over a temporary directory, serving until dropped (or
/// stopped; it can be started again on the same port and directory).
pub struct S3Server {
    pub endpoint: String,
    server: RestartableS3,
    /// Removed at drop, after the server (fields drop in order).
    root: tempfile::TempDir,
}

impl S3Server {
    /// Stops serving: the port is closed and open connections dropped.
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// Serves again, on the same port and over the same directory.
    pub fn restart(&mut self) {
        self.server.restart().expect("serving again");
    }
}

/// Starts a server with one bucket, [`BUCKET`].
pub fn start_server() -> S3Server {
    let root = tempfile::tempdir().expect("a temporary directory");
    let server = RestartableS3::start(root.path(), BUCKET, Keys::new(ACCESS_KEY, SECRET_KEY))
        .expect("an S3 server on 127.0.0.1");
    S3Server {
        endpoint: server.endpoint().to_string(),
        server,
        root,
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
