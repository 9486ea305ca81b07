//! `BucketFs` against a real S3 server (s3s-fs, in-process on
//! 127.0.0.1, through object_store's S3 client): the namespace from
//! listings, reads equal to the bucket, sequential uploads visible only
//! whole, the refusals, close-to-open consistency, store errors.

mod support;

use multiarc_bucket::{check_bucket, BucketConfig, BucketFs, Errno, Kind, S3Source, ROOT_INO};
use multiarc_object_store::CachedStore;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use std::ffi::OsStr;

/// The process that opens files in these tests.
const OWNER: u32 = 1;
use std::time::Duration;
use support::{pattern, s3_client, start_server, S3Server};

fn put(server: &S3Server, key: &str, data: Vec<u8>) {
    let client = s3_client(server);
    rt().block_on(client.put(&Path::from(key), PutPayload::from(data)))
        .expect("put");
}

fn get(server: &S3Server, key: &str) -> Option<Vec<u8>> {
    let client = s3_client(server);
    rt().block_on(async {
        match client.get(&Path::from(key)).await {
            Ok(r) => Some(r.bytes().await.expect("body").to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("get {key}: {e}"),
        }
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn mount(server: &S3Server, root: &str, config: BucketConfig) -> BucketFs<AmazonS3> {
    let store = CachedStore::builder(s3_client(server))
        .max_bytes(64 << 20)
        .block_size(64 << 10)
        .metadata_ttl(config.metadata_ttl)
        .build()
        .expect("a cached store");
    BucketFs::new(store, Path::from(root), config).expect("the filesystem")
}

/// [`mount`] of the whole bucket with the default configuration but its
/// metadata TTL.
fn mount_with_ttl(server: &S3Server, ttl: Duration) -> BucketFs<AmazonS3> {
    mount(
        server,
        "",
        BucketConfig {
            metadata_ttl: ttl,
            ..BucketConfig::default()
        },
    )
}

/// The ino of the path `a/b/c` from the root, looked up name by name.
fn walk(fs: &BucketFs<AmazonS3>, path: &str) -> Result<u64, Errno> {
    let mut ino = ROOT_INO;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        ino = fs.lookup(ino, OsStr::new(name))?.ino;
    }
    Ok(ino)
}

fn list(fs: &BucketFs<AmazonS3>, ino: u64) -> Vec<(String, Kind)> {
    let fh = fs.opendir(ino).expect("opendir");
    let entries = fs.readdir(fh, 0).expect("readdir");
    fs.release(fh).expect("releasedir");
    entries.into_iter().map(|e| (e.name, e.kind)).collect()
}

fn read_all(fs: &BucketFs<AmazonS3>, ino: u64, chunk: u32) -> Result<Vec<u8>, Errno> {
    let fh = fs.open(ino, libc::O_RDONLY, OWNER)?;
    let mut out = Vec::new();
    loop {
        let b = fs.read(fh, out.len() as u64, chunk)?;
        if b.is_empty() {
            break;
        }
        out.extend_from_slice(&b);
    }
    fs.release(fh)?;
    Ok(out)
}

fn write_new(fs: &BucketFs<AmazonS3>, dir: u64, name: &str, data: &[u8], chunk: usize) -> u64 {
    let (attr, fh) = fs.create(dir, OsStr::new(name), OWNER).expect("create");
    let mut off = 0;
    for piece in data.chunks(chunk.max(1)) {
        assert_eq!(fs.write(fh, off, piece).unwrap() as usize, piece.len());
        off += piece.len() as u64;
    }
    fs.flush(fh, OWNER).expect("flush uploads");
    fs.release(fh).expect("release");
    attr.ino
}

#[test]
fn the_namespace_comes_from_delimited_listings() {
    let server = start_server();
    for key in ["a.txt", "dir/b", "dir/sub/c", "deep/x/y/z", "top/in/f"] {
        put(&server, key, key.as_bytes().to_vec());
    }
    let fs = mount(&server, "", BucketConfig::default());
    let names = list(&fs, ROOT_INO);
    assert_eq!(
        names,
        vec![
            (".".into(), Kind::Directory),
            ("..".into(), Kind::Directory),
            ("deep".into(), Kind::Directory),
            ("dir".into(), Kind::Directory),
            ("top".into(), Kind::Directory),
            ("a.txt".into(), Kind::File),
        ]
    );
    let dir = walk(&fs, "dir").unwrap();
    let names: Vec<_> = list(&fs, dir).into_iter().skip(2).collect();
    assert_eq!(
        names,
        vec![("sub".into(), Kind::Directory), ("b".into(), Kind::File)]
    );
    let z = fs.getattr(walk(&fs, "deep/x/y/z").unwrap()).unwrap();
    assert_eq!((z.kind, z.size), (Kind::File, 10));
    assert_eq!(walk(&fs, "deep/nothing"), Err(Errno::ENOENT));
    assert_eq!(walk(&fs, "a.txt/x"), Err(Errno(libc::ENOTDIR)));
    // A prefix as the root.
    let fs = mount(&server, "top", BucketConfig::default());
    assert_eq!(list(&fs, ROOT_INO)[2..], [("in".into(), Kind::Directory)]);
    assert_eq!(
        read_all(&fs, walk(&fs, "in/f").unwrap(), 4096).unwrap(),
        b"top/in/f"
    );
}

#[test]
fn every_object_reads_back_equal_whole_and_in_ranges() {
    let server = start_server();
    let sizes = [
        0usize,
        1,
        4095,
        65536,
        65537,
        (256 << 10) + 3,
        (1 << 20) + 17,
    ];
    for (i, &len) in sizes.iter().enumerate() {
        put(&server, &format!("objs/o{i}"), pattern(len, i as u64));
    }
    let fs = mount(&server, "", BucketConfig::default());
    for (i, &len) in sizes.iter().enumerate() {
        let ino = walk(&fs, &format!("objs/o{i}")).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().size, len as u64);
        for chunk in [4096, 131072] {
            assert_eq!(
                read_all(&fs, ino, chunk).unwrap(),
                pattern(len, i as u64),
                "o{i} ({len} bytes) in {chunk}-byte reads"
            );
        }
        // Ranged reads, some across block edges, some past the end.
        let want = pattern(len, i as u64);
        let fh = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
        let mut x = 12345u64 + i as u64;
        for _ in 0..20 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) % (len as u64 + 10);
            let size = ((x >> 13) % 200_000) as u32;
            let got = fs.read(fh, off, size).unwrap();
            let start = (off as usize).min(len);
            let end = (off as usize + size as usize).min(len);
            assert_eq!(&got[..], &want[start..end], "o{i} at {off}+{size}");
        }
        fs.release(fh).unwrap();
    }
    let stats: std::collections::HashMap<_, _> = fs.stats().into_iter().collect();
    assert!(
        stats["memory_hits"] > 0 && stats["store_requests"] > 0,
        "{stats:?}"
    );
}

