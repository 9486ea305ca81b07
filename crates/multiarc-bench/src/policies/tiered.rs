//! A multiarc policy with a second tier, for `replay --l2`: the cache in
//! memory plus an L2 (OpenZFS's L2ARC) on a device file of its own, the
//! feed driven synchronously so that a replay is deterministic. The device
//! file is removed when the policy is dropped.

use anyhow::bail;
use multiarc::Cache;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where replayed second tiers go, and how they are fed.
pub struct TierOptions {
    /// Where the device files go.
    pub dir: PathBuf,
    /// Feed only MFU buffers (`Builder::l2_mfu_only`).
    pub mfu_only: bool,
    /// `Builder::l2_keep_ratio`, when given.
    pub keep_ratio: Option<u64>,
    /// A copy read back enters memory as a new block
    /// (`Builder::l2_readback_as_new`).
    pub readback_as_new: bool,
}

/// A multiarc cache with a second tier, and the tier's device file.
pub struct TieredCache {
    pub(super) cache: Cache<u64>,
    /// Dropped after the cache (fields drop in order): the file goes last.
    _device: Device,
}

/// A device file for a replayed second tier, removed on drop.
struct Device(PathBuf);

impl Drop for Device {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The largest second tier a replay builds, in blocks.
pub const MAX_TIER_BLOCKS: u64 = 1 << 36;

/// The batch size of a replayed second tier of `blocks` blocks behind a
/// memory of `memory` blocks, in 4 KiB units (each 1-byte buffer takes
/// one): at most an eighth of the tier, a quarter of the memory (the
/// synchronous feed runs once a batch's worth has been inserted, so a
/// batch larger than memory would let buffers come and go unfed) and
/// 2048 (8 MiB, OpenZFS's old default); at least 1.
fn batch_units(blocks: u64, memory: u64) -> u64 {
    (blocks / 8).min(memory / 4).clamp(1, 2048)
}

/// Bytes of a device that holds `blocks` one-unit buffers in batches of
/// `batch`: the header, the buffers, a log block for every half batch
/// (batches may be half full), and a batch of slack for the ring's wrap.
fn device_bytes(blocks: u64, batch: u64) -> u64 {
    let log_units = (80 + batch * 32).div_ceil(4096);
    let batches = blocks.div_ceil(batch.div_ceil(2));
    4096 * (1 + blocks + batches * log_units + batch + log_units)
}

/// Fails when the largest device of `tier_blocks` (the `--l2` sizes in
/// blocks) would not fit in the free space of `dir`.
pub fn check_room(tier_blocks: &[u64], dir: &Path) -> anyhow::Result<()> {
    // The largest batch a tier of `b` blocks may get is `b` itself.
    let Some(bytes) = tier_blocks.iter().map(|&b| device_bytes(b, b)).max() else {
        return Ok(());
    };
    if let Ok(st) = rustix::fs::statvfs(dir) {
        let free = st.f_bavail.saturating_mul(st.f_frsize);
        if bytes > free {
            bail!(
                "--l2: a device of {} MiB does not fit in {} ({} MiB free); use --l2-dir",
                bytes >> 20,
                dir.display(),
                free >> 20
            );
        }
    }
    Ok(())
}

/// Builds `policy` (a multiarc one) with `blocks` of memory and a second
/// tier of `tier_blocks`, its device in `options.dir`, its random choices
/// drawn from `seed` (`Builder::seed`).
pub(super) fn build(
    policy: &str,
    blocks: u64,
    tier_blocks: u64,
    options: &TierOptions,
    seed: u64,
) -> anyhow::Result<TieredCache> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = options.dir.join(format!(
        "multiarc-replay-l2-{}-{}.dev",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let device = Device(path.clone());
    let batch = batch_units(tier_blocks, blocks);
    let (mode, cache_policy) = crate::peers::multiarc_settings(policy);
    let mut builder = Cache::<u64>::builder();
    if let Some(ratio) = options.keep_ratio {
        builder = builder.l2_keep_ratio(ratio);
    }
    let cache = builder
        .max_bytes(blocks)
        .min_bytes(1)
        .hit_mode(mode)
        .policy(cache_policy)
        .inline_eviction(true)
        .seed(seed)
        .l2(&path, device_bytes(tier_blocks, batch))
        .l2_write_max(batch * 4096)
        // The synchronous feed runs once a batch's worth has been inserted:
        // two batches up the tails cover what eviction reaches next.
        .l2_headroom(2)
        .l2_rebuild(false)
        .l2_direct(false)
        .l2_mfu_only(options.mfu_only)
        .l2_readback_as_new(options.readback_as_new)
        .build()
        .map_err(|e| anyhow::anyhow!("{policy} with --l2 {tier_blocks} blocks: {e}"))?;
    Ok(TieredCache {
        cache,
        _device: device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_their_bounds() {
        // At most an eighth of the tier, a quarter of the memory, 2048.
        assert_eq!(batch_units(8000, 1 << 20), 1000);
        assert_eq!(batch_units(1 << 30, 400), 100);
        assert_eq!(batch_units(1 << 30, 1 << 30), 2048);
        // At least one unit.
        assert_eq!(batch_units(1, 1), 1);
    }

    #[test]
    fn a_device_holds_its_blocks_and_its_logs() {
        for (blocks, batch) in [(1, 1), (1000, 125), (1 << 20, 2048)] {
            let bytes = device_bytes(blocks, batch);
            // The header, every block, a batch of slack, and log blocks.
            assert!(bytes > 4096 * (1 + blocks + batch), "{blocks} {batch}");
            // Log blocks of half-full batches: well below the data again.
            assert!(
                bytes < 4096 * (2 + 2 * blocks + 2 * batch),
                "{blocks} {batch}"
            );
        }
    }

    #[test]
    fn a_device_larger_than_the_free_space_is_refused() {
        let dir = std::env::temp_dir();
        check_room(&[], &dir).unwrap();
        check_room(&[16], &dir).unwrap();
        let e = check_room(&[MAX_TIER_BLOCKS], &dir).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }
}
