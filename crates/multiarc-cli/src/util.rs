//! Shared command-line helpers: sizes, lists, output.

use anyhow::{bail, Context};
use std::io::Write;

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

/// The most threads a benchmark starts: 4096. Far past any machine's cores
/// (oversubscribing is part of some tests), well short of the process
/// limits that make starting a thread fail.
pub const MAX_THREADS: usize = 4096;

/// Clap value parser for one thread count of `--threads`: [`count_arg`]
/// and at most [`MAX_THREADS`].
pub fn thread_count_arg(text: &str) -> Result<usize, String> {
    let n = count_arg(text)?;
    if n > MAX_THREADS {
        return Err(format!(
            "{n} threads is more than the limit of {MAX_THREADS}"
        ));
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

/// A clap value parser for one item of a flag taking names of a
/// [`clap::ValueEnum`] (`--modes hold,copy`): trims it, refuses an empty
/// one, and reports an unknown one in one line naming it and every known
/// name (`unknown mode "stream" (known: hold, copy)`). The names show in
/// `--help` as the flag's possible values.
pub fn enum_arg<E>(what: &'static str) -> EnumArg<E> {
    EnumArg {
        what,
        kind: std::marker::PhantomData,
    }
}

/// What [`enum_arg`] returns.
pub struct EnumArg<E> {
    what: &'static str,
    kind: std::marker::PhantomData<fn() -> E>,
}

impl<E> Clone for EnumArg<E> {
    fn clone(&self) -> Self {
        enum_arg(self.what)
    }
}

/// Every name of `E`, in declaration order.
pub fn enum_names<E: clap::ValueEnum>() -> Vec<String> {
    E::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| p.get_name().to_string())
        .collect()
}

/// [`enum_arg`]'s parsing: the value of `text`, or the one-line error.
pub fn parse_enum<E: clap::ValueEnum>(what: &str, text: &str) -> Result<E, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty item in a comma-separated list".into());
    }
    E::from_str(t, false).map_err(|_| {
        format!(
            "unknown {what} {t:?} (known: {})",
            enum_names::<E>().join(", ")
        )
    })
}

impl<E: clap::ValueEnum + Clone + Send + Sync + 'static> clap::builder::TypedValueParser
    for EnumArg<E>
{
    type Value = E;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<E, clap::Error> {
        let text = value.to_string_lossy();
        parse_enum(self.what, &text).map_err(|msg| {
            let arg = arg.map_or_else(|| "...".to_string(), |a| a.to_string());
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{text}' for '{arg}': {msg}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            E::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value()),
        ))
    }
}

/// Parses a short duration: `0`, or a number with `ns`, `us`, `ms` or `s`
/// (`500us`, `1.5ms`); at most one minute.
pub fn parse_duration(text: &str) -> anyhow::Result<std::time::Duration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" if num.chars().all(|c| c == '0') && !num.is_empty() => 1e-9,
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        other => {
            bail!("duration {text:?}: unknown unit {other:?} (use ns, us, ms or s, e.g. 500us)")
        }
    };
    let value: f64 = num
        .parse()
        .with_context(|| format!("duration {text:?}: {num:?} is not a number"))?;
    let seconds = value * scale;
    if !seconds.is_finite() || !(0.0..=60.0).contains(&seconds) {
        bail!("duration {text:?} must be between 0 and 60 s");
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// `parse_duration` for clap.
pub fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    parse_duration(text).map_err(|e| format!("{e:#}"))
}

/// The longest `--seconds` a timed command accepts: one day. Past it a run
/// is a mistake (`1e20`), and `Duration` cannot hold every float anyway.
pub const MAX_SECONDS: f64 = 86_400.0;

/// Checks a `--seconds` value: a finite number of seconds, more than 0 and at
/// most [`MAX_SECONDS`] (one day).
pub fn check_seconds(seconds: f64) -> anyhow::Result<()> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
        bail!(
            "--seconds must be a positive number of seconds, at most {MAX_SECONDS} (one day), got {seconds}"
        );
    }
    Ok(())
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

/// This machine's memory as a command may use it: `available` is what it can
/// allocate without pushing anything else out (`MemAvailable`), `total` all
/// of it (`MemTotal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineMemory {
    /// `MemTotal` in bytes.
    pub total: u64,
    /// `MemAvailable` in bytes (`MemTotal` on kernels without it).
    pub available: u64,
}

