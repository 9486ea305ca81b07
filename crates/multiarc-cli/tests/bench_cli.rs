//! `multiarc bench` as CI runs it: a few seconds, small sizes; every row
//! must produce numbers and the JSON must parse. Bad arguments must fail
//! with one clear line.

use std::process::Command;

fn multiarc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(args)
        .output()
        .expect("running multiarc")
}

/// Runs `multiarc args` (with `--json` among them), which must succeed, and
/// parses its one JSON document; `what` names the run in a failure.
fn multiarc_json(args: &[&str], what: &str) -> serde_json::Value {
    let out = multiarc(args);
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: one JSON document on stdout: {e}"))
}

#[test]
fn every_row_produces_numbers_and_the_json_parses() {
    let doc = multiarc_json(
        &[
            "bench",
            "--file-bytes",
            "1MiB",
            "--seconds",
            "0.1",
            "--threads",
            "1,2",
            "--lockstat",
            "--json",
        ],
        "bench",
    );
    assert!(doc["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(doc["config"]["block_size"], 8192);
    let results = doc["results"].as_array().unwrap();
    // One row per configuration: `multiarc-lazy` is the default
    // (`multiarc`) under another name, and runs only when asked for.
    let caches = [
        "multiarc",
        "multiarc-eager",
        "multiarc-1list",
        "multiarc-s3arc",
    ];
    assert!(!results.iter().any(|r| r["cache"] == "multiarc-lazy"));
    // The default rows: every peer with the `peers` feature, none without.
    let peers = [
        "moka",
        "quick_cache",
        "foyer",
        "tinyufo",
        "concread-arc",
        "mutex-lru",
    ];
    for peer in peers {
        assert_eq!(
            results.iter().any(|r| r["cache"] == peer),
            cfg!(feature = "peers"),
            "{peer}"
        );
    }
    let peers = if cfg!(feature = "peers") {
        &peers[..]
    } else {
        &[]
    };
    for &cache in caches.iter().chain(peers) {
        for mode in ["hold", "copy"] {
            for threads in [1, 2] {
                let r = results
                    .iter()
                    .find(|r| r["cache"] == cache && r["mode"] == mode && r["threads"] == threads)
                    .unwrap_or_else(|| panic!("no result for {cache} {mode} {threads}"));
                assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
                assert!(r["mb_per_sec"].as_f64().unwrap() > 0.0, "{r}");
                assert_eq!(r["misses"], 0, "a fully cached run missed: {r}");
                if cache.starts_with("multiarc") {
                    let share = r["lock_hottest_share"].as_f64().expect("lockstat figure");
                    assert!((0.0..=1.0).contains(&share), "{r}");
                    if cache == "multiarc-eager" {
                        // Eager hits take their stripe and sublist locks;
                        // lazy hits take none, so their share may be 0.
                        assert!(share > 0.0, "eager hits took no lock: {r}");
                    }
                }
            }
        }
    }
    for baseline in ["pagecache", "memcpy"] {
        assert!(results.iter().any(|r| r["cache"] == baseline
            && r["mode"] == "copy"
            && r["ops_per_sec"].as_f64().unwrap() > 0.0));
        assert!(!results
            .iter()
            .any(|r| r["cache"] == baseline && r["mode"] == "hold"));
    }
}

#[test]
fn tables_and_plot_without_json() {
    let dir = std::env::temp_dir().join(format!("multiarc-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("bench.svg");
    let out = multiarc(&[
        "bench",
        "--file-bytes",
        "256KiB",
        "--seconds",
        "0.05",
        "--threads",
        "1",
        "--caches",
        if cfg!(feature = "peers") {
            "multiarc,multiarc-1list,mutex-lru,memcpy"
        } else {
            "multiarc,multiarc-1list,memcpy"
        },
        "--plot",
        svg.to_str().unwrap(),
    ]);
    if !cfg!(feature = "plot") {
        // Refused before the run, in one line.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("without the `plot` feature"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Hold mode") && text.contains("Copy mode"),
        "{text}"
    );
    assert!(text.contains("vs 1list"), "{text}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("multiarc"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_fail_with_one_clear_line() {
    for (args, needle) in [
        (vec!["bench", "--threads", "0"], "at least 1"),
        (vec!["bench", "--threads", "1,,2"], "empty"),
        (vec!["bench", "--file-bytes", "12XB"], "unknown unit"),
        (
            vec!["bench", "--caches", "nosuchcache", "--seconds", "0.01"],
            "unknown cache",
        ),
        (
            vec!["bench", "--modes", "stream", "--seconds", "0.01"],
            "unknown mode",
        ),
        (
            vec!["bench", "--seconds", "0"],
            "--seconds must be a positive number",
        ),
        (vec!["bench", "--file-bytes", "1KiB"], "at least one block"),
        (vec!["bench", "--seed", "0x10"], "is not a seed"),
        (vec!["bench", "--slices", "0"], "at least 1"),
        (
            vec!["bench", "--repeat", "2", "--processes", "3"],
            "--processes (3) must be at most --repeat (2)",
        ),
        (vec!["bench", "--processes", "0"], "at least 1"),
        // Refused before the run, not after it.
        (
            vec!["bench", "--plot", "/no-such-directory/bench.svg"],
            if cfg!(feature = "plot") {
                "/no-such-directory is not a directory"
            } else {
                "without the `plot` feature"
            },
        ),
        (
            vec!["bench", "--plot", "/"],
            if cfg!(feature = "plot") {
                "--plot /: is a directory"
            } else {
                "without the `plot` feature"
            },
        ),
        (
            vec!["bench", "--workload", "randrw", "--locking", "spin"],
            "unknown locking mode",
        ),
        (
            vec!["bench", "--workload", "fuzz", "--seconds", "0.01"],
            "unknown workload",
        ),
        (
            vec!["bench", "--workload", "randrw", "--block-size", "3000"],
            "power of two",
        ),
        (
            vec!["bench", "--workload", "randrw", "--caches", "moka"],
            "--workload cache only",
        ),
    ] {
        let out = multiarc(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A cache bench of a fraction of a second (add `--caches` and more).
const QUICK_BENCH: [&str; 9] = [
    "bench",
    "--file-bytes",
    "256KiB",
    "--seconds",
    "0.02",
    "--threads",
    "1",
    "--repeat",
    "1",
];

/// `--seed` reaches the report: a number as given, `random` (the default)
/// as null.
#[test]
fn the_seed_is_reported() {
    for (extra, seed) in [
        (&[][..], serde_json::Value::Null),
        (&["--seed", "random"][..], serde_json::Value::Null),
        (&["--seed", "18446744073709551615"][..], u64::MAX.into()),
    ] {
        let mut args = QUICK_BENCH.to_vec();
        args.extend(["--caches", "multiarc", "--modes", "hold", "--json"]);
        args.extend(extra);
        let doc = multiarc_json(&args, "bench --seed");
        assert_eq!(doc["config"]["seed"], seed, "{extra:?}");
        assert!(doc["results"][0]["ops_per_sec"].as_f64().unwrap() > 0.0);
    }
}

/// `--slices N`: multiarc and each row it is compared with run N times per
/// repetition, and each run of that row pairs with the multiarc runs
/// beside it; an unpaired row (`multiarc-eager`) runs once.
#[test]
fn compared_rows_run_in_slices_each_paired_with_multiarc() {
    let compared = if cfg!(feature = "peers") {
        "quick_cache"
    } else {
        "multiarc-1list"
    };
    let caches = format!("multiarc,multiarc-eager,{compared}");
    let args = [
        "bench",
        "--file-bytes",
        "256KiB",
        "--seconds",
        "0.03",
        "--threads",
        "1",
        "--repeat",
        "2",
        "--slices",
        "3",
        "--modes",
        "hold",
        "--json",
        "--caches",
        &caches,
    ];
    // In this one process (the default), then each repetition in a fresh
    // process: the same runs and pairs; only the second reports each
    // process's median.
    for processes in [1, 2] {
        let mut args = args.to_vec();
        let count = processes.to_string();
        if processes > 1 {
            args.extend(["--processes", &count]);
        }
        let doc = multiarc_json(&args, "bench --slices");
        assert_eq!(doc["config"]["slices"], 3, "{doc}");
        assert_eq!(doc["config"]["processes"], processes, "{doc}");
        let row = |name: &str| {
            doc["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["cache"] == name)
                .unwrap_or_else(|| panic!("no {name} row in {doc}"))
                .clone()
        };
        let peer = row(compared);
        assert_eq!(peer["runs"], 6, "{peer}");
        assert_eq!(peer["multiarc_over_this"]["pairs"], 6, "{peer}");
        // multiarc: once after the unpaired row, then after each slice.
        assert_eq!(row("multiarc")["runs"], 8);
        assert_eq!(row("multiarc-eager")["runs"], 2);
        let by_process = peer["multiarc_over_this"]["by_process"].as_array();
        if processes == 1 {
            assert!(by_process.is_none(), "{peer}");
        } else {
            let by_process = by_process.unwrap_or_else(|| panic!("no by_process: {peer}"));
            assert_eq!(by_process.len(), processes, "{peer}");
            assert!(
                by_process.iter().all(|r| r.as_f64().unwrap() > 0.0),
                "{peer}"
            );
        }
    }
}

/// `--modes chase` (dependent hits) runs every cache row with no misses and
/// prints its per-read nanoseconds; a block too small to carry the next
/// key is refused in one line.
#[test]
fn chase_mode_reads_dependent_blocks_and_refuses_blocks_under_8_bytes() {
    let caches = if cfg!(feature = "peers") {
        "multiarc,quick_cache"
    } else {
        "multiarc"
    };
    let mut args = QUICK_BENCH.to_vec();
    args.extend(["--caches", caches, "--modes", "chase", "--json"]);
    let doc = multiarc_json(&args, "bench --modes chase");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), caches.split(',').count(), "{doc}");
    for r in results {
        assert_eq!(r["mode"], "chase", "{r}");
        assert_eq!(r["misses"], 0, "{r}");
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
    let mut args = QUICK_BENCH.to_vec();
    args.extend(["--caches", "multiarc", "--modes", "chase"]);
    let out = multiarc(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("nanoseconds per read"), "{text}");
    let mut args = QUICK_BENCH.to_vec();
    args.extend([
        "--caches",
        "multiarc",
        "--modes",
        "chase",
        "--block-size",
        "4",
    ]);
    let out = multiarc(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--block-size must be at least 8"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A peer row works in a build with the `peers` feature; in one without
/// it (`--no-default-features`) it is refused in one line saying so.
#[test]
fn peer_rows_need_the_peers_feature() {
    for cache in ["quick_cache", "moka", "mutex-lru"] {
        let caches = format!("multiarc,{cache}");
        let mut args = QUICK_BENCH.to_vec();
        args.extend(["--caches", &caches, "--json"]);
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        if cfg!(feature = "peers") {
            assert!(out.status.success(), "{cache}: {err}");
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let results = doc["results"].as_array().unwrap();
            assert!(results.iter().any(|r| r["cache"] == cache), "{doc}");
        } else {
            assert!(!out.status.success(), "{cache}: succeeded");
            assert!(
                err.contains(cache) && err.contains("built without the `peers` feature"),
                "{cache}: {err}"
            );
            assert!(
                !err.contains("unknown cache") && !err.contains("panic"),
                "{err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "{cache}: {err}");
            assert!(out.stdout.is_empty());
        }
    }
}

/// The single-file workloads: every locking mode and I/O kind produces a
/// rate, and each JSON result carries `locking` beside `threads` and
/// `ops_per_sec`.
#[test]
fn file_workloads_report_every_locking_mode() {
    for (workload, ios, ops) in [
        ("randrw", ["8KiB", "unaligned"], ["mixed", "mixed"]),
        ("randread", ["8KiB", "unaligned"], ["read", "read"]),
        ("rangelock", ["disjoint", "overlapping"], ["read", "write"]),
    ] {
        let doc = multiarc_json(
            &[
                "bench",
                "--workload",
                workload,
                "--file-bytes",
                "2MiB",
                "--seconds",
                "0.05",
                "--threads",
                "1,2",
                "--json",
            ],
            workload,
        );
        let results = doc["results"].as_array().unwrap();
        let lockings: &[&str] = if workload == "rangelock" {
            &["range", "rwsem"]
        } else {
            &["range", "rwsem", "torn"]
        };
        for locking in lockings {
            for io in ios {
                for op in ops {
                    for threads in [1, 2] {
                        let r = results
                            .iter()
                            .find(|r| {
                                r["locking"] == *locking
                                    && r["io"] == io
                                    && r["op"] == op
                                    && r["threads"] == threads
                            })
                            .unwrap_or_else(|| {
                                panic!("{workload}: no {locking} {io} {op} {threads}")
                            });
                        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
                    }
                }
            }
        }
    }
    let out = multiarc(&[
        "bench",
        "--workload",
        "randrw",
        "--file-bytes",
        "1MiB",
        "--seconds",
        "0.05",
        "--threads",
        "2",
        "--locking",
        "range,rwsem",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("range/rwsem"), "{text}");
}

#[test]
fn the_l2_workload_runs_its_rows_and_refuses_bad_sizes() {
    // O_DIRECT needs a disk filesystem: the target directory is on one.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("l2bench");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let base = [
        "bench",
        "--workload",
        "l2",
        "--memory",
        "1MiB",
        "--l2-bytes",
        "8MiB",
        "--working-set",
        "4MiB",
        "--seconds",
        "0.05",
        "--repeat",
        "1",
        "--threads",
        "1,2",
        "--dir",
        d,
    ];
    let mut args = base.to_vec();
    args.extend(["--l2-rows", "multiarc-l2,multiarc,direct", "--json"]);
    let doc = multiarc_json(&args, "bench --workload l2");
    let results = doc["results"].as_array().unwrap();
    for (row, threads) in [
        ("multiarc-l2", 1),
        ("multiarc-l2", 2),
        ("multiarc", 1),
        ("direct", 2),
    ] {
        let r = results
            .iter()
            .find(|r| r["cache"] == row && r["threads"] == threads)
            .unwrap_or_else(|| panic!("no {row} at {threads}"));
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
    let direct = results.iter().find(|r| r["cache"] == "direct").unwrap();
    assert_eq!(direct["memory_hit_ratio"], 0.0);
    // Its files are gone.
    let left = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".multiarc-l2bench")
        })
        .count();
    assert_eq!(left, 0);
    // Sizes that make no such workload: one clear line each.
    for (flag, value, want) in [
        ("--working-set", "1MiB", "larger than --memory"),
        (
            "--working-set",
            "9MiB",
            "smaller than --memory plus --l2-bytes",
        ),
        ("--dir", "/dev/shm", "tmpfs"),
    ] {
        let mut args = base.to_vec();
        let at = args.iter().position(|a| *a == flag).unwrap();
        args[at + 1] = value;
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value}");
        assert!(err.contains(want), "{flag} {value}: {err}");
    }
    // A slower backing store: every row waits after each of its reads, and
    // the report says so; bad durations get one clear line.
    let mut args = base.to_vec();
    args.extend(["--l2-rows", "direct", "--backing-latency", "2ms", "--json"]);
    let doc = multiarc_json(&args, "bench --backing-latency 2ms");
    assert_eq!(doc["config"]["backing_latency_us"], 2000.0);
    let direct = &doc["results"].as_array().unwrap()[0];
    // Two threads each waiting 2 ms per read: at most 1000 reads/s.
    assert!(
        direct["ops_per_sec"].as_f64().unwrap() <= 1000.0,
        "{direct}"
    );
    for bad in ["2", "2h", "-1ms", "90s"] {
        let flag = format!("--backing-latency={bad}");
        let mut args = base.to_vec();
        args.push(&flag);
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--backing-latency {bad}");
        assert!(err.contains("duration"), "--backing-latency {bad}: {err}");
    }
    let out = multiarc(&["bench", "--backing-latency", "1ms"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("applies to --workload l2 only"));
}

/// Each workload's flags are its own: a flag of another workload is
/// refused before anything runs, in one line naming the workload given and
/// the ones that take the flag, whether the workload is named by
/// `--workload` (anywhere on the line) or as the subcommand.
#[test]
fn a_flag_of_another_workload_is_refused_naming_the_workloads_that_take_it() {
    let cache_only = "it applies to --workload cache only";
    let l2_only = "it applies to --workload l2 only";
    let files_only = "it applies to --workload randrw, randread or rangelock only";
    for (args, workload, flag, takers) in [
        (
            &["bench", "--workload", "randrw", "--caches", "moka"][..],
            "randrw",
            "--caches",
            cache_only,
        ),
        (
            &["bench", "randrw", "--caches", "moka"],
            "randrw",
            "--caches",
            cache_only,
        ),
        (
            &["bench", "--lockstat", "--workload=l2"],
            "l2",
            "--lockstat",
            cache_only,
        ),
        (
            &["bench", "rangelock", "--modes", "hold"],
            "rangelock",
            "--modes",
            cache_only,
        ),
        (&["bench", "--memory", "1GiB"], "cache", "--memory", l2_only),
        (
            &["bench", "cache", "--l2-rows=direct"],
            "cache",
            "--l2-rows",
            l2_only,
        ),
        (
            &["bench", "randread", "--dir", "/tmp"],
            "randread",
            "--dir",
            l2_only,
        ),
        (
            &["bench", "--locking", "range"],
            "cache",
            "--locking",
            files_only,
        ),
        (
            &["bench", "--workload", "l2", "--locking", "range"],
            "l2",
            "--locking",
            files_only,
        ),
        (
            &["bench", "l2", "--file-bytes", "1MiB"],
            "l2",
            "--file-bytes",
            "it applies to --workload cache, randrw, randread or rangelock only",
        ),
    ] {
        let out = multiarc(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} ran");
        let want = format!(
            "multiarc: error: '{flag}' does not apply to the {workload} workload; {takers}"
        );
        assert_eq!(err.trim(), want, "{args:?}");
    }
    // A flag no workload takes keeps clap's own message (with its hint).
    let out = multiarc(&["bench", "rangelock", "--cachez", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("unexpected argument '--cachez'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // The cache workload's flags before a subcommand: one line too.
    let out = multiarc(&["bench", "--threads", "1", "randrw"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("'randrw' cannot be used with"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `bench --workload NAME` (as scripts call it, the flag anywhere) and
/// `bench NAME` run the same workload with the same flags.
#[test]
fn the_workload_flag_and_the_subcommand_run_the_same_workload() {
    let flags = [
        "--seconds",
        "0.01",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ];
    let spellings: [Vec<&str>; 3] = [
        [&["bench", "rangelock"][..], &flags].concat(),
        [&["bench", "--workload", "rangelock"][..], &flags].concat(),
        [&["bench"][..], &flags, &["--workload=rangelock"]].concat(),
    ];
    for args in &spellings {
        let doc = multiarc_json(args, &args.join(" "));
        assert_eq!(doc["workload"], "rangelock", "{args:?}");
        assert_eq!(doc["seconds"], 0.01, "{args:?}");
        let results = doc["results"].as_array().unwrap();
        assert!(!results.is_empty(), "{args:?}");
        assert!(results.iter().all(|r| r["threads"] == 1), "{args:?}");
    }
    // The cache workload: `bench` alone, `bench cache`, `--workload cache`.
    let flags = [
        "--file-bytes",
        "256KiB",
        "--seconds",
        "0.05",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--modes",
        "copy",
        "--caches",
        "multiarc,memcpy",
        "--json",
    ];
    for first in [
        &["bench"][..],
        &["bench", "cache"],
        &["bench", "--workload", "cache"],
    ] {
        let args = [first, &flags].concat();
        let doc = multiarc_json(&args, &args.join(" "));
        assert_eq!(
            doc["config"]["caches"],
            serde_json::json!(["multiarc", "memcpy"])
        );
        assert_eq!(doc["config"]["file_bytes"], 256 << 10);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{args:?}");
        assert!(
            results
                .iter()
                .all(|r| r["mode"] == "copy" && r["ops_per_sec"].as_f64().unwrap() > 0.0),
            "{args:?}: {results:?}"
        );
    }
}

/// Off a terminal (here stderr is a pipe), progress goes to stderr as
/// plain lines, `--json` or not: the step after the first run done, and
/// the closing count; stdout stays one JSON document.
#[test]
fn progress_goes_to_a_redirected_stderr_as_lines_and_stdout_stays_one_json_document() {
    let mut bench = QUICK_BENCH.to_vec();
    bench.extend(["--caches", "multiarc", "--modes", "hold,copy"]);
    let tables = multiarc(&bench);
    let err = String::from_utf8_lossy(&tables.stderr);
    assert!(tables.status.success(), "{err}");
    assert!(err.contains("bench: 1/2 runs, "), "{err:?}");
    bench.push("--json");
    let async_hit = [
        "bench",
        "async-hit",
        "--block-size",
        "4KiB",
        "--seconds",
        "0.002",
        "--repeat",
        "1",
        "--json",
    ];
    let runs: [(&[&str], &str); 2] = [(&bench, "bench"), (&async_hit, "bench async-hit")];
    for (args, name) in runs {
        let out = multiarc(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        let doc: Result<serde_json::Value, _> = serde_json::from_slice(&out.stdout);
        assert!(doc.is_ok(), "{args:?}: stdout is not one JSON document");
        let first = format!("{name}: 1/");
        assert!(
            err.lines()
                .any(|l| l.starts_with(&first) && l.contains(" runs, ")),
            "{args:?}: no progress line starting {first:?} in {err:?}"
        );
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("{name}: ")) && l.contains(" runs in ")),
            "{args:?}: no closing line in {err:?}"
        );
        assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
    }
}
