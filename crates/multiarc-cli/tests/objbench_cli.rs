//! `multiarc bench --workload object` as CI runs it: a tiny data set on the
//! in-process S3 server, one repetition, little latency. The JSON must
//! have its fields, a warm multiarc pass must send no byte to the store,
//! and bad arguments (an unreachable endpoint among them) must fail with
//! one clear line.

#![cfg(feature = "object")]

use std::process::Command;
use std::time::{Duration, Instant};

fn multiarc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(args)
        .output()
        .expect("running multiarc")
}

/// The second tiers go under the target directory (a disk, not tmpfs).
fn l2_dir() -> String {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("objbench");
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_str().unwrap().to_string()
}

const TINY: &[&str] = &[
    "bench",
    "--workload",
    "object",
    "--object-bytes",
    "64KiB",
    "--block-size",
    "16KiB",
    "--hot-files",
    "2",
    "--scan-files",
    "2",
    "--queries",
    "8",
    "--scan-every",
    "4",
    "--reps",
    "1",
    "--store-latency",
    "1ms",
    "--l2-bytes",
    "16MiB",
];

#[test]
fn a_tiny_run_gives_every_field_and_a_warm_multiarc_pass_sends_no_byte() {
    let dir = l2_dir();
    let mut args = TINY.to_vec();
    // The whole data set (256 KiB) fits in memory: warm passes hit.
    args.extend(["--cache-memory", "1MiB", "--tasks", "1,2", "--l2-dir", &dir]);
    let rows = if cfg!(feature = "peers") {
        "multiarc,multiarc-l2,foyer-hybrid,foyer-memory,none"
    } else {
        "multiarc,multiarc-l2,none"
    };
    args.extend(["--rows", rows, "--json"]);
    let out = multiarc(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), rows.split(',').count() * 2, "{doc}");
    for r in results {
        for field in [
            "queries_per_sec",
            "p50_ms",
            "p99_ms",
            "cold_store_bytes_per_query",
            "warm_store_bytes_per_query",
            "warm_requests_per_query",
        ] {
            assert!(r[field].as_f64().is_some(), "{field} in {r}");
        }
        assert!(r["row"].is_string() && r["tasks"].is_u64(), "{r}");
        assert!(r["queries_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["cold_store_bytes_per_query"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        let hit_ratio = &r["hit_ratio"];
        if r["row"] == "none" {
            assert!(hit_ratio.is_null(), "{r}");
            // The store itself: every pass reads it again.
            assert!(r["warm_store_bytes_per_query"].as_f64().unwrap() > 0.0);
        } else {
            let ratio = hit_ratio.as_f64().expect("a hit ratio");
            assert!((0.0..=1.0).contains(&ratio), "{r}");
        }
        if r["row"] == "multiarc" {
            assert_eq!(r["warm_store_bytes_per_query"], 0.0, "{r}");
            assert_eq!(r["warm_requests_per_query"], 0.0, "{r}");
            assert_eq!(r["hit_ratio"], 1.0, "{r}");
        }
    }
    assert!(doc["config"]["store_alone_get_ms"].as_f64().unwrap() > 0.0);
    // The second tiers' directories are gone.
    let left = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with(".multiarc-objbench")
        })
        .count();
    assert_eq!(left, 0);
}

/// Runs `args`, which must fail with one line containing `want`.
fn fails_with(args: &[&str], want: &str) {
    let out = multiarc(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    assert!(err.contains(want), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
}

#[test]
fn an_unreachable_endpoint_and_bad_flags_give_one_clear_line() {
    // A port nothing listens on (the discard port, closed here).
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args([
            "bench",
            "--workload",
            "object",
            "--endpoint",
            "http://127.0.0.1:9",
            "--bucket",
            "b",
            "--json",
        ])
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("http://127.0.0.1:9") && err.contains("bucket b"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));

    let object = ["bench", "--workload", "object"];
    let with = |more: &[&'static str]| -> Vec<&'static str> {
        object.iter().chain(more).copied().collect()
    };
    fails_with(
        &with(&["--endpoint", "http://127.0.0.1:9"]),
        "--endpoint needs --bucket",
    );
    fails_with(&with(&["--bucket", "b"]), "--bucket needs --endpoint");
    fails_with(
        &with(&["--endpoint", "ftp://x", "--bucket", "b"]),
        "not an http",
    );
    fails_with(&with(&["--rows", "multiarc,lru"]), "object row");
    fails_with(&with(&["--rows", "none,none"]), "twice");
    fails_with(&with(&["--store-latency", "20"]), "duration");
    fails_with(&with(&["--block-size", "1KiB"]), "--block-size");
    fails_with(&with(&["--tasks", "0"]), "--tasks");
    fails_with(
        &with(&["--rows", "multiarc-l2", "--l2-dir", "/dev/shm"]),
        "tmpfs",
    );
    // Without credentials, --endpoint says which is missing.
    let out = Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(with(&["--endpoint", "http://127.0.0.1:9", "--bucket", "b"]))
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{err}");
}

/// With stderr redirected (a pipe, not a terminal) the run says what it
/// does on stderr, in plain lines, while stdout stays one JSON document.
#[test]
fn a_redirected_run_shows_progress_lines_on_stderr_and_one_json_document_on_stdout() {
    let mut args = TINY.to_vec();
    args.extend(["--rows", "none", "--tasks", "1,2", "--json"]);
    let out = multiarc(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(2), "{doc}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("bench object: 1/2 runs, ") && l.ends_with(", none, 2 tasks")),
        "no progress line in {err:?}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("the store alone: ")),
        "{err:?}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("bench object: 2 runs in ")),
        "no closing line in {err:?}"
    );
}
