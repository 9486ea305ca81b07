//! The file layer against a plain model, under concurrency, crashes and
//! injected faults.

use multiarc::{BlockKey, Cache, HitMode};
use multiarc_file::{
    BackingStore, CachedFile, Fault, FaultPlan, FaultStore, FileStore, Locking, MemStore,
    WriteBack, WriteBackConfig,
};
use rand::RngExt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cache(max: u64) -> Arc<Cache<BlockKey>> {
    Arc::new(Cache::builder().max_bytes(max).build().unwrap())
}

fn writeback(dirty_max: u64, interval_ms: u64) -> Arc<WriteBack> {
    WriteBack::new(WriteBackConfig {
        dirty_max,
        flush_threshold: dirty_max / 2,
        interval: Duration::from_millis(interval_ms),
    })
    .unwrap()
}

/// A 4 KiB-block file on `store` through a fresh 1 MiB cache, written back
/// by `wb`.
fn open_4k(store: impl BackingStore, wb: &Arc<WriteBack>) -> CachedFile {
    CachedFile::builder(cache(1 << 20), store)
        .block_size(4096)
        .write_back(Arc::clone(wb))
        .open()
        .unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("multiarc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

// ---------------------------------------------------------------- shadow model

/// Random reads, writes (aligned, unaligned, multi-block, past the end),
/// truncates, extends, syncs and reopenings against a `Vec<u8>`: byte for
/// byte the same, with a cache small enough to evict and a dirty budget small
/// enough to make writers wait.
fn shadow_run(
    block_size: usize,
    hit_mode: HitMode,
    open: &dyn Fn() -> Box<dyn BackingStore>,
    seed: u64,
) {
    let mut rng = multiarc_sim::workload::rng(seed);
    let mut model: Vec<u8> = Vec::new();
    let new_cache = || {
        Arc::new(
            Cache::builder()
                .max_bytes(24 * block_size as u64)
                .hit_mode(hit_mode)
                .build()
                .unwrap(),
        )
    };
    let wb = writeback(8 * block_size as u64, 20);
    let reopen = |cache: Arc<Cache<BlockKey>>| {
        CachedFile::builder(cache, open())
            .block_size(block_size)
            .write_back(Arc::clone(&wb))
            .open()
            .unwrap()
    };
    let mut current_cache = new_cache();
    let mut file = reopen(Arc::clone(&current_cache));
    let max_len = 40 * block_size as u64;
    for step in 0..3000u64 {
        let op = rng.random_range(0..100);
        let off = rng.random_range(0..max_len);
        let len = match rng.random_range(0..4) {
            0 => block_size,
            1 => rng.random_range(1..=16),
            _ => rng.random_range(1..=3 * block_size),
        };
        if op < 40 {
            let data: Vec<u8> = (0..len)
                .map(|i| (step as usize * 31 + i) as u8 | 1)
                .collect();
            assert_eq!(file.write_at(&data, off).unwrap(), len);
            let end = off as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[off as usize..end].copy_from_slice(&data);
        } else if op < 85 {
            let mut buf = vec![0xEEu8; len];
            let n = file.read_at(&mut buf, off).unwrap();
            let want = model.len().saturating_sub(off as usize).min(len);
            assert_eq!(
                n,
                want,
                "step {step}: read of {len} at {off}, file {}",
                model.len()
            );
            assert!(
                n == 0 || buf[..n] == model[off as usize..off as usize + n],
                "step {step}: read of {len} at {off} differs"
            );
        } else if op < 91 {
            let new_len = rng.random_range(0..max_len);
            file.set_len(new_len).unwrap();
            model.resize(new_len as usize, 0);
        } else if op < 96 {
            file.sync_all().unwrap();
        } else {
            // Close (syncing), drop the cache, reopen the store.
            if rng.random_bool(0.5) {
                current_cache = new_cache();
            }
            let c = Arc::clone(&current_cache);
            file.sync_all().unwrap();
            // Closed first: a file open through one cache cannot be opened
            // through another (that would be two states of one file).
            file.close().unwrap();
            file = reopen(c);
            // The reopened file must not see the old cache's blocks: it has
            // a new object id, and got its length from the store.
        }
        assert_eq!(file.len(), model.len() as u64, "step {step}: length");
    }
    file.sync_all().unwrap();
    let store = open();
    let mut back = vec![0u8; model.len()];
    let mut done = 0;
    while done < back.len() {
        let n = store.read_at(&mut back[done..], done as u64).unwrap();
        assert!(n > 0, "store shorter than the file");
        done += n;
    }
    assert_eq!(store.len().unwrap(), model.len() as u64);
    assert!(back == model, "store differs from the model after sync_all");
}

#[test]
fn shadow_model_on_a_memory_store() {
    for (bs, mode, seed) in [
        (512, HitMode::Lazy, 1),
        (4096, HitMode::Eager, 2),
        (8192, HitMode::Lazy, 3),
    ] {
        let store = Arc::new(MemStore::new());
        shadow_run(bs, mode, &|| Box::new(Arc::clone(&store)), seed);
    }
}

#[test]
fn shadow_model_on_a_file() {
    let dir = temp_dir("shadow");
    let path = dir.join("data");
    shadow_run(
        4096,
        HitMode::Lazy,
        &|| Box::new(FileStore::open(&path).unwrap()),
        7,
    );
    // And with O_DIRECT where the filesystem allows it.
    let path2 = dir.join("direct");
    if FileStore::open_direct(&path2).is_ok() {
        shadow_run(
            8192,
            HitMode::Lazy,
            &|| Box::new(FileStore::open_direct(&path2).unwrap()),
            8,
        );
    } else {
        eprintln!(
            "note: {} refuses O_DIRECT; direct I/O shadow run skipped",
            dir.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------- atomicity

/// The file is cut into regions of `REGION` blocks. Writers overwrite a
/// whole region at a time, every byte stamped with a new generation; readers
/// read any sub-range of a region spanning at least two blocks (unaligned,
/// too). Every write covers every read of its region, so an atomic read sees
/// exactly one generation; a read that sees two saw a write half-done.
/// Returns (reads that saw two generations, reads). Stops at `limit`, or at
/// the first mix if `stop_on_mix`.
const REGION: u64 = 8;

fn torn_reads(locking: Locking, limit: Duration, stop_on_mix: bool) -> (u64, u64) {
    let bs = 4096u64;
    let regions = 4u64;
    let file = CachedFile::builder(cache(64 << 20), MemStore::new())
        .block_size(bs as usize)
        .locking(locking)
        .write_back(writeback(256 << 20, 50))
        .open()
        .unwrap();
    file.write_at(&vec![0u8; (regions * REGION * bs) as usize], 0)
        .unwrap();
    let generation = AtomicU64::new(1);
    let mixed = AtomicU64::new(0);
    let reads = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (file, generation, stop) = (&file, &generation, &stop);
            s.spawn(move || {
                let mut rng = multiarc_sim::workload::rng(w + 10);
                while !stop.load(Ordering::Relaxed) {
                    let g = generation.fetch_add(1, Ordering::Relaxed);
                    let region = rng.random_range(0..regions);
                    let bytes: Vec<u8> =
                        std::iter::repeat_n(g.to_le_bytes(), (REGION * bs / 8) as usize)
                            .flatten()
                            .collect();
                    file.write_at(&bytes, region * REGION * bs).unwrap();
                }
            });
        }
        for r in 0..2u64 {
            let (file, mixed, reads, stop) = (&file, &mixed, &reads, &stop);
            s.spawn(move || {
                let mut rng = multiarc_sim::workload::rng(r + 20);
                let mut buf = vec![0u8; (REGION * bs) as usize];
                while !stop.load(Ordering::Relaxed) {
                    let region = rng.random_range(0..regions);
                    // 8-byte aligned so stamps line up; at least 2 blocks.
                    let start = rng.random_range(0..REGION * bs / 2) & !7;
                    let len = rng.random_range(2 * bs..=REGION * bs - start) & !7;
                    let buf = &mut buf[..len as usize];
                    let n = file.read_at(buf, region * REGION * bs + start).unwrap();
                    assert_eq!(n, buf.len());
                    let first = u64::from_le_bytes(buf[..8].try_into().unwrap());
                    if buf
                        .chunks_exact(8)
                        .any(|c| u64::from_le_bytes(c.try_into().unwrap()) != first)
                    {
                        mixed.fetch_add(1, Ordering::Relaxed);
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while start.elapsed() < limit && !(stop_on_mix && mixed.load(Ordering::Relaxed) > 0) {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
    });
    (mixed.into_inner(), reads.into_inner())
}

#[test]
fn range_and_rwsem_reads_never_see_two_generations_of_one_write() {
    for locking in [Locking::Range, Locking::RwSem] {
        let (mixed, reads) = torn_reads(locking, Duration::from_secs(3), false);
        assert!(reads > 100, "{locking}: only {reads} reads ran");
        assert_eq!(
            mixed, 0,
            "{locking}: {mixed} of {reads} reads saw a write half-done"
        );
    }
}

#[test]
fn the_checker_catches_torn_reads_in_torn_mode() {
    let (mixed, reads) = torn_reads(Locking::Torn, Duration::from_secs(60), true);
    assert!(
        mixed > 0,
        "no torn read seen in {reads} reads: the checker cannot fail"
    );
}

// ---------------------------------------------------------------- faults

fn faulty(bs: usize, initial: &[u8]) -> (CachedFile, Arc<FaultPlan>, Arc<FaultStore<MemStore>>) {
    let plan = FaultPlan::new();
    let store = Arc::new(FaultStore::new(
        MemStore::with_bytes(initial.to_vec()),
        Arc::clone(&plan),
    ));
    let file = CachedFile::builder(cache(1 << 20), Arc::clone(&store))
        .block_size(bs)
        .write_back(writeback(1 << 20, 3_600_000))
        .open()
        .unwrap();
    (file, plan, store)
}

#[test]
fn read_errors_reach_the_caller_and_cache_nothing() {
    let data: Vec<u8> = (0..4 * 4096).map(|i| (i % 253) as u8).collect();
    let (file, plan, _store) = faulty(4096, &data);
    plan.add(4096..8192, Fault::ReadError);
    let mut buf = vec![0u8; 4096];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 4096);
    let err = file.read_at(&mut buf, 5000).unwrap_err();
    assert!(err.to_string().contains("injected read error"), "{err}");
    // A partial write into the failing block needs its old bytes: it fails.
    assert!(file.write_at(b"x", 4100).is_err());
    plan.clear();
    assert_eq!(file.read_at(&mut buf, 4096).unwrap(), 4096);
    assert_eq!(buf, data[4096..8192]);
}

#[test]
fn short_reads_are_retried() {
    let data: Vec<u8> = (0..3 * 8192).map(|i| (i % 241) as u8).collect();
    let (file, plan, _store) = faulty(8192, &data);
    plan.add(0..u64::MAX, Fault::ShortRead(1000));
    let mut buf = vec![0u8; data.len()];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), data.len());
    assert_eq!(buf, data);
    assert!(
        plan.fired() >= 3 * 9,
        "short reads did not fire: {}",
        plan.fired()
    );
}

#[test]
fn one_store_read_however_many_threads_miss_a_block() {
    let (file, plan, _store) = faulty(4096, &[7u8; 4096]);
    plan.add(0..4096, Fault::Delay(Duration::from_millis(200)));
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut buf = [0u8; 100];
                assert_eq!(file.read_at(&mut buf, 10).unwrap(), 100);
                assert_eq!(buf, [7u8; 100]);
            });
        }
    });
    assert_eq!(
        plan.fired(),
        1,
        "the block was read from the store more than once"
    );
}

