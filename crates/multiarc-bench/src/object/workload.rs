//! The object workload's run: the store (in-process or `--endpoint`), the
//! data set, the server's own cost, then the measurements.

use super::args::{ObjectArgs, ObjectRow};
use super::data::{self, COLUMNS, HOT_COLUMNS};
use super::report::{self, Phases, RunResult};
use super::rows::{self, Budgets, BuiltRow};
use crate::harness::{self, Bar};
use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use futures::{StreamExt, TryStreamExt};
use multiarc_store_tools::{Keys, S3Loopback};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Scan files read at once by a scan query.
const SCAN_FILES_AT_ONCE: usize = 4;

/// The footer size hint of the Parquet reader.
const FOOTER_HINT: usize = 64 << 10;

/// Ranged GETs that measure the store alone.
const PROBE_GETS: u64 = 20;

/// The bytes of one probe GET.
const PROBE_BYTES: u64 = 64 << 10;

/// One Parquet file of the data set.
struct DataFile {
    path: Path,
    size: u64,
    rows: usize,
    first_column_sum: i64,
}

/// The data set: hot files (queried for [`HOT_COLUMNS`]) and scan files.
struct DataSet {
    hot: Vec<DataFile>,
    scan: Vec<DataFile>,
}

/// A query of the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    /// The hot columns of hot file `n`.
    Hot(usize),
    /// Every column of every scan file.
    Scan,
}

/// `queries` queries: hot files in turn, every `scan_every`th a scan.
fn sequence(queries: usize, scan_every: usize, hot_files: usize) -> Vec<Query> {
    let mut hot = 0;
    (0..queries)
        .map(|i| {
            if scan_every > 0 && i % scan_every == scan_every - 1 {
                Query::Scan
            } else {
                hot += 1;
                Query::Hot((hot - 1) % hot_files)
            }
        })
        .collect()
}

/// Checks the flags; returns the rows to run and the memory budget.
fn check(args: &ObjectArgs) -> anyhow::Result<(Vec<ObjectRow>, u64)> {
    match (&args.endpoint, &args.bucket) {
        (Some(_), None) => bail!("--endpoint needs --bucket"),
        (None, Some(_)) => {
            bail!("--bucket needs --endpoint (without it the in-process server has its own)")
        }
        _ => {}
    }
    if let Some(endpoint) = &args.endpoint {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            bail!("--endpoint {endpoint}: not an http:// or https:// URL");
        }
        for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
            if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
                bail!("--endpoint needs credentials: {var} is not set");
            }
        }
    }
    if args.prefix.is_empty() || args.prefix.starts_with('/') || args.prefix.ends_with('/') {
        bail!(
            "--prefix {:?}: give a path without a leading or trailing '/'",
            args.prefix
        );
    }
    if !(4096..=64 << 20).contains(&args.block_size) {
        bail!(
            "--block-size must be from 4 KiB to 64 MiB, got {}",
            args.block_size
        );
    }
    if !(4096..=1 << 30).contains(&args.file_bytes) {
        bail!(
            "--object-bytes must be from 4 KiB to 1 GiB, got {}",
            args.file_bytes
        );
    }
    if args.store_latency > Duration::from_secs(10) {
        bail!(
            "--store-latency must be at most 10 s, got {:?}",
            args.store_latency
        );
    }
    let memory = args
        .memory
        .unwrap_or(args.hot_files as u64 * args.file_bytes);
    if memory < args.block_size {
        bail!(
            "--cache-memory ({memory}) must hold at least one block ({})",
            args.block_size
        );
    }
    multiarc::units::check_fits_in_memory("--cache-memory", memory)?;
    let rows = match &args.rows {
        Some(rows) => {
            let mut unique = Vec::new();
            for &row in rows {
                if unique.contains(&row) {
                    bail!("--rows names {} twice", row.name());
                }
                unique.push(row);
            }
            if let Some(foyer) = unique.iter().find(|r| r.is_foyer()) {
                if crate::peers::is_missing_peer("foyer") {
                    return Err(crate::peers::missing_peer_error(foyer.name()));
                }
            }
            unique
        }
        None => ObjectRow::ALL
            .into_iter()
            .filter(|&r| !r.is_foyer() || !crate::peers::is_missing_peer("foyer"))
            .collect(),
    };
    if rows.iter().any(|r| r.has_second_tier()) && args.l2_bytes < 16 << 20 {
        bail!("--l2-bytes must be at least 16 MiB, got {}", args.l2_bytes);
    }
    Ok((rows, memory))
}

