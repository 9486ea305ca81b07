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

/// Bytes of buffer memory that this process's caches hold on pages they
/// map themselves, outside the global allocator: buffers of 4 KiB to
/// 64 KiB (header included) are carved in order from 2 MiB pages, which
/// makes hits faster than on malloc's scattered 4 KiB pages. Counts the
/// slots in use (as malloc's chunks would count them); a memory count
/// through the global allocator does not see them. A chunk gives its pages
/// back to the system when all its buffers are gone.
pub fn slab_bytes() -> u64 {
    crate::mem::slab_slot_bytes()
}
