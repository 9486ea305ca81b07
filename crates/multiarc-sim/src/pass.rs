//! Passes over a trace that is streamed, never held in memory: a replay
//! reads it once to count its requests, then again for each thing it
//! measures. [`Pass::read`] streams a trace's block ids through a closure and
//! returns what it read (how many requests, and a fingerprint of their ids
//! in order); [`Pass::read_again`] reads it once more and fails, instead of
//! indexing past the first pass's count, when the trace changed meanwhile
//! (it grew, shrank or holds other blocks).
//!
//! The closures may stop a pass with an error of the caller's type `E`
//! (a memory limit, say), which needs only `From<PassError>`.

use crate::source::{SourceError, TraceSource};
use crate::trace::{TraceError, TraceFormat};
use std::fmt;

/// What one pass over a trace read: its block requests, and a fingerprint
/// of their ids in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Block requests read.
    pub requests: u64,
    /// A hash of the ids read, in order.
    pub fingerprint: u64,
}

/// Why a pass failed.
#[derive(Debug)]
pub enum PassError {
    /// The trace could not be opened.
    Source(SourceError),
    /// The trace is malformed (or its reading failed at a line).
    Malformed {
        /// The trace's name.
        name: String,
        /// Where and why.
        error: TraceError,
    },
    /// A later pass did not read what the first one read.
    Changed {
        /// The trace's name.
        name: String,
        /// Block requests the first pass read.
        first_requests: u64,
        /// The later pass, as the caller named it ("opt", "capacity 5000").
        pass: String,
        /// How it differed.
        change: Change,
    },
}

/// How a later pass differed from the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// It read more requests (found when it read one past the first's count).
    Grew,
    /// It read fewer requests: this many.
    Shrank(u64),
    /// It read as many requests, other blocks among them.
    OtherBlocks,
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassError::Source(e) => e.fmt(f),
            PassError::Malformed { name, error } => write!(f, "{name}: {error}"),
            PassError::Changed {
                name,
                first_requests,
                pass,
                change,
            } => {
                let what = match change {
                    Change::Grew => "more (it grew)".to_string(),
                    Change::Shrank(n) => n.to_string(),
                    Change::OtherBlocks => "as many but other blocks".to_string(),
                };
                write!(
                    f,
                    "{name} changed while it was replayed: the first pass read {first_requests} block requests, the {pass} pass {what}; a replay reads the trace once per pass, so it must not change meanwhile"
                )
            }
        }
    }
}

impl std::error::Error for PassError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Its own message is the source's: the chain goes on from there.
            PassError::Source(e) => e.source(),
            PassError::Malformed { .. } | PassError::Changed { .. } => None,
        }
    }
}

impl From<SourceError> for PassError {
    fn from(e: SourceError) -> PassError {
        PassError::Source(e)
    }
}

impl Pass {
    /// Nothing read yet.
    const START: Pass = Pass {
        requests: 0,
        fingerprint: 0,
    };

