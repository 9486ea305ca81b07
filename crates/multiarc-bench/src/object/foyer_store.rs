//! The `foyer-hybrid` row: foyer's `HybridCache` (memory plus a disk) as
//! the block cache of an `ObjectStore` wrapper of the same shape as
//! `CachedStore`: the same block size, aligned blocks keyed by a digest of
//! the object version's identity and the block index (40 bytes, as
//! `ObjectBlockKey`), metadata fetched once per object and kept (the
//! cached rows are built with `metadata_forever`), the missing adjacent
//! blocks of one read fetched with one ranged GET (bounded like
//! `CachedStore`'s), conditional on the ETag and checked, and concurrent
//! loads of one block made one request (foyer's `get_or_fetch`). Reads
//! only: the benchmark writes its objects through the bare client.

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ObjectMeta, ObjectStore, Result,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Block loads of one read in flight at once (as `CachedStore`).
const LOADS_IN_FLIGHT: usize = 64;

/// A block's key: the digest of its object version's identity and its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct BlockKey {
    identity: [u8; 32],
    block: u64,
}

impl foyer::Code for BlockKey {
    fn encode(&self, writer: &mut impl std::io::Write) -> foyer::Result<()> {
        writer
            .write_all(&self.identity)
            .and_then(|()| writer.write_all(&self.block.to_le_bytes()))
            .map_err(foyer::Error::io_error)
    }

    fn decode(reader: &mut impl std::io::Read) -> foyer::Result<BlockKey> {
        let mut identity = [0u8; 32];
        let mut block = [0u8; 8];
        reader
            .read_exact(&mut identity)
            .and_then(|()| reader.read_exact(&mut block))
            .map_err(foyer::Error::io_error)?;
        Ok(BlockKey {
            identity,
            block: u64::from_le_bytes(block),
        })
    }

    fn estimated_size(&self) -> usize {
        40
    }
}

/// The digest of one object version's identity (location, ETag, version,
/// size, block size).
fn identity(location: &Path, meta: &ObjectMeta, block_size: u64) -> [u8; 32] {
    let mut hash = Sha256::new();
    for field in [
        location.as_ref().as_bytes(),
        meta.e_tag.as_deref().unwrap_or("").as_bytes(),
        meta.version.as_deref().unwrap_or("").as_bytes(),
    ] {
        hash.update((field.len() as u64).to_le_bytes());
        hash.update(field);
    }
    hash.update(meta.size.to_le_bytes());
    hash.update(block_size.to_le_bytes());
    hash.finalize().into()
}

pub(super) type Hybrid = foyer::HybridCache<BlockKey, Bytes>;

/// Where the block reads were served (the counters `CachedStore` keeps).
#[derive(Default)]
pub(super) struct BlockCounts {
    pub(super) memory_hits: AtomicU64,
    pub(super) disk_hits: AtomicU64,
    pub(super) single_flight_waits: AtomicU64,
    pub(super) blocks_fetched: AtomicU64,
}

/// A metadata fetch, shared by the reads that need it meanwhile.
type HeadFetch = Shared<BoxFuture<'static, Result<ObjectMeta, Arc<object_store::Error>>>>;

/// The blocks of one ranged GET, shared by the loads of those blocks.
type BlocksFetch = Shared<BoxFuture<'static, Result<Arc<Vec<Bytes>>, Arc<object_store::Error>>>>;

/// A `FoyerBlockStore` over `inner` with `memory` bytes of memory and,
/// given `disk` (a directory and its bytes), a disk: the `foyer-hybrid`
/// row (`foyer-memory` without the disk, foyer's no-op storage). One
/// shard: foyer's default of 8 would split a small memory budget into
/// eighths, each evicting on its own.
pub(crate) async fn hybrid<S: ObjectStore>(
    inner: S,
    memory: u64,
    disk: Option<(&std::path::Path, u64)>,
    block_size: u64,
) -> anyhow::Result<(FoyerBlockStore<S>, Arc<BlockCounts>, Hybrid)> {
    use foyer::{BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCacheBuilder};
    let storage = HybridCacheBuilder::new()
        .memory(memory as usize)
        .with_shards(1)
        .with_weighter(|_k: &BlockKey, v: &Bytes| v.len())
        .storage();
    let storage = match disk {
        Some((dir, bytes)) => {
            let device = FsDeviceBuilder::new(dir)
                .with_capacity(bytes as usize)
                .with_direct(true)
                .build()
                .map_err(|e| anyhow::anyhow!("its device: {e}"))?;
            storage.with_engine_config(BlockEngineConfig::new(device))
        }
        None => storage,
    };
    let cache = storage.build().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let store = FoyerBlockStore::new(
        inner,
        cache.clone(),
        block_size,
        multiarc_object_store::DEFAULT_MAX_FETCH,
    );
    let counts = store.counts();
    Ok((store, counts, cache))
}