#[test]
fn write_errors_keep_data_dirty_and_surface_at_sync_all() {
    let (file, plan, store) = faulty(4096, &[]);
    let data: Vec<u8> = (0..3 * 4096).map(|i| (i % 239) as u8).collect();
    file.write_at(&data, 0).unwrap();
    plan.add(4096..8192, Fault::WriteError);
    let err = file.sync_all().unwrap_err();
    assert!(err.to_string().contains("injected write error"), "{err}");
    assert_eq!(
        file.dirty_bytes(),
        4096,
        "the failed block must stay dirty, only it"
    );
    // Still readable from the dirty table.
    let mut buf = vec![0u8; data.len()];
    file.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf, data);
    // The fault clears; a retry writes everything.
    plan.clear();
    file.sync_all().unwrap();
    assert_eq!(file.dirty_bytes(), 0);
    assert_eq!(store.inner().to_vec(), data);
}

#[test]
fn a_background_write_back_error_is_returned_by_the_next_sync_all_once() {
    let plan = FaultPlan::new();
    let store = Arc::new(FaultStore::new(MemStore::new(), Arc::clone(&plan)));
    let file = open_4k(Arc::clone(&store), &writeback(1 << 20, 20));
    plan.add_times(0..u64::MAX, Fault::WriteError, 1);
    file.write_at(&[5u8; 4096], 0).unwrap();
    // The flusher runs every 20 ms: the first attempt fails, a later one
    // succeeds.
    let t = Instant::now();
    while (plan.fired() == 0 || file.dirty_bytes() > 0) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(file.dirty_bytes(), 0, "the flusher did not retry");
    assert_eq!(store.inner().to_vec(), vec![5u8; 4096]);
    let err = file.sync_all().unwrap_err();
    assert!(
        err.to_string().contains("earlier write-back failed"),
        "{err}"
    );
    file.sync_all().unwrap();
}

