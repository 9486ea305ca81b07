//! Each row's store, built afresh for a measurement: the S3 client behind
//! the emulated latency ([`CountingStore`]), and in front of it multiarc's
//! `CachedStore`, foyer's hybrid cache in the same wrapper shape, or
//! nothing.

use super::args::ObjectRow;
use anyhow::Context;
use multiarc_object_store::CachedStore;
use multiarc_store_tools::{CountingStore, ReadCounts, ReadTraffic};
use object_store::aws::AmazonS3;
use object_store::ObjectStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The sizes every cached row is built with.
pub(super) struct Budgets {
    pub(super) memory: u64,
    pub(super) l2_bytes: u64,
    pub(super) block_size: u64,
}

/// Block reads by where they were served, summed over a phase.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BlockReads {
    pub(super) memory: u64,
    pub(super) second_tier: u64,
    /// Fetched from the store, or waited for another read's fetch.
    pub(super) missed: u64,
}

impl BlockReads {
    pub(super) fn since(self, earlier: BlockReads) -> BlockReads {
        BlockReads {
            memory: self.memory - earlier.memory,
            second_tier: self.second_tier - earlier.second_tier,
            missed: self.missed - earlier.missed,
        }
    }

    /// Reads served by either tier, of all; `None` without block reads.
    pub(super) fn hit_ratio(self) -> Option<f64> {
        let all = self.memory + self.second_tier + self.missed;
        (all > 0).then(|| (self.memory + self.second_tier) as f64 / all as f64)
    }

    /// Reads served by memory, of all.
    pub(super) fn memory_hit_ratio(self) -> Option<f64> {
        let all = self.memory + self.second_tier + self.missed;
        (all > 0).then(|| self.memory as f64 / all as f64)
    }
}

type Multiarc = CachedStore<CountingStore<AmazonS3>>;

/// The row's cache, to read its counters.
enum Cache {
    Multiarc(Arc<Multiarc>),
    #[cfg(feature = "peers")]
    Foyer(
        Arc<super::foyer_store::BlockCounts>,
        super::foyer_store::Hybrid,
    ),
    None,
}

/// A row ready to query.
pub(super) struct BuiltRow {
    pub(super) store: Arc<dyn ObjectStore>,
    traffic: Arc<ReadCounts>,
    cache: Cache,
    /// The row's second-tier files, removed on drop.
    _dir: Option<WorkDir>,
}

impl BuiltRow {
    /// Requests and bytes that reached the store so far.
    pub(super) fn traffic(&self) -> ReadTraffic {
        self.traffic.snapshot()
    }

    /// Block reads so far (all zero for `none`).
    pub(super) fn block_reads(&self) -> BlockReads {
        use std::sync::atomic::Ordering::Relaxed;
        match &self.cache {
            Cache::Multiarc(store) => {
                let s = store.stats();
                BlockReads {
                    memory: s.memory_hits,
                    second_tier: s.l2_hits,
                    missed: s.blocks_fetched + s.single_flight_waits,
                }
            }
            #[cfg(feature = "peers")]
            Cache::Foyer(counts, _) => BlockReads {
                memory: counts.memory_hits.load(Relaxed),
                second_tier: counts.disk_hits.load(Relaxed),
                missed: counts.blocks_fetched.load(Relaxed)
                    + counts.single_flight_waits.load(Relaxed),
            },
            Cache::None => {
                let _ = Relaxed;
                BlockReads::default()
            }
        }
    }

    /// Lets the second tier catch up between passes: multiarc's feed run
    /// until it has nothing left to write (its thread also feeds every
    /// second on its own). foyer writes to its disk as memory evicts.
    pub(super) fn settle(&self) {
        if let Cache::Multiarc(store) = &self.cache {
            for _ in 0..100 {
                if store.cache().l2_feed() == 0 {
                    break;
                }
            }
        }
    }

    /// Closes the row (foyer's cache flushes and stops its tasks).
    pub(super) async fn close(self) -> anyhow::Result<()> {
        #[cfg(feature = "peers")]
        if let Cache::Foyer(_, cache) = &self.cache {
            cache
                .close()
                .await
                .map_err(|e| anyhow::anyhow!("foyer-hybrid: closing: {e}"))?;
        }
        Ok(())
    }
}

/// A directory for one row's second tier, removed on drop.
pub(super) struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds `row` over `client` (each request after `latency`), its second
/// tier (if any) in a new directory under `base`.
pub(super) async fn build(
    row: ObjectRow,
    client: AmazonS3,
    latency: Duration,
    budgets: &Budgets,
    base: &Path,
    run: usize,
) -> anyhow::Result<BuiltRow> {
    let inner = CountingStore::new(client, latency);
    let traffic = inner.counts();
    let dir = if row.has_second_tier() {
        let dir = base.join(format!(
            ".multiarc-objbench-{}-{run}-{}",
            std::process::id(),
            row.name()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Some(WorkDir(dir))
    } else {
        None
    };
    let (store, cache): (Arc<dyn ObjectStore>, Cache) = match row {
        ObjectRow::Multiarc | ObjectRow::MultiarcL2 => {
            let mut builder = CachedStore::builder(inner)
                .max_bytes(budgets.memory)
                .block_size(budgets.block_size)
                .metadata_forever();
            if let Some(dir) = &dir {
                builder = builder
                    .l2(dir.0.join("multiarc.l2"), budgets.l2_bytes)
                    .configure_cache(|cache| cache.l2_rebuild(false));
            }
            let store = Arc::new(
                builder
                    .build()
                    .map_err(|e| anyhow::anyhow!("{}: {e}", row.name()))?,
            );
            (store.clone(), Cache::Multiarc(store))
        }
        #[cfg(feature = "peers")]
        ObjectRow::FoyerHybrid | ObjectRow::FoyerMemory => {
            let disk = dir.as_ref().map(|d| (d.0.as_path(), budgets.l2_bytes));
            let (store, counts, cache) =
                super::foyer_store::hybrid(inner, budgets.memory, disk, budgets.block_size)
                    .await
                    .map_err(|e| anyhow::anyhow!("{}: {e}", row.name()))?;
            (Arc::new(store), Cache::Foyer(counts, cache))
        }
        #[cfg(not(feature = "peers"))]
        ObjectRow::FoyerHybrid | ObjectRow::FoyerMemory => {
            return Err(crate::peers::missing_peer_error(row.name()))
        }
        ObjectRow::None => (Arc::new(inner), Cache::None),
    };
    Ok(BuiltRow {
        store,
        traffic,
        cache,
        _dir: dir,
    })
}
