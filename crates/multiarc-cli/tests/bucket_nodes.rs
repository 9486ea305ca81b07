//! Several nodes: `multiarc mount s3://bucket` daemons, each its own
//! process, each through a different node of a three-node Garage cluster
//! on loopback, while files are replaced (through a mount with
//! --allow-overwrite, and directly in the bucket). Every file's contents
//! name the file and the version in each 8 bytes, and every length is the
//! version's own, so a reader can tell a torn or mixed read from a whole
//! one: readers read whole files and ranges over and over and must only
//! ever see one whole version per open, never an older version than one
//! they already saw (a mount's opens go forwards), and, after the last
//! write and the metadata TTL, the last version.
//!
//! Needs garage (`.ci/run` installs it; skipped where absent unless CI is
//! set), /dev/fuse and fusermount3 (skipped where absent unless
//! MULTIARC_REQUIRE_FUSE=1). Only with the `bucket` feature (a default one).

#![cfg(feature = "bucket")]

#[path = "../../multiarc-object-store/tests/garage_common/mod.rs"]
mod garage_common;
mod mount_support;

use garage_common::{identify, start_garage, version_bytes, S3Target};
use mount_support::{have_fuse, unmount_and_reap, wait_until_ready};
use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt, PutPayload};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_multiarc");

/// The files replaced while read.
const FILES: u8 = 3;
/// The metadata TTL of every mount.
const TTL_MS: u64 = 300;

/// The size of version `version` of file `file`: a whole number of words,
/// different for every version (so a length names its version too), and
/// spanning several 64 KiB blocks.
fn size_of(file: u8, version: u16) -> u64 {
    200_000 / 8 * 8 + u64::from(file) * 4096 + u64::from(version) * 1024
}

fn contents(file: u8, version: u16) -> Vec<u8> {
    version_bytes(file, version, 0..size_of(file, version))
}

fn name_of(file: u8) -> String {
    format!("shared/f{file}")
}

/// `multiarc mount s3://BUCKET MNT --foreground` through one node;
/// unmounted (and the process ended) at drop.
struct Mount {
    mnt: PathBuf,
    log: PathBuf,
    child: Child,
}

