//! Measures the cache's metadata per cached buffer with a counting global
//! allocator: everything the cache allocates beyond the buffers' own bytes
//! (entry headers, sublist slots, hash table slots, striped counters), divided by
//! the number of buffers.
//!
//! multiarc keeps buffers of 4 to 64 KiB on pages it maps itself
//! (`multiarc::slab_bytes`, added to both counts below), each in a slot of
//! its size rounded up to 16 bytes.
//!
//! Two counts: by the layout sizes asked for, and as glibc's malloc spends
//! them (the usable size of each allocation plus its 8-byte chunk header,
//! which layout sizes leave out: an `Arc<[u8]>` of 8 KiB costs 8,224 bytes,
//! not 8,208). multiarc's slots are counted at their size in both, so the
//! comparison with the peers is made on malloc's count.
//!
//! The CI run uses 100,000 buffers and fails if the overhead exceeds 130
//! bytes per buffer, or if multiarc's (one stripe, lazy) is not below
//! quick_cache's on malloc's count (issue 42). The same counts, the same
//! way, are reported for three peers holding the buffers as `Arc<[u8]>` (the
//! `Arc`'s 16-byte header counted as metadata, as multiarc's entry header
//! is): quick_cache, lru (the `mutex-lru` row) and moka. The figure in
//! docs/BENCHMARKS.md (1M buffers of 8 KiB):
//! `MULTIARC_OVERHEAD_ENTRIES=1000000 cargo test --release -p multiarc --test memory_overhead -- --nocapture`

use multiarc::{BlockKey, Builder, Cache, HitMode};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

/// Bytes allocated, by the layouts asked for.
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Bytes allocated as glibc's malloc spends them (`chunk`).
static CHUNKS: AtomicIsize = AtomicIsize::new(0);

/// What the allocation at `ptr` costs in malloc's heap: its usable size and
/// the chunk header before it.
fn chunk(ptr: *mut u8) -> isize {
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: `ptr` is a live allocation of the system allocator (malloc,
    // or posix_memalign for large alignments: both are malloc's chunks).
    (unsafe { libc::malloc_usable_size(ptr.cast()) } + 8) as isize
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        let p = unsafe { System.alloc(layout) };
        CHUNKS.fetch_add(chunk(p), Ordering::Relaxed);
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        CHUNKS.fetch_sub(chunk(ptr), Ordering::Relaxed);
        // SAFETY: ptr was allocated by System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        let old = chunk(ptr);
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CHUNKS.fetch_add(chunk(p) - old, Ordering::Relaxed);
        }
        p
    }
}

/// Both counters now, each with the bytes multiarc keeps on its own pages
/// (its buffers of 4 to 64 KiB: `multiarc::slab_bytes`, slots in use, which
/// malloc's chunks would count alike).
fn counters() -> (isize, isize) {
    let slab = multiarc::slab_bytes() as isize;
    (
        LIVE.load(Ordering::Relaxed) + slab,
        CHUNKS.load(Ordering::Relaxed) + slab,
    )
}

