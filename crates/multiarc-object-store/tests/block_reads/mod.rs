//! The block-read checks every S3 server's tests run (`against_s3.rs` on
//! s3s-fs, `against_garage.rs` on Garage): a `CachedStore` answers each
//! read as the server itself does, over any client of any server.

#![allow(dead_code)]

use bytes::Bytes;
use multiarc_object_store::CachedStore;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload};
use std::ops::Range;

/// Writes `data` at `path` through `store`.
pub async fn put(store: &impl ObjectStore, path: &Path, data: &[u8]) {
    store
        .put(path, PutPayload::from(data.to_vec()))
        .await
        .expect("put");
}

/// The kind of an object_store error, for comparisons.
pub fn kind(e: &object_store::Error) -> &'static str {
    use object_store::Error as E;
    match e {
        E::Generic { .. } => "Generic",
        E::NotFound { .. } => "NotFound",
        E::NotSupported { .. } => "NotSupported",
        E::AlreadyExists { .. } => "AlreadyExists",
        E::Precondition { .. } => "Precondition",
        E::NotModified { .. } => "NotModified",
        E::PermissionDenied { .. } => "PermissionDenied",
        E::Unauthenticated { .. } => "Unauthenticated",
        _ => "other",
    }
}

/// `get_opts` with `range` through both stores: the same bytes and range,
/// or errors of the same kind.
pub async fn same_get(
    raw: &impl ObjectStore,
    cached: &impl ObjectStore,
    path: &Path,
    range: Option<GetRange>,
) {
    let options = GetOptions::new().with_range(range.clone());
    let want = match raw.get_opts(path, options.clone()).await {
        Ok(r) => Ok((r.range.clone(), r.bytes().await.expect("raw bytes"))),
        Err(e) => Err(kind(&e)),
    };
    let got = match cached.get_opts(path, options).await {
        Ok(r) => Ok((r.range.clone(), r.bytes().await.expect("cached bytes"))),
        Err(e) => Err(kind(&e)),
    };
    let summary = |r: &Result<(Range<u64>, Bytes), &str>| match r {
        Ok((range, bytes)) => format!("Ok({range:?}, {} bytes)", bytes.len()),
        Err(kind) => format!("Err({kind})"),
    };
    assert!(
        got == want,
        "range {range:?}: {} where the server gave {}",
        summary(&got),
        summary(&want)
    );
}

/// `data`, stored at `path` (read through `raw`, the server's own client),
/// read through `store` (blocks of `block` bytes): every `get_opts` range
/// (across and on block boundaries, past and at the end, empty, offsets,
/// suffixes, the whole object, and `random` ranges drawn from `seed`)
/// gives the server's bytes and range or an error of its kind; `get_range`,
/// `get_ranges` (overlapping, unordered, empty and out-of-bounds ranges)
/// and `head` agree with it; and, everything read once, a second whole
/// read fetches no block.
pub async fn reads_equal_the_objects_bytes<S: ObjectStore>(
    raw: &impl ObjectStore,
    store: &CachedStore<S>,
    path: &Path,
    data: &[u8],
    block: u64,
    random: usize,
    seed: u64,
) {
    let size = data.len() as u64;
    assert!(size > 10 * block, "the object spans at least ten blocks");
    let mut ranges: Vec<GetRange> = vec![
        GetRange::Bounded(0..1),
        GetRange::Bounded(0..block),
        GetRange::Bounded(block - 1..block + 1),
        GetRange::Bounded(3 * block + 7..7 * block - 5),
        GetRange::Bounded(size - 1..size),
        GetRange::Bounded(0..size),
        GetRange::Bounded(5..size + 1000), // past the end: cut at the end
        GetRange::Bounded(size..size + 1), // starts at the end: an error
        GetRange::Bounded(size + 10..size + 20),
        GetRange::Bounded(17..17), // empty: an error
        GetRange::Offset(2 * block + 3),
        GetRange::Offset(size),
        GetRange::Suffix(100),
    ];
    let mut x = seed;
    for _ in 0..random {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let start = (x >> 20) % size;
        let len = 1 + (x >> 40) % (3 * block);
        ranges.push(GetRange::Bounded(start..start + len));
    }
    for range in ranges {
        same_get(raw, store, path, Some(range)).await;
    }
    same_get(raw, store, path, None).await;

    // get_range and get_ranges (a range per block boundary, overlapping,
    // unordered, empty).
    assert_eq!(
        store.get_range(path, 100..5000).await.unwrap(),
        Bytes::from(data[100..5000].to_vec())
    );
    let ranges: Vec<Range<u64>> = vec![
        9 * block..size,
        0..10,
        5..block * 3,
        block * 3..block * 3,
        2 * block - 1..2 * block + 1,
        0..size,
    ];
    let got = store.get_ranges(path, &ranges).await.unwrap();
    for (r, bytes) in ranges.iter().zip(&got) {
        assert_eq!(bytes, &data[r.start as usize..r.end as usize], "{r:?}");
    }
    assert!(store.get_ranges(path, &[0..size + 1, 0..1]).await.is_err());

    // head: the server's metadata.
    let (want, got) = (
        raw.head(path).await.unwrap(),
        store.head(path).await.unwrap(),
    );
    assert_eq!((got.size, got.e_tag), (want.size, want.e_tag));

    // Every byte was read: a second whole read is all hits.
    let before = store.stats();
    let whole = store.get(path).await.unwrap().bytes().await.unwrap();
    assert!(whole == data, "the whole object, read again, differs");
    let after = store.stats();
    assert_eq!(after.block_requests, before.block_requests, "{after:?}");
    assert!(after.memory_hits > before.memory_hits, "{after:?}");
}