#[test]
fn writers_wait_for_write_back_instead_of_failing() {
    let plan = FaultPlan::new();
    let store = Arc::new(FaultStore::new(MemStore::new(), Arc::clone(&plan)));
    plan.add(0..u64::MAX, Fault::Delay(Duration::from_millis(2)));
    let wb = writeback(16 * 4096, 3_600_000);
    let file = CachedFile::builder(cache(4 << 20), Arc::clone(&store))
        .block_size(4096)
        .write_back(Arc::clone(&wb))
        .open()
        .unwrap();
    let max_seen = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                max_seen.fetch_max(wb.stats().dirty_bytes, Ordering::Relaxed);
                std::thread::yield_now();
            }
        });
        for i in 0..200u64 {
            file.write_at(&[i as u8; 4096], i * 4096).unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let st = wb.stats();
    assert!(
        st.writer_waits > 0,
        "200 blocks through a 16-block budget never waited"
    );
    assert!(
        max_seen.into_inner() <= 16 * 4096,
        "dirty bytes passed the bound"
    );
    file.sync_all().unwrap();
    let bytes = store.inner().to_vec();
    for i in 0..200usize {
        assert!(bytes[i * 4096..(i + 1) * 4096]
            .iter()
            .all(|&b| b == i as u8));
    }
}

