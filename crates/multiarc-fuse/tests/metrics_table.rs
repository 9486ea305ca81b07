#![cfg(feature = "bucket")]
//! docs/ops.md's table of metrics lists every figure a mount reports: the
//! cache's, the write-back's (directory mount), the object store's and
//! the bucket filesystem's (bucket mount), each under its metric name,
//! kind and component. `MULTIARC_PRINT_METRICS_TABLE=1 cargo test -p
//! multiarc-fuse --test metrics_table -- --nocapture` prints the table.

use multiarc::metrics::{Kind, Metric};
use std::path::Path;

/// Every metric a mount can report, in arcstats' order (directory mount's,
/// then what only the bucket mount adds).
fn all_metrics() -> Vec<Metric> {
    let mut out = multiarc::Stats::default().metrics();
    out.extend(multiarc_file::WriteBackStats::default().metrics());
    // The directory mount's own figures (`dir/stats.rs`) and the block
    // size both mounts report.
    out.extend(
        [
            Metric::gauge("open_files", "Open file handles now.", 0),
            Metric::gauge("block_size", "The cache's block size (bytes).", 0),
            Metric::gauge("inodes", "Inodes the kernel knows now.", 0),
        ]
        .into_iter()
        .map(|m| m.in_component("mount")),
    );
    let store = multiarc_object_store::CachedStore::builder(object_store::memory::InMemory::new())
        .max_bytes(1 << 20)
        .build()
        .unwrap();
    let fs = multiarc_bucket::BucketFs::new(
        store,
        object_store::path::Path::default(),
        multiarc_bucket::BucketConfig::default(),
    )
    .unwrap();
    out.extend(fs.metrics().into_iter().filter(|m| m.component != "cache"));
    out
}

fn row(m: &Metric) -> String {
    let kind = match m.kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    };
    format!(
        "| `{}` | `{}` | {kind} | {} | {} |",
        m.stat,
        m.name(),
        m.component,
        m.help
    )
}

#[test]
fn docs_list_every_metric() {
    let metrics = all_metrics();
    if std::env::var_os("MULTIARC_PRINT_METRICS_TABLE").is_some() {
        println!("| arcstats | metric | type | component | what it is |");
        println!("|---|---|---|---|---|");
        for m in &metrics {
            println!("{}", row(m));
        }
    }
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ops.md"))
            .unwrap();
    let missing: Vec<String> = metrics
        .iter()
        .filter(|m| {
            let head = format!("| `{}` | `{}` | ", m.stat, m.name());
            !doc.lines().any(|l| l.starts_with(&head))
        })
        .map(|m| format!("{} ({})", m.stat, m.name()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ops.md lacks rows for: {} (print the table with MULTIARC_PRINT_METRICS_TABLE=1)",
        missing.join(", ")
    );
    assert!(metrics.len() > 90, "{}", metrics.len());
}
