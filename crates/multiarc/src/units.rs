//! Sizes and durations as people write them (`8KiB`, `64MiB`, `500ms`),
//! and the machine's memory that bounds a cache's size: what a program
//! reading its cache settings from a command line or a configuration file
//! needs, shared by the `multiarc` command's flags and the mounts' control
//! files.
//!
//! ```
//! use multiarc::units::{human_bytes, parse_duration, parse_size};
//! assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
//! assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
//! assert_eq!(parse_duration("500ms", 60.0).unwrap().as_millis(), 500);
//! assert_eq!(human_bytes(8192), "8 KiB");
//! ```

use std::fmt;
use std::time::Duration;

/// A size or duration that could not be read: the message names the text
/// and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError(String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

fn fail<T>(text: String) -> Result<T, UnitError> {
    Err(UnitError(text))
}

/// Parses a byte size: plain bytes (`8192`) or a number with a binary or
/// decimal unit (`8KiB`, `64MiB`, `1GiB`, `1.5GiB`, `4k`, `10MB`).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return fail("empty size".into());
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
            return fail(format!(
                "size {text:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB)"
            ))
        }
    };
    if num.is_empty() {
        return fail(format!("size {text:?} has no number"));
    }
    let Ok(value) = num.parse::<f64>() else {
        return fail(format!("size {text:?}: {num:?} is not a number"));
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return fail(format!("size {text:?} is out of range"));
    }
    if unit.is_empty() && num.contains('.') {
        return fail(format!(
            "size {text:?}: a plain byte count must be a whole number"
        ));
    }
    Ok(bytes.round() as u64)
}

/// Parses a duration of at most `max_seconds` with its unit: `ns`, `us`,
/// `ms`, `s`, `m` or `h` (`500us`, `1.5ms`, `2m`); a plain number only as
/// `0` (a latency of `20` could mean milliseconds or seconds).
pub fn parse_duration(text: &str, max_seconds: f64) -> Result<Duration, UnitError> {
    parse_duration_as(text, max_seconds, None)
}

/// As [`parse_duration`], a plain number being seconds (`1.5`): for
/// settings that people give in seconds, such as a metadata TTL.
pub fn parse_seconds(text: &str, max_seconds: f64) -> Result<Duration, UnitError> {
    parse_duration_as(text, max_seconds, Some(1.0))
}

fn parse_duration_as(
    text: &str,
    max_seconds: f64,
    plain: Option<f64>,
) -> Result<Duration, UnitError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let zero = !num.is_empty() && num.chars().all(|c| c == '0');
    let scale = match (unit.trim(), plain) {
        ("", Some(scale)) => scale,
        ("", None) if zero => 1.0,
        ("ns", _) => 1e-9,
        ("us", _) => 1e-6,
        ("ms", _) => 1e-3,
        ("s", _) => 1.0,
        ("m", _) => 60.0,
        ("h", _) => 3600.0,
        (other, _) => {
            return fail(format!(
                "duration {text:?}: unknown unit {other:?} (use ns, us, ms, s, m or h, e.g. 500ms)"
            ))
        }
    };
    let Ok(value) = num.parse::<f64>() else {
        return fail(format!("duration {text:?}: {num:?} is not a number"));
    };
    let seconds = value * scale;
    if !seconds.is_finite() || !(0.0..=max_seconds).contains(&seconds) {
        return fail(format!(
            "duration {text:?} must be between 0 and {}",
            human_seconds(max_seconds)
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `60 s`, `1 day`: a bound in messages.
fn human_seconds(seconds: f64) -> String {
    if seconds == 86_400.0 {
        "1 day".into()
    } else {
        format!("{seconds} s")
    }
}

/// A byte count for messages: `8 KiB`, `1.5 GiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// This machine's memory as a program may use it: `available` is what it
/// can allocate without pushing anything else out (`MemAvailable`), `total`
/// all of it (`MemTotal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineMemory {
    /// `MemTotal` in bytes.
    pub total: u64,
    /// `MemAvailable` in bytes (`MemTotal` on kernels without it).
    pub available: u64,
}

/// A `/proc/meminfo` figure (`MemTotal:`, `MemAvailable:`) in bytes; `None`
/// where the file or the field is missing (not Linux).
pub fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text, field)
}