// ------------------------------------------ nothing lost, nothing hung

/// Waits (bounded) for `cond`; false if it never held.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

fn errno_of(e: &io::Error) -> Option<i32> {
    multiarc_file::os_error_code(e)
}

/// A full store: OLD is written and closed while the store is full;
/// space is freed; NEW is written through a second open and synced. The
/// flusher's retry of the failed OLD must never land over NEW.
#[test]
fn a_failed_write_back_is_never_retried_over_newer_data() {
    let dir = temp_dir("newest-wins");
    let path = dir.join("x");
    let plan = FaultPlan::new();
    let wb = writeback(1 << 20, 10);
    let cache = cache(1 << 20);
    let open = || {
        CachedFile::builder(
            Arc::clone(&cache),
            FaultStore::new(FileStore::open(&path).unwrap(), Arc::clone(&plan)),
        )
        .block_size(4096)
        .write_back(Arc::clone(&wb))
        .open()
        .unwrap()
    };
    plan.add(0..u64::MAX, Fault::WriteErrno(libc::ENOSPC));
    let a = open();
    a.write_at(b"OLD", 0).unwrap();
    let err = a.close().unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::ENOSPC), "{err}");
    // The flusher keeps retrying OLD (closed, still dirty). Space is freed.
    plan.clear();
    let b = open();
    b.write_at(b"NEW", 0).unwrap();
    b.sync_all().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"NEW");
    // Well past the retries (back-off starts at 100 ms).
    let passes = wb.stats().passes;
    assert!(eventually(Duration::from_secs(10), || wb.stats().passes >= passes + 20));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"NEW",
        "older data came back"
    );
    let mut buf = [0u8; 3];
    b.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"NEW");
    b.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_open_of_a_file_shares_its_state() {
    let dir = temp_dir("shared-state");
    let path = dir.join("f");
    let c = cache(1 << 20);
    let open = |c: &Arc<Cache<BlockKey>>, bs| {
        CachedFile::builder(Arc::clone(c), FileStore::open(&path).unwrap())
            .block_size(bs)
            .open()
    };
    let a = open(&c, 4096).unwrap();
    let b = open(&c, 4096).unwrap();
    a.write_at(b"written through a", 100).unwrap();
    let mut buf = [0u8; 17];
    assert_eq!(b.read_at(&mut buf, 100).unwrap(), 17);
    assert_eq!(&buf, b"written through a", "b does not see a's dirty data");
    assert_eq!(b.len(), 117);
    // Through another cache, or with another block size: refused, clearly.
    let err = open(&cache(1 << 20), 4096).unwrap_err();
    assert!(
        err.to_string()
            .contains("already open through another cache"),
        "{err}"
    );
    let err = open(&c, 8192).unwrap_err();
    assert!(err.to_string().contains("block size 4096"), "{err}");
    a.close().unwrap();
    b.close().unwrap();
    // Closed and clean: another cache may open it now.
    let d = open(&cache(1 << 20), 8192).unwrap();
    assert_eq!(d.len(), 117);
    d.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_open_description_sees_a_write_back_error_once() {
    let (a, plan, store) = faulty(4096, &[]);
    let b = a.open_again();
    a.write_at(&[1u8; 4096], 0).unwrap();
    plan.add_times(0..u64::MAX, Fault::WriteError, 1);
    // The write-back fails once (through a), then a retry succeeds.
    let err = a.sync_all().unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::EIO), "{err}");
    a.sync_all().unwrap();
    assert_eq!(store.inner().to_vec(), vec![1u8; 4096]);
    // b has not looked yet: it sees the error once.
    let err = b.sync_all().unwrap_err();
    assert!(
        err.to_string().contains("earlier write-back failed"),
        "{err}"
    );
    b.sync_all().unwrap();
    // Everyone has seen it: a later description does not.
    let c = a.open_again();
    c.sync_all().unwrap();
    // An error nobody has seen is seen by a description opened after it.
    plan.add_times(0..u64::MAX, Fault::WriteError, 1);
    a.write_at(&[2u8; 4096], 0).unwrap();
    drop(a); // not the last description: no write-back
    b.write_back().flush_all().unwrap_err();
    let d = b.open_again();
    assert!(d.sync_all().is_err(), "the unseen error was lost for d");
    assert!(b.sync_all().is_err(), "the unseen error was lost for b");
    assert!(c.close().is_err(), "the unseen error was lost for c");
    d.close().unwrap();
    b.close().unwrap();
}

