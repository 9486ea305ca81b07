//! pjdfstest, the POSIX filesystem test suite, on `multiarc mount
//! --allow-other` (a mount several users share): every subtest must pass, as on ext4.
//!
//! pjdfstest is not part of the project: its source is the tarball in
//! `../shared/pjdfstest/` beside the checkout, built here into a temporary
//! directory (autoconf, automake, a C compiler, make), and run with `prove`
//! (perl) as root, since it acts as other users. Where any of that is
//! missing the test prints a `SKIP:` line and returns (with
//! MULTIARC_REQUIRE_FUSE=1 a missing tool or device fails it instead; a
//! missing `../shared` always skips). The run takes about 4 minutes here.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_multiarc");

/// Runs of prove at once, on disjoint sets of pjdfstest's directories.
const GROUPS: usize = 4;

fn skip(test: &str, why: &str, required: bool) {
    let msg = format!("SKIP: {test}: {why}");
    if required && std::env::var_os("MULTIARC_REQUIRE_FUSE").is_some_and(|v| v == "1") {
        panic!("{msg} (MULTIARC_REQUIRE_FUSE=1)");
    }
    // Straight to stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn in_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(name).is_file())
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn is_mounted(mnt: &Path) -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == mnt.to_str())
}

/// Runs a shell command in `dir`; panics with its output if it fails.
fn run(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temporary directory holding the pjdfstest build, the backing
/// directory and the mountpoint; unmounts and removes them at drop.
struct Scratch {
    base: PathBuf,
}

impl Scratch {
    fn mnt(&self) -> PathBuf {
        self.base.join("mnt")
    }

    /// Unmounts (retrying while busy) and waits until the mount process
    /// has written everything back and exited.
    fn unmount(&self) -> bool {
        let mnt = self.mnt();
        for _ in 0..100 {
            if !is_mounted(&mnt) {
                break;
            }
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg(&mnt)
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(100));
        }
        if is_mounted(&mnt) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&mnt).status();
            return false;
        }
        let log = self.base.join("mount.log");
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("everything written back")
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.unmount();
        if !is_mounted(&self.mnt()) {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

/// The `Files=…, Tests=N` count of prove's summary.
fn tests_run(summary: &str) -> Option<u64> {
    let line = summary.lines().rev().find(|l| l.starts_with("Files="))?;
    let tests = line.split(", ").find_map(|f| f.strip_prefix("Tests="))?;
    tests.trim().parse().ok()
}

#[test]
fn pjdfstest_passes_on_the_mount_with_allow_other() {
    let test = "pjdfstest_passes_on_the_mount_with_allow_other";
    let tarball = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/pjdfstest/pjdfstest-src.tar.gz");
    if !tarball.is_file() {
        return skip(
            test,
            &format!("{} not found (pjdfstest's source)", tarball.display()),
            false,
        );
    }
    let mut missing: Vec<&str> = [
        "autoreconf",
        "automake",
        "cc",
        "make",
        "prove",
        "fusermount3",
    ]
    .into_iter()
    .filter(|t| !in_path(t))
    .collect();
    if !Path::new("/dev/fuse").exists() {
        missing.push("/dev/fuse");
    }
    if !missing.is_empty() {
        return skip(
            test,
            &format!(
                "{} not available (install autoconf automake gcc make perl fuse3)",
                missing.join(", ")
            ),
            true,
        );
    }
    if !is_root() {
        return skip(test, "needs root (pjdfstest acts as other users)", true);
    }

    let scratch = Scratch {
        base: std::env::temp_dir().join(format!("multiarc-pjdfstest-{}", std::process::id())),
    };
    let base = &scratch.base;
    let _ = fs::remove_dir_all(base);
    for d in ["src", "backing", "mnt"] {
        fs::create_dir_all(base.join(d)).unwrap();
    }
    let src = base.join("src");
    let started = Instant::now();
    run(
        &src,
        &format!(
            "tar -xzf '{}' && autoreconf -ifs >/dev/null 2>&1 && ./configure >/dev/null \
             && make pjdfstest >/dev/null",
            tarball.display()
        ),
    );
    let built = started.elapsed();

    let mount = Command::new(BIN)
        .arg("mount")
        .arg(base.join("backing"))
        .arg(scratch.mnt())
        .arg("--allow-other")
        .arg("--log")
        .arg(base.join("mount.log"))
        .output()
        .expect("running multiarc mount");
    assert!(
        mount.status.success(),
        "multiarc mount --allow-other failed: {}",
        String::from_utf8_lossy(&mount.stderr)
    );
    // The syscall directories (chmod, chown, ..., utimensat) in GROUPS
    // runs of prove at once, each from a fresh directory of its own inside
    // the mount, as pjdfstest's README asks (its tests look at their
    // directory's times and entries, so two runs never share one). The
    // mount serves them concurrently; the run takes half the time.
    let mut dirs: Vec<PathBuf> = fs::read_dir(src.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let runs: Vec<_> = (0..GROUPS)
        .map(|g| {
            let work = scratch.mnt().join(format!("work{g}"));
            fs::create_dir(&work).unwrap();
            let mine: Vec<PathBuf> = dirs.iter().skip(g).step_by(GROUPS).cloned().collect();
            std::thread::spawn(move || {
                Command::new("prove")
                    .arg("-r")
                    .args(&mine)
                    .current_dir(&work)
                    .stdin(Stdio::null())
                    .output()
                    .expect("running prove")
            })
        })
        .collect();
    let outputs: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    let ran = started.elapsed() - built;
    let mut n = 0;
    let mut failed = String::new();
    for out in &outputs {
        let stdout = String::from_utf8_lossy(&out.stdout);
        n += tests_run(&stdout).unwrap_or(0);
        if !(out.status.success() && stdout.lines().any(|l| l == "Result: PASS")) {
            // prove's report of the files with failures.
            let report = stdout
                .split_once("Test Summary Report")
                .map_or(&*stdout, |(_, r)| r);
            failed.push_str(report);
            failed.push_str(&String::from_utf8_lossy(&out.stderr));
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "pjdfstest: built in {:.0} s, ran in {:.0} s ({GROUPS} runs of prove at once): \
         {n} subtests, {}",
        built.as_secs_f64(),
        ran.as_secs_f64(),
        if failed.is_empty() {
            "all passed"
        } else {
            "some failed"
        }
    );
    assert!(
        scratch.unmount(),
        "the mount did not unmount cleanly: {}",
        fs::read_to_string(base.join("mount.log")).unwrap_or_default()
    );
    assert!(
        failed.is_empty(),
        "pjdfstest failed on the mount:\n{failed}\nmount log:\n{}",
        fs::read_to_string(base.join("mount.log")).unwrap_or_default()
    );
    // (About 8,800 here: a run that found no tests must not pass.)
    assert!(n > 1000, "pjdfstest ran only {n} subtests");
}
