//! The caches `bench` and `replay` compare, behind one interface so every row
//! pays the same dynamic dispatch. Each peer is configured as a user would:
//! the same byte capacity (weighted by value length where the cache weighs;
//! in entries where it only counts), the same values (`Arc<[u8]>` copies of
//! the block, so a hit hands out a reference-counted pointer, not a copy),
//! and its own default sharding.
//!
//! The peers are compiled in with the `peers` feature (on by default). A
//! build without it knows their names (so `--caches moka` is recognised) but
//! refuses to build them with one line saying why.

use anyhow::bail;
#[cfg(feature = "peers")]
use anyhow::Context;
use multiarc::{Cache, HitMode, Policy};
#[cfg(feature = "peers")]
use std::num::NonZeroUsize;
#[cfg(feature = "peers")]
use std::sync::{Arc, Mutex};

/// A cache under test.
pub trait BenchCache: Send + Sync {
    /// Its eviction policy, one line.
    fn policy(&self) -> &'static str;
    /// Stores a copy of `value` under `key`.
    fn insert(&self, key: u64, value: &[u8]);
    /// Looks `key` up; on a hit calls `f` with the cached bytes (zero-copy
    /// where the cache allows) and returns true.
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool;
    /// A hint that `key` will be requested soon (multiarc only).
    fn prefetch(&self, _key: u64) {}
    /// Starts or stops lockstat tracing of the cache's locks (multiarc only).
    fn set_lockstat(&self, _on: bool) -> bool {
        false
    }
}

/// Calls `f` with the value's bytes if there is one; returns whether there was.
#[cfg(feature = "peers")]
fn on_hit<V: AsRef<[u8]>>(value: Option<V>, f: &mut dyn FnMut(&[u8])) -> bool {
    value.map(|v| f(v.as_ref())).is_some()
}

/// The multiarc rows.
pub const MULTIARC_NAMES: &[&str] = &[
    "multiarc",
    "multiarc-eager",
    "multiarc-lazy",
    "multiarc-1list",
    "multiarc-s3arc",
    "multiarc-adaptive",
    "multiarc-gen",
];
/// Whether `name` is a multiarc row on the multilist (every one of
/// [`MULTIARC_NAMES`] but `multiarc-1list`, the design before OpenZFS 5497).
pub fn is_multilist_row(name: &str) -> bool {
    name != "multiarc-1list" && MULTIARC_NAMES.contains(&name)
}

/// The peer rows.
pub const PEER_NAMES: &[&str] = &[
    "moka",
    "quick_cache",
    "foyer",
    "tinyufo",
    "concread-arc",
    "mutex-lru",
];

/// The peer rows this binary can build: [`PEER_NAMES`] with the `peers`
/// feature, none without it. The commands' default row lists use these.
pub const BUILT_PEERS: &[&str] = if cfg!(feature = "peers") {
    PEER_NAMES
} else {
    &[]
};

/// Whether `name` is a peer row this binary was built without.
pub fn is_missing_peer(name: &str) -> bool {
    PEER_NAMES.contains(&name) && !BUILT_PEERS.contains(&name)
}

/// The error for a peer row asked of a build without the `peers` feature.
pub fn missing_peer_error(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{name}: this multiarc was built without the `peers` feature (no peer caches); \
         rebuild with default features to compare against {name}"
    )
}

/// The largest capacity a row is built with: 2^48 bytes (256 TiB). Past
/// it multiarc's byte arithmetic overflows (`2c` near 2^64); the commands
/// check their sizes against the machine's memory long before.
pub const MAX_CAPACITY_BYTES: u64 = 1 << 48;

/// Rows that allocate for their whole capacity when built (tinyufo's
/// buckets and frequency sketch, `lru`'s hash table), and a generous guess
/// of what they allocate per entry.
const PREALLOCATING: &[&str] = &["tinyufo", "mutex-lru"];
const PREALLOCATED_BYTES_PER_ENTRY: u64 = 64;

