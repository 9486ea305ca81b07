//! Cache keys.

use std::hash::Hash;

/// Anything usable as a cache key: hashable, comparable, cheap to clone and
/// shareable between threads. Implemented for every such type (`u64`,
/// `(u64, u64)`, `String`, [`BlockKey`], ...).
pub trait Key: Hash + Eq + Clone + Send + Sync + 'static {}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Key for T {}

/// The address of one block of one object (a file, a table, a blob): the
/// natural key of a block cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// The object the block belongs to (a file id, an inode, ...).
    pub object: u64,
    /// The block number within the object.
    pub block: u64,
}

impl BlockKey {
    /// The key of block `block` of object `object`.
    pub const fn new(object: u64, block: u64) -> BlockKey {
        BlockKey { object, block }
    }
}
