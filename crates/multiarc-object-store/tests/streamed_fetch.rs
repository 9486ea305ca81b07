//! A ranged GET of many blocks is cut into blocks as its body streams in:
//! a reader of its first block gets that block before the GET completes,
//! a block is never served before all its bytes are in, and an error (or
//! an early end) mid-body reaches every reader of the blocks not yet
//! filled, while the blocks completed before it stay cached. Against a
//! real S3 server (s3s-fs, in-process), through a wrapper that holds back
//! the tail of a GET's body until the test releases it.

// (Its counting store is not used here.)
#[allow(unused_imports)]
mod support;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use multiarc_object_store::CachedStore;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt, PutPayload, Result,
};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{pattern, s3_client, start_server};
use tokio::sync::Notify;

const BLOCK: u64 = 4096;
const BLOCKS: u64 = 16;
/// How long a test waits for something that must happen.
const PATIENCE: Duration = Duration::from_secs(10);

/// What happens to a held GET's body after its first bytes.
#[derive(Clone, Copy, Debug)]
enum Tail {
    /// The rest follows once the test releases it.
    Released,
    /// Once released, the body fails with a store error.
    FailsWhenReleased,
    /// The body ends there (as if the object had shrunk).
    Cut,
}

/// The hold on GET bodies: after `after` bytes (or half the body, if
/// less), `tail`.
#[derive(Clone, Copy, Debug)]
struct Hold {
    after: usize,
    tail: Tail,
    /// Only the next GET (else every one).
    once: bool,
}

/// A store in front of `S` that holds back the tail of GET bodies as told,
/// and counts GETs.
struct TailHeld<S> {
    inner: S,
    hold: Mutex<Option<Hold>>,
    /// Notified when a held body has sent its first bytes and waits.
    holding: Arc<Notify>,
    /// Lets a held tail go on.
    release: Arc<Notify>,
    gets: AtomicU64,
}

impl<S> TailHeld<S> {
    fn new(inner: S) -> TailHeld<S> {
        TailHeld {
            inner,
            hold: Mutex::new(None),
            holding: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
            gets: AtomicU64::new(0),
        }
    }

    fn hold(&self, hold: Hold) {
        *self.hold.lock().unwrap() = Some(hold);
    }

    fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }
}

impl<S: ObjectStore> fmt::Display for TailHeld<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TailHeld({})", self.inner)
    }
}

impl<S: ObjectStore> fmt::Debug for TailHeld<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TailHeld({})", self.inner)
    }
}

/// `body` as a stream: its first `hold.after` bytes, then `hold.tail`.
fn held_stream(
    body: Bytes,
    hold: Hold,
    holding: Arc<Notify>,
    release: Arc<Notify>,
) -> BoxStream<'static, Result<Bytes>> {
    let head = body.slice(..hold.after);
    let rest = body.slice(hold.after..);
    let tail = futures::stream::once(async move {
        holding.notify_one();
        match hold.tail {
            Tail::Released => {
                release.notified().await;
                Some(Ok(rest))
            }
            Tail::FailsWhenReleased => {
                release.notified().await;
                Some(Err(object_store::Error::Generic {
                    store: "TailHeld",
                    source: "the connection broke mid-body".into(),
                }))
            }
            Tail::Cut => None,
        }
    })
    .filter_map(futures::future::ready);
    futures::stream::once(async move { Ok(head) })
        .chain(tail)
        .boxed()
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for TailHeld<S> {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            return self.inner.get_opts(location, options).await;
        }
        self.gets.fetch_add(1, Ordering::SeqCst);
        let result = self.inner.get_opts(location, options).await?;
        let hold = {
            let mut hold = self.hold.lock().unwrap();
            let now = *hold;
            if now.is_some_and(|h| h.once) {
                *hold = None;
            }
            now
        };
        let Some(hold) = hold else {
            return Ok(result);
        };
        let (meta, range, attributes) = (
            result.meta.clone(),
            result.range.clone(),
            result.attributes.clone(),
        );
        let body = result.bytes().await?;
        // A shorter body is held halfway.
        let hold = Hold {
            after: hold.after.min(body.len() / 2),
            ..hold
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(held_stream(
                body,
                hold,
                Arc::clone(&self.holding),
                Arc::clone(&self.release),
            )),
            meta,
            range,
            attributes,
            extensions: Default::default(),
        })
    }

    multiarc_s3_loopback::forward_object_store! {
        inner: put_opts, put_multipart_opts, delete_stream, list, list_with_delimiter,
        copy_opts, rename_opts
    }
}

