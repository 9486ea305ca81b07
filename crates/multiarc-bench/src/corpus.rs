//! `multiarc corpus`: policies judged on traces they were not tuned on.
//!
//! Every trace of one set of `multiarc_sim::corpus` (the held-out set by
//! default) is replayed at each of its sizes under the policies asked for
//! and under every reference policy ([`REFERENCES`]), all side by side. A
//! row reports each policy's hit ratio over the trace's measured requests
//! (a real trace's second half is replayed after its first, the hits
//! counted over the second), its distance in points from exact ARC (`arc`)
//! and from the best reference of that row. The summary gives each
//! policy's worst row against both. Rows run in parallel, one per core;
//! every policy is deterministic (multiarc rows evict inline from a fixed
//! seed), so the numbers repeat exactly.

use crate::cli::{enum_arg, name_arg, text_table};
use crate::harness::Bar;
use crate::outln;
use crate::policies;
use anyhow::{bail, Context};
use multiarc_sim::corpus::{LoadError, Loaded, Set, Spec};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The reference policies: "best" is the best of these, per row.
pub const REFERENCES: &[&str] = &["arc", "car", "lru", "s3fifo", "lirs"];

/// The exact ARC every row is measured against.
const ARC: &str = "arc";

/// Arguments of `multiarc corpus`.
#[derive(clap::Args, Debug)]
pub struct CorpusArgs {
    /// Which set: held-out (what policies are judged on) or tuning (what
    /// their constants may be chosen on).
    #[arg(long, default_value = "held-out", value_parser = enum_arg::<SetName>("set"))]
    set: SetName,
    /// Policies judged, beside the references (arc, car, lru, s3fifo,
    /// lirs), which
    /// always run: any name `replay --policy` takes.
    #[arg(long, value_parser = name_arg, value_delimiter = ',', default_value = "multiarc,multiarc-eager,multiarc-s3arc")]
    policy: Vec<String>,
    /// Only the traces whose names start with one of these, comma-separated
    /// (e.g. `loop-noise,P6`).
    #[arg(long, value_parser = name_arg, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Where the real traces are (cloudphysics_io.csv, arc/OLTP.lis.zst,
    /// arc/P6.lis.zst); those absent are skipped with a line on stderr.
    #[arg(long, default_value = "../shared/traces")]
    traces: PathBuf,
    /// At most this many requests per trace (a short run: a generated
    /// trace's first ones; a real trace cut there before it is halved).
    /// Default: each trace's own count (2,000,000 generated; the real
    /// traces whole).
    #[arg(long, value_parser = crate::cli::count_arg)]
    requests: Option<usize>,
    /// Seed of the multiarc rows' random choices, as `replay --seed`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// The sets `--set` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SetName {
    /// What policies are judged on.
    HeldOut,
    /// What their constants may be chosen on.
    Tuning,
}

/// One policy on one row.
#[derive(Serialize, Clone)]
struct Cell {
    policy: String,
    hits: u64,
    /// Hits per measured request, in percent.
    hit_percent: f64,
}

/// One trace at one size.
#[derive(Serialize, Clone)]
struct Row {
    trace: String,
    capacity_blocks: u64,
    /// Requests whose hits count.
    measured_requests: u64,
    cells: Vec<Cell>,
    /// The best reference policy of the row, and its hit ratio (%).
    best_reference: String,
    best_reference_percent: f64,
    arc_percent: f64,
}

/// A judged policy over every row.
#[derive(Serialize)]
struct Summary {
    policy: String,
    /// Its lowest hit ratio minus ARC's, in points, and where.
    worst_against_arc: f64,
    worst_against_arc_at: String,
    /// Its lowest hit ratio minus the best reference's, and where.
    worst_against_best: f64,
    worst_against_best_at: String,
    /// Mean over the rows of its hit ratio minus ARC's.
    mean_against_arc: f64,
    /// Rows where it is more than 0.3 points below ARC.
    rows_below_arc_by_more_than_0_3: usize,
}

