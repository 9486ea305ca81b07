//! What a trace of the corpus is ([`Spec`]: where its requests come from,
//! its sizes) and how it is loaded; the halves of the real traces both
//! sets cut ([`windows`]).

use super::families::Family;
use crate::distinct::DistinctBlocks;
use crate::pass::{Pass, PassError};
use crate::source::{guess_format, TraceFile};
use std::path::Path;

/// A cache size: blocks, or a share of the trace's distinct blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Size {
    /// This many blocks.
    Blocks(u64),
    /// This share (0 to 1) of the whole trace's distinct blocks.
    Share(f64),
}

/// Which part of a real trace is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    /// The first half of its time (replayed alone).
    First,
    /// The second half (after the first, unmeasured).
    Second,
}

/// Where a trace's requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A generated family, with its request count and seed.
    Generated {
        /// The family and its parameters.
        family: Family,
        /// Requests.
        requests: u64,
        /// Seed.
        seed: u64,
    },
    /// Half of a real trace: `file`, relative to the traces directory.
    Window {
        /// The file (its format guessed as `replay` does, 8 KiB blocks).
        file: &'static str,
        /// Which half is measured.
        half: Half,
    },
}

/// One trace of a set, with its sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Unique within the corpus, e.g. `loop-noise-h1`, `P6-second-half`.
    pub name: String,
    /// Its requests.
    pub source: Source,
    /// The cache sizes it is replayed at.
    pub sizes: Vec<Size>,
}

/// A trace ready to replay.
#[derive(Debug)]
pub struct Loaded {
    /// Every request, in order.
    pub requests: Vec<u64>,
    /// Hits are counted from this request on.
    pub measured_from: usize,
    /// Distinct blocks in `requests`.
    pub distinct: u64,
    /// The spec's sizes, in blocks (at least 1 each).
    pub capacities: Vec<u64>,
}

/// Why a trace could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// A window's file is not in the traces directory.
    Missing(std::path::PathBuf),
    /// It is there and could not be read.
    Read(PassError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Missing(path) => write!(f, "{} is absent", path.display()),
            LoadError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl Spec {
    /// Generates the trace, or reads its window from under `traces`.
    /// `limit`: at most this many requests (a short run: a generated
    /// trace's first ones; a real trace cut there before it is halved).
    pub fn load(&self, traces: &Path, limit: Option<u64>) -> Result<Loaded, LoadError> {
        let limit = limit.unwrap_or(u64::MAX);
        let (requests, measured_from) = match &self.source {
            Source::Generated {
                family,
                requests,
                seed,
            } => (family.generate((*requests).min(limit), *seed), 0),
            Source::Window { file, half } => {
                let path = traces.join(file);
                if !path.exists() {
                    return Err(LoadError::Missing(path));
                }
                let source =
                    TraceFile::new(&path).map_err(|e| LoadError::Read(PassError::Source(e)))?;
                let format = guess_format(&source, 8192)
                    .map_err(|e| LoadError::Read(PassError::Source(e)))?;
                let mut all = Vec::new();
                // Each block access's request time, while every request
                // so far has one.
                let mut times = Some(Vec::new());
                Pass::read_timed(&source, format, |id, time| -> Result<(), PassError> {
                    if (all.len() as u64) < limit {
                        all.push(id);
                        times = times.take().and_then(|mut t| {
                            t.push(time?);
                            Some(t)
                        });
                    }
                    Ok(())
                })
                .map_err(LoadError::Read)?;
                let middle = middle(&all, times.as_deref());
                match half {
                    Half::First => {
                        all.truncate(middle);
                        (all, 0)
                    }
                    Half::Second => (all, middle),
                }
            }
        };
        let mut set = DistinctBlocks::new();
        for &id in &requests {
            set.insert(id);
        }
        let distinct = set.len();
        let capacities = self
            .sizes
            .iter()
            .map(|s| match *s {
                Size::Blocks(b) => b.max(1),
                Size::Share(f) => ((distinct as f64 * f).round() as u64).max(1),
            })
            .collect();
        Ok(Loaded {
            requests,
            measured_from,
            distinct,
            capacities,
        })
    }
}

/// Where a real trace's two halves meet: the first access at or past the
/// middle of its time span where every request has a time (CloudPhysics),
/// else (the ARC paper's traces, whose order is their only clock) half of
/// its block accesses.
fn middle(all: &[u64], times: Option<&[u64]>) -> usize {
    match times {
        Some(t @ [first, .., last]) => {
            let mid = first + (last - first) / 2;
            t.partition_point(|&x| x < mid)
        }
        _ => all.len() / 2,
    }
}

/// The real traces both sets cut in halves, relative to the traces
/// directory, with their sizes: the public table's for the ARC paper's
/// traces, `replay`'s default shares for CloudPhysics.
pub(super) fn windows(half: Half, suffix: &str) -> Vec<Spec> {
    let shares = vec![
        Size::Share(0.01),
        Size::Share(0.05),
        Size::Share(0.1),
        Size::Share(0.2),
    ];
    let blocks = |b: &[u64]| b.iter().map(|&b| Size::Blocks(b)).collect::<Vec<_>>();
    [
        ("cloudphysics", "cloudphysics_io.csv", shares),
        (
            "OLTP",
            "arc/OLTP.lis.zst",
            blocks(&[1000, 2000, 5000, 10000]),
        ),
        (
            "P6",
            "arc/P6.lis.zst",
            blocks(&[8192, 16384, 32768, 65536, 131072]),
        ),
    ]
    .into_iter()
    .map(|(name, file, sizes)| Spec {
        name: format!("{name}-{suffix}"),
        source: Source::Window { file, half },
        sizes,
    })
    .collect()
}
