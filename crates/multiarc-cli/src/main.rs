//! `multiarc`: benchmarks, trace replay and tools for the multiarc block cache.
//!
//! Every subcommand prints human tables (and progress on stderr) by default,
//! and exactly one JSON document on stdout with `--json`. Errors exit non-zero
//! with one line on stderr.

mod bench;
mod filebench;
mod lockbench;
mod mount;
mod peers;
mod plot;
mod poison;
mod replay;
mod scan;
mod util;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "multiarc",
    version,
    about = "The multiarc block cache: benchmarks, trace replay, tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmarks: cached random reads against peer caches (the OpenZFS 5497
    /// workload), or one file's reads and writes per locking mode.
    Bench(bench::BenchArgs),
    /// Lock benchmark: our futex locks against std, parking_lot and pthread mutexes.
    Lockbench(lockbench::LockbenchArgs),
    /// Replay a block trace through cache policies and report hit ratios.
    Replay(replay::ReplayArgs),
    /// The FreeBSD 11.2 ARC report's program: does the cache recover from a scan by itself?
    Poison(poison::PoisonArgs),
    /// Scan resistance: a hot set's hit ratio before, during and after a long one-pass scan.
    Scan(scan::ScanArgs),
    /// Serve a directory through the cache with FUSE (passthrough; control files in MOUNTPOINT/.multiarc).
    Mount(mount::MountArgs),
    /// Print a mount's cache statistics (MOUNTPOINT/.multiarc/arcstats).
    Stats(mount::StatsArgs),
    /// Change a mount's tunables at run time, e.g. `multiarc set MNT max_bytes=1GiB`.
    Set(mount::SetArgs),
}

/// Parses the command line; a usage error is printed as one line (clap's
/// message without its blank lines, usage and hint) and exits with 2.
fn parse_args() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
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
            let text = e.render().to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("Usage:")
                        && !l.starts_with("For more information")
                })
                .collect();
            eprintln!("multiarc: {}", line.join(" "));
            std::process::exit(2);
        }
    }
}

fn main() {
    let cli = parse_args();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Lockbench(args) => lockbench::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Poison(args) => poison::run(args),
        Command::Scan(args) => scan::run(args),
        Command::Mount(args) => mount::run(args),
        Command::Stats(args) => mount::run_stats(args),
        Command::Set(args) => mount::run_set(args),
    };
    if let Err(err) = result {
        eprintln!("multiarc: error: {err:#}");
        std::process::exit(1);
    }
}