#[derive(Serialize)]
struct Report {
    set: String,
    seed: u64,
    references: Vec<String>,
    policies: Vec<String>,
    /// Traces not replayed, and why (a real trace absent).
    skipped: Vec<String>,
    rows: Vec<Row>,
    summary: Vec<Summary>,
}

/// A row waiting to run.
struct Job<'a> {
    trace: &'a str,
    loaded: &'a Loaded,
    capacity: u64,
}

/// Runs every policy of `names` over one row.
fn run_row(job: &Job, names: &[String], seed: u64, done: &AtomicU64) -> anyhow::Result<Row> {
    let Loaded {
        requests,
        measured_from,
        distinct,
        ..
    } = job.loaded;
    let mut running = names
        .iter()
        .map(|name| {
            let built = policies::built_capacity(name, job.capacity, *distinct);
            Ok((policies::build_replayed(name, built, seed)?, 0u64))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (policy, hits) in running.iter_mut() {
        for (i, &id) in requests.iter().enumerate() {
            let hit = policy.access(i as u64, id, None);
            *hits += (hit && i >= *measured_from) as u64;
        }
        done.fetch_add(requests.len() as u64, Ordering::Relaxed);
    }
    let measured = (requests.len() - measured_from) as u64;
    let cells: Vec<Cell> = names
        .iter()
        .zip(&running)
        .map(|(name, (_, hits))| Cell {
            policy: name.clone(),
            hits: *hits,
            hit_percent: 100.0 * *hits as f64 / measured.max(1) as f64,
        })
        .collect();
    Ok(Row::new(job.trace, job.capacity, measured, cells))
}

impl Row {
    /// The row of `trace` at `capacity_blocks` from its cells (every
    /// reference among them), with its best reference and ARC's figure.
    fn new(trace: &str, capacity_blocks: u64, measured_requests: u64, cells: Vec<Cell>) -> Row {
        let percent = |p: &str| hit_percent(&cells, p);
        let best = REFERENCES
            .iter()
            .max_by(|a, b| percent(a).total_cmp(&percent(b)))
            .expect("references");
        Row {
            trace: trace.to_string(),
            capacity_blocks,
            measured_requests,
            best_reference: best.to_string(),
            best_reference_percent: percent(best),
            arc_percent: percent(ARC),
            cells,
        }
    }

    /// Policy `p`'s hit ratio (%) on this row.
    fn percent(&self, p: &str) -> f64 {
        hit_percent(&self.cells, p)
    }

    /// `trace @blocks`, as the tables name the row.
    fn label(&self) -> String {
        format!("{} @{}", self.trace, self.capacity_blocks)
    }
}

/// Policy `p`'s hit ratio (%) among `cells`.
fn hit_percent(cells: &[Cell], p: &str) -> f64 {
    cells
        .iter()
        .find(|c| c.policy == p)
        .map(|c| c.hit_percent)
        .expect("every policy runs on every row")
}

/// Each judged policy's worst rows.
fn summarize(rows: &[Row], judged: &[String]) -> Vec<Summary> {
    judged
        .iter()
        .map(|p| {
            let diffs: Vec<(f64, f64, String)> = rows
                .iter()
                .map(|r| {
                    let mine = r.percent(p);
                    (
                        mine - r.arc_percent,
                        mine - r.best_reference_percent,
                        r.label(),
                    )
                })
                .collect();
            let worst = |key: fn(&(f64, f64, String)) -> f64| {
                diffs
                    .iter()
                    .min_by(|a, b| key(a).total_cmp(&key(b)))
                    .map(|d| (key(d), d.2.clone()))
                    .unwrap_or((0.0, String::new()))
            };
            let (worst_arc, at_arc) = worst(|d| d.0);
            let (worst_best, at_best) = worst(|d| d.1);
            Summary {
                policy: p.clone(),
                worst_against_arc: worst_arc,
                worst_against_arc_at: at_arc,
                worst_against_best: worst_best,
                worst_against_best_at: at_best,
                mean_against_arc: diffs.iter().map(|d| d.0).sum::<f64>()
                    / diffs.len().max(1) as f64,
                rows_below_arc_by_more_than_0_3: diffs.iter().filter(|d| d.0 < -0.3).count(),
            }
        })
        .collect()
}

/// Runs the command.
pub fn run(args: CorpusArgs) -> anyhow::Result<()> {
    let set = match args.set {
        SetName::HeldOut => Set::HeldOut,
        SetName::Tuning => Set::Tuning,
    };
    let judged: Vec<String> = args
        .policy
        .iter()
        .filter(|p| !REFERENCES.contains(&p.as_str()))
        .cloned()
        .collect();
    policies::check_names(&judged)?;
    if judged.iter().any(|p| p == "opt") {
        bail!(
            "--policy opt: the corpus judges policies that run without the future; opt is not one"
        );
    }
    let names: Vec<String> = judged
        .iter()
        .cloned()
        .chain(REFERENCES.iter().map(|s| s.to_string()))
        .collect();
    let mut specs: Vec<Spec> = set.traces();
    if let Some(only) = &args.only {
        specs.retain(|s| only.iter().any(|o| s.name.starts_with(o.as_str())));
        if specs.is_empty() {
            let all: Vec<String> = set.traces().into_iter().map(|s| s.name).collect();
            bail!(
                "--only {}: no trace of the {} set starts with that (its traces: {})",
                only.join(","),
                set.name(),
                all.join(", ")
            );
        }
    }
    let bar = Bar::counting("corpus", 0, "requests", args.json);
    let mut skipped = Vec::new();
    let mut loaded: Vec<(String, Loaded)> = Vec::new();
    for spec in &specs {
        bar.doing(format!("loading {}", spec.name));
        match spec.load(&args.traces, args.requests.map(|n| n as u64)) {
            Ok(l) => loaded.push((spec.name.clone(), l)),
            Err(LoadError::Missing(path)) => {
                let why = format!("{}: skipped, {} is absent", spec.name, path.display());
                bar.println(format!("corpus: {why}"));
                skipped.push(why);
            }
            Err(e) => return Err(e).with_context(|| format!("trace {}", spec.name)),
        }
    }
    if loaded.is_empty() {
        bail!(
            "no trace to replay: {} (--traces {} holds none of them)",
            skipped.join("; "),
            args.traces.display()
        );
    }
    let jobs: Vec<Job> = loaded
        .iter()
        .flat_map(|(name, l)| {
            l.capacities.iter().map(move |&capacity| Job {
                trace: name,
                loaded: l,
                capacity,
            })
        })
        .collect();
    let total: u64 = jobs
        .iter()
        .map(|j| j.loaded.requests.len() as u64 * names.len() as u64)
        .sum();
    bar.set_total(total);
    bar.doing(format!(
        "{} rows, {} policies each",
        jobs.len(),
        names.len()
    ));
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<Row>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers.min(jobs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let row = run_row(job, &names, args.seed, &done);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(row);
                finished.fetch_add(1, Ordering::Release);
            });
        }
        // Progress while the workers run.
        while finished.load(Ordering::Acquire) < jobs.len() {
            bar.set_done(done.load(Ordering::Relaxed));
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    });
    let rows: Vec<Row> = results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect::<anyhow::Result<_>>()?;
    bar.set_done(total);
    bar.finish(&format!(
        "{} set: {} traces, {} rows",
        set.name(),
        loaded.len(),
        rows.len()
    ));
    let summary = summarize(&rows, &judged);
    if args.json {
        let report = Report {
            set: set.name().into(),
            seed: args.seed,
            references: REFERENCES.iter().map(|s| s.to_string()).collect(),
            policies: judged,
            skipped,
            rows,
            summary,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    outln!(
        "{} set: hit ratio (%) over each trace's measured requests; judged policies as points from arc and from the row's best reference ({})",
        set.name(),
        REFERENCES.join(", ")
    )?;
    let mut header = vec![
        "trace @ blocks".to_string(),
        "arc".into(),
        "best ref".into(),
    ];
    for p in &judged {
        header.push(p.clone());
        header.push("-arc".into());
        header.push("-best".into());
    }
    let mut table = text_table(header, 1);
    for r in &rows {
        let mut line = vec![
            r.label(),
            format!("{:.2}", r.arc_percent),
            format!("{:.2} {}", r.best_reference_percent, r.best_reference),
        ];
        for p in &judged {
            let mine = r.percent(p);
            line.push(format!("{mine:.2}"));
            line.push(format!("{:+.2}", mine - r.arc_percent));
            line.push(format!("{:+.2}", mine - r.best_reference_percent));
        }
        table.add_row(line);
    }
    outln!("{}", table.trim_fmt())?;
    outln!()?;
    let mut table = text_table(
        [
            "policy",
            "worst -arc",
            "at",
            "worst -best",
            "at",
            "mean -arc",
            "rows < arc-0.3",
        ],
        1,
    );
    for s in &summary {
        table.add_row(vec![
            s.policy.clone(),
            format!("{:+.2}", s.worst_against_arc),
            s.worst_against_arc_at.clone(),
            format!("{:+.2}", s.worst_against_best),
            s.worst_against_best_at.clone(),
            format!("{:+.2}", s.mean_against_arc),
            format!("{} of {}", s.rows_below_arc_by_more_than_0_3, rows.len()),
        ]);
    }
    outln!("{}", table.trim_fmt())?;
    for s in &skipped {
        outln!("skipped: {s}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(trace: &str, cells: &[(&str, f64)]) -> Row {
        let cells: Vec<Cell> = cells
            .iter()
            .map(|&(p, pct)| Cell {
                policy: p.into(),
                hits: 0,
                hit_percent: pct,
            })
            .collect();
        Row::new(trace, 10, 100, cells)
    }

    #[test]
    fn the_summary_finds_each_policys_worst_rows() {
        let rows = vec![
            row(
                "a",
                &[
                    ("m", 50.0),
                    ("arc", 50.5),
                    ("car", 51.0),
                    ("lru", 40.0),
                    ("s3fifo", 45.0),
                    ("lirs", 20.0),
                ],
            ),
            row(
                "b",
                &[
                    ("m", 30.0),
                    ("arc", 29.0),
                    ("car", 28.0),
                    ("lru", 33.0),
                    ("s3fifo", 25.0),
                    ("lirs", 26.0),
                ],
            ),
        ];
        let s = &summarize(&rows, &["m".to_string()])[0];
        assert!((s.worst_against_arc + 0.5).abs() < 1e-9);
        assert_eq!(s.worst_against_arc_at, "a @10");
        assert!((s.worst_against_best + 3.0).abs() < 1e-9);
        assert_eq!(s.worst_against_best_at, "b @10");
        assert!((s.mean_against_arc - 0.25).abs() < 1e-9);
        assert_eq!(s.rows_below_arc_by_more_than_0_3, 1);
    }

    #[test]
    fn a_row_counts_only_its_measured_requests() {
        // 0..100 twice; measured from the second pass on: a cache of 100
        // hits all of it, one of 10 none in the ARC family.
        let requests: Vec<u64> = (0..100).chain(0..100).collect();
        let loaded = Loaded {
            requests,
            measured_from: 100,
            distinct: 100,
            capacities: vec![],
        };
        let names: Vec<String> = ["multiarc"]
            .iter()
            .chain(REFERENCES)
            .map(|s| s.to_string())
            .collect();
        let done = AtomicU64::new(0);
        for (capacity, want) in [(100, 100.0), (10, 0.0)] {
            let job = Job {
                trace: "t",
                loaded: &loaded,
                capacity,
            };
            let r = run_row(&job, &names, 0, &done).unwrap();
            assert_eq!(r.measured_requests, 100);
            for c in &r.cells {
                // LIRS and S3-FIFO keep part of a loop larger than the
                // cache: at most the cache's 10 blocks of the 100.
                if capacity == 10 && ["lirs", "s3fifo"].contains(&c.policy.as_str()) {
                    assert!(c.hit_percent <= 10.0, "{} @{capacity}", c.policy);
                } else {
                    assert_eq!(c.hit_percent, want, "{} @{capacity}", c.policy);
                }
            }
        }
        assert_eq!(done.load(Ordering::Relaxed), 2 * names.len() as u64 * 200);
    }
}
