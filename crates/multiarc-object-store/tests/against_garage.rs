//! `CachedStore` against Garage, an S3 server run in production (one node
//! on 127.0.0.1, started by the test; skipped where the `garage` binary is
//! absent, unless `CI` is set): Garage honours `If-Match`, the block-read
//! checks that `against_s3.rs` runs on s3s-fs hold against it (shared, in
//! `block_reads/`), and so do reduced versions of its rewrite checks. The
//! several-processes test is `several_nodes.rs`.

mod block_reads;
mod garage_common;

use block_reads::{kind, put};
use garage_common::{identify, start_garage, version_bytes, S3Target};
use multiarc_object_store::{Builder, CachedStore};
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use std::time::Duration;

const BLOCK: u64 = 4096;

/// A cached store with 4 KiB blocks over a client of `target`.
fn cached(
    target: &S3Target,
    configure: impl FnOnce(Builder<AmazonS3>) -> Builder<AmazonS3>,
) -> CachedStore<AmazonS3> {
    configure(
        CachedStore::builder(target.client())
            .max_bytes(64 << 20)
            .block_size(BLOCK),
    )
    .build()
    .expect("a cached store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garage_honours_if_match_and_a_cached_read_follows_a_rewrite() {
    let Some(garage) = start_garage(1) else {
        return;
    };
    let target = S3Target::of(&garage, 0);
    let raw = target.client();
    let path = Path::from("if-match/object");
    let size = 6 * BLOCK + 100;
    put(&raw, &path, &version_bytes(0, 1, 0..size)).await;
    let old = raw.head(&path).await.unwrap().e_tag.expect("an ETag");
    // Metadata trusted forever: only the block fetches can notice a change.
    let store = cached(&target, |b| b.metadata_forever());
    let got = store.get_range(&path, 0..BLOCK).await.unwrap();
    assert_eq!(identify(&got, 0, 0..BLOCK), Ok(1));

    // The same size, other bytes: only the ETag tells the versions apart.
    put(&raw, &path, &version_bytes(0, 2, 0..size)).await;
    let new = raw.head(&path).await.unwrap().e_tag.expect("an ETag");
    assert_ne!(old, new);
    for range in [None, Some(GetRange::Bounded(BLOCK..2 * BLOCK))] {
        let stale = GetOptions::new()
            .with_if_match(Some(old.clone()))
            .with_range(range.clone());
        let err = raw.get_opts(&path, stale).await.unwrap_err();
        assert_eq!(kind(&err), "Precondition", "range {range:?}: {err}");
        let fresh = GetOptions::new()
            .with_if_match(Some(new.clone()))
            .with_range(range.clone());
        let got = raw.get_opts(&path, fresh).await.unwrap();
        let range = got.range.clone();
        let bytes = got.bytes().await.unwrap();
        assert_eq!(identify(&bytes, 0, range), Ok(2));
    }

    // The cached store still names v1 and holds its block 0; blocks 1 and 2
    // are fetched on v1's ETag, which Garage refuses: the read starts
    // again on v2 and returns v2 whole.
    let before = store.stats();
    let got = store.get_range(&path, 10..3 * BLOCK).await.unwrap();
    assert_eq!(identify(&got, 0, 10..3 * BLOCK), Ok(2));
    let after = store.stats();
    assert!(after.version_changes > before.version_changes, "{after:?}");
    let whole = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(identify(&whole, 0, 0..size), Ok(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_reads_equal_garages_bytes() {
    let Some(garage) = start_garage(1) else {
        return;
    };
    let target = S3Target::of(&garage, 0);
    let raw = target.client();
    let store = cached(&target, |b| b);
    let size = 10 * BLOCK + 123;
    let path = Path::from("data/object.bin");
    let data = version_bytes(1, 1, 0..size);
    put(&raw, &path, &data).await;

    block_reads::reads_equal_the_objects_bytes(&raw, &store, &path, &data, BLOCK, 12, 2024).await;

    // Errors keep their kind: a missing object, bad credentials.
    let missing = Path::from("data/missing");
    assert_eq!(kind(&store.get(&missing).await.unwrap_err()), "NotFound");
    assert_eq!(
        kind(&store.get_range(&missing, 0..1).await.unwrap_err()),
        "NotFound"
    );
    let bad = S3Target {
        secret_access_key: "not-the-secret".into(),
        ..target.clone()
    };
    let want = kind(&bad.client().get(&path).await.unwrap_err());
    let got = cached(&bad, |b| b).get(&path).await.unwrap_err();
    assert_eq!(kind(&got), want, "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_object_is_read_whole_from_garage() {
    let Some(garage) = start_garage(1) else {
        return;
    };
    let target = S3Target::of(&garage, 0);
    let raw = target.client();
    let ttl = Duration::from_millis(300);
    let store = cached(&target, |b| b.metadata_ttl(ttl));
    let size = 8 * BLOCK;
    let path = Path::from("table/part-0");
    put(&raw, &path, &version_bytes(2, 1, 0..size)).await;
    // Half of v1 cached, then v2 written behind the cache's back.
    let half = 0..size / 2;
    let got = store.get_range(&path, half.clone()).await.unwrap();
    assert_eq!(identify(&got, 2, half.clone()), Ok(1));
    put(&raw, &path, &version_bytes(2, 2, 0..size)).await;
    // Within the TTL the other half must come from v1, which Garage no
    // longer serves: the read starts again, on v2.
    let got = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(identify(&got, 2, 0..size), Ok(2));
    tokio::time::sleep(ttl).await;
    let got = store.get_range(&path, half.clone()).await.unwrap();
    assert_eq!(identify(&got, 2, half), Ok(2));

    // Readers racing a writer, all versions of one size (Garage is atomic
    // per object, so unlike against s3s-fs the size need not differ):
    // every read is one whole version, or a Precondition error (changed
    // three times under one read).
    let store = Arc::new(cached(&target, |b| {
        b.metadata_ttl(Duration::from_millis(20))
    }));
    let writer = {
        let (raw, path) = (target.client(), path.clone());
        tokio::spawn(async move {
            for version in 3..15u16 {
                put(&raw, &path, &version_bytes(2, version, 0..size)).await;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    };
    let mut readers = Vec::new();
    for i in 0..4u64 {
        let (store, path) = (Arc::clone(&store), path.clone());
        readers.push(tokio::spawn(async move {
            let (mut whole, mut versions) = (0, std::collections::BTreeSet::new());
            for j in 0..15u64 {
                let start = ((i * 7 + j * 3) % 6) * BLOCK + 5;
                let range = start..start + 2 * BLOCK + 7;
                match store.get_range(&path, range.clone()).await {
                    Ok(got) => {
                        versions.insert(identify(&got, 2, range).unwrap_or_else(|e| panic!("{e}")));
                        whole += 1;
                    }
                    Err(object_store::Error::Precondition { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            (whole, versions)
        }));
    }
    writer.await.unwrap();
    let (mut whole, mut versions) = (0, std::collections::BTreeSet::new());
    for r in readers {
        let (w, v) = r.await.unwrap();
        whole += w;
        versions.extend(v);
    }
    assert!(whole > 0, "no read completed");
    eprintln!("{whole} racing reads, each one whole version; versions seen: {versions:?}");
}
