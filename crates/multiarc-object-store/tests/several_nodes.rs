//! Several nodes, real processes: reader processes, each with its own
//! `CachedStore` (memory only, metadata TTL 1 s), read one bucket of a
//! three-node Garage cluster on loopback, each through another node,
//! while a writer process rewrites the objects through a fourth client.
//!
//! Every version's bytes name (object, version, word index) in each 8
//! bytes, so a reader checks every read it makes: whole reads, ranged
//! reads that span blocks, and two-range reads (which must be of one
//! version together). The checks: no read returns a mix of versions or
//! short bytes; once the writer's last rewrite of an object returned, each
//! reader serves the new version within the TTL (plus a margin for a HEAD's
//! round trip): a read that starts later than that returns it; and every
//! process exits 0. The observed staleness (from the last rewrite's
//! return to the end of the last read that still returned an older
//! version) is measured and printed.
//!
//! The file has its own `main` (`harness = false`): run plainly it is the
//! coordinator (it starts Garage, the readers and the writer); re-executed
//! with `MULTIARC_NODE_ROLE=reader` or `writer` it plays that part. It
//! skips where the `garage` binary is absent, unless `CI` is set.

mod garage_common;

use garage_common::{identify, start_garage, version_bytes, S3Target};
use multiarc_object_store::CachedStore;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::BTreeMap;
use std::ops::Range;
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TEST_NAME: &str = "several_reader_processes_see_whole_versions_within_the_ttl";
const ROLE: &str = "MULTIARC_NODE_ROLE";
const RUN_DIR: &str = "MULTIARC_NODE_RUN_DIR";
const READER: &str = "MULTIARC_NODE_READER";
const ENDPOINT: &str = "MULTIARC_NODE_ENDPOINT";
const REGION: &str = "MULTIARC_NODE_REGION";
const BUCKET: &str = "MULTIARC_NODE_BUCKET";
const KEY_ID: &str = "MULTIARC_NODE_KEY_ID";
const SECRET: &str = "MULTIARC_NODE_SECRET";

const READERS: usize = 3;
const OBJECTS: u8 = 4;
const BLOCK: u64 = 16 << 10;
/// Not a multiple of the block size: the last block is short.
const SIZE: u64 = 12 * BLOCK + 1000;
/// The writer writes versions 1..=FINAL of every object (0 is the first).
const FINAL: u16 = 6;
/// The writer's pause between two rounds of rewrites.
const WRITER_PAUSE: Duration = Duration::from_millis(250);
const TTL: Duration = Duration::from_secs(1);
/// Beyond the TTL: one HEAD's round trip and scheduling on a loaded
/// machine. A read that starts after the last write's return + TTL is
/// already bound to see the new version (its metadata is at most a TTL
/// old, timed from when the HEAD was sent); this margin bounds how late a
/// read returning an older version may end.
const MARGIN: Duration = Duration::from_millis(500);
/// Memory for blocks: reader 0's holds every object (the four take 0.8
/// MB), so mostly its metadata's expiry shows it a rewrite (the TTL's
/// bound); the others' holds a third of them, so blocks are evicted and fetched
/// again while the metadata names an older version, and the conditional
/// fetches meet rewrites.
fn reader_memory(reader: u64) -> u64 {
    if reader == 0 {
        4 << 20
    } else {
        256 << 10
    }
}
/// Between the cache's clock (monotonic) and the wall clock the processes
/// share, in milliseconds.
const CLOCK_SLOP_MS: f64 = 25.0;
/// How long any one phase may take before the test fails.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

fn main() -> ExitCode {
    match std::env::var(ROLE).as_deref() {
        Ok("reader") => role_exit("reader", reader()),
        Ok("writer") => role_exit("writer", writer()),
        Ok(other) => {
            eprintln!("{ROLE}={other}: not a role (reader or writer)");
            ExitCode::FAILURE
        }
        Err(_) => coordinator(),
    }
}

