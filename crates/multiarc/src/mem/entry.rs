//! One cached buffer (OpenZFS's `arc_buf_hdr_t` and its data), in one
//! allocation: a small header followed by the bytes.
//!
//! ```text
//!  16-byte aligned allocation
//!  +------+---------+-------+------+-------+----------------------------+
//!  | meta | key ... | bytes | slot | flags | data bytes ...             |
//!  +------+---------+-------+------+-------+----------------------------+
//!  \___ header (40 B for BlockKey) ______/
//! ```
//!
//! The header does not keep the key's hash: whoever needs it (to find the
//! entry's stripe or sublist) hashes the key (`Core::hash`), which costs a
//! few nanoseconds where keeping it cost 8 bytes a buffer (issue 42).
//!
//! The hash table and the sublists point at entries with plain [`EntryPtr`]s
//! (no reference counting); handles do too, with their hold counted in the
//! header's *meta word*, one `AtomicU64`:
//!
//! ```text
//!  63                                     27 26   24 23              0
//!  +----------------------------------------+-------+-----------------+
//!  | hits since the evictor last looked     | state | holds           |
//!  +----------------------------------------+-------+-----------------+
//! ```
//!
//! - `holds`: live [`Handle`](crate::Handle)s. A lazy hit adds `HOLD + HIT`
//!   in one `fetch_add`, a handle's drop subtracts `HOLD`.
//! - `state`: [`State`]; it changes only under the entry's hash stripe lock,
//!   held exclusively, with a compare-exchange (holds may move meanwhile).
//! - `hits` (lazy mode): hits since the evictor last looked at the entry.
//!   Non-zero is CAR's reference bit; the evictor folds the count into the
//!   striped statistics when it clears it, and `stats()` adds what is still
//!   in the words, so no hit writes a statistics counter. The field is the
//!   word's top: a count that reaches 2^36 is folded by the hitter that sees
//!   bit 63 set (see `arc/hit_mode.rs`), so it never wraps.
//!
//! An `EntryPtr` says nothing about whether its entry is still there: another
//! thread may free it unless something keeps it alive. So reading through
//! one ([`EntryPtr::header`], [`EntryPtr::data_prefix`]) is `unsafe`, and
//! each use names what keeps the entry alive: a hold, its hash stripe's lock
//! (while it is in the table), its sublist's lock (while it is linked
//! there), an epoch pin (a lock-free probe that found it in the table), or
//! ownership (not yet published, or taken out of everything).
//!
//! Who frees an entry: the entry belongs to the cache while its state is
//! live or ghost (it is in the hash table, and live lazy entries and all
//! unheld ones are in a sublist). Taking it out of the table (eviction,
//! removal, replacement) happens under its stripe lock, held exclusively, and
//! either retires it at once (no holds) or sets its state to `Anon` in
//! the same atomic step that sees holds above zero; then the release that
//! takes the last hold *and* sees `Anon` retires it. The two are decided on
//! one word, so exactly one of them does. In the eager mode retiring frees;
//! in the lazy mode, whose probes take no lock and may still be reading the
//! entry (and add a hold and a hit to it, then take both back, when it is
//! out of use), "the last hold" discounts those probes' (an `Anon` entry's
//! hits count them), the retirer makes the entry `Dead`, and it is freed
//! after every such probe is done (`arc::hit_mode`, `epoch`).

use super::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::alloc::{self, Layout};
use std::ptr::NonNull;

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
    /// Out of the hash table while held: freed on the last release.
    Anon = 4,
    /// Out of the table and unheld: retired, freed once no probe can be
    /// reading it (lazy mode; see `epoch.rs`). A probe that pins it
    /// anyway sees this state and lets go.
    Dead = 5,
}

