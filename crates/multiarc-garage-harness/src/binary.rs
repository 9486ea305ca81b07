//! Finding the `garage` binary.

use crate::error::{failed, HarnessError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `garage` binary: the first on `PATH`, else `$CARGO_HOME/bin/garage`
/// (`~/.cargo/bin/garage` by default); `None` where neither exists.
pub fn find_garage() -> Option<PathBuf> {
    candidates().into_iter().find(|path| is_executable(path))
}

/// Where [`find_garage`] looks, in order: `PATH`, then [`cargo_bin`].
fn candidates() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("garage"))
                .collect()
        })
        .unwrap_or_default();
    paths.extend(cargo_bin());
    paths
}

/// `$CARGO_HOME/bin/garage` (`~/.cargo/bin/garage` by default).
pub(crate) fn cargo_bin() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .map(|cargo_home| cargo_home.join("bin").join("garage"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// What `binary --version` prints (first line), e.g. `garage v2.5.0`.
pub fn garage_version(binary: &Path) -> Result<String, HarnessError> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| failed(format_args!("running {} --version", binary.display()), e))?;
    if !output.status.success() {
        return Err(failed(
            format_args!("{} --version", binary.display()),
            output.status,
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string())
}
