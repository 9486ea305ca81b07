//! `multiarc bench`: the benchmarks, one subcommand per workload, each with
//! its own flags (clap refuses another workload's):
//!
//! - `cache` (also `bench` alone, the main job): the OpenZFS 5497
//!   measurement, in memory (`crate::cache`);
//! - `randrw`, `randread`, `rangelock`: one file, many threads, per locking
//!   mode (`crate::file`);
//! - `l2`: random reads over a working set larger than memory, with a
//!   second tier (`crate::l2`);
//! - `async-hit`: a cached block's hit through the async path against the
//!   sync one (`crate::async_hit`).
//! - `object`: Parquet queries through multiarc in front of an S3 store
//!   (`crate::object`).
//!
//! `bench --workload NAME` is `bench NAME`: `main` rewrites the one into
//! the other before clap parses ([`workload_flag_as_subcommand`]).

use crate::cache::CacheArgs;
use crate::cli::{count_arg, enum_arg, enum_name, parse_enum, size_arg};
use crate::file::FileWorkload;
use crate::harness::CommonArgs;
use crate::peers;
use anyhow::bail;
use multiarc_file::Locking;
use std::ffi::OsString;
use std::path::PathBuf;

/// The workloads, as `bench` names them: each is a subcommand
/// (`bench randrw`) and a value of `--workload` (`bench --workload randrw`,
/// the older spelling, which scripts use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Random reads of cached blocks against peer caches (OpenZFS 5497).
    Cache,
    /// 50/50 reads and writes by all threads on ONE cached file.
    Randrw,
    /// The same file, reads only.
    Randread,
    /// Range lock vs rwsem lock/unlock pairs.
    Rangelock,
    /// Random reads over a working set larger than memory, smaller than
    /// memory plus a second tier, backed by an O_DIRECT file: multiarc-l2,
    /// foyer-hybrid, multiarc (memory only), direct.
    L2,
    /// A cached block's hit through the async path against the sync one
    /// (and a whole cached-store read of it).
    AsyncHit,
    /// Repeated Parquet queries through multiarc in front of an S3 store
    /// (in-process, or --endpoint) with emulated latency: multiarc,
    /// multiarc-l2, foyer-hybrid, none.
    Object,
}

/// A locking mode of `--locking` (the library's [`Locking`], by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LockingArg {
    Range,
    Rwsem,
    Torn,
}

impl From<LockingArg> for Locking {
    fn from(l: LockingArg) -> Locking {
        match l {
            LockingArg::Range => Locking::Range,
            LockingArg::Rwsem => Locking::RwSem,
            LockingArg::Torn => Locking::Torn,
        }
    }
}

/// Arguments of `multiarc bench`: a workload's subcommand, or none and the
/// cache workload's flags (`multiarc bench` alone is the main job). Each
/// workload's flags are its own: clap refuses another workload's with an
/// error naming the workload it belongs to ([`explain_foreign_flag`]).
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    after_help = "Without a subcommand, bench runs the cache workload with the flags above. \
                  `bench --workload NAME [FLAGS]` is `bench NAME [FLAGS]`."
)]
pub struct BenchArgs {
    #[command(subcommand)]
    workload: Option<WorkloadArgs>,
    /// The workload, as the subcommand NAME names it: cache, randrw,
    /// randread, rangelock, l2, async-hit, object (`--workload randrw` is
    /// `bench randrw`).
    #[arg(long = "workload", value_name = "NAME", value_parser = enum_arg::<Workload>("workload"))]
    workload_flag: Option<Workload>,
    #[command(flatten)]
    cache: CacheArgs,
}

/// A workload and its own flags.
#[derive(clap::Subcommand, Debug)]
enum WorkloadArgs {
    /// Random reads of cached blocks against peer caches (the OpenZFS 5497
    /// workload): what `bench` alone runs.
    Cache(CacheArgs),
    /// 50/50 reads and writes by all threads on ONE cached file, per
    /// locking mode.
    Randrw(FileArgs),
    /// Reads only by all threads on ONE cached file, per locking mode.
    Randread(FileArgs),
    /// Lock/unlock pairs of the range lock and the rwsem, per locking mode.
    Rangelock(FileArgs),
    /// Random reads over a working set larger than memory, smaller than
    /// memory plus a second tier, backed by an O_DIRECT file: multiarc-l2,
    /// foyer-hybrid, multiarc (memory only), direct.
    L2(L2Args),
    /// A cached block's hit through the async path (get_or_load_async)
    /// against a sync get, both with the copy, and a whole
    /// CachedStore::get_range hit; ns/op and the ratio to the sync get.
    AsyncHit(AsyncHitArgs),
    /// Repeated Parquet queries (hot columns, a full scan now and then)
    /// through multiarc in front of an S3 store (in-process, or
    /// --endpoint), each store request delayed by --store-latency: rows
    /// multiarc, multiarc-l2, foyer-hybrid, none.
    Object(Box<crate::object::ObjectArgs>),
}