impl State {
    /// True for the two states whose entries hold data in the lists.
    #[inline]
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

/// One hold in the meta word.
pub(crate) const HOLD: u64 = 1;
const HOLDS_BITS: u32 = 24;
const HOLDS_MASK: u64 = (1 << HOLDS_BITS) - 1;
/// Taking a hold that finds this many already aborts the process (as `Arc`
/// does on overflow): leaked handles, not a workload. Half the field, so
/// racing holders cannot carry it into the state bits first.
pub(crate) const HOLD_LIMIT: u64 = 1 << (HOLDS_BITS - 1);
const STATE_SHIFT: u32 = HOLDS_BITS;
const STATE_MASK: u64 = 0b111 << STATE_SHIFT;
const HIT_SHIFT: u32 = STATE_SHIFT + 3;
/// One hit in the meta word (lazy mode).
pub(crate) const HIT: u64 = 1 << HIT_SHIFT;
/// All hit bits.
pub(crate) const HITS_MASK: u64 = !((1 << HIT_SHIFT) - 1);
/// The top bit: set once an entry's hit field reaches 2^36 hits.
pub(crate) const HITS_FOLD_BIT: u64 = 1 << 63;

/// The holds of a meta word.
#[inline]
pub(crate) fn holds(word: u64) -> u64 {
    word & HOLDS_MASK
}

/// The hits of a meta word.
#[inline]
pub(crate) fn hits(word: u64) -> u64 {
    word >> HIT_SHIFT
}

/// The state of a meta word.
#[inline]
pub(crate) fn state(word: u64) -> State {
    match (word & STATE_MASK) >> STATE_SHIFT {
        0 => State::Mru,
        1 => State::Mfu,
        2 => State::MruGhost,
        3 => State::MfuGhost,
        4 => State::Anon,
        _ => State::Dead,
    }
}

#[inline]
pub(crate) fn with_state(word: u64, s: State) -> u64 {
    (word & !STATE_MASK) | ((s as u64) << STATE_SHIFT)
}

/// [`EntryPtr::last_data_line`] for "none, or too far".
pub(crate) const NO_LAST_LINE: u8 = u8::MAX;

/// Sentinel for "not linked in any sublist".
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// The header of one cached buffer or ghost; the data follows it in the
/// same allocation.
pub(crate) struct Header<K> {
    /// Holds, state and hits (see the module comment).
    pub(crate) meta: AtomicU64,
    pub(crate) key: K,
    /// Bytes charged to the cache: the data's length, or the evicted size
    /// for ghosts.
    pub(crate) bytes: u64,
    /// Slot in the sublist of its state while linked, else `NO_SLOT`; read and
    /// written only under that sublist's lock.
    slot: AtomicU32,
    /// A ghost: no data follows.
    ghost: bool,
    /// S3ARC: a buffer the evictor gave another turn in MFU (it was hit
    /// there since it entered MFU), or the MFU ghost of one (0 or 1).
    /// Written and read under the entry's stripe lock, held exclusively.
    ///
    /// The generations policy (`Policy::Generations`): the generation (its
    /// low byte) the live buffer was queued in, written where it is linked
    /// and read by the evictor, under its sublist's lock.
    policy_flag: AtomicU8,
    /// A buffer inserted by a read ahead (`Cache::load_ahead_async`) that no
    /// demand read has used yet as far as the evictor knows (OpenZFS's
    /// `ARC_FLAG_PREFETCH`), or the MRU ghost of one evicted unread. Its
    /// first demand use is its first use, not a second: it keeps it in MRU
    /// (see `arc/hit_mode.rs`). In the header's padding (the header stays
    /// 40 B for `BlockKey`). Written and read under the entry's stripe lock,
    /// held exclusively.
    read_ahead: AtomicBool,
    /// A ghost's mark from the replacement policy, set when the ghost is
    /// made and never changed (0 for live buffers): the adaptive policy's
    /// record of which of its experts decided a contested eviction
    /// (`arc::replacement`).
    ///
    /// The generations policy: the generation (low byte) a live buffer last
    /// noted, when it was queued or hit since. A hit that finds another
    /// generation here stores the current one (a plain store, no lock, no
    /// read-modify-write), so it is written at most once per buffer per
    /// generation. Both bytes are in the header's padding: it stays 40 B
    /// for `BlockKey`.
    policy_mark: AtomicU8,
    /// Under loom, retired entries are marked instead of freed (and freed
    /// with the cache), so a model in which a probe meets a "freed" entry
    /// fails an assertion instead of reading freed memory.
    #[cfg(loom)]
    pub(crate) freed: AtomicBool,
}

impl<K> Header<K> {
    /// The meta word (Acquire: pairs with the Release of a handle's drop).
    #[inline]
    pub(crate) fn word(&self) -> u64 {
        self.meta.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn state(&self) -> State {
        state(self.word())
    }

    /// Sets the state, keeping holds and hits; returns the word it replaced.
    /// Caller holds the entry's stripe lock exclusively.
    pub(crate) fn set_state(&self, s: State) -> u64 {
        match self
            .meta
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(with_state(w, s))
            }) {
            Ok(w) | Err(w) => w,
        }
    }

    pub(crate) fn slot(&self) -> u32 {
        self.slot.load(Ordering::Relaxed)
    }

    pub(crate) fn set_slot(&self, slot: u32) {
        self.slot.store(slot, Ordering::Relaxed);
    }

    /// S3ARC: whether the entry was reused in MFU (see the field).
    pub(crate) fn reused_in_mfu(&self) -> bool {
        self.policy_flag.load(Ordering::Relaxed) != 0
    }

