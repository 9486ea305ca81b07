//! Inputs an adversarial user tries: huge counts and sizes, zero
//! sizes, FIFOs, directories, binary and corrupt files, a closed stdout.
//! Each must end in one clear error line (exit 1 or 2) or a quiet exit,
//! never a panic (exit 101) or a hang. Every run here is bounded: a command
//! that does not finish in [`HANG`] is killed and the test fails.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Far longer than any of these runs takes: only a hang reaches it.
const HANG: Duration = Duration::from_secs(300);

/// Runs `multiarc args` with stdout `stdout` (a pipe read here when
/// `None`), killing it and failing if it runs past [`HANG`].
fn run_with(args: &[&str], stdout: Option<Stdio>) -> Output {
    let capture = stdout.is_none();
    let mut child = Command::new(env!("CARGO_BIN_EXE_multiarc"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout.unwrap_or(Stdio::piped()))
        .stderr(Stdio::piped())
        .spawn()
        .expect("running multiarc");
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .filter(|_| capture)
            .map(|s| Box::new(s) as _),
    );
    let err = reader(child.stderr.take().map(|s| Box::new(s) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for multiarc") {
            break status;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("multiarc {args:?} hung: killed after {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn run(args: &[&str]) -> Output {
    run_with(args, None)
}

/// Asserts a clear failure: exit 1 or 2, no panic, exactly one
/// `multiarc: error` line (progress lines may precede it), containing
/// every needle; returns the line.
fn fails(args: &[&str], needles: &[&str]) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{args:?}: exit {:?}, wanted 1 or 2: {err}",
        out.status
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("multiarc: error") || l.starts_with("multiarc: "))
        .collect();
    assert_eq!(errors.len(), 1, "{args:?}: {err}");
    for needle in needles {
        assert!(
            errors[0].contains(needle),
            "{args:?}: no {needle:?} in {err}"
        );
    }
    errors[0].to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

/// A fresh directory for this test.
fn temp_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("multiarc-hardening-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// A size past this machine's memory (twice MemTotal, in whole TiB), or
/// `None` where /proc/meminfo cannot be read (the checks then pass all).
fn more_than_memory() -> Option<String> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(format!("{}TiB", ((2 * kib * 1024) >> 40) + 1))
}

#[test]
fn replay_refuses_huge_request_counts_with_the_file_and_line() {
    let dir = temp_dir("huge-counts");
    let lis = write(&dir, "t.lis", b"5 2 0 1\n0 18446744073709551615 0 2\n");
    fails(
        &["replay", &lis, "--policy", "lru", "--capacity", "1"],
        &[&lis, "line 2", "18446744073709551615", "1048576 blocks"],
    );
    let csv = write(
        &dir,
        "t.csv",
        b"version,time,op,size,lbn\n1,0,2a,512,0\n1,0,2a,512,8\n1,0,2a,18446744073709551615,0\n",
    );
    fails(
        &["replay", &csv, "--policy", "lru", "--capacity", "1"],
        &[&csv, "line 4", "1048576 blocks"],
    );
    // Ids past u64::MAX.
    let wrap = write(&dir, "w.lis", b"18446744073709551615 2 0 1\n");
    fails(&["replay", &wrap, "--capacity", "1"], &[&wrap, "line 1"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_refuses_a_fifo_without_hanging() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("trace.fifo");
    match Command::new("mkfifo").arg(&fifo).status() {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("SKIP: mkfifo failed or is missing ({other:?})");
            return;
        }
    }
    // A writer, as `replay <(zcat trace)` would have: its open blocks until
    // a reader opens the FIFO.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) {
                let _ = f.write_all(b"1\n2\n1\n3\n1\n");
            }
        })
    };
    let path = fifo.to_str().unwrap();
    for policies in ["lru", "opt,lru"] {
        fails(
            &["replay", path, "--policy", policies, "--capacity", "2"],
            &[path, "FIFO", "regular file"],
        );
    }
    // replay never opened it: open the read end (without blocking) so that
    // the writer's open returns, and keep it open until the writer is done.
    use std::os::unix::fs::OpenOptionsExt;
    let unblock = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    writer.join().unwrap();
    drop(unblock);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_names_the_file_for_garbage_directories_and_corrupt_zstd() {
    let dir = temp_dir("garbage");
    // Invalid UTF-8 on line 2 is reported on line 2 (it said line 1).
    let utf8 = write(&dir, "u.ids", b"1\n\xff\xfe\n3\n");
    fails(&["replay", &utf8], &[&utf8, "line 2", "UTF-8"]);
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80)
        .collect();
    let bin = write(&dir, "garbage.bin", &garbage);
    fails(&["replay", &bin], &[&bin, "line 1"]);
    // A long binary "line" without newlines is refused, not read whole.
    let long = write(&dir, "long.ids", &vec![b'7'; 1 << 20]);
    fails(&["replay", &long], &[&long, "line 1", "longer than"]);
    let d = dir.to_str().unwrap();
    fails(&["replay", d], &[d, "directory"]);
    let zst = write(&dir, "bad.lis.zst", &garbage);
    fails(&["replay", &zst], &[&zst, "line 1", "zstd"]);
    // A valid zstd stream cut short.
    let text: String = (0..2000).map(|i| format!("{i} 1 0 {i}\n")).collect();
    let full = zstd::encode_all(text.as_bytes(), 3).unwrap();
    let cut = write(&dir, "cut.lis.zst", &full[..full.len() / 2]);
    fails(&["replay", &cut, "--capacity", "10"], &[&cut, "zstd"]);
    let empty = write(&dir, "empty.ids", b"");
    fails(&["replay", &empty], &[&empty, "empty"]);
    fails(
        &["replay", "/nonexistent/trace"],
        &["/nonexistent/trace", "No such file"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_block_size_zero_is_an_error() {
    let dir = temp_dir("block-size-0");
    let ids = write(&dir, "t.ids", b"1\n2\n1\n");
    fails(
        &["replay", &ids, "--block-size", "0", "--policy", "lru"],
        &["--block-size"],
    );
    let csv = write(&dir, "t.csv", b"version,time,op,size,lbn\n1,0,2a,512,0\n");
    fails(
        &["replay", &csv, "--block-size", "0", "--capacity", "1MiB"],
        &["--block-size"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_huge_capacities_are_bounded_not_aborts() {
    let dir = temp_dir("capacity");
    // A loop of 50 blocks, 10 times: with room for all, 450 hits of 500.
    let text: String = (0..500).map(|i| format!("{}\n", i % 50)).collect();
    let ids = write(&dir, "loop.ids", text.as_bytes());
    // The peers only where they are built (the `peers` feature).
    let (all, count) = if cfg!(feature = "peers") {
        ("multiarc,multiarc-eager,arc,car,lru,opt,moka,quick_cache,foyer,tinyufo,concread-arc,mutex-lru", 12)
    } else {
        ("multiarc,multiarc-eager,arc,car,lru,opt", 6)
    };
    for capacity in ["18446744073709551615", "1000000000000", "1TiB"] {
        let doc = json(&[
            "replay",
            &ids,
            "--format",
            "ids",
            "--policy",
            all,
            "--capacity",
            capacity,
            "--json",
        ]);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), count, "{doc}");
        for r in results {
            assert_eq!(r["hits"], 450, "{capacity}: {r}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn poison_validates_its_arguments() {
    // Objects smaller than one read (256 KiB): was a remainder by zero.
    let doc = json(&[
        "poison",
        "--max-bytes",
        "128KiB",
        "--a-bytes",
        "200KiB",
        "--b-bytes",
        "200KiB",
        "--reads",
        "2000",
        "--block-size",
        "64KiB",
        "--json",
    ]);
    assert_eq!(doc["phases"].as_array().unwrap().len(), 4, "{doc}");
    // Tiny objects: A of 3 bytes.
    json(&[
        "poison",
        "--max-bytes",
        "2",
        "--a-bytes",
        "3",
        "--b-bytes",
        "3",
        "--block-size",
        "1",
        "--reads",
        "100",
        "--json",
    ]);
    fails(&["poison", "--block-size", "0"], &["--block-size"]);
    fails(
        &[
            "poison",
            "--max-bytes",
            "1KiB",
            "--block-size",
            "18446744073709551615",
        ],
        &["--max-bytes", "--block-size"],
    );
    fails(&["poison", "--reads", "0"], &["--reads"]);
    fails(&["poison", "--hit-mode", "sideways"], &["hit mode"]);
    if let Some(huge) = more_than_memory() {
        for a in [
            vec![],
            vec!["--a-bytes", "20000TiB", "--b-bytes", "20000TiB"],
        ] {
            let mut args = vec!["poison", "--max-bytes", &huge];
            args.extend(a);
            fails(&args, &["--max-bytes", "memory", "available"]);
        }
    }
}

#[test]
fn scan_validates_its_arguments() {
    if let Some(huge) = more_than_memory() {
        fails(
            &["scan", "--cache-bytes", &huge],
            &["--cache-bytes", "memory", "available"],
        );
    }
    fails(
        &[
            "scan",
            "--cache-bytes",
            "4MiB",
            "--scan-multiple",
            "18446744073709551615",
        ],
        &["--scan-multiple"],
    );
    fails(&["scan", "--block-size", "0"], &["--block-size"]);
    fails(&["scan", "--cache-bytes", "0"], &["at least 4 blocks"]);
    fails(&["scan", "--scan-multiple", "0"], &["at least one cache"]);
    fails(&["scan", "--hot-fraction", "NaN"], &["--hot-fraction"]);
    fails(&["scan", "--hot-fraction", "1"], &["--hot-fraction"]);
    fails(&["scan", "--policy", "opt"], &["opt"]);
}

#[test]
fn bench_seconds_and_sizes_are_bounded() {
    for workload in ["cache", "randrw", "randread", "rangelock"] {
        for seconds in ["1e20", "inf", "NaN", "-1", "0", "86401"] {
            fails(
                &[
                    "bench",
                    "--workload",
                    workload,
                    &format!("--seconds={seconds}"),
                ],
                &["--seconds", "86400"],
            );
        }
    }
    fails(&["lockbench", "--seconds", "1e20"], &["--seconds", "86400"]);
    fails(&["bench", "--threads", "1,5000"], &["--threads", "4096"]);
    fails(&["lockbench", "--threads", "5000"], &["--threads", "4096"]);
    if let Some(huge) = more_than_memory() {
        for workload in ["randread", "randrw", "cache"] {
            fails(
                &[
                    "bench",
                    "--workload",
                    workload,
                    "--file-bytes",
                    &huge,
                    "--seconds",
                    "0.01",
                ],
                &["--file-bytes", "memory"],
            );
        }
    }
}

/// `multiarc ... | head -0`: stdout is a pipe nobody reads. The command
/// must exit quietly (141, as a shell reports `ls` killed by SIGPIPE), not
/// panic with "failed printing to stdout".
#[test]
fn a_closed_stdout_exits_quietly() {
    let dir = temp_dir("closed-stdout");
    let ids = write(&dir, "t.ids", b"1\n2\n1\n3\n1\n");
    // What `multiarc stats` reads: a fake mount's statistics file.
    std::fs::create_dir_all(dir.join("mnt/.multiarc")).unwrap();
    std::fs::write(dir.join("mnt/.multiarc/arcstats"), "hits 1\nmisses 2\n").unwrap();
    let mnt = dir.join("mnt");
    let mnt = mnt.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["replay", &ids, "--policy", "lru,opt", "--capacity", "2"],
        vec![
            "replay",
            &ids,
            "--policy",
            "lru",
            "--capacity",
            "2",
            "--json",
        ],
        vec!["stats", mnt],
        vec!["stats", mnt, "--json"],
        vec!["scan", "--cache-bytes", "64KiB", "--policy", "lru"],
        vec![
            "poison",
            "--max-bytes",
            "1MiB",
            "--a-bytes",
            "2MiB",
            "--b-bytes",
            "2MiB",
            "--reads",
            "100",
        ],
        vec![
            "bench",
            "--file-bytes",
            "64KiB",
            "--seconds",
            "0.01",
            "--threads",
            "1",
            "--caches",
            "multiarc",
        ],
        vec![
            "bench",
            "--workload",
            "rangelock",
            "--seconds",
            "0.01",
            "--threads",
            "1",
        ],
        vec![
            "lockbench",
            "--seconds",
            "0.01",
            "--threads",
            "1",
            "--locks",
            "std",
        ],
    ];
    for args in commands {
        // The read end is closed before the child starts: its first write
        // fails with EPIPE, whenever it comes.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = run_with(&args, Some(Stdio::from(writer)));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("multiarc: error"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
    }
    // Any other write error is an error, naming stdout.
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let out = run_with(
            &["replay", &ids, "--policy", "lru", "--capacity", "2"],
            Some(Stdio::from(full)),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("multiarc: error: writing to stdout"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The ARC paper's OLTP trace still replays within the trace limits (its
/// requests are far below 2^20 blocks), where it is present.
#[test]
fn the_shared_oltp_trace_is_within_the_limits() {
    let trace =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/arc/OLTP.lis.zst");
    if !trace.exists() {
        eprintln!("SKIP: {} not found", trace.display());
        return;
    }
    let doc = json(&[
        "replay",
        trace.to_str().unwrap(),
        "--policy",
        "lru",
        "--capacity",
        "1000",
        "--json",
    ]);
    assert_eq!(doc["requests"], 914_145, "{doc}");
    assert_eq!(doc["distinct"], 186_880, "{doc}");
}

/// A bench thread that cannot be started (here: too little address space
/// for 2000 thread stacks) ends the run with one clear line; the threads
/// already started used to wait at a barrier forever.
#[test]
fn bench_threads_that_cannot_start_end_the_run_clearly() {
    let script = format!(
        "ulimit -v 1200000 && exec {} bench --threads 2000 --file-bytes 64KiB --seconds 0.2 \
         --caches multiarc --repeat 1 --modes hold",
        env!("CARGO_BIN_EXE_multiarc")
    );
    // std allocates each new thread's signal stack (a few KiB) in the thread
    // itself and aborts the process if that fails, which no program can
    // catch: if the address space runs out exactly there rather than at a
    // thread's stack, the run aborts. That is std's, about one run in a
    // hundred under this limit, so such a run is tried again (at most 5).
    let mut tries = 0;
    let out = loop {
        let out = Command::new("timeout")
            .args([
                "-s",
                "KILL",
                &HANG.as_secs().to_string(),
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("running sh");
        let err = String::from_utf8_lossy(&out.stderr);
        tries += 1;
        if tries < 5 && err.contains("failed to allocate an alternative stack") {
            continue;
        }
        break out;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(137), "bench hung: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("could not start bench thread"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