/// This machine's memory, from `/proc/meminfo`; `None` where that cannot be
/// read (then the memory checks let everything through).
pub fn machine_memory_bytes() -> Option<MachineMemory> {
    let total = meminfo("MemTotal:")?;
    let available = meminfo("MemAvailable:").unwrap_or(total).min(total);
    Some(MachineMemory { total, available })
}

/// Fails unless `bytes`, what a command will allocate because of `flag`
/// (e.g. `"--cache-bytes 1TiB"`), fits in this machine's available memory.
/// The error names the flag, the size and the machine's memory. Where the
/// memory is unknown (no `/proc/meminfo`) it passes.
pub fn check_fits_in_memory(flag: &str, bytes: u64) -> anyhow::Result<()> {
    match machine_memory_bytes() {
        Some(memory) => check_fits(flag, bytes, memory),
        None => Ok(()),
    }
}

/// A cache target (`max_bytes`) bounded by the machine's memory: a larger
/// one is clamped to `MemTotal`, with a warning to print. (A target is a
/// bound, not an allocation, so it is clamped rather than refused.)
pub fn clamp_cache_target(bytes: u64) -> (u64, Option<String>) {
    match machine_memory_bytes() {
        Some(m) => clamp_target(bytes, m),
        None => (bytes, None),
    }
}

/// [`clamp_cache_target`] against a given machine.
pub fn clamp_target(bytes: u64, memory: MachineMemory) -> (u64, Option<String>) {
    if bytes <= memory.total {
        return (bytes, None);
    }
    (
        memory.total,
        Some(format!(
            "max_bytes {} is more than this machine's memory; using {} (MemTotal)",
            human_bytes(bytes),
            human_bytes(memory.total)
        )),
    )
}

/// [`check_fits_in_memory`] against a given machine.
pub fn check_fits(flag: &str, bytes: u64, memory: MachineMemory) -> anyhow::Result<()> {
    if bytes > memory.available {
        bail!(
            "{flag} needs about {} of memory, more than this machine has available ({} of {} in all)",
            human_bytes(bytes),
            human_bytes(memory.available),
            human_bytes(memory.total)
        );
    }
    Ok(())
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

/// Stdout is a closed pipe: its reader went away (`multiarc ... | head -0`).
/// `main` exits quietly on it, as `ls` does.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout is a closed pipe")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes to stdout; a closed pipe becomes [`StdoutClosed`], any other
/// failure (`> /dev/full`) an error naming stdout. What [`out!`] and
/// [`outln!`] call instead of `print!`, which panics on a closed pipe.
pub fn write_stdout(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args).map_err(stdout_error)
}

/// Flushes stdout, with [`write_stdout`]'s errors.
pub fn flush_stdout() -> anyhow::Result<()> {
    std::io::stdout().lock().flush().map_err(stdout_error)
}

fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("writing to stdout")
    }
}

/// `print!` that returns an error instead of panicking (use with `?`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::util::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` that returns an error instead of panicking (use with `?`).
macro_rules! outln {
    () => {
        $crate::util::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::util::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// A text table of results, as the bench commands print them: the header,
/// a line of dashes under it, no borders; the first `left` columns aligned
/// left (names), the others right (numbers). Add rows and print
/// `table.trim_fmt()` (no trailing blanks); it is as wide as its cells
/// (never wrapped to a terminal).
pub fn text_table<S: Into<comfy_table::Cell>>(
    header: impl IntoIterator<Item = S>,
    left: usize,
) -> comfy_table::Table {
    use comfy_table::{LineStyle, TableStyle};
    let mut table = comfy_table::Table::new();
    table.load_style(TableStyle::new().header_separator(LineStyle::none().fill('-').junction('-')));
    table.set_header(header.into_iter().map(Into::into).collect::<Vec<_>>());
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_cell_alignment(if i < left {
            comfy_table::CellAlignment::Left
        } else {
            comfy_table::CellAlignment::Right
        });
    }
    table
}

/// Locking a std mutex, ignoring poisoning: a panicked thread (a bench
/// worker, the mount's signal handler) must not make later callers panic.
pub trait LockUnpoisoned<T: ?Sized> {
    /// Locks, ignoring poisoning.
    fn lock_unpoisoned(&self) -> std::sync::MutexGuard<'_, T>;
}

impl<T: ?Sized> LockUnpoisoned<T> for std::sync::Mutex<T> {
    fn lock_unpoisoned(&self) -> std::sync::MutexGuard<'_, T> {
        unpoisoned(self.lock())
    }
}