/// A full store: with the store full and the dirty budget full, a writer
/// gets ENOSPC instead of waiting forever, the flusher backs off instead of
/// spinning, and nothing acknowledged is lost once space is freed.
#[test]
fn a_full_store_fails_writers_instead_of_hanging_them() {
    let store = Arc::new(MemStore::new());
    store.set_capacity(4 * 4096);
    let wb = writeback(8 * 4096, 10);
    let file = open_4k(Arc::clone(&store), &wb);
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let file = file.open_again();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            for i in 0..64u64 {
                match file.write_at(&[i as u8 + 1; 4096], i * 4096) {
                    Ok(_) => acked.push(i),
                    Err(e) => {
                        tx.send(Some(e)).unwrap();
                        return acked;
                    }
                }
            }
            tx.send(None).unwrap();
            acked
        })
    };
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the writer hung on a full store");
    let err = got.expect("64 blocks into a 4-block store all succeeded");
    assert_eq!(errno_of(&err), Some(libc::ENOSPC), "{err}");
    let acked = writer.join().unwrap();
    assert!(wb.stats().writer_errors > 0);
    // Back-off: over one second, a handful of retries, not a spin.
    let before = wb.stats().write_errors;
    std::thread::sleep(Duration::from_secs(1));
    let failed_writes = wb.stats().write_errors - before;
    // One attempt fails once for the run, then once per block.
    let attempts = failed_writes / (1 + file.dirty_bytes() / 4096);
    assert!(
        attempts <= 20,
        "{attempts} write-back attempts in one second ({failed_writes} failed writes)"
    );
    // The error reaches sync_all; freeing space lets everything through.
    assert_eq!(errno_of(&file.sync_all().unwrap_err()), Some(libc::ENOSPC));
    store.set_capacity(u64::MAX);
    file.sync_all().unwrap();
    let bytes = store.to_vec();
    for i in acked {
        let block = &bytes[i as usize * 4096..(i as usize + 1) * 4096];
        assert!(block.iter().all(|&b| b == i as u8 + 1), "block {i} lost");
    }
    assert_eq!(wb.stats().dirty_bytes, 0);
}

