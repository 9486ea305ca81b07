//! The directory mount's figures and tunables ([`DirControl`]): the
//! cache's statistics, the write-back's, and the filesystem's own (open
//! files, inodes), for the control directory and `--metrics`.

use super::data::Data;
use super::inodes::InodeTable;
use crate::control::Controlled;
use multiarc::metrics::Metric;
use multiarc::{BlockKey, Cache};
use multiarc_file::WriteBack;
use std::sync::Arc;

/// What the control directory and `--metrics` read of a directory mount.
pub struct DirControl {
    pub(super) cache: Arc<Cache<BlockKey>>,
    pub(super) writeback: Arc<WriteBack>,
    pub(super) data: Arc<Data>,
    pub(super) inodes: Arc<InodeTable>,
    pub(super) block_size: usize,
}

impl Controlled for DirControl {
    /// The cache's figures, the write-back's, then the filesystem's own.
    fn metrics(&self) -> Vec<Metric> {
        let mut out = self.cache.stats().metrics();
        out.extend(self.writeback.stats().metrics());
        out.extend(
            [
                Metric::gauge(
                    "open_files",
                    "Open file handles now.",
                    self.data.open_handles() as u64,
                ),
                Metric::gauge(
                    "block_size",
                    "The cache's block size (bytes).",
                    self.block_size as u64,
                ),
                Metric::gauge(
                    "inodes",
                    "Inodes the kernel knows now.",
                    self.inodes.len() as u64,
                ),
            ]
            .into_iter()
            .map(|m| m.in_component("mount")),
        );
        out
    }

    fn max_bytes(&self) -> u64 {
        self.cache.stats().c
    }

    fn set_max_bytes(&self, bytes: u64) -> Result<(), String> {
        self.cache.set_max_bytes(bytes).map_err(|e| e.to_string())
    }

    fn set_lockstat(&self, on: bool) {
        self.cache.set_lockstat(on);
    }
}