#[test]
fn a_new_file_appears_in_the_bucket_whole_and_only_when_closed() {
    let server = start_server();
    put(&server, "d/existing", b"old".to_vec());
    let fs = mount(&server, "", BucketConfig::default());
    let d = walk(&fs, "d").unwrap();
    let data = pattern(300_000, 7);
    let (attr, fh) = fs.create(d, OsStr::new("new"), OWNER).unwrap();
    assert_eq!(attr.size, 0);
    fs.write(fh, 0, &data[..100_000]).unwrap();
    fs.write(fh, 100_000, &data[100_000..200_000]).unwrap();
    // Visible here as a local file of its size so far; not in the store.
    assert_eq!(fs.getattr(attr.ino).unwrap().size, 200_000);
    assert!(list(&fs, d).iter().any(|(n, _)| n == "new"));
    assert_eq!(get(&server, "d/new"), None);
    assert_eq!(
        fs.open(attr.ino, libc::O_RDONLY, OWNER),
        Err(Errno(libc::EBUSY))
    );
    // Out of order: refused, and nothing changes.
    assert_eq!(fs.write(fh, 0, b"x"), Err(Errno::EINVAL));
    assert_eq!(fs.write(fh, 250_000, b"x"), Err(Errno::EINVAL));
    fs.write(fh, 200_000, &data[200_000..]).unwrap();
    fs.flush(fh, OWNER).unwrap();
    assert_eq!(get(&server, "d/new").as_deref(), Some(&data[..]));
    // After the upload, no more writes.
    assert_eq!(fs.write(fh, 300_000, b"x"), Err(Errno::EPERM));
    fs.release(fh).unwrap();
    assert_eq!(read_all(&fs, attr.ino, 65536).unwrap(), data);
    // An empty file too.
    write_new(&fs, d, "empty", b"", 1);
    assert_eq!(get(&server, "d/empty").as_deref(), Some(&b""[..]));
}

#[test]
fn a_close_by_another_process_does_not_upload() {
    let server = start_server();
    let fs = mount(&server, "", BucketConfig::default());
    let (_, fh) = fs.create(ROOT_INO, OsStr::new("f"), OWNER).unwrap();
    fs.write(fh, 0, b"first").unwrap();
    // A child that inherited the descriptor closes it (at exec or exit).
    fs.flush(fh, OWNER + 1).unwrap();
    assert_eq!(get(&server, "f"), None);
    fs.write(fh, 5, b" and second").unwrap();
    fs.flush(fh, OWNER).unwrap();
    assert_eq!(get(&server, "f").as_deref(), Some(&b"first and second"[..]));
    fs.release(fh).unwrap();
    // With no close by its owner (it died), the release uploads.
    let (_, fh) = fs.create(ROOT_INO, OsStr::new("g"), OWNER).unwrap();
    fs.write(fh, 0, b"g").unwrap();
    fs.flush(fh, OWNER + 1).unwrap();
    fs.release(fh).unwrap();
    assert_eq!(get(&server, "g").as_deref(), Some(&b"g"[..]));
}

#[test]
fn a_large_file_goes_up_in_parts() {
    let server = start_server();
    let config = BucketConfig {
        part_size: 5 << 20,
        ..BucketConfig::default()
    };
    let fs = mount(&server, "", config);
    let data = pattern((12 << 20) + 12345, 3);
    let ino = write_new(&fs, ROOT_INO, "big", &data, 128 << 10);
    assert_eq!(get(&server, "big").map(|b| b == data), Some(true));
    assert_eq!(fs.getattr(ino).unwrap().size, data.len() as u64);
    let stats: std::collections::HashMap<_, _> = fs.stats().into_iter().collect();
    assert_eq!(stats["bucket_uploads"], 1);
    assert_eq!(stats["bucket_upload_bytes"], data.len() as u64);
}

#[test]
fn overwrite_delete_and_changes_are_refused_without_their_flags() {
    let server = start_server();
    put(&server, "f", b"old".to_vec());
    let fs = mount(&server, "", BucketConfig::default());
    let f = walk(&fs, "f").unwrap();
    assert_eq!(
        fs.open(f, libc::O_WRONLY | libc::O_TRUNC, OWNER),
        Err(Errno::EPERM)
    );
    assert_eq!(fs.unlink(ROOT_INO, OsStr::new("f")), Err(Errno::EPERM));
    assert_eq!(fs.setattr(f, Some(0), false), Err(Errno::EPERM));
    assert_eq!(fs.setattr(f, None, true), Err(Errno::EPERM));
    assert_eq!(get(&server, "f").as_deref(), Some(&b"old"[..]));

    let ro = mount(
        &server,
        "",
        BucketConfig {
            read_only: true,
            ..BucketConfig::default()
        },
    );
    assert_eq!(
        ro.create(ROOT_INO, OsStr::new("g"), OWNER),
        Err(Errno::EROFS).map(|()| unreachable!())
    );
    assert_eq!(ro.mkdir(ROOT_INO, OsStr::new("g")), Err(Errno::EROFS));

    let rw = mount(
        &server,
        "",
        BucketConfig {
            allow_overwrite: true,
            allow_delete: true,
            ..BucketConfig::default()
        },
    );
    let f = walk(&rw, "f").unwrap();
    // Replacing means writing it whole again: without O_TRUNC, refused.
    assert_eq!(rw.open(f, libc::O_WRONLY, OWNER), Err(Errno::EPERM));
    let fh = rw.open(f, libc::O_WRONLY | libc::O_TRUNC, OWNER).unwrap();
    assert_eq!(rw.setattr(f, Some(0), false).unwrap().size, 0);
    rw.write(fh, 0, b"brand new").unwrap();
    // Until the close, the store has the old object.
    assert_eq!(get(&server, "f").as_deref(), Some(&b"old"[..]));
    rw.flush(fh, OWNER).unwrap();
    rw.release(fh).unwrap();
    assert_eq!(get(&server, "f").as_deref(), Some(&b"brand new"[..]));
    assert_eq!(read_all(&rw, f, 4096).unwrap(), b"brand new");
    rw.unlink(ROOT_INO, OsStr::new("f")).unwrap();
    assert_eq!(get(&server, "f"), None);
    assert_eq!(walk(&rw, "f"), Err(Errno::ENOENT));
}

