//! The public face of the cache: [`Cache`] and its [`Handle`]s, the
//! [`Builder`] that validates settings and starts the cache's threads, and
//! [`ConfigError`]. The facade picks the core's hit mode and evictor once,
//! when the cache is built, and then only forwards: each call is one match
//! and a call into `arc` (a `get` hit: `Cache::get` -> `Lazy::lookup` in
//! `arc/hit_mode.rs` -> the probe in `mem/table.rs`).

mod builder;
mod cache;
mod error;

pub use builder::{default_sublists, Builder, MAX_BYTES};
pub use cache::{Cache, Handle, OwnedHandle};
pub use error::ConfigError;