    /// S3ARC: marks a buffer reused in MFU. Caller holds the entry's stripe
    /// lock exclusively.
    pub(crate) fn mark_reused_in_mfu(&self) {
        self.policy_flag.store(1, Ordering::Relaxed);
    }

    /// The replacement policy's mark on a ghost (see the field).
    pub(crate) fn policy_mark(&self) -> u8 {
        self.policy_mark.load(Ordering::Relaxed)
    }

    /// The generations policy: the generation a live buffer was queued in
    /// (low byte; see `policy_flag`). Caller holds its sublist's lock.
    pub(crate) fn queued_generation(&self) -> u8 {
        self.policy_flag.load(Ordering::Relaxed)
    }

    /// The generations policy: the generation a live buffer last noted, when
    /// queued or hit (low byte; see `policy_mark`). Read without a lock.
    #[inline]
    pub(crate) fn noted_generation(&self) -> u8 {
        self.policy_mark.load(Ordering::Relaxed)
    }

    /// The generations policy: a hit in generation `generation`, which the
    /// buffer had not noted (no lock; see `policy_mark`).
    #[inline]
    pub(crate) fn note_generation(&self, generation: u8) {
        self.policy_mark.store(generation, Ordering::Relaxed);
    }

    /// The generations policy: the buffer is queued in generation
    /// `generation`, which it also notes. Caller holds the sublist's lock
    /// it is linked under.
    pub(crate) fn queue_in_generation(&self, generation: u8) {
        self.policy_flag.store(generation, Ordering::Relaxed);
        self.policy_mark.store(generation, Ordering::Relaxed);
    }

    /// Whether the entry was read ahead and not yet used (see the field).
    pub(crate) fn read_ahead(&self) -> bool {
        self.read_ahead.load(Ordering::Relaxed)
    }

    /// Marks or unmarks the entry as read ahead and not yet used. Caller
    /// holds the entry's stripe lock exclusively.
    pub(crate) fn set_read_ahead(&self, on: bool) {
        self.read_ahead.store(on, Ordering::Relaxed);
    }

    /// The data's length, for an entry known to be a buffer (live, or
    /// `Anon`), not a ghost: `data_len` without reading the ghost flag,
    /// which may sit on the header's second cache line.
    #[inline]
    pub(crate) fn buffer_len(&self) -> usize {
        debug_assert!(!self.ghost);
        self.bytes as usize
    }

    pub(crate) fn data_len(&self) -> usize {
        if self.ghost {
            0
        } else {
            self.bytes as usize
        }
    }
}

/// Alignment of an entry's allocation: the allocator's own (16 bytes), so
/// `malloc` serves it directly. Asking for a cache line (which would put the
/// whole header and the first data bytes in one line) sends glibc through
/// `posix_memalign`, which spreads the buffers out: 1-thread hits were
/// 5-10% slower with it (docs/history/core-v2-second-design.md).
/// The meta word and key are the header's first bytes, so a probe's key
/// comparison and its hold still touch one line in all but a few cases.
const ALIGN: usize = 16;

/// The data lengths a slab takes are multiples of this (and the slab takes
/// whole sizes from 4 to 64 KiB; see `slab.rs`).
const SLAB_DATA_MULTIPLE: usize = 4096;

fn layout<K>(data_len: usize) -> Layout {
    let header = Layout::new::<Header<K>>()
        .align_to(ALIGN)
        .expect("header layout");
    let (layout, offset) = header
        .extend(Layout::array::<u8>(data_len).expect("data length"))
        .expect("entry layout");
    debug_assert_eq!(offset, std::mem::size_of::<Header<K>>());
    layout
}

/// A pointer to an entry: copied freely, freed once (see the module comment
/// for who frees it).
pub(crate) struct EntryPtr<K>(NonNull<Header<K>>);

impl<K> Clone for EntryPtr<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for EntryPtr<K> {}

impl<K> PartialEq for EntryPtr<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K> Eq for EntryPtr<K> {}

// SAFETY: an entry is its header (atomics and an immutable key, `Send +
// Sync` when `K` is) and immutable bytes; the pointer carries no thread
// affinity.
unsafe impl<K: Send + Sync> Send for EntryPtr<K> {}
// SAFETY: as above; shared access is to atomics and immutable fields.
unsafe impl<K: Send + Sync> Sync for EntryPtr<K> {}

impl<K> EntryPtr<K> {
    /// Asks the processor to start fetching the entry's first cache line
    /// (its header) now, for a use a little later: a hint, which reads
    /// nothing and changes nothing (a no-op where there is no stable
    /// prefetch instruction). Any pointer will do, even a freed one: a
    /// prefetch never faults.
    #[inline]
    pub(crate) fn prefetch(self) {
        super::sync::prefetch(self.0.as_ptr());
    }

