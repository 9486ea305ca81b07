//! The read path: the blocks that cover a read, found in the cache or
//! fetched (adjacent missing ones with one ranged GET), each response
//! checked against the version the read serves.

use crate::error::FetchError;
use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::metadata::ObjectHead;
use crate::state::State;
use crate::stats::Counters;
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::ready;
use futures::stream::BoxStream;
use futures::task::{waker_ref, ArcWake};
use futures::StreamExt;
use multiarc::lock::poison::LockUnpoisoned;
use multiarc::Cache;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Block loads of one read in flight at once, at most.
const LOADS_IN_FLIGHT: usize = 64;

/// A fetch of adjacent blocks, shared by the loads of those blocks.
type SharedFetch<'a> = Arc<RunFetch<'a>>;

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
    // A read that waits (for a fetch, or the second tier) copies each
    // block's span out as the block arrives and lets the block go: a block
    // held while its read waits for the others cannot be evicted, and when
    // the recency list holds little but blocks still being read (a scan
    // with `p` at 0), the evictor then has only the frequency list to take
    // from, and the hot set goes. Only a read wholly served from memory
    // hands out holds on the cached blocks (no copy).
    let from_memory = planned.iter().all(|&(_, found)| found == Found::Memory);
    let runs = missing_runs(&planned, state.config.max_fetch_blocks);
    let fetches = run_fetches(state, location, head, &runs);
    let loads = planned.into_iter().map(|(block, found)| {
        let run = run_of(&runs, &fetches, block);
        let span = needed[&block].clone();
        let key = identity.block(block);
        if block >= ahead_from {
            // Read ahead: cached marked as such (not a use), none of its
            // bytes returned. Failed alone (e.g. another's load of it
            // failed), it costs this read nothing.
            return load_block_ahead(state, location, head, key, run)
                .map(move |r| {
                    if let Err(e) = r {
                        log::debug!("{location}: block {block} read ahead: {e}");
                    }
                    Ok(None)
                })
                .left_future();
        }
        async move {
            // A part of a block only the second tier holds: read and
            // verify that part alone, leaving the block there (the tier
            // declines a part too large, or a block read in parts much,
            // which is then read whole and cached in memory).
            if found == Found::SecondTier {
                if let Some(bytes) = state.cache.l2_read_part_async(&key, span.clone()).await {
                    state.counters.l2_part_hit();
                    return Ok(Some((block, (span.start, Bytes::from(bytes)))));
                }
            }
            let bytes = load_block(
                state,
                location,
                head,
                key,
                span.clone(),
                found,
                from_memory,
                run,
            )
            .await?;
            Ok(Some((block, (span.start, bytes))))
        }
        .right_future()
    });
    // Every load runs to its end, even after one failed: a load dropped
    // unfinished would be abandoned, and the readers waiting for it would
    // fetch the block again instead of getting the error of the fetch that
    // failed (a run's blocks not yet filled all fail at once).
    let loaded: Vec<Result<_, Arc<FetchError>>> = futures::stream::iter(loads)
        .buffered(LOADS_IN_FLIGHT)
        .collect()
        .await;
    // Block -> (the offset of its span, the span's bytes).
    let mut blocks: BTreeMap<u64, (u64, Bytes)> = BTreeMap::new();
    for result in loaded {
        if let Some((block, span)) = result? {
            blocks.insert(block, span);
        }
    }
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

/// Runs of adjacent missing blocks of `planned`, each at most `max_blocks`.
fn missing_runs(planned: &[(u64, Found)], max_blocks: u64) -> Vec<Range<u64>> {
    let mut runs: Vec<Range<u64>> = Vec::new();
    for &(block, found) in planned {
        if found != Found::Missing {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.end == block && run.end - run.start < max_blocks => run.end += 1,
            _ => runs.push(block..block + 1),
        }
    }
    runs
}

/// The fetch (of `fetches`, one per run of `runs`) that holds `block`.
fn run_of<'a>(
    runs: &[Range<u64>],
    fetches: &[SharedFetch<'a>],
    block: u64,
) -> Option<SharedFetch<'a>> {
    runs.iter()
        .position(|run| run.contains(&block))
        .map(|i| Arc::clone(&fetches[i]))
}

