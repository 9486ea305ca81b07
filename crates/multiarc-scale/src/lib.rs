//! TPC-H at the scale users run, through multiarc and its peers: the data
//! (`tpch`: tpchgen's tables as Parquet on an S3 store, and the 22
//! queries) and DataFusion 55 querying it over each way of reaching the
//! store (`engine`). `scripts/scale-bench.sh` runs it beside the bucket
//! mounts (DuckDB and pyarrow through multiarc, mountpoint-s3, rclone and
//! s3fs) and writes the report. A benchmark: no library crate depends on it.

pub mod engine;
pub mod tpch;
