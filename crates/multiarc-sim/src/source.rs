//! Where a trace's bytes come from: a [`TraceSource`] opens the trace from
//! its start, as often as a replay has passes, and [`TraceFile`] is the one
//! for a file on disk (decompressed when its name ends in `.zst`, with the
//! `zstd` feature).
//!
//! A trace read in several passes must be a regular file: [`TraceFile::new`]
//! refuses a FIFO (opening one would block, and it could be read only once),
//! a device or a socket before anything opens it. That every pass reads the
//! same requests is for the `pass` module (beside this one) to check.
//!
//! [`guess_format`] picks a format for a trace whose format was not given:
//! the ARC paper's for a `.lis` name, CloudPhysics for a first line that
//! starts with `version,`, else one id per line.

use crate::trace::TraceFormat;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// A trace that can be read from its start again and again.
pub trait TraceSource {
    /// How messages name it (a file's path).
    fn name(&self) -> String;
    /// The trace from its start.
    fn open(&self) -> Result<Box<dyn BufRead>, SourceError>;
}

/// Why a trace could not be opened or read. The variants that carry an
/// [`io::Error`] return it from [`std::error::Error::source`] and leave it
/// out of their own message (a report such as anyhow's `{:#}` joins them:
/// `opening trace t.ids: No such file or directory (os error 2)`).
#[derive(Debug)]
pub enum SourceError {
    /// The file could not be examined or opened.
    Open {
        /// The trace's path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The path is a directory.
    Directory {
        /// The trace's path.
        path: PathBuf,
    },
    /// The path is not a regular file, so it cannot be read once per pass.
    NotRegular {
        /// The trace's path.
        path: PathBuf,
        /// What it is instead ("a FIFO (named pipe)", "a socket", ...).
        what: &'static str,
    },
    /// A `.zst` trace whose decompression could not start.
    Zstd {
        /// The trace's path.
        path: PathBuf,
        /// What the decoder said.
        source: io::Error,
    },
    /// A `.zst` trace in a build without the `zstd` feature.
    ZstdNotBuilt {
        /// The trace's path.
        path: PathBuf,
    },
    /// Reading the trace's first line (to guess its format) failed.
    Read {
        /// The trace's name.
        name: String,
        /// What the read said.
        source: io::Error,
    },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Open { path, .. } => write!(f, "opening trace {}", path.display()),
            SourceError::Directory { path } => write!(
                f,
                "trace {} is a directory, not a trace file",
                path.display()
            ),
            SourceError::NotRegular { path, what } => write!(
                f,
                "trace {} is {what}: a replay reads the trace once per pass, so it must be a regular file; save it to a file first",
                path.display()
            ),
            SourceError::Zstd { path, .. } => {
                write!(f, "reading zstd trace {}", path.display())
            }
            SourceError::ZstdNotBuilt { path } => write!(
                f,
                "trace {} is zstd-compressed, and this build reads no zstd (multiarc-sim's `zstd` feature); decompress it first",
                path.display()
            ),
            SourceError::Read { name, .. } => write!(f, "{name}: line 1: read error"),
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SourceError::Open { source, .. }
            | SourceError::Zstd { source, .. }
            | SourceError::Read { source, .. } => Some(source),
            SourceError::Directory { .. }
            | SourceError::NotRegular { .. }
            | SourceError::ZstdNotBuilt { .. } => None,
        }
    }
}

/// A trace file, decompressed when its name ends in `.zst`.
#[derive(Clone, Debug)]
pub struct TraceFile(PathBuf);

