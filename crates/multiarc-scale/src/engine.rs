//! DataFusion 55 over the store, one row each way of reaching it:
//!
//! - `multiarc`: `CachedStore` (memory only) registered with DataFusion;
//! - `multiarc-l2`: the same with a second tier on local disk;
//! - `datafusion`: the plain S3 client, DataFusion's own list-files and
//!   Parquet metadata caches on (what a DataFusion user has today);
//! - `foyer-hybrid`: foyer's hybrid cache (memory and disk) behind the same
//!   wrapper shape as `CachedStore`, with the same budgets.
//!
//! Every row reads through a counting wrapper just in front of the S3
//! client (the requests and bytes that reach the store), and runs with the
//! same DataFusion settings. A row is a worker process of its own (its
//! peak RSS is its own): the command starts one per row, then runs each
//! pass on every row in turn (rows interleaved), over the workers' stdin
//! and stdout (one JSON line each way). The warm pass runs in rounds, rows
//! interleaved within each; the rows' order turns by one at each pass and
//! round, so that no row always runs first (see `scripts/scale-bench.sh`:
//! on this VM, which row runs first moved a cold suite by up to 1.7x).

use crate::tpch::{query, HOT_QUERIES, LINEITEM_SCAN, TABLES};
use anyhow::{bail, Context};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use multiarc_object_store::object_store_013::ObjectStore013;
use multiarc_object_store::CachedStore;
use multiarc_store_tools::{CountingStore, ReadCounts};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A way of reaching the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Row {
    #[value(name = "multiarc")]
    Multiarc,
    #[value(name = "multiarc-l2")]
    MultiarcL2,
    #[value(name = "datafusion")]
    Datafusion,
    #[value(name = "foyer-hybrid")]
    FoyerHybrid,
}

impl Row {
    pub fn name(self) -> &'static str {
        match self {
            Row::Multiarc => "multiarc",
            Row::MultiarcL2 => "multiarc-l2",
            Row::Datafusion => "datafusion",
            Row::FoyerHybrid => "foyer-hybrid",
        }
    }

    fn has_disk(self) -> bool {
        matches!(self, Row::MultiarcL2 | Row::FoyerHybrid)
    }
}

/// Where the data is, and the budgets.
#[derive(Clone, Debug, Serialize, Deserialize, clap::Args)]
pub struct Setup {
    /// The S3 endpoint (path-style requests; credentials from
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
    #[arg(long)]
    pub endpoint: String,
    /// The bucket.
    #[arg(long)]
    pub bucket: String,
    /// Where in the bucket the tables are (`PREFIX/TABLE/part-N.parquet`).
    #[arg(long)]
    pub prefix: String,
    /// The region the store answers for.
    #[arg(long, default_value = "garage")]
    pub region: String,
    /// Memory of every row's cache.
    #[arg(long, value_parser = size_arg)]
    pub memory: u64,
    /// Local disk of the rows that have one (multiarc-l2's L2, foyer's).
    #[arg(long, value_parser = size_arg)]
    pub disk: u64,
    /// Where the disks go (a disk filesystem, not tmpfs).
    #[arg(long)]
    pub disk_dir: PathBuf,
    /// The caches' block size.
    #[arg(long, value_parser = size_arg, default_value = "256KiB")]
    pub block_size: u64,
}

fn size_arg(text: &str) -> Result<u64, String> {
    multiarc::units::parse_size(text).map_err(|e| e.to_string())
}

/// One query's run in one pass on one row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueryResult {
    pub engine: String,
    pub row: String,
    pub pass: String,
    /// The round of the pass (0 for passes that run once; the warm pass
    /// runs `warm_rounds` times).
    #[serde(default)]
    pub round: usize,
    pub query: String,
    pub latency_ms: f64,
    pub store_requests: u64,
    pub store_bytes: u64,
    pub peak_rss_bytes: u64,
    /// Reads served by the cache over all its reads in this query (multiarc
    /// rows: memory and L2 hits against those and the misses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_ratio: Option<f64>,
    /// The cache's ARC split when the query ended (multiarc rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arc_after: Option<ArcSplit>,
    /// A digest of the answer (the rows as DataFusion prints them).
    pub answer: String,
    /// Whether the answer equals the uncached row's (`datafusion`, its first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where the cache's memory stands: its size target `c`, the adaptive
