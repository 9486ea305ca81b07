//! multiarc in front of an object store.
//!
//! TODO: crate docs.

#![warn(missing_docs)]

mod config;
mod error;
mod key;
mod metadata;
mod read;
mod stats;
mod store;

pub use config::{
    BuildError, Builder, DEFAULT_BLOCK_SIZE, DEFAULT_MAX_FETCH, DEFAULT_METADATA_TTL,
};
pub use key::ObjectBlockKey;
pub use stats::CachedStoreStats;
pub use store::CachedStore;
