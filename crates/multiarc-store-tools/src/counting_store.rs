//! [`CountingStore`]: an `object_store::ObjectStore` in front of another
//! that counts the reads reaching it (requests and bytes), each read first
//! waiting an emulated store latency. A loopback server answers in well
//! under a millisecond; the tests and `multiarc bench --workload object`
//! put this in front of their S3 client to make it as slow as a remote
//! store and to see what reached it.

use async_trait::async_trait;
use bytes::Bytes;
use multiarc_lock::poison::LockUnpoisoned;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore, Result};
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The reads a [`CountingStore`] passed on, counted as they go.
#[derive(Default, Debug)]
pub struct ReadCounts {
    gets: AtomicU64,
    heads: AtomicU64,
    get_ranges_calls: AtomicU64,
    bytes: AtomicU64,
}

impl ReadCounts {
    /// GETs with a body (ranged or whole), each range of a `get_ranges`
    /// call's coalesced requests among them.
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }

    /// GETs without a body (HEAD).
    pub fn heads(&self) -> u64 {
        self.heads.load(Ordering::SeqCst)
    }

    /// `get_ranges` calls (each is one or more [`gets`](Self::gets)).
    pub fn get_ranges_calls(&self) -> u64 {
        self.get_ranges_calls.load(Ordering::SeqCst)
    }

    /// Requests and body bytes so far (take two and subtract with
    /// [`ReadTraffic::since`]).
    pub fn snapshot(&self) -> ReadTraffic {
        ReadTraffic {
            requests: self.gets() + self.heads(),
            bytes: self.bytes.load(Ordering::SeqCst),
        }
    }
}

/// What reached the store: requests (GET and HEAD) and the bytes of the
/// GETs' bodies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadTraffic {
    /// GETs and HEADs.
    pub requests: u64,
    /// Body bytes the GETs returned.
    pub bytes: u64,
}

impl ReadTraffic {
    /// What was sent between `earlier` and `self`.
    pub fn since(self, earlier: ReadTraffic) -> ReadTraffic {
        ReadTraffic {
            requests: self.requests - earlier.requests,
            bytes: self.bytes - earlier.bytes,
        }
    }
}

/// `inner` with every read (GET or HEAD: the time to the first byte of a
/// remote store) first waiting `latency`, plus, for a bounded range and a
/// [transfer rate](Self::with_transfer_rate), the time to send it; each
/// read is counted ([`ReadCounts`]) and, when
/// [recording](Self::recording_ranges), its ranges kept. Writes and lists
/// pass through, neither delayed nor counted. The delay is a tokio timer:
/// reads must run on a tokio runtime with time enabled when it is not zero.
pub struct CountingStore<S> {
    inner: S,
    latency: Duration,
    bytes_per_sec: Option<u64>,
    counts: Arc<ReadCounts>,
    ranges: Option<Mutex<Vec<Vec<Range<u64>>>>>,
}

impl<S> CountingStore<S> {
    /// `inner`, each read after `latency` (zero: none), not recording.
    pub fn new(inner: S, latency: Duration) -> CountingStore<S> {
        CountingStore {
            inner,
            latency,
            bytes_per_sec: None,
            counts: Arc::default(),
            ranges: None,
        }
    }

    /// Adds to each bounded ranged read the time its bytes take at
    /// `bytes_per_sec` (`None`: no transfer time).
    pub fn with_transfer_rate(mut self, bytes_per_sec: Option<u64>) -> CountingStore<S> {
        self.bytes_per_sec = bytes_per_sec;
        self
    }

    /// Keeps every read's ranges, in order (see
    /// [`recorded_ranges`](Self::recorded_ranges)).
    pub fn recording_ranges(mut self) -> CountingStore<S> {
        self.ranges = Some(Mutex::default());
        self
    }

    /// The counts, shared: they keep counting after this store moves (into
    /// a cache in front of it, say).
    pub fn counts(&self) -> Arc<ReadCounts> {
        Arc::clone(&self.counts)
    }

    /// The store behind this one.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The reads' ranges so far when recording, in order: a `get_opts`
    /// gives the one range it returned, a `get_ranges` call the ranges it
    /// asked for. Empty when not recording.
    pub fn recorded_ranges(&self) -> Vec<Vec<Range<u64>>> {
        self.ranges
            .as_ref()
            .map_or_else(Vec::new, |r| r.lock_unpoisoned().clone())
    }

    fn record(&self, ranges: Vec<Range<u64>>) {
        if let Some(r) = &self.ranges {
            r.lock_unpoisoned().push(ranges);
        }
    }
}

