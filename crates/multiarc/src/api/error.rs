//! Why a cache could not be built, or a setting was refused.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a cache could not be built ([`Builder::build`](crate::Builder::build))
/// or a setting was refused ([`Cache::set_max_bytes`](crate::Cache::set_max_bytes)).
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting is missing or out of its range; the message names it.
    Invalid(String),
    /// The second tier's device could not be opened or set up. The source
    /// is the operating system's error, with its kind and errno
    /// ([`ConfigError::raw_os_error`]).
    Device {
        /// The device or file given to [`Builder::l2`](crate::Builder::l2).
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// One of the cache's threads could not be started.
    Thread {
        /// The thread's name.
        name: &'static str,
        /// Why (`std::thread::Builder::spawn`'s error).
        source: io::Error,
    },
}

impl ConfigError {
    pub(crate) fn invalid(msg: impl Into<String>) -> ConfigError {
        ConfigError::Invalid(msg.into())
    }

    pub(crate) fn device(path: PathBuf, source: io::Error) -> ConfigError {
        ConfigError::Device { path, source }
    }

    pub(crate) fn thread(name: &'static str, source: io::Error) -> ConfigError {
        ConfigError::Thread { name, source }
    }

    /// The operating system's error number behind a device or thread
    /// error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            ConfigError::Invalid(_) => None,
            ConfigError::Device { source, .. } | ConfigError::Thread { source, .. } => {
                // The tier wraps the system's error with what it was doing:
                // look down the chain for the first errno.
                let mut err: Option<&(dyn std::error::Error + 'static)> = Some(source);
                while let Some(e) = err {
                    if let Some(n) = e
                        .downcast_ref::<io::Error>()
                        .and_then(io::Error::raw_os_error)
                    {
                        return Some(n);
                    }
                    err = match e.downcast_ref::<io::Error>() {
                        Some(io) => io.get_ref().map(|inner| inner as _),
                        None => e.source(),
                    };
                }
                None
            }
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Invalid(msg) => write!(f, "invalid cache configuration: {msg}"),
            // The source names the device and what failed.
            ConfigError::Device { source, .. } => write!(f, "l2: {source}"),
            ConfigError::Thread { name, source } => {
                write!(f, "cannot start the {name} thread: {source}")
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Invalid(_) => None,
            ConfigError::Device { source, .. } | ConfigError::Thread { source, .. } => Some(source),
        }
    }
}