/// The flags of the file workloads (randrw, randread, rangelock).
#[derive(clap::Args, Debug)]
struct FileArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Bytes of the one file (all cached).
    #[arg(long, value_parser = size_arg, default_value = "32MiB")]
    file_bytes: u64,
    /// Locking modes (comma-separated): range, rwsem, torn.
    #[arg(long, value_parser = enum_arg::<LockingArg>("locking mode"), value_delimiter = ',', default_value = "range,rwsem,torn")]
    locking: Vec<LockingArg>,
}

/// The l2 workload's flags.
#[derive(clap::Args, Debug)]
struct L2Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Memory of the caches.
    #[arg(long, value_parser = size_arg, default_value = "64MiB")]
    memory: u64,
    /// The second tier's size (multiarc-l2's L2, foyer-hybrid's disk).
    #[arg(long, value_parser = size_arg, default_value = "512MiB")]
    l2_bytes: u64,
    /// Bytes read at random (default: 4 x --memory).
    #[arg(long, value_parser = size_arg)]
    working_set: Option<u64>,
    /// Time added to every read of the backing file, for every row alike
    /// (e.g. 500us): a store slower than the second tier's device, such as
    /// a network store or a disk array, emulated on a machine whose one
    /// disk holds both (default 0: the disk as it is).
    #[arg(long, value_parser = crate::cli::duration_arg)]
    backing_latency: Option<std::time::Duration>,
    /// Where the backing file and the second tiers go (a disk filesystem:
    /// O_DIRECT; default: the current directory); removed afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rows (comma-separated): multiarc-l2, foyer-hybrid, multiarc, direct
    /// (default: all this build has).
    #[arg(long, value_parser = enum_arg::<crate::l2::L2Row>("l2 row"), value_delimiter = ',')]
    l2_rows: Option<Vec<crate::l2::L2Row>>,
}

