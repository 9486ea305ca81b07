//! multiarc-sim: the simulator beside the multiarc cache, single-threaded
//! and independent of it.
//!
//! It holds what measures and checks a cache rather than being one:
//!
//! - [`trace`]: streaming readers of block traces (one id per line, the ARC
//!   paper's `.lis`, CloudPhysics CSV, any CSV column), bounded in memory
//!   and failing on malformed input with the line number.
//! - [`reference`](mod@reference): the papers' page-based replacement policies, written
//!   from their pseudo-code: ARC (Megiddo & Modha), CAR (Bansal & Modha) and
//!   LRU, behind the [`PagePolicy`] trait; and CAR with either of its
//!   approximations of ARC taken away ([`CarPolicy::with_parts`]), which
//!   shows where its distance from ARC comes from.
//! - [`s3arc`]: S3ARC ([`S3ArcPolicy`]), S3-FIFO's probationary and
//!   main queues with ARC's ghost lists and self-tuning split: the
//!   reference model of an adaptive policy for the cache.
//! - [`adaptive`]: the adaptive policy ([`AdaptivePolicy`]): CAR's rules and
//!   S3ARC's as two experts over one set of lists, switched on regretted
//!   evictions; the reference model of the cache's `Policy::Adaptive`.
//! - [`generations`]: ARC whose T2 is ordered by coarse generations
//!   ([`generations::GenerationArcPolicy`]): how much of ARC's order a hit
//!   keeps when it only notes when it happened (issue 41).
//! - [`s3fifo`]: S3-FIFO ([`S3FifoPolicy`], Yang et al., SOSP '23): a small
//!   and a main FIFO, a ghost FIFO and a 2-bit counter per page.
//! - [`lirs`]: LIRS ([`LirsPolicy`], Jiang & Zhang, SIGMETRICS '02): the
//!   pages of low inter-reference recency kept resident, with a bounded
//!   stack of non-resident ones.
//! - [`opt`]: Belady's OPT, which needs each request's next use, and
//!   [`opt::next_uses`] to compute them for a trace in memory
//!   ([`opt::NextUseRecorder`] for a trace streamed in passes).
//! - [`distinct`]: counting a trace's distinct block ids
//!   ([`DistinctBlocks`]), in groups of neighbours: a probe per run of
//!   neighbouring blocks rather than per block.
//! - [`source`]: where a trace's bytes come from ([`TraceSource`]): a
//!   regular file, decompressed when it ends in `.zst` (with the `zstd`
//!   feature), read from its start once per pass; and the guess of a
//!   trace's format.
//! - [`pass`]: passes over a streamed trace ([`Pass`]), each checked to
//!   read what the first one read, so that a trace changed during a replay
//!   is an error rather than wrong numbers.
//! - [`corpus`]: the traces policies are judged on, in a tuning set and a
//!   held-out set kept apart (generated families, and halves of the real
//!   traces at hand), each with its cache sizes.
//! - [`workload`]: seeded, deterministic workload generators (uniform,
//!   Zipf, one-pass scan, loop) on `rand` and `rand_distr`.
//!
//! Who uses it: the `multiarc` library's tests (as a dev-dependency: the
//! differential tests compare the cache with [`ArcPolicy`] and
//! [`CarPolicy`] request by request, on generated and real traces), and the
//! `multiarc` command (`replay` streams traces in passes and runs the
//! references and OPT beside the caches; `scan` and `poison` draw their workloads here).
//! It does not depend on the `multiarc` library, so that the library can
//! test against it.

#![warn(missing_docs)]

pub mod adaptive;
pub mod corpus;
pub mod distinct;
pub mod generations;
pub mod lirs;
pub mod opt;
pub mod pass;
pub mod reference;
pub mod s3arc;
pub mod s3fifo;
pub mod source;
pub mod trace;
pub mod workload;

pub use adaptive::AdaptivePolicy;
pub use distinct::DistinctBlocks;
pub use lirs::LirsPolicy;
pub use opt::OptPolicy;
pub use pass::{Pass, PassError};
pub use reference::{ArcPolicy, CarPolicy, LruPolicy, PagePolicy};
pub use s3arc::S3ArcPolicy;
pub use s3fifo::S3FifoPolicy;
pub use source::{SourceError, TraceFile, TraceSource};
pub use trace::{TraceError, TraceFormat, TraceReader};
