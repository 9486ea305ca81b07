//! `multiarc bench async-hit` in a few milliseconds: its JSON has every row
//! at every block size, with numbers, and the target's verdict; bad
//! arguments fail with one clear line.

use std::process::Command;

fn multiarc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(args)
        .output()
        .expect("running multiarc")
}

#[test]
fn async_hit_json_has_every_row_and_the_target() {
    let out = multiarc(&[
        "bench",
        "--workload",
        "async-hit",
        "--block-size",
        "4KiB,64KiB",
        "--seconds",
        "0.002",
        "--repeat",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    let results = doc["results"].as_array().expect("results");
    let rows = [
        "sync-get",
        "async-poll",
        "async-block-on",
        "store-get-range",
    ];
    assert_eq!(results.len(), rows.len() * 2, "{doc}");
    for block_size in [4096u64, 65536] {
        for row in rows {
            let r = results
                .iter()
                .find(|r| r["row"] == row && r["block_size"] == block_size)
                .unwrap_or_else(|| panic!("no {row} row at {block_size}: {doc}"));
            let ns = r["ns_per_op"].as_f64().expect("ns_per_op");
            assert!(ns > 0.0 && ns.is_finite(), "{r}");
            let ratio = r["ratio_to_sync"].as_f64().expect("ratio_to_sync");
            assert!(ratio > 0.0 && ratio.is_finite(), "{r}");
            assert_eq!(r["samples_ns"].as_array().expect("samples").len(), 3);
            if row == "sync-get" {
                assert_eq!(ratio, 1.0);
            }
        }
    }
    let target = doc["target"].as_array().expect("target");
    assert_eq!(target.len(), 2, "{doc}");
    for t in target {
        let ratio = t["async_ratio"].as_f64().expect("async_ratio");
        assert_eq!(t["met"].as_bool(), Some(ratio <= 1.5), "{t}");
    }
    assert!(doc["machine"]["cpus"].as_u64().is_some_and(|n| n > 0));
}

#[test]
fn async_hit_refuses_a_bad_block_size_in_one_line() {
    let out = multiarc(&["bench", "async-hit", "--block-size", "1KiB"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--block-size"), "{err}");
    assert!(out.stdout.is_empty());
}
