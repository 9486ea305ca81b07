//! The command's logger: the libraries log through the `log` facade and
//! never print; this prints their warnings and errors on stderr, one line
//! each, prefixed like the command's own messages.

/// Passes the warnings and errors of the libraries to stderr: the cache's
/// (a second tier's device that refuses O_DIRECT, a failed write-back at a
/// file's last close) and, for the mount, the `fuser` crate's (a reply not
/// sent, a request it could not parse; stderr is then the `--log` file in
/// the background). Without it they would vanish, and a failed request
/// would show up only as an unexplained `EIO` in the program using the
/// mount.
struct StderrLog {
    format: LogFormat,
}

/// How log lines look: for people, or one JSON object per line for log
/// shippers (`--log-format json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `multiarc: warning: ...`, as the command's own messages.
    #[default]
    Text,
    /// `{"time":"...","level":"warn","target":"...","message":"..."}`.
    Json,
}

/// The mounts' library: its messages are the command's own ("mounted ...",
/// "unmounted ..."), printed from `info` up as the command prints its own.
const MOUNT_TARGET: &str = "multiarc_fuse";

fn is_mount(target: &str) -> bool {
    target == MOUNT_TARGET || target.starts_with("multiarc_fuse::")
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
            || (metadata.level() <= log::Level::Info && is_mount(metadata.target()))
    }

    fn log(&self, record: &log::Record) {
        let line = match self.format {
            LogFormat::Text => line(record),
            LogFormat::Json => json_line(record, std::time::SystemTime::now()),
        };
        if let Some(line) = line {
            eprintln!("{line}");
        }
    }

    fn flush(&self) {}
}

/// The line a record prints, if any: warnings and errors, prefixed like
/// the command's own messages and naming the module that logged; the
/// mount's messages as the command's own (`multiarc: mounted ...`,
/// `multiarc: warning: ...`).
fn line(record: &log::Record) -> Option<String> {
    let text = record.args().to_string();
    if is_mount(record.target()) {
        return match record.level() {
            log::Level::Error => Some(format!("multiarc: error: {text}")),
            log::Level::Warn => Some(format!("multiarc: warning: {text}")),
            log::Level::Info => Some(format!("multiarc: {text}")),
            _ => None,
        };
    }
    if record.level() > log::Level::Warn {
        return None;
    }
    // Operations the mount leaves unimplemented (ioctl, xattrs...) answer
    // ENOSYS or ENOTTY as they should; that is not worth a line each time.
    // And after `fusermount3 -u`, fuser's own unmount finds nothing mounted
    // (EINVAL): expected, not a problem (a session that fails unmounts
    // through the mount's `unmount`, lazily).
    if text.starts_with("[Not Implemented]") || text.starts_with("Failed to umount") {
        return None;
    }
    Some(format!(
        "multiarc: {} {}: {text}",
        record.target(),
        record.level().as_str().to_lowercase(),
    ))
}

/// The record as one JSON object, for the records `line` prints.
fn json_line(record: &log::Record, time: std::time::SystemTime) -> Option<String> {
    line(record)?;
    let object = serde_json::json!({
        "time": multiarc_bench::cli::utc_time(time),
        "level": record.level().as_str().to_lowercase(),
        "target": record.target(),
        "message": record.args().to_string(),
    });
    Some(object.to_string())
}

/// Installs the logger (warnings and errors; the mount's messages), once,
/// before the command runs.
pub fn install(format: LogFormat) {
    let logger: &'static StderrLog = Box::leak(Box::new(StderrLog { format }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(level: log::Level, target: &str, text: &str) -> Option<String> {
        line(
            &log::Record::builder()
                .level(level)
                .target(target)
                .args(format_args!("{text}"))
                .build(),
        )
    }

    #[test]
    fn warnings_and_errors_print_one_line_naming_their_module() {
        assert_eq!(
            record(
                log::Level::Warn,
                "multiarc::l2::device",
                "l2 device x: O_DIRECT refused"
            )
            .as_deref(),
            Some("multiarc: multiarc::l2::device warn: l2 device x: O_DIRECT refused")
        );
        assert_eq!(
            record(log::Level::Error, "multiarc_file::writeback", "lost").as_deref(),
            Some("multiarc: multiarc_file::writeback error: lost")
        );
        assert_eq!(record(log::Level::Info, "multiarc", "chatter"), None);
        assert_eq!(
            record(log::Level::Debug, "multiarc::l2", "a failed batch"),
            None
        );
        assert_eq!(
            record(log::Level::Warn, "fuser", "[Not Implemented] ioctl"),
            None
        );
        assert_eq!(
            record(log::Level::Info, "multiarc_fuse::dir", "mounted a on b").as_deref(),
            Some("multiarc: mounted a on b")
        );
        assert_eq!(
            record(log::Level::Warn, "multiarc_fuse", "--max-bytes: clamped").as_deref(),
            Some("multiarc: warning: --max-bytes: clamped")
        );
        assert_eq!(record(log::Level::Debug, "multiarc_fuse::dir", "x"), None);
        let meta = |level, target| log::Metadata::builder().level(level).target(target).build();
        use log::Log;
        let log = StderrLog {
            format: LogFormat::Text,
        };
        assert!(log.enabled(&meta(log::Level::Warn, "multiarc")));
        assert!(!log.enabled(&meta(log::Level::Info, "multiarc")));
        assert!(log.enabled(&meta(log::Level::Info, "multiarc_fuse::session")));
    }

    #[test]
    fn json_lines_are_one_object_each_with_time_level_target_and_message() {
        let record = |level, target, text: &str| {
            json_line(
                &log::Record::builder()
                    .level(level)
                    .target(target)
                    .args(format_args!("{text}"))
                    .build(),
                std::time::UNIX_EPOCH,
            )
        };
        let line = record(log::Level::Warn, "multiarc::l2", "a \"quoted\"\nline").unwrap();
        assert!(!line.contains('\n'), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["level"], "warn");
        assert_eq!(v["target"], "multiarc::l2");
        assert_eq!(v["message"], "a \"quoted\"\nline");
        assert!(record(log::Level::Info, "multiarc_fuse", "mounted").is_some());
        assert!(record(log::Level::Info, "multiarc", "chatter").is_none());
    }
}
