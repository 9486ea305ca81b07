//! Differential tests: the concurrent cache against the page-based
//! reference policies, request by request.
//!
//! With one sublist and inline eviction (so eviction happens at the moment
//! the papers' REPLACE does), every request's hit or miss must equal:
//! ARC's (Megiddo & Modha, FAST '03) in the eager hit mode, CAR's
//! (Bansal & Modha, FAST '04) in the lazy mode, the S3ARC model's
//! (`multiarc_sim::s3arc`) under `Policy::S3arc`, the adaptive
//! model's (`multiarc_sim::adaptive`) under `Policy::Adaptive`, and the
//! generations model's (`multiarc_sim::generations`) under
//! `Policy::Generations`. The cache counts
//! bytes and the references count pages; every buffer here is one block
//! (8 KiB unless a test says otherwise), so a cache of `c` blocks is a
//! cache of `c * block` bytes.
//!
//! With the default number of sublists, eviction no longer takes the exact
//! LRU page (each sublist is LRU-ordered on its own), so the per-request
//! outcomes differ; the hit ratio on the CloudPhysics trace must stay within
//! one percentage point of the reference's.

mod common;

use multiarc::{Builder, Cache, HitMode, Policy};
use multiarc_sim::adaptive::AdaptivePolicy;
use multiarc_sim::generations::GenerationArcPolicy;
use multiarc_sim::reference::{ArcPolicy, CarPolicy, PagePolicy};
use multiarc_sim::s3arc::S3ArcPolicy;

const BLOCK: usize = 8192;

/// A cache configuration under test, with its reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Under {
    /// Eager hits, ARC: against `ArcPolicy`.
    Eager,
    /// Lazy hits, ARC's policy with CAR's clocks: against `CarPolicy`.
    Lazy,
    /// Lazy hits, `Policy::S3arc`: against `S3ArcPolicy`.
    S3arc,
    /// Lazy hits, `Policy::Adaptive`: against `AdaptivePolicy`.
    Adaptive,
    /// Lazy hits, `Policy::Generations`: against `GenerationArcPolicy`
    /// named [`GENERATIONS_MODEL`].
    Generations,
}

/// The generations model the cache's policy makes: 16 generations per
/// cache size counted in misses and first hits, 64 segments, the generation
/// moved at misses.
const GENERATIONS_MODEL: &str = "arc-gen-16-firsts-k64-at-misses";

impl From<HitMode> for Under {
    fn from(mode: HitMode) -> Under {
        match mode {
            HitMode::Eager => Under::Eager,
            HitMode::Lazy => Under::Lazy,
        }
    }
}

fn reference(under: Under, capacity: usize) -> Box<dyn PagePolicy> {
    match under {
        Under::Eager => Box::new(ArcPolicy::new(capacity)),
        Under::Lazy => Box::new(CarPolicy::new(capacity)),
        Under::S3arc => Box::new(S3ArcPolicy::new(capacity)),
        Under::Adaptive => Box::new(AdaptivePolicy::new(capacity)),
        Under::Generations => Box::new(
            GenerationArcPolicy::named(GENERATIONS_MODEL, capacity).expect("a model it names"),
        ),
    }
}

fn cache_with(under: Under, capacity: usize, sublists: usize, block: usize) -> Cache<u64> {
    let (mode, policy) = match under {
        Under::Eager => (HitMode::Eager, Policy::Arc),
        Under::Lazy => (HitMode::Lazy, Policy::Arc),
        Under::S3arc => (HitMode::Lazy, Policy::S3arc),
        Under::Adaptive => (HitMode::Lazy, Policy::Adaptive),
        Under::Generations => (HitMode::Lazy, Policy::Generations),
    };
    Builder::new()
        .max_bytes((capacity * block) as u64)
        .min_bytes(1)
        .sublists(sublists)
        .inline_eviction(true)
        .hit_mode(mode)
        .policy(policy)
        .build()
        .unwrap()
}

fn cache(under: impl Into<Under>, capacity: usize, sublists: usize) -> Cache<u64> {
    cache_with(under.into(), capacity, sublists, BLOCK)
}

/// One request through the cache, as a block cache's user does it: look up,
/// and on a miss read the block and insert it. Returns true on a hit.
fn request(cache: &Cache<u64>, key: u64) -> bool {
    request_sized(cache, key, BLOCK)
}

fn request_sized(cache: &Cache<u64>, key: u64, block: usize) -> bool {
    if cache.get(&key).is_some() {
        return true;
    }
    drop(cache.insert(key, vec![0u8; block]));
    false
}

fn assert_same_outcomes(name: &str, trace: &[u64], capacity: usize, under: impl Into<Under>) {
    assert_same_outcomes_sized(name, trace, capacity, under.into(), BLOCK);
}

