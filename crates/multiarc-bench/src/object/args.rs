//! The object workload's flags and rows.

use crate::cli::{count_arg, duration_arg, enum_arg, size_arg, thread_count_arg};
use std::path::PathBuf;
use std::time::Duration;

/// A row of `--rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ObjectRow {
    /// `CachedStore`, memory only.
    #[value(name = "multiarc")]
    Multiarc,
    /// `CachedStore` with a second tier (a file on the `--l2-dir` disk).
    #[value(name = "multiarc-l2")]
    MultiarcL2,
    /// foyer's `HybridCache` as the block cache of the same wrapper shape.
    #[value(name = "foyer-hybrid")]
    FoyerHybrid,
    /// The same with no disk (foyer's no-op storage): the peer with
    /// `multiarc`'s budgets, memory only.
    #[value(name = "foyer-memory")]
    FoyerMemory,
    /// The store itself.
    #[value(name = "none")]
    None,
}

// A lean build (no `object` feature) parses the rows and uses none.
#[cfg_attr(not(feature = "object"), allow(dead_code))]
impl ObjectRow {
    /// Every row, in table order.
    pub const ALL: [ObjectRow; 5] = [
        ObjectRow::Multiarc,
        ObjectRow::MultiarcL2,
        ObjectRow::FoyerHybrid,
        ObjectRow::FoyerMemory,
        ObjectRow::None,
    ];

    /// The row's name in `--rows`, the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            ObjectRow::Multiarc => "multiarc",
            ObjectRow::MultiarcL2 => "multiarc-l2",
            ObjectRow::FoyerHybrid => "foyer-hybrid",
            ObjectRow::FoyerMemory => "foyer-memory",
            ObjectRow::None => "none",
        }
    }

    /// True for foyer's rows (built with the `peers` feature only).
    pub(super) fn is_foyer(self) -> bool {
        matches!(self, ObjectRow::FoyerHybrid | ObjectRow::FoyerMemory)
    }

    /// True for the rows with a second tier (which need `--l2-dir`'s disk).
    pub(super) fn has_second_tier(self) -> bool {
        matches!(self, ObjectRow::MultiarcL2 | ObjectRow::FoyerHybrid)
    }
}

/// The object workload's flags.
#[derive(clap::Args, Debug)]
pub struct ObjectArgs {
    /// An S3 endpoint (e.g. http://127.0.0.1:3900) instead of the
    /// in-process server; needs --bucket, and credentials in
    /// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_REGION, default
    /// us-east-1). The data set is written under --prefix.
    #[arg(long, value_name = "URL")]
    pub(super) endpoint: Option<String>,
    /// The bucket at --endpoint.
    #[arg(long)]
    pub(super) bucket: Option<String>,
    /// Where in the bucket the data set goes.
    #[arg(long, default_value = "multiarc-objbench")]
    pub(super) prefix: String,
    /// Time added before every store request (GET or HEAD), for every row
    /// alike: an object store's time to first byte.
    #[arg(long, value_parser = duration_arg, default_value = "20ms")]
    pub(super) store_latency: Duration,
    /// Rows (comma-separated): multiarc, multiarc-l2, foyer-hybrid,
    /// foyer-memory, none (default: all this build has).
    #[arg(long, value_parser = enum_arg::<ObjectRow>("object row"), value_delimiter = ',')]
    pub(super) rows: Option<Vec<ObjectRow>>,
    /// Concurrent query tasks (comma-separated).
    #[arg(long, value_parser = thread_count_arg, value_delimiter = ',', default_value = "1,2,32")]
    pub(super) tasks: Vec<usize>,
    /// Repetitions: each runs every row once (order rotated by one per
    /// repetition); each row's median is reported.
    #[arg(long, value_parser = count_arg, default_value = "3")]
    pub(super) reps: usize,
    /// Queries per pass.
    #[arg(long, value_parser = count_arg, default_value = "48")]
    pub(super) queries: usize,
    /// Every Nth query is a full scan of the scan files (0: no scans).
    #[arg(long, default_value_t = 16)]
    pub(super) scan_every: usize,
    /// Hot files (their hot columns are the hot set).
    #[arg(long, value_parser = count_arg, default_value = "8")]
    pub(super) hot_files: usize,
    /// Scan files (read whole by a scan). By default a scan reads 4x the
    /// memory: past ARC's ghost lists (2x), so a scan is a scan to it.
    #[arg(long, value_parser = count_arg, default_value = "32")]
    pub(super) scan_files: usize,
    /// Bytes of each Parquet file. Kept small by default: s3s-fs hashes the
    /// whole object on every GET, a cost that must stay small next to
    /// --store-latency.
    #[arg(long = "object-bytes", value_parser = size_arg, default_value = "1MiB")]
    pub(super) file_bytes: u64,
    /// The caches' block size. 64 KiB, not CachedStore's 256 KiB default:
    /// the default memory (8 MiB) then holds 128 blocks. At 256 KiB (32
    /// blocks) multiarc loses the hot set to each scan (see
    /// docs/BENCHMARKS.md).
    #[arg(long, value_parser = size_arg, default_value = "64KiB")]
    pub(super) block_size: u64,
    /// Memory of the caches (default: --hot-files x --object-bytes: the
    /// hot set fits, the hot set plus a scan does not).
    #[arg(long = "cache-memory", value_parser = size_arg)]
    pub(super) memory: Option<u64>,
    /// The second tier (multiarc-l2's L2, foyer-hybrid's disk).
    #[arg(long, value_parser = size_arg, default_value = "256MiB")]
    pub(super) l2_bytes: u64,
    /// Where the second tiers' files go (a disk filesystem, not tmpfs;
    /// default: the current directory); removed afterwards.
    #[arg(long = "l2-dir")]
    pub(super) dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long)]
    pub(super) json: bool,
}
