//! A mount run as a service: its Prometheus metrics (scraped by a real
//! Prometheus server), the live `multiarc stats --interval`, systemd's
//! readiness protocol, a mount from a line of fstab, SIGTERM under load,
//! and JSON logs.
//!
//! Needs /dev/fuse and fusermount3; the Prometheus test needs `prometheus`
//! (Debian's package), the fstab test root and mount.fuse3. Where one is
//! missing a test prints `SKIP:` and returns (with MULTIARC_REQUIRE_FUSE=1
//! or CI set, the Prometheus test fails instead).

mod mount_support;

use mount_support::{have_fuse, in_path, is_mounted, unmount_and_reap, wait_until_ready};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_multiarc");

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory with `backing/` and `mnt/`, removed at drop (unless
/// still mounted).
struct Dirs {
    base: PathBuf,
}

impl Dirs {
    fn new(tag: &str) -> Dirs {
        let base = std::env::temp_dir().join(format!(
            "multiarc-ops-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
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

    fn log(&self) -> PathBuf {
        self.base.join("mount.log")
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        if !is_mounted(&self.mnt()) {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

/// A `multiarc mount --foreground` child, unmounted and reaped at drop.
struct Mount {
    mnt: PathBuf,
    log: PathBuf,
    child: Child,
}

impl Mount {
    fn start(dirs: &Dirs, extra: &[&str], env: &[(&str, &Path)]) -> Mount {
        let mut cmd = Command::new(BIN);
        cmd.arg("mount")
            .arg(dirs.backing())
            .arg(dirs.mnt())
            .arg("--foreground")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dirs.log()).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("starting multiarc mount");
        wait_until_ready(&dirs.mnt(), &mut child, &dirs.log());
        Mount {
            mnt: dirs.mnt(),
            log: dirs.log(),
            child,
        }
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address `--metrics 127.0.0.1:0` chose, from the log.
    fn metrics_addr(&self) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.log_text();
            if let Some(rest) = text.split("serving metrics on http://").nth(1) {
                return rest.split('/').next().unwrap().parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "no metrics address in the log: {text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn arcstats(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for line in fs::read_to_string(self.mnt.join(".multiarc/arcstats"))
            .unwrap()
            .lines()
        {
            let (k, v) = line.split_once(' ').unwrap();
            out.entry(k.to_string()).or_insert(v.parse().unwrap());
        }
        out
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        unmount_and_reap(&self.mnt, &mut self.child, Duration::from_secs(20));
    }
}

/// The body of `GET path` on `addr` (HTTP/1.0, the whole answer).
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A metric's value in a scrape: the sample line `name{labels} value`.
fn sample(scrape: &str, name_and_labels: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The metrics table of docs/ops.md: arcstats name -> metric name.
fn documented_metrics() -> BTreeMap<String, String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ops.md");
    let text = fs::read_to_string(doc).expect("docs/ops.md");
    text.lines()
        .filter(|l| l.starts_with("| `") && l.matches('`').count() >= 4)
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let stat = cells.get(1)?.trim_matches('`');
            let metric = cells.get(2)?.trim_matches('`');
            metric
                .starts_with("multiarc_")
                .then(|| (stat.to_string(), metric.to_string()))
        })
        .collect()
}

/// Reads every file under `dir` once, `times` times over.
fn read_all(dir: &Path, times: usize) {
    for _ in 0..times {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                let _ = fs::read(&p).unwrap();
            }
        }
    }
}

#[test]
fn every_arcstats_figure_is_a_documented_metric_in_the_scrape() {
    if !have_fuse("every_arcstats_figure_is_a_documented_metric_in_the_scrape") {
        return;
    }
    let dirs = Dirs::new("scrape");
    fs::write(dirs.backing().join("f"), vec![7u8; 256 << 10]).unwrap();
    let m = Mount::start(&dirs, &["--metrics", "127.0.0.1:0"], &[]);
    read_all(&m.mnt, 2);
    let addr = m.metrics_addr();
    let (status, scrape) = http_get(addr, "/metrics");
    assert_eq!(status, 200, "{scrape}");
    let docs = documented_metrics();
    let stats = m.arcstats();
    assert!(stats.len() > 60, "{stats:?}");
    let mut missing = Vec::new();
    for stat in stats.keys() {
        match docs.get(stat) {
            None => missing.push(format!("{stat}: not in docs/ops.md")),
            Some(metric) if !scrape.contains(&format!("\n{metric}{{")) => {
                missing.push(format!("{stat}: {metric} not in the scrape"))
            }
            Some(_) => {}
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // The values are arcstats' (hits do not move while nothing reads).
    let hits = sample(&scrape, "multiarc_hits_total{component=\"cache\"}").unwrap();
    assert_eq!(hits as u64, m.arcstats()["hits"]);
    assert!(hits > 0.0, "the reads hit");
    for name in [
        "multiarc_fuse_operations_total{op=\"read\"}",
        "multiarc_fuse_operation_duration_seconds_count{op=\"read\"}",
        "multiarc_process_resident_memory_bytes{component=\"process\"}",
    ] {
        assert!(
            sample(&scrape, name).is_some_and(|v| v > 0.0),
            "{name}: {scrape}"
        );
    }
    assert_eq!(http_get(addr, "/").0, 404);
}

/// A query's one value from Prometheus's HTTP API.
fn promql(addr: SocketAddr, query: &str) -> Option<f64> {
    let mut encoded = String::new();
    for b in query.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    let (status, body) = http_get(addr, &format!("/api/v1/query?query={encoded}"));
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server on loopback scraping `target` every second; killed
/// at drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Prometheus {
    fn start(dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: multiarc\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("starting prometheus");
        let p = Prometheus { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !TcpStream::connect(addr).is_ok_and(|_| http_get(addr, "/-/ready").0 == 200) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready in 60 s: {}",
                fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_the_mount_and_its_hit_ratio_is_arcstats() {
    let test = "prometheus_scrapes_the_mount_and_its_hit_ratio_is_arcstats";
    if !have_fuse(test) {
        return;
    }
    if !in_path("prometheus") {
        let msg = format!("SKIP: {test}: prometheus not installed (Debian: prometheus)");
        if std::env::var_os("CI").is_some() {
            panic!("{msg} (CI is set)");
        }
        let _ = writeln!(std::io::stderr(), "{msg}");
        return;
    }
    let dirs = Dirs::new("prometheus");
    for i in 0..8 {
        fs::write(
            dirs.backing().join(format!("f{i}")),
            vec![i as u8; 200 << 10],
        )
        .unwrap();
    }
    let m = Mount::start(&dirs, &["--metrics", "127.0.0.1:0"], &[]);
    // The known workload: every file read three times (the first a miss
    // per block, then hits).
    read_all(&m.mnt, 3);
    let stats = m.arcstats();
    let (hits, misses) = (stats["hits"], stats["misses"]);
    assert!(hits > 0 && misses > 0, "{stats:?}");
    let prometheus = Prometheus::start(&dirs.base, m.metrics_addr());
    // Until a scrape after the workload is in.
    let hits_query = "multiarc_hits_total{component=\"cache\",job=\"multiarc\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    while promql(prometheus.addr, hits_query) != Some(hits as f64) {
        assert!(
            Instant::now() < deadline,
            "prometheus never saw hits = {hits}: {:?}",
            promql(prometheus.addr, hits_query)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let ratio = promql(
        prometheus.addr,
        "sum(multiarc_hits_total{component=\"cache\"}) / (sum(multiarc_hits_total{component=\"cache\"}) \
         + sum(multiarc_misses_total{component=\"cache\"}))",
    )
    .expect("the ratio query");
    let expected = hits as f64 / (hits + misses) as f64;
    assert!(
        (ratio - expected).abs() < 1e-12,
        "PromQL {ratio} against arcstats {expected} ({hits} hits, {misses} misses)"
    );
    // And a rate over the window sees the FUSE reads.
    let reads = promql(
        prometheus.addr,
        "sum(multiarc_fuse_operations_total{op=\"read\"})",
    )
    .expect("fuse reads");
    assert!(reads >= 24.0, "{reads}");
}

#[test]
fn stats_interval_prints_a_line_per_interval() {
    if !have_fuse("stats_interval_prints_a_line_per_interval") {
        return;
    }
    let dirs = Dirs::new("interval");
    fs::write(dirs.backing().join("f"), vec![1u8; 512 << 10]).unwrap();
    let m = Mount::start(&dirs, &[], &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, mnt) = (Arc::clone(&stop), m.mnt.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                read_all(&mnt, 1);
            }
        })
    };
    let out = Command::new(BIN)
        .args(["stats", "--interval", "300ms", "--count", "3", "--json"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let reads: u64 = lines.iter().map(|l| l["reads"].as_u64().unwrap()).sum();
    assert!(reads > 0, "{text}");
    for l in &lines {
        assert!(l["c"].as_u64().unwrap() > 0 && l["time"].is_string(), "{l}");
        assert!(
            l["store_requests"].is_null(),
            "a directory mount has no store"
        );
    }
    // The table: a header, then the lines.
    let out = Command::new(BIN)
        .args(["stats", "--interval", "100ms", "--count", "2"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with("    time"), "{text}");
    // An interval that means nothing is refused in one line.
    let out = Command::new(BIN)
        .args(["stats", "--interval", "0"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_daemon_tells_systemd_when_it_is_ready_and_when_it_stops() {
    if !have_fuse("the_daemon_tells_systemd_when_it_is_ready_and_when_it_stops") {
        return;
    }
    let dirs = Dirs::new("notify");
    let socket = dirs.base.join("notify.sock");
    let listener = UnixDatagram::bind(&socket).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut m = Mount::start(&dirs, &[], &[("NOTIFY_SOCKET", socket.as_path())]);
    let mut buf = [0u8; 256];
    let n = listener.recv(&mut buf).expect("READY=1 within 30 s");
    assert_eq!(&buf[..n], b"READY=1");
    // SIGTERM: the daemon says it stops, unmounts, and exits 0.
    let pid = m.child.id() as i32;
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let n = listener.recv(&mut buf).expect("STOPPING=1 within 30 s");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = m.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running: {}", m.log_text());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}: {}", m.log_text());
    assert!(!is_mounted(&m.mnt));
}

#[test]
fn json_logs_are_one_object_per_line() {
    if !have_fuse("json_logs_are_one_object_per_line") {
        return;
    }
    let dirs = Dirs::new("jsonlog");
    let m = Mount::start(&dirs, &["--log-format", "json"], &[]);
    drop(m);
    let text = fs::read_to_string(dirs.log()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["level"] == "info"
            && l["message"].as_str().unwrap().starts_with("mounted ")
            && l["time"].as_str().unwrap().ends_with('Z')),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["message"].as_str().unwrap().starts_with("unmounted ")),
        "{text}"
    );
}

/// Writer `i`'s byte at `offset`.
fn pattern(i: usize, offset: u64) -> u8 {
    (i as u64 * 31 + offset / 4096 * 7 + offset % 251) as u8
}

#[test]
fn sigterm_under_8_writers_and_8_readers_loses_no_acknowledged_byte() {
    if !have_fuse("sigterm_under_8_writers_and_8_readers_loses_no_acknowledged_byte") {
        return;
    }
    let dirs = Dirs::new("sigterm");
    for i in 0..8 {
        fs::write(dirs.backing().join(format!("r{i}")), vec![i as u8; 1 << 20]).unwrap();
    }
    let mut m = Mount::start(&dirs, &["--max-bytes", "16MiB", "--dirty-max", "8MiB"], &[]);
    let stop = Arc::new(AtomicBool::new(false));
    const CHUNK: usize = 32 << 10;
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (stop, path) = (Arc::clone(&stop), m.mnt.join(format!("w{i}")));
            std::thread::spawn(move || -> u64 {
                let f = File::create(&path).unwrap();
                let (mut offset, mut acked) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let chunk: Vec<u8> =
                        (0..CHUNK as u64).map(|k| pattern(i, offset + k)).collect();
                    if f.write_all_at(&chunk, offset).is_err() {
                        break;
                    }
                    offset += CHUNK as u64;
                    if offset % (4 * CHUNK as u64) == 0 {
                        if f.sync_all().is_err() {
                            break;
                        }
                        acked = offset;
                    }
                }
                // close(2) acknowledges what it flushes: sync first, as a
                // program that checks its close would.
                if f.sync_all().is_ok() {
                    acked = offset;
                }
                drop(f);
                acked
            })
        })
        .collect();
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let (stop, path) = (Arc::clone(&stop), m.mnt.join(format!("r{i}")));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(f) = File::open(&path) else { break };
                    if let Ok(n) = f.read_at(&mut buf, 0) {
                        assert!(
                            buf[..n].iter().all(|&b| b == i as u8),
                            "r{i} read wrong bytes"
                        );
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(m.child.id() as i32, libc::SIGTERM) }, 0);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for r in readers {
        r.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = m.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running: {}", m.log_text());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}: {}", m.log_text());
    assert!(!is_mounted(&m.mnt));
    let mut total = 0;
    for (i, &acked) in acked.iter().enumerate() {
        let data = fs::read(dirs.backing().join(format!("w{i}"))).unwrap();
        assert!(
            data.len() as u64 >= acked,
            "w{i}: {} bytes in the backing file, {acked} acknowledged",
            data.len()
        );
        let wrong = (0..acked).find(|&o| data[o as usize] != pattern(i, o));
        assert_eq!(
            wrong, None,
            "w{i}: a wrong byte below the acknowledged {acked}"
        );
        total += acked;
    }
    assert!(total > 0, "the writers wrote nothing: {}", m.log_text());
}

#[test]
fn a_line_of_fstab_mounts_with_mount_a_and_serves_as_the_command_does() {
    let test = "a_line_of_fstab_mounts_with_mount_a_and_serves_as_the_command_does";
    if !have_fuse(test) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/sbin/mount.fuse3").exists() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: {test}: needs root and /sbin/mount.fuse3"
        );
        return;
    }
    let dirs = Dirs::new("fstab");
    fs::write(dirs.backing().join("old"), b"from before the mount").unwrap();
    // For the type fuse.NAME, mount.fuse3 runs NAME through /bin/sh with
    // the standard PATH (mount(8) drops the caller's): this binary under a
    // name of this test's own in /usr/local/bin, removed at the end (a
    // `multiarc` installed there is left alone).
    let name = format!("multiarc-fstab-test-{}", std::process::id());
    let link = PathBuf::from("/usr/local/bin").join(&name);
    let _ = fs::remove_file(&link);
    fs::create_dir_all("/usr/local/bin").unwrap();
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    struct Removed(PathBuf);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = fs::remove_file(&self.0);
        }
    }
    let _link = Removed(link);
    let fstab = dirs.base.join("fstab");
    fs::write(
        &fstab,
        format!(
            "# a test fstab\n{} {} fuse.{name} defaults,nofail,max_bytes=32MiB,log={},x-systemd.requires=network.target 0 0\n",
            dirs.backing().display(),
            dirs.mnt().display(),
            dirs.log().display()
        ),
    )
    .unwrap();
    let mount_a = |fstab: &Path| {
        Command::new("mount")
            .arg("-a")
            .arg("-T")
            .arg(fstab)
            .output()
            .unwrap()
    };
    let out = mount_a(&fstab);
    assert!(
        out.status.success(),
        "mount -a: {}{}",
        String::from_utf8_lossy(&out.stderr),
        fs::read_to_string(dirs.log()).unwrap_or_default()
    );
    let mnt = dirs.mnt();
    assert!(
        is_mounted(&mnt),
        "mount -a returned before the mount was there"
    );
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == mnt.canonicalize().unwrap().to_str())
        .unwrap();
    assert!(line.contains(" - fuse"), "{line}");
    assert!(
        line.contains(&format!("multiarc:{}", dirs.backing().display())),
        "{line}"
    );
    // What the command's mount does: reads, writes, renames, fsync, the
    // control files, and every byte written back at the unmount.
    assert_eq!(fs::read(mnt.join("old")).unwrap(), b"from before the mount");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(mnt.join("new"), &data).unwrap();
    fs::rename(mnt.join("new"), mnt.join("renamed")).unwrap();
    File::open(mnt.join("renamed")).unwrap().sync_all().unwrap();
    assert_eq!(fs::read(mnt.join("renamed")).unwrap(), data);
    let out = Command::new(BIN)
        .arg("stats")
        .arg("--json")
        .arg(&mnt)
        .output()
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["c"], 32 << 20, "max_bytes=32MiB from the fstab line");
    let out = Command::new("umount").arg(&mnt).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while is_mounted(&mnt) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(fs::read(dirs.backing().join("renamed")).unwrap(), data);
    // A line with an option the mount does not know fails in one line.
    fs::write(
        &fstab,
        format!(
            "{} {} fuse.{name} defaults,no_such_option=1 0 0\n",
            dirs.backing().display(),
            dirs.mnt().display()
        ),
    )
    .unwrap();
    let out = mount_a(&fstab);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--no-such-option"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_mounted(&mnt));
}
