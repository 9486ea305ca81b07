//! The mount process: started by the command in the background (unless
//! `foreground`), it mounts, reports over a pipe whether the mount came up,
//! and serves; the command returns once it has that report.
//!
//! Without `foreground` the command starts this same program again with its
//! arguments and [`DAEMON_CHILD_FLAG`] right after the subcommand, its
//! stdout a pipe back; that process ([`MountOptions::daemon_child`]) leaves
//! the terminal's session, mounts, and writes one line on the pipe: `ok`, or
//! the error that ended the mount before it was ready.

use crate::options::MountOptions;
use anyhow::{bail, Context};
use multiarc::lock::poison::LockUnpoisoned;
use std::io::{Read, Write};
use std::sync::Arc;

/// The hidden flag of the background mount process: a program that mounts
/// through [`crate::mount`] accepts it right after its subcommand and sets
/// [`MountOptions::daemon_child`] from it.
pub const DAEMON_CHILD_FLAG: &str = "--daemon-child";

/// The mount process's error, already told to the command waiting for it
/// (which prints it): the mount process exits non-zero without printing it
/// again.
#[derive(Debug)]
pub struct ReportedToCommand(pub String);

impl std::fmt::Display for ReportedToCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReportedToCommand {}

/// The `--log` file, opened before the mount process detaches (and before
/// `chdir("/")`).
pub(crate) static LOG: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Where the mount process reports whether the mount came up: its own
/// stderr, or its stdout, a pipe to the `mount` command waiting for it. The
/// first report wins: "ready" once a request was served, or the error that
/// ended the mount before that.
pub(crate) struct Ready {
    pipe: std::sync::Mutex<Option<std::io::Stdout>>,
    foreground: bool,
}

impl Ready {
    /// The mount serves requests: tell the parent (which exits 0) and
    /// detach from its terminal, or print `msg` in the foreground.
    pub(crate) fn ok(&self, msg: &str) {
        crate::notify::notify("READY=1");
        if self.foreground {
            log::info!("{msg}");
            return;
        }
        let pipe = self.pipe.lock_unpoisoned().take();
        if let Some(mut pipe) = pipe {
            let _ = pipe.write_all(b"ok\n");
            let _ = pipe.flush();
            // Stdout (the pipe) and stderr now point at /dev/null (or the
            // log): the waiting command has what it waited for.
            detach_stdio();
        }
    }

    /// The mount failed before it was ready: tell the parent, which prints
    /// it and exits non-zero. Returns whether the parent was told.
    fn fail(&self, e: &anyhow::Error) -> bool {
        let pipe = self.pipe.lock_unpoisoned().take();
        match pipe {
            Some(mut pipe) => {
                let line = format!("{e:#}").replace('\n', " ");
                let _ = writeln!(pipe, "{line}");
                let _ = pipe.flush();
                true
            }
            None => false,
        }
    }
}

/// Points stdin, stdout and stderr at /dev/null (a daemon must not keep its
/// caller's pipes open); stderr at the `--log` file if there is one.
fn detach_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    let _ = rustix::stdio::dup2_stdin(&null);
    let _ = rustix::stdio::dup2_stdout(&null);
    let _ = match LOG.get() {
        Some(log) => rustix::stdio::dup2_stderr(log),
        None => rustix::stdio::dup2_stderr(&null),
    };
}

/// One descriptor per inode the kernel knows: raise the soft limit on
/// open files to the hard one.
pub(crate) fn raise_nofile_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
}

/// Opens the `--log` file (before the mount process detaches).
pub(crate) fn open_log(options: &MountOptions) -> anyhow::Result<()> {
    if let Some(path) = &options.log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("--log {}", path.display()))?;
        let _ = LOG.set(file);
    }
    Ok(())
}

/// Without `foreground`: starts the background mount process and waits
/// for its report, `None` once the mount is ready (the command's work is
/// done); in that process, or in the foreground, where readiness is to be
/// reported.
pub(crate) fn become_mount_process(options: &MountOptions) -> anyhow::Result<Option<Arc<Ready>>> {
    if !options.foreground && !options.daemon_child {
        let args = options
            .command_line
            .clone()
            .unwrap_or_else(|| std::env::args_os().skip(1).collect());
        wait_for_mount_process(args)?;
        return Ok(None);
    }
    raise_nofile_limit();
    Ok(Some(Arc::new(if options.foreground {
        Ready {
            pipe: std::sync::Mutex::new(None),
            foreground: true,
        }
    } else {
        detach()
    })))
}

/// The end of the mount process: an error before the mount was ready goes
/// to the waiting command, which prints it ([`ReportedToCommand`]).
pub(crate) fn finish_mount_process(
    ready: &Ready,
    result: anyhow::Result<()>,
) -> anyhow::Result<()> {
    match result {
        Err(e) if ready.fail(&e) => Err(ReportedToCommand(format!("{e:#}")).into()),
        other => other,
    }
}

/// Starts the background mount process (this program, these arguments and
/// [`DAEMON_CHILD_FLAG`]) with its stdout a pipe, and waits for its report:
/// `Ok` when it says the mount is ready, its error line when the mount
/// failed, or an error when it cannot be started or ends without a report.
fn wait_for_mount_process(args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding this program to start the mount process")?;
    // `multiarc mount ARGS...` becomes `multiarc mount --daemon-child ARGS...`
    // (the flag right after the subcommand, so that it stays an option even
    // after a `--`).
    let mut args = args.into_iter();
    let subcommand = args.next().unwrap_or_else(|| "mount".into());
    let mut child = std::process::Command::new(&exe)
        .arg(subcommand)
        .arg(DAEMON_CHILD_FLAG)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting the mount process {}", exe.display()))?;
    let mut pipe = child.stdout.take().context("the mount process's stdout")?;
    // One line: "ok", or the error. End of file without one: the child died
    // without a word.
    let mut report = Vec::new();
    let mut byte = [0u8; 1];
    while let Ok(1) = pipe.read(&mut byte) {
        if byte[0] == b'\n' {
            break;
        }
        report.push(byte[0]);
    }
    drop(pipe);
    let report = String::from_utf8_lossy(&report);
    let line = report.trim();
    if line == "ok" {
        return Ok(());
    }
    if line.is_empty() {
        let status = child
            .wait()
            .map_or_else(|e| format!("unknown ({e})"), |s| s.to_string());
        bail!("the mount process exited before the mount was ready ({status})");
    }
    // The child's error is already one line of context; passed on as is.
    // (It exits by itself once it has reported.)
    let _ = child.wait();
    bail!("{line}")
}

/// The background mount process: its own session (no controlling terminal,
/// so the terminal's hang-up does not reach it), `/` as its directory (not
/// to keep the caller's busy), and its stdout the pipe to report on.
fn detach() -> Ready {
    let _ = rustix::process::setsid();
    let _ = std::env::set_current_dir("/");
    Ready {
        pipe: std::sync::Mutex::new(Some(std::io::stdout())),
        foreground: false,
    }
}