fn role_exit(role: &str, result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{role} {}: {e}", std::env::var(READER).unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}

/// Milliseconds since the Unix epoch: one clock for every process here.
fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64()
        * 1000.0
}

fn object_path(object: u8) -> Path {
    Path::from(format!("table/part-{object}.bin"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn target_from_env() -> Result<S3Target, String> {
    Ok(S3Target {
        endpoint: env(ENDPOINT)?,
        region: env(REGION)?,
        bucket: env(BUCKET)?,
        access_key_id: env(KEY_ID)?,
        secret_access_key: env(SECRET)?,
    })
}

/// Writes `text` to `path` whole (through a temporary file and a rename),
/// so a reader of `path` never sees part of it.
fn write_whole(path: &std::path::Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("renaming to {}: {e}", path.display()))
}

/// Lines `key value...` of a file written by [`write_whole`].
fn read_lines(path: &std::path::Path) -> Option<Vec<Vec<String>>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect(),
    )
}

// ---- the writer ----

/// Rewrites every object with versions 1..=FINAL, a round at a time, then
/// writes `done`: for each object, when its last rewrite returned.
fn writer() -> Result<(), String> {
    let run_dir = std::path::PathBuf::from(env(RUN_DIR)?);
    let client = target_from_env()?.client();
    let mut done = BTreeMap::new();
    runtime().block_on(async {
        for version in 1..=FINAL {
            for object in 0..OBJECTS {
                let bytes = version_bytes(object, version, 0..SIZE);
                client
                    .put(&object_path(object), PutPayload::from(bytes))
                    .await
                    .map_err(|e| format!("put of object {object} version {version}: {e}"))?;
                if version == FINAL {
                    done.insert(object, now_ms());
                }
            }
            if version < FINAL {
                tokio::time::sleep(WRITER_PAUSE).await;
            }
        }
        Ok::<(), String>(())
    })?;
    let text: String = done
        .iter()
        .map(|(object, at)| format!("{object} {at:.3}\n"))
        .collect();
    write_whole(&run_dir.join("done"), &text)
}

// ---- a reader ----

/// One read a reader made.
struct Read {
    object: u8,
    start_ms: f64,
    end_ms: f64,
    /// The version it returned, all of it (`None`: a `Precondition`
    /// error, the object changed three times under the read).
    version: Option<u16>,
}

/// A small generator for the reads' shapes.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A range spanning two or three blocks (at least 16 bytes, so it holds a
/// whole word to identify).
fn spanning_range(rng: &mut Xorshift) -> Range<u64> {
    let start = rng.below(SIZE - 2 * BLOCK);
    let len = BLOCK + 1 + rng.below(2 * BLOCK);
    start..(start + len).min(SIZE)
}

/// One read of `object` of a shape `rng` picks, checked: the version all
/// of its bytes are.
async fn read_once(
    store: &CachedStore<object_store::aws::AmazonS3>,
    object: u8,
    rng: &mut Xorshift,
) -> Result<Option<u16>, String> {
    let path = object_path(object);
    let shape = rng.below(4);
    let result = match shape {
        0 => match store.get(&path).await {
            Ok(r) => r.bytes().await.map(|b| vec![(0..SIZE, b)]),
            Err(e) => Err(e),
        },
        1 | 2 => {
            let range = spanning_range(rng);
            store
                .get_range(&path, range.clone())
                .await
                .map(|b| vec![(range, b)])
        }
        _ => {
            let ranges = vec![spanning_range(rng), spanning_range(rng)];
            store
                .get_ranges(&path, &ranges)
                .await
                .map(|got| ranges.into_iter().zip(got).collect())
        }
    };
    let pieces = match result {
        Ok(pieces) => pieces,
        Err(object_store::Error::Precondition { .. }) => return Ok(None),
        Err(e) => return Err(format!("a read of object {object} failed: {e}")),
    };
    let mut version = None;
    for (range, bytes) in &pieces {
        let v = identify(bytes, object, range.clone())?;
        if v > FINAL {
            return Err(format!("object {object}: version {v} was never written"));
        }
        if version.is_some_and(|seen| seen != v) {
            return Err(format!(
                "object {object}: one get_ranges returned versions {} and {v}",
                version.unwrap_or_default()
            ));
        }
        version = Some(v);
    }
    Ok(version)
}

