//! What the tests of `multiarc mount s3://...` (bucket_mount.rs,
//! bucket_nodes.rs) share: whether FUSE is usable, waiting for a mount
//! daemon to be ready, and unmounting it and ending its process.

#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `name` is an executable file in `PATH`.
pub fn in_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(name).is_file())
}

/// Whether FUSE is usable here; prints a SKIP line if not (and fails
/// instead with MULTIARC_REQUIRE_FUSE=1).
pub fn have_fuse(test: &str) -> bool {
    if Path::new("/dev/fuse").exists() && in_path("fusermount3") {
        return true;
    }
    let msg = format!("SKIP: {test}: /dev/fuse or fusermount3 not available (install fuse3)");
    if std::env::var_os("MULTIARC_REQUIRE_FUSE").is_some_and(|v| v == "1") {
        panic!("{msg} (MULTIARC_REQUIRE_FUSE=1)");
    }
    let _ = writeln!(std::io::stderr(), "{msg}");
    false
}

/// Whether something is mounted on `mnt` (this process's mount table).
pub fn is_mounted(mnt: &Path) -> bool {
    let canon = mnt.canonicalize().unwrap_or_else(|_| mnt.to_path_buf());
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == canon.to_str())
}

/// Waits (20 s at most) until the mount daemon `child` serves `mnt`
/// (its `.multiarc/arcstats` answers); panics with its log (`log`) if it
/// exits or takes longer.
pub fn wait_until_ready(mnt: &Path, child: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !mnt.join(".multiarc/arcstats").is_file() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "multiarc mount exited with {status}: {}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not mounted in 20 s: {}",
            fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Unmounts `mnt` (`fusermount3 -u`, retried while busy, then lazily) and
/// waits up to `within` for the daemon `child` to exit, then kills it.
pub fn unmount_and_reap(mnt: &Path, child: &mut Child, within: Duration) {
    for _ in 0..50 {
        if !is_mounted(mnt) {
            break;
        }
        let ok = Command::new("fusermount3")
            .arg("-u")
            .arg(mnt)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if is_mounted(mnt) {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(mnt)
            .stderr(Stdio::null())
            .status();
    }
    let deadline = Instant::now() + within;
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The figure `name` of the mount at `mnt`, from its `.multiarc/arcstats`.
pub fn arcstat(mnt: &Path, name: &str) -> u64 {
    let text = fs::read_to_string(mnt.join(".multiarc/arcstats")).unwrap();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {name} in arcstats:\n{text}"))
}
