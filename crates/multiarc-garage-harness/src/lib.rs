//! Test support: a [Garage](https://garagehq.deuxfleurs.fr) cluster started
//! from a test, on loopback.
//!
//! Garage is a distributed S3-compatible object store that people run in
//! production. [`Garage::start`] runs one node, or several (each its own
//! process, with its own ports and directories in one temporary directory,
//! the same RPC secret, connected to each other, all in the layout, with
//! `replication_factor` = the number of nodes), waits until the cluster
//! reports itself fully operational, creates a bucket and an access key
//! allowed to read and write it, and gives the S3 endpoint of every node
//! and the credentials. Dropping the [`Garage`] kills its processes and
//! waits for them, then removes the directory.
//!
//! The `garage` binary is found on `PATH`, else in `$CARGO_HOME/bin` (by
//! default `~/.cargo/bin`); `.ci/run` installs it. Tests call
//! [`Garage::start_for_tests`], which skips (with [`ForTests::Skip`] and a
//! reason to print) where the binary is absent, unless the environment
//! variable `CI` is set: then its absence is an error.
//!
//! ```no_run
//! use multiarc_garage_harness::{ForTests, Garage};
//! let garage = match Garage::start_for_tests(3).unwrap() {
//!     ForTests::Running(garage) => garage,
//!     ForTests::Skip { reason } => return eprintln!("skipped: {reason}"),
//! };
//! // An S3 client for garage.endpoint(0) (or any node's), region
//! // garage.region, bucket garage.bucket, key garage.access_key_id /
//! // garage.secret_access_key, path-style requests.
//! # let _ = garage;
//! ```
//!
//! Errors name what failed (which node, which step, the command) and carry
//! the tail of the nodes' logs. The processes are killed when the
//! [`Garage`] is dropped, also when a test panics; a test process killed
//! outright leaves them running.

mod binary;
mod cluster;
mod error;
mod process;

pub use binary::{find_garage, garage_version};
pub use cluster::{ForTests, Garage, DEFAULT_TIMEOUT};
pub use error::HarnessError;