/// Builds a cache by row name holding about `capacity_bytes` of values of
/// `value_size` bytes each.
pub fn build(
    name: &str,
    capacity_bytes: u64,
    value_size: usize,
) -> anyhow::Result<Box<dyn BenchCache>> {
    build_with(name, capacity_bytes, value_size, None, None)
}

/// Like [`build`]; `sublists` overrides the multiarc rows' sublist count
/// (except `multiarc-1list`), and `seed` seeds the key hashers of the rows
/// whose hasher takes a seed without changing (the multiarc rows, and
/// quick_cache: its own hasher, foldhash, with a fixed seed): which keys
/// share a table's probe run, a shard or a sublist then repeats from run to
/// run. The others keep their own (moka and concread-arc: SipHash with
/// random keys; tinyufo: random; foyer and mutex-lru: fixed already).
pub fn build_with(
    name: &str,
    capacity_bytes: u64,
    value_size: usize,
    sublists: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<Box<dyn BenchCache>> {
    if is_missing_peer(name) {
        return Err(missing_peer_error(name));
    }
    let value_size = value_size.max(1);
    if capacity_bytes > MAX_CAPACITY_BYTES {
        bail!("{name}: a capacity of {capacity_bytes} bytes is past the limit of 2^48 bytes (256 TiB)");
    }
    let entries = (capacity_bytes / value_size as u64).max(1);
    if PREALLOCATING.contains(&name) {
        multiarc::units::check_fits_in_memory(
            &format!("{name} with a capacity of {entries} entries (allocated when it is built)"),
            entries.saturating_mul(PREALLOCATED_BYTES_PER_ENTRY),
        )?;
    }
    #[cfg(feature = "peers")]
    let entries = entries as usize;
    Ok(match name {
        name if is_multilist_row(name) => {
            Box::new(Multiarc::new(capacity_bytes, sublists, name, seed, false)?)
        }
        // The design before OpenZFS 5497: one locked list per state, and
        // hits that take it (eager).
        "multiarc-1list" => Box::new(Multiarc::new(capacity_bytes, Some(1), name, seed, false)?),
        #[cfg(feature = "peers")]
        "moka" => Box::new(Moka(moka_builder(capacity_bytes).build())),
        #[cfg(feature = "peers")]
        "quick_cache" => match seed {
            None => Box::new(QuickCache(quick_cache::sync::Cache::with_weighter(
                entries,
                capacity_bytes,
                LenWeighter,
            ))),
            Some(seed) => Box::new(QuickCache(quick_cache::sync::Cache::with(
                entries,
                capacity_bytes,
                LenWeighter,
                foldhash::fast::FixedState::with_seed(seed),
                quick_cache::sync::DefaultLifecycle::default(),
            ))),
        },
        #[cfg(feature = "peers")]
        "foyer" => Box::new(Foyer(
            foyer::Cache::builder(capacity_bytes as usize)
                .with_weighter(|_k: &u64, v: &Arc<[u8]>| v.len())
                .build(),
        )),
        #[cfg(feature = "peers")]
        "tinyufo" => Box::new(TinyUfo(tinyufo::TinyUfo::new(
            capacity_bytes as usize,
            entries,
        ))),
        #[cfg(feature = "peers")]
        "concread-arc" => Box::new(Concread(
            concread::arcache::ARCacheBuilder::new()
                .set_size(entries, 0)
                .build()
                .context("concread ARCache refused the configuration")?,
        )),
        #[cfg(feature = "peers")]
        "mutex-lru" => Box::new(MutexLru(Mutex::new(lru::LruCache::new(
            NonZeroUsize::new(entries).expect("at least one entry"),
        )))),
        other => bail!(
            "unknown cache {other:?} (known: {}, {})",
            MULTIARC_NAMES.join(", "),
            PEER_NAMES.join(", ")
        ),
    })
}

/// A multiarc row (one of [`MULTIARC_NAMES`]) as `replay` builds it: 1-byte
/// values, a capacity of `blocks`, inline eviction (no evict thread) and
/// its random choices drawn from `seed`, so that its hits repeat.
pub fn build_replayed(name: &str, blocks: u64, seed: u64) -> anyhow::Result<Box<dyn BenchCache>> {
    let seed = Some(seed);
    Ok(match name {
        name if is_multilist_row(name) => Box::new(Multiarc::new(blocks, None, name, seed, true)?),
        "multiarc-1list" => Box::new(Multiarc::new(blocks, Some(1), name, seed, true)?),
        other => bail!(
            "{other} is not a multiarc row ({})",
            MULTIARC_NAMES.join(", ")
        ),
    })
}

/// A key hasher with fixed keys (SipHash with zero keys), for peers that
/// otherwise seed theirs at random per cache: which keys share a shard or
/// a sketch's counter then repeats from run to run.
#[cfg(feature = "peers")]
type FixedHasher = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// A peer as `replay` builds it, where the peer can be made to repeat
/// itself: moka and quick_cache get a key hasher with fixed keys, and moka
/// runs its pending housekeeping after every operation (as it otherwise
/// does when a log fills or a timer fires, so its admissions would depend
/// on the clock). The rows are then equal from run to run. Other peers
/// are built as by [`build`] (foyer's hasher has fixed keys already;
/// TinyUFO seeds its hasher at random and offers no way to fix it, and
/// concread's ARC still varies a little from run to run).
/// `capacity` counts 1-byte values, as `replay`'s rows do.
pub fn build_replayed_peer(name: &str, capacity: u64) -> anyhow::Result<Box<dyn BenchCache>> {
    #[cfg(feature = "peers")]
    match name {
        "moka" => {
            return Ok(Box::new(SettledMoka(
                moka_builder(capacity).build_with_hasher(FixedHasher::default()),
            )))
        }
        "quick_cache" if capacity <= MAX_CAPACITY_BYTES => {
            return Ok(Box::new(QuickCache(quick_cache::sync::Cache::with(
                capacity.max(1) as usize,
                capacity,
                LenWeighter,
                FixedHasher::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ))))
        }
        _ => {}
    }
    build(name, capacity, 1)
}

struct Multiarc {
    cache: Cache<u64>,
    policy: &'static str,
}

/// The hit mode and policy of multiarc row `name` (one of
/// [`MULTIARC_NAMES`]): `multiarc` is the cache's defaults.
pub fn multiarc_settings(name: &str) -> (HitMode, Policy) {
    match name {
        "multiarc-eager" | "multiarc-1list" => (HitMode::Eager, Policy::Arc),
        "multiarc-lazy" => (HitMode::Lazy, Policy::Arc),
        "multiarc-s3arc" => (HitMode::Lazy, Policy::S3arc),
        "multiarc-adaptive" => (HitMode::Lazy, Policy::Adaptive),
        "multiarc-gen" => (HitMode::Lazy, Policy::Generations),
        _ => (HitMode::default(), Policy::default()),
    }
}

impl Multiarc {
    /// Row `name` (one of [`MULTIARC_NAMES`]), its random choices drawn
    /// from `seed` if given, with inline eviction (no evict thread) if
    /// `inline`.
    fn new(
        capacity: u64,
        sublists: Option<usize>,
        name: &str,
        seed: Option<u64>,
        inline: bool,
    ) -> anyhow::Result<Multiarc> {
        let mut b = Cache::builder()
            .max_bytes(capacity.max(1))
            .inline_eviction(inline);
        if let Some(seed) = seed {
            b = b.seed(seed);
        }
        if let Some(n) = sublists {
            b = b.sublists(n);
        }
        let (mode, policy) = multiarc_settings(name);
        b = b.hit_mode(mode).policy(policy);
        let policy = match (mode, policy, sublists) {
            (_, Policy::S3arc, _) => {
                "S3ARC: probationary FIFO, frequency clock, ARC's ghosts and adaptation; lazy hits"
            }
            (_, Policy::Adaptive, _) => {
                "adaptive: ARC's and S3ARC's rules as experts, switched on regrets; lazy hits"
            }
            (_, Policy::Generations, _) => {
                "generations: ARC's rules, MFU in 64 segments of coarse generations; lazy hits"
            }
            (HitMode::Eager, _, Some(1)) => "ARC, one locked list per state (before OpenZFS 5497)",
            (HitMode::Lazy, _, Some(1)) => "CAR, one locked list per state",
            (HitMode::Eager, _, _) => "ARC, multilist (OpenZFS 5497), eager hits",
            (HitMode::Lazy, _, _) => "ARC adaptation with CAR clocks, multilist, lazy hits",
        };
        Ok(Multiarc {
            cache: b.build()?,
            policy,
        })
    }
}

impl BenchCache for Multiarc {
    fn policy(&self) -> &'static str {
        self.policy
    }
    fn insert(&self, key: u64, value: &[u8]) {
        drop(self.cache.insert_slice(key, value));
    }
    fn prefetch(&self, key: u64) {
        self.cache.prefetch(&key);
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        match self.cache.get(&key) {
            Some(h) => {
                f(&h);
                true
            }
            None => false,
        }
    }
    fn set_lockstat(&self, on: bool) -> bool {
        self.cache.set_lockstat(on);
        true
    }
}