/// Few, quick retries: a benchmark wants an unreachable store's error, not
/// minutes of backoff.
fn quick_retries() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    }
}

/// Where the data lives: the in-process server (kept running while held)
/// or `--endpoint`.
struct Store {
    _server: Option<(S3Loopback, TempDir)>,
    endpoint: String,
    bucket: String,
    builder: AmazonS3Builder,
}

impl Store {
    fn client(&self) -> anyhow::Result<AmazonS3> {
        self.builder
            .clone()
            .build()
            .with_context(|| format!("an S3 client for {} bucket {}", self.endpoint, self.bucket))
    }
}

/// The in-process server's directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn open_store(args: &ObjectArgs) -> anyhow::Result<Store> {
    let base = AmazonS3Builder::new()
        .with_virtual_hosted_style_request(false)
        .with_retry(quick_retries());
    if let (Some(endpoint), Some(bucket)) = (&args.endpoint, &args.bucket) {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut builder = base
            .with_endpoint(endpoint)
            .with_bucket_name(bucket)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_region(
                env("AWS_REGION")
                    .or_else(|| env("AWS_DEFAULT_REGION"))
                    .unwrap_or_else(|| "us-east-1".into()),
            )
            .with_access_key_id(env("AWS_ACCESS_KEY_ID").unwrap_or_default())
            .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY").unwrap_or_default());
        if let Some(token) = env("AWS_SESSION_TOKEN") {
            builder = builder.with_token(token);
        }
        return Ok(Store {
            _server: None,
            endpoint: endpoint.clone(),
            bucket: bucket.clone(),
            builder,
        });
    }
    let dir =
        TempDir(std::env::temp_dir().join(format!("multiarc-objbench-s3-{}", std::process::id())));
    let keys = Keys::new("multiarc-bench", "multiarc-bench-secret");
    let server = S3Loopback::start(&dir.0, "bench", keys.clone())
        .await
        .context("starting the in-process S3 server")?;
    let builder = base
        .with_endpoint(server.endpoint())
        .with_bucket_name(server.bucket())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id(keys.access_key)
        .with_secret_access_key(keys.secret_key);
    Ok(Store {
        endpoint: server.endpoint().to_string(),
        bucket: server.bucket().to_string(),
        _server: Some((server, dir)),
        builder,
    })
}

/// Writes the data set through `client`.
async fn write_data(
    args: &ObjectArgs,
    client: &AmazonS3,
    store: &Store,
) -> anyhow::Result<DataSet> {
    let write = |kind: &'static str, n: usize, seed: u64| {
        let path = Path::from(format!("{}/{kind}/part-{n:04}.parquet", args.prefix));
        let file_bytes = args.file_bytes;
        async move {
            let file = data::parquet_file(file_bytes, seed)?;
            let size = file.bytes.len() as u64;
            client
                .put(&path, PutPayload::from(file.bytes))
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "writing the data set to {} bucket {}: {}",
                        store.endpoint,
                        store.bucket,
                        root_cause(&e)
                    )
                })?;
            Ok::<_, anyhow::Error>(DataFile {
                path,
                size,
                rows: file.rows,
                first_column_sum: file.first_column_sum,
            })
        }
    };
    let mut hot = Vec::new();
    for n in 0..args.hot_files {
        hot.push(write("hot", n, 1 + n as u64).await?);
    }
    let mut scan = Vec::new();
    if args.scan_every > 0 {
        for n in 0..args.scan_files {
            scan.push(write("scan", n, 1_000_000 + n as u64).await?);
        }
    }
    Ok(DataSet { hot, scan })
}

/// The innermost cause of `e` (object_store's errors repeat the request
/// at each level of their chain: the last one says what went wrong).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(source) = last.source() {
        last = source;
    }
    last.to_string()
}

/// The store alone, without the added latency: milliseconds per ranged
/// GET of [`PROBE_BYTES`] of one data file (s3s-fs hashes the whole object
/// on each).
async fn probe(client: &AmazonS3, file: &DataFile) -> anyhow::Result<f64> {
    let len = PROBE_BYTES.min(file.size);
    // One to warm the connection up.
    client.get_range(&file.path, 0..len).await?;
    let started = Instant::now();
    for i in 0..PROBE_GETS {
        let start = i * (file.size - len) / PROBE_GETS;
        client.get_range(&file.path, start..start + len).await?;
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0 / PROBE_GETS as f64)
}

