//! The multiarc benchmarks and tools, one module each, and what they
//! share. The `multiarc` command parses its arguments into the `*Args`
//! types here and calls `run`; every command prints tables (progress on
//! stderr), or exactly one JSON document on stdout with `--json`. This is
//! the program's body, not a library to embed: it prints its reports.
//!
//! The workloads of `multiarc bench` ([`bench`], which dispatches):
//! - `cache`: cached random reads against the peer caches (the OpenZFS
//!   5497 workload; `bench` alone, the main job);
//! - `file`: one file, many threads, per locking mode (`randrw`,
//!   `randread`, `rangelock`);
//! - `l2`: a working set larger than memory, with a second tier;
//! - `async_hit`: a cached block's hit through the async path;
//! - `object`: Parquet queries through `CachedStore` over S3;
//! - `lock`: the futex lock against std, parking_lot and pthread
//!   (`multiarc lockbench`).
//!
//! The other tools: `replay` (hit ratios of a block trace, over the
//! policies of `policies`), `corpus` (policies judged on the held-out
//! traces of `multiarc_sim::corpus`), `scan` (a hot set through a long one-pass scan)
//! and `scan_recovery` (the FreeBSD 11.2 report's program, `multiarc
//! poison`).
//!
//! What they share, lowest first: `cli` (flag parsers, stdout, tables),
//! `plot`, `harness` (timed runs, medians, progress), `peers` (the peer
//! caches, behind the `peers` feature). Each module imports only modules
//! below it; the peers never reach the library crates.

mod async_hit;
pub mod bench;
mod cache;
pub mod cli;
pub mod corpus;
mod file;
mod harness;
mod l2;
pub mod lock;
mod object;
mod peers;
#[cfg(feature = "plot")]
mod plot;
/// Without the `plot` feature: the same types, and charts that are errors.
#[cfg(not(feature = "plot"))]
#[path = "plot_stub.rs"]
mod plot;
mod policies;
pub mod replay;
pub mod scan;
pub mod scan_recovery;

#[cfg(all(feature = "object", feature = "peers"))]
pub use object::foyer_hybrid_store;
