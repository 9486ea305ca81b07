//! Test support: an S3 server (s3s-fs, in-process, on 127.0.0.1), the
//! `AmazonS3` client to it, and (from `multiarc-s3-loopback`) the store
//! wrapper that counts the requests that reach the client and can add
//! latency to each.

#![allow(dead_code)]

pub use multiarc_s3_loopback::CountingStore;
use multiarc_s3_loopback::{Keys, S3Loopback};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, RetryConfig};
use std::time::Duration;

pub const ACCESS_KEY: &str = "multiarc-test-key";
pub const SECRET_KEY: &str = "multiarc-test-secret";
pub const BUCKET: &str = "bucket";

/// An s3s-fs server over a temporary directory, serving until dropped
/// (the `multiarc-s3-loopback` crate's server).
pub struct S3Server {
    /// Dropped first (fields drop in order): the server stops before its
    /// directory goes.
    server: S3Loopback,
    pub endpoint: String,
    pub root: tempfile::TempDir,
}

impl S3Server {
    /// The running server.
    pub fn loopback(&self) -> &S3Loopback {
        &self.server
    }
}

/// Starts an s3s-fs server on 127.0.0.1 (a free port) with one bucket,
/// [`BUCKET`], and SigV4 authentication with [`ACCESS_KEY`].
pub async fn start_server() -> S3Server {
    let root = tempfile::tempdir().expect("a temporary directory");
    let server = S3Loopback::start(root.path(), BUCKET, Keys::new(ACCESS_KEY, SECRET_KEY))
        .await
        .expect("an S3 server on loopback");
    S3Server {
        endpoint: server.endpoint().to_string(),
        server,
        root,
    }
}

/// Few, quick retries: the tests want errors, not minutes of backoff.
fn quick_retries() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            base: 2.0,
        },
        max_retries: 1,
        retry_timeout: Duration::from_secs(5),
    }
}

/// object_store's S3 client for `bucket` at `endpoint` with the given keys.
pub fn s3_client_with(endpoint: &str, bucket: &str, access: &str, secret: &str) -> AmazonS3 {
    AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_access_key_id(access)
        .with_secret_access_key(secret)
        .with_region("us-east-1")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .with_retry(quick_retries())
        .build()
        .expect("an S3 client")
}

/// object_store's S3 client for the server's bucket.
pub fn s3_client(server: &S3Server) -> AmazonS3 {
    s3_client_with(&server.endpoint, BUCKET, ACCESS_KEY, SECRET_KEY)
}

/// `len` bytes that differ with `seed` (a simple generator: the tests
/// compare contents, and two seeds must give different bytes everywhere
/// that matters).
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