type Store = Arc<CachedStore<TailHeld<AmazonS3>>>;

/// An object of [`BLOCKS`] blocks on a fresh server, and a cached store
/// (4 KiB blocks, no readahead) in front of it through [`TailHeld`].
async fn setup(name: &str, seed: u64) -> (support::S3Server, Store, Path, Vec<u8>) {
    let server = start_server().await;
    let data = pattern((BLOCKS * BLOCK) as usize, seed);
    let path = Path::from(name);
    s3_client(&server)
        .put(&path, PutPayload::from(data.clone()))
        .await
        .expect("put");
    let store = CachedStore::builder(TailHeld::new(s3_client(&server)))
        .max_bytes(16 << 20)
        .block_size(BLOCK)
        .readahead(0)
        .build()
        .expect("a cached store");
    (server, Arc::new(store), path, data)
}

/// Reads `range` of `path` in a task of its own.
fn spawn_read(
    store: &Store,
    path: &Path,
    range: std::ops::Range<u64>,
) -> tokio::task::JoinHandle<Result<Bytes>> {
    let (store, path) = (Arc::clone(store), path.clone());
    tokio::spawn(async move { store.get_range(&path, range).await })
}

async fn held(store: &Store) {
    tokio::time::timeout(PATIENCE, store.inner().holding.notified())
        .await
        .expect("the GET's body reached its hold");
}

/// Releases the held tail of the GET of `whole` (a read of the whole
/// object) and checks that the read completes with `data`.
async fn read_whole_once_released(
    store: &Store,
    whole: tokio::task::JoinHandle<Result<Bytes>>,
    data: &[u8],
) {
    store.inner().release.notify_one();
    let whole = tokio::time::timeout(PATIENCE, whole)
        .await
        .expect("the read completes once the tail is released")
        .unwrap()
        .expect("the whole read");
    assert!(whole == data, "the whole read's bytes differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_the_first_block_gets_it_before_the_whole_get_completes() {
    let (_server, store, path, data) = setup("streamed", 31).await;
    // One GET of all 16 blocks; its body stops after a block and a half.
    store.inner().hold(Hold {
        after: (BLOCK + BLOCK / 2) as usize,
        tail: Tail::Released,
        once: true,
    });
    let whole = spawn_read(&store, &path, 0..BLOCKS * BLOCK);
    held(&store).await;
    // The first block is in: another reader gets it now, from the GET in
    // flight (no request of its own).
    let first = tokio::time::timeout(PATIENCE, store.get_range(&path, 10..100))
        .await
        .expect("the first block is served while the GET's tail is held")
        .expect("a read of the first block");
    assert_eq!(first, &data[10..100]);
    assert!(!whole.is_finished(), "the whole read cannot have completed");
    // The second block is only half in: never served short; its reader
    // waits for the rest.
    let second = spawn_read(&store, &path, BLOCK + 5..BLOCK + 50);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "a block served before all its bytes");
    read_whole_once_released(&store, whole, &data).await;
    let second = second.await.unwrap().expect("the second block's read");
    assert_eq!(second, &data[(BLOCK + 5) as usize..(BLOCK + 50) as usize]);
    // One GET for everything; each block fetched once.
    assert_eq!(store.inner().gets(), 1);
    let stats = store.stats();
    assert_eq!(stats.blocks_fetched, BLOCKS, "{stats:?}");
    assert_eq!(stats.store_bytes, BLOCKS * BLOCK, "{stats:?}");
    assert!(stats.single_flight_waits >= 1, "{stats:?}");
}

