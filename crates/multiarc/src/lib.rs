//! multiarc: an embeddable, highly concurrent, scan-resistant block cache.
//!
//! The cache keeps variable-size buffers (blocks of files) under the ARC
//! replacement policy, with the concurrency design OpenZFS adopted in
//! "5497 lock contention on arcs_mtx". See the README for the design.

pub mod lock;
pub mod reference;
pub mod trace;
