//! `multiarc bench async-hit`: what a hit costs through the cache's async
//! path against its sync one (the target: an async hit costs at most 1.5x
//! a sync `get` of the same block, including the copy, so that async
//! callers do not pay for the single flight on every hit).
//!
//! For each block size, one block is cached (warm) in a multiarc cache, and
//! one thread times, per operation:
//!
//! - `sync-get`: `cache.get(&key)` and a copy of the block's bytes into a
//!   reused buffer;
//! - `async-poll`: `cache.get_or_load_async(key, loader)` (a hit: the
//!   loader never runs) polled once with a no-op waker, and the same copy.
//!   This is the cheapest executor there is: the row measures the cache's
//!   async path (its future's state machine, the lookup, the handle), not
//!   an executor's scheduling. A hit is ready at its first poll; a
//!   `Pending` would be an error;
//! - `async-block-on`: the same future driven by
//!   `futures::executor::block_on` per operation, what a simple caller
//!   without a runtime pays (its thread-local waker and the enter check);
//! - `store-get-range`: a whole `CachedStore::get_range` of the block on a
//!   hit (metadata from its cache, the block's key, the cache's async load,
//!   and its copy into the returned bytes), over an in-memory store, driven
//!   by `futures::executor::block_on`.
//!
//! Each repetition runs every row for `--seconds`, the rows back to back
//! in an order rotated by one per repetition; each row's median ns/op over
//! the repetitions is reported, with its ratio to `sync-get`.

use crate::cli::text_table;
use crate::harness::{machine, Bar, Machine};
use anyhow::{bail, Context as _};
use multiarc::Cache;
use multiarc_object_store::CachedStore;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde::Serialize;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What one run measures (its flags).
pub struct AsyncHitArgs {
    pub block_sizes: Vec<u64>,
    pub seconds: f64,
    pub repeat: usize,
    pub json: bool,
}

/// The rows, in their base order.
const ROWS: [&str; 4] = [
    "sync-get",
    "async-poll",
    "async-block-on",
    "store-get-range",
];

/// The target: an async hit at most this many times a sync one.
const TARGET_RATIO: f64 = 1.5;

#[derive(Serialize)]
struct AsyncHitResult {
    row: &'static str,
    block_size: u64,
    ns_per_op: f64,
    /// `ns_per_op` over `sync-get`'s at the same block size.
    ratio_to_sync: f64,
    /// Every repetition's ns/op, in order.
    samples_ns: Vec<f64>,
}

#[derive(Serialize)]
struct AsyncHitConfig {
    block_sizes: Vec<u64>,
    seconds: f64,
    repeat: usize,
    executor: &'static str,
    target_ratio: f64,
}

#[derive(Serialize)]
struct AsyncHitReport {
    machine: Machine,
    config: AsyncHitConfig,
    results: Vec<AsyncHitResult>,
    /// Per block size: `async-poll`'s ratio, and whether it is within the
    /// target.
    target: Vec<TargetCheck>,
}

#[derive(Serialize)]
struct TargetCheck {
    block_size: u64,
    async_ratio: f64,
    met: bool,
}

/// `future`'s output if it is ready at its first poll (with a no-op waker).
fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// Never runs on a hit; a load would be a bug of the benchmark.
async fn no_load() -> Result<Vec<u8>, std::io::Error> {
    Err(std::io::Error::other("the block was not cached"))
}

