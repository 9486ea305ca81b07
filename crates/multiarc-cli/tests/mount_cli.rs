//! `multiarc mount` end to end: a temporary backing directory mounted with
//! FUSE on a temporary mountpoint, exercised by fio, the sqlite3 CLI and
//! plain reads and writes; the control files; errors.
//!
//! Needs /dev/fuse and fusermount3 (Debian: fuse3), fio and sqlite3. Where
//! one is missing the test prints a `SKIP:` line and returns, unless
//! MULTIARC_REQUIRE_FUSE=1, when it fails instead. Every mount is unmounted
//! by a guard, also when a test fails.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_multiarc");

fn multiarc(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("running multiarc")
}

fn in_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(name).is_file())
}

/// Whether the tools this test needs are here; prints a SKIP line if not.
fn have(test: &str, tools: &[&str]) -> bool {
    let mut missing: Vec<String> = Vec::new();
    if !Path::new("/dev/fuse").exists() {
        missing.push("/dev/fuse".into());
    }
    for t in ["fusermount3"].iter().chain(tools) {
        if !in_path(t) {
            missing.push((*t).into());
        }
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "SKIP: {test}: {} not available (install fuse3{})",
        missing.join(", "),
        if tools.is_empty() {
            String::new()
        } else {
            format!(", {}", tools.join(", "))
        }
    );
    if std::env::var_os("MULTIARC_REQUIRE_FUSE").is_some_and(|v| v == "1") {
        panic!("{msg} (MULTIARC_REQUIRE_FUSE=1)");
    }
    // Straight to stderr: libtest captures eprintln! of passing tests, and
    // a skip must show in CI logs.
    let _ = writeln!(std::io::stderr(), "{msg}");
    false
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory with `backing/` and `mnt/` in it, removed at drop.
struct Dirs {
    base: PathBuf,
}

impl Dirs {
    fn new(tag: &str) -> Dirs {
        let base = std::env::temp_dir().join(format!(
            "multiarc-mount-{tag}-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("backing")).unwrap();
        fs::create_dir_all(base.join("mnt")).unwrap();
        Dirs { base }
    }

    fn backing(&self) -> PathBuf {
        self.base.join("backing")
    }

    fn mnt(&self) -> PathBuf {
        self.base.join("mnt")
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        // Never recurse into a mountpoint that is still mounted.
        if !is_mounted(&self.mnt()) {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn is_mounted(mnt: &Path) -> bool {
    let Ok(canon) = mnt.canonicalize() else {
        return false;
    };
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(canon.to_str().unwrap()))
}

/// Runs `fusermount3 -u`, retrying while busy; lazily as a last resort.
fn fusermount_u(mnt: &Path) -> bool {
    for _ in 0..50 {
        if !is_mounted(mnt) {
            return true;
        }
        let ok = Command::new("fusermount3")
            .arg("-u")
            .arg(mnt)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("fusermount3").arg("-uz").arg(mnt).status();
    false
}

/// A `multiarc mount --foreground` child; unmounted (and reaped) at drop.
struct Mount {
    mnt: PathBuf,
    child: Option<Child>,
    log: PathBuf,
}

impl Mount {
    fn start(dirs: &Dirs, extra: &[&str]) -> Mount {
        let log = dirs.base.join(format!(
            "mount-{}.log",
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let child = Command::new(BIN)
            .arg("mount")
            .arg(dirs.backing())
            .arg(dirs.mnt())
            .arg("--foreground")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("starting multiarc mount");
        let mut m = Mount {
            mnt: dirs.mnt(),
            child: Some(child),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if m.mnt.join(".multiarc/arcstats").is_file() {
                return m;
            }
            if let Some(status) = m.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("multiarc mount exited with {status}: {}", m.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "the mount was not ready in 20 s: {}",
                m.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The mount's log file, for threads that report failures with it.
    fn log_path(&self) -> PathBuf {
        self.log.clone()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    /// Unmounts and waits for the mount process: when this returns, every
    /// dirty block has been written back (or the process reported why not).
    fn unmount(&mut self) -> ExitStatus {
        assert!(fusermount_u(&self.mnt), "could not unmount {:?}", self.mnt);
        let mut child = self.child.take().expect("mounted");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the mount process did not exit after unmount");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let text = fs::read_to_string(self.path(".multiarc/arcstats")).unwrap();
        text.lines()
            .map(|l| {
                let parsed = l
                    .split_once(' ')
                    .and_then(|(k, v)| Some((k.to_string(), v.parse().ok()?)));
                parsed.unwrap_or_else(|| panic!("bad arcstats line {l:?} in:\n{text}"))
            })
            .collect()
    }

    fn stat(&self, name: &str) -> u64 {
        self.stats()
            .into_iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("no {name} in arcstats"))
            .1
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            fusermount_u(&self.mnt);
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs fio with `args` (plus JSON output); asserts success and no job error.
fn fio(args: &[String]) -> serde_json::Value {
    let out = Command::new("fio")
        .args(args)
        .arg("--output-format=json")
        .output()
        .expect("running fio");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = &stdout[stdout.find('{').expect("fio printed JSON")..];
    let doc: serde_json::Value = serde_json::from_str(json).expect("fio JSON parses");
    for job in doc["jobs"].as_array().unwrap() {
        assert_eq!(job["error"], 0, "fio job error: {job}");
    }
    doc
}

fn fio_args(dir: &Path, list: &[&str]) -> Vec<String> {
    let mut v = vec![format!("--directory={}", dir.display())];
    v.extend(list.iter().map(|s| s.to_string()));
    v
}

#[test]
fn fio_random_reads_through_the_mount() {
    if !have("fio_random_reads_through_the_mount", &["fio"]) {
        return;
    }
    let dirs = Dirs::new("fio-read");
    let mut m = Mount::start(&dirs, &["--max-bytes", "64MiB"]);
    let t = Instant::now();
    let doc = fio(&fio_args(
        &m.mnt,
        &[
            "--name=r",
            "--rw=randread",
            "--bs=8k",
            "--ioengine=psync",
            "--numjobs=4",
            "--size=32m",
            "--time_based",
            "--runtime=5",
            "--group_reporting",
        ],
    ));
    let read = &doc["jobs"][0]["read"];
    let ios = read["total_ios"].as_u64().unwrap();
    eprintln!(
        "fio randread 8k x4 through the mount: {ios} reads, {:.0} IOPS, {:.1} MiB/s ({:.1} s with layout)",
        read["iops"].as_f64().unwrap(),
        read["bw"].as_f64().unwrap() / 1024.0,
        t.elapsed().as_secs_f64()
    );
    assert!(ios > 0, "fio read nothing");
    assert!(m.stat("hits") + m.stat("misses") > 0);
    assert!(m.unmount().success(), "{}", m.log_text());
}

#[test]
fn fio_writes_verify_and_survive_a_remount() {
    if !have("fio_writes_verify_and_survive_a_remount", &["fio"]) {
        return;
    }
    let dirs = Dirs::new("fio-verify");
    let job = [
        "--name=w",
        "--rw=randwrite",
        "--bs=8k",
        "--ioengine=psync",
        "--numjobs=2",
        "--size=16m",
        "--verify=crc32c",
        // No state file in the working directory (the crate's, under cargo test).
        "--verify_state_save=0",
        "--group_reporting",
    ];
    let mut m = Mount::start(&dirs, &["--max-bytes", "16MiB"]);
    let mut args = fio_args(&m.mnt, &job);
    args.push("--do_verify=1".into());
    fio(&args);
    assert!(m.unmount().success(), "{}", m.log_text());
    // A fresh mount (cold cache): every block comes from the backing files.
    let mut m = Mount::start(&dirs, &["--max-bytes", "16MiB"]);
    let mut args = fio_args(&m.mnt, &job);
    args.push("--verify_only".into());
    fio(&args);
    assert!(m.stat("misses") > 0);
    assert!(m.unmount().success(), "{}", m.log_text());
}

fn sqlite(db: &Path, sql: &str) -> String {
    let mut child = Command::new("sqlite3")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running sqlite3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sqlite_survives_thousands_of_transactions() {
    if !have("sqlite_survives_thousands_of_transactions", &["sqlite3"]) {
        return;
    }
    const ROWS: usize = 3000;
    let dirs = Dirs::new("sqlite");
    let mut m = Mount::start(&dirs, &["--max-bytes", "32MiB"]);
    let mut script = String::from("CREATE TABLE t(i INTEGER PRIMARY KEY, v TEXT);\n");
    for i in 0..ROWS {
        script.push_str(&format!(
            "BEGIN; INSERT INTO t(v) VALUES('row {i} ' || hex(randomblob(100))); COMMIT;\n"
        ));
    }
    let t = Instant::now();
    sqlite(&m.path("db.sqlite"), &script);
    eprintln!(
        "sqlite: {ROWS} transactions through the mount in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let check = "PRAGMA integrity_check; SELECT count(*) FROM t;";
    assert_eq!(sqlite(&m.path("db.sqlite"), check), format!("ok\n{ROWS}\n"));
    assert!(m.stat("flushed_blocks") > 0);
    assert!(m.unmount().success(), "{}", m.log_text());
    // The backing file alone holds the whole database.
    assert_eq!(
        sqlite(&dirs.backing().join("db.sqlite"), check),
        format!("ok\n{ROWS}\n")
    );
}

/// `MemTotal` in bytes.
fn mem_total_bytes() -> u64 {
    let text = fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal in /proc/meminfo");
    kib * 1024
}

#[test]
fn sizes_past_the_machine_memory_are_clamped_or_refused() {
    if !have("sizes_past_the_machine_memory_are_clamped_or_refused", &[]) {
        return;
    }
    let dirs = Dirs::new("huge-sizes");
    // The dirty budget is memory the mount may fill: refused.
    let (b, mnt) = (dirs.backing(), dirs.mnt());
    let out = multiarc(&[
        "mount",
        b.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--dirty-max",
        "20000TiB",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "--dirty-max 20000TiB was accepted");
    assert!(
        err.contains("--dirty-max") && err.contains("memory"),
        "{err}"
    );
    // The cache's target is a bound: clamped to MemTotal, with a warning.
    let mut m = Mount::start(&dirs, &["--max-bytes", "20000TiB"]);
    assert_eq!(m.stat("c"), mem_total_bytes());
    assert!(m.unmount().success(), "{}", m.log_text());
}

#[test]
fn max_bytes_tunable_resizes_the_cache() {
    if !have("max_bytes_tunable_resizes_the_cache", &[]) {
        return;
    }
    let dirs = Dirs::new("tunable");
    let mut m = Mount::start(&dirs, &["--max-bytes", "64MiB"]);
    assert_eq!(m.stat("c"), 64 << 20);
    // Fill the cache: write 24 MiB, sync it (so it is clean, cached), read it.
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i % 251) as u8).collect();
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.path("data"))
        .unwrap();
    f.write_all_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    let mut back = vec![0u8; data.len()];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data, "data read back differs");
    assert!(m.stat("size") >= 16 << 20, "cache holds {}", m.stat("size"));

    // The control file: read, write, refuse nonsense.
    let tunable = m.path(".multiarc/tunables/max_bytes");
    assert_eq!(
        fs::read_to_string(&tunable).unwrap(),
        format!("{}\n", 64 << 20)
    );
    fs::write(&tunable, "8MiB\n").unwrap();
    assert_eq!(m.stat("c"), 8 << 20);
    let bad = fs::write(&tunable, "lots\n").unwrap_err();
    assert_eq!(bad.raw_os_error(), Some(libc_einval()));
    assert_eq!(m.stat("c"), 8 << 20);
    // A target past the machine's memory is clamped to it (and logged).
    let mem_total = mem_total_bytes();
    fs::write(&tunable, format!("{}\n", u64::MAX)).unwrap();
    assert_eq!(m.stat("c"), mem_total, "2^64-1 was not clamped to MemTotal");
    fs::write(&tunable, "8MiB\n").unwrap();
    assert_eq!(m.stat("c"), 8 << 20);

    // `multiarc set` and `multiarc stats`.
    let mnt = m.mnt.to_str().unwrap().to_string();
    let out = multiarc(&["set", &mnt, "max_bytes=4MiB"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "max_bytes=4194304"
    );
    let out = multiarc(&["stats", &mnt, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["c"], 4 << 20);
    assert!(doc["dirty_bytes"].is_u64() && doc["write_errors"] == 0);
    let out = multiarc(&["set", &mnt, "max_bytes=1KiB"]);
    assert!(!out.status.success());
    let out = multiarc(&["set", &mnt, "no_such=1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown tunable"));

    // The cache shrinks to the new target in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.stat("size") > 4 << 20 {
        assert!(
            Instant::now() < deadline,
            "cache still holds {} bytes over a 4 MiB target",
            m.stat("size")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And it still serves the data.
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data, "data read back after shrinking differs");

    // Lock statistics: off by default, on through the tunable (from zero),
    // reported as a table that names the cache's locks.
    let report = m.path(".multiarc/lockstat");
    assert!(fs::read_to_string(&report).unwrap().contains("off"));
    let out = multiarc(&["set", &mnt, "lockstat=1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    f.read_exact_at(&mut back, 0).unwrap();
    let table = fs::read_to_string(&report).unwrap();
    let acquisitions: u64 = table
        .split(" of ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no acquisition count in the report:\n{table}"));
    assert!(
        acquisitions > 0,
        "reads through the mount took no traced lock:\n{table}"
    );
    assert!(!multiarc(&["set", &mnt, "lockstat=yes"]).status.success());
    fs::write(m.path(".multiarc/tunables/lockstat"), "0\n").unwrap();
    drop(f);
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// `r`'s value, or a panic naming `what` failed and showing the mount's log
/// (where the daemon says why it answered with an error).
fn ok<T>(r: std::io::Result<T>, what: &str, log: &Path) -> T {
    r.unwrap_or_else(|e| {
        panic!(
            "{what}: {e}\nmount log:\n{}",
            fs::read_to_string(log).unwrap_or_default()
        )
    })
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn concurrent_readers_see_no_torn_records_in_range_mode() {
    if !have("concurrent_readers_see_no_torn_records_in_range_mode", &[]) {
        return;
    }
    const RECORD: usize = 64 << 10;
    const RECORDS: u64 = 16;
    let dirs = Dirs::new("torn");
    // 512-byte blocks: a record spans 128 of them, so a read that is not
    // excluded from an overlapping write has a wide window to tear in (with
    // `--locking torn` this test sees torn records within the 3 s).
    let mut m = Mount::start(
        &dirs,
        &[
            "--locking",
            "range",
            "--threads",
            "4",
            "--block-size",
            "512",
        ],
    );
    let path = m.path("records");
    let log = m.log_path();
    {
        let f = ok(File::create(&path), "create", &log);
        ok(
            f.write_all_at(&vec![0u8; RECORD * RECORDS as usize], 0),
            "first write",
            &log,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let generation = Arc::new(AtomicU64::new(1));
    let reads = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let (stop, generation, path, log) = (
            Arc::clone(&stop),
            Arc::clone(&generation),
            path.clone(),
            log.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let f = ok(File::options().write(true).open(&path), "open", &log);
            let mut buf = vec![0u8; RECORD];
            let mut r = w;
            while !stop.load(Ordering::Relaxed) {
                let g = generation.fetch_add(1, Ordering::Relaxed);
                for chunk in buf.chunks_mut(8) {
                    chunk.copy_from_slice(&g.to_le_bytes());
                }
                r = (r * 7 + 3) % RECORDS;
                ok(f.write_all_at(&buf, r * RECORD as u64), "write", &log);
            }
        }));
    }
    let torn = Arc::new(AtomicU64::new(0));
    for rd in 0..2u64 {
        let (stop, reads, torn, path, log) = (
            Arc::clone(&stop),
            Arc::clone(&reads),
            Arc::clone(&torn),
            path.clone(),
            log.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let f = ok(File::open(&path), "open", &log);
            let mut buf = vec![0u8; RECORD];
            let mut r = rd;
            while !stop.load(Ordering::Relaxed) {
                r = (r * 5 + 1) % RECORDS;
                ok(f.read_exact_at(&mut buf, r * RECORD as u64), "read", &log);
                let first = &buf[..8];
                if buf.chunks(8).any(|c| c != first) {
                    torn.fetch_add(1, Ordering::Relaxed);
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let (reads, torn) = (reads.load(Ordering::Relaxed), torn.load(Ordering::Relaxed));
    eprintln!(
        "torn-read check: {reads} reads, {} writes, {torn} torn",
        generation.load(Ordering::Relaxed) - 1
    );
    assert!(reads > 0);
    assert_eq!(torn, 0, "{torn} of {reads} reads saw a torn record");
    assert!(m.unmount().success(), "{}", m.log_text());
}

#[test]
fn daemon_mode_returns_when_ready_and_unmount_writes_back() {
    if !have(
        "daemon_mode_returns_when_ready_and_unmount_writes_back",
        &[],
    ) {
        return;
    }
    let dirs = Dirs::new("daemon");
    let (b, mnt) = (dirs.backing(), dirs.mnt());
    let log = dirs.backing().with_extension("log");
    let out = multiarc(&[
        "mount",
        b.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ready when the command returns.
    assert!(mnt.join(".multiarc/arcstats").is_file());
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 97) as u8).collect();
    fs::write(mnt.join("f"), &payload).unwrap();
    // A second mount on the same mountpoint is refused.
    let again = multiarc(&["mount", b.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("busy"), "{err}");
    assert!(fusermount_u(&mnt));
    // The daemon writes back and exits on its own; wait for the data.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs::read(b.join("f")).ok().as_ref() != Some(&payload) {
        assert!(Instant::now() < deadline, "backing file never got the data");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its last words went to the --log file.
    while !fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("everything written back")
    {
        assert!(
            Instant::now() < deadline,
            "the daemon's log has no final line"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = fs::remove_file(&log);
}

#[test]
fn bad_arguments_fail_with_one_clear_line() {
    let dirs = Dirs::new("errors");
    let (b, mnt) = (dirs.backing(), dirs.mnt());
    let file = dirs.base.join("plain-file");
    fs::write(&file, b"x").unwrap();
    let missing = dirs.base.join("missing");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["mount".into(), s(&missing), s(&mnt)],
            "backing directory",
        ),
        (vec!["mount".into(), s(&file), s(&mnt)], "not a directory"),
        (vec!["mount".into(), s(&b), s(&file)], "not a directory"),
        (vec!["mount".into(), s(&b), s(&missing)], "does not exist"),
        (
            vec![
                "mount".into(),
                s(&b),
                s(&mnt),
                "--max-bytes".into(),
                "12XB".into(),
            ],
            "unknown unit",
        ),
        (
            vec![
                "mount".into(),
                s(&b),
                s(&mnt),
                "--block-size".into(),
                "3000".into(),
            ],
            "power of two",
        ),
        (vec!["stats".into(), s(&b)], "not a multiarc mount"),
        (
            vec!["set".into(), s(&b), "max_bytes=1GiB".into()],
            "not a multiarc mount",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
    }
    // The missing backing directory is named as such.
    let out = multiarc(&["mount", &s(&missing), &s(&mnt)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not exist") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn sigterm_unmounts_and_writes_everything_back() {
    if !have("sigterm_unmounts_and_writes_everything_back", &[]) {
        return;
    }
    let dirs = Dirs::new("sigterm");
    let mut m = Mount::start(&dirs, &[]);
    let payload: Vec<u8> = (0..1_000_003u32).map(|i| (i % 241) as u8).collect();
    let f = File::create(m.path("f")).unwrap();
    f.write_all_at(&payload, 0).unwrap();
    // While the data may still be dirty, the mount reports the file's
    // cached length, not the backing file's.
    assert_eq!(
        fs::metadata(m.path("f")).unwrap().len(),
        payload.len() as u64
    );
    eprintln!(
        "sigterm: dirty_bytes {} before close (backing file {} bytes)",
        m.stat("dirty_bytes"),
        fs::metadata(dirs.backing().join("f")).unwrap().len()
    );
    drop(f);
    let mut child = m.child.take().unwrap();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}: {}", m.log_text());
    assert!(!is_mounted(&m.mnt), "still mounted after SIGTERM");
    assert!(fs::read(dirs.backing().join("f")).unwrap() == payload);
}

/// A file's blocks stay cached across close and reopen (the fio job reopens
/// its files on every run), and a truncation of a closed file drops the
/// cached blocks past the new end, so extending it again shows zeros.
#[test]
fn blocks_stay_cached_across_reopen_and_truncation_while_closed_drops_them() {
    if !have(
        "blocks_stay_cached_across_reopen_and_truncation_while_closed_drops_them",
        &[],
    ) {
        return;
    }
    let dirs = Dirs::new("reopen");
    let mut m = Mount::start(&dirs, &["--max-bytes", "64MiB"]);
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 249) as u8 | 1).collect();
    fs::write(m.path("f"), &data).unwrap();
    assert!(fs::read(m.path("f")).unwrap() == data);
    let misses = m.stat("misses");
    for _ in 0..3 {
        assert!(fs::read(m.path("f")).unwrap() == data);
    }
    assert_eq!(
        m.stat("misses"),
        misses,
        "reopening the file missed blocks that were cached"
    );
    // Truncate while closed (setattr without an open handle), then extend.
    let out = Command::new("truncate")
        .args(["-s", "100000"])
        .arg(m.path("f"))
        .status()
        .unwrap();
    assert!(out.success());
    let out = Command::new("truncate")
        .args(["-s", "4M"])
        .arg(m.path("f"))
        .status()
        .unwrap();
    assert!(out.success());
    let back = fs::read(m.path("f")).unwrap();
    assert_eq!(back.len(), 4 << 20);
    assert!(back[..100_000] == data[..100_000]);
    assert!(
        back[100_000..].iter().all(|&b| b == 0),
        "bytes past a truncation came back from the cache"
    );
    assert!(m.unmount().success(), "{}", m.log_text());
    let on_disk = fs::read(dirs.backing().join("f")).unwrap();
    assert!(on_disk == back);
}

/// Runs `script` with `sh -e` in `dir`; panics with its output on failure.
fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "sh -ec {script:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Identity: files are identified by what they are, not by path.
/// Every name of a hard-linked file is one inode; renames, links and
/// unlinks never send I/O to another file.
#[test]
fn hard_links_and_renames_never_redirect_io() {
    use std::os::unix::fs::MetadataExt;
    if !have("hard_links_and_renames_never_redirect_io", &[]) {
        return;
    }
    let dirs = Dirs::new("identity");
    let mut m = Mount::start(&dirs, &[]);
    let mnt = m.mnt.clone();
    sh(
        &mnt,
        "echo ORIGINAL > a1; ln a1 b1; rm a1; echo NEWFILE > a1; echo APPEND >> b1",
    );
    assert_eq!(fs::read_to_string(m.path("a1")).unwrap(), "NEWFILE\n");
    assert_eq!(
        fs::read_to_string(m.path("b1")).unwrap(),
        "ORIGINAL\nAPPEND\n"
    );
    // Removing one name leaves the other working at once.
    assert_eq!(sh(&mnt, "echo C > c; ln c d; rm c; cat d"), "C\n");
    // Two names, one inode.
    sh(&mnt, "echo L > l1; ln l1 l2");
    let (s1, s2) = (
        fs::metadata(m.path("l1")).unwrap(),
        fs::metadata(m.path("l2")).unwrap(),
    );
    assert_eq!(s1.ino(), s2.ino(), "two names of one file, two inodes");
    assert_eq!(s2.nlink(), 2);
    // Written through one name, read through the other while both are open.
    let f1 = File::options().write(true).open(m.path("l1")).unwrap();
    f1.write_all_at(b"through l1", 0).unwrap();
    assert_eq!(fs::read_to_string(m.path("l2")).unwrap(), "through l1");
    drop(f1);

    // A file open in a directory that is renamed (across directories).
    sh(&mnt, "mkdir -p d1/sub d2; echo start > d1/sub/f");
    let f = File::options()
        .read(true)
        .write(true)
        .open(m.path("d1/sub/f"))
        .unwrap();
    sh(
        &mnt,
        "mv d1/sub d2/moved; mkdir d1/sub; echo other > d1/sub/f",
    );
    f.write_all_at(b"moved!", 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(fs::read_to_string(m.path("d2/moved/f")).unwrap(), "moved!");
    assert_eq!(fs::read_to_string(m.path("d1/sub/f")).unwrap(), "other\n");

    // Rename over an open file: the open file is the old one, now nameless.
    sh(&mnt, "echo target > t; echo source > s");
    let t = File::options()
        .read(true)
        .write(true)
        .open(m.path("t"))
        .unwrap();
    sh(&mnt, "mv s t");
    t.write_all_at(b"TARGET", 0).unwrap();
    let mut back = [0u8; 7];
    t.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(&back, b"TARGET\n");
    t.sync_all().unwrap();
    drop(t);
    assert_eq!(fs::read_to_string(m.path("t")).unwrap(), "source\n");

    // A hard link made while the first name is open, then the first name
    // replaced: writes through the open file reach the link.
    sh(&mnt, "echo one > h1");
    let h = File::options().write(true).open(m.path("h1")).unwrap();
    sh(&mnt, "ln h1 h2; echo replaced > h1.new; mv h1.new h1");
    h.write_all_at(b"ONE", 0).unwrap();
    drop(h);
    assert_eq!(fs::read_to_string(m.path("h2")).unwrap(), "ONE\n");
    assert_eq!(fs::read_to_string(m.path("h1")).unwrap(), "replaced\n");

    // FIFOs, sockets and symlinks in the backing directory are listed and
    // stat'ed as what they are.
    sh(
        &dirs.backing(),
        "mkfifo fifo; ln -s a1 link; python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")' 2>/dev/null || true",
    );
    let ty = fs::symlink_metadata(m.path("fifo")).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ty));
    assert_eq!(fs::read_link(m.path("link")).unwrap(), Path::new("a1"));
    assert_eq!(fs::read_to_string(m.path("link")).unwrap(), "NEWFILE\n");
    let names = sh(&mnt, "ls -a");
    for n in ["a1", "b1", "d", "fifo", "link", "d2", "t", "h2"] {
        assert!(names.lines().any(|l| l == n), "{n} not listed in {names}");
    }

    assert!(m.unmount().success(), "{}", m.log_text());
    let b = dirs.backing();
    let read = |n: &str| fs::read_to_string(b.join(n)).unwrap();
    assert_eq!(read("a1"), "NEWFILE\n");
    assert_eq!(read("b1"), "ORIGINAL\nAPPEND\n");
    assert_eq!(read("d"), "C\n");
    assert_eq!(read("l2"), "through l1");
    assert_eq!(read("d2/moved/f"), "moved!");
    assert_eq!(read("d1/sub/f"), "other\n");
    assert_eq!(read("t"), "source\n");
    assert_eq!(read("h2"), "ONE\n");
    assert_eq!(read("h1"), "replaced\n");
}

/// Open files: attribute changes, truncation and sync of an open
/// file go to that file, also after its name was given to another one.
#[test]
fn operations_on_an_open_file_use_its_handle() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !have("operations_on_an_open_file_use_its_handle", &[]) {
        return;
    }
    let dirs = Dirs::new("handle");
    let mut m = Mount::start(&dirs, &[]);
    let f2 = m.path("f2");
    fs::write(&f2, b"old contents").unwrap();
    fs::set_permissions(&f2, fs::Permissions::from_mode(0o644)).unwrap();
    let fd = File::options().read(true).write(true).open(&f2).unwrap();
    fs::remove_file(&f2).unwrap();
    fs::write(&f2, b"new file").unwrap();
    fs::set_permissions(&f2, fs::Permissions::from_mode(0o644)).unwrap();
    // fchmod: the old, unlinked file.
    fd.set_permissions(fs::Permissions::from_mode(0o600))
        .unwrap();
    assert_eq!(fd.metadata().unwrap().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(&f2).unwrap().mode() & 0o777, 0o644);
    assert_eq!(
        fs::metadata(dirs.backing().join("f2")).unwrap().mode() & 0o777,
        0o644
    );
    // ftruncate and fsync of the unlinked file work and leave the new one.
    fd.set_len(3).unwrap();
    fd.sync_all().unwrap();
    assert_eq!(fd.metadata().unwrap().len(), 3);
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut &fd, &mut back).unwrap();
    assert_eq!(back, b"old");
    // futimens too.
    let when = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    fd.set_modified(when).unwrap();
    assert_eq!(fd.metadata().unwrap().mtime(), 1_000_000_000);
    assert_ne!(fs::metadata(&f2).unwrap().mtime(), 1_000_000_000);
    drop(fd);
    assert_eq!(fs::read(&f2).unwrap(), b"new file");
    assert!(m.unmount().success(), "{}", m.log_text());
    assert_eq!(fs::read(dirs.backing().join("f2")).unwrap(), b"new file");
}

/// The daemon's parent waits for the mount to serve requests: a mount that
/// dies before (here: too few descriptors for 100 threads' cloned
/// /dev/fuse descriptors) is an error, not exit 0.
#[test]
fn daemon_mode_reports_a_mount_that_died_before_it_was_ready() {
    if !have(
        "daemon_mode_reports_a_mount_that_died_before_it_was_ready",
        &[],
    ) {
        return;
    }
    let dirs = Dirs::new("daemon-dies");
    let script = format!(
        "ulimit -n 64; exec '{BIN}' mount '{}' '{}' --threads 100",
        dirs.backing().display(),
        dirs.mnt().display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        fusermount_u(&dirs.mnt());
        panic!("mount with 64 descriptors and 100 threads exited 0: {err}");
    }
    assert!(err.contains("multiarc: error:"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("ulimit -n"), "{err}");
    // And nothing is left mounted.
    assert!(!is_mounted(&dirs.mnt()), "left mounted after failing");
}

/// `multiarc set` checks every setting before applying any; a non-empty
/// mountpoint is refused without --nonempty; a `.multiarc` in the backing
/// directory is warned about.
#[test]
fn set_validates_all_first_nonempty_mountpoints_and_hidden_names_are_reported() {
    if !have(
        "set_validates_all_first_nonempty_mountpoints_and_hidden_names_are_reported",
        &[],
    ) {
        return;
    }
    let dirs = Dirs::new("messages");
    let (b, mnt) = (dirs.backing(), dirs.mnt());
    fs::write(mnt.join("hidden-by-a-mount"), b"x").unwrap();
    let out = multiarc(&["mount", b.to_str().unwrap(), mnt.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a non-empty mountpoint was accepted");
    assert!(
        err.contains("not empty") && err.contains("--nonempty"),
        "{err}"
    );
    assert!(!is_mounted(&mnt));
    fs::create_dir(b.join(".multiarc")).unwrap();
    let mut m = Mount::start(&dirs, &["--nonempty", "--max-bytes", "64MiB"]);
    let log = m.log_text();
    assert!(
        log.contains("warning") && log.contains(".multiarc is hidden"),
        "no warning about the hidden .multiarc: {log}"
    );
    let s = m.mnt.to_str().unwrap().to_string();
    for bad in [
        vec!["max_bytes=8MiB", "lockstat=yes"],
        vec!["max_bytes=8MiB", "max_bytes=1KiB"],
        vec!["max_bytes=8MiB", "nonsense"],
    ] {
        let mut args = vec!["set", s.as_str()];
        args.extend(bad.iter().copied());
        let out = multiarc(&args);
        assert!(!out.status.success(), "{bad:?} succeeded");
        assert_eq!(m.stat("c"), 64 << 20, "{bad:?} applied its first setting");
    }
    let out = multiarc(&["set", &s, "max_bytes=8MiB", "lockstat=0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(m.stat("c"), 8 << 20);
    assert!(m.unmount().success(), "{}", m.log_text());
    // The mountpoint's own file is back.
    assert!(mnt.join("hidden-by-a-mount").is_file());
}

/// A file changed in the backing directory behind the mount is read anew
/// at the next open (close-to-open consistency, as NFS).
#[test]
fn files_changed_behind_the_mount_are_reread_at_open() {
    if !have("files_changed_behind_the_mount_are_reread_at_open", &[]) {
        return;
    }
    let dirs = Dirs::new("close-to-open");
    let mut m = Mount::start(&dirs, &[]);
    let first: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8).collect();
    fs::write(m.path("f"), &first).unwrap();
    assert!(fs::read(m.path("f")).unwrap() == first);
    assert!(fs::read(m.path("f")).unwrap() == first); // cached now
                                                      // Same size, other bytes, written behind the mount's back.
    let second: Vec<u8> = (0..200_000u32).map(|i| (i % 11) as u8).collect();
    fs::write(dirs.backing().join("f"), &second).unwrap();
    assert!(
        fs::read(m.path("f")).unwrap() == second,
        "a reopen read the stale cached blocks"
    );
    // Shorter, and longer.
    fs::write(dirs.backing().join("f"), b"short").unwrap();
    let back = fs::read(m.path("f")).unwrap();
    assert!(
        back == b"short",
        "read {} bytes, not the 5 written behind the mount",
        back.len()
    );
    fs::write(dirs.backing().join("f"), &first).unwrap();
    assert!(fs::read(m.path("f")).unwrap() == first);
    // With another descriptor held open all along (its file state stays
    // live), a new open still sees the change.
    let held = File::open(m.path("f")).unwrap();
    let mut buf = vec![0u8; first.len()];
    held.read_exact_at(&mut buf, 0).unwrap();
    fs::write(dirs.backing().join("f"), &second).unwrap();
    assert!(
        fs::read(m.path("f")).unwrap() == second,
        "an open while another descriptor was open read stale cached blocks"
    );
    drop(held);
    // Each step again right after a close through the mount, several
    // times (the kernel's release of the mount's file comes after close(2)
    // returns, maybe after the change).
    for round in 0..20u8 {
        fs::write(m.path("f"), [round; 3000]).unwrap();
        fs::write(dirs.backing().join("f"), [round + 100; 2000]).unwrap();
        let back = fs::read(m.path("f")).unwrap();
        assert!(
            back.len() == 2000 && back.iter().all(|&b| b == round + 100),
            "round {round}: the change behind the mount was not seen ({} bytes)",
            back.len()
        );
    }
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// A 16 MiB tmpfs mounted on a test's backing directory (a filesystem that
/// fills up); unmounted at drop, also when the test fails. Declare it after
/// the `Dirs` and before the `Mount`, so the mount goes first.
struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// `None` (with a SKIP line) where tmpfs cannot be mounted (not root).
    fn mount(test: &str, dirs: &Dirs) -> Option<SmallFs> {
        SmallFs::mount_with(test, dirs, "size=16m")
    }

    /// A tmpfs with these mount options (`nr_inodes=N`: one that runs out
    /// of inodes).
    fn mount_with(test: &str, dirs: &Dirs, options: &str) -> Option<SmallFs> {
        let dir = dirs.backing();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let msg = format!("SKIP: {test}: cannot mount a tmpfs (needs root)");
            if std::env::var_os("MULTIARC_REQUIRE_FUSE").is_some_and(|v| v == "1") {
                panic!("{msg} (MULTIARC_REQUIRE_FUSE=1)");
            }
            let _ = writeln!(std::io::stderr(), "{msg}");
            return None;
        }
        Some(SmallFs { dir })
    }

    /// Fills the filesystem (directly, not through the mount) with `name`.
    fn fill(&self, name: &str) {
        let mut f = File::create(self.dir.join(name)).unwrap();
        let chunk = vec![0x5au8; 1 << 20];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
    }

    fn free_bytes(&self) -> u64 {
        let out = Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(&self.dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df prints the free bytes")
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

const ENOSPC: i32 = 28;

/// A full store, mount side: dirty data that cannot be written does
/// not pin the file: removing a file written on a full backing filesystem,
/// open or closed, frees its space, and writing works again.
#[test]
fn removing_files_written_on_a_full_backing_frees_their_space() {
    let test = "removing_files_written_on_a_full_backing_frees_their_space";
    if !have(test, &[]) {
        return;
    }
    let dirs = Dirs::new("enospc-rm");
    let Some(small) = SmallFs::mount(test, &dirs) else {
        return;
    };
    let mut m = Mount::start(&dirs, &["--writeback-interval", "0.2"]);
    let free = small.free_bytes();
    // Closed: more than fits, so close reports ENOSPC.
    let chunk = vec![7u8; 1 << 20];
    let f = File::create(m.path("big")).unwrap();
    let mut failed = None;
    for i in 0..24u64 {
        if let Err(e) = f.write_all_at(&chunk, i << 20) {
            failed = Some(e);
            break;
        }
    }
    let closed = failed.map_or_else(|| f.sync_all(), Err);
    drop(f);
    let e = closed.expect_err("24 MiB fitted in a 16 MiB tmpfs");
    assert_eq!(e.raw_os_error(), Some(ENOSPC), "{e}");
    fs::remove_file(m.path("big")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while small.free_bytes() < free {
        assert!(
            Instant::now() < deadline,
            "removing the file freed {} of {free} bytes\n{}",
            small.free_bytes(),
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Writing works again.
    let data = vec![9u8; 8 << 20];
    let f = File::create(m.path("again")).unwrap();
    f.write_all_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // Removing a file just written and closed (clean) frees it (once the
    // kernel's release of it, which comes after close(2), is processed).
    let before = small.free_bytes();
    fs::remove_file(m.path("again")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while small.free_bytes() < before + (8 << 20) {
        assert!(
            Instant::now() < deadline,
            "removing a closed file did not free its space ({before} -> {})",
            small.free_bytes()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Open: unlinked while open and full of unwritable dirty data; the last
    // close drops it.
    let free = small.free_bytes();
    let f = File::create(m.path("open")).unwrap();
    for i in 0..24u64 {
        if f.write_all_at(&chunk, i << 20).is_err() {
            break;
        }
    }
    fs::remove_file(m.path("open")).unwrap();
    drop(f);
    let deadline = Instant::now() + Duration::from_secs(30);
    while small.free_bytes() < free {
        assert!(
            Instant::now() < deadline,
            "closing the unlinked file freed {} of {free} bytes\n{}",
            small.free_bytes(),
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(m.stat("dirty_bytes"), 0);
    let f = File::create(m.path("again")).unwrap();
    f.write_all_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert!(m.unmount().success(), "{}", m.log_text());
    assert!(fs::read(dirs.backing().join("again")).unwrap() == data);
}

/// A failed write-back: a write-back that failed (ENOSPC) is never retried
/// over newer data: the newest write wins, on disk too.
#[test]
fn a_failed_write_back_never_overwrites_newer_data() {
    let test = "a_failed_write_back_never_overwrites_newer_data";
    if !have(test, &[]) {
        return;
    }
    let dirs = Dirs::new("enospc-newest");
    let Some(small) = SmallFs::mount(test, &dirs) else {
        return;
    };
    let mut m = Mount::start(&dirs, &["--writeback-interval", "0.2"]);
    fs::write(m.path("x"), b"").unwrap();
    small.fill("filler");
    let f = File::create(m.path("x")).unwrap();
    f.write_all_at(b"OLD", 0).unwrap();
    let e = f.sync_all().expect_err("fsync on a full tmpfs succeeded");
    assert_eq!(e.raw_os_error(), Some(ENOSPC), "{e}");
    drop(f);
    fs::remove_file(dirs.backing().join("filler")).unwrap();
    let f = File::options().write(true).open(m.path("x")).unwrap();
    f.write_all_at(b"NEW", 0).unwrap();
    // Every failure so far was reported (to the first descriptor's fsync
    // and close); retries failing the same way are not news: this fsync,
    // which wrote everything, succeeds.
    f.sync_all()
        .unwrap_or_else(|e| panic!("fsync after freeing space: {e}\n{}", m.log_text()));
    drop(f);
    assert_eq!(fs::read(dirs.backing().join("x")).unwrap(), b"NEW");
    // Give the flusher many chances to retry the old write-back.
    let passes = m.stat("flusher_passes");
    let deadline = Instant::now() + Duration::from_secs(60);
    while m.stat("flusher_passes") < passes + 10 {
        assert!(Instant::now() < deadline, "the flusher stopped");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(m.stat("dirty_bytes"), 0);
    assert_eq!(fs::read(m.path("x")).unwrap(), b"NEW");
    assert_eq!(fs::read(dirs.backing().join("x")).unwrap(), b"NEW");
    assert!(m.unmount().success(), "{}", m.log_text());
    assert_eq!(fs::read(dirs.backing().join("x")).unwrap(), b"NEW");
}

/// A full store: with the backing filesystem full and the dirty budget
/// full, a writer gets ENOSPC instead of waiting forever.
#[test]
fn writers_get_enospc_instead_of_hanging() {
    let test = "writers_get_enospc_instead_of_hanging";
    if !have(test, &["timeout", "dd"]) {
        return;
    }
    let dirs = Dirs::new("enospc-hang");
    let Some(small) = SmallFs::mount(test, &dirs) else {
        return;
    };
    let mut m = Mount::start(
        &dirs,
        &["--dirty-max", "1MiB", "--writeback-interval", "0.2"],
    );
    small.fill("filler");
    // 8 MiB through a 1 MiB budget onto a full filesystem. `timeout` kills
    // it (exit 124, or 137 if it had to) if it hangs.
    let out = Command::new("timeout")
        .args([
            "-s",
            "KILL",
            "120",
            "dd",
            "if=/dev/zero",
            "bs=64k",
            "count=128",
        ])
        .arg(format!("of={}", m.path("y").display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        None,
        "dd was killed: it hung\n{}",
        m.log_text()
    );
    assert!(!out.status.success(), "8 MiB fitted on a full tmpfs: {err}");
    assert!(err.contains("No space left on device"), "{err}");
    fs::remove_file(dirs.backing().join("filler")).unwrap();
    fs::remove_file(m.path("y")).unwrap();
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// SQLite in WAL mode: its shared-memory index is a shared mapping of a
/// file on the mount (direct I/O files may be mapped shared since Linux
/// 6.6 with FUSE_DIRECT_IO_ALLOW_MMAP).
#[test]
fn sqlite_wal_mode_works() {
    if !have("sqlite_wal_mode_works", &["sqlite3"]) {
        return;
    }
    const ROWS: usize = 3000;
    let dirs = Dirs::new("sqlite-wal");
    let mut m = Mount::start(&dirs, &["--max-bytes", "32MiB"]);
    let db = m.path("wal.sqlite");
    assert_eq!(sqlite(&db, "PRAGMA journal_mode=WAL;"), "wal\n");
    let mut script =
        String::from("PRAGMA journal_mode=WAL; CREATE TABLE t(i INTEGER PRIMARY KEY, v TEXT);\n");
    for i in 0..ROWS {
        script.push_str(&format!(
            "BEGIN; INSERT INTO t(v) VALUES('row {i} ' || hex(randomblob(100))); COMMIT;\n"
        ));
        if i % 1000 == 999 {
            script.push_str("UPDATE t SET v = v || '!' WHERE i % 7 = 0;\n");
        }
    }
    let t = Instant::now();
    sqlite(&db, &script);
    eprintln!(
        "sqlite WAL: {ROWS} transactions through the mount in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // A second connection reads while the WAL is not checkpointed.
    let check = "PRAGMA integrity_check; SELECT count(*) FROM t;";
    assert_eq!(sqlite(&db, check), format!("ok\n{ROWS}\n"));
    assert_eq!(sqlite(&db, "PRAGMA wal_checkpoint(TRUNCATE);"), "0|0|0\n");
    assert_eq!(sqlite(&db, check), format!("ok\n{ROWS}\n"));
    assert!(m.unmount().success(), "{}", m.log_text());
    assert_eq!(
        sqlite(&dirs.backing().join("wal.sqlite"), check),
        format!("ok\n{ROWS}\n")
    );
}

/// Shared writable mappings of files on the mount see the mount's reads and
/// writes and are seen by them (the kernel writes dirty mapped pages back
/// through the mount before a direct read or write of their range, and
/// drops them after a direct write), and reach the backing file.
#[test]
fn shared_mappings_are_coherent_with_reads_and_writes() {
    if !have(
        "shared_mappings_are_coherent_with_reads_and_writes",
        &["python3"],
    ) {
        return;
    }
    let dirs = Dirs::new("mmap");
    let mut m = Mount::start(&dirs, &[]);
    let script = r#"
import mmap, os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"\0" * 65536)
fd = os.open(p, os.O_RDWR)
m = mmap.mmap(fd, 65536, mmap.MAP_SHARED)
m[100:105] = b"HELLO"
other = os.open(p, os.O_RDONLY)
assert os.pread(other, 5, 100) == b"HELLO", "a read missed a mapped write"
os.pwrite(fd, b"WORLD", 40000)
assert m[40000:40005] == b"WORLD", "the mapping missed a write"
m.flush()
m.close()
os.close(fd)
os.close(other)
print("ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(m.path("mapped"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        m.log_text()
    );
    assert!(m.unmount().success(), "{}", m.log_text());
    let back = fs::read(dirs.backing().join("mapped")).unwrap();
    assert_eq!(&back[100..105], b"HELLO");
    assert_eq!(&back[40000..40005], b"WORLD");
}

/// A user other than root mounts through fusermount3 (as libfuse does),
/// which opens /dev/fuse for it; where even that fails, the error names
/// /dev/fuse. Run as `nobody` in a private mount namespace whose /dev/fuse
/// is a node with the mode under test (needs root, setpriv and unshare).
#[test]
fn non_root_mounts_go_through_fusermount3() {
    let test = "non_root_mounts_go_through_fusermount3";
    if !have(test, &["setpriv", "unshare", "mknod"]) {
        return;
    }
    let root = fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root {
        let _ = writeln!(std::io::stderr(), "SKIP: {test}: needs root");
        return;
    }
    let dirs = Dirs::new("nonroot");
    let base = dirs.base.clone();
    fs::create_dir(base.join("logs")).unwrap();
    fs::create_dir(base.join("dev")).unwrap();
    let chown = Command::new("chown")
        .args(["65534:65534"])
        .arg(dirs.backing())
        .arg(dirs.mnt())
        .arg(base.join("logs"))
        .status()
        .unwrap();
    assert!(chown.success());
    let script = format!(
        r#"set -e
N="setpriv --reuid=65534 --regid=65534 --clear-groups"
mknod -m 600 '{base}/dev/closed' c 10 229
mount --bind '{base}/dev/closed' /dev/fuse
if $N '{bin}' mount '{b}' '{m}' 2> '{base}/logs/refused'; then echo "mounted with /dev/fuse 0600"; exit 1; fi
umount /dev/fuse
mknod -m 666 '{base}/dev/open' c 10 229
mount --bind '{base}/dev/open' /dev/fuse
$N '{bin}' mount '{b}' '{m}' --log '{base}/logs/mount.log'
$N sh -c "echo through-fusermount3 > '{m}/f'; cat '{m}/f'; test -f '{m}/.multiarc/arcstats'"
$N fusermount3 -u '{m}'
i=0
until grep -q 'everything written back' '{base}/logs/mount.log'; do
  i=$((i+1)); test $i -lt 600 || {{ echo "the daemon did not finish"; exit 1; }}; sleep 0.1
done
"#,
        base = base.display(),
        bin = BIN,
        b = dirs.backing().display(),
        m = dirs.mnt().display(),
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = fs::read_to_string(base.join("logs/mount.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}{}\nmount log:\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "through-fusermount3"
    );
    let refused = fs::read_to_string(base.join("logs/refused")).unwrap();
    assert!(
        refused.contains("/dev/fuse") && refused.contains("Permission denied"),
        "{refused}"
    );
    assert_eq!(refused.trim_end().lines().count(), 1, "{refused}");
    assert_eq!(
        fs::read_to_string(dirs.backing().join("f")).unwrap(),
        "through-fusermount3\n"
    );
}

/// The control directory refuses create, rename, link and chmod; sparse
/// files reach 1 TiB (the hole reads as zeros without touching the disk);
/// truncation racing readers never shows a reader bytes past the end.
#[test]
fn control_directory_refuses_changes_holes_and_truncate_races() {
    use std::os::unix::fs::MetadataExt;
    if !have(
        "control_directory_refuses_changes_holes_and_truncate_races",
        &[],
    ) {
        return;
    }
    let dirs = Dirs::new("ctl-holes");
    let mut m = Mount::start(&dirs, &[]);
    let ctl = m.path(".multiarc");
    fs::write(m.path("plain"), b"p").unwrap();
    assert!(
        File::create(ctl.join("new")).is_err(),
        "create in .multiarc"
    );
    assert!(fs::rename(m.path("plain"), ctl.join("x")).is_err());
    assert!(fs::rename(&ctl, m.path("renamed")).is_err());
    assert!(fs::hard_link(m.path("plain"), ctl.join("l")).is_err());
    assert!(fs::hard_link(ctl.join("arcstats"), m.path("l")).is_err());
    assert!(fs::create_dir(m.path(".multiarc/d")).is_err());
    assert!(Command::new("chmod")
        .arg("777")
        .arg(ctl.join("arcstats"))
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| !s.success()));
    assert!(fs::write(ctl.join("arcstats"), b"1").is_err());

    // A 1 TiB sparse file.
    const TIB: u64 = 1 << 40;
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.path("sparse"))
        .unwrap();
    f.write_all_at(b"end", TIB - 3).unwrap();
    f.sync_all().unwrap();
    assert_eq!(f.metadata().unwrap().len(), TIB);
    let mut buf = vec![1u8; 1 << 20];
    f.read_exact_at(&mut buf, TIB / 2).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    let mut end = [0u8; 3];
    f.read_exact_at(&mut end, TIB - 3).unwrap();
    assert_eq!(&end, b"end");
    drop(f);
    let on_disk = fs::metadata(dirs.backing().join("sparse")).unwrap();
    assert_eq!(on_disk.len(), TIB);
    assert!(on_disk.blocks() < 1 << 16, "the hole was written out");
    fs::remove_file(m.path("sparse")).unwrap();

    // Truncation racing readers: a read returns bytes of the file as it was
    // or is, never garbage past the end.
    let path = m.path("shrinking");
    let full = vec![0xabu8; 1 << 20];
    fs::write(&path, &full).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (path, stop) = (path.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let f = File::open(&path).unwrap();
                let mut buf = vec![0u8; 256 << 10];
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let n = f.read_at(&mut buf, 512 << 10).unwrap();
                    assert!(
                        buf[..n].iter().all(|&b| b == 0xab || b == 0),
                        "a read raced with truncation returned garbage"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let w = File::options().write(true).open(&path).unwrap();
    for round in 0..200u64 {
        w.set_len((round * 7919) % (1 << 20)).unwrap();
        w.write_all_at(&full[..4096], (round * 4099) % (1 << 20))
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    drop(w);
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// SIGKILL of the daemon during fsync'ed writes loses no record whose
/// fsync succeeded.
#[test]
fn sigkill_of_the_daemon_loses_no_fsynced_record() {
    if !have("sigkill_of_the_daemon_loses_no_fsynced_record", &[]) {
        return;
    }
    const REC: usize = 100;
    let dirs = Dirs::new("sigkill");
    let mut m = Mount::start(&dirs, &[]);
    let path = m.path("journal");
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (path, acked) = (path.clone(), Arc::clone(&acked));
        std::thread::spawn(move || {
            let f = File::create(&path).unwrap();
            for i in 1u64.. {
                let mut rec = format!("record {i:>12} ").into_bytes();
                rec.resize(REC - 1, b'.');
                rec.push(b'\n');
                if f.write_all_at(&rec, (i - 1) * REC as u64).is_err() || f.sync_data().is_err() {
                    return;
                }
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.load(Ordering::SeqCst) < 200 {
        assert!(Instant::now() < deadline, "no progress: {}", m.log_text());
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut child = m.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    writer.join().unwrap();
    let acked = acked.load(Ordering::SeqCst);
    assert!(fusermount_u(&m.mnt));
    let disk = fs::read(dirs.backing().join("journal")).unwrap();
    assert!(
        disk.len() >= acked as usize * REC,
        "{} bytes on disk, {acked} records acknowledged",
        disk.len()
    );
    for i in 1..=acked {
        let rec = &disk[(i - 1) as usize * REC..i as usize * REC];
        let want = format!("record {i:>12} ");
        assert!(
            rec.starts_with(want.as_bytes()),
            "acknowledged record {i} lost: {:?}",
            String::from_utf8_lossy(rec)
        );
    }
    eprintln!("sigkill: {acked} fsync'ed records, all on disk");
}

/// fio crc32c verify with writers sharing one file (disjoint regions) at
/// 512 B, 4 KiB and unaligned 1-12 KiB blocks, then again after a remount
/// (a cold cache: every block from the backing file).
#[test]
fn fio_verify_shared_file_small_and_unaligned_blocks_across_remount() {
    if !have(
        "fio_verify_shared_file_small_and_unaligned_blocks_across_remount",
        &["fio"],
    ) {
        return;
    }
    let dirs = Dirs::new("fio-shared");
    let sizes = [
        ("bs512", "--bs=512"),
        ("bs4k", "--bs=4k"),
        ("bsrange", "--bsrange=1k-12k"),
    ];
    let job = |file: &str, bs: &str, verify: &str| {
        vec![
            "--name=shared".to_string(),
            format!("--filename={file}"),
            "--rw=randwrite".into(),
            bs.into(),
            "--ioengine=psync".into(),
            "--numjobs=4".into(),
            "--size=2m".into(),
            "--offset_increment=2m".into(),
            "--verify=crc32c".into(),
            "--verify_state_save=0".into(),
            "--group_reporting".into(),
            verify.into(),
        ]
    };
    let mut m = Mount::start(&dirs, &["--max-bytes", "16MiB"]);
    for (file, bs) in sizes {
        let mut args = vec![format!("--directory={}", m.mnt.display())];
        args.extend(job(file, bs, "--do_verify=1"));
        fio(&args);
    }
    assert!(m.unmount().success(), "{}", m.log_text());
    let mut m = Mount::start(&dirs, &["--max-bytes", "16MiB"]);
    for (file, bs) in sizes {
        let mut args = vec![format!("--directory={}", m.mnt.display())];
        args.extend(job(file, bs, "--verify_only"));
        fio(&args);
    }
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// SQLite with synchronous=FULL loses no committed transaction when the
/// daemon is killed (SIGKILL) under it: the backing database passes
/// integrity_check and holds every row whose commit returned.
#[test]
fn sqlite_survives_sigkill_of_the_daemon() {
    use std::io::{BufRead, BufReader};
    if !have("sqlite_survives_sigkill_of_the_daemon", &["sqlite3"]) {
        return;
    }
    let dirs = Dirs::new("sqlite-kill");
    let mut m = Mount::start(&dirs, &[]);
    let mut client = Command::new("sqlite3")
        .arg(m.path("db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(
            b"PRAGMA synchronous=FULL; CREATE TABLE t(i INTEGER PRIMARY KEY, v TEXT);\n",
        );
        for _ in 0..20_000 {
            let line =
                "INSERT INTO t(v) VALUES(hex(randomblob(200))); SELECT last_insert_rowid();\n";
            if stdin.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    // Each line sqlite3 prints is a committed row.
    let acked = Arc::new(AtomicU64::new(0));
    let reader = {
        let (out, acked) = (client.stdout.take().unwrap(), Arc::clone(&acked));
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                match line.ok().and_then(|l| l.trim().parse::<u64>().ok()) {
                    Some(n) => acked.store(n, Ordering::SeqCst),
                    None => return,
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.load(Ordering::SeqCst) < 100 {
        assert!(Instant::now() < deadline, "no commits: {}", m.log_text());
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut daemon = m.child.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let _ = client.wait();
    let _ = feeder.join();
    reader.join().unwrap();
    assert!(fusermount_u(&m.mnt));
    let acked = acked.load(Ordering::SeqCst);
    let out = sqlite(
        &dirs.backing().join("db"),
        "PRAGMA integrity_check; SELECT count(*) FROM t;",
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("ok"), "{out}");
    let rows: u64 = lines.next().unwrap().parse().unwrap();
    assert!(rows >= acked, "{rows} rows on disk, {acked} committed");
    eprintln!("sqlite after SIGKILL of the daemon: {rows} rows, {acked} acknowledged");
}

/// Write-back errors reach every open file description, and a close(2)
/// of a descriptor opened later (nothing written through it) while the
/// failure lasts; once space is back, each description is told at most
/// once and then syncs cleanly.
#[test]
fn write_back_errors_reach_each_description() {
    let test = "write_back_errors_reach_each_description";
    if !have(test, &[]) {
        return;
    }
    let dirs = Dirs::new("errseq");
    let Some(small) = SmallFs::mount(test, &dirs) else {
        return;
    };
    let mut m = Mount::start(&dirs, &["--writeback-interval", "0.2"]);
    fs::write(m.path("x"), b"").unwrap();
    small.fill("filler");
    let a = File::options().write(true).open(m.path("x")).unwrap();
    let b = File::options().read(true).open(m.path("x")).unwrap();
    a.write_all_at(b"OLD", 0).unwrap();
    let ea = a.sync_all().expect_err("fsync of a on a full tmpfs");
    let eb = b.sync_all().expect_err("fsync of b, which wrote nothing");
    assert_eq!(ea.raw_os_error(), Some(ENOSPC), "{ea}");
    assert_eq!(eb.raw_os_error(), Some(ENOSPC), "{eb}");
    drop(a);
    drop(b);
    // Opened later, nothing written through it: its close still reports.
    let late = File::open(m.path("x")).unwrap();
    let e = late.sync_all().expect_err("fsync of a later descriptor");
    assert_eq!(e.raw_os_error(), Some(ENOSPC), "{e}");
    drop(late);
    // close(2) itself reports it (Rust's File ignores close errors; Python
    // raises them).
    if in_path("python3") {
        let out = Command::new("python3")
            .arg("-c")
            .arg(
                "import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\n\
                 try:\n    os.close(fd)\n    print('closed')\n\
                 except OSError as e:\n    print(e.errno)",
            )
            .arg(m.path("x"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            ENOSPC.to_string(),
            "close(2) of a descriptor of a file whose write-back fails: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fs::remove_file(dirs.backing().join("filler")).unwrap();
    for name in ["c", "d"] {
        let f = File::open(m.path("x")).unwrap();
        if let Err(e) = f.sync_all() {
            assert_eq!(e.raw_os_error(), Some(ENOSPC), "{name}: {e}");
        }
        f.sync_all()
            .unwrap_or_else(|e| panic!("{name}: second fsync: {e}\n{}", m.log_text()));
    }
    assert_eq!(fs::read(dirs.backing().join("x")).unwrap(), b"OLD");
    assert!(m.unmount().success(), "{}", m.log_text());
}

#[test]
fn a_second_tier_under_the_mount() {
    if !have("a_second_tier_under_the_mount", &[]) {
        return;
    }
    let dirs = Dirs::new("l2");
    let device = dirs.base.join("l2.dev");
    let dev = device.to_str().unwrap();
    let mut m = Mount::start(
        &dirs,
        &["--max-bytes", "1MiB", "--l2", dev, "--l2-bytes", "32MiB"],
    );
    // 8 MiB through a 1 MiB cache: most of it can only come back from the
    // second tier (or the backing file).
    let data: Vec<u8> = (0..8 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(m.path("big"), &data).unwrap();
    let names: Vec<String> = m.stats().into_iter().map(|(k, _)| k).collect();
    for field in [
        "l2_hits",
        "l2_misses",
        "l2_size",
        "l2_writes",
        "l2_hdr_bytes",
        "evict_l2_cached",
    ] {
        assert!(names.iter().any(|n| n == field), "no {field} in arcstats");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(fs::read(m.path("big")).unwrap(), data, "bytes read back");
        if m.stat("l2_writes") > 0 && m.stat("l2_hits") > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no second-tier traffic in 20 s: {:?}",
            m.stats()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(m.stat("l2_cksum_bad") + m.stat("l2_io_errors"), 0);
    assert!(m.unmount().success(), "{}", m.log_text());
    assert_eq!(fs::read(dirs.backing().join("big")).unwrap(), data);

    // Bad second tiers: one clear line, a non-zero exit, nothing mounted.
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--l2".into(), dev.into()], "--l2-bytes"),
        (
            vec![
                "--l2".into(),
                s(&dirs.base.join("no/such/dir/dev")),
                "--l2-bytes".into(),
                "16MiB".into(),
            ],
            "l2 device",
        ),
        (
            vec![
                "--l2".into(),
                dev.into(),
                "--l2-bytes".into(),
                "4KiB".into(),
            ],
            "too small",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["mount".to_string(), s(&dirs.backing()), s(&dirs.mnt())];
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = multiarc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
        assert!(!is_mounted(&dirs.mnt()), "{args:?} left a mount");
    }
}

/// Whether this test runs as root; prints a SKIP line if not.
fn root_or_skip(test: &str) -> bool {
    let root = fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root {
        let msg = format!("SKIP: {test}: needs root (it acts as other users)");
        if std::env::var_os("MULTIARC_REQUIRE_FUSE").is_some_and(|v| v == "1") {
            panic!("{msg} (MULTIARC_REQUIRE_FUSE=1)");
        }
        let _ = writeln!(std::io::stderr(), "{msg}");
    }
    root
}

/// Runs `script` with `sh -c` in `dir` as `uid:gid` with the supplementary
/// groups `groups` (a comma list; empty: none), through setpriv.
fn sh_as(uid: u32, gid: u32, groups: &str, dir: &Path, script: &str) -> Output {
    let groups = if groups.is_empty() {
        "--clear-groups".to_string()
    } else {
        format!("--groups={groups}")
    };
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(groups)
        .args(["sh", "-c", script])
        .current_dir(dir)
        .output()
        .expect("running setpriv")
}

/// `sh_as` that must succeed; returns its stdout.
fn sh_as_ok(uid: u32, gid: u32, groups: &str, dir: &Path, script: &str) -> String {
    let out = sh_as(uid, gid, groups, dir, script);
    assert!(
        out.status.success(),
        "as {uid}:{gid} ({groups}): {script:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `(uid, gid, mode & 0o7777)` of a backing object (not followed if a
/// symlink).
fn owner(path: &Path) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

/// Several users: with `--allow-other`, other users use the mount; what they
/// create is theirs (files, directories, FIFOs, symlinks, hard links keep
/// their owner), a setgid directory gives its group, supplementary groups
/// count, a write by a process without CAP_FSETID clears SUID/SGID, and no
/// user but root can make a setuid root file. Without `--allow-other` other
/// users get EACCES.
#[test]
fn other_users_own_what_they_create_with_allow_other() {
    let test = "other_users_own_what_they_create_with_allow_other";
    if !have(test, &["setpriv"]) || !root_or_skip(test) {
        return;
    }
    let dirs = Dirs::new("users");
    let b = dirs.backing();
    // The mount's root is the backing directory: open to all, sticky.
    fs::set_permissions(&b, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    for (name, gid, mode) in [("setgid", 4242, 0o2777), ("team", 4243, 0o770)] {
        fs::create_dir(b.join(name)).unwrap();
        std::os::unix::fs::chown(b.join(name), Some(0), Some(gid)).unwrap();
        fs::set_permissions(
            b.join(name),
            std::os::unix::fs::PermissionsExt::from_mode(mode),
        )
        .unwrap();
    }

    // Without --allow-other: the kernel refuses other users.
    let mut m = Mount::start(&dirs, &[]);
    let out = sh_as(65534, 65534, "", &m.mnt, "ls .");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(m.unmount().success(), "{}", m.log_text());

    let mut m = Mount::start(&dirs, &["--allow-other"]);
    let mnt = m.mnt.clone();
    sh_as_ok(
        65534,
        65534,
        "",
        &mnt,
        "echo data > f; mkdir d; mkfifo p; ln -s f s; ln f hard; mv hard moved; \
         mkdir setgid/d; : > setgid/f; test -p p",
    );
    for name in ["f", "d", "p", "s", "moved"] {
        let (uid, gid, _) = owner(&b.join(name));
        assert_eq!((uid, gid), (65534, 65534), "{name}");
    }
    assert_eq!(fs::read_to_string(b.join("moved")).unwrap(), "data\n");
    // The setgid directory's group, and a new directory keeps it setgid.
    assert_eq!(owner(&b.join("setgid/f")).0, 65534);
    assert_eq!(owner(&b.join("setgid/f")).1, 4242);
    let (uid, gid, mode) = owner(&b.join("setgid/d"));
    assert_eq!((uid, gid, mode & 0o2000), (65534, 4242, 0o2000));

    // A supplementary group lets its member create in a group directory
    // (the backing filesystem checks the caller's groups too) and chgrp
    // their own file to it; without it both are refused.
    sh_as_ok(65534, 65534, "4243", &mnt, ": > team/g; chgrp 4243 f");
    assert_eq!(owner(&b.join("team/g")).0, 65534);
    assert_eq!(owner(&b.join("f")).1, 4243);
    let out = sh_as(65534, 65534, "", &mnt, ": > team/h");
    assert!(!out.status.success());
    let out = sh_as(65534, 65534, "", &mnt, "chgrp 4242 f");
    assert!(!out.status.success());

    // A write or truncation by another user (no CAP_FSETID) clears SUID,
    // and SGID of a group-executable file; a write by root does not.
    for (name, before, change, after) in [
        ("suid", 0o4777, "echo x >>", 0o777),
        ("sgid", 0o2777, "echo x >>", 0o777),
        ("both", 0o6777, "echo x >>", 0o777),
        ("lockmark", 0o2767, "echo x >>", 0o2767),
        ("otrunc", 0o6777, ": >", 0o777),
        ("truncate", 0o6777, "truncate -s 1", 0o777),
    ] {
        fs::write(mnt.join(name), "data").unwrap();
        fs::set_permissions(
            mnt.join(name),
            std::os::unix::fs::PermissionsExt::from_mode(before),
        )
        .unwrap();
        sh_as_ok(65534, 65534, "", &mnt, &format!("{change} {name}"));
        assert_eq!(owner(&b.join(name)).2, after, "{name}");
    }
    fs::set_permissions(
        mnt.join("suid"),
        std::os::unix::fs::PermissionsExt::from_mode(0o4777),
    )
    .unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("suid"))
        .unwrap()
        .write_all(b"root\n")
        .unwrap();
    assert_eq!(owner(&b.join("suid")).2, 0o4777);

    // Root's file in the sticky root: another user can neither rename nor
    // remove it, nor (protected_hardlinks) link to it; the tunables are
    // the mount owner's.
    fs::write(mnt.join("roots"), "r").unwrap();
    fs::set_permissions(
        mnt.join("roots"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let protected =
        fs::read_to_string("/proc/sys/fs/protected_hardlinks").is_ok_and(|v| v.trim() == "1");
    let mut refused = vec![
        "mv roots stolen",
        "rm -f roots",
        "echo 1 > .multiarc/tunables/max_bytes",
    ];
    if protected {
        refused.push("ln roots mylink");
    }
    for script in refused {
        let out = sh_as(65534, 65534, "", &mnt, script);
        assert!(!out.status.success(), "{script} succeeded as 65534");
    }
    assert_eq!(fs::read_to_string(b.join("roots")).unwrap(), "r");
    assert!(!b.join("stolen").exists() && !b.join("mylink").exists());

    // No setuid root file from another user: theirs stays theirs, and
    // giving it to root is refused.
    sh_as_ok(65534, 65534, "", &mnt, "echo x > mine; chmod 4755 mine");
    assert_eq!(owner(&b.join("mine")), (65534, 65534, 0o4755));
    let out = sh_as(65534, 65534, "", &mnt, "chown 0 mine");
    assert!(!out.status.success());
    assert_eq!(owner(&b.join("mine")).0, 65534);
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// Several users: a creating call that fails after the worker thread took the
/// caller's credentials (here: the backing filesystem has no inode left)
/// gives the thread back the daemon's (one thread serves every request,
/// so the next one, root's, runs on it); and users creating at once on
/// four threads each get their own files.
#[test]
fn credentials_are_restored_after_a_failure_and_kept_apart_under_concurrency() {
    let test = "credentials_are_restored_after_a_failure_and_kept_apart_under_concurrency";
    if !have(test, &["setpriv"]) || !root_or_skip(test) {
        return;
    }
    let dirs = Dirs::new("creds");
    let Some(small) = SmallFs::mount_with(test, &dirs, "size=16m,nr_inodes=64,mode=1777") else {
        return;
    };
    let b = dirs.backing();
    // A directory its owner (65534) cannot write in: only root's
    // CAP_DAC_OVERRIDE creates there.
    fs::create_dir(b.join("closed")).unwrap();
    std::os::unix::fs::chown(b.join("closed"), Some(65534), Some(65534)).unwrap();
    fs::set_permissions(
        b.join("closed"),
        std::os::unix::fs::PermissionsExt::from_mode(0o555),
    )
    .unwrap();
    let mut m = Mount::start(&dirs, &["--allow-other", "--threads", "1"]);
    let mnt = m.mnt.clone();
    // Use up the inodes (directly, not through the mount).
    let mut fill = 0;
    while File::create(b.join(format!("fill{fill}"))).is_ok() {
        fill += 1;
        assert!(fill < 1000, "tmpfs nr_inodes is not enforced");
    }
    for script in [": > new", "mkdir newd", "mkfifo newp", "ln -s x news"] {
        let out = sh_as(65534, 65534, "", &mnt, script);
        assert!(!out.status.success(), "{script} succeeded on a full tmpfs");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("No space left"),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Root's next call runs on the same thread: as root, with root's
        // capabilities (then the tmpfs is full again).
        let last = b.join(format!("fill{}", fill - 1));
        fs::remove_file(&last).unwrap();
        fs::write(mnt.join("closed/by-root"), "r").unwrap();
        let (uid, gid, _) = owner(&b.join("closed/by-root"));
        assert_eq!((uid, gid), (0, 0));
        fs::remove_file(mnt.join("closed/by-root")).unwrap();
        File::create(&last).unwrap();
    }
    for i in 0..fill {
        fs::remove_file(b.join(format!("fill{i}"))).unwrap();
    }
    assert!(m.unmount().success(), "{}", m.log_text());
    drop(small);

    // Four users (and root) creating at once through four threads.
    let mut m = Mount::start(&dirs, &["--allow-other", "--threads", "4"]);
    let mnt = m.mnt.clone();
    fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let users = [0u32, 65534, 65533, 4000, 4001];
    let workers: Vec<_> = users
        .iter()
        .map(|&u| {
            let mnt = mnt.clone();
            std::thread::spawn(move || {
                sh_as_ok(
                    u,
                    u,
                    "",
                    &mnt,
                    &format!(
                        "for i in $(seq 150); do : > f{u}-$i; mkdir d{u}-$i; \
                         ln -s f{u}-$i s{u}-$i; done"
                    ),
                );
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut seen = 0;
    for e in fs::read_dir(&b).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(u) = name
            .get(1..)
            .and_then(|r| r.split('-').next())
            .and_then(|u| u.parse::<u32>().ok())
        else {
            continue;
        };
        let (uid, gid, _) = owner(&b.join(&name));
        assert_eq!((uid, gid), (u, u), "{name}");
        seen += 1;
    }
    assert_eq!(seen, users.len() * 150 * 3);
    assert!(m.unmount().success(), "{}", m.log_text());
}

/// Several users: a user other than root gets `--allow-other` only where
/// /etc/fuse.conf has `user_allow_other` (one clear line otherwise); with
/// it, another user writes through the mount (what they create belongs to
/// the mount's user: only a root daemon can give it to them). The file is
/// replaced in a private mount namespace, never changed.
#[test]
fn non_root_allow_other_needs_user_allow_other() {
    let test = "non_root_allow_other_needs_user_allow_other";
    if !have(test, &["setpriv", "unshare", "mknod"]) || !root_or_skip(test) {
        return;
    }
    let dirs = Dirs::new("allowother");
    let base = dirs.base.clone();
    for d in ["logs", "dev", "conf"] {
        fs::create_dir(base.join(d)).unwrap();
    }
    fs::write(
        base.join("conf/no"),
        "# mount_max = 1000\n#user_allow_other\n",
    )
    .unwrap();
    fs::write(base.join("conf/yes"), "user_allow_other\n").unwrap();
    let chown = Command::new("chown")
        .args(["65534:65534"])
        .arg(dirs.backing())
        .arg(dirs.mnt())
        .arg(base.join("logs"))
        .status()
        .unwrap();
    assert!(chown.success());
    fs::set_permissions(
        dirs.backing(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let conf = Path::new("/etc/fuse.conf").exists();
    let script = format!(
        r#"set -e
N="setpriv --reuid=65534 --regid=65534 --clear-groups"
if [ -e /etc/fuse.conf ]; then mount --bind '{base}/conf/no' /etc/fuse.conf; fi
if $N '{bin}' mount --allow-other '{b}' '{m}' 2> '{base}/logs/refused'; then echo "mounted without user_allow_other"; exit 1; fi
[ -e /etc/fuse.conf ] || exit 0
umount /etc/fuse.conf
mount --bind '{base}/conf/yes' /etc/fuse.conf
mknod -m 666 '{base}/dev/open' c 10 229
mount --bind '{base}/dev/open' /dev/fuse
$N '{bin}' mount --allow-other '{b}' '{m}' --log '{base}/logs/mount.log'
setpriv --reuid=65533 --regid=65533 --clear-groups sh -c "echo other > '{m}/f'; cat '{m}/f'"
$N fusermount3 -u '{m}'
i=0
until grep -q 'everything written back' '{base}/logs/mount.log'; do
  i=$((i+1)); test $i -lt 600 || {{ echo "the daemon did not finish"; exit 1; }}; sleep 0.1
done
"#,
        base = base.display(),
        bin = BIN,
        b = dirs.backing().display(),
        m = dirs.mnt().display(),
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = fs::read_to_string(base.join("logs/mount.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}{}\nmount log:\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = fs::read_to_string(base.join("logs/refused")).unwrap();
    assert!(
        refused.contains("--allow-other") && refused.contains("user_allow_other"),
        "{refused}"
    );
    assert_eq!(refused.trim_end().lines().count(), 1, "{refused}");
    if !conf {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: {test}: no /etc/fuse.conf to replace: the mount with user_allow_other was not tried"
        );
        return;
    }
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "other");
    let (uid, gid, _) = owner(&dirs.backing().join("f"));
    assert_eq!((uid, gid), (65534, 65534));
}