/// A moka cache of the benchmark's keys and values.
#[cfg(feature = "peers")]
type MokaCache = moka::sync::Cache<u64, Arc<[u8]>>;

#[cfg(feature = "peers")]
struct Moka(MokaCache);

/// moka bounded to `capacity` bytes of values, as every moka row is built.
#[cfg(feature = "peers")]
fn moka_builder(capacity: u64) -> moka::sync::CacheBuilder<u64, Arc<[u8]>, MokaCache> {
    MokaCache::builder()
        .max_capacity(capacity)
        .weigher(|_k: &u64, v: &Arc<[u8]>| v.len().try_into().unwrap_or(u32::MAX))
}

#[cfg(feature = "peers")]
impl BenchCache for Moka {
    fn policy(&self) -> &'static str {
        "TinyLFU admission + LRU (W-TinyLFU), sharded"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        self.0.insert(key, value.into());
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        on_hit(self.0.get(&key), f)
    }
}

/// moka with a fixed key hasher, its pending housekeeping run after every
/// operation (see [`build_replayed_peer`]).
#[cfg(feature = "peers")]
struct SettledMoka(moka::sync::Cache<u64, Arc<[u8]>, FixedHasher>);

#[cfg(feature = "peers")]
impl BenchCache for SettledMoka {
    fn policy(&self) -> &'static str {
        "TinyLFU admission + LRU (W-TinyLFU), sharded; housekeeping after every operation"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        self.0.insert(key, value.into());
        self.0.run_pending_tasks();
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        let hit = on_hit(self.0.get(&key), f);
        self.0.run_pending_tasks();
        hit
    }
}

