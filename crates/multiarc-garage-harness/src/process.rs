//! One Garage node (its configuration, directories and server process),
//! the `garage` commands run against it, and its readiness probe.

use crate::error::{failed, HarnessError};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a wait polls.
const POLL: Duration = Duration::from_millis(50);

/// The ports of one node, all on 127.0.0.1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ports {
    pub(crate) rpc: u16,
    pub(crate) s3: u16,
    pub(crate) admin: u16,
}

/// `n` nodes' worth of distinct free ports: all are bound at once (so they
/// differ), then released for the nodes to bind. Another process could
/// take one meanwhile; the node's start then fails with "address in use"
/// in its log, which [`crate::Garage::start`] retries once.
pub(crate) fn free_ports(n: usize) -> Result<Vec<Ports>, HarnessError> {
    let listeners = (0..3 * n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed("binding a free port on 127.0.0.1", e))?;
    let ports = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed("a bound port's address", e))?;
    Ok(ports
        .chunks(3)
        .map(|p| Ports {
            rpc: p[0],
            s3: p[1],
            admin: p[2],
        })
        .collect())
}

/// A running `garage server` with its configuration and log.
pub(crate) struct Node {
    pub(crate) index: usize,
    pub(crate) ports: Ports,
    pub(crate) config: PathBuf,
    pub(crate) log: PathBuf,
    child: Child,
}

/// The settings every node of a cluster shares.
pub(crate) struct Shared<'a> {
    pub(crate) binary: &'a Path,
    pub(crate) rpc_secret: &'a str,
    pub(crate) region: &'a str,
    pub(crate) replication_factor: usize,
}

impl Node {
    /// Writes node `index`'s configuration under `dir` and starts its server
    /// (output to `dir/garage.log`).
    pub(crate) fn start(
        shared: &Shared<'_>,
        index: usize,
        ports: Ports,
        dir: &Path,
    ) -> Result<Node, HarnessError> {
        let context = |what: &str| format!("node {index}: {what} in {}", dir.display());
        std::fs::create_dir_all(dir).map_err(|e| failed(context("creating its directory"), e))?;
        let config = dir.join("garage.toml");
        let text = format!(
            r#"metadata_dir = "{dir}/meta"
data_dir = "{dir}/data"
db_engine = "sqlite"
replication_factor = {rf}
rpc_bind_addr = "127.0.0.1:{rpc}"
rpc_public_addr = "127.0.0.1:{rpc}"
rpc_secret = "{secret}"

[s3_api]
s3_region = "{region}"
api_bind_addr = "127.0.0.1:{s3}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin}"
"#,
            dir = dir.display(),
            rf = shared.replication_factor,
            rpc = ports.rpc,
            secret = shared.rpc_secret,
            region = shared.region,
            s3 = ports.s3,
            admin = ports.admin,
        );
        std::fs::write(&config, text).map_err(|e| failed(context("writing garage.toml"), e))?;
        let log = dir.join("garage.log");
        File::create(&log).map_err(|e| failed(context("creating garage.log"), e))?;
        let child = spawn(shared.binary, index, &config, &log)?;
        Ok(Node {
            index,
            ports,
            config,
            log,
            child,
        })
    }

    /// Starts the server again (after [`Node::kill`]) with the same
    /// configuration, data and ports; its output goes on in the same log.
    pub(crate) fn restart(&mut self, binary: &Path) -> Result<(), HarnessError> {
        self.kill();
        self.child = spawn(binary, self.index, &self.config, &self.log)?;
        Ok(())
    }

    /// The node's S3 endpoint, `http://127.0.0.1:PORT`.
    pub(crate) fn s3_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    /// `Some(status)` if the server has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the node's log.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the node's admin API answers `/health` with "fully
    /// operational" (every partition has its quorum).
    pub(crate) fn healthy(&self) -> bool {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.ports.admin));
        let probe = || -> std::io::Result<String> {
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
            stream.set_read_timeout(Some(Duration::from_secs(2)))?;
            stream.write_all(
                b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        };
        match probe() {
            Ok(answer) => {
                answer.starts_with("HTTP/1.1 200") && answer.contains("fully operational")
            }
            Err(_) => false,
        }
    }

    /// Kills the server and waits for it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `binary -c config server`, its output appended to `log`.
fn spawn(binary: &Path, index: usize, config: &Path, log: &Path) -> Result<Child, HarnessError> {
    let out = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .map_err(|e| failed(format_args!("node {index}: opening {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| failed(format_args!("node {index}: {}", log.display()), e))?;
    let child = Command::new(binary)
        .arg("-c")
        .arg(config)
        .arg("server")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "garage=info,netapp=info")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| {
            failed(
                format_args!("node {index}: starting {} server", binary.display()),
                e,
            )
        })?;
    log::debug!("garage node {index} started (pid {})", child.id());
    Ok(child)
}

/// The output of a `garage` command that succeeded.
pub(crate) struct Output {
    pub(crate) stdout: String,
}

/// Runs `binary -c config args...`, killed after `timeout`. Its output goes
/// to files in `scratch` (no pipe to fill). An error carries the command
/// and its output.
pub(crate) fn run_command(
    binary: &Path,
    config: &Path,
    args: &[&str],
    scratch: &Path,
    timeout: Duration,
) -> Result<Output, HarnessError> {
    let shown = format!("garage -c {} {}", config.display(), args.join(" "));
    // Distinct files per command: commands may run from several threads.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let (out_path, err_path) = (
        scratch.join(format!("cli-{run}.stdout")),
        scratch.join(format!("cli-{run}.stderr")),
    );
    let files = || -> std::io::Result<(File, File)> {
        Ok((File::create(&out_path)?, File::create(&err_path)?))
    };
    let (out, err) = files().map_err(|e| failed(format_args!("`{shown}`: output files"), e))?;
    let mut child = Command::new(binary)
        .arg("-c")
        .arg(config)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| failed(format_args!("running `{shown}`"), e))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => std::thread::sleep(POLL / 5),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::Failed(format!(
                    "`{shown}` did not finish within {timeout:?}"
                )));
            }
            Err(e) => return Err(failed(format_args!("waiting for `{shown}`"), e)),
        }
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    if !status.success() {
        return Err(HarnessError::Failed(format!(
            "`{shown}` failed ({status}): {}{}",
            stderr.trim(),
            if stdout.trim().is_empty() {
                String::new()
            } else {
                format!("\nits output: {}", stdout.trim())
            }
        )));
    }
    Ok(Output { stdout })
}

/// Polls `ready` every [`POLL`] until it gives `Some`, for at most
/// `timeout`; `check` runs before each poll and can end the wait with an
/// error (a node that exited). On timeout: an error naming `what`.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), HarnessError>,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let started = Instant::now();
    loop {
        check().map_err(|e| HarnessError::Failed(format!("{e}, while waiting for {what}")))?;
        if let Some(value) = ready() {
            log::debug!("{what}: after {:?}", started.elapsed());
            return Ok(value);
        }
        if started.elapsed() >= timeout {
            return Err(HarnessError::Failed(format!(
                "timed out after {timeout:?} waiting for {what}"
            )));
        }
        std::thread::sleep(POLL);
    }
}
