//! The object workload's results: one per (row, tasks), each figure the
//! median of its repetitions; printed as a table or one JSON document.

use super::args::ObjectRow;
use super::rows::BlockReads;
use crate::cli::text_table;
use crate::harness::{machine, Machine};
use crate::outln;
use multiarc_store_tools::ReadTraffic;
use serde::Serialize;
use std::time::Duration;

/// What one measurement saw, phase by phase.
pub(super) struct Phases {
    pub(super) cold_latencies: Vec<f64>,
    pub(super) cold_traffic: ReadTraffic,
    pub(super) warm_latencies: Vec<f64>,
    pub(super) warm_elapsed: Duration,
    pub(super) warm_traffic: ReadTraffic,
    pub(super) warm_reads: BlockReads,
    /// After a full scan, one hot query per hot file: the store traffic,
    /// the block reads, and how many queries (none without scan files).
    pub(super) after_scan: Option<(ReadTraffic, BlockReads, usize)>,
}

/// One measurement.
pub(super) struct RunResult {
    pub(super) row: ObjectRow,
    pub(super) tasks: usize,
    pub(super) phases: Phases,
}

#[derive(Serialize, Clone, Debug)]
pub(super) struct Config {
    pub(super) endpoint: String,
    pub(super) bucket: String,
    pub(super) store_latency_ms: f64,
    /// The store alone: ms per ranged GET of `store_alone_get_bytes`.
    pub(super) store_alone_get_ms: f64,
    pub(super) store_alone_get_bytes: u64,
    pub(super) tasks: Vec<usize>,
    pub(super) reps: usize,
    pub(super) queries: usize,
    pub(super) scan_every: usize,
    pub(super) hot_files: usize,
    pub(super) scan_files: usize,
    pub(super) file_bytes: u64,
    pub(super) hot_columns: usize,
    pub(super) columns: usize,
    pub(super) block_size: u64,
    pub(super) memory: u64,
    pub(super) l2_bytes: u64,
    pub(super) dir: String,
}

/// A row's figures at one task count (medians over its runs).
#[derive(Serialize, Clone, Debug)]
struct ObjectResult {
    row: String,
    tasks: usize,
    /// Warm pass: queries per second.
    queries_per_sec: f64,
    /// Warm pass: query latency.
    p50_ms: f64,
    p99_ms: f64,
    cold_p50_ms: f64,
    cold_p99_ms: f64,
    cold_requests_per_query: f64,
    cold_store_bytes_per_query: f64,
    warm_requests_per_query: f64,
    warm_store_bytes_per_query: f64,
    /// Block reads served by the cache (either tier) in the warm pass.
    warm_pass_hit_ratio: Option<f64>,
    /// Block reads served by memory in the warm pass.
    warm_memory_hit_ratio: Option<f64>,
    /// After a full scan, the hot queries' block reads served by the cache
    /// (either tier), and by memory alone.
    hit_ratio: Option<f64>,
    memory_hit_ratio: Option<f64>,
    /// After a full scan: bytes to the store per hot query.
    after_scan_store_bytes_per_query: Option<f64>,
    runs: usize,
}

#[derive(Serialize)]
struct ObjectReport {
    machine: Machine,
    config: Config,
    results: Vec<ObjectResult>,
}

/// The `q` quantile of `values` (nearest rank); 0 when empty.
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The median of the present values; `None` if none is.
fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.into_iter().flatten().collect();
    (!v.is_empty()).then(|| quantile(&v, 0.5))
}

fn per_query(total: u64, queries: usize) -> f64 {
    total as f64 / queries.max(1) as f64
}