/// The async-hit workload's flags.
#[derive(clap::Args, Debug)]
struct AsyncHitArgs {
    /// Block sizes (comma-separated): each is measured on its own.
    #[arg(long, value_parser = size_arg, value_delimiter = ',', default_value = "256KiB,4KiB")]
    block_size: Vec<u64>,
    /// Seconds each measurement (row, block size, repetition) runs.
    #[arg(long, default_value_t = 0.2)]
    seconds: f64,
    /// Repetitions: each runs every row once, back to back (their order
    /// rotated by one per repetition); each row's median is reported.
    #[arg(long, value_parser = count_arg, default_value = "7")]
    repeat: usize,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// The command line with `bench --workload NAME` (or `--workload=NAME`)
/// read as `bench NAME`, so that clap parses the workload's own flags: the
/// `--workload` item is taken out and its name put right after `bench`.
/// Anything else is returned as it is: another command, a subcommand given
/// already, no `--workload`, or a name that is no workload (clap then says
/// so, listing them).
pub fn workload_flag_as_subcommand(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_none_or(|a| a != "bench") {
        return args;
    }
    let is_workload = |text: &str| parse_enum::<Workload>("workload", text).is_ok();
    // A subcommand given already: its own parser reports a `--workload`.
    if args
        .get(2)
        .and_then(|a| a.to_str())
        .is_some_and(is_workload)
    {
        return args;
    }
    for at in 2..args.len() {
        let Some(item) = args[at].to_str() else {
            continue;
        };
        if item == "--" {
            break;
        }
        let (name, taken) = if item == "--workload" {
            match args.get(at + 1).and_then(|v| v.to_str()) {
                Some(value) => (value.to_string(), 2),
                None => break,
            }
        } else if let Some(value) = item.strip_prefix("--workload=") {
            (value.to_string(), 1)
        } else {
            continue;
        };
        if !is_workload(&name) {
            break;
        }
        args.drain(at..at + taken);
        args.insert(2, OsString::from(name.trim()));
        break;
    }
    args
}

/// For a clap error on `args` (read by [`workload_flag_as_subcommand`])
/// that is an unknown flag of `bench` which another workload takes, the
/// one line that says so: "'--caches' does not apply to the randrw
/// workload; it applies to --workload cache only". `None` for any other
/// error.
pub fn explain_foreign_flag(args: &[OsString], error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument || args.get(1).is_none_or(|a| a != "bench") {
        return None;
    }
    let Some(ContextValue::String(given)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = given.split('=').next().unwrap_or(given);
    let long = flag.strip_prefix("--")?;
    let chosen = args
        .get(2)
        .and_then(|a| a.to_str())
        .and_then(|a| parse_enum::<Workload>("workload", a).ok())
        .unwrap_or(Workload::Cache);
    let workloads =
        <WorkloadArgs as clap::Subcommand>::augment_subcommands(clap::Command::new("bench"));
    let takers: Vec<String> = workloads
        .get_subcommands()
        .filter(|w| w.get_arguments().any(|a| a.get_long() == Some(long)))
        .map(|w| w.get_name().to_string())
        .collect();
    let (last, rest) = takers.split_last()?;
    let which = if rest.is_empty() {
        last.clone()
    } else {
        format!("{} or {last}", rest.join(", "))
    };
    Some(format!(
        "'{flag}' does not apply to the {} workload; it applies to --workload {which} only",
        workload_name(chosen)
    ))
}

/// The name `--workload` and the subcommand take.
fn workload_name(workload: Workload) -> String {
    enum_name(&workload)
}

/// Runs the benchmark: the workload's subcommand, or the cache workload.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let workload = match (args.workload, args.workload_flag) {
        (Some(workload), _) => workload,
        (None, None | Some(Workload::Cache)) => WorkloadArgs::Cache(args.cache),
        // `main` reads `--workload NAME` as the subcommand NAME before clap
        // parses: a name left here was not read that way.
        (None, Some(other)) => bail!(
            "--workload {} must be read as the subcommand `bench {0}`",
            workload_name(other)
        ),
    };
    match workload {
        WorkloadArgs::Cache(args) => crate::cache::run(args),
        WorkloadArgs::Randrw(args) => run_file(FileWorkload::RandRw, args),
        WorkloadArgs::Randread(args) => run_file(FileWorkload::RandRead, args),
        WorkloadArgs::Rangelock(args) => run_file(FileWorkload::RangeLock, args),
        WorkloadArgs::L2(args) => run_l2(args),
        WorkloadArgs::AsyncHit(args) => crate::async_hit::run(crate::async_hit::AsyncHitArgs {
            block_sizes: args.block_size,
            seconds: args.seconds,
            repeat: args.repeat,
            json: args.json,
        }),
        WorkloadArgs::Object(args) => crate::object::run(*args),
    }
}

/// The l2 workload.
fn run_l2(args: L2Args) -> anyhow::Result<()> {
    use crate::l2::L2Row;
    let common = args.common;
    crate::cli::check_seconds(common.seconds)?;
    let rows = args.l2_rows.unwrap_or_else(|| {
        [
            L2Row::MultiarcL2,
            L2Row::FoyerHybrid,
            L2Row::Multiarc,
            L2Row::Direct,
        ]
        .into_iter()
        .filter(|r| *r != L2Row::FoyerHybrid || !peers::is_missing_peer("foyer"))
        .collect()
    });
    crate::l2::run(crate::l2::L2BenchArgs {
        threads: &common.threads,
        seconds: common.seconds,
        repeat: common.repeat,
        block_size: common.block_size,
        memory: args.memory,
        l2_bytes: args.l2_bytes,
        working_set: args.working_set,
        dir: args.dir,
        backing_latency: args.backing_latency.unwrap_or_default(),
        rows,
        json: common.json,
    })
}

