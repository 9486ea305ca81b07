//! `multiarc mount s3://bucket` attacked the way query engines and
//! operators use it, on a three-node Garage cluster (replication 3) on
//! loopback:
//!
//! - `ls -lR` of the whole bucket;
//! - eight threads reading one descriptor, each through its own part;
//! - a reader killed mid-read;
//! - a Garage node killed mid-read (the others serve every object), then
//!   the node the mount talks to: reads fail with EIO within the client's
//!   retry time, never hang, and the error is not cached;
//! - a DuckDB query cancelled halfway (Parquet on the mount; one node);
//! - the daemon stopped (SIGTERM) while readers run, and a new mount over
//!   the same L2 at once;
//! - an L2 larger than its filesystem's free space (refused at mount with
//!   one line), and an L2 on a filesystem that is full.
//!
//! Needs garage and, for the DuckDB query, DuckDB in target/scale-venv
//! (`.ci/run` installs both; skipped where absent unless CI is set),
//! /dev/fuse and fusermount3 (skipped where absent unless
//! MULTIARC_REQUIRE_FUSE=1). Only with the `bucket` feature (a default one).

#![cfg(feature = "bucket")]

#[path = "../../multiarc-object-store/tests/garage_common/mod.rs"]
mod garage_common;
mod mount_support;

use garage_common::{start_garage, S3Target};
use mount_support::{arcstat, have_fuse, is_mounted, unmount_and_reap, wait_until_ready};
use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt, PutPayload};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_multiarc");

/// Bytes of object `seed` at `offset..offset + len`: every 8 bytes name
/// the object and their offset, so a wrong or misplaced read shows.
fn bytes(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 16);
    let mut word = offset / 8;
    while out.len() < len + (offset % 8) as usize {
        out.extend_from_slice(&(seed << 40 | word).to_le_bytes());
        word += 1;
    }
    out.drain(..(offset % 8) as usize);
    out.truncate(len);
    out
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn put_all(target: &S3Target, objects: &[(String, Vec<u8>)]) {
    let client = target.client();
    rt().block_on(async {
        for (key, data) in objects {
            client
                .put(
                    &StorePath::from(key.as_str()),
                    PutPayload::from(data.clone()),
                )
                .await
                .unwrap_or_else(|e| panic!("put {key}: {e}"));
        }
    });
}