/// target `p` for the MRU state (buffers seen once recently; what a scan
/// fills), and the bytes in MRU and in MFU (seen twice or more). A scan
/// can push MFU's buffers out only while `p` leaves room for it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ArcSplit {
    pub c: u64,
    pub p: u64,
    pub mru_bytes: u64,
    pub mfu_bytes: u64,
}

/// The ARC split of a row's cache, if it has one.
fn arc_split(cache: &Option<Arc<CachedStore<CountingStore<AmazonS3>>>>) -> Option<ArcSplit> {
    let s = cache.as_ref()?.cache().stats();
    Some(ArcSplit {
        c: s.c,
        p: s.p,
        mru_bytes: s.mru_bytes,
        mfu_bytes: s.mfu_bytes,
    })
}

/// The S3 client every row starts from (path-style, plain HTTP allowed;
/// credentials from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`).
pub fn s3(setup: &Setup) -> anyhow::Result<AmazonS3> {
    let key = std::env::var("AWS_ACCESS_KEY_ID").context("AWS_ACCESS_KEY_ID")?;
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").context("AWS_SECRET_ACCESS_KEY")?;
    Ok(AmazonS3Builder::new()
        .with_endpoint(&setup.endpoint)
        .with_bucket_name(&setup.bucket)
        .with_region(&setup.region)
        .with_access_key_id(key)
        .with_secret_access_key(secret)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()?)
}

/// A row, built: its DataFusion session over its store.
pub struct Built {
    ctx: SessionContext,
    counts: Arc<ReadCounts>,
    cache: Option<Arc<CachedStore<CountingStore<AmazonS3>>>>,
}

/// The cache's (hits, reads) so far, for the hit ratio.
fn cache_reads(cache: &Option<Arc<CachedStore<CountingStore<AmazonS3>>>>) -> Option<(u64, u64)> {
    let s = cache.as_ref()?.stats();
    let hits = s.memory_hits + s.l2_hits;
    Some((hits, hits + s.blocks_fetched))
}

impl Built {
    /// Runs `sql` to its end: the answer's batches.
    pub async fn collect(
        &self,
        sql: &str,
    ) -> datafusion::error::Result<Vec<datafusion::arrow::record_batch::RecordBatch>> {
        self.ctx.sql(sql).await?.collect().await
    }

    /// Requests and bytes this row has sent to the store so far.
    pub fn traffic(&self) -> multiarc_store_tools::ReadTraffic {
        self.counts.snapshot()
    }

    /// The row's cache, if it has one.
    pub fn cache(&self) -> Option<&CachedStore<CountingStore<AmazonS3>>> {
        self.cache.as_deref()
    }
}

/// An answer's digest, as the passes compare answers.
pub fn answer_digest(
    batches: &[datafusion::arrow::record_batch::RecordBatch],
) -> anyhow::Result<String> {
    Ok(digest(&pretty_format_batches(batches)?.to_string()))
}

/// Builds `row` (over its disk in `setup.disk_dir/ROW`, kept across builds:
/// a second build is a restart over it).
pub async fn build(row: Row, setup: &Setup) -> anyhow::Result<Built> {
    build_with_latency(row, setup, Duration::ZERO).await
}