/// A foyer hybrid cache (memory, and a disk if given) as the block cache
/// of an `ObjectStore` of `CachedStore`'s shape over `inner`: the peer the
/// benchmarks compare `CachedStore` with, for a caller outside this crate
/// (the scale benchmark).
pub async fn foyer_hybrid_store<S: ObjectStore>(
    inner: S,
    memory: u64,
    disk: Option<(&std::path::Path, u64)>,
    block_size: u64,
) -> anyhow::Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(hybrid(inner, memory, disk, block_size).await?.0))
}

/// Reads of `S` served from blocks in a foyer hybrid cache.
pub(super) struct FoyerBlockStore<S> {
    inner: Arc<S>,
    cache: Hybrid,
    block_size: u64,
    max_fetch_blocks: u64,
    heads: Mutex<HashMap<Path, HeadFetch>>,
    counts: Arc<BlockCounts>,
}

impl<S: ObjectStore> FoyerBlockStore<S> {
    pub(super) fn new(
        inner: S,
        cache: Hybrid,
        block_size: u64,
        max_fetch_bytes: u64,
    ) -> FoyerBlockStore<S> {
        FoyerBlockStore {
            inner: Arc::new(inner),
            cache,
            block_size,
            max_fetch_blocks: (max_fetch_bytes / block_size).max(1),
            heads: Mutex::default(),
            counts: Arc::default(),
        }
    }

    pub(super) fn counts(&self) -> Arc<BlockCounts> {
        Arc::clone(&self.counts)
    }

    /// The object's metadata: fetched once (one HEAD, shared), then kept.
    async fn head(&self, location: &Path) -> Result<ObjectMeta> {
        let fetch = {
            let mut heads = self.heads.lock().unwrap_or_else(|e| e.into_inner());
            heads
                .entry(location.clone())
                .or_insert_with(|| {
                    let inner = Arc::clone(&self.inner);
                    let location = location.clone();
                    async move {
                        inner
                            .get_opts(&location, GetOptions::new().with_head(true))
                            .await
                            .map(|r| r.meta)
                            .map_err(Arc::new)
                    }
                    .boxed()
                    .shared()
                })
                .clone()
        };
        match fetch.await {
            Ok(meta) => Ok(meta),
            Err(e) => {
                // Not kept: the next read asks again.
                self.heads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(location);
                Err(shared_error(&e))
            }
        }
    }

    /// The bytes of each of `ranges` (within the object) of version `meta`.
    async fn read_ranges(
        &self,
        location: &Path,
        meta: &ObjectMeta,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let block_size = self.block_size;
        let identity = identity(location, meta, block_size);
        let key = |block| BlockKey { identity, block };
        let mut needed: BTreeMap<u64, ()> = BTreeMap::new();
        for r in ranges.iter().filter(|r| r.start < r.end) {
            for block in r.start / block_size..=(r.end - 1) / block_size {
                needed.insert(block, ());
            }
        }
        // As CachedStore plans: in memory, on disk, or missing; runs of
        // adjacent missing blocks, each one GET.
        let planned: Vec<(u64, Found)> = needed
            .keys()
            .map(|&block| {
                let k = key(block);
                let found = if self.cache.memory().contains(&k) {
                    Found::Memory
                } else if self.cache.contains(&k) {
                    Found::Disk
                } else {
                    Found::Missing
                };
                (block, found)
            })
            .collect();
        let mut runs: Vec<Range<u64>> = Vec::new();
        for &(block, found) in &planned {
            if found != Found::Missing {
                continue;
            }
            match runs.last_mut() {
                Some(run) if run.end == block && run.end - run.start < self.max_fetch_blocks => {
                    run.end += 1
                }
                _ => runs.push(block..block + 1),
            }
        }
        let fetches: Vec<BlocksFetch> = runs
            .iter()
            .map(|run| self.fetch_blocks(location, meta, run.clone()))
            .collect();
        let loads = planned.into_iter().map(|(block, found)| {
            let run = runs
                .iter()
                .position(|run| run.contains(&block))
                .map(|i| (runs[i].start, fetches[i].clone()));
            self.load_block(location, meta, key(block), found, run)
                .map(move |r| r.map(|bytes| (block, bytes)))
        });
        let blocks: BTreeMap<u64, Bytes> = futures::stream::iter(loads)
            .buffered(LOADS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            let mut parts = Vec::new();
            let mut at = r.start;
            while at < r.end {
                let block = at / block_size;
                let start = block * block_size;
                let bytes = &blocks[&block];
                let end = r.end.min(start + bytes.len() as u64);
                if end <= at {
                    return Err(generic(format!(
                        "{location}: block {block} is short ({} bytes)",
                        bytes.len()
                    )));
                }
                parts.push(bytes.slice((at - start) as usize..(end - start) as usize));
                at = end;
            }
            out.push(match parts.len() {
                0 => Bytes::new(),
                1 => parts.pop().unwrap_or_default(),
                _ => Bytes::from(parts.concat()),
            });
        }
        Ok(out)
    }