    /// Counts `id` as the pass's next request.
    fn add(&mut self, id: u64) {
        self.requests += 1;
        self.fingerprint =
            (self.fingerprint.rotate_left(5) ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Streams `source`'s block ids, read in `format`, through `f`, which
    /// may stop the pass with an error; returns what the pass read.
    pub fn read<E: From<PassError>>(
        source: &dyn TraceSource,
        format: TraceFormat,
        mut f: impl FnMut(u64) -> Result<(), E>,
    ) -> Result<Pass, E> {
        Pass::read_timed(source, format, |id, _| f(id))
    }

    /// [`read`](Pass::read), giving `f` each block id with its request's
    /// time where the format has one ([`TraceReader::time`]).
    ///
    /// [`TraceReader::time`]: crate::trace::TraceReader::time
    pub fn read_timed<E: From<PassError>>(
        source: &dyn TraceSource,
        format: TraceFormat,
        mut f: impl FnMut(u64, Option<u64>) -> Result<(), E>,
    ) -> Result<Pass, E> {
        let malformed = |error| PassError::Malformed {
            name: source.name(),
            error,
        };
        let input = source.open().map_err(PassError::from)?;
        let mut reader = format.reader(input).map_err(malformed)?;
        let mut pass = Pass::START;
        while let Some(id) = reader.next() {
            let id = id.map_err(malformed)?;
            f(id, reader.time())?;
            pass.add(id);
        }
        Ok(pass)
    }

    /// Streams `source` once more, as [`read`](Pass::read) does, calling
    /// `f(index, id)` for each request, where `index` counts from 0 and
    /// stays below this (the first) pass's `requests`. Fails with
    /// [`PassError::Changed`], naming the pass `pass_name`, when this pass
    /// reads more requests (before `f` sees the first one too many), fewer,
    /// or other blocks.
    pub fn read_again<E: From<PassError>>(
        &self,
        source: &dyn TraceSource,
        format: TraceFormat,
        pass_name: &str,
        mut f: impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let changed = |change| PassError::Changed {
            name: source.name(),
            first_requests: self.requests,
            pass: pass_name.to_string(),
            change,
        };
        let mut index = 0u64;
        let pass = Pass::read(source, format, |id| {
            if index >= self.requests {
                return Err(E::from(changed(Change::Grew)));
            }
            f(index, id)?;
            index += 1;
            Ok(())
        })?;
        if pass.requests != self.requests {
            return Err(E::from(changed(Change::Shrank(pass.requests))));
        }
        if pass.fingerprint != self.fingerprint {
            return Err(E::from(changed(Change::OtherBlocks)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::io::BufRead;

    /// A trace whose `k`-th opening reads `texts[k]` (the last one from
    /// then on): a file written to between passes.
    struct Changing {
        texts: Vec<String>,
        opened: Cell<usize>,
    }

    impl Changing {
        fn new(texts: &[&str]) -> Changing {
            Changing {
                texts: texts.iter().map(|t| t.to_string()).collect(),
                opened: Cell::new(0),
            }
        }
    }

    impl TraceSource for Changing {
        fn name(&self) -> String {
            "changing.ids".into()
        }
        fn open(&self) -> Result<Box<dyn BufRead>, SourceError> {
            let k = self.opened.get();
            self.opened.set(k + 1);
            let text = self.texts[k.min(self.texts.len() - 1)].clone();
            Ok(Box::new(std::io::Cursor::new(text.into_bytes())))
        }
    }

    fn first(source: &dyn TraceSource) -> Pass {
        Pass::read::<PassError>(source, TraceFormat::Ids, |_| Ok(())).unwrap()
    }

    #[test]
    fn a_pass_counts_and_fingerprints_what_it_read() {
        let source = Changing::new(&["1\n2\n3\n"]);
        let mut ids = Vec::new();
        let pass = Pass::read::<PassError>(&source, TraceFormat::Ids, |id| {
            ids.push(id);
            Ok(())
        })
        .unwrap();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(pass.requests, 3);
        // The order counts: the same ids in another order differ.
        let other = first(&Changing::new(&["3\n2\n1\n"]));
        assert_eq!(other.requests, 3);
        assert_ne!(other.fingerprint, pass.fingerprint);
        assert_eq!(first(&Changing::new(&["1\n2\n3\n"])), pass);
    }

    #[test]
    fn the_same_trace_reads_again_with_its_indexes() {
        let source = Changing::new(&["5\n6\n5\n"]);
        let pass = first(&source);
        let mut seen = Vec::new();
        pass.read_again::<PassError>(&source, TraceFormat::Ids, "second", |i, id| {
            seen.push((i, id));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [(0, 5), (1, 6), (2, 5)]);
    }

    #[test]
    fn a_trace_that_changed_is_an_error_naming_the_pass() {
        for (later, change) in [
            ("5\n6\n5\n7\n", Change::Grew),
            ("5\n6\n", Change::Shrank(2)),
            ("5\n6\n6\n", Change::OtherBlocks),
        ] {
            let source = Changing::new(&["5\n6\n5\n", later]);
            let pass = first(&source);
            let mut calls = 0;
            let e = pass
                .read_again::<PassError>(&source, TraceFormat::Ids, "opt", |i, _| {
                    assert!(i < 3, "index {i} past the first pass");
                    calls += 1;
                    Ok(())
                })
                .unwrap_err();
            match &e {
                PassError::Changed {
                    first_requests: 3,
                    change: c,
                    ..
                } => assert_eq!(*c, change),
                other => panic!("{later:?}: {other}"),
            }
            let text = e.to_string();
            assert!(
                text.starts_with("changing.ids changed while it was replayed")
                    && text.contains("read 3 block requests, the opt pass"),
                "{text}"
            );
            assert!(calls <= 3);
        }
    }

    #[test]
    fn a_malformed_trace_names_itself_and_the_line() {
        let e = Pass::read::<PassError>(&Changing::new(&["1\nx\n"]), TraceFormat::Ids, |_| Ok(()))
            .unwrap_err();
        assert!(matches!(e, PassError::Malformed { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "changing.ids: line 2: block id \"x\" is not a whole number"
        );
    }

    /// The caller's own error stops the pass where it is returned.
    #[test]
    fn the_callers_error_stops_the_pass() {
        #[derive(Debug)]
        enum Mine {
            Full(u64),
            Pass(PassError),
        }
        impl From<PassError> for Mine {
            fn from(e: PassError) -> Mine {
                Mine::Pass(e)
            }
        }
        let mut seen = 0;
        let e = Pass::read(&Changing::new(&["1\n2\n3\n"]), TraceFormat::Ids, |id| {
            seen += 1;
            if id == 2 {
                return Err(Mine::Full(id));
            }
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(e, Mine::Full(2)), "{e:?}");
        assert_eq!(seen, 2);
        // The trace's own errors come as the caller's type too.
        let e = Pass::read(&Changing::new(&["1\nx\n"]), TraceFormat::Ids, |_| {
            Ok::<(), Mine>(())
        })
        .unwrap_err();
        match e {
            Mine::Pass(PassError::Malformed { error, .. }) => assert_eq!(error.line, 2),
            other => panic!("{other:?}"),
        }
    }
}