/// [`build`], with `latency` added before every request to the store (as
/// the benchmark's proxies add it).
pub async fn build_with_latency(
    row: Row,
    setup: &Setup,
    latency: Duration,
) -> anyhow::Result<Built> {
    let counting = CountingStore::new(s3(setup)?, latency);
    let counts = counting.counts();
    let disk = setup.disk_dir.join(row.name());
    if row.has_disk() {
        std::fs::create_dir_all(&disk).with_context(|| format!("creating {}", disk.display()))?;
    }
    let mut cache = None;
    let store: Arc<dyn object_store_013::ObjectStore> = match row {
        Row::Multiarc | Row::MultiarcL2 => {
            // The tables do not change during a run: metadata is kept,
            // as the foyer row keeps it.
            let mut builder = CachedStore::builder(counting)
                .max_bytes(setup.memory)
                .block_size(setup.block_size)
                .metadata_forever()
                .namespace(format!("{} {}", setup.endpoint, setup.bucket));
            if row == Row::MultiarcL2 {
                builder = builder.l2(disk.join("multiarc.l2"), setup.disk);
            }
            let cached = Arc::new(builder.build().map_err(|e| anyhow::anyhow!("{e}"))?);
            cache = Some(Arc::clone(&cached));
            Arc::new(ObjectStore013::new(cached))
        }
        Row::Datafusion => Arc::new(ObjectStore013::new(Arc::new(counting))),
        Row::FoyerHybrid => {
            let store = multiarc_bench::foyer_hybrid_store(
                counting,
                setup.memory,
                Some((disk.as_path(), setup.disk)),
                setup.block_size,
            )
            .await?;
            Arc::new(ObjectStore013::new(store))
        }
    };
    let runtime = RuntimeEnvBuilder::new().build_arc()?;
    let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
    let url = url::Url::parse(&format!("s3://{}", setup.bucket))?;
    ctx.register_object_store(&url, store);
    for table in TABLES {
        let location = format!(
            "s3://{}/{}/{table}/",
            setup.bucket,
            setup.prefix.trim_matches('/')
        );
        ctx.register_parquet(table, &location, ParquetReadOptions::default())
            .await
            .with_context(|| format!("registering {location}"))?;
    }
    Ok(Built { ctx, counts, cache })
}

/// The process's peak resident memory (VmHWM), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// The queries of `pass`: `scan` is the lineitem scan, `before_scan` and
/// `after_scan` the hot ones, the others every query asked for.
fn queries_of(pass: &str, queries: &[usize]) -> Vec<(String, String)> {
    match pass {
        "scan" => vec![("scan".to_string(), LINEITEM_SCAN.to_string())],
        "before_scan" | "after_scan" => HOT_QUERIES
            .iter()
            .filter(|q| queries.contains(q))
            .map(|q| (format!("q{q}"), query(*q).to_string()))
            .collect(),
        _ => queries
            .iter()
            .map(|q| (format!("q{q}"), query(*q).to_string()))
            .collect(),
    }
}

/// Runs `pass` on a built row.
async fn run_pass(
    row: Row,
    built: &Built,
    pass: &str,
    round: usize,
    queries: &[usize],
) -> Vec<QueryResult> {
    let mut out = Vec::new();
    for (name, sql) in queries_of(pass, queries) {
        let before = built.counts.snapshot();
        let reads_before = cache_reads(&built.cache);
        let started = Instant::now();
        let result = built.collect(&sql).await;
        let latency = started.elapsed();
        let traffic = built.counts.snapshot().since(before);
        let hit_ratio = match (reads_before, cache_reads(&built.cache)) {
            (Some((h0, r0)), Some((h1, r1))) if r1 > r0 => {
                Some((h1 - h0) as f64 / (r1 - r0) as f64)
            }
            _ => None,
        };
        let (answer, error) = match result
            .map_err(anyhow::Error::from)
            .and_then(|b| answer_digest(&b))
        {
            Ok(answer) => (answer, None),
            Err(e) => (String::new(), Some(e.to_string())),
        };
        out.push(QueryResult {
            engine: "datafusion".into(),
            row: row.name().into(),
            pass: pass.into(),
            round,
            query: name,
            latency_ms: latency.as_secs_f64() * 1000.0,
            store_requests: traffic.requests,
            store_bytes: traffic.bytes,
            peak_rss_bytes: peak_rss(),
            hit_ratio,
            arc_after: arc_split(&built.cache),
            answer,
            answer_ok: None,
            error,
        });
    }
    out
}

fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// A worker's command: run a pass, or restart (build the row again over
/// its disk).
#[derive(Serialize, Deserialize)]
enum Command {
    Pass {
        pass: String,
        round: usize,
        queries: Vec<usize>,
    },
    Restart,
}

/// The worker of `row`: builds it, then answers commands on stdin with one
/// JSON line each on stdout (its results, or `[]` for a restart).
pub async fn worker(row: Row, setup: Setup) -> anyhow::Result<()> {
    let mut built = Some(build(row, &setup).await?);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let command: Command = serde_json::from_str(&line?)?;
        let results = match command {
            Command::Pass {
                pass,
                round,
                queries,
            } => run_pass(row, built.as_ref().unwrap(), &pass, round, &queries).await,
            Command::Restart => {
                // A clean stop: what memory holds goes to the L2 first,
                // as a user's shutdown would do (`Cache::l2_flush`).
                if let Some(cache) = built.as_ref().and_then(|b| b.cache.as_ref()) {
                    cache.cache().l2_flush();
                }
                drop(built.take());
                built = Some(build(row, &setup).await?);
                Vec::new()
            }
        };
        writeln!(stdout, "{}", serde_json::to_string(&results)?)?;
        stdout.flush()?;
    }
    Ok(())
}