/// `multiarc mount s3://BUCKET MNT --foreground` through one node.
struct Mount {
    mnt: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Mount {
    fn start(target: &S3Target, mnt: &Path, log: &Path, extra: &[&str]) -> Mount {
        let child = Mount::command(target, mnt, log, extra)
            .spawn()
            .expect("starting multiarc mount");
        let mut m = Mount {
            mnt: mnt.to_path_buf(),
            log: log.to_path_buf(),
            child: Some(child),
        };
        wait_until_ready(&m.mnt, m.child.as_mut().unwrap(), &m.log);
        m
    }

    fn command(target: &S3Target, mnt: &Path, log: &Path, extra: &[&str]) -> Command {
        fs::create_dir_all(mnt).unwrap();
        let mut c = Command::new(BIN);
        c.arg("mount")
            .arg(format!("s3://{}", target.bucket))
            .arg(mnt)
            .args(["--endpoint", &target.endpoint, "--region", &target.region])
            .args(["--foreground", "--read-only", "--metadata-ttl", "60s"])
            .args(["--max-bytes", "32MiB", "--threads", "8"])
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", &target.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &target.secret_access_key)
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_REGION")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .unwrap(),
            );
        c
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    fn stat(&self, name: &str) -> u64 {
        arcstat(&self.mnt, name)
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn unmount(&mut self) {
        if let Some(mut child) = self.child.take() {
            unmount_and_reap(&self.mnt, &mut child, Duration::from_secs(20));
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Reads `path` whole and checks it is object `seed` of `len` bytes.
fn check_whole(path: &Path, seed: u64, len: usize) {
    let got = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert_eq!(got.len(), len, "{}", path.display());
    assert!(
        got == bytes(seed, 0, len),
        "{}: wrong bytes",
        path.display()
    );
}

const BIG: usize = 16 << 20;

#[test]
fn the_bucket_mount_under_a_query_engines_and_an_operators_attacks() {
    let test = "the_bucket_mount_under_a_query_engines_and_an_operators_attacks";
    if !have_fuse(test) {
        return;
    }
    let Some(mut garage) = start_garage(3) else {
        return;
    };
    let target = S3Target::of(&garage, 0);
    // A tree of small objects, and large ones.
    let mut objects = Vec::new();
    for a in 0..3 {
        for b in 0..10 {
            for c in 0..10 {
                let seed = 1000 + a * 100 + b * 10 + c;
                let len = (seed as usize * 37) % 5000;
                objects.push((format!("tree/a{a}/b{b}/o{c}"), bytes(seed, 0, len)));
            }
        }
    }
    for i in 0..4u64 {
        objects.push((format!("big/o{i}"), bytes(i, 0, BIG)));
    }
    put_all(&target, &objects);
    let dir = tempfile::Builder::new()
        .prefix("multiarc-attacks-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let l2 = dir.path().join("cache.l2");
    let l2_opts = ["--l2", l2.to_str().unwrap(), "--l2-bytes", "128MiB"];
    let log = dir.path().join("mount.log");
    let mnt = dir.path().join("mnt");
    let mut m = Mount::start(&target, &mnt, &log, &l2_opts);

    // ls -lR of the whole bucket: every object, with its size.
    let out = Command::new("ls")
        .arg("-lR")
        .arg(&mnt)
        .output()
        .expect("ls -lR");
    assert!(out.status.success(), "ls -lR: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let files = text.lines().filter(|l| l.starts_with('-')).count();
    assert_eq!(files, 300 + 4, "{text}");
    for (key, data) in objects.iter().step_by(7) {
        let meta = fs::metadata(m.path(key)).unwrap();
        assert_eq!(meta.len(), data.len() as u64, "{key}");
    }
    let listings = m.stat("bucket_listings");
    let again = Command::new("ls").arg("-lR").arg(&mnt).output().unwrap();
    assert!(again.stdout == out.stdout, "a second ls -lR differs");
    assert_eq!(
        m.stat("bucket_listings"),
        listings,
        "a second ls -lR within the metadata TTL lists nothing anew"
    );

    // Eight threads on one descriptor, each reading its part in order:
    // each part is a run of its own, prefetched, and every byte comes
    // about once from the store.
    let before = (m.stat("store_requests"), m.stat("store_bytes"));
    let file = Arc::new(File::open(m.path("big/o0")).unwrap());
    let part = BIG / 8;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let file = Arc::clone(&file);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 128 << 10];
                let mut off = t * part;
                while off < (t + 1) * part {
                    let n = file.read_at(&mut buf, off as u64).unwrap();
                    assert!(n > 0, "end of file at {off}");
                    assert!(buf[..n] == bytes(0, off as u64, n), "thread {t} at {off}");
                    off += n;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(file);
    let (requests, fetched) = (
        m.stat("store_requests") - before.0,
        m.stat("store_bytes") - before.1,
    );
    assert!(
        fetched <= BIG as u64 * 5 / 4,
        "{fetched} bytes from the store for a file of {BIG}"
    );
    // One GET per 128 KiB read would be 128.
    eprintln!("8 threads on one descriptor: {requests} requests, {fetched} bytes");
    assert!(requests <= 64, "{requests} requests for 8 runs of 2 MiB");

    // A reader killed mid-read: its handle goes, the mount serves on.
    let mut cat = Command::new("cat")
        .arg(m.path("big/o1"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    cat.kill().unwrap();
    cat.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.stat("bucket_open_handles") > 0 {
        assert!(
            Instant::now() < deadline,
            "a killed reader's handle stays open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    check_whole(&m.path("big/o1"), 1, BIG);

    // A Garage node killed mid-read (not the one the mount talks to):
    // the read goes on, every byte right.
    let reading = {
        let path = m.path("big/o2");
        std::thread::spawn(move || check_whole(&path, 2, BIG))
    };
    std::thread::sleep(Duration::from_millis(100));
    garage.kill_node(1);
    reading.join().expect("a read while a node died");
    garage.restart_node(1).unwrap();
    // The node the mount talks to: an uncached read fails with EIO, in
    // the client's retry time (10 s) plus a little, and is not cached.
    garage.kill_node(0);
    let started = Instant::now();
    let err = fs::read(m.path("big/o3")).expect_err("a read while the endpoint is down");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    eprintln!(
        "with the endpoint down: {err} after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the failing read took {:?}",
        started.elapsed()
    );
    // What is cached is served meanwhile.
    check_whole(&m.path("big/o0"), 0, BIG);
    garage.restart_node(0).unwrap();
    check_whole(&m.path("big/o3"), 3, BIG);
    assert!(m.stat("bucket_store_errors") >= 1);

    // The daemon stopped (SIGTERM, as systemd stops it) while readers
    // run: each read is right or fails, none hangs, and a new mount over
    // the same L2 starts at once and serves from it.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4u64)
        .map(|i| {
            let (stop, reads) = (Arc::clone(&stop), Arc::clone(&reads));
            let path = m.path(&format!("big/o{i}"));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                let mut off = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(f) = File::open(&path) else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    match f.read_at(&mut buf, off) {
                        Ok(n) => {
                            assert!(buf[..n] == bytes(i, off, n), "o{i} at {off}");
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                    off = (off + 3 * (64 << 10) + 4096) % (BIG as u64 - (64 << 10));
                }
            })
        })
        .collect();
    while reads.load(Ordering::Relaxed) < 50 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = m.pid();
    let stopped = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let mut child = m.child.take().unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(
            stopped.elapsed() < Duration::from_secs(20),
            "the daemon did not stop within 20 s of SIGTERM: {}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!is_mounted(&mnt), "unmounted at the daemon's exit");
    let mut m = Mount::start(&target, &mnt, &log, &l2_opts);
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.stat("l2_size") == 0 {
        assert!(Instant::now() < deadline, "the L2 did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
    let served = reads.load(Ordering::Relaxed);
    while reads.load(Ordering::Relaxed) < served + 50 {
        assert!(
            Instant::now() < deadline + Duration::from_secs(20),
            "readers read nothing through the new mount"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    eprintln!(
        "SIGTERM under readers: stopped in {:?}, {} reads in all",
        stopped.elapsed(),
        reads.load(Ordering::Relaxed)
    );
    for r in readers {
        r.join().expect("a reader across the restart");
    }
    assert!(
        m.stat("l2_hits") > 0,
        "the new mount read nothing from the L2"
    );
    m.unmount();

    // An L2 larger than its filesystem's free space: refused at mount,
    // one line, nothing mounted.
    let full = dir.path().join("huge.l2");
    let free = free_bytes(dir.path());
    let huge = format!("{}B", free.saturating_mul(2).max(1 << 40));
    let out = Mount::command(
        &target,
        &mnt,
        &log,
        &["--l2", full.to_str().unwrap(), "--l2-bytes", &huge],
    )
    .stderr(Stdio::piped())
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("an L2 past the free space: {}", err.trim());
    assert!(
        err.trim().lines().count() == 1 && err.contains("l2"),
        "an L2 past the free space: {err}"
    );
    assert!(!is_mounted(&mnt));
    assert!(!full.exists(), "the refused L2 file is left behind");
}

/// Free bytes of the filesystem holding `dir` (for an unprivileged user).
fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(u64::MAX / 4)
}

/// DuckDB's side of the attack, in Python, as `scripts/scale-bench.sh` runs
/// it: `gen PATH` writes a Parquet table (row groups of 100,000 rows);
/// `query PATH` prints the query's answer; `cancel PATH` starts the query
/// on one thread, prints `started`, and on SIGUSR1 interrupts it (DuckDB's
/// `interrupt`, what Ctrl-C does in its shell), then prints `interrupted`,
/// or `finished` if the query had already ended.
const DUCKDB_SCRIPT: &str = r#"
import signal, sys, threading
import duckdb
mode, path = sys.argv[1], sys.argv[2]
query = f"SELECT count(*), sum(a), sum(b), min(c), max(c) FROM read_parquet('{path}')"
con = duckdb.connect()
con.execute("SET threads = 1")
if mode == "gen":
    con.execute(f"COPY (SELECT i AS a, i * 7 % 1000 AS b, md5(i::VARCHAR) AS c FROM range(2000000) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 100000)")
elif mode == "query":
    print(con.execute(query).fetchall(), flush=True)
elif mode == "cancel":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    outcome = {}
    def run():
        try:
            outcome["rows"] = con.execute(query).fetchall()
        except duckdb.InterruptException:
            outcome["interrupted"] = True
    worker = threading.Thread(target=run)
    worker.start()
    print("started", flush=True)
    signal.sigwait({signal.SIGUSR1})
    con.interrupt()
    worker.join()
    print("interrupted" if outcome.get("interrupted") else "finished", flush=True)
"#;

/// The Python with DuckDB that `.ci/run` makes (`target/scale-venv`, as
/// `scripts/scale-bench.sh` does), or `MULTIARC_PYTHON`; `None` (after
/// saying why) where it has no DuckDB, unless CI is set.
fn duckdb_python(test: &str) -> Option<PathBuf> {
    let python = std::env::var_os("MULTIARC_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/scale-venv/bin/python"),
        PathBuf::from,
    );
    let ok = Command::new(&python)
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "{test}: no DuckDB at {} (.ci/run makes target/scale-venv: python3 -m venv, pip install duckdb)",
        python.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// Runs the DuckDB script in `mode` on `path`, within 120 s: its stdout.
fn duckdb(python: &Path, script: &Path, mode: &str, path: &Path) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(python)
        .arg(script)
        .arg(mode)
        .arg(path)
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "duckdb {mode} {}: {}\n{}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Issue 39's "a query cancelled halfway", through the mount with a real
/// engine: DuckDB scans a Parquet table of about 70 MB on the mount (32 MiB
/// of memory and an L2), and is interrupted once its first blocks have come
/// from the store. Then the same query runs to its end with the answer
/// DuckDB gives on a local copy (no load left waiting on the cancelled
/// reads, nothing wrong cached), and once more warm, from memory and the L2
/// without a request to the store; the mount is still there.
#[test]
fn a_duckdb_query_cancelled_halfway_leaves_the_mount_serving_right_answers() {
    let test = "a_duckdb_query_cancelled_halfway_leaves_the_mount_serving_right_answers";
    if !have_fuse(test) {
        return;
    }
    let Some(python) = duckdb_python(test) else {
        return;
    };
    let Some(garage) = start_garage(1) else {
        return;
    };
    let target = S3Target::of(&garage, 0);
    let dir = tempfile::Builder::new()
        .prefix("multiarc-duckdb-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let script = dir.path().join("duckdb_attack.py");
    fs::write(&script, DUCKDB_SCRIPT).unwrap();
    let local = dir.path().join("t.parquet");
    duckdb(&python, &script, "gen", &local);
    let table = fs::read(&local).unwrap();
    assert!(table.len() > 48 << 20, "the table is {} bytes", table.len());
    put_all(&target, &[("tables/t.parquet".to_string(), table)]);
    let expected = duckdb(&python, &script, "query", &local);

    let l2 = dir.path().join("cache.l2");
    let l2_opts = ["--l2", l2.to_str().unwrap(), "--l2-bytes", "128MiB"];
    let m = Mount::start(
        &target,
        &dir.path().join("mnt"),
        &dir.path().join("mount.log"),
        &l2_opts,
    );
    let on_mount = m.path("tables/t.parquet");

    // Cancelled halfway.
    let before = m.stat("store_requests");
    let mut cancel = Command::new(&python)
        .arg(&script)
        .arg("cancel")
        .arg(&on_mount)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(cancel.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line.trim(), "started");
    let deadline = Instant::now() + Duration::from_secs(30);
    while m.stat("store_requests") < before + 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let kill = Command::new("kill")
        .args(["-USR1", &cancel.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    line.clear();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let status = cancel.wait().unwrap();
    let at_cancel = m.stat("store_requests") - before;
    assert!(status.success(), "the cancelled query's process: {status}");
    assert_eq!(
        line.trim(),
        "interrupted",
        "the query ended before it was cancelled ({at_cancel} store requests)"
    );

    // The same query to its end: the local answer.
    let again = duckdb(&python, &script, "query", &on_mount);
    assert_eq!(again, expected, "the query after the cancel");
    let all = m.stat("store_requests") - before;
    assert!(
        at_cancel >= 2 && all > at_cancel,
        "cancelled after {at_cancel} of {all} store requests: not halfway"
    );
    // Warm: the same answer, nothing from the store.
    let warm_from = m.stat("store_requests");
    assert_eq!(duckdb(&python, &script, "query", &on_mount), expected);
    assert_eq!(
        m.stat("store_requests"),
        warm_from,
        "the warm query sent requests to the store"
    );
    assert!(is_mounted(&m.mnt), "the mount is gone");
    assert!(!m.log_text().contains("panicked"), "{}", m.log_text());
    eprintln!("{test}: cancelled after {at_cancel} of {all} store requests");
}
