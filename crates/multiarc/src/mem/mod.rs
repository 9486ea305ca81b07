//! The concurrent memory structures: where buffers live and how threads
//! reach them, with no replacement policy. Nothing here knows the ARC: the
//! table maps keys to entries, a multilist keeps entries in LRU order per
//! sublist, the epoch says when memory a lock-free reader may still see can
//! be freed, and striped counters keep counting off shared cache lines.
//!
//! - `entry`: one buffer in one allocation, and its meta word (holds, a
//!   state tag, hits).
//! - `table`: the striped hash table and its lock-free probe.
//! - `multilist`: a list split into independently locked sublists.
//! - `epoch`: epoch-based reclamation (with `membarrier`).
//! - `striped`: per-thread striped counters.
//! - `slab`: the entries' memory, carved from 2 MiB pages the cache maps
//!   itself (malloc's under loom, and for sizes it does not take).
//! - [`sync`]: the atomics (loom's under `cfg(loom)`) and poison-ignoring
//!   locking, the one inside every room may use.

mod entry;
mod epoch;
mod multilist;
#[cfg(all(not(loom), target_os = "linux", target_pointer_width = "64"))]
mod slab;
mod striped;
pub(crate) mod sync;
mod table;

pub(crate) use entry::{EntryPtr, Header, State};
#[cfg(test)]
pub(crate) use epoch::pin;
pub(crate) use epoch::{try_pin, Limbo};
pub(crate) use multilist::Multilist;
pub(crate) use striped::{thread_stripe, Draws, Striped};
pub(crate) use table::{HashTable, Probe};

/// The slabs (`slab`) where they are built: Linux, 64-bit, not under loom
/// (whose models free through malloc). Elsewhere every entry is malloc's.
#[cfg(all(not(loom), target_os = "linux", target_pointer_width = "64"))]
mod slabs {
    pub(crate) use super::slab::{alloc, free, slot_bytes};
}

#[cfg(not(all(not(loom), target_os = "linux", target_pointer_width = "64")))]
mod slabs {
    use std::ptr::NonNull;

    pub(crate) fn alloc(_size: usize, _align: usize) -> Option<NonNull<u8>> {
        None
    }

    /// # Safety
    /// None needed: nothing is a slab's here.
    pub(crate) unsafe fn free(_p: NonNull<u8>) -> bool {
        false
    }

    pub(crate) fn slot_bytes() -> u64 {
        0
    }
}

pub(crate) use slabs::slot_bytes as slab_slot_bytes;

/// The fields of an entry's meta word (see `entry`).
pub(crate) mod meta {
    pub(crate) use super::entry::{
        hits, holds, state, with_state, HIT, HITS_FOLD_BIT, HITS_MASK, HOLD, HOLD_LIMIT,
    };
}