/// The value of a lock operation whose lock may be poisoned: a condvar
/// wait's guard, a mutex's inner value.
pub fn unpoisoned<G>(r: std::sync::LockResult<G>) -> G {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bad_ones_say_why() {
        use std::time::Duration;
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        for bad in ["", "5", "ms", "1h", "-1ms", "61s", "1e9s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

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
    fn cache_targets_past_memory_are_clamped_with_a_warning() {
        let m = MachineMemory {
            total: 8 << 30,
            available: 4 << 30,
        };
        assert_eq!(clamp_target(1 << 30, m), (1 << 30, None));
        let (c, w) = clamp_target(u64::MAX, m);
        assert_eq!(c, 8 << 30);
        assert!(w.unwrap().contains("more than this machine's memory"));
    }

    #[test]
    fn seconds_are_bounded() {
        assert!(check_seconds(0.8).is_ok());
        assert!(check_seconds(MAX_SECONDS).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e20, MAX_SECONDS + 1.0] {
            let e = check_seconds(bad).unwrap_err().to_string();
            assert!(e.contains("--seconds") && e.contains("86400"), "{e}");
        }
    }

    #[test]
    fn memory_checks_name_the_flag_the_size_and_the_machine() {
        let text = "MemTotal:       24683656 kB\nMemFree:  1 kB\nMemAvailable:   23769208 kB\n";
        assert_eq!(parse_meminfo(text, "MemTotal:"), Some(24683656 * 1024));
        assert_eq!(parse_meminfo(text, "MemAvailable:"), Some(23769208 * 1024));
        assert_eq!(parse_meminfo(text, "Nope:"), None);
        let m = MachineMemory {
            total: 16 << 30,
            available: 8 << 30,
        };
        assert!(check_fits("--max-bytes 1GiB", 1 << 30, m).is_ok());
        assert!(check_fits("--max-bytes 8GiB", 8 << 30, m).is_ok());
        let e = check_fits("--max-bytes 1TiB", 1 << 40, m)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--max-bytes 1TiB") && e.contains("1 TiB") && e.contains("8 GiB of 16 GiB"),
            "{e}"
        );
        assert!(check_fits("x", u64::MAX, m).is_err());
        // This machine: whatever it has, an exbibyte is more.
        if machine_memory_bytes().is_some() {
            assert!(check_fits_in_memory("--x", 1 << 60).is_err());
            assert!(check_fits_in_memory("--x", 4096).is_ok());
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(8192), "8 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(1 << 40), "1 TiB");
        assert_eq!(human_bytes(u64::MAX), "16 EiB");
    }

    #[test]
    fn list_items() {
        assert_eq!(count_arg("32"), Ok(32));
        assert!(count_arg("0").is_err());
        assert!(count_arg("x").is_err());
        assert!(count_arg("").is_err());
        assert_eq!(thread_count_arg("4096"), Ok(4096));
        assert!(thread_count_arg("4097").unwrap_err().contains("4096"));
        assert!(thread_count_arg("0").is_err());
        assert_eq!(name_arg(" moka "), Ok("moka".into()));
        assert!(name_arg("").is_err());
    }

    #[test]
    fn tables_align_names_left_and_numbers_right() {
        let mut t = text_table(["lock", "Macq/s"], 1);
        t.add_row(["std", "1.5"]);
        t.add_row(["parking_lot", "12.25"]);
        let text = t.trim_fmt();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                " lock          Macq/s",
                "----------------------",
                " std              1.5",
                " parking_lot    12.25"
            ],
            "{t}"
        );
    }

    #[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
    enum Fruit {
        Apple,
        #[value(name = "blood_orange")]
        BloodOrange,
    }

    #[test]
    fn enum_items() {
        assert_eq!(parse_enum("fruit", " apple "), Ok(Fruit::Apple));
        assert_eq!(parse_enum("fruit", "blood_orange"), Ok(Fruit::BloodOrange));
        assert_eq!(
            parse_enum::<Fruit>("fruit", "pear"),
            Err(r#"unknown fruit "pear" (known: apple, blood_orange)"#.into())
        );
        assert!(parse_enum::<Fruit>("fruit", "")
            .unwrap_err()
            .contains("empty item"));
        assert_eq!(enum_names::<Fruit>(), ["apple", "blood_orange"]);
    }
}