#[test]
fn a_listing_is_reused_for_the_ttl_and_a_change_through_the_mount_is_listed_at_once() {
    let server = start_server();
    put(&server, "t/a", b"a".to_vec());
    let fs = mount(
        &server,
        "",
        BucketConfig {
            metadata_ttl: Duration::from_secs(2),
            allow_delete: true,
            ..BucketConfig::default()
        },
    );
    let stat = |fs: &BucketFs<AmazonS3>, name: &str| -> u64 {
        fs.stats().into_iter().find(|(n, _)| *n == name).unwrap().1
    };
    let names = |fs: &BucketFs<AmazonS3>, d: u64| -> Vec<String> {
        list(fs, d).into_iter().skip(2).map(|(n, _)| n).collect()
    };
    let t = walk(&fs, "t").unwrap();
    assert_eq!(names(&fs, t), ["a"]);
    let listed = stat(&fs, "bucket_listings");
    // Another node's object: within the TTL, the listing made before it.
    put(&server, "t/b", b"b".to_vec());
    assert_eq!(names(&fs, t), ["a"]);
    assert_eq!(stat(&fs, "bucket_listings"), listed);
    assert_eq!(stat(&fs, "bucket_listings_reused"), 1);
    // A file written through this mount is listed at once, and so is a
    // deletion (a new listing, which also finds the other node's object).
    write_new(&fs, t, "c", b"c", 1);
    assert_eq!(names(&fs, t), ["a", "b", "c"]);
    assert_eq!(stat(&fs, "bucket_listings"), listed + 1);
    fs.unlink(t, OsStr::new("a")).unwrap();
    assert_eq!(names(&fs, t), ["b", "c"]);
    // Past the TTL, the store is listed again.
    put(&server, "t/d", b"d".to_vec());
    assert_eq!(names(&fs, t), ["b", "c"]);
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(names(&fs, t), ["b", "c", "d"]);
    assert_eq!(stat(&fs, "bucket_listings"), listed + 3);
}

#[test]
fn mkdir_makes_a_local_directory_that_a_file_makes_real() {
    let server = start_server();
    let fs = mount(&server, "", BucketConfig::default());
    let d = fs.mkdir(ROOT_INO, OsStr::new("made")).unwrap().ino;
    assert_eq!(walk(&fs, "made").unwrap(), d);
    assert!(list(&fs, ROOT_INO).contains(&("made".into(), Kind::Directory)));
    write_new(&fs, d, "f", b"hello", 2);
    assert_eq!(get(&server, "made/f").as_deref(), Some(&b"hello"[..]));
    assert_eq!(
        fs.rmdir(ROOT_INO, OsStr::new("made")),
        Err(Errno(libc::ENOTEMPTY))
    );
    let e = fs.mkdir(ROOT_INO, OsStr::new("empty")).unwrap();
    fs.rmdir(ROOT_INO, OsStr::new("empty")).unwrap();
    fs.forget(e.ino, 1);
    assert_eq!(walk(&fs, "empty"), Err(Errno::ENOENT));
}

#[test]
fn a_rewritten_object_is_seen_at_the_next_open_after_the_ttl_never_mixed() {
    let server = start_server();
    let v1 = pattern(600_000, 1);
    let v2 = pattern(600_000, 2);
    put(&server, "obj", v1.clone());
    let ttl = Duration::from_millis(300);
    let fs = mount_with_ttl(&server, ttl);
    let ino = walk(&fs, "obj").unwrap();
    assert_eq!(read_all(&fs, ino, 131072).unwrap(), v1);
    // A handle opened on v1, with only its first block read.
    let old = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    assert_eq!(fs.read(old, 0, 1000).unwrap(), v1[..1000]);
    // Another writer replaces the object (same size: only the ETag tells).
    put(&server, "obj", v2.clone());
    std::thread::sleep(ttl + Duration::from_millis(100));
    assert_eq!(
        read_all(&fs, ino, 131072).unwrap(),
        v2,
        "the next open sees v2"
    );
    // The old handle serves v1 whole or fails with ESTALE, never v2's bytes.
    let mut off = 0u64;
    while off < v1.len() as u64 {
        match fs.read(old, off, 100_000) {
            Ok(b) => {
                assert_eq!(
                    &b[..],
                    &v1[off as usize..off as usize + b.len()],
                    "at {off}"
                );
                off += b.len() as u64;
            }
            Err(e) => {
                assert_eq!(e, Errno::ESTALE);
                break;
            }
        }
    }
    fs.release(old).unwrap();
}

#[test]
fn an_old_handle_reads_its_version_from_memory_after_a_replacement_or_fails_never_mixed() {
    let server = start_server();
    let size = 600_000usize;
    let v1 = pattern(size, 1);
    let v2 = pattern(size, 2);
    put(&server, "obj", v1.clone());
    let v1_meta = rt()
        .block_on(s3_client(&server).head(&Path::from("obj")))
        .unwrap();
    let ttl = Duration::from_millis(300);
    let fs = mount_with_ttl(&server, ttl);
    let ino = walk(&fs, "obj").unwrap();
    // A handle on v1 that read all of it: memory holds every block of v1.
    let old = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    let mut seen = Vec::new();
    while seen.len() < size {
        let b = fs.read(old, seen.len() as u64, 131072).unwrap();
        assert!(!b.is_empty());
        seen.extend_from_slice(&b);
    }
    assert!(seen == v1);
    // Another writer replaces the object (same size: only the ETag tells),
    // and this mount learns of it.
    put(&server, "obj", v2.clone());
    std::thread::sleep(ttl + Duration::from_millis(100));
    assert!(
        read_all(&fs, ino, 131072).unwrap() == v2,
        "the next open sees v2"
    );
    let hits = stat(&fs, "memory_hits");
    let requests = stat(&fs, "store_requests");
    // The old handle goes on reading v1, whole, from memory (64 KiB
    // blocks): within a block, across two, and all of it.
    let reads: [(u64, u32, u64); 4] = [
        (0, 8192, 1),
        (3 * 65536 + 100, 8192, 1),
        (65536 - 4000, 8192, 2),
        (0, 1 << 20, size.div_ceil(65536) as u64),
    ];
    for (off, len, _) in reads {
        let got = fs.read(old, off, len).unwrap();
        let end = (off as usize + len as usize).min(size);
        assert!(got[..] == v1[off as usize..end], "at {off}: not v1's bytes");
    }
    // Each block a memory hit, counted as the store counts them; nothing
    // asked of the store.
    let blocks: u64 = reads.iter().map(|r| r.2).sum();
    assert_eq!(stat(&fs, "memory_hits") - hits, blocks);
    assert_eq!(stat(&fs, "store_requests"), requests);
    // A block of v1 memory no longer holds: that read goes to the store,
    // which has v2: ESTALE, not v2's bytes. The blocks still held are
    // still served.
    let store = fs.store();
    assert!(store
        .cache()
        .remove(&store.block_key(&Path::from("obj"), &v1_meta, 5)));
    assert_eq!(fs.read(old, 5 * 65536 + 10, 8192), Err(Errno::ESTALE));
    assert!(fs.read(old, 10, 8192).unwrap()[..] == v1[10..10 + 8192]);
    fs.release(old).unwrap();
}

