//! Test support (a dev-dependency only): an S3 server that can be stopped
//! and started again on the same port ([`RestartableS3`]), for tests of a
//! store that goes away and comes back. It re-exports the tools the tests
//! use beside it from `multiarc-store-tools` (the in-process server, the
//! counting store, the forwarding macro), so a test names one crate.

#![warn(missing_docs)]

mod restartable;

pub use multiarc_store_tools::{
    forward_object_store, CountingStore, Keys, ReadCounts, ReadTraffic, S3Loopback, ServedBucket,
};
pub use restartable::RestartableS3;