fn assert_same_outcomes_sized(
    name: &str,
    trace: &[u64],
    capacity: usize,
    under: Under,
    block: usize,
) {
    let mut reference = reference(under, capacity);
    let cache = cache_with(under, capacity, 1, block);
    let mut hits = 0u64;
    for (i, &key) in trace.iter().enumerate() {
        let expected = reference.access(key);
        let got = request_sized(&cache, key, block);
        assert_eq!(
            got,
            expected,
            "{name}, {under:?}, capacity {capacity} ({block}-byte blocks): request {i} \
             (block {key}): cache {} but {} {}",
            if got { "hit" } else { "missed" },
            reference.name(),
            if expected { "hit" } else { "missed" },
        );
        hits += got as u64;
    }
    let s = cache.stats();
    assert_eq!(
        s.hits, hits,
        "{name}, {under:?}, capacity {capacity}: counted hits"
    );
    assert!(s.size <= (capacity * block) as u64);
}

fn synthetic_traces() -> Vec<(&'static str, Vec<u64>)> {
    vec![
        ("random", common::random(20_000, 3_000, 1)),
        ("looping", common::looping(20_000, 700)),
        ("scan", common::scan_mixed(20_000, 300, 5_000, 2)),
        ("zipf", common::zipf(20_000, 5_000, 0.9, 3)),
    ]
}

fn synthetic(under: impl Into<Under> + Copy) {
    for (name, trace) in synthetic_traces() {
        for capacity in [1, 2, 10, 100, 500, 1000] {
            assert_same_outcomes(name, &trace, capacity, under);
        }
    }
}

#[test]
fn eager_is_arc_on_synthetic_traces() {
    synthetic(HitMode::Eager);
}

#[test]
fn lazy_is_car_on_synthetic_traces() {
    synthetic(HitMode::Lazy);
}

/// The CloudPhysics trace expanded to 8 KiB blocks, or `None` (with a
/// message) where ../shared is absent.
fn cloudphysics() -> Option<Vec<u64>> {
    let blocks = common::cloudphysics_blocks(BLOCK as u64);
    if blocks.is_none() {
        eprintln!("skipping: ../shared/traces/cloudphysics_io.csv not found");
    }
    blocks
}

fn distinct(trace: &[u64]) -> usize {
    trace.iter().collect::<std::collections::HashSet<_>>().len()
}

fn capacities(trace: &[u64]) -> Vec<usize> {
    let d = distinct(trace);
    [0.01, 0.05, 0.10, 0.20]
        .iter()
        .map(|f| ((d as f64 * f) as usize).max(1))
        .collect()
}

#[test]
fn eager_is_arc_on_cloudphysics() {
    let Some(trace) = cloudphysics() else { return };
    for capacity in capacities(&trace) {
        assert_same_outcomes("cloudphysics", &trace, capacity, HitMode::Eager);
    }
}

#[test]
fn lazy_is_car_on_cloudphysics() {
    let Some(trace) = cloudphysics() else { return };
    for capacity in capacities(&trace) {
        assert_same_outcomes("cloudphysics", &trace, capacity, HitMode::Lazy);
    }
}

fn hit_ratio_with_default_sublists(mode: HitMode) {
    let mode = Under::from(mode);
    let Some(trace) = cloudphysics() else { return };
    let sublists = multiarc::default_sublists().max(8);
    for capacity in capacities(&trace) {
        // The bar is ARC's hit ratio in both modes (for the lazy mode this
        // also bounds CAR's departure from ARC).
        let mut arc = ArcPolicy::new(capacity);
        let arc_hits = trace.iter().filter(|&&k| arc.access(k)).count();
        let cache = cache(mode, capacity, sublists);
        let hits = trace.iter().filter(|&&k| request(&cache, k)).count();
        let (a, m) = (
            arc_hits as f64 / trace.len() as f64,
            hits as f64 / trace.len() as f64,
        );
        eprintln!(
            "{mode:?}, {sublists} sublists, capacity {capacity}: hit ratio {:.2}% vs arc {:.2}%",
            100.0 * m,
            100.0 * a
        );
        assert!(
            (m - a).abs() <= 0.01,
            "{mode:?} with {sublists} sublists at capacity {capacity}: hit ratio {:.2}% vs arc {:.2}%",
            100.0 * m,
            100.0 * a
        );
    }
}

#[test]
fn eager_default_sublists_within_one_point_of_arc() {
    hit_ratio_with_default_sublists(HitMode::Eager);
}

#[test]
fn lazy_default_sublists_within_one_point_of_arc() {
    hit_ratio_with_default_sublists(HitMode::Lazy);
}

