//! The second tier's settings (`Builder::l2*`), in two parts checked here
//! before the tier opens: the device's ([`DeviceConfig`]: where, how
//! large, whose, how it is opened, what is found again on start and what
//! its hand keeps) and the feed's ([`FeedConfig`]: how much is written at
//! a time, how far up the list tails and how often it looks, and from
//! which list). OpenZFS's names where they fit.

use std::path::PathBuf;
use std::time::Duration;

/// The device and its ring: what `L2Arc::open` and the hand use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeviceConfig {
    /// The device: a regular file (created if missing) or a block device.
    pub(crate) path: PathBuf,
    /// The bytes of the device the tier uses, header included.
    pub(crate) bytes: u64,
    /// The cache identity written in the device header; a device with
    /// another identity is started empty.
    pub(crate) identity: u64,
    /// Open with `O_DIRECT` (default); false forces buffered I/O.
    pub(crate) direct: bool,
    /// `l2arc_rebuild_enabled`: rebuild the index from the device on start.
    pub(crate) rebuild: bool,
    /// Bytes of copies the hand may keep (where they are) per byte of new
    /// buffers in a batch (default 32; 0: the hand lets go of everything
    /// it reaches, as OpenZFS's does).
    pub(crate) keep_ratio: u64,
    /// A copy read back whose key memory has forgotten (no ghost) comes
    /// back to memory as a new block, onto MRU with `p` left alone, as a
    /// miss would without the tier (default false: it counts as a hit of
    /// the ghost list of the list it was fed from).
    pub(crate) readback_as_new: bool,
}

/// What the feed writes and when: what `feed.rs` uses (and the tier, for
/// the size of a batch and which buffers it could take).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FeedConfig {
    /// `l2arc_write_max`: bytes written per feed (default 32 MiB; 0 until
    /// [`FeedConfig::validated`] resolves it against the device's size).
    pub(crate) write_max: u64,
    /// `l2arc_headroom`: how far up the list tails a feed looks, as a
    /// multiple of `write_max` (default 8).
    pub(crate) headroom: u64,
    /// `l2arc_feed_secs`: the interval between feeds (default 1 s).
    pub(crate) feed_interval: Duration,
    /// `l2arc_feed_min_ms`: the interval when the last feed wrote more than
    /// half of `write_max` ("feed again", default 200 ms).
    pub(crate) feed_min_interval: Duration,
    /// `l2arc_mfuonly`: feed only buffers of the MFU list.
    pub(crate) mfu_only: bool,
}

/// Both parts, as the builder collects them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct L2Config {
    pub(crate) device: DeviceConfig,
    pub(crate) feed: FeedConfig,
}

impl DeviceConfig {
    /// A device of `bytes` at `path` with the defaults for the rest.
    pub(super) fn new(path: PathBuf, bytes: u64) -> DeviceConfig {
        DeviceConfig {
            path,
            bytes,
            identity: 0,
            direct: true,
            rebuild: true,
            keep_ratio: 32,
            readback_as_new: false,
        }
    }

    /// These settings checked: an error names the setting and why. (What
    /// depends on the device itself, its size against the free space or a
    /// block device's, is checked when it opens.)
    pub(super) fn validated(&self) -> Result<DeviceConfig, String> {
        if self.bytes == 0 {
            return Err(format!(
                "l2 size for {} must be greater than 0",
                self.path.display()
            ));
        }
        if self.keep_ratio > 64 {
            return Err(format!(
                "l2_keep_ratio ({}) must be at most 64",
                self.keep_ratio
            ));
        }
        Ok(self.clone())
    }
}

impl FeedConfig {
    /// A feed of `write_max` bytes (0: the default, see
    /// [`FeedConfig::validated`]) with OpenZFS's defaults for the rest.
    pub(super) fn new(write_max: u64) -> FeedConfig {
        FeedConfig {
            write_max,
            headroom: 8,
            feed_interval: Duration::from_secs(1),
            feed_min_interval: Duration::from_millis(200),
            mfu_only: false,
        }
    }

