//! Slabs: memory for entries that the cache maps itself, on 2 MiB pages
//! where the kernel gives them, instead of malloc's.
//!
//! Why: a hit reads its entry's header and its data's first and last lines.
//! From malloc, every 8 KiB buffer sits on 4 KiB pages wherever the heap
//! put it; carved in order from 2 MiB pages, a cache of 32 MiB is sixteen
//! of them. Measured with a scratch arena: 1-thread hits at 32 MiB ran
//! 1.14-1.27x quick_cache against 1.00-1.05x from malloc, and 1.72-1.81x
//! against 1.26-1.32x at 2 GiB (docs/history/benchmarks-record-2026-11.md,
//! "Dependent hits again").
//!
//! Layout. At the first use, one reservation of address space (no access,
//! nothing committed: it costs no memory) is split into `CLASSES` regions,
//! one per slot size. A region starts with its chunks' headers, one line
//! each, then its chunks, each `chunk_bytes` long (2 to 16 MiB, chosen per
//! slot size so that little is left over at a chunk's end), committed in
//! order as the class needs them, the whole region marked `MADV_HUGEPAGE`.
//! A chunk is cut into slots: handed out in address order at first, then
//! from the chunk's free list, threaded through its free slots.
//!
//! Which allocations: sizes from 4 KiB to 64 KiB, rounded up to 16 bytes,
//! the first `CLASSES` distinct such sizes in the process (the entries ask
//! only for buffers of whole 4 KiB pages: blocks, whose sizes are few).
//! Any other size, and any allocation when the reservation or a commit
//! failed or a region is full, is malloc's. A pointer is a slab's if and only if it lies in the
//! reservation, so `free` tells the two apart whatever happened when it
//! was allocated.
//!
//! Locking. A class has `SHARDS` shards, each a mutex over its chunks (the
//! one it allocates from, those with free slots, the empty ones). A thread
//! allocates from its own shard (chosen once per thread, round robin); a
//! slot is freed into the shard of its chunk, which never changes. A
//! chunk's header is read and written under its shard's lock, except its
//! shard, written before its first slot is handed out.
//!
//! Giving memory back. A chunk whose slots are all free, other than the one
//! its shard allocates from, is dropped (`MADV_DONTNEED`: its pages go back
//! to the kernel, its addresses stay reserved) and waits in its shard's
//! list of empty chunks, used before a new one is committed. So a cache
//! that shrinks gives back the chunks it empties; as with malloc, a chunk
//! with one buffer left in it keeps its pages.
//!
//! Cost: each shard in use keeps one chunk partly used; on 2 MiB pages that
//! is up to 2 MiB resident beyond its slots. [`slot_bytes`] counts the
//! slots in use.

#[cfg(all(not(loom), target_os = "linux", target_pointer_width = "64"))]
pub(crate) use imp::{alloc, free, slot_bytes};
#[cfg(not(all(not(loom), target_os = "linux", target_pointer_width = "64")))]
pub(crate) use none::{alloc, free, slot_bytes};

/// Where slabs are not built (loom, whose models free through malloc;
/// other systems; 32-bit targets): every entry is malloc's.
#[cfg(not(all(not(loom), target_os = "linux", target_pointer_width = "64")))]
mod none {
    use std::ptr::NonNull;

    pub(crate) fn alloc(_size: usize, _align: usize) -> Option<NonNull<u8>> {
        None
    }

    /// # Safety
    /// None needed: no pointer is a slab's here.
    pub(crate) unsafe fn free(_p: NonNull<u8>) -> bool {
        false
    }

    pub(crate) fn slot_bytes() -> u64 {
        0
    }
}