#[test]
fn truncating_a_failing_file_drops_its_dirty_blocks_past_the_end() {
    let store = Arc::new(MemStore::new());
    store.set_capacity(4096);
    let wb = writeback(64 * 4096, 3_600_000);
    let file = open_4k(Arc::clone(&store), &wb);
    file.write_at(&[7u8; 8 * 4096], 0).unwrap();
    assert!(file.sync_all().is_err());
    assert_eq!(file.dirty_bytes(), 7 * 4096, "block 0 fits, 7 do not");
    file.set_len(4096).unwrap();
    assert_eq!(file.dirty_bytes(), 0);
    assert_eq!(wb.stats().dirty_bytes, 0, "the budget was not given back");
    // The failed sync_all above reported the error to this description.
    file.sync_all().unwrap();
    assert_eq!(store.to_vec(), vec![7u8; 4096]);
}

#[test]
fn the_last_close_of_an_unlinked_file_drops_its_dirty_blocks_and_its_store() {
    let plan = FaultPlan::new();
    let store = Arc::new(FaultStore::new(MemStore::new(), Arc::clone(&plan)));
    let wb = writeback(64 * 4096, 10);
    let a = open_4k(Arc::clone(&store), &wb);
    let b = a.open_again();
    plan.add(0..u64::MAX, Fault::WriteErrno(libc::ENOSPC));
    a.write_at(&[3u8; 3 * 4096], 0).unwrap();
    a.set_unlinked(true);
    drop(a);
    // b still has it open: still dirty, still readable.
    assert_eq!(b.dirty_bytes(), 3 * 4096);
    let mut buf = [0u8; 4096];
    b.read_at(&mut buf, 4096).unwrap();
    assert_eq!(buf, [3u8; 4096]);
    drop(b);
    assert_eq!(
        wb.stats().dirty_bytes,
        0,
        "dirty blocks kept after the last close"
    );
    assert_eq!(wb.stats().discarded_blocks, 3);
    assert!(
        eventually(Duration::from_secs(10), || Arc::strong_count(&store) == 1),
        "the store (the backing descriptor) was not let go"
    );
    // A file that is not unlinked keeps its dirty data at its last close.
    let c = open_4k(Arc::clone(&store), &wb);
    c.write_at(&[4u8; 4096], 0).unwrap();
    drop(c);
    assert_eq!(wb.stats().dirty_bytes, 4096);
    plan.clear();
    wb.flush_all().unwrap();
    assert_eq!(store.inner().to_vec(), vec![4u8; 4096]);
    // A file closed clean lets go of its store with its last description,
    // not at the flusher's next pass (an hour away here).
    let store = Arc::new(MemStore::new());
    let e = open_4k(Arc::clone(&store), &writeback(64 * 4096, 3_600_000));
    e.write_at(&[5u8; 4096], 0).unwrap();
    drop(e);
    assert_eq!(store.to_vec(), vec![5u8; 4096]);
    assert_eq!(
        Arc::strong_count(&store),
        1,
        "a closed clean file kept its store"
    );
}