impl TraceFile {
    /// The trace at `path`, after checking that it is a regular file: a
    /// directory, a FIFO, a device or a socket is an error, found before
    /// anything opens it (opening a FIFO would block).
    pub fn new(path: &Path) -> Result<TraceFile, SourceError> {
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::metadata(path).map_err(|source| SourceError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let kind = meta.file_type();
        if kind.is_dir() {
            return Err(SourceError::Directory {
                path: path.to_path_buf(),
            });
        }
        if !kind.is_file() {
            let what = if kind.is_fifo() {
                "a FIFO (named pipe)"
            } else if kind.is_char_device() {
                "a character device"
            } else if kind.is_block_device() {
                "a block device"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            return Err(SourceError::NotRegular {
                path: path.to_path_buf(),
                what,
            });
        }
        Ok(TraceFile(path.to_path_buf()))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Whether the file is read through the zstd decoder (its name ends in
    /// `.zst`).
    pub fn is_zstd(&self) -> bool {
        self.0.extension().is_some_and(|e| e == "zst")
    }
}

impl TraceSource for TraceFile {
    fn name(&self) -> String {
        self.0.display().to_string()
    }

    fn open(&self) -> Result<Box<dyn BufRead>, SourceError> {
        let path = &self.0;
        let file = File::open(path).map_err(|source| SourceError::Open {
            path: path.clone(),
            source,
        })?;
        if self.is_zstd() {
            return zstd_reader(path, file);
        }
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

/// `file` (at `path`) decompressed.
#[cfg(feature = "zstd")]
fn zstd_reader(path: &Path, file: File) -> Result<Box<dyn BufRead>, SourceError> {
    let decoder = zstd::Decoder::new(file).map_err(|source| SourceError::Zstd {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Box::new(BufReader::new(ZstdErrors(decoder))))
}

/// Without the `zstd` feature: an error naming the file.
#[cfg(not(feature = "zstd"))]
fn zstd_reader(path: &Path, _file: File) -> Result<Box<dyn BufRead>, SourceError> {
    Err(SourceError::ZstdNotBuilt {
        path: path.to_path_buf(),
    })
}

/// Says that a read error came from decompressing (a corrupt or truncated
/// `.zst`, or a file that is not zstd at all); the error keeps its kind.
#[cfg(feature = "zstd")]
struct ZstdErrors<R>(R);

#[cfg(feature = "zstd")]
impl<R: Read> Read for ZstdErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("not valid zstd data (corrupt or truncated?): {e}"),
            )
        })
    }
}

/// The format of a trace whose format was not given: [`TraceFormat::Arc`]
/// when its name contains `.lis`; else [`TraceFormat::CloudPhysics`] (in
/// blocks of `block_size` bytes) when its first line starts with
/// `version,`; else [`TraceFormat::Ids`]. Only the first 64 bytes are read,
/// as bytes: a binary file is the trace reader's to report, with its line.
pub fn guess_format(source: &dyn TraceSource, block_size: u64) -> Result<TraceFormat, SourceError> {
    if source.name().contains(".lis") {
        return Ok(TraceFormat::Arc);
    }
    let mut first = Vec::new();
    source
        .open()?
        .take(64)
        .read_until(b'\n', &mut first)
        .map_err(|source_error| SourceError::Read {
            name: source.name(),
            source: source_error,
        })?;
    Ok(if first.starts_with(b"version,") {
        TraceFormat::CloudPhysics { block_size }
    } else {
        TraceFormat::Ids
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system's temporary one, removed
    /// on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(what: &str) -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("multiarc-sim-source-{what}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The error's message and its sources', as anyhow's `{:#}` shows them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut next = e.source();
        while let Some(s) = next {
            text.push_str(&format!(": {s}"));
            next = s.source();
        }
        text
    }

    fn read_all(source: &dyn TraceSource) -> String {
        let mut text = String::new();
        source.open().unwrap().read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn a_trace_file_reads_from_its_start_each_time() {
        let dir = TempDir::new("again");
        let path = dir.0.join("t.ids");
        std::fs::write(&path, "1\n2\n").unwrap();
        let file = TraceFile::new(&path).unwrap();
        assert_eq!(file.path(), path);
        assert_eq!(file.name(), path.display().to_string());
        assert!(!file.is_zstd());
        assert_eq!(read_all(&file), "1\n2\n");
        assert_eq!(read_all(&file), "1\n2\n");
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_with_its_name() {
        let dir = TempDir::new("kinds");
        let e = TraceFile::new(&dir.0).unwrap_err();
        assert!(matches!(e, SourceError::Directory { .. }), "{e}");
        assert!(e.to_string().contains("is a directory"), "{e}");

        let missing = dir.0.join("missing.ids");
        let e = TraceFile::new(&missing).unwrap_err();
        let text = chain(&e);
        assert!(
            text.starts_with(&format!("opening trace {}: ", missing.display())),
            "{text}"
        );
        match e {
            SourceError::Open { source, .. } => {
                assert_eq!(source.kind(), io::ErrorKind::NotFound)
            }
            other => panic!("{other}"),
        }

        let fifo = dir.0.join("fifo");
        mkfifo(&fifo);
        let e = TraceFile::new(&fifo).unwrap_err();
        assert!(
            matches!(
                e,
                SourceError::NotRegular {
                    what: "a FIFO (named pipe)",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("regular file"), "{e}");

        let e = TraceFile::new(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
    }

    /// Makes a FIFO at `path` with the system's `mkfifo` command.
    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("running mkfifo");
        assert!(status.success());
    }

    #[cfg(feature = "zstd")]
    #[test]
    fn a_zst_trace_is_decompressed_and_bad_zstd_data_says_so() {
        let dir = TempDir::new("zstd");
        let path = dir.0.join("t.ids.zst");
        std::fs::write(&path, zstd::encode_all(&b"7\n8\n"[..], 1).unwrap()).unwrap();
        let file = TraceFile::new(&path).unwrap();
        assert!(file.is_zstd());
        assert_eq!(read_all(&file), "7\n8\n");

        let bad = dir.0.join("bad.ids.zst");
        std::fs::write(&bad, "1\n2\n3\n").unwrap();
        let mut text = String::new();
        let e = TraceFile::new(&bad)
            .unwrap()
            .open()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap_err();
        assert!(e.to_string().contains("not valid zstd data"), "{e}");
    }

    #[cfg(not(feature = "zstd"))]
    #[test]
    fn a_zst_trace_without_the_zstd_feature_is_an_error() {
        let dir = TempDir::new("nozstd");
        let path = dir.0.join("t.ids.zst");
        std::fs::write(&path, "anything").unwrap();
        let e = TraceFile::new(&path).unwrap().open().err().unwrap();
        assert!(matches!(e, SourceError::ZstdNotBuilt { .. }), "{e}");
    }

    /// A trace held in memory, named `name`.
    struct Text {
        name: &'static str,
        text: &'static str,
    }

    impl TraceSource for Text {
        fn name(&self) -> String {
            self.name.into()
        }
        fn open(&self) -> Result<Box<dyn BufRead>, SourceError> {
            Ok(Box::new(self.text.as_bytes()))
        }
    }

    #[test]
    fn the_format_is_guessed_from_the_name_then_the_first_line() {
        let guess = |name, text| guess_format(&Text { name, text }, 4096).unwrap();
        assert_eq!(guess("P1.lis", "1 1 0 0\n"), TraceFormat::Arc);
        assert_eq!(guess("P1.lis.zst", "version,"), TraceFormat::Arc);
        assert_eq!(
            guess("w.csv", "version,time,op,size,lbn\n1,0,2a,512,0\n"),
            TraceFormat::CloudPhysics { block_size: 4096 }
        );
        assert_eq!(guess("t", "1\n2\n"), TraceFormat::Ids);
        assert_eq!(guess("t", ""), TraceFormat::Ids);
        // A binary first line is read as bytes, not refused here.
        assert_eq!(guess("t", "\u{0}\u{1}\u{ff}"), TraceFormat::Ids);
    }
}