    /// Which cache line holds the data's last byte, counted from the line of
    /// the entry's first byte (the header's), for a buffer of `len` bytes:
    /// the table keeps it in the slot (up to [`NO_LAST_LINE`] - 1), so that a
    /// probe can fetch that line at once, beside the header's
    /// ([`EntryPtr::prefetch_line`]). [`NO_LAST_LINE`] for no data, or a
    /// line too far to say.
    #[inline]
    pub(crate) fn last_data_line(self, len: usize) -> u8 {
        if len == 0 {
            return NO_LAST_LINE;
        }
        let offset = (self.0.as_ptr() as usize & 63) + std::mem::size_of::<Header<K>>() + len - 1;
        u8::try_from(offset / 64)
            .ok()
            .filter(|&l| l != NO_LAST_LINE)
            .unwrap_or(NO_LAST_LINE)
    }

    /// Starts fetching line `line` of the entry, counted as
    /// [`EntryPtr::last_data_line`] counts (a hint: any pointer will do,
    /// even a freed one; a prefetch never faults).
    #[inline]
    pub(crate) fn prefetch_line(self, line: u8) {
        let first = (self.0.as_ptr() as usize) & !63;
        super::sync::prefetch((first + usize::from(line) * 64) as *const u8);
    }

    /// The pointer as the table's slots store it.
    #[inline]
    pub(crate) fn as_raw(self) -> *mut Header<K> {
        self.0.as_ptr()
    }

    /// Back from [`EntryPtr::as_raw`] (`None` for null).
    #[inline]
    pub(crate) fn from_raw(p: *mut Header<K>) -> Option<EntryPtr<K>> {
        NonNull::new(p).map(EntryPtr)
    }

