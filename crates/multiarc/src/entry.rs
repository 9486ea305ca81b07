//! The header of one cached buffer (OpenZFS's `arc_buf_hdr_t`).
//!
//! An entry is immutable except for three small fields that the cache's
//! locking protocol guards (see `cache.rs`): the hold count, the ARC state and
//! the slot the entry occupies in its sublist while it is linked there.
//! Evicting a buffer does not mutate its entry into a ghost: it replaces the
//! entry in the hash table by a new data-less ghost entry, so a buffer's bytes
//! never change under a reader.

use crate::sync::{AtomicU32, AtomicU8, Ordering};

/// Where an entry is in the ARC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// Seen once recently (the paper's T1).
    Mru = 0,
    /// Seen at least twice recently (T2).
    Mfu = 1,
    /// Evicted from MRU; key and size remembered (B1).
    MruGhost = 2,
    /// Evicted from MFU (B2).
    MfuGhost = 3,
    /// Removed from the hash table while held: freed on the last release.
    Anon = 4,
}

impl State {
    pub(crate) const ALL: [State; 5] = [
        State::Mru,
        State::Mfu,
        State::MruGhost,
        State::MfuGhost,
        State::Anon,
    ];

    fn from_u8(v: u8) -> State {
        State::ALL[v as usize]
    }

    /// True for the two states whose entries hold data in the lists.
    pub(crate) fn is_live(self) -> bool {
        matches!(self, State::Mru | State::Mfu)
    }

    pub(crate) fn is_ghost(self) -> bool {
        matches!(self, State::MruGhost | State::MfuGhost)
    }

    /// The ghost state a buffer evicted from this state goes to.
    pub(crate) fn ghost(self) -> State {
        match self {
            State::Mru => State::MruGhost,
            State::Mfu => State::MfuGhost,
            other => other,
        }
    }
}

/// Sentinel for "not linked in any sublist".
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Lazy hit mode: bit of `Entry::holds` set by a hit, cleared by the evictor
/// (CAR's reference bit).
pub(crate) const REFERENCED: u32 = 1 << 31;
/// The hold count part of `Entry::holds` (eager hit mode).
pub(crate) const HOLDS: u32 = REFERENCED - 1;

/// One cached buffer or ghost.
pub(crate) struct Entry<K> {
    pub(crate) key: K,
    pub(crate) hash: u64,
    /// The cached bytes (empty for ghosts).
    pub(crate) data: Box<[u8]>,
    /// Bytes charged to the cache: `data.len()`, or the evicted size for ghosts.
    pub(crate) bytes: u64,
    /// Eager hit mode: the number of live `Handle`s, changing 0->1 and 1->0
    /// only under the entry's hash stripe lock. Lazy hit mode: only the
    /// `REFERENCED` bit (there a hold is a clone of the entry's `Arc`).
    pub(crate) holds: AtomicU32,
    state: AtomicU8,
    /// Slot in the sublist of its state while linked, else `NO_SLOT`; read and
    /// written only under that sublist's lock.
    slot: AtomicU32,
}

impl<K> Entry<K> {
    pub(crate) fn new(key: K, hash: u64, data: Box<[u8]>, state: State, holds: u32) -> Entry<K> {
        let bytes = data.len() as u64;
        Entry {
            key,
            hash,
            data,
            bytes,
            holds: AtomicU32::new(holds),
            state: AtomicU8::new(state as u8),
            slot: AtomicU32::new(NO_SLOT),
        }
    }

    pub(crate) fn ghost(key: K, hash: u64, bytes: u64, state: State) -> Entry<K> {
        Entry {
            bytes,
            ..Entry::new(key, hash, Box::default(), state, 0)
        }
    }

    pub(crate) fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::Release);
    }

    pub(crate) fn slot(&self) -> u32 {
        self.slot.load(Ordering::Relaxed)
    }

    pub(crate) fn set_slot(&self, slot: u32) {
        self.slot.store(slot, Ordering::Relaxed);
    }
}
