//! Micro-benchmarks of the cache's hot paths, in both hit modes:
//! `cargo bench -p multiarc --bench hot_paths` (not run in CI).
//!
//! - hit: `get` of a cached key and dropping the handle;
//! - release: dropping a second hold on a held buffer (no list work) and
//!   dropping the last hold (the eager mode relinks the buffer);
//! - miss+insert: inserting a new key into a full cache with inline eviction
//!   (one buffer evicted per insert);
//! - evict batch: shrinking a full cache by 10% and waiting for the evict
//!   thread.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use multiarc::{Builder, Cache, HitMode};
use std::hint::black_box;

const BLOCK: usize = 8192;
const BLOCKS: u64 = 16_384;

fn full_cache(mode: HitMode, inline: bool) -> Cache<u64> {
    let cache: Cache<u64> = Builder::new()
        .max_bytes(BLOCKS * BLOCK as u64)
        .hit_mode(mode)
        .inline_eviction(inline)
        .build()
        .unwrap();
    for k in 0..BLOCKS {
        drop(cache.insert(k, vec![k as u8; BLOCK]));
    }
    cache
}

fn modes() -> [(HitMode, &'static str); 2] {
    [(HitMode::Eager, "eager"), (HitMode::Lazy, "lazy")]
}

fn hit(c: &mut Criterion) {
    for (mode, name) in modes() {
        let cache = full_cache(mode, false);
        let mut k = 0u64;
        c.bench_function(&format!("hit/{name}"), |b| {
            b.iter(|| {
                k = (k + 7919) % BLOCKS;
                let h = cache.get(black_box(&k)).expect("cached");
                black_box(h[0]);
            })
        });
    }
}

fn release(c: &mut Criterion) {
    for (mode, name) in modes() {
        let cache = full_cache(mode, false);
        let held = cache.get(&1).unwrap();
        c.bench_function(&format!("release/second-hold/{name}"), |b| {
            b.iter_batched(|| held.clone(), drop, BatchSize::SmallInput)
        });
        drop(held);
        c.bench_function(&format!("release/last-hold/{name}"), |b| {
            b.iter_batched(|| cache.get(&2).unwrap(), drop, BatchSize::SmallInput)
        });
    }
}

fn miss_insert(c: &mut Criterion) {
    for (mode, name) in modes() {
        let cache = full_cache(mode, true);
        let mut k = BLOCKS;
        c.bench_function(&format!("miss+insert+evict/{name}"), |b| {
            b.iter_batched(
                || vec![0u8; BLOCK],
                |data| {
                    k += 1;
                    drop(cache.insert(k, data));
                },
                BatchSize::SmallInput,
            )
        });
    }
}

fn evict_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("evict-10-percent");
    group.sample_size(10);
    for (mode, name) in modes() {
        group.bench_function(name, |b| {
            b.iter_batched(
                || full_cache(mode, false),
                |cache| {
                    cache.set_max_bytes(BLOCKS * BLOCK as u64 * 9 / 10).unwrap();
                    cache.wait_for_eviction();
                    cache
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, hit, release, miss_insert, evict_batch);
criterion_main!(benches);
