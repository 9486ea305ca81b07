//! Test support: an S3 server (s3s-fs, in-process, on 127.0.0.1), the
//! `AmazonS3` client to it, and a store wrapper that counts the requests
//! that reach the client (and can add latency to each).

#![allow(dead_code)]

use async_trait::async_trait;
use futures::stream::BoxStream;
use multiarc_s3_loopback::{Keys, S3Loopback};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    BackoffConfig, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
    RetryConfig,
};
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// The requests a [`CountingStore`] passed on.
#[derive(Default, Debug)]
pub struct RequestCounts {
    /// GETs with a body (ranged or not).
    pub gets: AtomicU64,
    /// GETs without a body (HEAD).
    pub heads: AtomicU64,
    /// `get_ranges` calls.
    pub get_ranges: AtomicU64,
}

impl RequestCounts {
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }
    pub fn heads(&self) -> u64 {
        self.heads.load(Ordering::SeqCst)
    }
}

/// A store that passes everything to `inner`, counting reads, each read
/// first waiting `latency` (an emulated store's time to first byte).
pub struct CountingStore<S> {
    pub inner: S,
    pub counts: Arc<RequestCounts>,
    pub latency: Duration,
    /// Emulated transfer rate (bytes per second) added to `latency` for
    /// the bytes a ranged read asks for; `None`: none.
    pub bytes_per_sec: Option<u64>,
    /// Every read's range, in order, when `Some` (to replay them).
    pub log: Option<std::sync::Mutex<Vec<Vec<Range<u64>>>>>,
}

impl<S> CountingStore<S> {
    pub fn new(inner: S, latency: Duration) -> CountingStore<S> {
        CountingStore {
            inner,
            counts: Arc::default(),
            latency,
            bytes_per_sec: None,
            log: None,
        }
    }
}

impl<S: ObjectStore> fmt::Display for CountingStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl<S: ObjectStore> fmt::Debug for CountingStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

impl<S: ObjectStore> CountingStore<S> {
    /// A read passed on: counted, after the emulated delay.
    async fn counted_get(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            self.counts.heads.fetch_add(1, Ordering::SeqCst);
        } else {
            self.counts.gets.fetch_add(1, Ordering::SeqCst);
        }
        let mut delay = self.latency;
        if let (Some(rate), Some(object_store::GetRange::Bounded(r))) =
            (self.bytes_per_sec, &options.range)
        {
            delay += Duration::from_secs_f64((r.end - r.start) as f64 / rate as f64);
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.inner.get_opts(location, options).await
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for CountingStore<S> {
    async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(l, p, o).await
    }
    async fn put_multipart_opts(
        &self,
        l: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(l, o).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let result = self.counted_get(location, options).await?;
        if let Some(log) = &self.log {
            log.lock().unwrap().push(vec![result.range.clone()]);
        }
        Ok(result)
    }
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.counts.get_ranges.fetch_add(1, Ordering::SeqCst);
        if let Some(log) = &self.log {
            log.lock().unwrap().push(ranges.to_vec());
        }
        // Through this store's own get_opts, so each request is counted.
        object_store::coalesce_ranges(
            ranges,
            |r| async move {
                let options = GetOptions::new().with_range(Some(r));
                self.counted_get(location, options).await?.bytes().await
            },
            object_store::OBJECT_STORE_COALESCE_DEFAULT,
        )
        .await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, o).await
    }
    async fn rename_opts(&self, from: &Path, to: &Path, o: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, o).await
    }
}

use bytes::Bytes;

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
