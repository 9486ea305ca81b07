//! `multiarc`: benchmarks, trace replay, mounts and tools for the multiarc
//! block cache. This binary parses the command line and calls the
//! libraries: `multiarc_bench` for the benchmarks and tools,
//! `multiarc_fuse` for the mounts.
//!
//! Every subcommand prints human tables (and progress on stderr) by default,
//! and exactly one JSON document on stdout with `--json`. Errors exit non-zero
//! with one line on stderr.

mod logger;
mod mount;
mod mount_helper;
mod stats;

use clap::{Parser, Subcommand};
use multiarc_bench::cli::{flush_stdout, StdoutClosed};
use multiarc_bench::{bench, corpus, lock as lockbench, replay, scan, scan_recovery as poison};
use std::ffi::OsString;
use std::io::Write;

#[derive(Parser)]
#[command(
    name = "multiarc",
    version,
    about = "The multiarc block cache: benchmarks, trace replay, tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines look on stderr (and in a mount's --log): text, or
    /// one JSON object per line for log shippers.
    #[arg(long, global = true, value_enum, default_value_t = logger::LogFormat::Text)]
    log_format: logger::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmarks: cached random reads against peer caches (the OpenZFS 5497
    /// workload; `bench` alone), one file's reads and writes per locking
    /// mode (`bench randrw|randread|rangelock`), a second tier (`bench l2`),
    /// or Parquet queries over S3 (`bench object`).
    Bench(bench::BenchArgs),
    /// Lock benchmark: our futex locks against std, parking_lot and pthread mutexes.
    Lockbench(lockbench::LockbenchArgs),
    /// Replay a block trace through cache policies and report hit ratios.
    Replay(replay::ReplayArgs),
    /// Judge policies on traces they were not tuned on: the held-out corpus, against exact ARC and the best reference policy.
    Corpus(corpus::CorpusArgs),
    /// The FreeBSD 11.2 ARC report's program: does the cache recover from a scan by itself?
    Poison(poison::PoisonArgs),
    /// Scan resistance: a hot set's hit ratio before, during and after a long one-pass scan.
    Scan(scan::ScanArgs),
    /// Serve a directory through the cache with FUSE (passthrough; control files in MOUNTPOINT/.multiarc).
    Mount(mount::MountArgs),
    /// Print a mount's cache statistics (MOUNTPOINT/.multiarc/arcstats).
    Stats(stats::StatsArgs),
    /// Change a mount's tunables at run time, e.g. `multiarc set MNT max_bytes=1GiB`.
    Set(stats::SetArgs),
}

/// Parses the command line (`bench --workload NAME` read as `bench NAME`);
/// a usage error is printed as one line (clap's message without its blank
/// lines, usage and hint; for a flag of another bench workload, which
/// workload takes it) and exits with 2.
fn parse_args() -> (Cli, Vec<OsString>) {
    let subcommands: Vec<String> = <Cli as clap::CommandFactory>::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .chain(["help".to_string()])
        .collect();
    let args = match mount_helper::as_mount_command(std::env::args_os().collect(), &subcommands) {
        Ok(args) => args,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "multiarc: error: {e}");
            std::process::exit(2);
        }
    };
    let args = bench::workload_flag_as_subcommand(args);
    match Cli::try_parse_from(&args) {
        Ok(cli) => (cli, args),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            if let Some(line) = bench::explain_foreign_flag(&args, &e) {
                let _ = writeln!(std::io::stderr(), "multiarc: error: {line}");
                std::process::exit(2);
            }
            let text = e.render().to_string();
            // The usage block is its `Usage:` line and the indented lines
            // after it (one per form of the command).
            let mut in_usage = false;
            let line: Vec<&str> = text
                .lines()
                .filter(|l| {
                    in_usage = l.starts_with("Usage:")
                        || (in_usage && l.starts_with(char::is_whitespace) && !l.trim().is_empty());
                    !in_usage
                })
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect();
            let _ = writeln!(std::io::stderr(), "multiarc: {}", line.join(" "));
            std::process::exit(2);
        }
    }
}

/// Exit status when stdout is a closed pipe: what a shell reports for a
/// program killed by SIGPIPE (128 + 13), as `ls | head -0` gives.
const EXIT_STDOUT_CLOSED: i32 = 141;

/// Exits quietly when a `print!` still reaches a closed stdout (a command
/// not yet writing through `outln!`): std panics with "failed
/// printing to stdout: Broken pipe", which is the reader going away, not a
/// bug. Every other panic goes to the default hook.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(EXIT_STDOUT_CLOSED);
        }
        default(info)
    }));
}

fn main() {
    quiet_on_closed_stdout();
    let (cli, args) = parse_args();
    logger::install(cli.log_format);
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Lockbench(args) => lockbench::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::Poison(args) => poison::run(args),
        Command::Scan(args) => scan::run(args),
        Command::Mount(mount) => mount::run(mount, &args[1..]),
        Command::Stats(args) => stats::run_stats(args),
        Command::Set(args) => stats::run_set(args),
    };
    let result = result.and_then(|()| flush_stdout());
    if let Err(err) = result {
        if err.chain().any(|e| e.is::<StdoutClosed>()) {
            std::process::exit(EXIT_STDOUT_CLOSED);
        }
        if err
            .chain()
            .any(|e| e.is::<multiarc_fuse::ReportedToCommand>())
        {
            // The background mount process told the command, which printed it.
            std::process::exit(1);
        }
        // A closed stderr cannot be told anything: exit with the status alone.
        let _ = writeln!(std::io::stderr(), "multiarc: error: {err:#}");
        std::process::exit(1);
    }
}