#[cfg(feature = "peers")]
#[derive(Clone)]
struct LenWeighter;

#[cfg(feature = "peers")]
impl quick_cache::Weighter<u64, Arc<[u8]>> for LenWeighter {
    fn weight(&self, _key: &u64, val: &Arc<[u8]>) -> u64 {
        val.len() as u64
    }
}

#[cfg(feature = "peers")]
struct QuickCache<B = quick_cache::DefaultHashBuilder>(
    quick_cache::sync::Cache<u64, Arc<[u8]>, LenWeighter, B>,
);

#[cfg(feature = "peers")]
impl<B: std::hash::BuildHasher + Clone + Send + Sync> BenchCache for QuickCache<B> {
    fn policy(&self) -> &'static str {
        "CLOCK-PRO, sharded"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        self.0.insert(key, value.into());
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        on_hit(self.0.get(&key), f)
    }
}

#[cfg(feature = "peers")]
struct Foyer(foyer::Cache<u64, Arc<[u8]>>);

#[cfg(feature = "peers")]
impl BenchCache for Foyer {
    fn policy(&self) -> &'static str {
        "LRU (foyer's default in-memory policy), 8 shards"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        drop(self.0.insert(key, value.into()));
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        match self.0.get(&key) {
            Some(entry) => {
                f(entry.value());
                true
            }
            None => false,
        }
    }
}

#[cfg(feature = "peers")]
struct TinyUfo(tinyufo::TinyUfo<u64, Arc<[u8]>>);