/// S3ARC's traces beside the four above: two loops longer than the
/// smaller caches (the ghost lists and the target's bounds at work), and a
/// mix of a hot zipf set, one-hit scans and a loop, in phases.
fn s3arc_traces() -> Vec<(&'static str, Vec<u64>)> {
    let mut traces = synthetic_traces();
    traces.push(("loop 1,200", common::looping(30_000, 1_200)));
    let zipf = common::zipf(30_000, 4_000, 0.8, 7);
    let scan = common::scan_mixed(30_000, 400, 20_000, 8);
    let mixed = (0..30_000)
        .map(|i| match (i / 3_000) % 3 {
            0 => zipf[i],
            1 => scan[i] + 100_000,
            _ => 200_000 + (i as u64 % 900),
        })
        .collect();
    traces.push(("zipf, scans and a loop in phases", mixed));
    traces
}

#[test]
fn s3arc_is_the_model_on_synthetic_traces() {
    for (name, trace) in s3arc_traces() {
        for capacity in [1, 2, 9, 10, 100, 199, 200, 500, 1000, 2000] {
            assert_same_outcomes(name, &trace, capacity, Under::S3arc);
        }
    }
}

/// With 1-byte blocks the cache's byte bounds are the model's page bounds
/// with no rounding at all; with 8 KiB blocks (above) they round to the
/// same pages. Both must agree with the model.
#[test]
fn s3arc_is_the_model_with_one_byte_blocks() {
    for (name, trace) in s3arc_traces() {
        for capacity in [1, 3, 10, 250, 1000] {
            assert_same_outcomes_sized(name, &trace, capacity, Under::S3arc, 1);
        }
    }
}

#[test]
fn s3arc_is_the_model_on_cloudphysics() {
    let Some(trace) = cloudphysics() else { return };
    for capacity in capacities(&trace) {
        assert_same_outcomes("cloudphysics", &trace, capacity, Under::S3arc);
    }
}