/// A file workload: randrw, randread or rangelock.
fn run_file(workload: FileWorkload, args: FileArgs) -> anyhow::Result<()> {
    let common = args.common;
    crate::cli::check_seconds(common.seconds)?;
    if !common.block_size.is_power_of_two() || !(512..=1 << 20).contains(&common.block_size) {
        bail!(
            "--block-size must be a power of two from 512 B to 1 MiB for file workloads, got {}",
            common.block_size
        );
    }
    crate::file::run(crate::file::FileBenchArgs {
        workload,
        threads: &common.threads,
        seconds: common.seconds,
        repeat: common.repeat,
        file_bytes: args.file_bytes,
        block_size: common.block_size,
        locking: args.locking.iter().map(|&l| l.into()).collect(),
        json: common.json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn workload_and_locking_names() {
        assert_eq!(
            crate::cli::enum_names::<Workload>(),
            [
                "cache",
                "randrw",
                "randread",
                "rangelock",
                "l2",
                "async-hit",
                "object"
            ]
        );
        for &l in LockingArg::value_variants() {
            let name = l.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(Locking::from(l).name(), name);
        }
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_workload_flag_is_read_as_the_subcommand() {
        let rewrite = |args: &[&str]| workload_flag_as_subcommand(os(args));
        // Anywhere after `bench`, in either form.
        assert_eq!(
            rewrite(&[
                "multiarc",
                "bench",
                "--threads",
                "1",
                "--workload",
                "l2",
                "--json"
            ]),
            os(&["multiarc", "bench", "l2", "--threads", "1", "--json"])
        );
        assert_eq!(
            rewrite(&["multiarc", "bench", "--json", "--workload=randrw"]),
            os(&["multiarc", "bench", "randrw", "--json"])
        );
        // Left as they are: another command, no flag, a name that is no
        // workload (clap says so), a missing name, a subcommand given
        // already, and anything after `--`.
        for args in [
            &["multiarc", "replay", "--workload", "l2"][..],
            &["multiarc", "bench", "--threads", "1"],
            &["multiarc", "bench", "--workload", "fuzz"],
            &["multiarc", "bench", "--workload"],
            &["multiarc", "bench", "randrw", "--workload", "l2"],
            &["multiarc", "bench", "--", "--workload", "l2"],
            &["multiarc"],
        ] {
            assert_eq!(rewrite(args), os(args), "{args:?}");
        }
    }

    #[test]
    fn the_subcommands_are_the_workload_names() {
        let command =
            <WorkloadArgs as clap::Subcommand>::augment_subcommands(clap::Command::new("bench"));
        let names: Vec<String> = command
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        assert_eq!(names, crate::cli::enum_names::<Workload>());
        for &w in Workload::value_variants() {
            assert!(names.contains(&workload_name(w)));
        }
    }

    /// Parses `multiarc bench ...` as `main` does.
    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        use clap::{Args, FromArgMatches};
        let args = workload_flag_as_subcommand(os(&[&["multiarc", "bench"][..], args].concat()));
        let command = BenchArgs::augment_args(clap::Command::new("bench"));
        let matches = command.try_get_matches_from(&args[1..])?;
        BenchArgs::from_arg_matches(&matches)
    }

    #[test]
    fn each_workload_parses_its_own_flags_only() {
        let cache = parse(&["--modes", "copy", "--threads", "3"]).unwrap();
        assert!(cache.workload.is_none());
        assert_eq!(cache.cache.modes, [crate::cache::Mode::Copy]);
        assert_eq!(cache.cache.common.threads, [3]);
        match parse(&["--workload", "rangelock", "--locking", "rwsem"])
            .unwrap()
            .workload
        {
            Some(WorkloadArgs::Rangelock(file)) => {
                assert_eq!(file.locking, [LockingArg::Rwsem]);
                assert_eq!(file.common.threads, [1, 2, 4, 8, 16, 32]);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["l2", "--memory", "1MiB"]).unwrap().workload {
            Some(WorkloadArgs::L2(l2)) => assert_eq!(l2.memory, 1 << 20),
            other => panic!("{other:?}"),
        }
        for (args, flag) in [
            (&["randrw", "--caches", "moka"][..], "--caches"),
            (&["--workload", "l2", "--sublists", "2"], "--sublists"),
            (&["cache", "--backing-latency", "1ms"], "--backing-latency"),
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{args:?}"
            );
            let all = os(&[&["multiarc", "bench"][..], args].concat());
            let line = explain_foreign_flag(&workload_flag_as_subcommand(all), &e)
                .unwrap_or_else(|| panic!("{args:?}: no explanation"));
            assert!(
                line.starts_with(&format!("'{flag}' does not apply")),
                "{line}"
            );
        }
        // A flag no workload has: clap's own message.
        let e = parse(&["--nosuch"]).unwrap_err();
        assert!(explain_foreign_flag(&os(&["multiarc", "bench", "--nosuch"]), &e).is_none());
    }
}
