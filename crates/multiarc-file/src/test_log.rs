//! A logger for the unit tests that check what the crate logs: it keeps
//! every record of level `warn` and above, for the process (a `log` logger
//! is installed once per process).

use multiarc_lock::poison::LockUnpoisoned;
use std::sync::{Mutex, Once};

struct Capture(Mutex<Vec<(log::Level, String)>>);

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            self.0
                .lock_unpoisoned()
                .push((record.level(), record.args().to_string()));
        }
    }

    fn flush(&self) {}
}

/// Starts capturing (once per process; later calls do nothing).
pub(crate) fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&CAPTURE).expect("no other logger in the unit tests");
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// The records captured so far whose text contains `needle`.
pub(crate) fn records_with(needle: &str) -> Vec<(log::Level, String)> {
    CAPTURE
        .0
        .lock_unpoisoned()
        .iter()
        .filter(|(_, text)| text.contains(needle))
        .cloned()
        .collect()
}