    fn alloc(header: Header<K>, data: &[u8]) -> EntryPtr<K> {
        let layout = layout::<K>(data.len());
        // Buffers of whole 4 KiB pages (blocks: their sizes are few) go to
        // a slab; others (a file's partial last block, a ghost) to malloc,
        // so that their many sizes cannot use up the slabs' classes.
        let slab = if data.len().is_multiple_of(SLAB_DATA_MULTIPLE) {
            super::slab::alloc(layout.size(), layout.align())
        } else {
            None
        };
        let p = match slab {
            Some(p) => p.as_ptr(),
            // SAFETY: the layout has a non-zero size (the header's is
            // non-zero: it contains an AtomicU64).
            None => unsafe { alloc::alloc(layout) },
        } as *mut Header<K>;
        let Some(p) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        // The table's slots keep an entry's address in 44 bits (`table.rs`):
        // 16-byte aligned (the layout's), and below 2^48, as every
        // allocation is on the 48-bit address spaces of x86-64 and aarch64
        // unless a program maps memory higher on purpose.
        assert!(
            (p.as_ptr() as usize as u64) >> 48 == 0,
            "an entry allocated at {:p}, above the 48-bit addresses the hash table can hold",
            p.as_ptr()
        );
        // SAFETY: `p` is a fresh allocation of `layout`, which starts with
        // room for a `Header<K>` (suitably aligned) followed by `data.len()`
        // bytes; nothing else can see it yet.
        unsafe {
            p.as_ptr().write(header);
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (p.as_ptr() as *mut u8).add(std::mem::size_of::<Header<K>>()),
                data.len(),
            );
        }
        EntryPtr(p)
    }

    /// A new buffer entry holding a copy of `data`, with `holds` holds.
    pub(crate) fn new(key: K, data: &[u8], state: State, holds: u64) -> EntryPtr<K> {
        assert!(holds < HOLD_LIMIT);
        Self::alloc(
            Header {
                meta: AtomicU64::new(with_state(holds, state)),
                key,
                bytes: data.len() as u64,
                slot: AtomicU32::new(NO_SLOT),
                ghost: false,
                policy_flag: AtomicU8::new(0),
                read_ahead: AtomicBool::new(false),
                policy_mark: AtomicU8::new(0),
                #[cfg(loom)]
                freed: AtomicBool::new(false),
            },
            data,
        )
    }

    /// A ghost of `bytes` bytes (no data); `reused_in_mfu` is the evicted
    /// buffer's mark (S3ARC), `read_ahead` whether it was read ahead and
    /// evicted unused, `policy_mark` the replacement policy's mark.
    pub(crate) fn ghost(
        key: K,
        bytes: u64,
        state: State,
        reused_in_mfu: bool,
        read_ahead: bool,
        policy_mark: u8,
    ) -> EntryPtr<K> {
        debug_assert!(state.is_ghost());
        Self::alloc(
            Header {
                meta: AtomicU64::new(with_state(0, state)),
                key,
                bytes,
                slot: AtomicU32::new(NO_SLOT),
                ghost: true,
                policy_flag: AtomicU8::new(reused_in_mfu.into()),
                read_ahead: AtomicBool::new(read_ahead),
                policy_mark: AtomicU8::new(policy_mark),
                #[cfg(loom)]
                freed: AtomicBool::new(false),
            },
            &[],
        )
    }

    /// The entry's header.
    ///
    /// # Safety
    /// The entry is alive for as long as the reference is used: the caller
    /// holds a hold on it, or the lock under which it is in the table (its
    /// hash stripe) or linked in a sublist (that sublist's), or is pinned
    /// (`epoch`) and found it in the table, or owns it (nobody else can
    /// reach it yet, or any more).
    #[inline]
    pub(crate) unsafe fn header(&self) -> &Header<K> {
        // SAFETY: the pointer came from `alloc`, which initialised the
        // header; the caller keeps the entry alive (this function's
        // contract), and shared access is to atomics and immutable fields.
        unsafe { self.0.as_ref() }
    }

    /// The first `len` bytes of the buffer, without reading its header:
    /// `len` comes from the table's slot (see `table.rs`), so the CPU can
    /// fetch the data's last line before the header's arrives.
    ///
    /// # Safety
    /// As [`EntryPtr::header`]: the entry is alive while the slice is used.
    /// And `len` is at most the data's length (the slot recorded it when
    /// the entry entered the table, or it is the entry's own `data_len`).
    #[inline]
    pub(crate) unsafe fn data_prefix(&self, len: usize) -> &[u8] {
        // SAFETY: alive (the contract), so the header may be read.
        debug_assert!(len <= unsafe { self.header() }.data_len());
        // SAFETY: the allocation holds `data_len()` initialised bytes right
        // after the header (see `alloc`), never written again; the caller
        // keeps the entry alive while it uses the slice, and `len` is at
        // most the data's length (the contract).
        unsafe {
            std::slice::from_raw_parts(
                (self.0.as_ptr() as *const u8).add(std::mem::size_of::<Header<K>>()),
                len,
            )
        }
    }

    /// Frees the entry.
    ///
    /// # Safety
    /// The caller is the entry's last user: it is in no table or sublist, no
    /// hold is left, and no other thread can reach it any more (the caller
    /// decided so on the meta word with Acquire ordering, or under the locks
    /// that guard every other pointer to it). Called once.
    pub(crate) unsafe fn free(self) {
        // SAFETY: still alive: we are its last user (the contract).
        let layout = layout::<K>(unsafe { self.header() }.data_len());
        // SAFETY: per this function's contract we own the entry; it was
        // allocated by `alloc` with this layout (from a slab, which
        // `slab::free` knows by its address, or else from malloc) and holds
        // an initialised header.
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr());
            if !super::slab::free(self.0.cast()) {
                alloc::dealloc(self.0.as_ptr() as *mut u8, layout);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn meta_word_fields_and_layout() {
        let p = EntryPtr::new(7u64, &[1, 2, 3], State::Mfu, 2);
        // SAFETY: created here, never shared, freed below after its last use.
        let (e, data) = unsafe { (p.header(), p.data_prefix(3)) };
        assert_eq!(data, &[1, 2, 3]);
        assert_eq!(e.bytes, 3);
        let w = e.word();
        assert_eq!((holds(w), state(w), hits(w)), (2, State::Mfu, 0));
        e.meta.fetch_add(HOLD + HIT, Ordering::Relaxed);
        let prev = e.set_state(State::Anon);
        assert_eq!((holds(prev), state(prev), hits(prev)), (3, State::Mfu, 1));
        assert_eq!(e.state(), State::Anon);
        assert_eq!(holds(e.word()), 3);
        // The top bit is the 2^36th hit.
        assert_eq!(hits(HITS_FOLD_BIT), 1 << 36);
        assert_eq!(std::mem::size_of::<Header<crate::BlockKey>>(), 40);
        // SAFETY: created above, never shared, not used after.
        unsafe { p.free() };
        let p = EntryPtr::ghost(String::from("k"), 8192, State::MruGhost, false, false, 0);
        // SAFETY: as above.
        let g = unsafe { p.header() };
        assert_eq!(g.data_len(), 0);
        assert_eq!(g.bytes, 8192);
        // SAFETY: as above.
        unsafe { p.free() };
    }
}
