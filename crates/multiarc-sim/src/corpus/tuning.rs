//! The tuning set: what a policy's constants may be chosen on. One trace
//! per generated family (seeds 1 to 5), and the first half of each real
//! trace. Nothing here is in the held-out set (`held_out.rs`).

use super::families::Family;
use super::spec::{windows, Half, Size, Source, Spec};

/// The tuning set's traces.
pub(super) fn traces() -> Vec<Spec> {
    let generated = [
        (
            Family::LoopWithNoise {
                len: 20_000,
                noise: 0.2,
                noise_universe: 200_000,
            },
            1,
            vec![5_000, 10_000, 18_000, 22_000],
        ),
        (
            Family::ZipfWithScans {
                universe: 100_000,
                exponent: 0.8,
                scan: 20_000,
                every: 100_000,
            },
            2,
            vec![1_000, 5_000, 20_000],
        ),
        (
            Family::ShiftingWorkingSet {
                size: 30_000,
                exponent: 0.8,
                phase: 200_000,
                shift: 10_000,
            },
            3,
            vec![3_000, 10_000, 30_000],
        ),
        (
            Family::SequentialAndRandom {
                universe: 50_000,
                exponent: 0.9,
                region: 400_000,
                run: 256,
                sequential: 0.4,
            },
            4,
            vec![2_500, 10_000, 40_000],
        ),
        (
            Family::OneHitWonders {
                universe: 100_000,
                exponent: 0.9,
                once: 0.5,
            },
            5,
            vec![1_000, 5_000, 20_000],
        ),
    ];
    generated
        .into_iter()
        .map(|(family, seed, sizes)| Spec {
            name: format!("{}-t", family.name()),
            source: Source::Generated {
                family,
                requests: 2_000_000,
                seed,
            },
            sizes: sizes.into_iter().map(Size::Blocks).collect(),
        })
        .chain(windows(Half::First, "first-half"))
        .collect()
}