impl<S: ObjectStore> CountingStore<S> {
    /// A read passed on: counted, after the emulated delay.
    async fn counted_get(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let counter = if head {
            &self.counts.heads
        } else {
            &self.counts.gets
        };
        counter.fetch_add(1, Ordering::SeqCst);
        let mut delay = self.latency;
        if let (Some(rate), Some(GetRange::Bounded(r))) = (self.bytes_per_sec, &options.range) {
            delay += Duration::from_secs_f64((r.end - r.start) as f64 / rate.max(1) as f64);
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let result = self.inner.get_opts(location, options).await?;
        if !head {
            let bytes = result.range.end - result.range.start;
            self.counts.bytes.fetch_add(bytes, Ordering::SeqCst);
        }
        Ok(result)
    }
}

impl<S: ObjectStore> fmt::Display for CountingStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl<S: ObjectStore> fmt::Debug for CountingStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({}, {:?})", self.inner, self.latency)
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for CountingStore<S> {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let result = self.counted_get(location, options).await?;
        self.record(vec![result.range.clone()]);
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.counts.get_ranges_calls.fetch_add(1, Ordering::SeqCst);
        self.record(ranges.to_vec());
        // object_store's coalescing, each request delayed and counted.
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

    crate::forward_object_store! {
        inner: put_opts, put_multipart_opts, delete_stream, list, list_with_delimiter,
        copy_opts, rename_opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};
    use std::time::Instant;

    #[tokio::test]
    async fn reads_are_counted_delayed_and_recorded_and_writes_are_not() {
        let latency = Duration::from_millis(20);
        let store = CountingStore::new(InMemory::new(), latency).recording_ranges();
        let path = Path::from("object");
        store
            .put(&path, PutPayload::from(vec![7u8; 1000]))
            .await
            .unwrap();
        assert_eq!(store.counts().snapshot(), ReadTraffic::default());

        let started = Instant::now();
        assert_eq!(store.get_range(&path, 10..110).await.unwrap().len(), 100);
        assert!(started.elapsed() >= latency);
        assert_eq!(store.head(&path).await.unwrap().size, 1000);
        let before = store.counts().snapshot();
        assert_eq!(
            before,
            ReadTraffic {
                requests: 2,
                bytes: 100
            }
        );
        let got = store.get_ranges(&path, &[0..5, 500..510]).await.unwrap();
        assert_eq!((got[0].len(), got[1].len()), (5, 10));
        let counts = store.counts();
        assert_eq!(counts.get_ranges_calls(), 1);
        assert_eq!(counts.heads(), 1);
        // One GET or two, as object_store coalesces the ranges.
        let sent = counts.snapshot().since(before);
        assert_eq!(sent.requests, counts.gets() - 1);
        assert!((1..=2).contains(&sent.requests), "{sent:?}");
        assert!((15..=510).contains(&sent.bytes), "{sent:?}");
        let recorded = store.recorded_ranges();
        assert_eq!(recorded.len(), 3, "{recorded:?}");
        assert_eq!(recorded[0], std::slice::from_ref(&(10..110)));
        assert_eq!(recorded[1], std::slice::from_ref(&(0..1000)));
        assert_eq!(recorded[2], [0..5, 500..510]);
    }

    /// The names `store` lists, sorted.
    async fn names(store: &impl ObjectStore) -> Vec<String> {
        use futures::TryStreamExt;
        let mut names: Vec<String> = store
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        names.sort();
        names
    }

    #[tokio::test]
    async fn writes_lists_copies_renames_and_deletes_reach_the_inner_store_uncounted() {
        let store = CountingStore::new(InMemory::new(), Duration::ZERO);
        let (a, b, c) = (Path::from("d/a"), Path::from("d/b"), Path::from("c"));
        store.put(&a, PutPayload::from_static(b"a")).await.unwrap();
        let mut upload = store.put_multipart(&b).await.unwrap();
        upload
            .put_part(PutPayload::from_static(b"b"))
            .await
            .unwrap();
        upload.complete().await.unwrap();
        store.copy(&a, &c).await.unwrap();
        store.rename(&b, &Path::from("d/e")).await.unwrap();
        store.delete(&a).await.unwrap();
        assert_eq!(names(store.inner()).await, ["c", "d/e"]);
        assert_eq!(names(&store).await, ["c", "d/e"]);
        let top = store.list_with_delimiter(None).await.unwrap();
        assert_eq!(top.common_prefixes, [Path::from("d")]);
        assert_eq!(top.objects.len(), 1);
        assert_eq!(store.counts().snapshot(), ReadTraffic::default());
    }

    #[tokio::test]
    async fn a_transfer_rate_adds_the_time_of_a_ranges_bytes() {
        let store =
            CountingStore::new(InMemory::new(), Duration::ZERO).with_transfer_rate(Some(1_000_000));
        let path = Path::from("object");
        store
            .put(&path, PutPayload::from(vec![1u8; 50_000]))
            .await
            .unwrap();
        let started = Instant::now();
        store.get_range(&path, 0..50_000).await.unwrap();
        // 50 kB at 1 MB/s: 50 ms.
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(store.recorded_ranges().is_empty());
    }
}