/// Runs `op` in batches until `seconds` passed; ns per op.
fn time_ops(seconds: f64, mut op: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    const BATCH: u64 = 64;
    // Warm up (caches, branch predictors, the first allocation).
    for _ in 0..BATCH {
        op()?;
    }
    let started = Instant::now();
    let mut ops = 0u64;
    loop {
        for _ in 0..BATCH {
            op()?;
        }
        ops += BATCH;
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed >= seconds {
            return Ok(elapsed * 1e9 / ops as f64);
        }
    }
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One block size: every row's ns/op samples, in `ROWS` order; each row
/// run counted on `bar`.
fn measure(
    block_size: u64,
    seconds: f64,
    repeat: usize,
    bar: &Bar,
) -> anyhow::Result<Vec<Vec<f64>>> {
    let len = usize::try_from(block_size).context("--block-size too large")?;
    let cache = Cache::<u64>::builder()
        .max_bytes((block_size * 4).max(1 << 20))
        .build()
        .context("building the cache")?;
    let key = 7u64;
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    drop(cache.insert(key, data.clone()));
    let store = CachedStore::builder(object_store::memory::InMemory::new())
        .max_bytes((block_size * 4).max(1 << 20))
        .block_size(block_size)
        .metadata_forever()
        .readahead(0)
        .build()
        .context("building the cached store")?;
    let path = Path::from("async-hit/block");
    futures::executor::block_on(async {
        store.put(&path, PutPayload::from(data.clone())).await?;
        store.get_range(&path, 0..block_size).await
    })
    .context("warming the cached store")?;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let mut samples = vec![Vec::with_capacity(repeat); ROWS.len()];
    for rep in 0..repeat {
        for i in 0..ROWS.len() {
            let row = (i + rep) % ROWS.len();
            bar.doing(format!(
                "{} blocks, repetition {}/{repeat}, {}",
                multiarc::units::human_bytes(block_size),
                rep + 1,
                ROWS[row]
            ));
            let ns = match ROWS[row] {
                "sync-get" => time_ops(seconds, || {
                    let block = cache.get(&key).context("the warm block is missing")?;
                    buf.clear();
                    buf.extend_from_slice(&block);
                    Ok(())
                })?,
                "async-poll" => time_ops(seconds, || {
                    let block = poll_once(cache.get_or_load_async(key, no_load))
                        .context("an async hit was not ready at its first poll")?
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    buf.clear();
                    buf.extend_from_slice(&block);
                    Ok(())
                })?,
                "async-block-on" => time_ops(seconds, || {
                    let block = futures::executor::block_on(cache.get_or_load_async(key, no_load))
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    buf.clear();
                    buf.extend_from_slice(&block);
                    Ok(())
                })?,
                _ => time_ops(seconds, || {
                    let bytes = futures::executor::block_on(store.get_range(&path, 0..block_size))?;
                    anyhow::ensure!(bytes.len() == len, "a short read");
                    Ok(())
                })?,
            };
            samples[row].push(ns);
            bar.runs_done(1);
        }
    }
    if buf != data {
        bail!("the copied block differs from the cached one");
    }
    if store.stats().store_requests != 2 {
        bail!(
            "the cached store's hits went to the store: {:?}",
            store.stats()
        );
    }
    Ok(samples)
}

/// Runs the async-hit benchmark.
pub fn run(args: AsyncHitArgs) -> anyhow::Result<()> {
    crate::cli::check_seconds(args.seconds)?;
    if let Some(bad) = args
        .block_sizes
        .iter()
        .find(|&&b| !(4096..=64 << 20).contains(&b))
    {
        bail!(
            "--block-size must be between 4 KiB and 64 MiB, got {}",
            multiarc::units::human_bytes(*bad)
        );
    }
    let mut results = Vec::new();
    let mut target = Vec::new();
    let runs = args.block_sizes.len() * args.repeat * ROWS.len();
    let bar = Bar::new("bench async-hit", runs, args.json);
    for &block_size in &args.block_sizes {
        let samples = measure(block_size, args.seconds, args.repeat, &bar)?;
        let sync = median(&samples[0]);
        for (row, samples) in ROWS.iter().zip(samples) {
            let ns = median(&samples);
            results.push(AsyncHitResult {
                row,
                block_size,
                ns_per_op: ns,
                ratio_to_sync: ns / sync,
                samples_ns: samples,
            });
        }
        let async_ratio = results[results.len() - ROWS.len() + 1].ratio_to_sync;
        target.push(TargetCheck {
            block_size,
            async_ratio,
            met: async_ratio <= TARGET_RATIO,
        });
    }
    bar.finish(&format!("{runs} runs"));
    if args.json {
        let report = AsyncHitReport {
            machine: machine(),
            config: AsyncHitConfig {
                block_sizes: args.block_sizes,
                seconds: args.seconds,
                repeat: args.repeat,
                executor: "async-poll: one poll with a no-op waker; async-block-on and \
                           store-get-range: futures::executor::block_on per op",
                target_ratio: TARGET_RATIO,
            },
            results,
            target,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut table = text_table(["row", "block", "ns/op", "x sync-get"], 2);
    for r in &results {
        table.add_row(vec![
            r.row.to_string(),
            multiarc::units::human_bytes(r.block_size),
            format!("{:.0}", r.ns_per_op),
            format!("{:.2}", r.ratio_to_sync),
        ]);
    }
    println!(
        "async hit vs sync get, one thread, medians of {} x {} s",
        args.repeat, args.seconds
    );
    println!("{}", table.trim_fmt());
    for t in &target {
        println!(
            "target (async-poll <= {TARGET_RATIO}x sync-get) at {}: {} ({:.2}x)",
            multiarc::units::human_bytes(t.block_size),
            if t.met { "met" } else { "missed" },
            t.async_ratio
        );
    }
    Ok(())
}