fn summarize(row: ObjectRow, tasks: usize, runs: &[&Phases]) -> ObjectResult {
    let m = |f: &dyn Fn(&Phases) -> Option<f64>| median(runs.iter().map(|p| f(p)));
    let m0 = |f: &dyn Fn(&Phases) -> f64| m(&|p| Some(f(p))).unwrap_or(0.0);
    ObjectResult {
        row: row.name().to_string(),
        tasks,
        queries_per_sec: m0(&|p| p.warm_latencies.len() as f64 / p.warm_elapsed.as_secs_f64()),
        p50_ms: m0(&|p| quantile(&p.warm_latencies, 0.5)),
        p99_ms: m0(&|p| quantile(&p.warm_latencies, 0.99)),
        cold_p50_ms: m0(&|p| quantile(&p.cold_latencies, 0.5)),
        cold_p99_ms: m0(&|p| quantile(&p.cold_latencies, 0.99)),
        cold_requests_per_query: m0(&|p| {
            per_query(p.cold_traffic.requests, p.cold_latencies.len())
        }),
        cold_store_bytes_per_query: m0(&|p| {
            per_query(p.cold_traffic.bytes, p.cold_latencies.len())
        }),
        warm_requests_per_query: m0(&|p| {
            per_query(p.warm_traffic.requests, p.warm_latencies.len())
        }),
        warm_store_bytes_per_query: m0(&|p| {
            per_query(p.warm_traffic.bytes, p.warm_latencies.len())
        }),
        warm_pass_hit_ratio: m(&|p| p.warm_reads.hit_ratio()),
        warm_memory_hit_ratio: m(&|p| p.warm_reads.memory_hit_ratio()),
        hit_ratio: m(&|p| p.after_scan.and_then(|(_, r, _)| r.hit_ratio())),
        memory_hit_ratio: m(&|p| p.after_scan.and_then(|(_, r, _)| r.memory_hit_ratio())),
        after_scan_store_bytes_per_query: m(&|p| {
            p.after_scan.map(|(t, _, n)| per_query(t.bytes, n))
        }),
        runs: runs.len(),
    }
}

pub(super) fn print(
    config: Config,
    rows: &[ObjectRow],
    runs: &[RunResult],
    json: bool,
) -> anyhow::Result<()> {
    let mut results = Vec::new();
    for &row in rows {
        for &tasks in &config.tasks {
            let these: Vec<&Phases> = runs
                .iter()
                .filter(|r| r.row == row && r.tasks == tasks)
                .map(|r| &r.phases)
                .collect();
            if !these.is_empty() {
                results.push(summarize(row, tasks, &these));
            }
        }
    }
    if json {
        let report = ObjectReport {
            machine: machine(),
            config,
            results,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    let scans = if config.scan_every == 0 {
        "no scans".to_string()
    } else {
        format!(
            "every {}th a full scan of {} files",
            config.scan_every, config.scan_files
        )
    };
    outln!(
        "{} queries per pass ({} of {} columns of {} hot files; {scans}), {} files, \
         {} ms per store request added (the store alone: {:.2} ms per {} KiB GET); \
         memory {}, second tier {}, blocks {}; medians of {}",
        config.queries,
        config.hot_columns,
        config.columns,
        config.hot_files,
        multiarc::units::human_bytes(config.file_bytes),
        config.store_latency_ms,
        config.store_alone_get_ms,
        config.store_alone_get_bytes >> 10,
        multiarc::units::human_bytes(config.memory),
        multiarc::units::human_bytes(config.l2_bytes),
        multiarc::units::human_bytes(config.block_size),
        config.reps
    )?;
    let mut table = text_table(
        [
            "row",
            "tasks",
            "queries/s",
            "p50 ms",
            "p99 ms",
            "cold p50",
            "cold p99",
            "cold req/q",
            "cold KiB/q",
            "warm req/q",
            "warm KiB/q",
            "warm hits",
            "warm in memory",
            "hits after scan",
            "in memory",
        ],
        1,
    );
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
    for r in &results {
        table.add_row(vec![
            r.row.clone(),
            r.tasks.to_string(),
            format!("{:.1}", r.queries_per_sec),
            format!("{:.2}", r.p50_ms),
            format!("{:.1}", r.p99_ms),
            format!("{:.1}", r.cold_p50_ms),
            format!("{:.1}", r.cold_p99_ms),
            format!("{:.2}", r.cold_requests_per_query),
            format!("{:.0}", r.cold_store_bytes_per_query / 1024.0),
            format!("{:.2}", r.warm_requests_per_query),
            format!("{:.0}", r.warm_store_bytes_per_query / 1024.0),
            pct(r.warm_pass_hit_ratio),
            pct(r.warm_memory_hit_ratio),
            pct(r.hit_ratio),
            pct(r.memory_hit_ratio),
        ]);
    }
    outln!("{table}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(median([Some(1.0), None, Some(5.0), Some(3.0)]), Some(3.0));
        assert_eq!(median([None, None]), None);
    }
}