/// Reads `columns` (all if `None`) of `file` through `store` with the
/// `parquet` crate's async reader and checks the answer.
#[allow(deprecated)] // ParquetObjectReader: see the note in `query`.
async fn read_file(
    store: Arc<dyn ObjectStore>,
    file: &DataFile,
    columns: Option<&[usize]>,
) -> anyhow::Result<()> {
    // `ParquetObjectReader` is deprecated in parquet 60 in favour of
    // callers' own readers; it is still the crate's reader over an
    // `ObjectStore`, and the one the issue names.
    let reader = parquet::arrow::async_reader::ParquetObjectReader::new(store, file.path.clone())
        .with_file_size(file.size)
        // The footer and the metadata in one read, as query engines ask
        // (DataFusion's metadata_size_hint).
        .with_footer_size_hint(FOOTER_HINT);
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .with_context(|| format!("{}: reading its footer", file.path))?;
    let mask = match columns {
        Some(columns) => ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied()),
        None => ProjectionMask::all(),
    };
    let stream = builder
        .with_projection(mask)
        .with_batch_size(8192)
        .build()
        .with_context(|| format!("{}: a reader", file.path))?;
    let batches: Vec<_> = stream
        .try_collect()
        .await
        .with_context(|| format!("{}: reading", file.path))?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let sum: i64 = batches
        .iter()
        .map(|b| {
            b.column(0)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .sum::<i64>()
        })
        .sum();
    let width = columns.map_or(COLUMNS, <[usize]>::len);
    if rows != file.rows
        || sum != file.first_column_sum
        || batches.iter().any(|b| b.num_columns() != width)
    {
        bail!(
            "{}: a wrong answer ({rows} rows, first column's sum {sum}; {} and {} expected)",
            file.path,
            file.rows,
            file.first_column_sum
        );
    }
    Ok(())
}

/// Runs one query.
async fn run_query(
    store: &Arc<dyn ObjectStore>,
    data: &DataSet,
    query: Query,
) -> anyhow::Result<()> {
    match query {
        Query::Hot(n) => read_file(store.clone(), &data.hot[n], Some(&HOT_COLUMNS)).await,
        Query::Scan => {
            let scan = &data.scan;
            futures::stream::iter(0..scan.len())
                .map(|i| read_file(store.clone(), &scan[i], None))
                .buffer_unordered(SCAN_FILES_AT_ONCE)
                .try_collect::<()>()
                .await
        }
    }
}

/// `queries` run by `tasks` tasks, each taking the next; returns each
/// query's latency (ms) and the time the whole took.
async fn run_pass(
    store: &Arc<dyn ObjectStore>,
    data: &Arc<DataSet>,
    queries: &Arc<Vec<Query>>,
    tasks: usize,
) -> anyhow::Result<(Vec<f64>, Duration)> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (store, data, queries, next) =
                (store.clone(), data.clone(), queries.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&query) = queries.get(i) else {
                        break;
                    };
                    let t = Instant::now();
                    run_query(&store, &data, query).await?;
                    latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                Ok::<_, anyhow::Error>(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(queries.len());
    let mut failed = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(l)) => latencies.extend(l),
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(e) => failed = failed.or(Some(anyhow::anyhow!("a query task failed: {e}"))),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok((latencies, started.elapsed()))
}

/// One measurement: the cold pass, the warm pass, and a full scan then one
/// hot query per hot file.
async fn measure(
    row: &BuiltRow,
    data: &Arc<DataSet>,
    queries: &Arc<Vec<Query>>,
    tasks: usize,
) -> anyhow::Result<Phases> {
    let t0 = row.traffic();
    let (cold_latencies, _) = run_pass(&row.store, data, queries, tasks).await?;
    row.settle();
    let (t1, b1) = (row.traffic(), row.block_reads());
    let (warm_latencies, warm_elapsed) = run_pass(&row.store, data, queries, tasks).await?;
    let (t2, b2) = (row.traffic(), row.block_reads());
    let after = if data.scan.is_empty() {
        None
    } else {
        run_query(&row.store, data, Query::Scan).await?;
        row.settle();
        let (t3, b3) = (row.traffic(), row.block_reads());
        let hot: Arc<Vec<Query>> = Arc::new((0..data.hot.len()).map(Query::Hot).collect());
        run_pass(&row.store, data, &hot, tasks).await?;
        Some((
            row.traffic().since(t3),
            row.block_reads().since(b3),
            hot.len(),
        ))
    };
    Ok(Phases {
        cold_latencies,
        cold_traffic: t1.since(t0),
        warm_latencies,
        warm_elapsed,
        warm_traffic: t2.since(t1),
        warm_reads: b2.since(b1),
        after_scan: after,
    })
}