/// Loads the blocks of `blocks` (of the version `head` describes) that
/// memory does not hold and no one is loading into the cache, ahead of the
/// reads expected to need them: marked as read ahead
/// ([`Cache::load_ahead_async`]: not a use of the block, so a reader's
/// single later read of it does not promote it). Missing adjacent blocks
/// share a ranged GET; blocks the second tier holds come from it. Returns
/// the number of blocks loaded, or the first error once every load is
/// over (the blocks completed before it stay cached).
pub(crate) async fn load_ahead<S: ObjectStore>(
    state: &State<S>,
    location: &Path,
    head: &ObjectHead,
    blocks: Range<u64>,
) -> Result<u64, Arc<FetchError>> {
    let block_size = state.config.block_size;
    let identity = ObjectIdentity::of(&state.config.namespace, location, &head.meta, block_size);
    let planned: Vec<(u64, Found)> = blocks
        .filter_map(|block| {
            let key = identity.block(block);
            if state.cache.contains(&key) || state.cache.is_loading(&key) {
                None
            } else if state.cache.l2_contains(&key) {
                Some((block, Found::SecondTier))
            } else {
                Some((block, Found::Missing))
            }
        })
        .collect();
    let runs = missing_runs(&planned, state.config.max_fetch_blocks);
    let fetches = run_fetches(state, location, head, &runs);
    let loads = planned.into_iter().map(|(block, _)| {
        let run = run_of(&runs, &fetches, block);
        load_block_ahead(state, location, head, identity.block(block), run)
    });
    // Every load runs to its end (see `read_ranges`).
    let loaded: Vec<Result<bool, Arc<FetchError>>> = futures::stream::iter(loads)
        .buffered(LOADS_IN_FLIGHT)
        .collect()
        .await;
    let mut count = 0;
    for result in loaded {
        count += u64::from(result?);
    }
    Ok(count)
}

/// Block `key.block` into the cache ahead of any read of it, marked as
/// read ahead: from `run` (the fetch of adjacent missing blocks that holds
/// it) or a GET of its own, or the second tier; nothing if memory holds it
/// or someone is loading it. True if this call loaded it.
async fn load_block_ahead<'a, S: ObjectStore>(
    state: &'a State<S>,
    location: &'a Path,
    head: &'a ObjectHead,
    key: ObjectBlockKey,
    run: Option<SharedFetch<'a>>,
) -> Result<bool, Arc<FetchError>> {
    let block = key.block;
    let loader = || fetch_block(state, location, head, block, run);
    state
        .cache
        .load_ahead_async(key, loader)
        .await
        .map_err(|shared| Arc::clone(&*shared))
}

/// One shared ranged GET for each run of adjacent missing blocks.
fn run_fetches<'a, S: ObjectStore>(
    state: &'a State<S>,
    location: &'a Path,
    head: &'a ObjectHead,
    runs: &[Range<u64>],
) -> Vec<SharedFetch<'a>> {
    runs.iter()
        .map(|run| Arc::new(RunFetch::new(state, location, head, run.clone())))
        .collect()
}