/// The first `n` requests of the ARC paper's OLTP trace, or `None` where
/// ../shared (or the trace in it) is absent.
fn oltp_prefix(n: usize) -> Option<Vec<u64>> {
    use multiarc_sim::source::{TraceFile, TraceSource};
    let path = common::shared_dir()?.join("traces/arc/OLTP.lis.zst");
    if !path.is_file() {
        return None;
    }
    let file = TraceFile::new(&path).unwrap();
    let reader = multiarc_sim::trace::TraceReader::new(
        file.open().unwrap(),
        multiarc_sim::trace::TraceFormat::Arc,
    );
    Some(
        reader
            .take(n)
            .map(|r| r.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .collect(),
    )
}

#[test]
fn s3arc_is_the_model_on_a_prefix_of_oltp() {
    let Some(trace) = oltp_prefix(300_000) else {
        eprintln!("skipping: ../shared/traces/arc/OLTP.lis.zst not found");
        return;
    };
    for capacity in [1000, 2000, 10000] {
        assert_same_outcomes(
            "OLTP (first 300,000 requests)",
            &trace,
            capacity,
            Under::S3arc,
        );
    }
}

/// With several sublists, S3ARC's MRU queue is split between them, so the
/// cache no longer takes the queue's exact oldest buffer; starting each
/// walk at the fullest sublist keeps it close (a random start, as ARC's
/// walk has, was 0.47 points below the model on CloudPhysics at 1% and
/// 1.43 below on OLTP at 5,000 blocks, in `replay` with 4 sublists). The
/// bar: within 0.2 points of the page model on the CloudPhysics and OLTP
/// traces.
#[test]
fn s3arc_default_sublists_within_a_fifth_of_a_point_of_the_model() {
    let sublists = multiarc::default_sublists().max(8);
    let mut traces = Vec::new();
    if let Some(trace) = cloudphysics() {
        traces.push(("cloudphysics", capacities(&trace), trace));
    }
    match oltp_prefix(usize::MAX) {
        Some(trace) => traces.push(("OLTP", vec![1000, 5000], trace)),
        None => eprintln!("skipping OLTP: ../shared/traces/arc/OLTP.lis.zst not found"),
    }
    for (name, capacities, trace) in traces {
        for capacity in capacities {
            let mut model = S3ArcPolicy::new(capacity);
            let model_hits = trace.iter().filter(|&&k| model.access(k)).count();
            // Seeded: which keys share a sublist is the same in every run.
            let cache = Builder::new()
                .max_bytes((capacity * BLOCK) as u64)
                .min_bytes(1)
                .sublists(sublists)
                .inline_eviction(true)
                .policy(Policy::S3arc)
                .seed(0)
                .build()
                .unwrap();
            let hits = trace.iter().filter(|&&k| request(&cache, k)).count();
            let (a, m) = (
                100.0 * model_hits as f64 / trace.len() as f64,
                100.0 * hits as f64 / trace.len() as f64,
            );
            eprintln!(
                "{name}, S3ARC, {sublists} sublists, capacity {capacity}: hit ratio {m:.2}% vs the model's {a:.2}%"
            );
            assert!(
                (m - a).abs() <= 0.2,
                "{name}: S3ARC with {sublists} sublists at capacity {capacity}: hit ratio {m:.2}% vs the model's {a:.2}%"
            );
        }
    }
}

/// The adaptive policy, request by request, against its page model
/// (`multiarc_sim::adaptive`), through its switches of experts. With
/// 1-byte blocks the cache's byte bounds are the model's page bounds
/// exactly (S3ARC's fractions of `c` round apart otherwise). Each run must
/// end with as many switches as the model's, and the traces must make it
/// switch somewhere (else this is CAR's test again).
#[test]
fn adaptive_is_the_model_through_its_switches() {
    let mut traces = s3arc_traces();
    traces.extend(cloudphysics().map(|t| ("cloudphysics", t)));
    match oltp_prefix(200_000) {
        Some(t) => traces.push(("OLTP (first 200,000 requests)", t)),
        None => eprintln!("skipping OLTP: ../shared/traces/arc/OLTP.lis.zst not found"),
    }
    let mut switched = Vec::new();
    for (name, trace) in &traces {
        for capacity in [1, 10, 100, 500, 1000, 5000] {
            let mut model = AdaptivePolicy::new(capacity);
            let cache = cache_with(Under::Adaptive, capacity, 1, 1);
            for (i, &key) in trace.iter().enumerate() {
                let expected = model.access(key);
                let got = request_sized(&cache, key, 1);
                assert_eq!(
                    got,
                    expected,
                    "{name} @{capacity}: request {i} (block {key}): cache {} but the model {} \
                     (switches: cache {}, model {})",
                    if got { "hit" } else { "missed" },
                    if expected { "hit" } else { "missed" },
                    cache.stats().policy_switches,
                    model.switches(),
                );
            }
            assert_eq!(
                cache.stats().policy_switches,
                model.switches(),
                "{name} @{capacity}: switches"
            );
            if model.switches() > 0 {
                switched.push(format!("{name} @{capacity}: {}", model.switches()));
            }
        }
    }
    eprintln!("adaptive: switches {switched:?}");
    assert!(
        !switched.is_empty(),
        "no trace made the adaptive policy switch experts"
    );
}

/// The generations policy, request by request, against its page model at
/// one sublist with 1-byte blocks (the clock's step of `c / 16` bytes is
/// the model's `c / 16` pages): the hits it keeps on the first hit's byte,
/// the T1 move at the hit, the MFU segments and their bound, on the
/// synthetic traces and CloudPhysics. Exactly, while the generation is
/// below 256: a buffer keeps its generations' low bytes, which alias once
/// one is 256 or more generations old (`arc/generations.rs`); from there
/// on, the whole trace's hit ratio within a tenth of a point of the
/// model's.
#[test]
fn generations_is_the_model_request_by_request() {
    let mut traces = s3arc_traces();
    traces.extend(cloudphysics().map(|t| ("cloudphysics", t)));
    let mut past_the_byte = Vec::new();
    for (name, trace) in &traces {
        for capacity in [1, 10, 100, 500, 1000, 5000] {
            let mut model =
                GenerationArcPolicy::named(GENERATIONS_MODEL, capacity).expect("a model it names");
            let cache = cache_with(Under::Generations, capacity, 1, 1);
            let (mut model_hits, mut hits, mut exact) = (0usize, 0usize, true);
            for (i, &key) in trace.iter().enumerate() {
                exact &= model.generation() < 256;
                let expected = model.access(key);
                let got = request_sized(&cache, key, 1);
                if exact {
                    assert_eq!(
                        got,
                        expected,
                        "{name} @{capacity}: request {i} (block {key}), generation {}: cache {} \
                         but the model {}",
                        model.generation(),
                        if got { "hit" } else { "missed" },
                        if expected { "hit" } else { "missed" },
                    );
                }
                model_hits += usize::from(expected);
                hits += usize::from(got);
            }
            assert_eq!(
                cache.stats().hits,
                hits as u64,
                "{name} @{capacity}: counted hits"
            );
            let points = (hits as f64 - model_hits as f64) / trace.len() as f64 * 100.0;
            if !exact {
                past_the_byte.push(format!("{name} @{capacity}: {points:+.3}"));
            }
            assert!(
                points.abs() <= 0.1,
                "{name} @{capacity}: {points:+.3} points from the model over {} generations",
                model.generation()
            );
        }
    }
    eprintln!("generations: past 255 generations, points from the model: {past_the_byte:?}");
}
