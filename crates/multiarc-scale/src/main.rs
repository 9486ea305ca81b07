//! `multiarc-scale`: TPC-H data onto an S3 store, and DataFusion's passes
//! over it through multiarc and its peers. Progress on stderr; with
//! `--json`, one JSON document on stdout.

use anyhow::Context;
use clap::{Parser, Subcommand};
use multiarc_scale::engine::{self, Row, Setup};
use multiarc_scale::tpch;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use std::io::Write;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "multiarc-scale",
    about = "TPC-H through multiarc and its peers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes TPC-H at a scale factor as Parquet to the bucket.
    Gen {
        /// The S3 endpoint (credentials from AWS_ACCESS_KEY_ID and
        /// AWS_SECRET_ACCESS_KEY).
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        bucket: String,
        /// Where the tables go (PREFIX/TABLE/part-N.parquet).
        #[arg(long)]
        prefix: String,
        #[arg(long, default_value = "garage")]
        region: String,
        /// The scale factor (1: lineitem's 6 million rows).
        #[arg(long)]
        sf: f64,
        /// Where each file is written before its upload.
        #[arg(long, default_value = "target")]
        tmp: std::path::PathBuf,
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Runs the passes (cold, warm, before_scan, scan, after_scan, remount) of the
    /// queries on each row, rows interleaved.
    Datafusion {
        #[command(flatten)]
        setup: Setup,
        /// Rows (comma-separated): multiarc, multiarc-l2, datafusion,
        /// foyer-hybrid (datafusion always runs: its answers are the
        /// reference).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "datafusion,multiarc,multiarc-l2,foyer-hybrid"
        )]
        rows: Vec<Row>,
        /// Queries (comma-separated numbers, 1 to 22).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=22))]
        queries: Option<Vec<u8>>,
        /// How many times the warm pass runs (rows interleaved within each
        /// round): its figures are the medians of the rounds.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=100))]
        warm_rounds: u16,
        #[arg(long)]
        json: bool,
    },
    /// Internal: one row's worker (commands on stdin, results on stdout).
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        row: Row,
        /// The setup, as JSON.
        #[arg(long)]
        setup: String,
    },
}

fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "multiarc-scale: {text}");
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        let _ = writeln!(std::io::stderr(), "multiarc-scale: error: {e:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Gen {
            endpoint,
            bucket,
            prefix,
            region,
            sf,
            tmp,
            json,
        } => {
            let store = AmazonS3Builder::new()
                .with_endpoint(&endpoint)
                .with_bucket_name(&bucket)
                .with_region(&region)
                .with_access_key_id(
                    std::env::var("AWS_ACCESS_KEY_ID").context("AWS_ACCESS_KEY_ID")?,
                )
                .with_secret_access_key(
                    std::env::var("AWS_SECRET_ACCESS_KEY").context("AWS_SECRET_ACCESS_KEY")?,
                )
                .with_allow_http(true)
                .with_virtual_hosted_style_request(false)
                .build()?;
            std::fs::create_dir_all(&tmp)?;
            let started = std::time::Instant::now();
            let written = tpch::generate(
                Arc::new(store),
                &Path::from(prefix.as_str()),
                sf,
                &tmp,
                |p| say(&format!("{:.0} s: {p}", started.elapsed().as_secs_f64())),
            )
            .await?;
            if json {
                println!("{}", serde_json::json!({ "sf": sf, "tables": written }));
            } else {
                for w in &written {
                    println!(
                        "{:<9} {:>3} files {:>12} rows {:>14} bytes",
                        w.table, w.files, w.rows, w.bytes
                    );
                }
            }
            Ok(())
        }
        Command::Datafusion {
            setup,
            rows,
            queries,
            warm_rounds,
            json,
        } => {
            let queries: Vec<usize> = match queries {
                Some(q) => q.into_iter().map(usize::from).collect(),
                None => (1..=22).collect(),
            };
            let exe = std::env::current_exe().context("finding this program")?;
            let results = tokio::task::spawn_blocking(move || {
                engine::run(&rows, &setup, &queries, warm_rounds.into(), &exe, say)
            })
            .await??;
            if json {
                println!("{}", serde_json::json!({ "results": results }));
            } else {
                println!(
                    "{:<12} {:<10} {:>5} {:<5} {:>10} {:>9} {:>12} {:>6} {:>9}",
                    "row", "pass", "round", "query", "ms", "requests", "bytes", "ok", "hit"
                );
                for r in &results {
                    println!(
                        "{:<12} {:<10} {:>5} {:<5} {:>10.1} {:>9} {:>12} {:>6} {:>9}",
                        r.row,
                        r.pass,
                        r.round,
                        r.query,
                        r.latency_ms,
                        r.store_requests,
                        r.store_bytes,
                        r.answer_ok.map_or("-".into(), |o| o.to_string()),
                        r.hit_ratio.map_or("-".into(), |h| format!("{h:.3}"))
                    );
                }
            }
            let wrong: Vec<String> = results
                .iter()
                .filter(|r| r.answer_ok == Some(false) || r.error.is_some())
                .map(|r| {
                    format!(
                        "{} {} {}: {}",
                        r.row,
                        r.pass,
                        r.query,
                        r.error.as_deref().unwrap_or("a different answer")
                    )
                })
                .collect();
            anyhow::ensure!(wrong.is_empty(), "wrong answers: {}", wrong.join("; "));
            Ok(())
        }
        Command::Worker { row, setup } => {
            let setup: Setup = serde_json::from_str(&setup)?;
            engine::worker(row, setup).await
        }
    }
}