#[test]
fn with_a_metadata_ttl_of_zero_every_read_checks_the_version() {
    let server = start_server();
    let v1 = pattern(200_000, 1);
    let v2 = pattern(200_000, 2);
    put(&server, "obj", v1.clone());
    let fs = mount_with_ttl(&server, Duration::ZERO);
    let ino = walk(&fs, "obj").unwrap();
    let old = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    assert!(fs.read(old, 0, 8192).unwrap()[..] == v1[..8192]);
    let heads = stat(&fs, "metadata_requests");
    // Cached, and read again: a HEAD for the read.
    assert!(fs.read(old, 0, 8192).unwrap()[..] == v1[..8192]);
    assert!(stat(&fs, "metadata_requests") > heads);
    // Replaced: the next read of the old handle fails, though memory holds
    // the block.
    put(&server, "obj", v2.clone());
    assert_eq!(fs.read(old, 0, 8192), Err(Errno::ESTALE));
    fs.release(old).unwrap();
    assert!(read_all(&fs, ino, 65536).unwrap() == v2);
}

/// With a metadata TTL of zero each read checks the version with the
/// store, and the blocks memory holds then serve it counting one use per
/// block and handle, as with a TTL: a block read in two pieces, second
/// half first, is one use (two would promote it, read once, to MFU).
#[test]
fn with_a_metadata_ttl_of_zero_a_block_read_in_pieces_is_one_use() {
    let server = start_server();
    let data = pattern(1 << 20, 37);
    put(&server, "pieces", data.clone());
    let config = BucketConfig {
        metadata_ttl: Duration::ZERO,
        prefetch_bytes: 0,
        same_use_window: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    // 64 KiB blocks.
    let fs = mount_as_the_mount_does(&server, 64 << 20, config);
    let ino = walk(&fs, "pieces").unwrap();
    let halves: Vec<u64> = (0..4u64)
        .flat_map(|b| [b * 65536 + 32768, b * 65536])
        .collect();
    // Cold: each block's second half misses and loads it; its first half
    // is part of that use.
    read_at(&fs, ino, &data, &halves, 32768);
    let stats = fs.stats();
    assert_eq!(stat(&fs, "misses"), 4, "{stats:?}");
    assert_eq!(
        (stat(&fs, "hits"), stat(&fs, "same_use_hits")),
        (0, 4),
        "{stats:?}"
    );
    // Warm, another handle: one use (one hit) a block.
    let heads = stat(&fs, "metadata_requests");
    read_at(&fs, ino, &data, &halves, 32768);
    let stats = fs.stats();
    assert_eq!(
        (stat(&fs, "hits"), stat(&fs, "same_use_hits")),
        (4, 8),
        "{stats:?}"
    );
    assert!(
        stat(&fs, "metadata_requests") >= heads + 8,
        "a HEAD for every read: {stats:?}"
    );
    assert_eq!(stat(&fs, "block_requests"), 4, "{stats:?}");
}

#[test]
fn an_unreachable_store_is_eio_and_a_missing_bucket_one_clear_line() {
    let server = start_server();
    put(&server, "f", b"cached".to_vec());
    let ttl = Duration::from_millis(200);
    let fs = mount_with_ttl(&server, ttl);
    let f = walk(&fs, "f").unwrap();
    let fh = fs.open(f, libc::O_RDONLY, OWNER).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"cached"[..]);
    let missing = S3Source::parse("s3://no-such-bucket").unwrap();
    let client = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_bucket_name("no-such-bucket")
        .with_access_key_id(support::ACCESS_KEY)
        .with_secret_access_key(support::SECRET_KEY)
        .with_region("us-east-1")
        .with_allow_http(true)
        .build()
        .unwrap();
    let e = check_bucket(&client, &missing, Duration::from_secs(5)).unwrap_err();
    assert!(
        e.starts_with("s3://no-such-bucket: ") && !e.contains('\n'),
        "{e}"
    );
    let here = S3Source::parse(&format!("s3://{}", support::BUCKET)).unwrap();
    check_bucket(&s3_client(&server), &here, Duration::from_secs(5)).unwrap();
    put(&server, "other", b"later".to_vec());
    // A mount that checks the version at every read (TTL zero): its reads
    // go to the store, and fall back on the cache while it fails.
    let checking = mount_with_ttl(&server, Duration::ZERO);
    let f0 = walk(&checking, "f").unwrap();
    let fh0 = checking.open(f0, libc::O_RDONLY, OWNER).unwrap();
    assert_eq!(checking.read(fh0, 0, 100).unwrap(), b"cached"[..]);
    let mut server = server;
    server.stop();
    // The store is gone: cached blocks are still served (from memory, as
    // every read of them), anything else is EIO; also once the metadata's
    // TTL has passed, and by a new open.
    let hits = stat(&fs, "memory_hits");
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"cached"[..]);
    assert_eq!(walk(&fs, "other"), Err(Errno::EIO));
    std::thread::sleep(ttl + Duration::from_millis(50));
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"cached"[..]);
    let again = fs.open(f, libc::O_RDONLY, OWNER).unwrap();
    assert_eq!(fs.read(again, 2, 100).unwrap(), b"ched"[..]);
    fs.release(again).unwrap();
    let stats: std::collections::HashMap<_, _> = fs.stats().into_iter().collect();
    assert!(stats["bucket_store_errors"] >= 1, "{stats:?}");
    assert!(stats["bucket_stale_opens"] == 1, "{stats:?}");
    assert!(stats["memory_hits"] >= hits + 3, "{stats:?}");
    // The checking mount's read fails at the store, and is served from
    // the cache.
    assert_eq!(checking.read(fh0, 1, 100).unwrap(), b"ached"[..]);
    let stats: std::collections::HashMap<_, _> = checking.stats().into_iter().collect();
    assert!(stats["bucket_store_errors"] >= 1, "{stats:?}");
    assert!(stats["bucket_cached_reads_while_failing"] >= 1, "{stats:?}");
    checking.release(fh0).unwrap();
    // It comes back: so does the mount, by itself.
    server.restart();
    let other = walk(&fs, "other").unwrap();
    assert_eq!(read_all(&fs, other, 4096).unwrap(), b"later");
}