fn reader() -> Result<(), String> {
    let run_dir = std::path::PathBuf::from(env(RUN_DIR)?);
    let index: u64 = env(READER)?.parse().map_err(|e| format!("{READER}: {e}"))?;
    let target = target_from_env()?;
    let store = CachedStore::builder(target.client())
        .max_bytes(reader_memory(index))
        .block_size(BLOCK)
        .metadata_ttl(TTL)
        .build()
        .map_err(|e| format!("building the cached store: {e}"))?;
    let raw = target.client();
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15 ^ (index + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut reads: Vec<Read> = Vec::new();
    let mut head_ms: Vec<f64> = Vec::new();
    let stop_after;
    let done: BTreeMap<u8, f64>;
    {
        let rt = runtime();
        // A HEAD's round trip through this reader's node, for the report.
        for _ in 0..5 {
            let started = Instant::now();
            rt.block_on(raw.head(&object_path(0)))
                .map_err(|e| format!("HEAD: {e}"))?;
            head_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        // Warm: every object read whole once (version 0, before the writer
        // starts), then tell the coordinator.
        for object in 0..OBJECTS {
            let got = rt
                .block_on(async { store.get(&object_path(object)).await?.bytes().await })
                .map_err(|e| format!("warming object {object}: {e}"))?;
            let v = identify(&got, object, 0..SIZE)?;
            if v != 0 {
                return Err(format!(
                    "object {object}: version {v} before the writer ran"
                ));
            }
        }
        write_whole(&run_dir.join(format!("ready-{index}")), "ready\n")?;
        // Rounds of reads over every object until a whole round started
        // later than TTL + MARGIN after the last rewrite returned.
        let started = Instant::now();
        loop {
            let round_start = now_ms();
            for object in 0..OBJECTS {
                let start_ms = now_ms();
                let version = rt.block_on(read_once(&store, object, &mut rng))?;
                reads.push(Read {
                    object,
                    start_ms,
                    end_ms: now_ms(),
                    version,
                });
            }
            let finished = read_lines(&run_dir.join("done")).map(|lines| {
                lines
                    .iter()
                    .filter_map(|l| Some((l.first()?.parse().ok()?, l.get(1)?.parse().ok()?)))
                    .collect::<BTreeMap<u8, f64>>()
            });
            if let Some(finished) = finished.filter(|f| f.len() == usize::from(OBJECTS)) {
                let last = finished.values().copied().fold(0.0, f64::max);
                let threshold = last + (TTL + MARGIN).as_secs_f64() * 1000.0;
                if round_start > threshold {
                    stop_after = threshold;
                    done = finished;
                    break;
                }
            }
            if started.elapsed() > PHASE_TIMEOUT {
                return Err(format!(
                    "the writer's `done` file did not appear within {PHASE_TIMEOUT:?}"
                ));
            }
        }
    }

    // The checks on the reads' record.
    let ttl_ms = TTL.as_secs_f64() * 1000.0;
    let margin_ms = MARGIN.as_secs_f64() * 1000.0;
    let mut staleness = BTreeMap::new();
    let (mut late_reads, mut regressions, mut preconditions) = (0u64, 0u64, 0u64);
    let mut last_version: BTreeMap<u8, u16> = BTreeMap::new();
    for read in &reads {
        let Some(version) = read.version else {
            preconditions += 1;
            continue;
        };
        let previous = last_version.insert(read.object, version);
        if previous.is_some_and(|p| p > version) {
            regressions += 1;
        }
        let done_at = done[&read.object];
        if version < FINAL && read.end_ms > done_at {
            let stale = staleness.entry(read.object).or_insert(0.0f64);
            *stale = stale.max(read.end_ms - done_at);
            if read.start_ms > done_at + ttl_ms + CLOCK_SLOP_MS {
                return Err(format!(
                    "object {}: a read started {:.0} ms after the last rewrite returned \
                     (TTL {ttl_ms:.0} ms) returned version {version}, not {FINAL}",
                    read.object,
                    read.start_ms - done_at
                ));
            }
        }
        if read.start_ms > done_at + ttl_ms + margin_ms {
            late_reads += 1;
        }
    }
    for (object, stale) in &staleness {
        if *stale > ttl_ms + margin_ms {
            return Err(format!(
                "object {object}: an older version was returned {stale:.0} ms after the last \
                 rewrite returned (TTL {ttl_ms:.0} ms + margin {margin_ms:.0} ms)"
            ));
        }
    }
    for object in 0..OBJECTS {
        let after: Vec<&Read> = reads
            .iter()
            .filter(|r| r.object == object && r.start_ms > stop_after)
            .collect();
        if after.is_empty() || after.iter().any(|r| r.version != Some(FINAL)) {
            return Err(format!(
                "object {object}: the reads after TTL + margin were not all version {FINAL}"
            ));
        }
    }
    let max_stale = staleness.values().copied().fold(0.0, f64::max);
    let stats = store.stats();
    let versions: std::collections::BTreeSet<u16> =
        reads.iter().filter_map(|r| r.version).collect();
    head_ms.sort_by(f64::total_cmp);
    let report = format!(
        "reader {index}\nendpoint {}\nreads {}\nprecondition_errors {preconditions}\n\
         versions_seen {}\nmax_staleness_ms {max_stale:.1}\nlate_reads {late_reads}\n\
         regressions {regressions}\nhead_ms_median {:.1}\nhead_ms_max {:.1}\n\
         store_requests {}\nmemory_hits {}\nversion_changes {}\n",
        target.endpoint,
        reads.len(),
        versions.len(),
        head_ms[head_ms.len() / 2],
        head_ms[head_ms.len() - 1],
        stats.store_requests,
        stats.memory_hits,
        stats.version_changes,
    );
    write_whole(&run_dir.join(format!("report-{index}")), &report)
}

// ---- the coordinator ----

/// Child processes, killed (and waited for) if the coordinator fails.
struct Children(Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Children {
    /// Waits for child `name` to exit, at most `timeout`; panics unless it
    /// exits 0.
    fn wait_success(&mut self, name: &str, timeout: Duration) {
        let started = Instant::now();
        let (_, child) = self
            .0
            .iter_mut()
            .find(|(n, _)| n == name)
            .expect("a child of that name");
        loop {
            match child.try_wait().expect("a child's status") {
                Some(status) => {
                    assert!(status.success(), "{name} exited with {status}");
                    return;
                }
                None if started.elapsed() > timeout => {
                    panic!("{name} did not finish within {timeout:?}")
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Panics if a child has already exited (it failed early).
    fn check_running(&mut self) {
        for (name, child) in &mut self.0 {
            if let Some(status) = child.try_wait().expect("a child's status") {
                panic!("{name} exited early with {status}");
            }
        }
    }
}

/// Whether the arguments (libtest's, as `cargo test` passes them) select
/// this test: no filter, or one that is part of its name; `--ignored`
/// selects none (the test is not ignored).
fn selected(args: &[String]) -> bool {
    let takes_value = [
        "--test-threads",
        "--format",
        "--color",
        "--skip",
        "--logfile",
        "-Z",
    ];
    let mut filters = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--ignored" {
            return false;
        }
        if takes_value.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    filters.is_empty() || filters.iter().any(|f| TEST_NAME.contains(f.as_str()))
}

fn coordinator() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{TEST_NAME}: test");
        return ExitCode::SUCCESS;
    }
    if !selected(&args) {
        println!("\nrunning 0 tests (filtered out: {TEST_NAME})\n");
        return ExitCode::SUCCESS;
    }
    println!("\nrunning 1 test");
    let started = Instant::now();
    let Some(garage) = start_garage(3) else {
        println!("test {TEST_NAME} ... ok (skipped)");
        return ExitCode::SUCCESS;
    };
    let garage_ready = started.elapsed();
    let run_dir = tempfile::tempdir().expect("a temporary directory");
    let writer_target = S3Target::of(&garage, 0);
    let client = writer_target.client();
    runtime().block_on(async {
        for object in 0..OBJECTS {
            let bytes = version_bytes(object, 0, 0..SIZE);
            client
                .put(&object_path(object), PutPayload::from(bytes))
                .await
                .expect("the first version's put");
        }
    });

    let exe = std::env::current_exe().expect("the test binary's path");
    let spawn = |role: &str, index: usize, target: &S3Target| -> Child {
        Command::new(&exe)
            .env(ROLE, role)
            .env(READER, index.to_string())
            .env(RUN_DIR, run_dir.path())
            .env(ENDPOINT, &target.endpoint)
            .env(REGION, &target.region)
            .env(BUCKET, &target.bucket)
            .env(KEY_ID, &target.access_key_id)
            .env(SECRET, &target.secret_access_key)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the {role} process: {e}"))
    };
    let mut children = Children(Vec::new());
    for index in 0..READERS {
        let target = S3Target::of(&garage, index % garage.nodes());
        children
            .0
            .push((format!("reader {index}"), spawn("reader", index, &target)));
    }
    // The readers warm their caches on version 0; then the writer starts.
    let waiting = Instant::now();
    while !(0..READERS).all(|i| run_dir.path().join(format!("ready-{i}")).exists()) {
        children.check_running();
        assert!(
            waiting.elapsed() < PHASE_TIMEOUT,
            "the readers were not ready within {PHASE_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let writing = Instant::now();
    children
        .0
        .push(("writer".into(), spawn("writer", 0, &writer_target)));
    children.wait_success("writer", PHASE_TIMEOUT);
    let writer_took = writing.elapsed();
    for index in 0..READERS {
        children.wait_success(&format!("reader {index}"), PHASE_TIMEOUT);
    }

    // The readers checked their own reads; gather their reports.
    let mut max_staleness = 0.0f64;
    let mut total_reads = 0u64;
    for index in 0..READERS {
        let path = run_dir.path().join(format!("report-{index}"));
        let lines = read_lines(&path).unwrap_or_else(|| panic!("no {}", path.display()));
        let field = |name: &str| -> f64 {
            lines
                .iter()
                .find(|l| l.first().map(String::as_str) == Some(name))
                .and_then(|l| l.get(1)?.parse().ok())
                .unwrap_or_else(|| panic!("{}: no {name}", path.display()))
        };
        let staleness = field("max_staleness_ms");
        assert!(
            staleness <= (TTL + MARGIN).as_secs_f64() * 1000.0,
            "reader {index}: staleness {staleness} ms"
        );
        assert!(field("late_reads") > 0.0, "reader {index}: no late read");
        max_staleness = max_staleness.max(staleness);
        total_reads += field("reads") as u64;
        println!(
            "reader {index}: {}",
            lines
                .iter()
                .skip(1)
                .map(|l| l.join("="))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    println!(
        "{READERS} readers, {total_reads} reads, none mixed or short; the writer's \
         {FINAL} rounds of rewrites of {OBJECTS} objects took {writer_took:.2?}; \
         staleness after the last rewrite at most {max_staleness:.0} ms (TTL {TTL:?}); \
         Garage (3 nodes, {}) ready in {garage_ready:.2?}; test took {:.2?}",
        garage.version,
        started.elapsed()
    );
    println!("test {TEST_NAME} ... ok");
    println!(
        "\ntest result: ok. 1 passed; 0 failed; finished in {:.2}s\n",
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