/// The bytes of `block`: from `run` (the fetch of adjacent missing blocks
/// that holds it), or from a GET of its own.
async fn fetch_block<'a, S: ObjectStore>(
    state: &'a State<S>,
    location: &'a Path,
    head: &'a ObjectHead,
    block: u64,
    run: Option<SharedFetch<'a>>,
) -> Result<Vec<u8>, Arc<FetchError>> {
    match run {
        Some(fetch) => fetch.block(block).await,
        None => {
            RunFetch::new(state, location, head, block..block + 1)
                .block(block)
                .await
        }
    }
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
pub(crate) fn block_len(size: u64, block_size: u64, block: u64) -> u64 {
    size.saturating_sub(block * block_size).min(block_size)
}

/// Bytes `span` of block `key.block` through the cache: from memory, the
/// second tier, or a load, which takes the block from `run` (the read's
/// fetch of adjacent missing blocks that holds it) or, for a block planned
/// as cached but gone since, fetches it alone. The bytes hold the cached
/// block (no copy) only if the read is served wholly from memory
/// (`from_memory`) and this block was not loaded meanwhile; else they are
/// a copy and the block is let go at once (see `read_ranges`).
#[allow(clippy::too_many_arguments)]
async fn load_block<'a, S: ObjectStore>(
    state: &'a State<S>,
    location: &'a Path,
    head: &'a ObjectHead,
    key: ObjectBlockKey,
    span: Range<u64>,
    found: Found,
    from_memory: bool,
    run: Option<SharedFetch<'a>>,
) -> Result<Bytes, Arc<FetchError>> {
    let block = key.block;
    let loaded_here = AtomicBool::new(false);
    let loader = || {
        loaded_here.store(true, Ordering::Relaxed);
        fetch_block(state, location, head, block, run)
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
    let keep_hold = from_memory && !loaded_here.load(Ordering::Relaxed);
    match bytes {
        Some(bytes) if len as u64 == expected && keep_hold => Ok(bytes),
        Some(bytes) if len as u64 == expected => Ok(Bytes::copy_from_slice(&bytes)),
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

/// Where a ranged GET of a run of blocks stands.
enum Body<'a> {
    /// Sent, not answered yet: resolves to the body once the response's
    /// headers have been checked.
    Starting(
        BoxFuture<'a, Result<BoxStream<'static, object_store::Result<Bytes>>, Arc<FetchError>>>,
    ),
    /// The body, streaming in.
    Streaming(BoxStream<'static, object_store::Result<Bytes>>),
    /// Over: every block arrived, or the fetch failed.
    Over,
}

/// A block of a run, as its load sees it.
enum Slot {
    /// Its bytes have not all arrived.
    Pending,
    /// All its bytes, until its load takes them.
    Ready(Vec<u8>),
    /// Taken by its load.
    Taken,
}

/// The state of a [`RunFetch`], behind its lock.
struct Progress<'a> {
    body: Body<'a>,
    slots: Vec<Slot>,
    /// The block (index in the run) whose bytes are arriving, and its
    /// bytes so far.
    filling: usize,
    partial: Vec<u8>,
    /// Why the blocks not yet complete never will be.
    failed: Option<Arc<FetchError>>,
}

/// The loads waiting on a [`RunFetch`], by block index in the run. As a
/// waker (the one the body is polled with), it wakes them all: whichever
/// is polled first drives the body on.
struct Waiting(Mutex<Vec<Option<Waker>>>);

impl Waiting {
    fn wake_one(&self, index: usize) {
        let waker = self.0.lock_unpoisoned()[index].take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl ArcWake for Waiting {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        let wakers: Vec<Waker> = arc_self
            .0
            .lock_unpoisoned()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for waker in wakers {
            waker.wake();
        }
    }
}

/// One ranged GET of a run of adjacent blocks, shared by the loads of
/// those blocks, its body cut into blocks as it streams in: each block's
/// load gets the block as soon as its bytes have arrived, not once the
/// whole body has (a reader of the first block of a long GET waits for one
/// block, and the cache's single-flight waiters of each block are woken as
/// it completes). The GET is sent when the first load polls it; whichever
/// load is polled drives the body (under the lock), with a waker that wakes
/// every load waiting. If the body fails or ends short, every block not yet
/// complete gets the error (an object that shrank is `Changed`, never
/// short bytes); blocks completed before it are whole and of the version
/// the GET was conditional on. The last block is handed over only once
/// the body has ended with no byte too many.
pub(crate) struct RunFetch<'a> {
    /// The run's first block.
    first: u64,
    /// Each block's length.
    lens: Vec<usize>,
    progress: Mutex<Progress<'a>>,
    waiting: Arc<Waiting>,
    counters: &'a Counters,
}

impl<'a> RunFetch<'a> {
    /// A fetch of blocks `run` of the version `head` describes (sent when
    /// first polled).
    fn new<S: ObjectStore>(
        state: &'a State<S>,
        location: &'a Path,
        head: &'a ObjectHead,
        run: Range<u64>,
    ) -> RunFetch<'a> {
        let block_size = state.config.block_size;
        let lens: Vec<usize> = run
            .clone()
            .map(|block| block_len(head.meta.size, block_size, block) as usize)
            .collect();
        let n = lens.len();
        RunFetch {
            first: run.start,
            progress: Mutex::new(Progress {
                body: Body::Starting(send_fetch(state, location, head, run).boxed()),
                slots: (0..n).map(|_| Slot::Pending).collect(),
                filling: 0,
                partial: Vec::with_capacity(lens.first().copied().unwrap_or(0)),
                failed: None,
            }),
            lens,
            waiting: Arc::new(Waiting(Mutex::new(vec![None; n]))),
            counters: &state.counters,
        }
    }

    /// The bytes of block `block` (of the run), once they have arrived.
    async fn block(&self, block: u64) -> Result<Vec<u8>, Arc<FetchError>> {
        let index = (block - self.first) as usize;
        futures::future::poll_fn(|cx| self.poll_block(index, cx)).await
    }

    fn poll_block(
        &self,
        index: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Vec<u8>, Arc<FetchError>>> {
        let mut progress = self.progress.lock_unpoisoned();
        loop {
            match std::mem::replace(&mut progress.slots[index], Slot::Taken) {
                Slot::Ready(bytes) => return Poll::Ready(Ok(bytes)),
                Slot::Taken => {
                    return Poll::Ready(Err(Arc::new(FetchError::Changed(format!(
                        "block {} of a fetch was asked for twice",
                        self.first + index as u64
                    )))))
                }
                Slot::Pending => progress.slots[index] = Slot::Pending,
            }
            if let Some(e) = &progress.failed {
                return Poll::Ready(Err(Arc::clone(e)));
            }
            self.waiting.0.lock_unpoisoned()[index] = Some(cx.waker().clone());
            let waker = waker_ref(&self.waiting);
            if self
                .step(&mut progress, &mut Context::from_waker(&waker), index)
                .is_pending()
            {
                return Poll::Pending;
            }
        }
    }

    /// Drives the GET one step: `Ready` once something changed (a part of
    /// the body taken in, the fetch answered, ended or failed), `Pending`
    /// if nothing can be done until `cx` is woken. `index` is the caller's
    /// block (the others completed are woken).
    fn step(&self, progress: &mut Progress<'a>, cx: &mut Context<'_>, index: usize) -> Poll<()> {
        match &mut progress.body {
            Body::Starting(start) => {
                let started = ready!(start.poll_unpin(cx));
                match started {
                    Ok(stream) => progress.body = Body::Streaming(stream),
                    Err(e) => self.fail(progress, e),
                }
            }
            Body::Streaming(stream) => match ready!(stream.poll_next_unpin(cx)) {
                Some(Ok(bytes)) => {
                    Counters::add(&self.counters.store_bytes, bytes.len() as u64);
                    self.take_in(progress, &bytes, index);
                }
                Some(Err(e)) => self.fail(progress, classify(e)),
                None => {
                    let last = self.lens.len() - 1;
                    if progress.filling == last && progress.partial.len() == self.lens[last] {
                        let bytes = std::mem::take(&mut progress.partial);
                        progress.slots[last] = Slot::Ready(bytes);
                        progress.filling += 1;
                        progress.body = Body::Over;
                        Counters::add(&self.counters.blocks_fetched, 1);
                        self.waiting.wake_one(last);
                    } else {
                        let got: usize = self.lens[..progress.filling.min(self.lens.len())]
                            .iter()
                            .sum::<usize>()
                            + progress.partial.len();
                        let expected: usize = self.lens.iter().sum();
                        self.fail(
                            progress,
                            Arc::new(FetchError::Changed(format!(
                                "the body ended after {got} of {expected} bytes"
                            ))),
                        );
                    }
                }
            },
            Body::Over => {
                // Not reached: a fetch is over once every block is in or
                // it failed, and either is seen before a step.
                self.fail(
                    progress,
                    Arc::new(FetchError::Changed("the fetch is over".into())),
                );
            }
        }
        Poll::Ready(())
    }

    /// Cuts `bytes`, the next part of the body, into the blocks being
    /// filled; each block completed (but the last, which waits for the
    /// body's end) is handed to its load's slot and that load woken.
    fn take_in(&self, progress: &mut Progress<'a>, mut bytes: &[u8], index: usize) {
        let last = self.lens.len() - 1;
        while !bytes.is_empty() {
            let at = progress.filling;
            if at > last || (at == last && progress.partial.len() == self.lens[last]) {
                let expected: usize = self.lens.iter().sum();
                return self.fail(
                    progress,
                    Arc::new(FetchError::Changed(format!(
                        "more than the {expected} bytes asked for received"
                    ))),
                );
            }
            let want = self.lens[at] - progress.partial.len();
            let take = want.min(bytes.len());
            progress.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if take == want && at < last {
                let next = Vec::with_capacity(self.lens[at + 1]);
                let full = std::mem::replace(&mut progress.partial, next);
                progress.slots[at] = Slot::Ready(full);
                progress.filling += 1;
                Counters::add(&self.counters.blocks_fetched, 1);
                if at != index {
                    self.waiting.wake_one(at);
                }
            }
        }
    }

    /// Ends the fetch with `e`: the blocks not complete get it, and every
    /// load waiting is woken.
    fn fail(&self, progress: &mut Progress<'a>, e: Arc<FetchError>) {
        progress.body = Body::Over;
        progress.partial = Vec::new();
        progress.failed = Some(e);
        ArcWake::wake_by_ref(&self.waiting);
    }
}

/// The cached store's error for the inner store's `e` (a failed
/// condition, or an object gone, means the object changed).
fn classify(e: object_store::Error) -> Arc<FetchError> {
    Arc::new(match e {
        object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. } => {
            FetchError::Changed(e.to_string())
        }
        e => FetchError::Store(Arc::new(e)),
    })
}

/// Sends one ranged GET of blocks `run` of the version `head` describes:
/// conditional on its ETag (and pinned to its version, if it has one), and
/// the response checked (ETag, version, size, range), since some servers
/// ignore `If-Match`. Returns the body, whose length [`RunFetch`] checks.
async fn send_fetch<S: ObjectStore>(
    state: &State<S>,
    location: &Path,
    head: &ObjectHead,
    run: Range<u64>,
) -> Result<BoxStream<'static, object_store::Result<Bytes>>, Arc<FetchError>> {
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
    Ok(response.into_stream())
}