/// A read waiting for the rest of its GET holds none of its blocks that
/// have arrived: each was copied out and let go, so the evictor may take
/// it (held blocks are passed over, and when the recency list is mostly
/// blocks in flight the frequency list would pay). A read served wholly
/// from memory still hands out holds on the cached blocks (no copy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waiting_for_its_get_holds_none_of_the_blocks_already_in() {
    let (_server, store, path, data) = setup("unheld", 37).await;
    // One GET of all 16 blocks; its body stops after three and a half.
    store.inner().hold(Hold {
        after: (3 * BLOCK + BLOCK / 2) as usize,
        tail: Tail::Released,
        once: true,
    });
    let whole = spawn_read(&store, &path, 0..BLOCKS * BLOCK);
    held(&store).await;
    // The three blocks in reach the cache (their loads complete while
    // the fourth waits for the body).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let stats = store.cache().stats();
        if stats.size >= 3 * BLOCK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the blocks in never reached the cache: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = store.cache().stats();
    assert!(!whole.is_finished(), "the whole read cannot have completed");
    assert_eq!(
        stats.held_bytes, 0,
        "the waiting read holds blocks it has (size {}, held {})",
        stats.size, stats.held_bytes
    );
    read_whole_once_released(&store, whole, &data).await;
    assert_eq!(store.cache().stats().held_bytes, 0);
    // Served from memory: a one-block read holds its block while its
    // bytes live.
    let hit = store.get_range(&path, 10..100).await.expect("a memory hit");
    assert_eq!(hit, &data[10..100]);
    assert_eq!(
        store.cache().stats().held_bytes,
        BLOCK,
        "a hit is not copied"
    );
    drop(hit);
    assert_eq!(store.cache().stats().held_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_mid_body_reaches_every_waiter_of_the_blocks_not_yet_filled() {
    let (_server, store, path, data) = setup("broken", 32).await;
    store.inner().hold(Hold {
        after: (BLOCK + BLOCK / 2) as usize,
        tail: Tail::FailsWhenReleased,
        once: true,
    });
    let whole = spawn_read(&store, &path, 0..BLOCKS * BLOCK);
    held(&store).await;
    // Readers of blocks the GET has not filled: they wait for its loads
    // (single flight), sending nothing themselves.
    let asked = store.stats().metadata_hits;
    let waiters: Vec<_> = [
        BLOCK + 1..BLOCK + 2,
        5 * BLOCK..6 * BLOCK,
        15 * BLOCK..16 * BLOCK,
    ]
    .into_iter()
    .map(|range| spawn_read(&store, &path, range))
    .collect();
    // Each has its version (a metadata hit) and then, in the same poll,
    // waits for the load: give them that poll's time, however loaded the
    // machine.
    tokio::time::timeout(PATIENCE, async {
        while store.stats().metadata_hits < asked + 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the waiters started their reads");
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.inner().release.notify_one();
    let err = tokio::time::timeout(PATIENCE, whole)
        .await
        .expect("the read ends")
        .unwrap()
        .expect_err("the body failed");
    assert!(matches!(err, object_store::Error::Generic { .. }), "{err}");
    assert!(err.to_string().contains("broke mid-body"), "{err}");
    for waiter in waiters {
        let err = tokio::time::timeout(PATIENCE, waiter)
            .await
            .expect("a waiter ends")
            .unwrap()
            .expect_err("a waiter of a block never filled gets the error");
        assert!(err.to_string().contains("broke mid-body"), "{err}");
    }
    assert_eq!(store.inner().gets(), 1, "a waiter sent its own GET");
    // The block completed before the error was cached, whole.
    assert_eq!(
        store.get_range(&path, 0..BLOCK).await.unwrap(),
        &data[..BLOCK as usize]
    );
    assert_eq!(store.inner().gets(), 1);
    // The rest is fetched again, once, and right.
    let all = store.get_range(&path, 0..BLOCKS * BLOCK).await.unwrap();
    assert!(all == data, "the bytes read again differ");
    assert_eq!(store.inner().gets(), 2);
    let stats = store.stats();
    assert_eq!(stats.blocks_fetched, BLOCKS, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_ends_short_is_an_error_never_short_bytes() {
    let (_server, store, path, data) = setup("cut", 33).await;
    // Every GET's body ends after a block and a half.
    store.inner().hold(Hold {
        after: (BLOCK + BLOCK / 2) as usize,
        tail: Tail::Cut,
        once: false,
    });
    let err = store
        .get_range(&path, 0..BLOCKS * BLOCK)
        .await
        .expect_err("a short body is an error");
    assert!(
        matches!(err, object_store::Error::Precondition { .. }),
        "{err}"
    );
    // (The read's retries may have completed a few more blocks; the last
    // one is handed over only at the body's end, which never comes whole.)
    let err = store
        .get_range(&path, (BLOCKS - 1) * BLOCK..BLOCKS * BLOCK)
        .await
        .expect_err("a block whose bytes never all came is never served");
    assert!(
        matches!(err, object_store::Error::Precondition { .. }),
        "{err}"
    );
    // The first block did arrive whole: it is served, right.
    let gets = store.inner().gets();
    assert_eq!(
        store.get_range(&path, 0..BLOCK).await.unwrap(),
        &data[..BLOCK as usize]
    );
    assert_eq!(store.inner().gets(), gets);
}