    /// These settings checked for a device of `device_bytes`, with
    /// `write_max` 0 resolved to its default: an error names the setting
    /// and why.
    pub(super) fn validated(&self, device_bytes: u64) -> Result<FeedConfig, String> {
        let mut feed = self.clone();
        if feed.write_max == 0 {
            // The default: 32 MiB (OpenZFS's since its change 15457), or a
            // sixteenth of a small device (a device too small for it is
            // the tier's to refuse, by its size).
            feed.write_max = (32 << 20).min((device_bytes / 16) / 4096 * 4096).max(4096);
        } else if feed.write_max > device_bytes / 2 {
            return Err(format!(
                "l2_write_max ({}) must be at most half the l2 size ({})",
                feed.write_max,
                device_bytes / 2
            ));
        }
        if feed.headroom == 0 || feed.headroom > 1024 {
            return Err(format!(
                "l2_headroom ({}) must be between 1 and 1024",
                feed.headroom
            ));
        }
        if feed.feed_interval.is_zero() || feed.feed_min_interval.is_zero() {
            return Err("l2 feed intervals must be greater than 0".into());
        }
        if feed.feed_min_interval > feed.feed_interval {
            return Err(format!(
                "l2_feed_min_interval ({:?}) is longer than l2_feed_interval ({:?})",
                feed.feed_min_interval, feed.feed_interval
            ));
        }
        Ok(feed)
    }

    /// The feed would take a buffer of `bytes` from the MFU (`mfu`) or MRU
    /// list: it fits a batch, and is of a list the feed takes from.
    pub(super) fn takes(&self, bytes: u64, mfu: bool) -> bool {
        bytes <= self.write_max && (!self.mfu_only || mfu)
    }
}

impl L2Config {
    /// A tier of `bytes` at `path` writing `write_max` per feed (0: the
    /// default, resolved against the size by [`L2Config::validated`]), with
    /// the defaults for the rest.
    pub(crate) fn new(path: PathBuf, bytes: u64, write_max: u64) -> L2Config {
        L2Config {
            device: DeviceConfig::new(path, bytes),
            feed: FeedConfig::new(write_max),
        }
    }

    /// Both parts checked, the device's first (the feed's depend on its
    /// size), with `write_max` 0 resolved to its default.
    pub(crate) fn validated(&self) -> Result<L2Config, String> {
        let device = self.device.validated()?;
        let feed = self.feed.validated(device.bytes)?;
        Ok(L2Config { device, feed })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn config(bytes: u64, write_max: u64) -> L2Config {
        L2Config::new(PathBuf::from("/dev/l2"), bytes, write_max)
    }

    #[test]
    fn write_max_defaults_to_32_mib_or_a_sixteenth_of_a_small_device() {
        let big = config(8 << 30, 0).validated().unwrap();
        assert_eq!(big.feed.write_max, 32 << 20);
        let small = config(64 << 20, 0).validated().unwrap();
        assert_eq!(small.feed.write_max, 4 << 20);
        let tiny = config(8192, 0).validated().unwrap();
        assert_eq!(tiny.feed.write_max, 4096);
        let given = config(64 << 20, 1 << 20).validated().unwrap();
        assert_eq!(given.feed.write_max, 1 << 20);
    }

    #[test]
    fn each_refusal_names_its_setting() {
        let err = |c: L2Config| c.validated().unwrap_err();
        let e = err(config(0, 0));
        assert!(e.contains("/dev/l2") && e.contains("greater than 0"), "{e}");
        let e = err(config(1 << 20, (1 << 19) + 1));
        assert!(
            e.contains("l2_write_max") && e.contains("at most half"),
            "{e}"
        );
        let mut c = config(1 << 20, 0);
        c.feed.headroom = 0;
        assert!(err(c.clone()).contains("l2_headroom (0)"));
        c.feed.headroom = 1025;
        assert!(err(c).contains("l2_headroom (1025)"));
        let mut c = config(1 << 20, 0);
        c.device.keep_ratio = 65;
        assert_eq!(err(c), "l2_keep_ratio (65) must be at most 64");
        let mut c = config(1 << 20, 0);
        c.feed.feed_interval = Duration::ZERO;
        assert!(err(c).contains("intervals must be greater than 0"));
        let mut c = config(1 << 20, 0);
        c.feed.feed_min_interval = Duration::from_secs(2);
        assert!(err(c).contains("l2_feed_min_interval"));
    }

    #[test]
    fn the_feed_takes_what_fits_a_batch_from_the_lists_it_feeds_from() {
        let mut feed = FeedConfig::new(8192);
        assert!(feed.takes(8192, false) && feed.takes(1, true));
        assert!(!feed.takes(8193, true));
        feed.mfu_only = true;
        assert!(feed.takes(4096, true) && !feed.takes(4096, false));
    }
}