pub(super) fn run(args: ObjectArgs) -> anyhow::Result<()> {
    let (rows, memory) = check(&args)?;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    if rows.iter().any(|r| r.has_second_tier()) {
        if !base.is_dir() {
            bail!("--l2-dir {}: not a directory", base.display());
        }
        if crate::l2::is_tmpfs(&base) {
            bail!(
                "--l2-dir {}: a tmpfs; the second tiers belong on a disk (give --l2-dir on a disk)",
                base.display()
            );
        }
    }
    // The server's own runtime, so that its hashing does not run on the
    // query tasks' threads.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("s3-loopback")
        .enable_all()
        .build()
        .context("starting the server's runtime")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the query runtime")?;
    let store = server_rt.block_on(open_store(&args))?;
    let bar = Bar::new(
        "bench object",
        rows.len() * args.tasks.len() * args.reps,
        args.json,
    );
    bar.doing(format!("writing the data set to {}", store.endpoint));
    let client = store.client()?;
    let data = rt.block_on(write_data(&args, &client, &store))?;
    let probe_ms = rt.block_on(probe(&client, &data.hot[0]))?;
    bar.println(format!(
        "the store alone: {probe_ms:.2} ms per {} KiB ranged GET of a {} object ({:.0}% of --store-latency {:?})",
        PROBE_BYTES.min(data.hot[0].size) >> 10,
        multiarc::units::human_bytes(data.hot[0].size),
        100.0 * probe_ms / (args.store_latency.as_secs_f64() * 1000.0).max(1e-9),
        args.store_latency
    ));
    let data = Arc::new(data);
    let queries = Arc::new(sequence(args.queries, args.scan_every, args.hot_files));
    let budgets = Budgets {
        memory,
        l2_bytes: args.l2_bytes,
        block_size: args.block_size,
    };
    let mut runs: Vec<RunResult> = Vec::new();
    let mut run_id = 0;
    for &tasks in &args.tasks {
        for rep in 0..args.reps {
            for ri in harness::interleaved(rows.len(), rep) {
                let row = rows[ri];
                bar.doing(format!(
                    "repetition {}/{}, {}, {tasks} tasks",
                    rep + 1,
                    args.reps,
                    row.name()
                ));
                run_id += 1;
                let phases = rt.block_on(async {
                    let built = rows::build(
                        row,
                        store.client()?,
                        args.store_latency,
                        &budgets,
                        &base,
                        run_id,
                    )
                    .await?;
                    let phases = measure(&built, &data, &queries, tasks).await;
                    built.close().await?;
                    phases
                })?;
                runs.push(RunResult { row, tasks, phases });
                bar.runs_done(1);
            }
        }
    }
    bar.finish(&format!("{} runs", runs.len()));
    let config = report::Config {
        endpoint: args
            .endpoint
            .clone()
            .unwrap_or_else(|| "in-process s3s-fs".into()),
        bucket: store.bucket.clone(),
        store_latency_ms: args.store_latency.as_secs_f64() * 1000.0,
        store_alone_get_ms: probe_ms,
        store_alone_get_bytes: PROBE_BYTES.min(data.hot[0].size),
        tasks: args.tasks.clone(),
        reps: args.reps,
        queries: args.queries,
        scan_every: args.scan_every,
        hot_files: args.hot_files,
        scan_files: data.scan.len(),
        file_bytes: data.hot[0].size,
        hot_columns: HOT_COLUMNS.len(),
        columns: COLUMNS,
        block_size: args.block_size,
        memory,
        l2_bytes: args.l2_bytes,
        dir: base.display().to_string(),
    };
    drop(rt);
    drop(store);
    drop(server_rt);
    report::print(config, &rows, &runs, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_scans_every_nth_and_turns_over_the_hot_files() {
        let q = sequence(8, 4, 2);
        use Query::*;
        assert_eq!(
            q,
            [Hot(0), Hot(1), Hot(0), Scan, Hot(1), Hot(0), Hot(1), Scan]
        );
        assert!(sequence(5, 0, 3).iter().all(|q| *q != Scan));
    }
}
