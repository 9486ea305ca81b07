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

/// A key that the second tier ([`Builder::l2`](crate::Builder::l2)) can
/// write to its device and read back after a restart: a fixed-length
/// encoding.
pub trait PersistentKey: Key {
    /// The length of every encoding.
    const ENCODED_LEN: usize;
    /// Writes the key's encoding into `out` (`ENCODED_LEN` bytes).
    fn encode(&self, out: &mut [u8]);
    /// The key whose encoding is `bytes` (`ENCODED_LEN` bytes).
    fn decode(bytes: &[u8]) -> Self;
}

impl PersistentKey for u64 {
    const ENCODED_LEN: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    }
}

impl PersistentKey for BlockKey {
    const ENCODED_LEN: usize = 16;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.object.to_le_bytes());
        out[8..16].copy_from_slice(&self.block.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        BlockKey::new(word(0), word(8))
    }
}
