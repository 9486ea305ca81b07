//! The trace corpus that policies are judged on, in two sets kept apart:
//!
//! - [`Set::Tuning`] (`tuning.rs`): what a policy's constants may be chosen
//!   on: one trace per generated family, and the first half of each real
//!   trace at hand;
//! - [`Set::HeldOut`] (`held_out.rs`): what no tuning looks at: two other
//!   parameter sets and seeds per family, and the second half of each real
//!   trace. A policy is reported on this set only.
//!
//! A trace is generated in memory (the seeded generators of [`Family`]) or
//! cut from a real trace under a directory (`../shared/traces` for the
//! command): a window is the whole trace replayed from a cold cache, its
//! hits counted from the window's first request on (the second half is
//! seen with the first half's history, as a cache running on would see
//! it). Each trace names its cache sizes, chosen around its working sets.
//! The halves are halves of time: CloudPhysics is cut at the middle of its
//! `time` span; the ARC paper's traces carry no times, so their order is
//! their clock and they are cut at half of their block accesses.

mod families;
mod held_out;
mod spec;
mod tuning;

pub use families::Family;
pub use spec::{Half, LoadError, Loaded, Size, Source, Spec};

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

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

    /// A window of `file` (under the test's directory) at one size.
    fn window(file: &'static str, half: Half, size: Size) -> Spec {
        Spec {
            name: "w".into(),
            source: Source::Window { file, half },
            sizes: vec![size],
        }
    }

    #[test]
    fn a_window_splits_its_trace_and_a_missing_one_says_where() {
        let dir = std::env::temp_dir().join(format!("corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ids: String = (0..11).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.join("t.ids"), ids).unwrap();
        let spec = |half| window("t.ids", half, Size::Share(0.5));
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

    /// A trace with request times (CloudPhysics) is cut at the middle of
    /// its time span, not of its requests: here 6 of 8 requests come in
    /// the first second of ten.
    #[test]
    fn a_timed_trace_is_cut_at_its_middle_time() {
        let dir = std::env::temp_dir().join(format!("corpus-time-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut csv = String::from("version,time,op,size,lbn\n");
        for (i, t) in [0, 0, 0, 0, 1, 1, 6, 10].iter().enumerate() {
            csv.push_str(&format!("1,{t},2a,512,{}\n", i * 16));
        }
        std::fs::write(dir.join("t.csv"), csv).unwrap();
        let spec = |half| window("t.csv", half, Size::Blocks(2));
        let first = spec(Half::First).load(&dir, None).unwrap();
        assert_eq!(first.requests.len(), 6, "the accesses before time 5");
        let second = spec(Half::Second).load(&dir, None).unwrap();
        assert_eq!((second.requests.len(), second.measured_from), (8, 6));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
