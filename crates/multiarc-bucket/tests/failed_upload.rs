//! A failing upload: the multipart upload is aborted, the close gets EIO,
//! and the store never shows a partial object (over object_store's
//! in-memory store, with a part that fails).

use async_trait::async_trait;
use multiarc_bucket::{BucketConfig, BucketFs, Errno, ROOT_INO};
use multiarc_object_store::CachedStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    MultipartUpload, ObjectStore, ObjectStoreExt, PutMultipartOptions, PutPayload, PutResult,
    Result, UploadPart,
};
use std::ffi::OsStr;

/// The process that opens files in these tests.
const OWNER: u32 = 1;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What the failing store saw.
#[derive(Default, Debug)]
struct Seen {
    parts: AtomicUsize,
    aborted: AtomicBool,
    completed: AtomicBool,
}

/// An in-memory store whose multipart uploads fail at their part `fail_at`.
#[derive(Debug)]
struct FailingParts {
    inner: InMemory,
    fail_at: usize,
    seen: Arc<Seen>,
}

impl fmt::Display for FailingParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FailingParts")
    }
}

#[derive(Debug)]
struct FailingUpload {
    inner: Box<dyn MultipartUpload>,
    fail_at: usize,
    seen: Arc<Seen>,
}

#[async_trait]
impl MultipartUpload for FailingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let n = self.seen.parts.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at {
            return Box::pin(async {
                Err(object_store::Error::Generic {
                    store: "FailingParts",
                    source: "a part that fails (test)".into(),
                })
            });
        }
        self.inner.put_part(data)
    }
    async fn complete(&mut self) -> Result<PutResult> {
        self.seen.completed.store(true, Ordering::SeqCst);
        self.inner.complete().await
    }
    async fn abort(&mut self) -> Result<()> {
        self.seen.aborted.store(true, Ordering::SeqCst);
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for FailingParts {
    async fn put_multipart_opts(
        &self,
        l: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Ok(Box::new(FailingUpload {
            inner: self.inner.put_multipart_opts(l, o).await?,
            fail_at: self.fail_at,
            seen: Arc::clone(&self.seen),
        }))
    }
    multiarc_s3_loopback::forward_object_store! {
        inner: put_opts, get_opts, delete_stream, list, list_with_delimiter, copy_opts,
        rename_opts
    }
}

fn filesystem(fail_at: usize, seen: &Arc<Seen>) -> BucketFs<FailingParts> {
    let store = FailingParts {
        inner: InMemory::new(),
        fail_at,
        seen: Arc::clone(seen),
    };
    let cached = CachedStore::builder(store)
        .max_bytes(16 << 20)
        .build()
        .unwrap();
    let config = BucketConfig {
        part_size: 5 << 20,
        ..BucketConfig::default()
    };
    BucketFs::new(cached, Path::default(), config).unwrap()
}

fn exists(fs: &BucketFs<FailingParts>, key: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match rt.block_on(fs.store().inner().inner.head(&Path::from(key))) {
        Ok(_) => true,
        Err(object_store::Error::NotFound { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_failed_part_aborts_the_upload_and_nothing_appears() {
    let seen = Arc::new(Seen::default());
    let fs = filesystem(1, &seen);
    let (_, fh) = fs.create(ROOT_INO, OsStr::new("big"), OWNER).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut result = Ok(());
    let mut off = 0;
    // Parts go up while the file is written, or at the close: the failure
    // shows in a write or in the flush, never as an object.
    for _ in 0..16 {
        match fs.write(fh, off, &chunk) {
            Ok(_) => off += chunk.len() as u64,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let closed = fs.flush(fh, OWNER);
    assert!(
        result.is_err() || closed.is_err(),
        "the failure reaches the writer"
    );
    assert_eq!(result.err().or(closed.err()), Some(Errno::EIO));
    let _ = fs.release(fh);
    assert!(
        seen.aborted.load(Ordering::SeqCst),
        "the multipart upload was aborted"
    );
    assert!(!seen.completed.load(Ordering::SeqCst));
    assert!(!exists(&fs, "big"));
    // The name is gone from the mount too; a new file can take it.
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("big")).err(),
        Some(Errno::ENOENT)
    );
    let stats: std::collections::HashMap<_, _> = fs.stats().into_iter().collect();
    assert_eq!(stats["bucket_upload_errors"], 1);
}

#[test]
fn a_file_left_open_at_unmount_is_aborted_not_completed() {
    let seen = Arc::new(Seen::default());
    let fs = filesystem(usize::MAX, &seen);
    let (_, fh) = fs.create(ROOT_INO, OsStr::new("half"), OWNER).unwrap();
    let chunk = vec![1u8; 1 << 20];
    for i in 0..7 {
        fs.write(fh, i << 20, &chunk).unwrap();
    }
    assert!(
        seen.parts.load(Ordering::SeqCst) >= 1,
        "a part went up while writing"
    );
    fs.abandon_uploads();
    assert!(seen.aborted.load(Ordering::SeqCst));
    assert!(!seen.completed.load(Ordering::SeqCst));
    assert!(!exists(&fs, "half"));
}
