//! `multiarc replay`, `poison` and `scan` end to end, on generated data and
//! small sizes (plus the shared CloudPhysics trace where it is present).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

fn multiarc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(args)
        .output()
        .expect("running multiarc")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("multiarc-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path
}

#[test]
fn replay_ids_trace_all_policies() {
    // A loop of 150 blocks, 20 times: LRU with 100 blocks never hits; OPT does.
    let text: String = (0..3000).map(|i| format!("{}\n", i % 150)).collect();
    let path = temp("loop.ids", &text);
    let doc = json(&multiarc(&[
        "replay",
        path.to_str().unwrap(),
        "--format",
        "ids",
        "--capacity",
        "100,0.5",
        "--json",
    ]));
    assert_eq!(doc["requests"], 3000);
    assert_eq!(doc["distinct"], 150);
    let results = doc["results"].as_array().unwrap();
    let get = |p: &str, c: u64| {
        results
            .iter()
            .find(|r| r["policy"] == p && r["capacity_blocks"] == c)
            .unwrap_or_else(|| panic!("no {p} at {c}"))["hit_ratio"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(get("lru", 100), 0.0, "LRU on a loop larger than the cache");
    assert!(get("opt", 100) > 0.5);
    // The default policies: the peers with the `peers` feature, none without.
    let peers = [
        "moka",
        "quick_cache",
        "foyer",
        "tinyufo",
        "concread-arc",
        "mutex-lru",
    ];
    for p in peers {
        assert_eq!(
            results.iter().any(|r| r["policy"] == p),
            cfg!(feature = "peers"),
            "{p}"
        );
    }
    let peers = if cfg!(feature = "peers") {
        &peers[..]
    } else {
        &[]
    };
    for &p in ["multiarc", "arc"].iter().chain(peers) {
        assert!(get(p, 100) <= get("opt", 100) + 1e-9, "{p} beat OPT");
        assert!(get(p, 75) >= 0.0);
    }
}

/// Peer policies and `--plot` work in the default build; a build without
/// the `peers` or `plot` feature refuses them at once, in one line saying
/// so (not "unknown policy", not a panic).
#[test]
fn replay_and_scan_peers_and_plot_need_their_features() {
    let text: String = (0..300).map(|i| format!("{}\n", i % 30)).collect();
    let path = temp("features.ids", &text);
    let trace = path.to_str().unwrap();
    let svg = path.with_extension("svg");
    let runs: [(Vec<&str>, bool, &str); 4] = [
        (
            vec![
                "replay",
                trace,
                "--capacity",
                "10",
                "--policy",
                "lru,moka",
                "--json",
            ],
            cfg!(feature = "peers"),
            "moka: this multiarc was built without the `peers` feature",
        ),
        (
            vec![
                "replay",
                trace,
                "--capacity",
                "10",
                "--policy",
                "quick_cache",
            ],
            cfg!(feature = "peers"),
            "quick_cache: this multiarc was built without the `peers` feature",
        ),
        (
            vec![
                "scan",
                "--cache-bytes",
                "1MiB",
                "--scan-multiple",
                "1",
                "--policy",
                "arc,tinyufo",
                "--json",
            ],
            cfg!(feature = "peers"),
            "tinyufo: this multiarc was built without the `peers` feature",
        ),
        (
            vec![
                "replay",
                trace,
                "--capacity",
                "10",
                "--policy",
                "lru",
                "--plot",
                svg.to_str().unwrap(),
            ],
            cfg!(feature = "plot"),
            "built without the `plot` feature",
        ),
    ];
    for (args, works, needle) in runs {
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        if works {
            assert!(out.status.success(), "{args:?}: {err}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            let lines: Vec<&str> = err.trim().lines().collect();
            assert_eq!(lines.len(), 1, "{args:?}: {err}");
            assert!(
                lines[0].starts_with("multiarc: error: ") && lines[0].contains(needle),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }
    assert_eq!(svg.exists(), cfg!(feature = "plot"));
}

#[test]
fn replay_reads_zstd_arc_traces_and_rejects_bad_lines() {
    let plain = "0 2 0 1\n5 1 0 2\n0 1 0 3\n";
    let compressed = zstd::encode_all(plain.as_bytes(), 3).unwrap();
    let dir = temp("x", "");
    let path = dir.with_file_name("t.lis.zst");
    std::fs::write(&path, compressed).unwrap();
    let doc = json(&multiarc(&[
        "replay",
        path.to_str().unwrap(),
        "--capacity",
        "2",
        "--policy",
        "arc,lru",
        "--json",
    ]));
    assert_eq!(doc["requests"], 4);
    assert_eq!(doc["distinct"], 3);
    assert_eq!(doc["format"], "arc");

    let bad = temp("bad.ids", "1\n2\nthree\n");
    let out = multiarc(&["replay", bad.to_str().unwrap(), "--format", "ids"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // Progress lines may precede it; the error is one line.
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("multiarc: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("line 3") && errors[0].contains("three"),
        "{err}"
    );

    let empty = temp("empty.ids", "");
    let err = String::from_utf8_lossy(
        &multiarc(&["replay", empty.to_str().unwrap(), "--format", "ids"]).stderr,
    )
    .to_string();
    assert!(err.contains("empty"), "{err}");
    let err =
        String::from_utf8_lossy(&multiarc(&["replay", "/nonexistent/trace"]).stderr).to_string();
    assert!(err.contains("/nonexistent/trace"), "{err}");
    let err = String::from_utf8_lossy(
        &multiarc(&["replay", bad.to_str().unwrap(), "--policy", "magic"]).stderr,
    )
    .to_string();
    assert!(
        err.contains("unknown policy") && err.contains("lirs"),
        "{err}"
    );
}

#[test]
fn replay_cloudphysics_multiarc_tracks_arc() {
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/cloudphysics_io.csv");
    if !trace.exists() {
        eprintln!("skipping: {} not found", trace.display());
        return;
    }
    let doc = json(&multiarc(&[
        "replay",
        trace.to_str().unwrap(),
        "--capacity",
        "0.05",
        "--policy",
        "multiarc-eager,arc,lru",
        "--json",
    ]));
    let r = |p: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap()["hit_ratio"]
            .as_f64()
            .unwrap()
    };
    assert!((r("multiarc-eager") - r("arc")).abs() < 0.01, "{doc}");
    assert!(r("arc") > r("lru"));
}

#[test]
fn poison_recovers_by_itself() {
    for mode in ["lazy", "eager"] {
        let doc = json(&multiarc(&[
            "poison",
            "--max-bytes",
            "8MiB",
            "--a-bytes",
            "12MiB",
            "--b-bytes",
            "24MiB",
            "--reads",
            "60000",
            "--hit-mode",
            mode,
            "--json",
        ]));
        let phases = doc["phases"].as_array().unwrap();
        let w = |k: u64| {
            phases.iter().find(|p| p["phase"] == k).unwrap()["final_window_hit_ratio"]
                .as_f64()
                .unwrap()
        };
        assert!(w(1) > 0.3, "{doc}");
        assert!((w(3) - w(1)).abs() <= 0.02, "{mode}: {doc}");
        assert!((w(3) - w(5)).abs() <= 0.02, "{mode}: {doc}");
        assert_eq!(doc["recovered"], true);
    }
    let out = multiarc(&["poison", "--max-bytes", "8MiB", "--a-bytes", "4MiB"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--a-bytes"));
}

#[test]
fn scan_protects_the_hot_set_for_multiarc() {
    let doc = json(&multiarc(&[
        "scan",
        "--cache-bytes",
        "4MiB",
        "--pattern",
        "uniform",
        "--json",
    ]));
    let r = |p: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap()["protected_share"]
            .as_f64()
            .unwrap()
    };
    for p in ["multiarc", "multiarc-eager", "arc"] {
        assert!(r(p) >= 0.9, "{p} let the scan flush the hot set: {doc}");
    }
    assert!(r("lru") < r("multiarc"), "{doc}");
    let out = multiarc(&["scan", "--pattern", "pareto"]);
    assert!(!out.status.success());
}

#[test]
fn replay_with_a_second_tier() {
    // A Zipf-like skew over 3000 blocks: memory of 100 blocks plus a second
    // tier of 1000 hits more than memory alone, and the rows say how much
    // of it the second tier served.
    // r = i * 0.618... mod 1 (a low-discrepancy sequence), cubed: skewed
    // towards the low ids.
    let text: String = (0..30_000u64)
        .map(|i| {
            let r = (i as f64 * 0.618_033_988_749_895).fract();
            format!("{}\n", (r * r * r * 3000.0) as u64)
        })
        .collect();
    let path = temp("skew.ids", &text);
    let dir = temp("l2-dir-marker", "").parent().unwrap().to_path_buf();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "replay",
            path.to_str().unwrap(),
            "--format",
            "ids",
            "--capacity",
            "100",
            "--policy",
            "multiarc,arc",
            "--json",
        ];
        args.extend_from_slice(extra);
        multiarc(&args)
    };
    let doc = json(&run(&["--l2", "1000", "--l2-dir", dir.to_str().unwrap()]));
    let results = doc["results"].as_array().unwrap();
    let tiered = results.iter().find(|r| r["policy"] == "multiarc").unwrap();
    assert_eq!(tiered["l2_capacity_blocks"], 1000);
    assert!(tiered["l2_hits"].as_u64().unwrap() > 0, "{tiered}");
    let arc = results.iter().find(|r| r["policy"] == "arc").unwrap();
    assert_eq!(arc["l2_capacity_blocks"], 0);
    assert_eq!(arc["l2_hits"], 0);
    let memory_only = json(&run(&[]));
    let alone = memory_only["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "multiarc")
        .unwrap()["hit_ratio"]
        .as_f64()
        .unwrap();
    assert!(
        tiered["hit_ratio"].as_f64().unwrap() > alone + 0.05,
        "{tiered} vs memory alone {alone}"
    );
    // Its device files are gone.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("multiarc-replay-l2")
        })
        .collect();
    assert!(left.is_empty(), "device files left: {left:?}");
    // The hand's keep ratio: 0 keeps nothing (OpenZFS's ring), the
    // default keeps copies, and the rows say what was kept and written.
    let with = |ratio: &str| {
        let doc = json(&run(&[
            "--l2",
            "1000",
            "--l2-dir",
            dir.to_str().unwrap(),
            "--l2-keep-ratio",
            ratio,
        ]));
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == "multiarc")
            .unwrap()
            .clone()
    };
    let fifo = with("0");
    assert_eq!(fifo["l2_kept"], 0, "{fifo}");
    assert!(fifo["l2_write_bytes"].as_u64().unwrap() > 0, "{fifo}");
    assert!(tiered["l2_write_bytes"].as_u64().unwrap() > 0, "{tiered}");
    assert_eq!(arc["l2_write_bytes"], 0);
    let out = run(&["--l2-keep-ratio", "4"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply with --l2 only"));
    // Every tiered row says how many blocks memory dropped uncopied; the
    // memory-only rows have none.
    assert!(tiered["l2_evicted_uncopied"].is_u64(), "{tiered}");
    assert_eq!(arc["l2_evicted_uncopied"], 0);
    // Copies read back as new blocks: the tier still serves hits.
    let doc = json(&run(&[
        "--l2",
        "1000",
        "--l2-dir",
        dir.to_str().unwrap(),
        "--l2-readback-as-new",
    ]));
    let as_new = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "multiarc")
        .unwrap()
        .clone();
    assert!(as_new["l2_hits"].as_u64().unwrap() > 0, "{as_new}");
    let out = run(&["--l2-readback-as-new"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply with --l2 only"));
    let out = run(&["--l2", "1000", "--l2-keep-ratio", "65"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("l2_keep_ratio (65) must be at most 64"));
    // Bad values, and --l2 without a multiarc policy: one clear line.
    for bad in ["0", "abc", "1.5"] {
        let out = run(&["--l2", bad]);
        assert!(!out.status.success(), "--l2 {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--l2"), "--l2 {bad}: {err}");
    }
    let out = multiarc(&[
        "replay",
        path.to_str().unwrap(),
        "--format",
        "ids",
        "--policy",
        "arc,lru",
        "--l2",
        "100",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--l2 applies to the multiarc policies"));
}

/// A loop of 1,200 blocks, a fifth of the requests elsewhere in it at
/// random (an xorshift, the same every run): LRU's worst case, where the
/// lazy multiarc's choices once swung its hit ratio by tens of points.
fn noisy_loop() -> String {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = 0u64;
    (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = if x.is_multiple_of(5) {
                x % 1200
            } else {
                next = (next + 1) % 1200;
                next
            };
            format!("{id}\n")
        })
        .collect()
}

/// `(policy, capacity) -> hits` of a replay of `path` with `--policy
/// policies` and `extra` arguments.
fn replay_hits(
    path: &std::path::Path,
    policies: &[&str],
    extra: &[&str],
) -> std::collections::BTreeMap<(String, u64), u64> {
    let list = policies.join(",");
    let mut args = vec![
        "replay",
        path.to_str().unwrap(),
        "--format",
        "ids",
        "--capacity",
        "1000,1020",
        "--policy",
        &list,
        "--json",
    ];
    args.extend_from_slice(extra);
    let doc = json(&multiarc(&args));
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                (
                    r["policy"].as_str().unwrap().to_string(),
                    r["capacity_blocks"].as_u64().unwrap(),
                ),
                r["hits"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Replay is reproducible: the same trace and flags give equal rows in
/// every run, and a policy's rows do not depend on which other policies
/// run beside it (each multiarc row evicts inline and draws its random
/// choices from `--seed`). The peers (moka, quick_cache, ...) have
/// randomness of their own and are not compared.
#[test]
fn replay_rows_repeat_across_runs_and_policy_lists() {
    let path = temp("noisy-loop.ids", &noisy_loop());
    let ours = [
        "multiarc",
        "multiarc-eager",
        "multiarc-lazy",
        "multiarc-1list",
        "multiarc-s3arc",
        "multiarc-adaptive",
        "multiarc-gen",
        "arc",
        "car",
        "lru",
        "s3arc",
        "opt",
    ];
    let first = replay_hits(&path, &ours, &[]);
    assert_eq!(first.len(), ours.len() * 2);
    let again = replay_hits(&path, &ours, &[]);
    assert_eq!(first, again, "a second run of the same replay");
    // The default seed, given or not.
    assert_eq!(
        first,
        replay_hits(&path, &ours, &["--seed", "0"]),
        "--seed 0"
    );
    // Fewer policies, in another order: the shared ones are unchanged.
    let fewer = replay_hits(
        &path,
        &["lru", "multiarc-s3arc", "multiarc-eager", "multiarc"],
        &[],
    );
    for (row, hits) in &fewer {
        assert_eq!(first[row], *hits, "{row:?} beside other policies");
    }
    // Another seed is another cache (its hits may differ); it repeats too.
    let other = replay_hits(&path, &["multiarc"], &["--seed", "12345"]);
    assert_eq!(
        other,
        replay_hits(&path, &["multiarc"], &["--seed", "12345"]),
        "--seed 12345, twice"
    );
    // The simulator's policies take no seed.
    let other_all = replay_hits(&path, &["arc", "multiarc"], &["--seed", "12345"]);
    for c in [1000, 1020] {
        let arc = ("arc".to_string(), c);
        assert_eq!(other_all[&arc], first[&arc]);
    }
}

/// The peers whose randomness replay can fix (moka and quick_cache get a
/// hasher with fixed keys, moka its housekeeping after every operation;
/// foyer and lru have none) give equal rows across runs and policy lists
/// too. TinyUFO seeds its hasher at random with no way to fix it, and
/// concread's ARC varies too (by about 0.01 points on OLTP): both are left
/// out.
#[cfg(feature = "peers")]
#[test]
fn replay_peer_rows_repeat_across_runs_and_policy_lists() {
    let path = temp("noisy-loop-peers.ids", &noisy_loop());
    let peers = ["moka", "quick_cache", "foyer", "mutex-lru"];
    let first = replay_hits(&path, &peers, &[]);
    assert_eq!(first.len(), peers.len() * 2);
    assert_eq!(
        first,
        replay_hits(&path, &peers, &[]),
        "a second run of the same replay"
    );
    let fewer = replay_hits(&path, &["lru", "quick_cache", "multiarc", "moka"], &[]);
    for (row, hits) in fewer.iter().filter(|(row, _)| peers.contains(&&*row.0)) {
        assert_eq!(first[row], *hits, "{row:?} beside other policies");
    }
}

#[test]
fn replay_and_scan_run_s3arc_by_name() {
    // A loop of 150 blocks, 20 times, in 100 blocks: LRU never hits, S3ARC
    // keeps part of the loop.
    let text: String = (0..3000).map(|i| format!("{}\n", i % 150)).collect();
    let path = temp("s3arc-loop.ids", &text);
    let doc = json(&multiarc(&[
        "replay",
        path.to_str().unwrap(),
        "--format",
        "ids",
        "--capacity",
        "100",
        "--policy",
        "s3arc,arc,lru",
        "--json",
    ]));
    let r = |p: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap_or_else(|| panic!("no {p} row: {doc}"))["hit_ratio"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(r("lru"), 0.0, "{doc}");
    assert!(r("s3arc") > 0.2, "{doc}");

    let doc = json(&multiarc(&[
        "scan",
        "--cache-bytes",
        "4MiB",
        "--pattern",
        "uniform",
        "--policy",
        "s3arc,lru",
        "--json",
    ]));
    let share = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "s3arc")
        .unwrap_or_else(|| panic!("no s3arc row: {doc}"))["protected_share"]
        .as_f64()
        .unwrap();
    assert!(share >= 0.9, "s3arc let the scan flush the hot set: {doc}");
}

/// The cache's S3ARC policy (`multiarc-s3arc`) in `replay` (beside its
/// page model `s3arc` and ARC, and with a second tier), `scan` and
/// `poison` (`--policy s3arc`), and the errors for names that are not.
#[test]
fn replay_scan_and_poison_run_the_caches_s3arc_policy() {
    // A loop of 150 blocks in 100: LRU and ARC never hit; S3ARC's model
    // and the cache keep part of the loop.
    let text: String = (0..3000).map(|i| format!("{}\n", i % 150)).collect();
    let path = temp("multiarc-s3arc-loop.ids", &text);
    let replay = |policies: &str, extra: &[&str]| {
        let mut args = vec![
            "replay",
            path.to_str().unwrap(),
            "--format",
            "ids",
            "--capacity",
            "100",
            "--policy",
            policies,
            "--json",
        ];
        args.extend_from_slice(extra);
        multiarc(&args)
    };
    let doc = json(&replay("multiarc-s3arc,s3arc,multiarc,arc,lru", &[]));
    let row = |doc: &serde_json::Value, p: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap_or_else(|| panic!("no {p} row: {doc}"))
            .clone()
    };
    let ratio = |doc: &serde_json::Value, p: &str| row(doc, p)["hit_ratio"].as_f64().unwrap();
    assert_eq!(ratio(&doc, "arc"), 0.0, "{doc}");
    assert!(ratio(&doc, "s3arc") > 0.2, "{doc}");
    assert!(ratio(&doc, "multiarc-s3arc") > 0.2, "{doc}");
    // The default list has it.
    let doc = json(&multiarc(&[
        "replay",
        path.to_str().unwrap(),
        "--format",
        "ids",
        "--capacity",
        "100",
        "--json",
    ]));
    row(&doc, "multiarc-s3arc");
    // With a second tier of the whole loop, it serves the rest.
    let dir = temp("s3arc-l2-dir-marker", "")
        .parent()
        .unwrap()
        .to_path_buf();
    let doc = json(&replay(
        "multiarc-s3arc",
        &["--l2", "200", "--l2-dir", dir.to_str().unwrap()],
    ));
    let tiered = row(&doc, "multiarc-s3arc");
    assert_eq!(tiered["l2_capacity_blocks"], 200, "{tiered}");
    assert!(tiered["l2_hits"].as_u64().unwrap() > 0, "{tiered}");
    assert!(tiered["hit_ratio"].as_f64().unwrap() > 0.5, "{tiered}");
    // Names that are not a policy: one clear line naming them.
    for bad in ["multiarc-s3", "S3ARC"] {
        let out = replay(bad, &[]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(bad) && err.contains("unknown policy"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }

    let doc = json(&multiarc(&[
        "scan",
        "--cache-bytes",
        "4MiB",
        "--pattern",
        "uniform",
        "--policy",
        "multiarc-s3arc,lru",
        "--json",
    ]));
    let share = row(&doc, "multiarc-s3arc")["protected_share"]
        .as_f64()
        .unwrap();
    assert!(
        share >= 0.9,
        "multiarc-s3arc let the scan flush the hot set: {doc}"
    );

    let doc = json(&multiarc(&[
        "poison",
        "--max-bytes",
        "8MiB",
        "--a-bytes",
        "12MiB",
        "--b-bytes",
        "24MiB",
        "--reads",
        "60000",
        "--policy",
        "s3arc",
        "--json",
    ]));
    assert_eq!(doc["config"]["policy"], "s3arc", "{doc}");
    assert_eq!(doc["recovered"], true, "{doc}");
    for (args, needle) in [
        (
            &["--policy", "s3arc", "--hit-mode", "eager"][..],
            "lazy hit mode",
        ),
        (&["--policy", "lfu"][..], "unknown policy \"lfu\""),
    ] {
        let mut all = vec!["poison"];
        all.extend_from_slice(args);
        let out = multiarc(&all);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `corpus`: judged policies and the references side by side on held-out
/// traces (short: 20,000 requests each), every figure of the summary
/// recomputed here from the rows; and its errors.
#[test]
fn corpus_judges_policies_against_arc_and_the_best_reference() {
    let empty = temp("unused", "").with_file_name("no-traces");
    std::fs::create_dir_all(&empty).unwrap();
    let traces = empty.to_str().unwrap();
    let doc = json(&multiarc(&[
        "corpus",
        "--only",
        "loop-noise-h2,one-hit-h2",
        "--requests",
        "20000",
        "--traces",
        traces,
        "--json",
    ]));
    assert_eq!(doc["set"], "held-out");
    let references: Vec<&str> = doc["references"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(references.contains(&"arc") && references.contains(&"lru"));
    let judged = ["multiarc", "multiarc-eager", "multiarc-s3arc"];
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7, "4 sizes of loop-noise-h2, 3 of one-hit-h2");
    let pct = |row: &serde_json::Value, p: &str| {
        row["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["policy"] == p)
            .unwrap_or_else(|| panic!("{p} missing from {row}"))["hit_percent"]
            .as_f64()
            .unwrap()
    };
    for row in rows {
        assert_eq!(row["measured_requests"], 20000);
        let best = references
            .iter()
            .map(|r| pct(row, r))
            .fold(f64::MIN, f64::max);
        assert_eq!(row["best_reference_percent"].as_f64().unwrap(), best);
        assert_eq!(row["arc_percent"].as_f64().unwrap(), pct(row, "arc"));
        for p in judged.iter().chain(&references) {
            assert!((0.0..=100.0).contains(&pct(row, p)), "{p}: {row}");
        }
    }
    // The loop of 8,000 blocks with 35% noise: ARC keeps it at 12,000
    // blocks, hardly any of it at 2,000, and LIRS keeps part of it there.
    let at = |c: u64| rows.iter().find(|r| r["capacity_blocks"] == c).unwrap();
    let (small, large) = (at(2000), at(12000));
    assert!(
        pct(large, "arc") > pct(small, "arc") + 10.0,
        "{small} {large}"
    );
    assert!(pct(small, "lirs") > pct(small, "arc") + 1.0, "{small}");
    let summary = doc["summary"].as_array().unwrap();
    assert_eq!(summary.len(), judged.len());
    for (s, p) in summary.iter().zip(judged) {
        assert_eq!(s["policy"], p);
        let worst = rows
            .iter()
            .map(|r| pct(r, p) - pct(r, "arc"))
            .fold(f64::MAX, f64::min);
        assert!((s["worst_against_arc"].as_f64().unwrap() - worst).abs() < 1e-9);
        let worst_best = rows
            .iter()
            .map(|r| pct(r, p) - r["best_reference_percent"].as_f64().unwrap())
            .fold(f64::MAX, f64::min);
        assert!((s["worst_against_best"].as_f64().unwrap() - worst_best).abs() < 1e-9);
    }
    // The tuning set is another set of traces.
    let tuning = json(&multiarc(&[
        "corpus",
        "--set",
        "tuning",
        "--only",
        "one-hit",
        "--requests",
        "5000",
        "--json",
    ]));
    assert_eq!(tuning["rows"].as_array().unwrap().len(), 3);
    assert_eq!(tuning["rows"][0]["trace"], "one-hit-t");
    // Errors: one line each, exit 1.
    for (args, needle) in [
        (
            vec!["--only", "nothing-like-it"],
            "no trace of the held-out set",
        ),
        (vec!["--only", "OLTP"], "OLTP.lis.zst is absent"),
        (vec!["--policy", "opt"], "opt"),
        (vec!["--policy", "magic"], "magic"),
        (vec!["--requests", "0"], "at least 1"),
    ] {
        let out = multiarc(&[&["corpus", "--traces", traces][..], &args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