fn stat(fs: &BucketFs<AmazonS3>, name: &str) -> u64 {
    fs.stats()
        .into_iter()
        .find_map(|(k, v)| (k == name).then_some(v))
        .unwrap_or_else(|| panic!("no {name} in the statistics"))
}

#[test]
fn sequential_reads_prefetch_in_chunks_and_random_reads_do_not() {
    let server = start_server();
    let size = 6 << 20;
    let data = pattern(size, 9);
    put(&server, "seq", data.clone());
    put(&server, "rand", data.clone());
    let config = BucketConfig {
        prefetch_bytes: 2 << 20,
        prefetch_chunk: 512 << 10,
        ..BucketConfig::default()
    };
    let fs = mount(&server, "", config);
    let seq = walk(&fs, "seq").unwrap();
    assert!(read_all(&fs, seq, 128 << 10).unwrap() == data);
    // Chunks of 512 KiB: several GETs for each window of 2 MiB.
    let requests = stat(&fs, "bucket_prefetch_requests");
    assert!(requests >= 4, "{requests} prefetch requests");
    assert!(stat(&fs, "bucket_prefetch_bytes") >= 2 << 20);
    // Random reads: no prefetch.
    let rand = walk(&fs, "rand").unwrap();
    let fh = fs.open(rand, libc::O_RDONLY, OWNER).unwrap();
    for block in [40u64, 3, 77, 12, 60, 0, 25] {
        let at = block * 65536;
        let got = fs.read(fh, at, 8192).unwrap();
        assert!(got[..] == data[at as usize..at as usize + 8192]);
    }
    fs.release(fh).unwrap();
    assert_eq!(stat(&fs, "bucket_prefetch_requests"), requests);
}

#[test]
fn dense_random_reads_fetch_the_object_whole_and_sparse_runs_do_not() {
    let server = start_server();
    let size = 16 << 20;
    let data = pattern(size, 11);
    put(&server, "dense", data.clone());
    put(&server, "sparse", data.clone());
    put(&server, "large", pattern(size, 12));
    // A short prefetch window: the runs' prefetches stay in their regions.
    let config = BucketConfig {
        prefetch_bytes: 256 << 10,
        prefetch_chunk: 128 << 10,
        ..BucketConfig::default()
    };
    let fs = mount_as_the_mount_does(&server, 64 << 20, config);
    let check = |fh: u64, at: u64, len: u32| {
        let got = fs.read(fh, at, len).unwrap();
        assert!(
            got[..] == data[at as usize..at as usize + len as usize],
            "at {at}"
        );
    };
    // Runs of reads (column chunks) in every region: never dense.
    let sparse = walk(&fs, "sparse").unwrap();
    let fh = fs.open(sparse, libc::O_RDONLY, OWNER).unwrap();
    for region in 0..16u64 {
        let at = region << 20;
        for i in 0..3 {
            check(fh, at + i * 32768, 32768);
        }
    }
    fs.release(fh).unwrap();
    assert_eq!(stat(&fs, "bucket_dense_objects"), 0);
    let sparse_bytes = stat(&fs, "store_bytes");
    assert!(sparse_bytes < (size / 2) as u64, "{sparse_bytes}");
    // Random 8 KiB reads all over another one, from two handles: once a
    // quarter of its 16 regions saw one, the rest comes at once.
    let dense = walk(&fs, "dense").unwrap();
    let handles = [
        fs.open(dense, libc::O_RDONLY, OWNER).unwrap(),
        fs.open(dense, libc::O_RDONLY, OWNER).unwrap(),
    ];
    let mut x = 99u64;
    let mut reads = 0;
    while stat(&fs, "bucket_dense_objects") == 0 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = (x >> 20) % (size as u64 - 8192);
        check(handles[reads % 2], at, 8192);
        reads += 1;
        assert!(reads < 200, "not dense after {reads} random reads");
    }
    // Dense after about STREAMS + 4 reads: a random read counts once
    // nothing continued it.
    assert!(
        reads <= 40,
        "{reads} random reads before the object was dense"
    );
    // Every block is in memory soon, and later reads send nothing.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let before = stat(&fs, "store_requests");
        for i in 0..200u64 {
            check(handles[0], (i * 81_001) % (size as u64 - 8192), 8192);
        }
        if stat(&fs, "store_requests") == before {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "random reads still go to the store"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for fh in handles {
        fs.release(fh).unwrap();
    }
    // About the object once, not once per read.
    let dense_bytes = stat(&fs, "store_bytes") - sparse_bytes;
    assert!(dense_bytes <= size as u64 + (4 << 20), "{dense_bytes}");
    // Past the limit (half the memory cache by default; a mount sets
    // memory plus L2): random reads fetch only their own blocks.
    let small = mount_as_the_mount_does(&server, 16 << 20, BucketConfig::default());
    let large = walk(&small, "large").unwrap();
    let fh = small.open(large, libc::O_RDONLY, OWNER).unwrap();
    for i in 0..100u64 {
        small
            .read(fh, (i * 7_654_321) % (size as u64 - 8192), 8192)
            .unwrap();
    }
    small.release(fh).unwrap();
    assert_eq!(stat(&small, "bucket_dense_objects"), 0);
    assert!(stat(&small, "store_bytes") < 100 * 65536 + 65536);
}

/// `BucketFs` over a cached store set up as the mount sets it up: 64 KiB
/// blocks, `max_bytes` of memory, the config's metadata TTL, and the cached
/// store's own readahead off (the mount's prefetch does it).
fn mount_as_the_mount_does(
    server: &S3Server,
    max_bytes: u64,
    config: BucketConfig,
) -> BucketFs<AmazonS3> {
    let store = CachedStore::builder(s3_client(server))
        .max_bytes(max_bytes)
        .block_size(64 << 10)
        .metadata_ttl(config.metadata_ttl)
        .readahead(0)
        .build()
        .expect("a cached store");
    BucketFs::new(store, Path::from(""), config).expect("the filesystem")
}

