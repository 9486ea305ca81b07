//! Block traces: streaming readers that turn a trace file into the sequence
//! of block ids it requests, in memory bounded by one line.
//!
//! Formats:
//! - [`TraceFormat::Ids`]: one decimal block id per line (blank lines and
//!   `#` comments are skipped).
//! - [`TraceFormat::Arc`]: the ARC paper's `.lis` traces, `start_block
//!   block_count ignored request_id` per line; a line requests `block_count`
//!   consecutive blocks.
//! - [`TraceFormat::CloudPhysics`]: CSV with the header `version,time,op,
//!   size,lbn`, `lbn` in 512-byte sectors and `size` in bytes; a request
//!   touches every block of `block_size` bytes it overlaps, in order.
//! - [`TraceFormat::Csv`]: any CSV whose column `id_column` (0-based) holds
//!   the block id, with an optional header line.
//!
//! A reader takes any `BufRead`; the `source` module's `TraceFile` (which
//! uses this one) opens a file and decompresses a `.zst` one.
//!
//! Limits, so that a malformed trace fails with its line number instead of
//! running forever or filling memory: a line is at most [`MAX_LINE_BYTES`]
//! and must be UTF-8 text; a request (an ARC line's `block_count`, a
//! CloudPhysics request's blocks) is at most [`MAX_REQUEST_BLOCKS`] blocks
//! and may not run past block id `u64::MAX`.

use std::fmt;
use std::io::{BufRead, Read};

/// The longest line a trace may have, newline included: 64 KiB (a trace
/// line is a few numbers; a longer one is binary data).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// The most blocks one request may touch: 2^20 (1,048,576), 512 MiB of
/// 512-byte pages or 8 GiB of 8 KiB blocks in one I/O; real traces' largest
/// requests are a few MiB. A count past it (`2^64 - 1`) is corruption, and
/// would otherwise be expanded block by block for ever.
pub const MAX_REQUEST_BLOCKS: u64 = 1 << 20;

/// How a trace file is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// One decimal block id per line.
    Ids,
    /// `start_block block_count ignored request_id` per line.
    Arc,
    /// The CloudPhysics CSV (`version,time,op,size,lbn`), expanded to blocks
    /// of `block_size` bytes.
    CloudPhysics {
        /// Bytes per block (> 0).
        block_size: u64,
    },
    /// A CSV with the block id in column `id_column` (0-based).
    Csv {
        /// Column of the block id.
        id_column: usize,
        /// Whether the first line is a header to skip.
        header: bool,
    },
}

/// A malformed trace: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number (0 when the error is not about one line).
    pub line: u64,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "line {}: {}", self.line, self.reason)
        }
    }
}

impl std::error::Error for TraceError {}