    /// Block `key.block` through foyer: memory, disk, or the load, which
    /// takes it from `run` (the read's GET of the adjacent missing blocks
    /// that holds it) or, for a block planned as cached but gone since,
    /// fetches it alone.
    async fn load_block(
        &self,
        location: &Path,
        meta: &ObjectMeta,
        key: BlockKey,
        found: Found,
        run: Option<(u64, BlocksFetch)>,
    ) -> Result<Bytes> {
        let block = key.block;
        let (first, fetch) = match run {
            Some(run) => run,
            None => (block, self.fetch_blocks(location, meta, block..block + 1)),
        };
        let loaded_here = Arc::new(AtomicBool::new(false));
        let loaded = Arc::clone(&loaded_here);
        let entry = self
            .cache
            .get_or_fetch(&key, move || async move {
                loaded.store(true, Ordering::Relaxed);
                match fetch.await {
                    Ok(blocks) => Ok(blocks[(block - first) as usize].clone()),
                    Err(e) => Err(anyhow::anyhow!("{e}")),
                }
            })
            .await
            .map_err(|e| generic(format!("{location}: block {block}: {e}")))?;
        let counts = &self.counts;
        let counter = if loaded_here.load(Ordering::Relaxed) {
            &counts.blocks_fetched
        } else {
            match found {
                Found::Memory => &counts.memory_hits,
                Found::Disk => &counts.disk_hits,
                Found::Missing => &counts.single_flight_waits,
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(entry.value().clone())
    }

    /// One ranged GET of blocks `run`, conditional on the ETag, the
    /// response checked (ETag, size, range, length), as `CachedStore`'s.
    fn fetch_blocks(&self, location: &Path, meta: &ObjectMeta, run: Range<u64>) -> BlocksFetch {
        let inner = Arc::clone(&self.inner);
        let (location, meta) = (location.clone(), meta.clone());
        let block_size = self.block_size;
        async move {
            let range = run.start * block_size..meta.size.min(run.end * block_size);
            let options = GetOptions {
                if_match: meta.e_tag.clone(),
                version: meta.version.clone(),
                range: Some(GetRange::Bounded(range.clone())),
                ..GetOptions::default()
            };
            let response = inner.get_opts(&location, options).await.map_err(Arc::new)?;
            if response.meta.e_tag != meta.e_tag
                || response.meta.size != meta.size
                || response.range != range
            {
                return Err(Arc::new(generic(format!(
                    "{location} changed during the benchmark"
                ))));
            }
            let bytes = response.bytes().await.map_err(Arc::new)?;
            if bytes.len() as u64 != range.end - range.start {
                return Err(Arc::new(generic(format!(
                    "{location}: {} bytes received for {range:?}",
                    bytes.len()
                ))));
            }
            Ok(Arc::new(
                run.map(|block| {
                    let start = (block * block_size - range.start) as usize;
                    let end = ((block + 1) * block_size).min(meta.size) - range.start;
                    bytes.slice(start..end as usize)
                })
                .collect(),
            ))
        }
        .boxed()
        .shared()
    }
}

/// Where a block was when its read was planned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    Memory,
    Disk,
    Missing,
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "foyer-hybrid",
        source: message.into(),
    }
}

fn shared_error(e: &object_store::Error) -> object_store::Error {
    generic(e.to_string())
}

impl<S: ObjectStore> fmt::Display for FoyerBlockStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FoyerBlockStore({})", self.inner)
    }
}

impl<S: ObjectStore> fmt::Debug for FoyerBlockStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn payload(bytes: Bytes) -> GetResultPayload {
    GetResultPayload::Stream(futures::stream::iter([Ok(bytes)]).boxed())
}

#[async_trait::async_trait]
impl<S: ObjectStore> ObjectStore for FoyerBlockStore<S> {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let meta = self.head(location).await?;
        options.check_preconditions(&meta)?;
        let range = if options.head {
            0..0
        } else {
            match &options.range {
                None => 0..meta.size,
                Some(r) => r.as_range(meta.size).map_err(|e| generic(e.to_string()))?,
            }
        };
        let bytes = if options.head {
            Bytes::new()
        } else {
            let mut parts = self
                .read_ranges(location, &meta, std::slice::from_ref(&range))
                .await?;
            parts.pop().unwrap_or_default()
        };
        Ok(GetResult {
            payload: payload(bytes),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let meta = self.head(location).await?;
        if let Some(bad) = ranges.iter().find(|r| r.start > r.end || r.end > meta.size) {
            return Err(generic(format!(
                "range {bad:?} of {location} is not within its {} bytes",
                meta.size
            )));
        }
        self.read_ranges(location, &meta, ranges).await
    }

    multiarc_store_tools::forward_object_store! {
        inner: put_opts, put_multipart_opts, delete_stream, list, list_with_delimiter,
        copy_opts, rename_opts
    }
}
