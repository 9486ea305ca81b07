//! The read path: the blocks that cover a read, found in the cache or
//! fetched (adjacent missing ones with one ranged GET), each response
//! checked against the version the read serves.

use crate::error::FetchError;
use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::metadata::ObjectHead;
use crate::stats::Counters;
use crate::store::State;
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{StreamExt, TryStreamExt};
use multiarc::Cache;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Block loads of one read in flight at once, at most.
const LOADS_IN_FLIGHT: usize = 64;

/// The blocks of one fetch, in order, or why there are none.
type Fetched = Result<Arc<Vec<Bytes>>, Arc<FetchError>>;

/// A fetch of adjacent blocks, shared by the loads of those blocks.
type SharedFetch<'a> = Shared<BoxFuture<'a, Fetched>>;

/// Where a block was when the read was planned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    Memory,
    SecondTier,
    Missing,
}

/// The bytes of each of `ranges` (each within the object, possibly empty),
/// as slices of the blocks of the version `head` describes. Each block is
/// loaded once however many ranges cover it, and only the span of it that
/// the ranges cover is copied out of the cache.
pub(crate) async fn read_ranges<S: ObjectStore>(
    state: &State<S>,
    location: &Path,
    head: &ObjectHead,
    ranges: &[Range<u64>],
) -> Result<Vec<Vec<Bytes>>, Arc<FetchError>> {
    let block_size = state.config.block_size;
    let identity = ObjectIdentity::of(&state.config.namespace, location, &head.meta, block_size);
    // Each block the ranges cover, with the span of it they cover.
    let mut needed: BTreeMap<u64, Range<u64>> = BTreeMap::new();
    for r in ranges.iter().filter(|r| r.start < r.end) {
        for block in r.start / block_size..=(r.end - 1) / block_size {
            let start = block * block_size;
            let lo = r.start.max(start) - start;
            let hi = r.end.min(start + block_size) - start;
            let span = needed.entry(block).or_insert(lo..hi);
            *span = span.start.min(lo)..span.end.max(hi);
        }
    }
    let mut planned: Vec<(u64, Found)> = needed
        .keys()
        .map(|&block| {
            let key = identity.block(block);
            let found = if state.cache.contains(&key) {
                Found::Memory
            } else if state.cache.l2_contains(&key) {
                Found::SecondTier
            } else {
                Found::Missing
            };
            (block, found)
        })
        .collect();
    // Readahead: for a sequential read whose last block is missing, the
    // blocks past it that no tier holds and no one is loading, up to the
    // stream's window, join its fetch. Their spans are empty: the read
    // returns none of their bytes, it only caches them.
    let ahead_from = needed.keys().next_back().map_or(0, |last| last + 1);
    if let Some(span) = read_span(ranges) {
        let missed = planned.last().is_some_and(|&(_, f)| f == Found::Missing);
        let blocks = head.meta.size.div_ceil(block_size);
        let ahead = state
            .readahead
            .advance(&identity, span, missed, block_size, blocks);
        for block in ahead {
            let key = identity.block(block);
            if state.cache.contains(&key)
                || state.cache.l2_contains(&key)
                || state.cache.is_loading(&key)
            {
                break;
            }
            needed.insert(block, 0..0);
            planned.push((block, Found::Missing));
            Counters::add(&state.counters.readahead_blocks, 1);
        }
    }
    // Runs of adjacent missing blocks, each at most `max_fetch_blocks`.
    let mut runs: Vec<Range<u64>> = Vec::new();
    for &(block, found) in &planned {
        if found != Found::Missing {
            continue;
        }
        match runs.last_mut() {
            Some(run)
                if run.end == block && run.end - run.start < state.config.max_fetch_blocks =>
            {
                run.end += 1
            }
            _ => runs.push(block..block + 1),
        }
    }
    let fetches: Vec<SharedFetch<'_>> = runs
        .iter()
        .map(|run| {
            fetch_blocks(state, location, head, run.clone())
                .boxed()
                .shared()
        })
        .collect();
    let loads = planned.into_iter().map(|(block, found)| {
        let run = runs
            .iter()
            .position(|run| run.contains(&block))
            .map(|i| (runs[i].start, fetches[i].clone()));
        let span = needed[&block].clone();
        load_block(
            state,
            location,
            head,
            identity.block(block),
            span.clone(),
            found,
            run,
        )
        .map(move |r| match r {
            Ok(bytes) => Ok(Some((block, (span.start, bytes)))),
            // A block read ahead that failed alone (e.g. another's load
            // of it failed) costs this read nothing.
            Err(e) if block >= ahead_from => {
                log::debug!("{location}: block {block} read ahead: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        })
    });
    // Block -> (the offset of its span, the span's bytes).
    let blocks: BTreeMap<u64, (u64, Bytes)> = futures::stream::iter(loads)
        .buffered(LOADS_IN_FLIGHT)
        .try_filter_map(|loaded| futures::future::ready(Ok(loaded)))
        .try_collect()
        .await?;
    Ok(ranges
        .iter()
        .map(|r| {
            let mut chunks = Vec::new();
            let mut at = r.start;
            while at < r.end {
                let block = at / block_size;
                let (offset, bytes) = &blocks[&block];
                let start = block * block_size + offset;
                let end = r.end.min(start + bytes.len() as u64);
                chunks.push(bytes.slice((at - start) as usize..(end - start) as usize));
                at = end;
            }
            chunks
        })
        .collect())
}

/// The bytes from the first range's start to the last one's end, ignoring
/// empty ranges (`None` if all are empty).
fn read_span(ranges: &[Range<u64>]) -> Option<Range<u64>> {
    ranges
        .iter()
        .filter(|r| r.start < r.end)
        .fold(None, |span: Option<Range<u64>>, r| {
            Some(match span {
                None => r.clone(),
                Some(s) => s.start.min(r.start)..s.end.max(r.end),
            })
        })
}

/// The length of `block` of an object of `size` bytes.
fn block_len(size: u64, block_size: u64, block: u64) -> u64 {
    size.saturating_sub(block * block_size).min(block_size)
}

/// Bytes `span` of block `key.block` through the cache: from memory, the
/// second tier, or a load, which takes the block from `run` (the read's
/// fetch of adjacent missing blocks that holds it, starting at block
/// `run.0`) or, for a block planned as cached but gone since, fetches it
/// alone.
async fn load_block<'a, S: ObjectStore>(
    state: &'a State<S>,
    location: &'a Path,
    head: &'a ObjectHead,
    key: ObjectBlockKey,
    span: Range<u64>,
    found: Found,
    run: Option<(u64, SharedFetch<'a>)>,
) -> Result<Bytes, Arc<FetchError>> {
    let block = key.block;
    let loaded_here = AtomicBool::new(false);
    let loader = || async {
        loaded_here.store(true, Ordering::Relaxed);
        let (first, blocks) = match run {
            Some((first, fetch)) => (first, fetch.await?),
            None => (
                block,
                fetch_blocks(state, location, head, block..block + 1).await?,
            ),
        };
        Ok::<_, Arc<FetchError>>(blocks[(block - first) as usize].to_vec())
    };
    let (len, bytes) = load_through_cache(&state.cache, key, span, loader).await?;
    let counters = &state.counters;
    if !loaded_here.load(Ordering::Relaxed) {
        match found {
            Found::Memory => Counters::add(&counters.memory_hits, 1),
            Found::SecondTier => Counters::add(&counters.l2_hits, 1),
            Found::Missing => Counters::add(&counters.single_flight_waits, 1),
        }
    }
    let expected = block_len(head.meta.size, state.config.block_size, block);
    match bytes {
        Some(bytes) if len as u64 == expected => Ok(bytes),
        _ => Err(Arc::new(FetchError::Changed(format!(
            "block {block} has {len} bytes, {expected} expected"
        )))),
    }
}

/// The cache's read-through load of one block: a hit in memory, a hit in
/// the second tier (read on the cache's I/O threads), or `loader`'s bytes,
/// cached. Concurrent loads of one key, from any task or thread, run one
/// loader; the others wait for it (single flight). Returns the block's
/// length and its bytes `span` (`None` if the block is shorter).
///
/// The bytes are not copied: the returned [`Bytes`] owns a hold on the
/// cached block ([`multiarc::OwnedHandle`]), released when the last slice
/// of it is dropped. A block evicted meanwhile stays in memory, outside the
/// cache's budget, until then (as a page a reader still maps).
async fn load_through_cache<F, Fut>(
    cache: &Arc<Cache<ObjectBlockKey>>,
    key: ObjectBlockKey,
    span: Range<u64>,
    loader: F,
) -> Result<(usize, Option<Bytes>), Arc<FetchError>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, Arc<FetchError>>>,
{
    match Arc::clone(cache).get_or_load_async_owned(key, loader).await {
        Ok(block) => {
            let len = block.len();
            let span = span.start as usize..span.end as usize;
            let bytes = (span.start <= span.end && span.end <= len)
                .then(|| Bytes::from_owner(block).slice(span));
            Ok((len, bytes))
        }
        Err(shared) => Err(Arc::clone(&shared)),
    }
}

/// One ranged GET of blocks `run` of the version `head` describes:
/// conditional on its ETag (and pinned to its version, if it has one), and
/// the response checked (ETag, version, size, length), since some servers
/// ignore `If-Match`.
async fn fetch_blocks<S: ObjectStore>(
    state: &State<S>,
    location: &Path,
    head: &ObjectHead,
    run: Range<u64>,
) -> Fetched {
    let meta = &head.meta;
    let block_size = state.config.block_size;
    let range = run.start * block_size..meta.size.min(run.end * block_size);
    let options = GetOptions {
        if_match: meta.e_tag.clone(),
        version: meta.version.clone(),
        range: Some(GetRange::Bounded(range.clone())),
        ..GetOptions::default()
    };
    let counters = &state.counters;
    Counters::add(&counters.store_requests, 1);
    Counters::add(&counters.block_requests, 1);
    let blocks = run.end - run.start;
    if blocks > 1 {
        Counters::add(&counters.coalesced_requests, 1);
        Counters::add(&counters.coalesced_blocks, blocks - 1);
    }
    let classify = |e: object_store::Error| -> Arc<FetchError> {
        Arc::new(match e {
            object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. } => {
                FetchError::Changed(e.to_string())
            }
            e => FetchError::Store(Arc::new(e)),
        })
    };
    let changed = |why: String| Arc::new(FetchError::Changed(why));
    let response = state
        .inner
        .get_opts(location, options)
        .await
        .map_err(classify)?;
    let got = &response.meta;
    if meta.e_tag.is_some() && got.e_tag != meta.e_tag {
        return Err(changed(format!(
            "ETag {:?} where {:?} was read",
            got.e_tag, meta.e_tag
        )));
    }
    if meta.version.is_some() && got.version != meta.version {
        return Err(changed(format!(
            "version {:?} where {:?} was read",
            got.version, meta.version
        )));
    }
    if got.size != meta.size || response.range != range {
        return Err(changed(format!(
            "{} bytes (range {:?}) where {} bytes (range {:?}) were expected",
            got.size, response.range, meta.size, range
        )));
    }
    let bytes = response.bytes().await.map_err(classify)?;
    if bytes.len() as u64 != range.end - range.start {
        return Err(changed(format!(
            "{} bytes received for range {range:?}",
            bytes.len()
        )));
    }
    Counters::add(&counters.store_bytes, bytes.len() as u64);
    Counters::add(&counters.blocks_fetched, blocks);
    Ok(Arc::new(
        run.map(|block| {
            let start = (block * block_size - range.start) as usize;
            let len = block_len(meta.size, block_size, block) as usize;
            bytes.slice(start..start + len)
        })
        .collect(),
    ))
}
