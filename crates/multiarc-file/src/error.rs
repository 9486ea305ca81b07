//! I/O errors with context that keep their OS error code.
//!
//! The file layer names the file (and what it was doing) in its errors. A
//! plain `io::Error::new(kind, message)` would drop the errno a caller such
//! as the FUSE mount must pass on: `EBADF` or `EIO` both have kinds that map
//! back to nothing precise. [`with_context`] keeps the code, and
//! [`os_error_code`] finds it again.

use std::fmt;
use std::io;

/// The payload of an error made by [`with_context`].
#[derive(Debug)]
struct Context {
    message: String,
    code: Option<i32>,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Context {}

/// `e` prefixed with `context` (`"{context}: {e}"`), with the same kind and
/// OS error code.
pub(crate) fn with_context(e: &io::Error, context: impl fmt::Display) -> io::Error {
    io::Error::new(
        e.kind(),
        Context {
            message: format!("{context}: {e}"),
            code: os_error_code(e),
        },
    )
}

/// An error of `kind` with OS error code `code` and exactly `message`: a
/// remembered error given out again.
pub(crate) fn rebuilt(kind: io::ErrorKind, code: Option<i32>, message: String) -> io::Error {
    io::Error::new(kind, Context { message, code })
}

/// The OS error code (`errno`) behind `e`, also where the file layer added
/// context to it; `None` for errors that did not come from the OS.
pub fn os_error_code(e: &io::Error) -> Option<i32> {
    e.raw_os_error()
        .or_else(|| e.get_ref()?.downcast_ref::<Context>().and_then(|c| c.code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_kind_code_and_message() {
        let e = io::Error::from_raw_os_error(libc::EBADF);
        let wrapped = with_context(&e, "f.db");
        let twice = with_context(&wrapped, "sync");
        assert_eq!(os_error_code(&twice), Some(libc::EBADF));
        assert_eq!(twice.kind(), e.kind());
        assert!(twice.to_string().starts_with("sync: f.db: "), "{twice}");
        let plain = io::Error::other("not from the OS");
        assert_eq!(os_error_code(&with_context(&plain, "x")), None);
    }
}
