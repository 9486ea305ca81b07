//! `multiarc stats` and `multiarc set`: a mount's statistics, once or
//! every interval (as OpenZFS's arcstat prints them), and its tunables.

use anyhow::bail;
use multiarc_bench::cli::utc_time;
use multiarc_bench::outln;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Where a `multiarc mount` is mounted.
    mountpoint: PathBuf,
    /// One JSON object (name: value) instead of `name value` lines; with
    /// --interval, one JSON object per line.
    #[arg(long)]
    json: bool,
    /// Print one line per interval, as arcstat does (e.g. 1s, 500ms, 2):
    /// reads, hits, misses, hit %, sizes, p, L2 hits and store requests in
    /// that interval. Until interrupted, or --count lines.
    #[arg(long, value_parser = interval_arg)]
    interval: Option<Duration>,
    /// With --interval: how many lines, then stop.
    #[arg(long, requires = "interval", value_parser = multiarc_bench::cli::count_arg)]
    count: Option<usize>,
}

#[derive(clap::Args)]
pub struct SetArgs {
    /// Where a `multiarc mount` is mounted.
    mountpoint: PathBuf,
    /// NAME=VALUE, e.g. max_bytes=1GiB.
    #[arg(required = true)]
    settings: Vec<String>,
}

/// An interval: above 0, at most a day.
fn interval_arg(text: &str) -> Result<Duration, String> {
    let d = multiarc::units::parse_seconds(text, 86_400.0).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(10) {
        return Err(format!("{text:?}: the interval must be at least 10ms"));
    }
    Ok(d)
}

/// `multiarc stats MNT`: the mount's statistics, once or every interval.
pub fn run_stats(args: StatsArgs) -> anyhow::Result<()> {
    match args.interval {
        None => once(&args),
        Some(interval) => live(&args, interval),
    }
}

fn once(args: &StatsArgs) -> anyhow::Result<()> {
    let stats = multiarc_fuse::read_arcstats(&args.mountpoint)?;
    if args.json {
        let obj: serde_json::Map<String, serde_json::Value> = stats
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::from(v)))
            .collect();
        outln!("{}", serde_json::Value::Object(obj))?;
    } else {
        let width = stats.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in stats {
            outln!("{k:<width$} {v}")?;
        }
    }
    Ok(())
}

/// One reading of the figures the live view shows (the first of a name:
/// the block cache's, ahead of the object store's of the same name).
struct Reading(HashMap<String, u64>);

impl Reading {
    fn take(args: &StatsArgs) -> anyhow::Result<Reading> {
        let mut map = HashMap::new();
        for (k, v) in multiarc_fuse::read_arcstats(&args.mountpoint)? {
            map.entry(k).or_insert(v);
        }
        Ok(Reading(map))
    }

    fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }
}

/// One interval's line: counters as their change, sizes as they are now.
#[derive(Debug, PartialEq, serde::Serialize)]
struct Line {
    time: String,
    reads: u64,
    hits: u64,
    misses: u64,
    hit_percent: f64,
    size: u64,
    c: u64,
    p: u64,
    mru_bytes: u64,
    mfu_bytes: u64,
    l2_hits: u64,
    l2_size: u64,
    /// The object store's requests (bucket mounts); `None` elsewhere.
    store_requests: Option<u64>,
}

fn line(before: &Reading, now: &Reading, time: SystemTime) -> Line {
    let delta = |name: &str| {
        now.get(name)
            .unwrap_or(0)
            .saturating_sub(before.get(name).unwrap_or(0))
    };
    let current = |name: &str| now.get(name).unwrap_or(0);
    let (hits, misses) = (delta("hits"), delta("misses"));
    let reads = hits + misses;
    Line {
        time: utc_time(time),
        reads,
        hits,
        misses,
        hit_percent: if reads == 0 {
            0.0
        } else {
            100.0 * hits as f64 / reads as f64
        },
        size: current("size"),
        c: current("c"),
        p: current("p"),
        mru_bytes: current("mru_bytes"),
        mfu_bytes: current("mfu_bytes"),
        l2_hits: delta("l2_hits"),
        l2_size: current("l2_size"),
        store_requests: now.get("store_requests").map(|_| delta("store_requests")),
    }
}

