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

pub(crate) use slab::slot_bytes as slab_slot_bytes;

/// The fields of an entry's meta word (see `entry`).
pub(crate) mod meta {
    pub(crate) use super::entry::{
        hits, holds, state, with_state, HIT, HITS_FOLD_BIT, HITS_MASK, HOLD, HOLD_LIMIT,
    };
}
