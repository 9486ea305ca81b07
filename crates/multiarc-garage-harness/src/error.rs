//! The harness's one error type.

use std::fmt;
use std::path::PathBuf;

/// Why a Garage cluster could not be started (or a command on it failed).
#[derive(Debug)]
pub enum HarnessError {
    /// No `garage` binary was found (and `CI` is set, so a test may not
    /// skip).
    NotInstalled {
        /// Where it was looked for besides `PATH` (`$CARGO_HOME/bin/garage`).
        cargo_bin: Option<PathBuf>,
    },
    /// A step failed: the message names the step, and carries the command's
    /// output and the tail of the nodes' logs where there are any.
    Failed(String),
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::NotInstalled { cargo_bin } => {
                write!(f, "no `garage` binary on PATH")?;
                if let Some(path) = cargo_bin {
                    write!(f, " nor at {}", path.display())?;
                }
                write!(
                    f,
                    "; install it with `cargo install --locked garage@2.5.0 \
                     --no-default-features --features bundled-libs,sqlite`"
                )
            }
            HarnessError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for HarnessError {}

/// A [`HarnessError::Failed`] with `context: error`.
pub(crate) fn failed(context: impl fmt::Display, error: impl fmt::Display) -> HarnessError {
    HarnessError::Failed(format!("{context}: {error}"))
}