impl Mount {
    fn start(target: &S3Target, dir: &Path, name: &str, extra: &[&str]) -> Mount {
        let mnt = dir.join(name);
        fs::create_dir_all(&mnt).unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(BIN)
            .arg("mount")
            .arg(format!("s3://{}", target.bucket))
            .arg(&mnt)
            .args(["--endpoint", &target.endpoint, "--region", &target.region])
            .args([
                "--foreground",
                "--max-bytes",
                "64MiB",
                "--block-size",
                "64KiB",
            ])
            .args(["--metadata-ttl", &format!("{TTL_MS}ms")])
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", &target.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &target.secret_access_key)
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_REGION")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("starting multiarc mount");
        let mut m = Mount { mnt, log, child };
        wait_until_ready(&m.mnt, &mut m.child, &m.log);
        m
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        unmount_and_reap(&self.mnt, &mut self.child, Duration::from_secs(10));
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Reads file `file` through `mnt` once: the whole file with one handle,
/// then, through a second handle, ranges across block boundaries, all of
/// one version. Returns the versions seen (whole, ranges), `None` where a
/// read failed with `ESTALE` (the file was replaced since the handle's
/// open, whose version is no longer in the store: the documented answer,
/// never the new bytes) or an open with `EBUSY` (on the writer's mount,
/// while it writes the file: also documented), or what was wrong.
fn read_once(mnt: &Mount, file: u8, round: u64) -> Result<Option<(u16, u16)>, String> {
    let path = mnt.path(&name_of(file));
    let stale = |e: &std::io::Error| {
        e.raw_os_error() == Some(libc::ESTALE) || e.raw_os_error() == Some(libc::EBUSY)
    };
    let whole = match fs::read(&path) {
        Ok(w) => w,
        Err(e) if stale(&e) => return Ok(None),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let whole_version = identify(&whole, file, 0..whole.len() as u64)?;
    if whole.len() as u64 != size_of(file, whole_version) {
        return Err(format!(
            "f{file}: {} bytes, all of version {whole_version}, whose size is {} (a short or \
             long read)",
            whole.len(),
            size_of(file, whole_version)
        ));
    }
    let handle = match File::open(&path) {
        Ok(h) => h,
        Err(e) if stale(&e) => return Ok(None),
        Err(e) => return Err(format!("opening {}: {e}", path.display())),
    };
    // Ranges within the smallest version (sizes grow with the version).
    // Not the handle's fstat size: the kernel keeps an inode's attributes
    // for the TTL, so right after an open that found a new version, fstat
    // can still give the old version's size (seen here; see the report).
    let len = size_of(file, 0);
    let mut handle_version = None;
    for k in 0..6u64 {
        // Offsets spread over the file, crossing 64 KiB blocks.
        let start = ((round * 7919 + k * 65_521) % len.max(1)) / 8 * 8;
        let end = (start + 1000 + (k * 37_000) % 90_000).min(len);
        if end <= start + 8 {
            continue;
        }
        let mut buf = vec![0u8; (end - start) as usize];
        match handle.read_exact_at(&mut buf, start) {
            Ok(()) => {}
            Err(e) if stale(&e) => return Ok(None),
            Err(e) => return Err(format!("f{file} range {start}..{end}: {e}")),
        }
        let v = identify(&buf, file, start..end)?;
        match handle_version {
            None => handle_version = Some(v),
            Some(h) if h != v => {
                return Err(format!(
                    "f{file}: one handle read version {h}, then version {v}"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(Some((
        whole_version,
        handle_version.unwrap_or(whole_version),
    )))
}

#[test]
fn mounts_on_three_garage_nodes_see_each_others_writes_whole_never_mixed() {
    let test = "mounts_on_three_garage_nodes_see_each_others_writes_whole_never_mixed";
    if !have_fuse(test) {
        return;
    }
    let Some(garage) = start_garage(3) else {
        return;
    };
    let targets: Vec<S3Target> = (0..3).map(|n| S3Target::of(&garage, n)).collect();
    let direct = targets[1].client();
    let put = |file: u8, version: u16| {
        rt().block_on(direct.put(
            &StorePath::from(name_of(file)),
            PutPayload::from(contents(file, version)),
        ))
        .expect("put");
    };
    for f in 0..FILES {
        put(f, 0);
    }
    let dir = tempfile::tempdir().unwrap();
    // The writer's mount on node 0; readers on nodes 1 and 2 (and the
    // writer's own mount reads too).
    let writer = Mount::start(&targets[0], dir.path(), "n0", &["--allow-overwrite"]);
    let readers = [
        Mount::start(&targets[1], dir.path(), "n1", &[]),
        Mount::start(&targets[2], dir.path(), "n2", &[]),
    ];
    // Every mount reads version 0 of every file first.
    for m in readers.iter().chain([&writer]) {
        for f in 0..FILES {
            assert_eq!(read_once(m, f, 0), Ok(Some((0, 0))), "{}", m.log_text());
        }
    }
    let last: u16 = 12;
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let newer_seen = Arc::new(AtomicU64::new(0));
    let stale_reads = Arc::new(AtomicU64::new(0));
    let outcome = std::thread::scope(|s| {
        let mut readers_running = Vec::new();
        for m in readers.iter().chain([&writer]) {
            let (done, reads, newer_seen, stale_reads) = (&done, &reads, &newer_seen, &stale_reads);
            readers_running.push(s.spawn(move || -> Result<(), String> {
                let mut seen = [0u16; FILES as usize];
                let mut round = 0u64;
                while !done.load(Ordering::Acquire) {
                    round += 1;
                    let f = (round % u64::from(FILES)) as u8;
                    let Some((whole, ranged)) =
                        read_once(m, f, round).map_err(|e| format!("{}: {e}", m.mnt.display()))?
                    else {
                        stale_reads.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    for v in [whole, ranged] {
                        if v < seen[f as usize] {
                            return Err(format!(
                                "{}: f{f} read as version {v} after version {}",
                                m.mnt.display(),
                                seen[f as usize]
                            ));
                        }
                        if v > seen[f as usize] {
                            newer_seen.fetch_add(1, Ordering::Relaxed);
                        }
                        seen[f as usize] = v;
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }));
        }
        // Versions 1..=last, alternately through the writer's mount
        // (O_TRUNC, written sequentially, uploaded at close) and directly
        // in the bucket through node 1.
        for v in 1..=last {
            for f in 0..FILES {
                if v % 2 == 1 {
                    fs::write(writer.path(&name_of(f)), contents(f, v)).unwrap_or_else(|e| {
                        panic!(
                            "writing f{f} v{v} through the mount: {e}: {}",
                            writer.log_text()
                        )
                    });
                } else {
                    put(f, v);
                }
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        done.store(true, Ordering::Release);
        readers_running
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect::<Result<Vec<()>, String>>()
    });
    if let Err(e) = outcome {
        panic!("{e}\n{}\n{}", writer.log_text(), garage.log_tail());
    }
    let reads = reads.load(Ordering::Relaxed);
    assert!(
        reads >= 30,
        "only {reads} reads while the files were replaced"
    );
    assert!(
        newer_seen.load(Ordering::Relaxed) > 0,
        "no reader saw a new version while the files were replaced"
    );
    // After the TTL every mount's next open is the last version.
    std::thread::sleep(Duration::from_millis(TTL_MS + 200));
    for m in readers.iter().chain([&writer]) {
        for f in 0..FILES {
            assert_eq!(
                read_once(m, f, 1),
                Ok(Some((last, last))),
                "{} after the TTL",
                m.mnt.display()
            );
        }
    }
    // A file made through a reader's mount is listed and read whole by the
    // others after the TTL.
    let fresh = contents(9, 1);
    fs::write(readers[0].path("shared/fresh"), &fresh).unwrap();
    std::thread::sleep(Duration::from_millis(TTL_MS + 200));
    for m in [&readers[1], &writer] {
        let names: Vec<String> = fs::read_dir(m.path("shared"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.contains(&"fresh".to_string()), "{names:?}");
        assert!(fs::read(m.path("shared/fresh")).unwrap() == fresh);
    }
    eprintln!(
        "{test}: {reads} whole-file and ranged reads by 3 mounts ({} ESTALE on a replaced \
         file's open handle or EBUSY while the writer's mount wrote it) while {last} versions of {FILES} files were written",
        stale_reads.load(Ordering::Relaxed)
    );
}
