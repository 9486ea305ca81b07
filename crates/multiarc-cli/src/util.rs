//! Shared command-line helpers: sizes, lists, progress output.

use anyhow::{bail, Context};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Parses a byte size: plain bytes (`8192`) or a number with a binary or
/// decimal unit (`8KiB`, `64MiB`, `1GiB`, `1.5GiB`, `4k`, `10MB`).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    if t.is_empty() {
        bail!("empty size");
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            bail!("size {text:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB)")
        }
    };
    if num.is_empty() {
        bail!("size {text:?} has no number");
    }
    let value: f64 = num
        .parse()
        .with_context(|| format!("size {text:?}: {num:?} is not a number"))?;
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        bail!("size {text:?} is out of range");
    }
    if unit.is_empty() && num.contains('.') {
        bail!("size {text:?}: a plain byte count must be a whole number");
    }
    Ok(bytes.round() as u64)
}

/// Clap value parser for sizes.
pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// Clap value parser for one positive count; list flags use it with
/// `value_delimiter = ','` (`--threads 1,2,32`).
pub fn count_arg(text: &str) -> Result<usize, String> {
    if text.trim().is_empty() {
        return Err("empty item in a comma-separated list".into());
    }
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if n == 0 {
        return Err("counts must be at least 1".into());
    }
    Ok(n)
}

/// Clap value parser for one name of a comma-separated list (no empty items).
pub fn name_arg(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty item in a comma-separated list".into());
    }
    Ok(t.to_string())
}

/// SplitMix64: a fast, well-mixed per-thread generator for benchmark
/// workloads (block numbers, offsets, lengths).
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A progress line on stderr: rewritten in place on a terminal, printed at
/// most every few seconds otherwise (CI logs), silent when disabled.
pub struct Progress {
    enabled: bool,
    tty: bool,
    last: Option<Instant>,
}

impl Progress {
    /// A progress reporter; `enabled = false` makes every call a no-op.
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            tty: std::io::stderr().is_terminal(),
            last: None,
        }
    }

    /// Shows `msg` (rate-limited when stderr is not a terminal).
    pub fn update(&mut self, msg: &str) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let min_gap = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        if self.last.is_some_and(|t| now.duration_since(t) < min_gap) {
            return;
        }
        self.last = Some(now);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{msg}");
        } else {
            let _ = writeln!(err, "{msg}");
        }
        let _ = err.flush();
    }

    /// Ends the progress line (a final message is always printed).
    pub fn finish(&mut self, msg: &str) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = writeln!(err, "\r\x1b[2K{msg}");
        } else {
            let _ = writeln!(err, "{msg}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8192").unwrap(), 8192);
        assert_eq!(parse_size("8KiB").unwrap(), 8192);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5k").unwrap(), 1536);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert!(parse_size("").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1.5").is_err());
    }

    #[test]
    fn list_items() {
        assert_eq!(count_arg("32"), Ok(32));
        assert!(count_arg("0").is_err());
        assert!(count_arg("x").is_err());
        assert!(count_arg("").is_err());
        assert_eq!(name_arg(" moka "), Ok("moka".into()));
        assert!(name_arg("").is_err());
    }
}