#[cfg(feature = "peers")]
impl BenchCache for TinyUfo {
    fn policy(&self) -> &'static str {
        "S3-FIFO + TinyLFU, lock-free"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        let weight = value.len().min(u16::MAX as usize) as u16;
        self.0.put(key, value.into(), weight);
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        on_hit(self.0.get(&key), f)
    }
}

#[cfg(feature = "peers")]
struct Concread(concread::arcache::ARCache<u64, Arc<[u8]>>);

#[cfg(feature = "peers")]
impl BenchCache for Concread {
    fn policy(&self) -> &'static str {
        "ARC with transactional (copy-on-write) reads"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        let mut w = self.0.write();
        w.insert(key, value.into());
        w.commit();
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        let mut r = self.0.read();
        match r.get(&key) {
            Some(v) => {
                f(v);
                true
            }
            None => false,
        }
    }
}

#[cfg(feature = "peers")]
struct MutexLru(Mutex<lru::LruCache<u64, Arc<[u8]>>>);

#[cfg(feature = "peers")]
impl BenchCache for MutexLru {
    fn policy(&self) -> &'static str {
        "LRU behind one std Mutex"
    }
    fn insert(&self, key: u64, value: &[u8]) {
        self.0.lock().unwrap().put(key, value.into());
    }
    fn with_value(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> bool {
        // The lock covers the lookup and list update; the bytes are read
        // after it is released, through the value's reference count.
        let v = self.0.lock().unwrap().get(&key).cloned();
        on_hit(v, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_stores_and_returns_values() {
        for name in MULTIARC_NAMES.iter().chain(BUILT_PEERS) {
            let c = build(name, 1 << 20, 8).unwrap();
            for k in 0..100u64 {
                c.insert(k, &k.to_le_bytes());
            }
            let mut found = 0;
            for k in 0..100u64 {
                let mut ok = false;
                let hit = c.with_value(k, &mut |v| ok = v == k.to_le_bytes());
                if hit {
                    assert!(ok, "{name}: wrong bytes for {k}");
                    found += 1;
                }
            }
            assert!(
                found >= 90,
                "{name}: only {found} of 100 small values found"
            );
        }
        assert!(build("nope", 1, 1).is_err());
    }

    #[test]
    fn huge_capacities_are_errors_not_aborts() {
        for name in MULTIARC_NAMES.iter().chain(BUILT_PEERS) {
            for capacity in [u64::MAX, MAX_CAPACITY_BYTES + 1] {
                let e = build(name, capacity, 1).err().map(|e| e.to_string());
                let e = e.unwrap_or_else(|| panic!("{name}: built with {capacity} bytes"));
                assert!(e.contains(name) && e.contains("2^48"), "{e}");
            }
        }
        // tinyufo and mutex-lru allocate by capacity: more entries than
        // memory is an error (2^48 entries, 16 PiB at 64 bytes each).
        #[cfg(feature = "peers")]
        if multiarc::units::MachineMemory::of_this_machine().is_some() {
            for name in PREALLOCATING {
                let e = build(name, MAX_CAPACITY_BYTES, 1)
                    .err()
                    .map(|e| e.to_string());
                let e = e.unwrap_or_else(|| panic!("{name}: no memory check"));
                assert!(e.contains("memory") && e.contains("entries"), "{e}");
            }
        }
    }

    #[test]
    fn peer_rows_are_built_exactly_with_the_peers_feature() {
        assert_eq!(
            BUILT_PEERS.len(),
            if cfg!(feature = "peers") { 6 } else { 0 }
        );
        for name in PEER_NAMES {
            let built = build(name, 1 << 20, 8);
            assert_eq!(built.is_ok(), cfg!(feature = "peers"), "{name}");
            if let Err(e) = built {
                let e = e.to_string();
                assert!(
                    e.contains(name) && e.contains("without the `peers` feature"),
                    "{e}"
                );
                assert!(!e.contains('\n'), "{e}");
            }
            assert_eq!(is_missing_peer(name), !cfg!(feature = "peers"));
        }
        for name in MULTIARC_NAMES.iter().chain(["nope", "pagecache"].iter()) {
            assert!(!is_missing_peer(name), "{name}");
        }
    }
}