fn parse_meminfo(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

impl MachineMemory {
    /// This machine's memory, from `/proc/meminfo`; `None` where that
    /// cannot be read.
    pub fn of_this_machine() -> Option<MachineMemory> {
        let total = meminfo("MemTotal:")?;
        let available = meminfo("MemAvailable:").unwrap_or(total).min(total);
        Some(MachineMemory { total, available })
    }

    /// A cache target (`max_bytes`) bounded by this memory: a larger one is
    /// clamped to `total`, with a warning to show. (A target is a bound, not
    /// an allocation, so it is clamped rather than refused.)
    pub fn clamp_target(self, bytes: u64) -> (u64, Option<String>) {
        if bytes <= self.total {
            return (bytes, None);
        }
        (
            self.total,
            Some(format!(
                "max_bytes {} is more than this machine's memory; using {} (MemTotal)",
                human_bytes(bytes),
                human_bytes(self.total)
            )),
        )
    }

    /// Fails unless `bytes`, what a program will allocate because of
    /// `what` (e.g. `"--cache-bytes 1TiB"`), fits in the available memory;
    /// the error names `what`, the size and the machine's memory.
    pub fn check_fits(self, what: &str, bytes: u64) -> Result<(), UnitError> {
        if bytes > self.available {
            return fail(format!(
                "{what} needs about {} of memory, more than this machine has available ({} of {} in all)",
                human_bytes(bytes),
                human_bytes(self.available),
                human_bytes(self.total)
            ));
        }
        Ok(())
    }
}

/// [`MachineMemory::clamp_target`] on this machine (unchanged where its
/// memory is unknown).
pub fn clamp_cache_target(bytes: u64) -> (u64, Option<String>) {
    match MachineMemory::of_this_machine() {
        Some(m) => m.clamp_target(bytes),
        None => (bytes, None),
    }
}

/// [`MachineMemory::check_fits`] on this machine (passes where its memory
/// is unknown).
pub fn check_fits_in_memory(what: &str, bytes: u64) -> Result<(), UnitError> {
    match MachineMemory::of_this_machine() {
        Some(m) => m.check_fits(what, bytes),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("8192").unwrap(), 8192);
        assert_eq!(parse_size("8KiB").unwrap(), 8192);
        assert_eq!(parse_size(" 4k ").unwrap(), 4096);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("1TiB").unwrap(), 1 << 40);
        for bad in ["", "KiB", "1.5", "8XB", "-1", "1e400GiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("8XB")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
    }

    #[test]
    fn durations_parse_up_to_their_bound() {
        let d = |t| parse_seconds(t, 86_400.0);
        assert_eq!(d("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(d("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(d("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(d("0"), Ok(Duration::ZERO));
        assert_eq!(d("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "x", "-1s", "2d", "100000s"] {
            assert!(d(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("61s", 60.0).is_err());
        assert!(parse_duration("60s", 60.0).is_ok());
        assert_eq!(parse_duration("0", 60.0), Ok(Duration::ZERO));
        let e = parse_duration("20", 60.0).unwrap_err().to_string();
        assert!(e.contains("duration") && e.contains("unit"), "{e}");
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(8192), "8 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn a_target_past_memory_is_clamped_and_an_allocation_refused() {
        let m = MachineMemory {
            total: 1 << 30,
            available: 1 << 29,
        };
        assert_eq!(m.clamp_target(1 << 20), (1 << 20, None));
        let (bytes, warning) = m.clamp_target(1 << 40);
        assert_eq!(bytes, 1 << 30);
        assert!(warning.unwrap().contains("MemTotal"));
        assert!(m.check_fits("--x", 1 << 28).is_ok());
        let e = m.check_fits("--x 1GiB", 1 << 30).unwrap_err().to_string();
        assert!(e.contains("--x 1GiB") && e.contains("available"), "{e}");
        assert_eq!(
            parse_meminfo("MemTotal:  1024 kB\n", "MemTotal:"),
            Some(1 << 20)
        );
        assert_eq!(parse_meminfo("", "MemTotal:"), None);
    }
}
