//! `CachedStore` against a real S3 server (s3s-fs, in-process on
//! 127.0.0.1) through object_store's `AmazonS3` client.

mod block_reads;
mod support;

use block_reads::{kind, put, same_get};
use futures::TryStreamExt;
use multiarc_object_store::CachedStore;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use support::{pattern, s3_client, start_server, CountingStore, S3Server};

const BLOCK: u64 = 4096;

type Counted = CountingStore<AmazonS3>;

/// A cached store with 4 KiB blocks over a counting client of `server`.
fn cached(
    server: &S3Server,
    latency: Duration,
    configure: impl FnOnce(
        multiarc_object_store::Builder<Counted>,
    ) -> multiarc_object_store::Builder<Counted>,
) -> CachedStore<Counted> {
    let counted = CountingStore::new(s3_client(server), latency);
    configure(
        CachedStore::builder(counted)
            .max_bytes(64 << 20)
            .block_size(BLOCK),
    )
    .build()
    .expect("a cached store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_reads_equal_the_objects_bytes() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let store = cached(&server, Duration::ZERO, |b| b);
    let size = 10 * BLOCK + 123;
    let data = pattern(size as usize, 1);
    let path = Path::from("data/object.bin");
    put(&raw, &path, &data).await;
    put(&raw, &Path::from("data/empty"), &[]).await;
    block_reads::reads_equal_the_objects_bytes(&raw, &store, &path, &data, BLOCK, 40, 12345).await;

    // A suffix longer than the object: S3 (and object_store's own
    // `GetRange::as_range`) give the whole object; s3s-fs answers an error.
    let whole = store
        .get_opts(
            &path,
            GetOptions::new().with_range(Some(GetRange::Suffix(size + 5))),
        )
        .await
        .unwrap();
    assert_eq!(whole.range, 0..size);
    assert!(whole.bytes().await.unwrap() == data);
    same_get(&raw, &store, &Path::from("data/empty"), None).await;
    same_get(
        &raw,
        &store,
        &Path::from("data/empty"),
        Some(GetRange::Bounded(0..1)),
    )
    .await;

    // Every byte read twice over: the second pass sends no GET.
    let before = store.inner().counts().gets();
    same_get(&raw, &store, &path, None).await;
    assert_eq!(store.inner().counts().gets(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_of_a_block_make_one_request() {
    let server = start_server().await;
    let raw = s3_client(&server);
    // Latency keeps the first fetch in flight while the others arrive.
    let store = Arc::new(cached(&server, Duration::from_millis(200), |b| b));
    let data = pattern(4 * BLOCK as usize, 2);
    let path = Path::from("hot");
    put(&raw, &path, &data).await;
    store.head(&path).await.unwrap(); // metadata cached: only block GETs follow
    let readers: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            let path = path.clone();
            tokio::spawn(async move { store.get_range(&path, 10..BLOCK - 10).await })
        })
        .collect();
    for r in readers {
        assert_eq!(r.await.unwrap().unwrap(), &data[10..BLOCK as usize - 10]);
    }
    assert_eq!(store.inner().counts().gets(), 1, "{:?}", store.stats());
    let stats = store.stats();
    assert_eq!(stats.block_requests, 1);
    assert_eq!(
        stats.single_flight_waits + stats.memory_hits,
        15,
        "{stats:?}"
    );
    assert!(stats.single_flight_waits > 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_dropped_during_its_fetch_leaves_no_one_waiting() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let store = Arc::new(cached(&server, Duration::from_millis(300), |b| b));
    let data = pattern(2 * BLOCK as usize, 8);
    let path = Path::from("dropped");
    put(&raw, &path, &data).await;
    store.head(&path).await.unwrap();
    let reader = |store: &Arc<CachedStore<Counted>>| {
        let (store, path) = (Arc::clone(store), path.clone());
        tokio::spawn(async move { store.get_range(&path, 0..2 * BLOCK).await })
    };
    // The first reader runs the load; the second waits for it; the first
    // is dropped while its GET is in flight.
    let first = reader(&store);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = reader(&store);
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.abort();
    let got = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the waiting reader took the load over")
        .unwrap()
        .unwrap();
    assert_eq!(got, data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_of_cold_metadata_make_one_head() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let store = Arc::new(cached(&server, Duration::from_millis(200), |b| b));
    let path = Path::from("cold");
    put(&raw, &path, &pattern(100, 3)).await;
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            let path = path.clone();
            tokio::spawn(async move { store.head(&path).await.map(|m| m.size) })
        })
        .collect();
    for r in readers {
        assert_eq!(r.await.unwrap().unwrap(), 100);
    }
    assert_eq!(store.inner().counts().heads(), 1);
    assert_eq!(store.stats().metadata_waits, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adjacent_missing_blocks_come_in_one_request() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let store = cached(&server, Duration::ZERO, |b| b.max_fetch_bytes(4 * BLOCK));
    let data = pattern(20 * BLOCK as usize, 4);
    let path = Path::from("scan");
    put(&raw, &path, &data).await;
    let counts = store.inner().counts();
    // Blocks 1..4: one GET.
    let got = store
        .get_range(&path, BLOCK + 1..4 * BLOCK - 1)
        .await
        .unwrap();
    assert_eq!(got, &data[BLOCK as usize + 1..4 * BLOCK as usize - 1]);
    assert_eq!(counts.gets(), 1);
    // Blocks 0..10, of which 1..4 cached: block 0, then 4..10 in runs of
    // at most 4 blocks (4..8, 8..10): three GETs.
    let got = store.get_range(&path, 0..10 * BLOCK).await.unwrap();
    assert_eq!(got, &data[..10 * BLOCK as usize]);
    assert_eq!(counts.gets(), 4);
    let stats = store.stats();
    assert_eq!(stats.block_requests, 4);
    assert_eq!(stats.blocks_fetched, 3 + 1 + 6);
    assert_eq!(stats.coalesced_requests, 3, "{stats:?}");
    assert_eq!(stats.coalesced_blocks, 2 + 3 + 1, "{stats:?}");
    assert_eq!(stats.store_bytes, 10 * BLOCK);
    // get_ranges over cached and missing blocks: one GET for 12..14.
    let got = store
        .get_ranges(
            &path,
            &[5..6, 12 * BLOCK..14 * BLOCK, 3 * BLOCK..3 * BLOCK + 2],
        )
        .await
        .unwrap();
    assert_eq!(got[1], &data[12 * BLOCK as usize..14 * BLOCK as usize]);
    assert_eq!(counts.gets(), 5);
}

/// Reads of `path` must always be one whole version of `versions`.
fn which_version(got: &[u8], versions: &[&[u8]]) -> usize {
    versions
        .iter()
        .position(|v| *v == got)
        .unwrap_or_else(|| panic!("a read returned bytes of no single version"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_object_is_read_whole_old_or_whole_new() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let ttl = Duration::from_millis(300);
    let store = cached(&server, Duration::ZERO, |b| b.metadata_ttl(ttl));
    let size = 8 * BLOCK as usize;
    let (v1, v2) = (pattern(size, 10), pattern(size, 11));
    let path = Path::from("table/part-0");
    put(&raw, &path, &v1).await;
    // Half of v1 cached, then v2 written behind the cache's back.
    assert_eq!(
        store.get_range(&path, 0..size as u64 / 2).await.unwrap(),
        &v1[..size / 2]
    );
    put(&raw, &path, &v2).await;
    // Within the TTL: the cached half is v1, the rest must come from v1
    // too, which the store no longer has: the read starts again, on v2.
    let got = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(which_version(&got, &[&v1, &v2]), 1);
    assert!(store.stats().version_changes >= 1);
    // A read of the cached half alone may still be v1 within the TTL; after
    // it, v2.
    let got = store.get_range(&path, 0..size as u64 / 2).await.unwrap();
    which_version(&got, &[&v1[..size / 2], &v2[..size / 2]]);
    tokio::time::sleep(ttl).await;
    let got = store.get_range(&path, 0..size as u64 / 2).await.unwrap();
    assert_eq!(got, &v2[..size / 2]);

    // Readers racing a writer: every read is one whole version. The
    // versions differ in size: s3s-fs reads a GET's body and its ETag
    // separately (the file, then its metadata file), so a GET racing a PUT
    // can pair one version's bytes with another's ETag, which no client
    // can see; with sizes that differ, the size in the response
    // (Content-Range) tells them apart. A real S3 is atomic here.
    let versions: Vec<Vec<u8>> = (0..4)
        .map(|i| pattern(size + 1000 - 100 * i, 20 + i as u64))
        .collect();
    let store = Arc::new(cached(&server, Duration::ZERO, |b| {
        b.metadata_ttl(Duration::from_millis(20))
    }));
    put(&raw, &path, &versions[0]).await;
    let writer = {
        let raw = s3_client(&server);
        let (path, versions) = (path.clone(), versions.clone());
        tokio::spawn(async move {
            for v in versions.iter().cycle().take(12) {
                put(&raw, &path, v).await;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    };
    let mut readers = Vec::new();
    for i in 0..4u64 {
        let (store, path, versions) = (Arc::clone(&store), path.clone(), versions.clone());
        readers.push(tokio::spawn(async move {
            let mut whole = 0;
            for j in 0..15u64 {
                let start = ((i * 7 + j * 3) % 8) * BLOCK;
                let end = start + 3 * BLOCK;
                match store.get_range(&path, start..end).await {
                    Ok(got) => {
                        let parts: Vec<&[u8]> = versions
                            .iter()
                            .map(|v| &v[start as usize..(end as usize).min(v.len())])
                            .collect();
                        which_version(&got, &parts);
                        whole += 1;
                    }
                    // Changed three times in a row under one read: allowed,
                    // as an error, never as mixed bytes.
                    Err(object_store::Error::Precondition { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            whole
        }));
    }
    writer.await.unwrap();
    let mut whole = 0;
    for r in readers {
        whole += r.await.unwrap();
    }
    assert!(whole > 0, "no read completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_shrinks_gives_an_error_not_short_bytes() {
    let server = start_server().await;
    let raw = s3_client(&server);
    // Metadata trusted forever: only the block fetches can notice.
    let store = cached(&server, Duration::ZERO, |b| b.metadata_forever());
    let path = Path::from("shrinks");
    let long = pattern(6 * BLOCK as usize, 5);
    put(&raw, &path, &long).await;
    assert_eq!(
        store.get_range(&path, 0..BLOCK).await.unwrap(),
        &long[..BLOCK as usize]
    );
    let short = pattern(2 * BLOCK as usize, 6);
    put(&raw, &path, &short).await;
    // Blocks 4..6 no longer exist: an error (the object is 2 blocks now).
    let err = store
        .get_range(&path, 4 * BLOCK..6 * BLOCK)
        .await
        .unwrap_err();
    assert_eq!(kind(&err), "Generic", "{err}");
    // And the next read sees the new version.
    assert_eq!(
        store.get(&path).await.unwrap().bytes().await.unwrap(),
        short
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_store_invalidate_the_object() {
    let server = start_server().await;
    // Metadata trusted forever: only the invalidation can show new data.
    let store = cached(&server, Duration::ZERO, |b| b.metadata_forever());
    let (a, b, c) = (Path::from("w/a"), Path::from("w/b"), Path::from("w/c"));
    let read = |p: &Path| {
        let (store, p) = (&store, p.clone());
        async move { store.get(&p).await?.bytes().await }
    };
    let v: Vec<Vec<u8>> = (0..6)
        .map(|i| pattern(3 * BLOCK as usize + 10, 30 + i))
        .collect();
    put(&store, &a, &v[0]).await;
    assert_eq!(read(&a).await.unwrap(), v[0]);
    put(&store, &a, &v[1]).await;
    assert_eq!(read(&a).await.unwrap(), v[1]);
    // copy onto a cached object
    put(&store, &b, &v[2]).await;
    assert_eq!(read(&b).await.unwrap(), v[2]);
    store.copy(&a, &b).await.unwrap();
    assert_eq!(read(&b).await.unwrap(), v[1]);
    // rename onto a cached object, and away from one
    put(&store, &c, &v[3]).await;
    assert_eq!(read(&c).await.unwrap(), v[3]);
    store.rename(&b, &c).await.unwrap();
    assert_eq!(read(&c).await.unwrap(), v[1]);
    assert_eq!(kind(&read(&b).await.unwrap_err()), "NotFound");
    // multipart
    let upload = store.put_multipart(&a).await.unwrap();
    let mut writer = WriteMultipart::new(upload);
    writer.write(&v[4]);
    writer.finish().await.unwrap();
    assert_eq!(read(&a).await.unwrap(), v[4]);
    // delete
    store.delete(&a).await.unwrap();
    assert_eq!(kind(&read(&a).await.unwrap_err()), "NotFound");
    assert_eq!(kind(&store.head(&a).await.unwrap_err()), "NotFound");
    // list passes through
    let listed: Vec<_> = store
        .list(Some(&Path::from("w")))
        .try_collect()
        .await
        .unwrap();
    let names: Vec<String> = listed.iter().map(|m| m.location.to_string()).collect();
    assert_eq!(names, vec!["w/c".to_string()]);
    assert!(store.stats().invalidations >= 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_their_kind() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let store = cached(&server, Duration::ZERO, |b| b);
    let path = Path::from("e/x");
    put(&raw, &path, &pattern(1000, 7)).await;
    let missing = Path::from("e/missing");
    assert_eq!(kind(&store.get(&missing).await.unwrap_err()), "NotFound");
    assert_eq!(kind(&store.head(&missing).await.unwrap_err()), "NotFound");
    assert_eq!(
        kind(&store.get_range(&missing, 0..1).await.unwrap_err()),
        "NotFound"
    );
    assert_eq!(
        kind(&store.get_ranges(&missing, &[0..1, 2..3]).await.unwrap_err()),
        "NotFound"
    );
    let etag = raw.head(&path).await.unwrap().e_tag.unwrap();
    let if_match = GetOptions::new().with_if_match(Some("\"not-the-etag\""));
    assert_eq!(
        kind(&store.get_opts(&path, if_match).await.unwrap_err()),
        "Precondition"
    );
    let if_none_match = GetOptions::new().with_if_none_match(Some(etag.clone()));
    assert_eq!(
        kind(&store.get_opts(&path, if_none_match).await.unwrap_err()),
        "NotModified"
    );
    let ok = GetOptions::new().with_if_match(Some(etag));
    assert_eq!(
        store
            .get_opts(&path, ok)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .len(),
        1000
    );

    // A missing bucket, bad credentials, an unreachable endpoint: one
    // error each, of the raw client's kind.
    let cases = [
        (
            server.endpoint.clone(),
            "no-such-bucket",
            support::ACCESS_KEY,
            support::SECRET_KEY,
        ),
        (
            server.endpoint.clone(),
            support::BUCKET,
            support::ACCESS_KEY,
            "wrong-secret",
        ),
        (
            "http://127.0.0.1:9".to_string(),
            support::BUCKET,
            support::ACCESS_KEY,
            support::SECRET_KEY,
        ),
    ];
    for (endpoint, bucket, access, secret) in cases {
        let raw = support::s3_client_with(&endpoint, bucket, access, secret);
        let want = kind(&raw.get(&path).await.unwrap_err());
        let store =
            CachedStore::builder(support::s3_client_with(&endpoint, bucket, access, secret))
                .max_bytes(1 << 20)
                .build()
                .unwrap();
        let got = store.get(&path).await.unwrap_err();
        assert_eq!(kind(&got), want, "{endpoint} {bucket} {secret}: {got}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_l2_serves_blocks_after_a_restart_and_never_a_changed_objects() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let dir = tempfile::tempdir().unwrap();
    let l2 = dir.path().join("l2");
    let with_l2 = |b: multiarc_object_store::Builder<Counted>| {
        b.l2(l2.clone(), 64 << 20)
            .configure_cache(|c| c.inline_eviction(true))
    };
    let (same, changed) = (Path::from("l2/same"), Path::from("l2/changed"));
    let size = 12 * BLOCK as usize + 99;
    let (s1, c1, c2) = (pattern(size, 40), pattern(size, 41), pattern(size, 42));
    put(&raw, &same, &s1).await;
    put(&raw, &changed, &c1).await;
    {
        let store = cached(&server, Duration::ZERO, with_l2);
        for p in [&same, &changed] {
            store.get(p).await.unwrap().bytes().await.unwrap();
        }
        store.cache().l2_feed();
        assert!(store.cache().l2_contains(&key_of(&store, &same, 0).await));
    }
    // While the node is down, one object is rewritten (same size).
    put(&raw, &changed, &c2).await;
    let store = cached(&server, Duration::ZERO, with_l2);
    store.cache().l2_wait_rebuild();
    let got = store.get(&same).await.unwrap().bytes().await.unwrap();
    assert_eq!(got, s1);
    assert_eq!(store.inner().counts().gets(), 0, "{:?}", store.stats());
    assert_eq!(store.stats().l2_hits, 13, "{:?}", store.stats());
    let got = store.get(&changed).await.unwrap().bytes().await.unwrap();
    assert_eq!(got, c2);
    assert_eq!(store.inner().counts().gets(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_dropped_with_an_abandoned_head_releases_its_l2() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let dir = tempfile::tempdir().unwrap();
    let l2 = dir.path().join("l2");
    let path = Path::from("abandoned");
    put(&raw, &path, &pattern(100, 9)).await;
    let store = Arc::new(cached(&server, Duration::from_millis(300), |b| {
        b.l2(l2.clone(), 16 << 20)
    }));
    let head = {
        let (store, path) = (Arc::clone(&store), path.clone());
        tokio::spawn(async move { store.head(&path).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    head.abort();
    let _ = head.await;
    drop(store);
    // The abandoned HEAD's shared fetch holds no part of the store: the
    // cache (and the L2 file's lock) went with it.
    let again = cached(&server, Duration::ZERO, |b| b.l2(l2.clone(), 16 << 20));
    assert_eq!(again.head(&path).await.unwrap().size, 100);
}

/// A hot object read between repeated scans of an object four times the
/// size of memory that fit in the L2 (the object benchmark's Parquet
/// workload, in whole-object reads); checks that the scans were read back from the L2.
/// Returns how many of the hot object's blocks memory holds after the last
/// scan, and the store's figures.
async fn hot_blocks_after_repeated_scans(
    store: &CachedStore<Counted>,
    hot: &Path,
    scan: &Path,
) -> (usize, multiarc_object_store::CachedStoreStats) {
    let read = |path: &Path| {
        let path = path.clone();
        async move { store.get(&path).await.unwrap().bytes().await.unwrap() }
    };
    for _ in 0..4 {
        read(hot).await;
    }
    for _ in 0..6 {
        read(scan).await;
        for _ in 0..4 {
            read(hot).await;
        }
    }
    read(scan).await;
    let mut kept = 0;
    for block in 0..16 {
        kept += usize::from(store.cache().contains(&key_of(store, hot, block).await));
    }
    let stats = store.stats();
    assert!(
        stats.l2_hits >= 256,
        "setup: the repeated scans are read back from the L2: {stats:?}"
    );
    (kept, stats)
}

/// With an L2, a block read back that memory has forgotten comes back as a
/// new block (`l2_readback_as_new`, on by default in `CachedStore`): scans
/// that repeat and fit in the L2 are served from it and leave the hot set
/// in memory. The cache's own default (a read-back is a ghost hit, as in
/// OpenZFS) lets each scan's blocks into the frequency list and pushes the
/// hot set out: checked too, so the test shows what the default changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_l2_repeated_scans_leave_the_hot_set_in_memory() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let dir = tempfile::tempdir().unwrap();
    let (hot, scan) = (Path::from("tier/hot"), Path::from("tier/scan"));
    put(&raw, &hot, &pattern(16 * BLOCK as usize, 50)).await;
    put(&raw, &scan, &pattern(256 * BLOCK as usize, 51)).await;
    // Memory of 64 blocks; eviction inline (no thread timing), and a feed
    // that copies what eviction reaches.
    let build = |name: &str, read_back_as_history: bool| {
        let l2 = dir.path().join(name);
        cached(&server, Duration::ZERO, |b| {
            b.max_bytes(64 * BLOCK)
                .readahead(0)
                .l2(l2, 16 << 20)
                .configure_cache(move |c| {
                    let c = c
                        .inline_eviction(true)
                        .sublists(1)
                        .l2_write_max(128 << 10)
                        .l2_headroom(2)
                        .l2_rebuild(false);
                    if read_back_as_history {
                        c.l2_readback_as_new(false)
                    } else {
                        c
                    }
                })
        })
    };
    let store = build("default", false);
    let (kept, stats) = hot_blocks_after_repeated_scans(&store, &hot, &scan).await;
    assert_eq!(
        kept, 16,
        "the hot object stays in memory through the scans: {stats:?}"
    );
    let history = build("history", true);
    let (kept, stats) = hot_blocks_after_repeated_scans(&history, &hot, &scan).await;
    assert!(
        kept < 16,
        "read back as history, the scans push hot blocks out ({kept} of 16 kept): {stats:?}"
    );
}

/// The objects of `hot_requests_after_a_scan_of_old_data`: name, blocks.
const HOT: (&str, u64) = ("passes/hot", 20);
const OTHER: (&str, u64) = ("passes/other", 60);
const SCAN: (&str, u64) = ("passes/scan", 40);

/// Reads every block of `object` (one `get_range` per block).
async fn read_blocks(store: &CachedStore<Counted>, (name, blocks): (&str, u64)) {
    let path = Path::from(name);
    for block in 0..blocks {
        store
            .get_range(&path, block * BLOCK..(block + 1) * BLOCK)
            .await
            .unwrap();
    }
}

/// What a query engine's passes do, at the scale of a test, in a memory of
/// 100 blocks: the hot queries' blocks (`HOT`, 20) and the others'
/// (`OTHER`, 60) read twice, so that both are frequent; `SCAN` (40) read
/// once, which fills memory; a warm pass that reads `HOT` and `OTHER`
/// again (every frequent block hit since the clock's last turn); the hot
/// blocks once more, just before the scan; then the scan again: blocks
/// memory still holds or remembers as ghosts, which all enter the
/// frequent list and take their room from it. Returns the GETs the hot
/// blocks cost after the scan.
async fn hot_requests_after_a_scan_of_old_data(store: &CachedStore<Counted>) -> u64 {
    for _ in 0..2 {
        read_blocks(store, HOT).await;
        read_blocks(store, OTHER).await;
    }
    read_blocks(store, SCAN).await;
    read_blocks(store, HOT).await;
    read_blocks(store, OTHER).await;
    read_blocks(store, HOT).await;
    read_blocks(store, SCAN).await;
    let before = store.inner().counts().gets();
    read_blocks(store, HOT).await;
    store.inner().counts().gets() - before
}

/// `CachedStore` sets the eager hit mode (exact ARC): after a warm pass
/// that read everything memory keeps, a scan of data read before takes
/// the other queries' blocks, not those the hot queries read just before
/// it. The block cache's default, the lazy mode (CAR's clocks), loses
/// them, checked too: every buffer was marked since the clock's last turn,
/// so it evicts in the order they entered the list, the hot ones first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_of_old_data_leaves_the_blocks_just_read() {
    let server = start_server().await;
    let raw = s3_client(&server);
    for (seed, (name, blocks)) in (60..).zip([HOT, OTHER, SCAN]) {
        let data = pattern((blocks * BLOCK) as usize, seed);
        put(&raw, &Path::from(name), &data).await;
    }
    // Memory of 100 blocks; eviction inline and one sublist (no thread
    // timing, one clock).
    let build = |lazy: bool| {
        cached(&server, Duration::ZERO, move |b| {
            b.max_bytes(100 * BLOCK)
                .readahead(0)
                .configure_cache(move |c| {
                    let c = c.inline_eviction(true).sublists(1).seed(1);
                    if lazy {
                        c.hit_mode(multiarc::HitMode::Lazy)
                    } else {
                        c
                    }
                })
        })
    };
    let store = build(false);
    let requests = hot_requests_after_a_scan_of_old_data(&store).await;
    assert_eq!(requests, 0, "{:?}", store.stats());
    let lazy = build(true);
    let requests = hot_requests_after_a_scan_of_old_data(&lazy).await;
    assert!(
        requests >= 10,
        "lazy hits lose the hot blocks ({requests} of {} fetched again)",
        HOT.1
    );
}

/// A small memory of large blocks (8 MiB of 64 KiB): the cache's default
/// overflow allowance (`c >> 8`, half a block) made nearly every insert
/// into the full cache wait for the evict thread; `CachedStore` sets one of
/// 16 blocks. A 32 MiB read then waits seldom (with the default shift:
/// 384 of its 512 inserts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_memory_of_large_blocks_seldom_waits_for_eviction() {
    let server = start_server().await;
    let raw = s3_client(&server);
    let path = Path::from("large-blocks");
    let data = pattern(32 << 20, 60);
    put(&raw, &path, &data).await;
    let store = cached(&server, Duration::ZERO, |b| {
        b.max_bytes(8 << 20).block_size(64 << 10).readahead(0)
    });
    let got = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert!(got == data, "the object's bytes");
    let s = store.cache().stats();
    assert!(s.inserts >= 512, "setup: every block inserted: {s:?}");
    assert!(
        s.overflow_waits < s.inserts / 4,
        "{} of {} inserts waited for the evict thread: {s:?}",
        s.overflow_waits,
        s.inserts
    );
}

/// Small reads of blocks that only the L2 holds read and verify that part
/// alone (`l2_part_hits`), send nothing to the store, and leave the block on
/// the L2 and out of memory, through `get_opts` (async, the cache's I/O
/// threads) and through `OpenObject::read_l2_part` (the mount's thread). A
/// block read in parts past half of it comes back into memory whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_reads_of_blocks_on_the_l2_read_only_their_part() {
    use multiarc_object_store::open_object::OpenObject;
    const LARGE: u64 = 256 << 10;
    let server = start_server().await;
    let raw = s3_client(&server);
    let dir = tempfile::tempdir().unwrap();
    let path = Path::from("parts/object");
    let data = pattern(32 * LARGE as usize, 70);
    put(&raw, &path, &data).await;
    // Memory of 4 blocks over an L2 of 32 MiB; each block read, then
    // flushed to the L2 (all that memory holds) before the next evicts it.
    let store = cached(&server, Duration::ZERO, |b| {
        b.max_bytes(4 * LARGE)
            .block_size(LARGE)
            .readahead(0)
            .l2(dir.path().join("l2"), 32 << 20)
            .configure_cache(|c| {
                c.inline_eviction(true)
                    .sublists(1)
                    .l2_write_max(4 << 20)
                    .l2_headroom(4)
                    .l2_rebuild(false)
            })
    });
    for b in 0..32 {
        let r = b * LARGE..(b + 1) * LARGE;
        let got = store.get_range(&path, r.clone()).await.unwrap();
        assert!(got == data[r.start as usize..r.end as usize], "block {b}");
        store.cache().l2_flush();
    }
    let meta = store.head(&path).await.unwrap();
    let on_l2_only: Vec<u64> = (0..32)
        .filter(|&b| {
            let key = store.block_key(&path, &meta, b);
            store.cache().l2_contains(&key) && !store.cache().contains(&key)
        })
        .collect();
    assert!(
        on_l2_only.len() >= 20,
        "setup: blocks on the L2 only: {on_l2_only:?}"
    );
    let gets = store.inner().counts().gets();
    let bytes_of = |r: &Range<u64>| data[r.start as usize..r.end as usize].to_vec();
    // Through get_opts: 8 KiB at three places of each of four blocks.
    let mut ranges = Vec::new();
    for &b in &on_l2_only[..4] {
        for at in [0, 20 << 10, LARGE - 8192] {
            ranges.push(b * LARGE + at..b * LARGE + at + 8192);
        }
    }
    let read = |r: Range<u64>| {
        let (store, path) = (&store, &path);
        async move {
            let got = store.get_opts(path, GetOptions::new().with_range(Some(r)));
            got.await.unwrap().bytes().await.unwrap().to_vec()
        }
    };
    for r in &ranges {
        assert_eq!(read(r.clone()).await, bytes_of(r), "{r:?}");
    }
    // Through an open object, on this thread.
    let open = OpenObject::new(&store, &meta, Duration::from_millis(100));
    let b = on_l2_only[4];
    let r = b * LARGE + 40_000..b * LARGE + 48_192;
    let got = open
        .read_l2_part(&store, r.clone())
        .expect("served from the L2");
    assert_eq!(got.to_vec(), bytes_of(&r));
    assert!(
        open.read_l2_part(&store, b * LARGE..b * LARGE + LARGE)
            .is_none(),
        "a read of the whole block is not a part"
    );
    let stats = store.stats();
    assert_eq!(stats.l2_part_hits, 13, "{stats:?}");
    assert_eq!(store.cache().stats().l2_part_hits, 13);
    assert_eq!(
        store.inner().counts().gets(),
        gets,
        "nothing from the store"
    );
    for &b in &on_l2_only[..5] {
        let key = store.block_key(&path, &meta, b);
        assert!(
            !store.cache().contains(&key),
            "block {b} stays out of memory"
        );
        assert!(store.cache().l2_contains(&key), "block {b} stays on the L2");
    }
    // One block read in parts past half of it: then read whole, into memory.
    let b = on_l2_only[5];
    for i in 0..17 {
        let r = b * LARGE + i * 8192..b * LARGE + (i + 1) * 8192;
        assert_eq!(read(r.clone()).await, bytes_of(&r));
    }
    assert_eq!(store.stats().l2_part_hits, 13 + 16);
    let key = store.block_key(&path, &meta, b);
    assert!(
        store.cache().contains(&key),
        "read much, it came back whole"
    );
    assert_eq!(
        store.inner().counts().gets(),
        gets,
        "nothing from the store"
    );
}

/// The key of `path`'s block `block` as `store` would cache it now.
async fn key_of(
    store: &CachedStore<Counted>,
    path: &Path,
    block: u64,
) -> multiarc_object_store::ObjectBlockKey {
    let meta = store.head(path).await.unwrap();
    store.block_key(path, &meta, block)
}

mod parquet_reader {
    //! The `parquet` crate's async reader over the cached store: footer,
    //! page index, selected columns and row groups, as a query engine asks.
    //! (`ParquetObjectReader` is deprecated in parquet 60 in favour of
    //! callers' own `AsyncFileReader`s; it is still the crate's reader over
    //! an `ObjectStore`, and the one the issue names.)
    #![allow(deprecated)]

    use super::*;
    use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
    use parquet::arrow::arrow_reader::ArrowReaderOptions;
    use parquet::arrow::async_reader::ParquetObjectReader;
    use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
    use parquet::file::metadata::PageIndexPolicy;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    /// A Parquet file of `rows` rows (id, value, name) in row groups of
    /// `group` rows, with page statistics (so a page index) and small pages.
    fn parquet_file(rows: i64, group: usize) -> Vec<u8> {
        let ids = Int64Array::from_iter_values(0..rows);
        let values = Float64Array::from_iter_values((0..rows).map(|i| (i as f64).sqrt()));
        let names =
            StringArray::from_iter_values((0..rows).map(|i| format!("name-{}", i * 7919 % 1000)));
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(ids) as ArrayRef),
            ("value", Arc::new(values) as ArrayRef),
            ("name", Arc::new(names) as ArrayRef),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group))
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(1000)
            .set_statistics_enabled(EnabledStatistics::Page)
            .build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        out
    }

    /// Reads `path` through `store`: columns `columns` of row groups
    /// `groups`, with the page index; returns the batches and whether the
    /// page index was loaded.
    async fn query(
        store: Arc<dyn ObjectStore>,
        path: &Path,
        columns: &[usize],
        groups: Option<Vec<usize>>,
    ) -> (Vec<RecordBatch>, bool) {
        let reader = ParquetObjectReader::new(store, path.clone());
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let builder = ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
            .await
            .unwrap();
        let has_index = builder.metadata().page_index().is_some();
        let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
        let mut builder = builder.with_projection(mask).with_batch_size(4096);
        if let Some(groups) = groups {
            builder = builder.with_row_groups(groups);
        }
        let batches = builder.build().unwrap().try_collect().await.unwrap();
        (batches, has_index)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parquet_reads_are_equal_with_and_without_the_cache() {
        let server = start_server().await;
        let raw: Arc<dyn ObjectStore> = Arc::new(s3_client(&server));
        let store = Arc::new(cached(&server, Duration::ZERO, |b| b.block_size(64 << 10)));
        let cached_dyn: Arc<dyn ObjectStore> = store.clone();
        let path = Path::from("tables/t/part-0.parquet");
        let file = parquet_file(200_000, 30_000);
        assert!(file.len() > 10 * (64 << 10), "{} bytes", file.len());
        raw.put(&path, PutPayload::from(file)).await.unwrap();

        let queries: Vec<(Vec<usize>, Option<Vec<usize>>)> = vec![
            (vec![0, 1, 2], None),
            (vec![1], None),
            (vec![2], Some(vec![1, 3])),
            (vec![0, 2], Some(vec![6])),
        ];
        for (columns, groups) in &queries {
            let want = query(raw.clone(), &path, columns, groups.clone()).await;
            let got = query(cached_dyn.clone(), &path, columns, groups.clone()).await;
            assert!(want.1 && got.1, "the page index was read");
            assert_eq!(got.0, want.0, "columns {columns:?} row groups {groups:?}");
            assert!(!got.0.is_empty());
        }
        // Everything was read once already: the same queries again send
        // no block request to the store.
        let before = store.inner().counts().gets();
        for (columns, groups) in &queries {
            let want = query(raw.clone(), &path, columns, groups.clone()).await;
            let got = query(cached_dyn.clone(), &path, columns, groups.clone()).await;
            assert_eq!(got.0, want.0);
        }
        assert_eq!(store.inner().counts().gets(), before, "{:?}", store.stats());
        assert!(store.stats().memory_hits > 0);
    }

    /// The block size's measurement (not a test: `cargo test -p
    /// multiarc-object-store --test against_s3 -- --ignored --nocapture
    /// measure_block_sizes`). Records the ranges parquet's reader asks for
    /// in four queries, then replays them through cached stores of several
    /// block sizes, over an in-memory store that takes 20 ms to the first
    /// byte and 100 MB/s after it (emulated; s3s-fs's own time per GET is
    /// printed first: it hashes the whole object on every GET).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement: run it by name"]
    async fn measure_block_sizes() {
        use std::time::Instant;
        let server = start_server().await;
        let raw = s3_client(&server);
        let path = Path::from("tables/t/part-0.parquet");
        let file = parquet_file(1_500_000, 200_000);
        let size = file.len() as u64;
        raw.put(&path, PutPayload::from(file.clone()))
            .await
            .unwrap();
        let memory = Arc::new(object_store::memory::InMemory::new());
        memory.put(&path, PutPayload::from(file)).await.unwrap();
        let started = Instant::now();
        for i in 0..20u64 {
            let start = i * size / 20;
            raw.get_range(&path, start..start + (64 << 10).min(size - start))
                .await
                .unwrap();
        }
        println!(
            "file {size} bytes; s3s-fs alone (this build): {:.2} ms per 64 KiB GET",
            started.elapsed().as_secs_f64() * 1000.0 / 20.0
        );
        let recorder =
            Arc::new(CountingStore::new(s3_client(&server), Duration::ZERO).recording_ranges());
        let queries: Vec<(Vec<usize>, Option<Vec<usize>>)> = vec![
            (vec![1], Some(vec![2])),
            (vec![2], Some(vec![1, 3])),
            (vec![0, 2], Some(vec![6])),
            (vec![0], None),
        ];
        for (columns, groups) in &queries {
            query(recorder.clone(), &path, columns, groups.clone()).await;
        }
        let calls = recorder.recorded_ranges();
        let asked: u64 = calls.iter().flatten().map(|r| r.end - r.start).sum();
        println!("{} reads asking {asked} bytes in all", calls.len());
        // Replayed over an in-memory store: s3s-fs hashes the whole object
        // on every GET, a cost that would swamp the emulated latency here.
        let emulated = || {
            CountingStore::new(Arc::clone(&memory), Duration::from_millis(20))
                .with_transfer_rate(Some(100_000_000))
        };
        async fn replay(store: &dyn ObjectStore, path: &Path, calls: &[Vec<Range<u64>>]) -> f64 {
            let started = Instant::now();
            for ranges in calls {
                store.get_ranges(path, ranges).await.unwrap();
            }
            started.elapsed().as_secs_f64() * 1000.0
        }
        let none = emulated();
        let ms = replay(&none, &path, &calls).await;
        println!("none: {ms:.0} ms per pass, {} GETs", none.counts().gets());
        println!("block size | cold ms | warm ms | GETs | bytes fetched");
        for block_size in [
            64u64 << 10,
            128 << 10,
            256 << 10,
            512 << 10,
            1 << 20,
            4 << 20,
        ] {
            let store = CachedStore::builder(emulated())
                .max_bytes(256 << 20)
                .block_size(block_size)
                .metadata_forever()
                // As measured before readahead existed (parquet's reads
                // are mostly not sequential anyway).
                .readahead(0)
                .build()
                .unwrap();
            let cold = replay(&store, &path, &calls).await;
            let warm = replay(&store, &path, &calls).await;
            let stats = store.stats();
            println!(
                "{:>7} KiB | {cold:>7.0} | {warm:>7.1} | {:>4} | {}",
                block_size >> 10,
                store.inner().counts().gets(),
                stats.store_bytes
            );
        }
    }
}
