//! The held-out set: what policies are judged on and never tuned on. Two
//! parameter sets per generated family, other than the tuning set's, with
//! seeds of their own (101 and up), and the second half of each real
//! trace. A change made because of a row here moves that row to
//! `tuning.rs`, and a new held-out row takes its place.

use super::families::Family;
use super::spec::{windows, Half, Size, Source, Spec};

/// The held-out set's traces.
pub(super) fn traces() -> Vec<Spec> {
    let generated = [
        (
            "h1",
            Family::LoopWithNoise {
                len: 50_000,
                noise: 0.1,
                noise_universe: 1_000_000,
            },
            vec![10_000, 25_000, 45_000, 55_000],
        ),
        (
            "h2",
            Family::LoopWithNoise {
                len: 8_000,
                noise: 0.35,
                noise_universe: 30_000,
            },
            vec![2_000, 6_000, 8_000, 12_000],
        ),
        (
            "h1",
            Family::ZipfWithScans {
                universe: 200_000,
                exponent: 1.0,
                scan: 50_000,
                every: 300_000,
            },
            vec![2_000, 10_000, 40_000],
        ),
        (
            "h2",
            Family::ZipfWithScans {
                universe: 20_000,
                exponent: 0.7,
                scan: 5_000,
                every: 20_000,
            },
            vec![1_000, 5_000, 10_000],
        ),
        (
            "h1",
            Family::ShiftingWorkingSet {
                size: 100_000,
                exponent: 0.6,
                phase: 500_000,
                shift: 50_000,
            },
            vec![10_000, 50_000, 100_000],
        ),
        (
            "h2",
            Family::ShiftingWorkingSet {
                size: 10_000,
                exponent: 1.0,
                phase: 50_000,
                shift: 1_000,
            },
            vec![1_000, 3_000, 10_000],
        ),
        (
            "h1",
            Family::SequentialAndRandom {
                universe: 200_000,
                exponent: 0.8,
                region: 100_000,
                run: 1024,
                sequential: 0.6,
            },
            vec![10_000, 50_000, 150_000],
        ),
        (
            "h2",
            Family::SequentialAndRandom {
                universe: 20_000,
                exponent: 1.1,
                region: 2_000_000,
                run: 64,
                sequential: 0.2,
            },
            vec![1_000, 5_000, 20_000],
        ),
        (
            "h1",
            Family::OneHitWonders {
                universe: 500_000,
                exponent: 0.7,
                once: 0.3,
            },
            vec![5_000, 25_000, 100_000],
        ),
        (
            "h2",
            Family::OneHitWonders {
                universe: 20_000,
                exponent: 1.0,
                once: 0.7,
            },
            vec![500, 2_000, 10_000],
        ),
    ];
    generated
        .into_iter()
        .enumerate()
        .map(|(i, (tag, family, sizes))| Spec {
            name: format!("{}-{tag}", family.name()),
            source: Source::Generated {
                family,
                requests: 2_000_000,
                seed: 101 + i as u64,
            },
            sizes: sizes.into_iter().map(Size::Blocks).collect(),
        })
        .chain(windows(Half::Second, "second-half"))
        .collect()
}