#[test]
fn efbig_fails_later_writes_at_once_and_frees_the_budget() {
    let (file, plan, store) = faulty(4096, &[]);
    let limit = 1u64 << 40;
    plan.add(limit..u64::MAX, Fault::WriteErrno(libc::EFBIG));
    file.write_at(b"below", 0).unwrap();
    file.write_at(&[9u8; 4096], limit).unwrap();
    let err = file.sync_all().unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::EFBIG), "{err}");
    assert_eq!(file.dirty_bytes(), 0, "unwritable blocks pinned the budget");
    assert_eq!(file.len(), limit);
    let err = file.write_at(&[9u8; 10], limit + 5).unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::EFBIG), "{err}");
    assert!(err.to_string().contains("no byte past"), "{err}");
    file.write_at(b"still fine", 100).unwrap();
    file.sync_all().unwrap();
    assert_eq!(&store.inner().to_vec()[100..110], b"still fine");
}

#[test]
fn bad_block_sizes_are_refused_with_a_clear_error() {
    for bs in [0, 100, 3000, 2 << 20] {
        let err = CachedFile::builder(cache(1 << 20), MemStore::new())
            .block_size(bs)
            .open()
            .unwrap_err();
        assert!(err.to_string().contains("block size"), "{err}");
    }
    let f = CachedFile::builder(cache(1 << 20), MemStore::new())
        .open()
        .unwrap();
    assert!(f.write_at(b"x", u64::MAX).is_err());
}

// ---------------------------------------------------------------- crash

const CRASH_ENV: &str = "MULTIARC_CRASH_CHILD";

/// Not a test on its own: the child process of the crash test.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CRASH_ENV) else {
        return;
    };
    let file = CachedFile::builder(cache(8 << 20), FileStore::open(Path::new(&path)).unwrap())
        .open()
        .unwrap();
    for i in 0..64u64 {
        let block = vec![(i as u8) ^ 0x5A; 8192];
        file.write_at(&block, i * 8192).unwrap();
    }
    file.write_at(b"tail!", 64 * 8192).unwrap();
    file.sync_all().unwrap();
    println!("SYNCED");
    // Unsynced writes after the sync point, then wait to be killed.
    for i in 0..64u64 {
        file.write_at(&[0xFF; 8192], i * 8192).unwrap();
    }
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn synced_data_survives_sigkill() {
    use std::io::BufRead;
    let dir = temp_dir("crash");
    let path = dir.join("data");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CRASH_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut synced = false;
    for line in io::BufReader::new(out).lines() {
        if line.unwrap().contains("SYNCED") {
            synced = true;
            break;
        }
    }
    assert!(synced, "the child never synced");
    // SIGKILL: no destructor, no flush.
    child.kill().unwrap();
    child.wait().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 64 * 8192 + 5);
    for i in 0..64usize {
        let blk = &bytes[i * 8192..(i + 1) * 8192];
        // Synced bytes, or (if the flusher got to them) the later write.
        assert!(
            blk.iter().all(|&b| b == (i as u8) ^ 0x5A) || blk.iter().all(|&b| b == 0xFF),
            "block {i} lost its synced bytes"
        );
    }
    assert_eq!(&bytes[64 * 8192..], b"tail!");
    std::fs::remove_dir_all(&dir).unwrap();
}
