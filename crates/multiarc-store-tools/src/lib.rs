//! Tools for measuring what reaches an object store, used by `multiarc
//! bench --workload object` at run time and by the tests:
//!
//! - [`CountingStore`]: an `object_store::ObjectStore` in front of another
//!   that counts the reads reaching it and delays each by an emulated
//!   store latency;
//! - [`forward_object_store!`]: writes a wrapper's pass-through methods, so
//!   every wrapper (this crate's, the benchmark's foyer store, the tests'
//!   failing stores) forwards them one way;
//! - [`S3Loopback`]: an S3 server in-process on 127.0.0.1 (s3s-fs over a
//!   directory), the benchmark's store when it is given no endpoint.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use multiarc_store_tools::{Keys, S3Loopback};
//! let dir = std::env::temp_dir().join("objects");
//! let server = S3Loopback::start(&dir, "bucket", Keys::new("key", "secret")).await?;
//! // An S3 client: endpoint `server.endpoint()`, bucket "bucket", region
//! // us-east-1, path-style requests, plain HTTP allowed.
//! println!("{}", server.endpoint());
//! server.shutdown().await; // or drop it
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod counting_store;
mod forward;
mod server;

pub use counting_store::{CountingStore, ReadCounts, ReadTraffic};
#[doc(hidden)]
pub use forward::{BoxFuture as __BoxFuture, BoxStream as __BoxStream};
#[doc(hidden)]
pub use object_store as __object_store;
pub use server::{Keys, S3Loopback, ServedBucket};