#[test]
fn a_sequential_read_waits_for_the_prefetch_instead_of_fetching_again() {
    let server = start_server();
    let size = 8 << 20;
    let data = pattern(size, 13);
    put(&server, "seq", data.clone());
    let config = BucketConfig {
        prefetch_bytes: 2 << 20,
        prefetch_chunk: 512 << 10,
        // One worker, often busy: the reads must not outrun the prefetch
        // tasks' start. A long TTL: no metadata refresh in between.
        runtime_threads: 1,
        metadata_ttl: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    let fs = mount_as_the_mount_does(&server, 64 << 20, config);
    let seq = walk(&fs, "seq").unwrap();
    let read = 128 << 10;
    assert!(read_all(&fs, seq, read).unwrap() == data);
    // The first two reads fetch their own blocks (one GET each: 128 KiB is
    // two 64 KiB blocks); from the second on, everything past them is
    // prefetched, and every later read waits for the prefetch's GET.
    let own_gets = 2;
    let prefetches = stat(&fs, "bucket_prefetch_requests");
    let stats = fs.stats();
    assert!(
        prefetches >= (size as u64 - 2 * read as u64) / (512 << 10),
        "{prefetches} prefetches: {stats:?}"
    );
    assert_eq!(
        stat(&fs, "block_requests"),
        own_gets + prefetches,
        "{stats:?}"
    );
    // No byte fetched twice.
    assert_eq!(stat(&fs, "store_bytes"), size as u64);
    assert!(stat(&fs, "single_flight_waits") + stat(&fs, "memory_hits") > 0);
}

#[test]
fn a_sequential_read_of_what_memory_holds_prefetches_nothing_until_it_misses() {
    let server = start_server();
    let size = 8 << 20;
    let data = pattern(size, 17);
    put(&server, "cols", data.clone());
    let config = BucketConfig {
        prefetch_bytes: 2 << 20,
        prefetch_chunk: 512 << 10,
        metadata_ttl: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    let fs = mount_as_the_mount_does(&server, 64 << 20, config);
    let ino = walk(&fs, "cols").unwrap();
    let read = 128u64 << 10;
    // The first MiB cached by reads backwards: no run, no prefetch.
    let fh = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    for i in (0..8).rev() {
        let got = fs.read(fh, i * read, read as u32).unwrap();
        assert!(got[..] == data[(i * read) as usize..((i + 1) * read) as usize]);
    }
    fs.release(fh).unwrap();
    assert_eq!(stat(&fs, "bucket_prefetch_requests"), 0);
    let requests = stat(&fs, "block_requests");
    // Read again in order, as a query reads its columns: all from memory,
    // and nothing fetched past them.
    let fh = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    for i in 0..8 {
        let got = fs.read(fh, i * read, read as u32).unwrap();
        assert!(got[..] == data[(i * read) as usize..((i + 1) * read) as usize]);
    }
    let stats = fs.stats();
    assert_eq!(stat(&fs, "bucket_prefetch_requests"), 0, "{stats:?}");
    assert_eq!(stat(&fs, "block_requests"), requests, "{stats:?}");
    // The run goes on past them: its first read misses and fetches its
    // own blocks, and from the next one the window is prefetched.
    for i in 8..12 {
        let got = fs.read(fh, i * read, read as u32).unwrap();
        assert!(got[..] == data[(i * read) as usize..((i + 1) * read) as usize]);
    }
    fs.release(fh).unwrap();
    let stats = fs.stats();
    assert!(stat(&fs, "bucket_prefetch_requests") >= 2, "{stats:?}");
    assert!(stat(&fs, "bucket_prefetch_bytes") >= 1 << 20, "{stats:?}");
}

/// Reads `len` bytes at each of `offsets` through one handle of `ino`,
/// checking each against `data`.
fn read_at(fs: &BucketFs<AmazonS3>, ino: u64, data: &[u8], offsets: &[u64], len: u64) {
    let fh = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
    for &at in offsets {
        let got = fs.read(fh, at, len as u32).unwrap();
        let end = (at + len).min(data.len() as u64) as usize;
        assert!(got[..] == data[at as usize..end], "at {at}");
    }
    fs.release(fh).unwrap();
}

#[test]
fn a_block_read_in_several_reads_is_one_use_of_it() {
    let server = start_server();
    let size = 1 << 20;
    let data = pattern(size, 23);
    put(&server, "pieces", data.clone());
    let config = BucketConfig {
        metadata_ttl: Duration::from_secs(600),
        prefetch_bytes: 0,
        // A handle's reads of a block are one use for as long as the test
        // runs (62 ms by default: a loaded machine could pause a read).
        same_use_window: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    // 64 KiB blocks: 16 of them.
    let fs = mount_as_the_mount_does(&server, 64 << 20, config);
    let ino = walk(&fs, "pieces").unwrap();
    let read = 32u64 << 10;
    let in_order: Vec<u64> = (0..size as u64 / read).map(|i| i * read).collect();
    // Cold, 32 KiB at a time: each block missed once (its first read
    // fetches it whole), and its other read served from what that read
    // kept: no hit.
    read_at(&fs, ino, &data, &in_order, read);
    let stats = fs.stats();
    assert_eq!(
        (stat(&fs, "misses"), stat(&fs, "hits")),
        (16, 0),
        "{stats:?}"
    );
    // Warm: one lookup (one hit) a block.
    read_at(&fs, ino, &data, &in_order, read);
    assert_eq!(stat(&fs, "hits"), 16, "{:?}", fs.stats());
    // Reads that straddle blocks: each block still looked up once.
    let straddling: Vec<u64> = (0..20).map(|i| 1000 + i * 40_000).collect();
    read_at(&fs, ino, &data, &straddling, 40_000);
    let blocks = (1000 + 20 * 40_000 - 1) / 65536 + 1;
    assert_eq!(stat(&fs, "hits"), 16 + blocks, "{:?}", fs.stats());
    assert_eq!(stat(&fs, "same_use_hits"), 0, "{:?}", fs.stats());
    // Out of order (and small: such reads keep nothing): each looks its
    // block up, and a block the handle read already is part of that use:
    // blocks 0, 1, 3 count a hit each; the second reads of 1 and 0 none.
    read_at(&fs, ino, &data, &[0, 100_000, 70_000, 200_000, 0], 1000);
    let hits = 16 + blocks + 3;
    assert_eq!(stat(&fs, "hits"), hits, "{:?}", fs.stats());
    assert_eq!(stat(&fs, "same_use_hits"), 2, "{:?}", fs.stats());
    // Each block's second half, then its first (as the kernel's reads of
    // one handle may arrive): one use a block.
    let halves: Vec<u64> = (0..16u64)
        .flat_map(|b| [b * 65536 + read, b * 65536])
        .collect();
    read_at(&fs, ino, &data, &halves, read);
    let hits = hits + 16;
    assert_eq!(stat(&fs, "hits"), hits, "{:?}", fs.stats());
    assert_eq!(stat(&fs, "same_use_hits"), 2 + 16, "{:?}", fs.stats());
    // Small reads in order: the run's first keeps nothing, so its block is
    // looked up by the second read too (part of the same use); then once
    // a block.
    let small: Vec<u64> = (0..size as u64 / 8192).map(|i| i * 8192).collect();
    read_at(&fs, ino, &data, &small, 8192);
    assert_eq!(stat(&fs, "hits"), hits + 16, "{:?}", fs.stats());
    assert_eq!(stat(&fs, "same_use_hits"), 2 + 16 + 1, "{:?}", fs.stats());
    assert_eq!(stat(&fs, "misses"), 16, "{:?}", fs.stats());
    assert_eq!(
        stat(&fs, "bucket_kept_blocks"),
        0,
        "released handles keep nothing"
    );
    // Readers that keep a block each and stay open: at most an eighth of
    // memory's blocks are kept (64 MiB of 64 KiB blocks: 128).
    let handles: Vec<u64> = (0..200)
        .map(|_| {
            let fh = fs.open(ino, libc::O_RDONLY, OWNER).unwrap();
            let got = fs.read(fh, 0, read as u32).unwrap();
            assert!(got[..] == data[..read as usize]);
            fh
        })
        .collect();
    assert_eq!(stat(&fs, "bucket_kept_blocks"), 128);
    for fh in handles {
        fs.release(fh).unwrap();
    }
    assert_eq!(stat(&fs, "bucket_kept_blocks"), 0);
}

/// A hot file of 2 MiB and a scan file of 32 MiB (four times memory) in
/// the bucket, patterns of `seed`, and a mount of 8 MiB of memory that
/// prefetches in 256 KiB chunks and keeps metadata and uses for 10 min:
/// the mount, the hot file's ino and bytes, and the scan's.
fn hot_and_scan(server: &S3Server, seed: u64) -> (BucketFs<AmazonS3>, u64, Vec<u8>, u64, Vec<u8>) {
    let hot = pattern(2 << 20, seed);
    let scan = pattern(32 << 20, seed + 2);
    put(server, "hot", hot.clone());
    put(server, "scan", scan.clone());
    let config = BucketConfig {
        prefetch_bytes: 1 << 20,
        prefetch_chunk: 256 << 10,
        metadata_ttl: Duration::from_secs(600),
        same_use_window: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    let fs = mount_as_the_mount_does(server, 8 << 20, config);
    let (hot_ino, scan_ino) = (walk(&fs, "hot").unwrap(), walk(&fs, "scan").unwrap());
    (fs, hot_ino, hot, scan_ino, scan)
}

/// The bucket benchmark's hot query after a scan, at a small scale and memory only: a
/// file read by two queries (two handles; the first prefetched most of
/// it, so its blocks were read ahead) survives a scan of another file four
/// times the size of memory, whose blocks each handle reads in two pieces,
/// second half first (as the kernel's reads of one handle may arrive). The
/// hot file's blocks were used twice (promoted to MFU when eviction
/// reaches them, also those read ahead); the scan's once (its second
/// pieces are part of the first's use), so it passes through MRU.
#[test]
fn a_file_read_twice_stays_in_memory_through_a_scan_read_in_pieces() {
    let server = start_server();
    let (fs, hot_ino, hot, scan_ino, scan) = hot_and_scan(&server, 29);
    for _ in 0..2 {
        assert!(read_all(&fs, hot_ino, 128 << 10).unwrap() == hot);
    }
    assert!(stat(&fs, "read_ahead_inserts") > 0, "{:?}", fs.stats());
    let piece = 32u64 << 10;
    let pieces: Vec<u64> = (0..scan.len() as u64 / 65536)
        .flat_map(|b| [b * 65536 + piece, b * 65536])
        .collect();
    read_at(&fs, scan_ino, &scan, &pieces, piece);
    let requests = stat(&fs, "block_requests");
    assert!(read_all(&fs, hot_ino, 128 << 10).unwrap() == hot);
    let stats = fs.stats();
    assert_eq!(
        stat(&fs, "block_requests"),
        requests,
        "the hot file read from memory after the scan: {stats:?}"
    );
    assert!(
        stat(&fs, "mfu_bytes") <= (hot.len() as u64) + (1 << 20),
        "MFU holds the hot file, not the scan: {stats:?}"
    );
}

/// Reads `ino` whole through a handle that reads through the kernel's page
/// cache (as the FUSE adapter opens it), checking it against `data`.
/// Returns whether the open kept the kernel's pages.
fn read_through_pages(fs: &BucketFs<AmazonS3>, ino: u64, data: &[u8]) -> bool {
    let opened = fs.open_file(ino, libc::O_RDONLY, OWNER, true).unwrap();
    let mut at = 0;
    while at < data.len() {
        let got = fs.read(opened.fh, at as u64, 128 << 10).unwrap();
        assert!(got[..] == data[at..at + got.len()], "at {at}");
        at += got.len();
    }
    fs.release(opened.fh).unwrap();
    opened.keep_cache
}

/// The kernel serves a file's re-reads from its page cache, so the mount
/// sees each block once; an open that keeps those pages counts as one
/// more use of the blocks they were given. A file read once and opened
/// again (the kernel serving its reads) then survives a scan of another
/// file four times the size of memory, and once the kernel has dropped its
/// pages (reclaim), its reads are served from memory. Without the count the
/// hot file stays in MRU and the scan pushes it out. A file read through
/// (more than memory holds) is not counted again.
#[test]
fn an_open_that_keeps_the_pages_counts_a_use_of_what_they_hold() {
    let server = start_server();
    let (fs, hot_ino, hot, scan_ino, scan) = hot_and_scan(&server, 37);
    assert!(
        !read_through_pages(&fs, hot_ino, &hot),
        "a first open has no pages to keep"
    );
    assert_eq!(stat(&fs, "bucket_reopen_uses"), 0);
    // Opened again: the kernel's pages serve the reads (none reach us).
    let again = fs.open_file(hot_ino, libc::O_RDONLY, OWNER, true).unwrap();
    assert!(again.keep_cache);
    fs.release(again.fh).unwrap();
    let blocks = hot.len() as u64 / (64 << 10);
    assert_eq!(stat(&fs, "bucket_reopen_uses"), blocks, "{:?}", fs.stats());
    // Counted once per block the pages were given, not at every open.
    let third = fs.open_file(hot_ino, libc::O_RDONLY, OWNER, true).unwrap();
    fs.release(third.fh).unwrap();
    assert_eq!(stat(&fs, "bucket_reopen_uses"), blocks);
    assert!(!read_through_pages(&fs, scan_ino, &scan));
    // The scan gave the pages more than memory holds: read through, so its
    // next open counts nothing.
    let rescan = fs.open_file(scan_ino, libc::O_RDONLY, OWNER, true).unwrap();
    assert!(rescan.keep_cache);
    fs.release(rescan.fh).unwrap();
    assert_eq!(stat(&fs, "bucket_reopen_uses"), blocks);
    // The kernel drops the hot file's pages (it does not tell the mount):
    // its next reads reach the mount, and memory serves them.
    let requests = stat(&fs, "block_requests");
    assert!(read_through_pages(&fs, hot_ino, &hot));
    assert_eq!(
        stat(&fs, "block_requests"),
        requests,
        "the hot file read from memory after the scan: {:?}",
        fs.stats()
    );
}

#[test]
fn a_replacement_waits_for_the_page_caches_readers_and_new_readers_get_direct_io() {
    let server = start_server();
    put(&server, "pc", pattern(200_000, 1));
    let wait = Duration::from_millis(300);
    let fs = mount(
        &server,
        "",
        BucketConfig {
            allow_overwrite: true,
            overwrite_wait: wait,
            ..BucketConfig::default()
        },
    );
    let ino = walk(&fs, "pc").unwrap();
    let replace = libc::O_WRONLY | libc::O_TRUNC;
    // A handle reading through the kernel's pages: a replacement waits for
    // it, and fails with EBUSY if it stays open.
    let reader = fs.open_file(ino, libc::O_RDONLY, OWNER, true).unwrap();
    assert!(!reader.direct_io);
    let started = std::time::Instant::now();
    assert_eq!(fs.open(ino, replace, OWNER).map(|_| ()), Err(Errno::EBUSY));
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
    // Released while the replacement waits: it goes ahead; a reader that
    // opens meanwhile gets direct I/O (does not hold the replacement up).
    let (writer, during) = std::thread::scope(|s| {
        let writer = s.spawn(|| fs.open(ino, replace, OWNER));
        std::thread::sleep(wait / 3);
        let during = fs.open_file(ino, libc::O_RDONLY, OWNER, true).unwrap();
        fs.release(reader.fh).unwrap();
        (writer.join().unwrap(), during)
    });
    assert!(
        during.direct_io,
        "a reader opened during the wait used the pages"
    );
    let writer = writer.expect("the replacement, once the reader closed");
    // While it is written, opens for reading are refused.
    assert_eq!(
        fs.open_file(ino, libc::O_RDONLY, OWNER, true).map(|_| ()),
        Err(Errno::EBUSY)
    );
    let v2 = pattern(150_000, 2);
    fs.write(writer, 0, &v2).unwrap();
    fs.flush(writer, OWNER).unwrap();
    fs.release(writer).unwrap();
    fs.release(during.fh).unwrap();
    // The next open reads the new version through fresh pages (the old
    // ones dropped: no keep_cache).
    let next = fs.open_file(ino, libc::O_RDONLY, OWNER, true).unwrap();
    assert!(!next.direct_io && !next.keep_cache, "{next:?}");
    assert_eq!(fs.read(next.fh, 0, 200_000).unwrap(), v2);
    fs.release(next.fh).unwrap();
    // No page reader: a replacement starts at once.
    let started = std::time::Instant::now();
    let fh = fs.open(ino, replace, OWNER).unwrap();
    assert!(started.elapsed() < wait, "{:?}", started.elapsed());
    fs.release(fh).unwrap();
}

/// The bucket benchmark's cold sequential read at a small scale: objects read one
/// after another in 128 KiB reads, together four times larger than the
/// memory cache, with the mount's prefetch (the window an eighth of
/// memory, as the mount's 32 MiB of 384 MiB is about). Each byte should be
/// fetched once: a block read ahead must stay cached until the reader gets
/// there, which needs the blocks already read (once) to be evicted first.
#[test]
fn a_sequential_read_larger_than_memory_fetches_each_byte_once() {
    let server = start_server();
    let (objects, size) = (4, 16 << 20);
    for i in 0..objects {
        put(&server, &format!("big{i}"), pattern(size, 20 + i as u64));
    }
    let config = BucketConfig {
        prefetch_bytes: 2 << 20,
        prefetch_chunk: 512 << 10,
        metadata_ttl: Duration::from_secs(600),
        ..BucketConfig::default()
    };
    let fs = mount_as_the_mount_does(&server, 16 << 20, config);
    for i in 0..objects {
        let ino = walk(&fs, &format!("big{i}")).unwrap();
        assert!(read_all(&fs, ino, 128 << 10).unwrap() == pattern(size, 20 + i as u64));
    }
    let stats = fs.stats();
    let total = (objects * size) as u64;
    println!(
        "{} block GETs for {total} bytes; MFU {} of {} bytes; read ahead: {} inserted, \
         {} used, {} evicted unused; MRU ghost hits {}",
        stat(&fs, "block_requests"),
        stat(&fs, "mfu_bytes"),
        stat(&fs, "c"),
        stat(&fs, "read_ahead_inserts"),
        stat(&fs, "read_ahead_hits"),
        stat(&fs, "read_ahead_evicted_unused"),
        stat(&fs, "mru_ghost_hits"),
    );
    // Each byte fetched once, but for read-ahead blocks evicted before the
    // reader got to them: the evictor takes a batch from one sublist's
    // tail at a time (the multilist is LRU per sublist, not overall), and
    // on a loaded machine, when it runs late and takes a large batch, the
    // batch can reach a block read ahead but not read yet (1 of 1,008 in a
    // run of the whole suite on 2 cores). Such a block is fetched again,
    // and only such a block: at most 1% of those read ahead.
    let unused = stat(&fs, "read_ahead_evicted_unused");
    let block = 64 << 10;
    assert!(
        unused * 100 <= stat(&fs, "read_ahead_inserts"),
        "{unused} read-ahead blocks evicted unused: {stats:?}"
    );
    let fetched = stat(&fs, "store_bytes");
    assert!(
        fetched >= total && fetched - total <= unused * block,
        "{fetched} bytes fetched for {total}, {unused} read-ahead blocks evicted unused \
         ({} block GETs): {stats:?}",
        stat(&fs, "block_requests")
    );
}
