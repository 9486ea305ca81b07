//! The command line's conventions, shared by every command: flag parsers
//! (sizes like `8KiB`, comma lists, names), stdout that reports a closed
//! pipe instead of panicking, and the result tables.

use anyhow::bail;
use std::io::Write;

/// Clap value parser for sizes.
pub fn size_arg(text: &str) -> Result<u64, String> {
    multiarc::units::parse_size(text).map_err(|e| e.to_string())
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

/// The name of `value` on the command line (empty for a value clap skips).
pub fn enum_name<E: clap::ValueEnum>(value: &E) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
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

/// Clap value parser of a short duration with its unit (`500us`, `1.5ms`;
/// `0`), at most a minute.
pub fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    multiarc::units::parse_duration(text, 60.0).map_err(|e| e.to_string())
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
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` that returns an error instead of panicking (use with `?`).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

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

/// `t` as RFC 3339 in UTC with milliseconds: `2026-11-29T02:30:00.123Z`
/// (log lines, live statistics).
pub fn utc_time(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn durations_need_their_unit() {
        use std::time::Duration;
        assert_eq!(duration_arg("0"), Ok(Duration::ZERO));
        assert_eq!(duration_arg("1.5ms"), Ok(Duration::from_micros(1500)));
        for bad in ["", "5", "ms", "1h", "-1ms", "61s", "1e9s"] {
            assert!(duration_arg(bad).is_err(), "{bad}");
        }
        assert!(size_arg("12XB").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn utc_times_are_rfc_3339() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(utc_time(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_919_400_123);
        assert_eq!(utc_time(t), "2026-11-29T02:30:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_time(leap), "2000-02-29T00:00:00.000Z");
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
