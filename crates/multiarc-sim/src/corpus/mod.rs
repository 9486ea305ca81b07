//! The trace corpus that policies are judged on, in two sets kept apart:
//!
//! - [`Set::Tuning`] (`tuning.rs`): what a policy's constants may be chosen
//!   on: one trace per generated family, and the first half of each real
//!   trace at hand;
//! - [`Set::HeldOut`] (`held_out.rs`): what no tuning looks at: two other
//!   parameter sets and seeds per family, and the second half of each real
//!   trace. A policy is reported on this set only.
//!
//! A trace is generated in memory ([`families`]'s seeded generators) or
//! cut from a real trace under a directory (`../shared/traces` for the
//! command): a window is the whole trace replayed from a cold cache, its
//! hits counted from the window's first request on (the second half is
//! seen with the first half's history, as a cache running on would see
//! it). Each trace names its cache sizes, chosen around its working sets.

mod families;
mod held_out;
mod tuning;

pub use families::Family;

use crate::distinct::DistinctBlocks;
use crate::pass::{Pass, PassError};
use crate::source::{guess_format, TraceFile};
use std::path::Path;

/// Which of the two sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// What policies may be tuned on.
    Tuning,
    /// What they are judged on.
    HeldOut,
}

impl Set {
    /// The set's traces.
    pub fn traces(self) -> Vec<Spec> {
        match self {
            Set::Tuning => tuning::traces(),
            Set::HeldOut => held_out::traces(),
        }
    }

    /// The set's name, as the reports show it.
    pub fn name(self) -> &'static str {
        match self {
            Set::Tuning => "tuning",
            Set::HeldOut => "held-out",
        }
    }
}

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
    /// The first half of its requests (replayed alone).
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
                Pass::read(&source, format, |id| -> Result<(), PassError> {
                    if (all.len() as u64) < limit {
                        all.push(id);
                    }
                    Ok(())
                })
                .map_err(LoadError::Read)?;
                let middle = all.len() / 2;
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

/// The real traces both sets cut in halves, relative to the traces
/// directory, with their sizes: the public table's for the ARC paper's
/// traces, `replay`'s default shares for CloudPhysics.
fn windows(half: Half, suffix: &str) -> Vec<Spec> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_two_sets_share_no_trace() {
        let tuning = Set::Tuning.traces();
        let held = Set::HeldOut.traces();
        let names: HashSet<&str> = tuning
            .iter()
            .chain(&held)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names.len(), tuning.len() + held.len(), "names are unique");
        for h in &held {
            for t in &tuning {
                assert_ne!(h.source, t.source, "{} is also {}", h.name, t.name);
                if let (Source::Generated { seed: a, .. }, Source::Generated { seed: b, .. }) =
                    (&h.source, &t.source)
                {
                    assert_ne!(a, b, "{} and {} share a seed", h.name, t.name);
                }
            }
        }
        // Every family is in both sets, and every real trace's halves.
        let families = |set: &[Spec]| -> HashSet<&'static str> {
            set.iter()
                .filter_map(|s| match &s.source {
                    Source::Generated { family, .. } => Some(family.name()),
                    Source::Window { .. } => None,
                })
                .collect()
        };
        assert_eq!(families(&tuning).len(), 5);
        assert_eq!(families(&held), families(&tuning));
        assert!(held.iter().all(|s| !matches!(
            s.source,
            Source::Window {
                half: Half::First,
                ..
            }
        )));
        assert!(tuning.iter().all(|s| !matches!(
            s.source,
            Source::Window {
                half: Half::Second,
                ..
            }
        )));
    }

    #[test]
    fn a_generated_trace_loads_with_its_sizes() {
        let spec = Spec {
            name: "t".into(),
            source: Source::Generated {
                family: Family::LoopWithNoise {
                    len: 100,
                    noise: 0.0,
                    noise_universe: 1,
                },
                requests: 1000,
                seed: 1,
            },
            sizes: vec![Size::Blocks(0), Size::Blocks(50), Size::Share(0.5)],
        };
        let l = spec.load(Path::new("/nonexistent"), None).unwrap();
        assert_eq!(
            (l.requests.len(), l.measured_from, l.distinct),
            (1000, 0, 100)
        );
        assert_eq!(l.capacities, vec![1, 50, 50]);
        let short = spec.load(Path::new("/nonexistent"), Some(10)).unwrap();
        assert_eq!(short.requests, (0..10).collect::<Vec<u64>>());
    }

    #[test]
    fn a_window_splits_its_trace_and_a_missing_one_says_where() {
        let dir = std::env::temp_dir().join(format!("corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ids: String = (0..11).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.join("t.ids"), ids).unwrap();
        let spec = |half| Spec {
            name: "w".into(),
            source: Source::Window {
                file: "t.ids",
                half,
            },
            sizes: vec![Size::Share(0.5)],
        };
        let first = spec(Half::First).load(&dir, None).unwrap();
        assert_eq!(first.requests, (0..5).collect::<Vec<u64>>());
        assert_eq!((first.measured_from, first.capacities[0]), (0, 3));
        let second = spec(Half::Second).load(&dir, None).unwrap();
        assert_eq!(second.requests.len(), 11);
        assert_eq!(second.measured_from, 5);
        let cut = spec(Half::Second).load(&dir, Some(4)).unwrap();
        assert_eq!((cut.requests, cut.measured_from), (vec![0, 1, 2, 3], 2));
        std::fs::remove_dir_all(&dir).unwrap();
        let e = spec(Half::Second).load(&dir, None).unwrap_err();
        assert!(matches!(e, LoadError::Missing(_)), "{e}");
        assert!(e.to_string().contains("t.ids is absent"), "{e}");
    }
}
