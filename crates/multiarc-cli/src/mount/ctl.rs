//! `multiarc stats` and `multiarc set`: read and write a mount's control
//! files (`MOUNTPOINT/.multiarc/arcstats` and `.multiarc/tunables/*`).

use super::ctltree::{ARCSTATS, CTL_DIR, TUNABLES};
use crate::util::parse_size;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Where a `multiarc mount` is mounted.
    mountpoint: PathBuf,
    /// One JSON object (name: value) instead of `name value` lines.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct SetArgs {
    /// Where a `multiarc mount` is mounted.
    mountpoint: PathBuf,
    /// NAME=VALUE, e.g. max_bytes=1GiB.
    #[arg(required = true)]
    settings: Vec<String>,
}

/// The control directory of `mountpoint`, checking it is a multiarc mount.
fn ctl_dir(mountpoint: &Path) -> anyhow::Result<PathBuf> {
    match std::fs::metadata(mountpoint) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} does not exist", mountpoint.display())
        }
        Err(e) => bail!("{}: {e}", mountpoint.display()),
        Ok(m) if !m.is_dir() => bail!("{} is not a directory", mountpoint.display()),
        Ok(_) => {}
    }
    let dir = mountpoint.join(CTL_DIR);
    if !dir.join(ARCSTATS).is_file() {
        bail!(
            "{} is not a multiarc mount (it has no {CTL_DIR}/{ARCSTATS})",
            mountpoint.display()
        );
    }
    Ok(dir)
}

/// Parses `name value` lines.
pub fn parse_arcstats(text: &str) -> anyhow::Result<Vec<(String, u64)>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            match (it.next(), it.next().and_then(|v| v.parse().ok()), it.next()) {
                (Some(name), Some(value), None) => Ok((name.to_string(), value)),
                _ => bail!("malformed arcstats line {l:?}"),
            }
        })
        .collect()
}

pub fn run_stats(args: StatsArgs) -> anyhow::Result<()> {
    let dir = ctl_dir(&args.mountpoint)?;
    let path = dir.join(ARCSTATS);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let stats = parse_arcstats(&text)?;
    if args.json {
        let obj: serde_json::Map<String, serde_json::Value> = stats
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::from(v)))
            .collect();
        crate::util::outln!("{}", serde_json::Value::Object(obj))?;
    } else {
        let width = stats.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in stats {
            crate::util::outln!("{k:<width$} {v}")?;
        }
    }
    Ok(())
}

/// The mount's `min_bytes` (the floor of `max_bytes`), from arcstats.
fn min_bytes(tunables: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(tunables.parent()?.join(ARCSTATS)).ok()?;
    parse_arcstats(&text)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == "min_bytes")
        .map(|(_, v)| v)
}

pub fn run_set(args: SetArgs) -> anyhow::Result<()> {
    let dir = ctl_dir(&args.mountpoint)?.join(TUNABLES);
    let known: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Every setting is checked before any is applied: a bad one changes
    // nothing.
    let mut checked = Vec::with_capacity(args.settings.len());
    for setting in &args.settings {
        let Some((name, value)) = setting.split_once('=') else {
            bail!("{setting:?} is not NAME=VALUE (e.g. max_bytes=1GiB)");
        };
        let (name, value) = (name.trim(), value.trim());
        if !known.iter().any(|k| k == name) {
            bail!("unknown tunable {name:?} (tunables: {})", known.join(", "));
        }
        // Check the value here for a clear message: lockstat is 0 or 1,
        // the rest are sizes.
        let value = if name == "lockstat" {
            match value {
                "0" | "1" => value.to_string(),
                _ => bail!("lockstat must be 0 or 1, got {value:?}"),
            }
        } else {
            let bytes = parse_size(value).with_context(|| name.to_string())?;
            if name == "max_bytes" {
                if let (_, Some(w)) = crate::util::clamp_cache_target(bytes) {
                    eprintln!("multiarc: warning: {w}");
                }
                if let Some(min) = min_bytes(&dir) {
                    if bytes < min {
                        bail!(
                            "max_bytes={bytes} is below the mount's min_bytes {min} (see arcstats)"
                        );
                    }
                }
            }
            bytes.to_string()
        };
        checked.push((name, value));
    }
    for (name, value) in checked {
        let path = dir.join(name);
        match std::fs::write(&path, format!("{value}\n")) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                bail!("the mount refused {name}={value} (out of range: see min_bytes in arcstats)")
            }
            Err(e) => bail!("writing {}: {e}", path.display()),
        }
        let now = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        crate::util::outln!("{name}={}", now.trim())?;
    }
    Ok(())
}