/// Live bytes by layout, with multiarc's own pages.
fn live() -> isize {
    counters().0
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Both modes in one test: the allocation counter is process-wide, so they
/// must not run at the same time.
#[test]
fn metadata_per_cached_buffer() {
    // The default configuration, both modes: under the bound.
    measure(HitMode::Eager, None);
    measure(HitMode::Lazy, None);
    // Lazy mode adds nothing per entry. With the default striping, run to
    // run noise reaches several bytes per buffer: each cache seeds its hash
    // at random, so its stripes (which double when 3/4 full) double at
    // different times. One stripe takes that out (its size is set by the
    // count alone); what still varies, by well under 0.5 B per buffer, is
    // the sublists' unused slab capacity. A field added to entries in one
    // mode only would cost 8 B or more.
    let (eager, _) = measure(HitMode::Eager, Some(1));
    let (lazy, lazy_chunks) = measure(HitMode::Lazy, Some(1));
    assert!(
        lazy <= eager + 0.5,
        "lazy mode metadata ({lazy:.1} B) exceeds eager ({eager:.1} B)"
    );
    evicted_buffers_are_freed_while_the_cache_runs();
    let (quick_cache, quick_cache_chunks) = peers();
    // Issue 42's goal, kept: below quick_cache's, with one stripe (the
    // default striping's doubling times move the figure by a few bytes),
    // counting malloc's chunks. multiarc's buffers are on its own pages
    // (`slab_bytes`), counted at their slots' size, 16-byte multiples, as
    // malloc's chunks are; by layout sizes malloc's chunk headers would be
    // left out of quick_cache's count only. Both are printed.
    println!(
        "by layout sizes: multiarc {lazy:.1} B per buffer, quick_cache {quick_cache:.1} B \
         (multiarc's buffers counted at their slots' size)"
    );
    assert!(
        lazy_chunks < quick_cache_chunks,
        "counting malloc's chunks, multiarc's metadata ({lazy_chunks:.1} B per buffer) is not below \
         quick_cache's ({quick_cache_chunks:.1} B)"
    );
}

fn entries() -> usize {
    std::env::var("MULTIARC_OVERHEAD_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// Allocated bytes beyond the buffers after `fill` built a cache of
/// `entries()` 8 KiB buffers (kept alive until measured), per buffer.
fn measure_peer<C>(name: &str, fill: impl FnOnce(usize, usize) -> C) -> (f64, f64) {
    let (entries, block) = (entries(), 8192usize);
    let (before, before_chunks) = counters();
    let cache = fill(entries, block);
    let (after, after_chunks) = counters();
    let data = (entries * block) as isize;
    let meta = after - before - data;
    let meta_chunks = after_chunks - before_chunks - data;
    println!(
        "peer {name}: {entries} buffers of {block} B: metadata {meta} B, {:.1} B per buffer \
         ({:.1} B counting malloc's chunks)",
        meta as f64 / entries as f64,
        meta_chunks as f64 / entries as f64
    );
    drop(cache);
    (
        meta as f64 / entries as f64,
        meta_chunks as f64 / entries as f64,
    )
}

fn buffer(block: usize) -> std::sync::Arc<[u8]> {
    vec![0u8; block].into()
}

/// Measures the peers; returns quick_cache's figures (by layouts, by
/// malloc's chunks).
fn peers() -> (f64, f64) {
    use std::sync::Arc;
    #[derive(Clone)]
    struct Len;
    impl quick_cache::Weighter<BlockKey, Arc<[u8]>> for Len {
        fn weight(&self, _: &BlockKey, v: &Arc<[u8]>) -> u64 {
            v.len() as u64
        }
    }
    let key = |i: usize| BlockKey::new(i as u64 >> 20, i as u64 & 0xfffff);
    // As `multiarc bench` builds them: capacity = the data + 25%, weighted
    // by length (quick_cache's shards each take a share of the capacity, so
    // it needs the slack to keep every buffer).
    let capacity = |n: usize, block: usize| (n * block) as u64 * 5 / 4 + (1 << 20);
    let quick_cache = measure_peer("quick_cache", |n, block| {
        let cap = capacity(n, block);
        let c = quick_cache::sync::Cache::with_weighter((cap / block as u64) as usize, cap, Len);
        for i in 0..n {
            c.insert(key(i), buffer(block));
        }
        assert_eq!(c.len(), n, "quick_cache kept every buffer");
        c
    });
    let _ = measure_peer("lru", |n, block| {
        let mut c = lru::LruCache::new(std::num::NonZeroUsize::new(n).unwrap());
        for i in 0..n {
            c.put(key(i), buffer(block));
        }
        std::sync::Mutex::new(c)
    });
    let _ = measure_peer("moka", |n, block| {
        let c = moka::sync::Cache::builder()
            .max_capacity(capacity(n, block))
            .weigher(|_: &BlockKey, v: &Arc<[u8]>| v.len() as u32)
            .build();
        for i in 0..n {
            c.insert(key(i), buffer(block));
        }
        c.run_pending_tasks();
        c
    });
    quick_cache
}

/// Metadata per buffer of a cache of `entries()` buffers: by layouts, by
/// malloc's chunks.
fn measure(mode: HitMode, hash_stripes: Option<usize>) -> (f64, f64) {
    let entries = entries();
    let block = 8192usize;
    let (before_build, before_chunks) = counters();
    let mut builder = Builder::new()
        .max_bytes((entries * block) as u64)
        .hit_mode(mode);
    if let Some(n) = hash_stripes {
        builder = builder.hash_stripes(n);
    }
    let cache: Cache<BlockKey> = builder.build().unwrap();
    let empty = live() - before_build;
    for i in 0..entries as u64 {
        drop(cache.insert(BlockKey::new(i >> 20, i & 0xfffff), vec![0u8; block]));
    }
    cache.wait_for_eviction();
    let s = cache.stats();
    assert_eq!(s.size, (entries * block) as u64, "all buffers cached");
    let (after, after_chunks) = counters();
    let data = (entries * block) as isize;
    let meta = after - before_build - data;
    let per_entry = meta as f64 / entries as f64;
    let per_entry_chunks = (after_chunks - before_chunks - data) as f64 / entries as f64;
    let striping = match hash_stripes {
        Some(n) => format!(" ({n} hash stripe)"),
        None => String::new(),
    };
    println!(
        "{mode:?}{striping}: {entries} buffers of {block} B: data {data} B, metadata {meta} B \
         (empty cache {empty} B), {per_entry:.1} B per buffer = {:.2}% of the data \
         ({per_entry_chunks:.1} B counting malloc's chunks)",
        100.0 * meta as f64 / data as f64
    );
    assert!(per_entry < 130.0, "metadata per buffer {per_entry:.1} B");
    drop(cache);
    // What may stay: the slabs' lists of their chunks (8 bytes a chunk of
    // 2 MiB or more in each of two lists, grown by doubling), kept for the
    // chunks' reuse.
    let left = live() - before_build;
    let lists = 4 * 2 * 8 * (entries * block).div_ceil(2 << 20) as isize;
    assert!(
        left < 4096 + lists,
        "dropping the cache frees everything ({left} B left, {} B of them on multiarc's pages)",
        multiarc::slab_bytes()
    );
    (per_entry, per_entry_chunks)
}

/// Lazy mode frees evicted buffers only after a grace period
/// (`reclaim.rs`): churning a small cache through a hundred times its size,
/// with a thread hitting it all along, must not leak retired buffers. What
/// waits for readers is bounded by time, not count: while a lookup is
/// preempted with its thread pinned (three busy threads on this machine's
/// two cores), everything evicted meanwhile waits, so the peak may reach a
/// few times this tiny cache (measured 2-6x; about a scheduler time slice of
/// evictions), and it drains once the reader moves on (the evict thread
/// collects when idle too). Eager mode, which frees at once, is the
/// baseline.
fn evicted_buffers_are_freed_while_the_cache_runs() {
    let block = 8192usize;
    let capacity = 256 * block;
    for mode in [HitMode::Eager, HitMode::Lazy] {
        let (peak, settled) = churn(mode, capacity, block);
        println!(
            "{mode:?} churn: 100 x the cache through {capacity} B: peak {peak} B live, \
             {settled} B after 300 ms idle"
        );
        // The data, its ghosts' headers, the table and sublists: well under
        // 1 MiB beyond the data here; a leak of the retired buffers would be
        // 100 x the capacity.
        let settled_bound = (capacity + capacity / 256) as isize + (1 << 20);
        assert!(
            settled < settled_bound,
            "{mode:?}: {settled} B live once idle (bound {settled_bound} B): retired buffers not freed"
        );
        assert!(
            peak < 16 * capacity as isize,
            "{mode:?}: {peak} B live during the churn: retired buffers pile up"
        );
    }
}

/// Runs the churn; returns the peak and the settled live bytes.
fn churn(mode: HitMode, capacity: usize, block: usize) -> (isize, isize) {
    let before = live();
    let cache: Cache<u64> = Builder::new()
        .max_bytes(capacity as u64)
        .hit_mode(mode)
        .sublists(4)
        .build()
        .unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut peak = 0isize;
    let blocks = 100 * (capacity / block) as u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if let Some(h) = cache.get(&(k % blocks)) {
                    std::hint::black_box(h[0]);
                }
                k = k.wrapping_add(7919);
            }
        });
        for i in 0..blocks {
            drop(cache.insert(i, vec![0u8; block]));
            if i % 256 == 0 {
                cache.wait_for_eviction();
                peak = peak.max(live() - before);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    cache.wait_for_eviction();
    // The evict thread collects what is left when it finds nothing to do
    // (every 100 ms).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let settled = live() - before;
    drop(cache);
    (peak, settled)
}