/// A byte count in four characters or so: `512`, `8.0K`, `1.5G`.
fn short(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v >= 100.0 {
        format!("{v:.0}{}", UNITS[unit])
    } else {
        format!("{v:.1}{}", UNITS[unit])
    }
}

const HEADER: &str =
    "    time      read      hit   miss  hit%    size       c       p     mru     mfu   l2hit  l2size  store";

fn text(l: &Line) -> String {
    let time = &l.time[11..19];
    let store = l
        .store_requests
        .map_or_else(|| "-".to_string(), |s| s.to_string());
    format!(
        "{time}  {:>8} {:>8} {:>6} {:>5.1} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6}",
        l.reads,
        l.hits,
        l.misses,
        l.hit_percent,
        short(l.size),
        short(l.c),
        short(l.p),
        short(l.mru_bytes),
        short(l.mfu_bytes),
        l.l2_hits,
        short(l.l2_size),
        store
    )
}

fn live(args: &StatsArgs, interval: Duration) -> anyhow::Result<()> {
    let mut before = Reading::take(args)?;
    if !args.json {
        outln!("{HEADER}")?;
    }
    let mut printed = 0;
    let mut next = Instant::now() + interval;
    loop {
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        let now = match Reading::take(args) {
            Ok(now) => now,
            Err(e) => bail!("{e} (after {printed} lines)"),
        };
        let l = line(&before, &now, SystemTime::now());
        if args.json {
            outln!("{}", serde_json::to_string(&l)?)?;
        } else {
            outln!("{}", text(&l))?;
        }
        before = now;
        printed += 1;
    }
}

/// `multiarc set MNT NAME=VALUE...`: changes tunables at run time.
pub fn run_set(args: SetArgs) -> anyhow::Result<()> {
    let set = multiarc_fuse::set_tunables(&args.mountpoint, &args.settings)?;
    for w in set.warnings {
        eprintln!("multiarc: warning: {w}");
    }
    for (name, value) in set.values {
        outln!("{name}={value}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(pairs: &[(&str, u64)]) -> Reading {
        Reading(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn a_line_holds_the_intervals_changes_and_the_sizes_now() {
        let before = reading(&[("hits", 100), ("misses", 50), ("l2_hits", 7), ("size", 1)]);
        let now = reading(&[
            ("hits", 190),
            ("misses", 60),
            ("l2_hits", 9),
            ("size", 3 << 20),
            ("c", 4 << 20),
            ("p", 1 << 20),
        ]);
        let l = line(&before, &now, std::time::UNIX_EPOCH);
        assert_eq!((l.reads, l.hits, l.misses), (100, 90, 10));
        assert_eq!(l.hit_percent, 90.0);
        assert_eq!(
            (l.size, l.c, l.p, l.l2_hits),
            (3 << 20, 4 << 20, 1 << 20, 2)
        );
        assert_eq!(l.store_requests, None, "a directory mount has no store");
        let text = text(&l);
        assert!(text.starts_with("00:00:00"), "{text}");
        assert!(
            text.contains(" 90.0 ") && text.contains("3.0M") && text.ends_with('-'),
            "{text}"
        );
        let with_store = line(
            &reading(&[("store_requests", 5)]),
            &reading(&[("store_requests", 8)]),
            std::time::UNIX_EPOCH,
        );
        assert_eq!(with_store.store_requests, Some(3));
        assert_eq!(with_store.hit_percent, 0.0, "no reads: 0, not NaN");
    }

    #[test]
    fn sizes_are_short_and_intervals_bounded() {
        assert_eq!(short(512), "512");
        assert_eq!(short(8192), "8.0K");
        assert_eq!(short(3 << 29), "1.5G");
        assert_eq!(short(200 << 20), "200M");
        assert!(interval_arg("1s").is_ok());
        assert!(interval_arg("2").is_ok());
        assert!(interval_arg("0").is_err());
        assert!(interval_arg("1ms").is_err());
        assert!(interval_arg("2d").is_err());
    }
}