/// A running worker process.
struct Worker {
    row: Row,
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Worker {
    fn start(row: Row, setup: &Setup, exe: &std::path::Path) -> anyhow::Result<Worker> {
        let mut child = std::process::Command::new(exe)
            .arg("worker")
            .arg("--row")
            .arg(row.name())
            .arg("--setup")
            .arg(serde_json::to_string(setup)?)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting a worker")?;
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        Ok(Worker {
            row,
            child,
            stdin,
            stdout,
        })
    }

    fn ask(&mut self, command: &Command) -> anyhow::Result<Vec<QueryResult>> {
        writeln!(self.stdin, "{}", serde_json::to_string(command)?)?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            bail!("the {} worker ended ({status})", self.row.name());
        }
        Ok(serde_json::from_str(&line)?)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The passes, in order: cold, warm, the hot queries (`before_scan`), the
/// scan, the hot queries again (`after_scan`), then a restart of every row
/// over its disk and the warm suite again (`remount`). `before_scan` makes
/// the hot queries the ones used last before the scan, and shows what the
/// cache held of them then: the warm suite's 17 other queries may have
/// pushed them out of a memory that holds the hot queries' columns but not
/// all 22 queries', and that is not the scan's doing.
pub const PASSES: [&str; 6] = [
    "cold",
    "warm",
    "before_scan",
    "scan",
    "after_scan",
    "remount",
];

/// Runs every pass on every row, rows interleaved within a pass (the warm
/// pass `warm_rounds` times, rows interleaved within each round); the
/// `datafusion` row's cold answers are the reference of `answer_ok`.
/// `exe` is the `multiarc-scale` binary (the workers are its `worker`
/// subcommand).
pub fn run(
    rows: &[Row],
    setup: &Setup,
    queries: &[usize],
    warm_rounds: usize,
    exe: &std::path::Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<QueryResult>> {
    anyhow::ensure!(warm_rounds >= 1, "warm rounds: at least 1");
    let mut rows = rows.to_vec();
    if !rows.contains(&Row::Datafusion) {
        // The reference answers come from the uncached row.
        rows.insert(0, Row::Datafusion);
    }
    let mut workers = rows
        .iter()
        .map(|&r| Worker::start(r, setup, exe))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut out = Vec::new();
    // Turns by one at each pass and round: which row runs first.
    let mut turn = 0;
    for pass in PASSES {
        if pass == "remount" {
            for w in &mut workers {
                progress(&format!("{}: restart over its disk", w.row.name()));
                w.ask(&Command::Restart)?;
            }
        }
        let rounds = if pass == "warm" { warm_rounds } else { 1 };
        for round in 0..rounds {
            let n = workers.len();
            for i in 0..n {
                let w = &mut workers[(turn + i) % n];
                let named = if rounds > 1 {
                    format!("pass {pass}, round {}: {}", round + 1, w.row.name())
                } else {
                    format!("pass {pass}: {}", w.row.name())
                };
                progress(&named);
                let started = Instant::now();
                let results = w.ask(&Command::Pass {
                    pass: pass.to_string(),
                    round,
                    queries: queries.to_vec(),
                })?;
                progress(&format!(
                    "{named}: {} queries in {:.1} s",
                    results.len(),
                    started.elapsed().as_secs_f64()
                ));
                out.extend(results);
            }
            turn += 1;
        }
    }
    // The first answer the uncached row gave to each query (cold, or the
    // scan's).
    let mut reference = std::collections::HashMap::new();
    for r in out
        .iter()
        .filter(|r| r.row == "datafusion" && r.error.is_none())
    {
        reference
            .entry(r.query.clone())
            .or_insert_with(|| r.answer.clone());
    }
    for r in &mut out {
        r.answer_ok = reference
            .get(&r.query)
            .map(|a| r.error.is_none() && *a == r.answer);
    }
    Ok(out)
}