/// Reads block ids from a trace, one request's blocks at a time.
pub struct TraceReader<R> {
    input: R,
    format: TraceFormat,
    line: u64,
    bytes: Vec<u8>,
    /// Blocks of the current request still to hand out: next id, how many.
    pending: (u64, u64),
    /// The current request's time, in a format that has one.
    time: Option<u64>,
    produced: bool,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `input` in `format`.
    pub fn new(input: R, format: TraceFormat) -> TraceReader<R> {
        TraceReader {
            input,
            format,
            line: 0,
            bytes: Vec::new(),
            pending: (0, 0),
            time: None,
            produced: false,
            done: false,
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The time of the request the last block id came from, in the
    /// trace's own unit, where its format has one (CloudPhysics' `time`
    /// column); `None` for the others, whose order is their only clock.
    pub fn time(&self) -> Option<u64> {
        self.time
    }

    fn err(&self, reason: impl Into<String>) -> TraceError {
        TraceError {
            line: self.line,
            reason: reason.into(),
        }
    }

    /// Reads lines until one yields a request: `Ok(Some((first, count)))`,
    /// `Ok(None)` at the end.
    fn next_request(&mut self) -> Result<Option<(u64, u64)>, TraceError> {
        loop {
            self.bytes.clear();
            // The line being read is the next one, also when reading it fails.
            self.line += 1;
            let n = (&mut self.input)
                .take(MAX_LINE_BYTES as u64)
                .read_until(b'\n', &mut self.bytes)
                .map_err(|e| self.err(format!("read error: {e}")))?;
            if n == 0 {
                self.line -= 1;
                return Ok(None);
            }
            if n == MAX_LINE_BYTES && self.bytes.last() != Some(&b'\n') {
                return Err(self.err(format!(
                    "longer than {MAX_LINE_BYTES} bytes (not a text trace?)"
                )));
            }
            let line = match std::str::from_utf8(&self.bytes) {
                Ok(text) => text.trim(),
                Err(e) => {
                    return Err(self.err(format!(
                        "not UTF-8 text: invalid byte at column {} (a binary file?)",
                        e.valid_up_to() + 1
                    )))
                }
            };
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let number = |field: Option<&str>, what: &str| -> Result<u64, TraceError> {
                let field = field.map(str::trim).unwrap_or("");
                if field.is_empty() {
                    return Err(self.err(format!("missing {what}")));
                }
                field
                    .parse::<u64>()
                    .map_err(|_| self.err(format!("{what} {field:?} is not a whole number")))
            };
            match self.format {
                TraceFormat::Ids => return Ok(Some((number(Some(line), "block id")?, 1))),
                TraceFormat::Arc => {
                    let mut fields = line.split_whitespace();
                    let start = number(fields.next(), "start block")?;
                    let count = number(fields.next(), "block count")?;
                    if count == 0 {
                        return Err(self.err("block count is 0"));
                    }
                    return self.request(start, count, || format!("block count {count}"));
                }
                TraceFormat::CloudPhysics { block_size } => {
                    if self.line == 1 {
                        if !line.starts_with("version,") {
                            return Err(self.err(format!(
                                "expected the header `version,time,op,size,lbn`, found {line:?}"
                            )));
                        }
                        continue;
                    }
                    let fields: Vec<&str> = line.split(',').collect();
                    if fields.len() != 5 {
                        return Err(self.err(format!(
                            "expected 5 fields (version,time,op,size,lbn), found {}",
                            fields.len()
                        )));
                    }
                    // Only the corpus's time windows read it: a time that
                    // is not a whole number leaves the request without one.
                    let time = fields[1].trim().parse::<u64>().ok();
                    let size = number(Some(fields[3]), "size")?;
                    let lbn = number(Some(fields[4]), "lbn")?;
                    let start = lbn
                        .checked_mul(512)
                        .ok_or_else(|| self.err("lbn out of range"))?;
                    let end = start
                        .checked_add(size.max(1))
                        .ok_or_else(|| self.err("request end out of range"))?;
                    let first = start / block_size;
                    let last = (end - 1) / block_size;
                    self.time = time;
                    return self.request(first, last - first + 1, || {
                        format!(
                            "size {size} ({} blocks of {block_size} bytes)",
                            last - first + 1
                        )
                    });
                }
                TraceFormat::Csv { id_column, header } => {
                    if header && self.line == 1 {
                        continue;
                    }
                    let field = line.split(',').nth(id_column);
                    if field.is_none() {
                        return Err(self.err(format!("no column {id_column}")));
                    }
                    return Ok(Some((number(field, "block id")?, 1)));
                }
            }
        }
    }
}

impl<R> TraceReader<R> {
    /// A request of `count` blocks from `first`, within the limits.
    fn request(
        &self,
        first: u64,
        count: u64,
        what: impl FnOnce() -> String,
    ) -> Result<Option<(u64, u64)>, TraceError> {
        if count > MAX_REQUEST_BLOCKS {
            return Err(TraceError {
                line: self.line,
                reason: format!(
                    "{} is past the limit of {MAX_REQUEST_BLOCKS} blocks per request",
                    what()
                ),
            });
        }
        if first.checked_add(count - 1).is_none() {
            return Err(TraceError {
                line: self.line,
                reason: format!("{} runs past the largest block id", what()),
            });
        }
        Ok(Some((first, count)))
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<u64, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.pending.1 == 0 {
            match self.next_request() {
                Ok(Some(request)) => self.pending = request,
                Ok(None) => {
                    self.done = true;
                    if !self.produced {
                        return Some(Err(TraceError {
                            line: 0,
                            reason: "the trace is empty (no requests)".into(),
                        }));
                    }
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        let (id, count) = self.pending;
        self.pending = (id.wrapping_add(1), count - 1);
        self.produced = true;
        Some(Ok(id))
    }
}

impl TraceFormat {
    /// The format's short name: `ids`, `arc`, `cloudphysics` or `csv`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Ids => "ids",
            TraceFormat::Arc => "arc",
            TraceFormat::CloudPhysics { .. } => "cloudphysics",
            TraceFormat::Csv { .. } => "csv",
        }
    }

    fn check(self) -> Result<(), TraceError> {
        match self {
            TraceFormat::CloudPhysics { block_size: 0 } => Err(TraceError {
                line: 0,
                reason: "block size must be greater than 0".into(),
            }),
            _ => Ok(()),
        }
    }

    /// A reader of `input` in this format, after checking the format's
    /// parameters.
    pub fn reader<R: BufRead>(self, input: R) -> Result<TraceReader<R>, TraceError> {
        self.check()?;
        Ok(TraceReader::new(input, self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, format: TraceFormat) -> Result<Vec<u64>, TraceError> {
        format.reader(text.as_bytes())?.collect()
    }

    /// Each block id comes with its request's time where the format has
    /// one (CloudPhysics), and none where it does not.
    #[test]
    fn requests_carry_their_time_in_cloudphysics_only() {
        let text = "version,time,op,size,lbn\n1,7,2a,1024,0\n1,9,2a,512,8\n1,x,2a,512,9\n";
        let mut r = TraceFormat::CloudPhysics { block_size: 512 }
            .reader(text.as_bytes())
            .unwrap();
        let mut seen = Vec::new();
        while let Some(id) = r.next() {
            seen.push((id.unwrap(), r.time()));
        }
        assert_eq!(seen, [(0, Some(7)), (1, Some(7)), (8, Some(9)), (9, None)]);
        let mut r = TraceFormat::Arc.reader("5 2 0 1\n".as_bytes()).unwrap();
        assert_eq!(r.next().unwrap().unwrap(), 5);
        assert_eq!(r.time(), None);
    }

    #[test]
    fn ids() {
        assert_eq!(
            read("1\n\n# c\n 2 \n3", TraceFormat::Ids),
            Ok(vec![1, 2, 3])
        );
        let e = read("1\nx\n", TraceFormat::Ids).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: block id \"x\" is not a whole number"
        );
    }

    #[test]
    fn arc_lines_expand_to_consecutive_blocks() {
        assert_eq!(
            read("10 3 0 1\n5 1 0 2\n", TraceFormat::Arc),
            Ok(vec![10, 11, 12, 5])
        );
        assert_eq!(read("10\n", TraceFormat::Arc).unwrap_err().line, 1);
        assert!(read("1 0 0 0\n", TraceFormat::Arc)
            .unwrap_err()
            .reason
            .contains("block count is 0"));
    }

    #[test]
    fn cloudphysics_expands_byte_ranges_to_blocks() {
        let f = TraceFormat::CloudPhysics { block_size: 8192 };
        let text = "version,time,op,size,lbn\n1,0,2a,512,0\n1,0,2a,8192,8\n1,0,28,16384,32\n";
        // [0,512) -> 0; [4096, 12288) -> 0,1; [16384, 32768) -> 2,3.
        assert_eq!(read(text, f), Ok(vec![0, 0, 1, 2, 3]));
        let e = read("version,time,op,size,lbn\n1,0,2a,512\n", f).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(read("1,0,2a,512,0\n", f)
            .unwrap_err()
            .reason
            .contains("header"));
        assert!(read("version\n", TraceFormat::CloudPhysics { block_size: 0 }).is_err());
    }

    #[test]
    fn csv_column_and_header() {
        let f = TraceFormat::Csv {
            id_column: 1,
            header: true,
        };
        assert_eq!(read("a,b\nx,7\ny,8\n", f), Ok(vec![7, 8]));
        assert_eq!(read("a,b\nx\n", f).unwrap_err().line, 2);
    }

    #[test]
    fn huge_requests_are_refused_with_their_line() {
        let e = read("1 1 0 0\n0 18446744073709551615 0 1\n", TraceFormat::Arc).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.reason.contains("18446744073709551615") && e.reason.contains("1048576"),
            "{e}"
        );
        // The limit itself is fine; one past it is not.
        let ok = format!("7 {MAX_REQUEST_BLOCKS} 0 0\n");
        assert_eq!(
            TraceFormat::Arc.reader(ok.as_bytes()).unwrap().count() as u64,
            MAX_REQUEST_BLOCKS
        );
        let past = format!("7 {} 0 0\n", MAX_REQUEST_BLOCKS + 1);
        assert!(read(&past, TraceFormat::Arc).is_err());
        // Ids may not wrap around past u64::MAX.
        let e = read("18446744073709551615 2 0 0\n", TraceFormat::Arc).unwrap_err();
        assert!(e.reason.contains("largest block id"), "{e}");
        assert_eq!(
            read("18446744073709551615 1 0 0\n", TraceFormat::Arc),
            Ok(vec![u64::MAX])
        );
        // A CloudPhysics size of 2^64 - 1 bytes.
        let f = TraceFormat::CloudPhysics { block_size: 512 };
        let e = read(
            "version,time,op,size,lbn\n1,0,2a,512,0\n1,0,2a,18446744073709551615,0\n",
            f,
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = read("version,time,op,size,lbn\n1,0,2a,1099511627776,0\n", f).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("per request"), "{e}");
    }

    #[test]
    fn invalid_utf8_and_long_lines_name_their_line() {
        let f = TraceFormat::Ids;
        let e: Result<Vec<u64>, _> = f.reader(&b"1\n\xff\xfe2\n3\n"[..]).unwrap().collect();
        let e = e.unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("UTF-8"), "{e}");
        let e: Result<Vec<u64>, _> = f.reader(&b"\x80"[..]).unwrap().collect();
        assert_eq!(e.unwrap_err().line, 1);
        // A line past the limit (binary data without newlines) is refused
        // without reading it all.
        let mut long = b"1\n".to_vec();
        long.extend(std::iter::repeat_n(b'7', 4 * MAX_LINE_BYTES));
        let e: Result<Vec<u64>, _> = f.reader(&long[..]).unwrap().collect();
        let e = e.unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("longer than"), "{e}");
        // A read error is reported on the line being read.
        struct Failing(u32);
        impl std::io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.0 += 1;
                if self.0 == 1 {
                    buf[..4].copy_from_slice(b"1\n2\n");
                    Ok(4)
                } else {
                    Err(std::io::Error::other("disk on fire"))
                }
            }
        }
        let r = std::io::BufReader::new(Failing(0));
        let e: Result<Vec<u64>, _> = f.reader(r).unwrap().collect();
        let e = e.unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.reason.contains("disk on fire"), "{e}");
    }

    #[test]
    fn an_empty_trace_is_an_error() {
        assert!(read("", TraceFormat::Ids)
            .unwrap_err()
            .reason
            .contains("empty"));
        assert!(read("# only a comment\n", TraceFormat::Ids).is_err());
    }
}