/// The slabs.
#[cfg(all(not(loom), target_os = "linux", target_pointer_width = "64"))]
mod imp {
    use std::ptr::NonNull;
    use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicUsize, Ordering};
    use std::sync::{Mutex, OnceLock};

    use crate::mem::sync::LockUnpoisoned;

    /// A huge page, and the alignment of chunks.
    const HUGE_PAGE: usize = 2 << 20;
    /// Slot sizes (classes) a process can have.
    const CLASSES: usize = 64;
    /// Shards per class.
    const SHARDS: usize = 16;
    /// The smallest and largest allocation a slab takes.
    const MIN_SIZE: usize = 4 << 10;
    const MAX_SIZE: usize = 64 << 10;
    /// Slots are multiples of this, and aligned to it.
    pub(crate) const SLOT_ALIGN: usize = 16;
    /// A chunk header's room at the start of its region: one cache line.
    const HEADER_BYTES: usize = 64;
    /// The reservation's sizes tried in turn (a smaller one where address space
    /// is limited).
    const RESERVATIONS: [usize; 3] = [1 << 45, 1 << 40, 1 << 36];

    /// Bytes of the slots in use: what malloc's chunks would count for the same
    /// allocations. Like malloc's free chunks, free slots of chunks still in use
    /// and the unused end of a shard's current chunk are not counted.
    pub(crate) fn slot_bytes() -> u64 {
        CLASS_LIST
            .iter()
            .map_while(OnceLock::get)
            .flat_map(|c| {
                c.shards
                    .iter()
                    .map(|s| s.lock_unpoisoned().slots_in_use * c.slot)
            })
            .sum::<usize>() as u64
    }

    /// One reservation of address space, split into `CLASSES` regions.
    struct Reservation {
        base: usize,
        len: usize,
        region: usize,
    }

    static RESERVATION: OnceLock<Option<Reservation>> = OnceLock::new();
    static CLASS_LIST: [OnceLock<Class>; CLASSES] = [const { OnceLock::new() }; CLASSES];
    /// Serialises the creation of classes.
    static CREATING: Mutex<()> = Mutex::new(());
    /// Set once a class could not be created: the list was full, or the
    /// reservation or a class's header area was refused.
    static NO_NEW_CLASS: AtomicBool = AtomicBool::new(false);

    fn reservation() -> Option<&'static Reservation> {
        RESERVATION
            .get_or_init(|| {
                RESERVATIONS.iter().find_map(|&len| {
                    // SAFETY: a new private anonymous mapping, no access, not
                    // committed; nothing else refers to it.
                    let p = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            len + HUGE_PAGE,
                            libc::PROT_NONE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                            -1,
                            0,
                        )
                    };
                    if p == libc::MAP_FAILED {
                        return None;
                    }
                    let base = (p as usize).next_multiple_of(HUGE_PAGE);
                    // The table keeps an entry's address in 48 bits (`table.rs`).
                    if (base + len) as u64 >> 48 != 0 {
                        // SAFETY: the mapping made above, unused.
                        unsafe { libc::munmap(p, len + HUGE_PAGE) };
                        return None;
                    }
                    let region = (len / CLASSES) / HUGE_PAGE * HUGE_PAGE;
                    Some(Reservation { base, len, region })
                })
            })
            .as_ref()
    }

    /// A chunk's header, in its region's header area (zeroed by the kernel,
    /// which is a valid header: every field is an atomic). Every field but
    /// `shard` is read and written only under the shard's lock; the atomics
    /// spare that lock's users `unsafe`.
    struct ChunkHeader {
        /// The shard the chunk belongs to, set when committed, never changed.
        shard: AtomicU16,
        /// Whether the chunk is its shard's current one or in one of its lists.
        listed: AtomicBool,
        /// Slots in use.
        live: AtomicU32,
        /// Slots handed out in address order so far.
        bump: AtomicU32,
        /// The first free slot (0: none); each free slot's first word holds the
        /// next.
        free: AtomicUsize,
    }

    /// One shard's chunks (indices in the class's region).
    #[derive(Default)]
    struct Shard {
        /// The chunk it allocates from.
        current: Option<usize>,
        /// Chunks with free slots, other than `current`.
        partial: Vec<usize>,
        /// Chunks with no slot in use, their pages dropped.
        empty: Vec<usize>,
        /// Slots of its chunks in use (counted here, under the lock, rather
        /// than on a line all threads write).
        slots_in_use: usize,
    }

    /// The slabs of one slot size.
    struct Class {
        slot: usize,
        chunk_bytes: usize,
        slots_per_chunk: u32,
        /// The header of chunk 0; chunk `i`'s is `HEADER_BYTES * i` further.
        headers: usize,
        /// Chunk 0; chunk `i` is `chunk_bytes * i` further.
        chunks: usize,
        max_chunks: usize,
        /// Chunks committed (or tried) so far.
        next_chunk: AtomicUsize,
        shards: [Mutex<Shard>; SHARDS],
    }

    /// The chunk size for slots of `slot` bytes: the smallest multiple of 2 MiB,
    /// up to 16 MiB, that leaves at most a byte a slot unused at its end, or
    /// else the one that leaves least.
    fn chunk_bytes_for(slot: usize) -> usize {
        let waste_per_slot = |bytes: usize| (bytes % slot) as f64 / (bytes / slot) as f64;
        let candidates = (1..=8).map(|n| n * HUGE_PAGE);
        candidates
            .clone()
            .find(|&b| waste_per_slot(b) <= 1.0)
            .unwrap_or_else(|| {
                candidates
                    .min_by(|&a, &b| waste_per_slot(a).total_cmp(&waste_per_slot(b)))
                    .expect("candidates")
            })
    }

    impl Class {
        /// The class of slot size `slot` in region `index`, its header area
        /// committed. `None` if that commit fails.
        fn new(r: &Reservation, index: usize, slot: usize) -> Option<Class> {
            let region = r.base + index * r.region;
            let chunk_bytes = chunk_bytes_for(slot);
            let headers_bytes = (r.region / chunk_bytes * HEADER_BYTES).next_multiple_of(HUGE_PAGE);
            let max_chunks = (r.region - headers_bytes) / chunk_bytes;
            let chunks = region + headers_bytes;
            // SAFETY: the header area lies in this class's region of our
            // reservation, which nothing else uses.
            let committed = unsafe {
                libc::mprotect(
                    region as *mut libc::c_void,
                    headers_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            } == 0;
            if !committed {
                return None;
            }
            // Where the kernel refuses huge pages, the chunks are on 4 KiB pages
            // and still in address order.
            // SAFETY: as above, for the chunk area.
            unsafe {
                libc::madvise(
                    chunks as *mut libc::c_void,
                    max_chunks * chunk_bytes,
                    libc::MADV_HUGEPAGE,
                )
            };
            Some(Class {
                slot,
                chunk_bytes,
                slots_per_chunk: (chunk_bytes / slot) as u32,
                headers: region,
                chunks,
                max_chunks,
                next_chunk: AtomicUsize::new(0),
                shards: std::array::from_fn(|_| Mutex::new(Shard::default())),
            })
        }

        fn header(&self, i: usize) -> &ChunkHeader {
            debug_assert!(i < self.max_chunks);
            // SAFETY: header `i` lies in the committed header area (`new`),
            // aligned to a line, zero-initialised by the kernel (a valid
            // `ChunkHeader`: all atomics) and never unmapped; all access to it
            // is through atomics.
            unsafe { &*((self.headers + i * HEADER_BYTES) as *const ChunkHeader) }
        }

        fn chunk(&self, i: usize) -> usize {
            self.chunks + i * self.chunk_bytes
        }

        fn alloc(&self) -> Option<NonNull<u8>> {
            let shard_index = this_thread_shard();
            let mut shard = self.shards[shard_index].lock_unpoisoned();
            loop {
                if let Some(i) = shard.current {
                    if let Some(p) = self.take(i) {
                        shard.slots_in_use += 1;
                        return Some(p);
                    }
                    // Full: listed again by the first slot freed in it.
                    self.header(i).listed.store(false, Ordering::Relaxed);
                    shard.current = None;
                }
                let next = match shard.partial.pop().or_else(|| shard.empty.pop()) {
                    Some(i) => i,
                    None => self.commit(shard_index)?,
                };
                self.header(next).listed.store(true, Ordering::Relaxed);
                shard.current = Some(next);
            }
        }

        /// A slot of chunk `i`, under its shard's lock; `None` if it is full.
        fn take(&self, i: usize) -> Option<NonNull<u8>> {
            let h = self.header(i);
            let free = h.free.load(Ordering::Relaxed);
            let p = if free != 0 {
                // SAFETY: `free` is a free slot of this chunk, put on its list
                // by `free_slot` under this shard's lock (held), its first word
                // the next free slot; the chunk is committed.
                let next = unsafe { (free as *const usize).read() };
                h.free.store(next, Ordering::Relaxed);
                free
            } else {
                let bump = h.bump.load(Ordering::Relaxed);
                if bump == self.slots_per_chunk {
                    return None;
                }
                h.bump.store(bump + 1, Ordering::Relaxed);
                self.chunk(i) + bump as usize * self.slot
            };
            h.live
                .store(h.live.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            NonNull::new(p as *mut u8)
        }

        /// A new chunk for shard `shard_index`; `None` when the region is full
        /// or the kernel refuses the memory.
        fn commit(&self, shard_index: usize) -> Option<usize> {
            let i = self.next_chunk.fetch_add(1, Ordering::Relaxed);
            if i >= self.max_chunks {
                self.next_chunk.store(self.max_chunks, Ordering::Relaxed);
                return None;
            }
            // SAFETY: chunk `i` lies in this class's region of our reservation
            // and is nobody else's (`next_chunk` handed it to us alone).
            let committed = unsafe {
                libc::mprotect(
                    self.chunk(i) as *mut libc::c_void,
                    self.chunk_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            } == 0;
            if !committed {
                // Refused (strict overcommit, a memory limit): malloc serves
                // this class from now on, rather than a failed call per miss.
                self.next_chunk.store(self.max_chunks, Ordering::Relaxed);
                return None;
            }
            self.header(i)
                .shard
                .store(shard_index as u16, Ordering::Relaxed);
            Some(i)
        }

        /// Gives back slot `a`, one of this class's.
        ///
        /// # Safety
        /// `a` was handed out by `alloc` of this class and is not used after.
        unsafe fn free_slot(&self, a: usize) {
            let i = (a - self.chunks) / self.chunk_bytes;
            let h = self.header(i);
            // Relaxed: set before the chunk's first slot was handed out, and the
            // caller's use of `a` came after that.
            let shard_index = usize::from(h.shard.load(Ordering::Relaxed));
            let mut shard = self.shards[shard_index].lock_unpoisoned();
            // SAFETY: the slot is ours again (the contract), committed, aligned
            // to 16 bytes and at least 4 KiB long.
            unsafe { (a as *mut usize).write(h.free.load(Ordering::Relaxed)) };
            h.free.store(a, Ordering::Relaxed);
            let live = h.live.load(Ordering::Relaxed) - 1;
            h.live.store(live, Ordering::Relaxed);
            shard.slots_in_use -= 1;
            if shard.current == Some(i) {
                return;
            }
            let listed = h.listed.load(Ordering::Relaxed);
            if live == 0 {
                if listed {
                    let at = shard
                        .partial
                        .iter()
                        .position(|&c| c == i)
                        .expect("a listed chunk that is not current is in the partial list");
                    shard.partial.swap_remove(at);
                }
                // SAFETY: every slot of chunk `i` is free: nothing reads it
                // until it is handed out again, as zeroed memory.
                unsafe {
                    libc::madvise(
                        self.chunk(i) as *mut libc::c_void,
                        self.chunk_bytes,
                        libc::MADV_DONTNEED,
                    )
                };
                h.free.store(0, Ordering::Relaxed);
                h.bump.store(0, Ordering::Relaxed);
                h.listed.store(true, Ordering::Relaxed);
                shard.empty.push(i);
            } else if !listed {
                h.listed.store(true, Ordering::Relaxed);
                shard.partial.push(i);
            }
        }
    }

    /// This thread's shard, chosen round robin at its first allocation.
    fn this_thread_shard() -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
        }
        SHARD.with(|s| *s)
    }

    /// The class of slot size `slot`, created if there is room.
    fn class_of(slot: usize) -> Option<&'static Class> {
        find_or_create(
            &CLASS_LIST,
            &CREATING,
            &NO_NEW_CLASS,
            |c| c.slot == slot,
            |index| Class::new(reservation()?, index, slot),
        )
    }

    /// The entry of `list` that `is_it`, or a new one that `make(index)`
    /// makes in the first free place, under `creating`. Once a `make` has
    /// failed or the list is full, `no_new` is set and a size without a
    /// class goes to malloc at once: without it, every such allocation
    /// (a 65th size, or any once the kernel refused the reservation) would
    /// take `creating`, one lock for the whole process. A refusal is
    /// taken as lasting: malloc serves those sizes from then on.
    fn find_or_create<T>(
        list: &'static [OnceLock<T>],
        creating: &Mutex<()>,
        no_new: &AtomicBool,
        is_it: impl Fn(&T) -> bool,
        make: impl FnOnce(usize) -> Option<T>,
    ) -> Option<&'static T> {
        let find = || list.iter().map_while(OnceLock::get).find(|c| is_it(c));
        if let Some(c) = find() {
            return Some(c);
        }
        if no_new.load(Ordering::Relaxed) {
            return None;
        }
        let _creating = creating.lock_unpoisoned();
        if let Some(c) = find() {
            return Some(c);
        }
        let made = list
            .iter()
            .position(|c| c.get().is_none())
            .and_then(|index| Some((index, make(index)?)));
        let Some((index, entry)) = made else {
            no_new.store(true, Ordering::Relaxed);
            return None;
        };
        Some(list[index].get_or_init(|| entry))
    }

    /// Memory for `size` bytes aligned to `align` from a slab, or `None`: the
    /// caller then uses malloc.
    pub(crate) fn alloc(size: usize, align: usize) -> Option<NonNull<u8>> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&size) || align > SLOT_ALIGN {
            return None;
        }
        class_of(size.next_multiple_of(SLOT_ALIGN))?.alloc()
    }

    /// Gives `p` back to its slab and returns true, or returns false if `p` is
    /// not a slab's (then it is malloc's).
    ///
    /// # Safety
    /// `p` came from [`alloc`] or from malloc, and is not used after a true
    /// return.
    pub(crate) unsafe fn free(p: NonNull<u8>) -> bool {
        let Some(Some(r)) = RESERVATION.get() else {
            return false;
        };
        let a = p.as_ptr() as usize;
        if a < r.base || a >= r.base + r.len {
            return false;
        }
        let class = CLASS_LIST[(a - r.base) / r.region]
            .get()
            .expect("a pointer in a region whose class exists");
        // SAFETY: in the class's region, so handed out by its `alloc`; the
        // caller gives it up (the contract).
        unsafe { class.free_slot(a) };
        true
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::collections::HashSet;

        /// Fills `len` bytes at `p` with a pattern of `tag`.
        fn fill(p: NonNull<u8>, len: usize, tag: u8) {
            // SAFETY: `p` holds `len` bytes that are ours (the tests' slots).
            unsafe { std::ptr::write_bytes(p.as_ptr(), tag, len) };
        }

        fn holds(p: NonNull<u8>, len: usize, tag: u8) -> bool {
            // SAFETY: as `fill`.
            let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), len) };
            bytes.iter().all(|&b| b == tag)
        }

        #[test]
        fn chunk_sizes_leave_little_at_their_end() {
            for slot in (MIN_SIZE..=MAX_SIZE + SLOT_ALIGN).step_by(SLOT_ALIGN) {
                let bytes = chunk_bytes_for(slot);
                assert_eq!(bytes % HUGE_PAGE, 0);
                assert!(bytes <= 16 << 20);
                let per_slot = (bytes % slot) as f64 / (bytes / slot) as f64;
                assert!(
                    per_slot <= 1.0 || per_slot <= slot as f64 / 250.0,
                    "slot {slot}: chunk {bytes} leaves {per_slot:.1} B a slot"
                );
            }
            assert_eq!(
                chunk_bytes_for(8240),
                4 << 20,
                "8 KiB + 40 B header: 509 slots in 4 MiB"
            );
        }

        /// `find_or_create` over a test's list of sizes: `make` gives
        /// `made` (the size asked for, or nothing), counted in `makes`.
        fn counted(
            list: &'static [OnceLock<usize>],
            creating: &Mutex<()>,
            no_new: &AtomicBool,
            size: usize,
            made: Option<usize>,
            makes: &AtomicUsize,
        ) -> Option<usize> {
            find_or_create(
                list,
                creating,
                no_new,
                |&s| s == size,
                |_| {
                    makes.fetch_add(1, Ordering::Relaxed);
                    made
                },
            )
            .copied()
        }

        /// Once the list is full, or a class could not be made, a new size
        /// goes to malloc without the creation lock (held here by the test
        /// itself: a lookup that took it would never answer).
        #[test]
        fn a_full_or_failed_class_list_takes_no_lock() {
            static LIST: [OnceLock<usize>; 2] = [const { OnceLock::new() }; 2];
            static CREATING: Mutex<()> = Mutex::new(());
            static NO_NEW: AtomicBool = AtomicBool::new(false);
            let makes = AtomicUsize::new(0);
            let get = |size| counted(&LIST, &CREATING, &NO_NEW, size, Some(size), &makes);
            assert_eq!(get(1), Some(1));
            assert_eq!(get(2), Some(2));
            assert_eq!(get(1), Some(1), "found, not made again");
            assert_eq!(makes.load(Ordering::Relaxed), 2);
            assert_eq!(get(3), None, "the list is full");
            let held = CREATING.lock_unpoisoned();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let r = find_or_create(&LIST, &CREATING, &NO_NEW, |&s| s == 4, |_| Some(4));
                let _ = tx.send(r.copied());
            });
            let answer = rx.recv_timeout(std::time::Duration::from_secs(20));
            drop(held);
            assert_eq!(
                answer,
                Ok(None),
                "a new size past a full list waited for the lock"
            );
            assert_eq!(get(2), Some(2), "existing classes are still found");

            // A failed make: no other make is tried after it.
            static LIST2: [OnceLock<usize>; 4] = [const { OnceLock::new() }; 4];
            static NO_NEW2: AtomicBool = AtomicBool::new(false);
            let tries = AtomicUsize::new(0);
            let refused = |size| counted(&LIST2, &CREATING, &NO_NEW2, size, None, &tries);
            assert_eq!(refused(1), None);
            assert_eq!(refused(2), None);
            assert_eq!(tries.load(Ordering::Relaxed), 1);
        }

        #[test]
        fn sizes_outside_the_range_are_malloc_s() {
            assert!(alloc(MIN_SIZE - 1, 16).is_none());
            assert!(alloc(MAX_SIZE + 1, 16).is_none());
            assert!(alloc(8192, 64).is_none(), "alignment above a slot's");
            let mut v = vec![0u8; 8192];
            // SAFETY: a pointer of malloc's: `free` must say it is not ours.
            assert!(!unsafe { free(NonNull::new(v.as_mut_ptr()).unwrap()) });
        }

        /// Slots never overlap, keep what was written in them, and are reused.
        #[test]
        fn slots_are_distinct_and_reused() {
            let size = 8200; // a size of this test alone: its own class
            let mut slots = Vec::new();
            for i in 0..3000 {
                let p = alloc(size, 16).expect("a slab slot");
                assert_eq!(p.as_ptr() as usize % SLOT_ALIGN, 0);
                fill(p, size, i as u8);
                slots.push(p);
            }
            let distinct: HashSet<usize> = slots.iter().map(|p| p.as_ptr() as usize).collect();
            assert_eq!(distinct.len(), slots.len());
            for (i, &p) in slots.iter().enumerate() {
                assert!(holds(p, size, i as u8), "slot {i} was overwritten");
            }
            // Free every other one; new slots take their places.
            let freed: HashSet<usize> = slots
                .iter()
                .step_by(2)
                .map(|p| p.as_ptr() as usize)
                .collect();
            for &p in slots.iter().step_by(2) {
                // SAFETY: ours, not used after.
                assert!(unsafe { free(p) });
            }
            // Slots come from the current chunk (its freed ones, then those it
            // has not handed out yet), then from chunks with freed slots.
            let per_chunk = chunk_bytes_for(size.next_multiple_of(SLOT_ALIGN)) / size;
            let mut reused = 0;
            let mut new_slots = HashSet::new();
            for _ in 0..freed.len() {
                let p = alloc(size, 16).unwrap();
                reused += usize::from(freed.contains(&(p.as_ptr() as usize)));
                assert!(
                    new_slots.insert(p.as_ptr() as usize),
                    "a slot handed out twice"
                );
                fill(p, size, 0xee);
            }
            assert!(
                reused + per_chunk >= freed.len(),
                "{reused} of {} new slots were freed ones",
                freed.len()
            );
            for (i, &p) in slots.iter().enumerate().skip(1).step_by(2) {
                assert!(
                    holds(p, size, i as u8),
                    "slot {i}, never freed, was overwritten"
                );
            }
        }

        /// A chunk whose slots are all freed gives its pages back and is used
        /// again, zeroed.
        #[test]
        fn emptied_chunks_are_dropped_and_used_again() {
            let size = 16 << 10; // this test's own class
            let class_slots = chunk_bytes_for(size) / size;
            // Three chunks' worth from this thread's shard: the first two are
            // then neither current nor partly used.
            let slots: Vec<_> = (0..3 * class_slots)
                .map(|_| alloc(size, 16).unwrap())
                .collect();
            for &p in &slots {
                fill(p, size, 0xab);
            }
            for &p in &slots[..2 * class_slots] {
                // SAFETY: ours, not used after.
                assert!(unsafe { free(p) });
            }
            // Used again: from the dropped chunks, whose pages read as zero.
            let again: Vec<_> = (0..class_slots).map(|_| alloc(size, 16).unwrap()).collect();
            let old: HashSet<usize> = slots[..2 * class_slots]
                .iter()
                .map(|p| p.as_ptr() as usize)
                .collect();
            assert!(again.iter().all(|p| old.contains(&(p.as_ptr() as usize))));
            assert!(
                again.iter().all(|&p| holds(p, size, 0)),
                "a dropped chunk's pages read as zero"
            );
        }

        /// Threads allocating and freeing at once never get a slot another
        /// holds: each checks its slots' contents before freeing them.
        #[test]
        fn threads_never_share_a_slot() {
            let size = 4112; // this test's own class
            let threads: Vec<_> = (0..8u8)
                .map(|t| {
                    std::thread::spawn(move || {
                        let mut mine: Vec<(NonNull<u8>, u8)> = Vec::new();
                        let mut x = u64::from(t) + 1;
                        for round in 0..20_000u32 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            if mine.len() < 64 && (x % 3 != 0 || mine.is_empty()) {
                                let p = alloc(size, 16).unwrap();
                                let tag = (round as u8) ^ t;
                                fill(p, size, tag);
                                mine.push((p, tag));
                            } else {
                                let (p, tag) = mine.swap_remove((x % mine.len() as u64) as usize);
                                assert!(holds(p, size, tag), "thread {t}: a slot changed under it");
                                // SAFETY: ours, not used after.
                                assert!(unsafe { free(p) });
                            }
                        }
                        // Freed on another thread than the one that took them.
                        mine.into_iter()
                            .map(|(p, _)| p.as_ptr() as usize)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let leftovers: Vec<usize> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            for a in leftovers {
                // SAFETY: the threads' last slots, not used after.
                assert!(unsafe { free(NonNull::new(a as *mut u8).unwrap()) });
            }
        }
    }
}
