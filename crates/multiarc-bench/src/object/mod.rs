//! `multiarc bench --workload object`: repeated Parquet queries (the
//! `parquet` crate's async reader over an `ObjectStore`) through multiarc
//! in front of an S3 store, against foyer's hybrid cache in the same
//! wrapper shape and the store alone.
//!
//! With no arguments it starts an S3 server in-process on loopback
//! (`multiarc-store-tools`: s3s-fs over a temporary directory) and writes
//! generated Parquet files to it; `--endpoint URL --bucket B` (credentials
//! from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`) writes them to any
//! S3 server instead. Every store request then waits `--store-latency`
//! (default 20 ms) first, for every row alike: loopback is too fast to
//! mean anything. Before the rows, the server is measured alone (ranged
//! GETs of one data file without the added latency; s3s-fs hashes the
//! whole object on every GET), and that cost is reported.
//!
//! The workload: `--queries` queries per pass, taken in order by `--tasks`
//! concurrent tasks. Query `i` reads the hot columns (2 of 8) of hot file
//! `i mod --hot-files`, except every `--scan-every`th, which reads every
//! column of every scan file (4 files at a time). Each measurement (row,
//! tasks, repetition) builds the row afresh and runs three phases: a cold
//! pass, a warm pass (the same queries again; throughput, latency, store
//! traffic, hit ratio), and a full scan followed by one hot query per hot
//! file (the hit ratio after a scan). Rows are interleaved per repetition
//! (order rotated), medians reported.
//!
//! Without the `object` feature the workload is an error saying so.

mod args;
#[cfg(feature = "object")]
mod data;
#[cfg(all(feature = "object", feature = "peers"))]
mod foyer_store;
#[cfg(feature = "object")]
mod report;
#[cfg(feature = "object")]
mod rows;
#[cfg(feature = "object")]
mod workload;

pub use args::ObjectArgs;
#[cfg(all(feature = "object", feature = "peers"))]
pub use foyer_store::foyer_hybrid_store;

/// Runs the object workload.
#[cfg(feature = "object")]
pub fn run(args: ObjectArgs) -> anyhow::Result<()> {
    workload::run(args)
}

/// Without the `object` feature: an error saying so.
#[cfg(not(feature = "object"))]
pub fn run(_args: ObjectArgs) -> anyhow::Result<()> {
    anyhow::bail!(
        "--workload object: this multiarc was built without the `object` feature \
         (no S3 client); rebuild with default features to run it"
    )
}
