//! Statistics: what [`Cache::stats`](crate::Cache::stats) reports (the
//! counterpart of OpenZFS's `arcstats`).
//!
//! Every figure is declared once, in the `statistics!` table below, with
//! its doc and its kind; the table generates the `Event` enum (the
//! striped event counters), the fields of [`Stats`], the figures the cache
//! supplies itself (`Supplied`) and [`Stats::to_pairs`]. Its order is the
//! order of `arcstats` and `multiarc stats`.
//!
//! Event counters are striped per thread (see `mem/striped.rs`), so counting a
//! hit writes only the counting thread's own cache line.

use crate::mem::{thread_stripe, Striped};

/// Declares the statistics, once each, in their output order. Each entry is
/// `/// doc` then `name: kind`, the kind being one of
/// - `event(Variant)`: an event counter, counted with `Events::count(Event::Variant)`
///   and reported as its sum;
/// - `counter`, or `counter(Variant)` when the cache counts it partly in
///   the event `Variant`: a counter whose value the cache supplies
///   (in `Supplied`);
/// - `gauge`: a current figure (a size, a target) the cache supplies.
///
/// The entries are gathered one at a time (`@munch`) so that the event
/// variants and the supplied figures can each be collected in order.
macro_rules! statistics {
    // All entries gathered: emit.
    (@munch
        events [$($ev:ident)*]
        supplied [$($sup:ident)*]
        fields [$([$(#[$doc:meta])* $field:ident $src:tt $kind:ident])*]
    ) => {
        /// Event counters, by index into the striped cells.
        #[derive(Clone, Copy)]
        #[repr(usize)]
        pub(crate) enum Event {
            $($ev,)*
        }

        /// The number of event counters.
        pub(crate) const EVENTS: usize = [$(Event::$ev),*].len();

        /// A snapshot of the cache's statistics. Counters count since the cache was
        /// built; sizes are current. Taken without stopping the cache, so figures
        /// that change meanwhile may not add up exactly.
        ///
        /// With the crate's `serde` feature, it implements `serde::Serialize`
        /// (a map of the figures, in the order of [`Stats::to_pairs`]).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[non_exhaustive]
        pub struct Stats {
            $($(#[$doc])* pub $field: u64,)*
        }

        /// The figures of [`Stats`] that are not plain event counters: the
        /// cache computes them when it takes a snapshot.
        pub(crate) struct Supplied {
            $(pub(crate) $sup: u64,)*
        }

        impl Stats {
            /// The snapshot of `events` and of the cache's own figures.
            pub(crate) fn collect(events: &Events, supplied: Supplied) -> Stats {
                Stats {
                    $($field: statistics!(@value events supplied $field $src),)*
                }
            }

            /// Every figure as `(name, value)`, in a stable order (for `arcstats`-style output).
            pub fn to_pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field),)*]
            }

            /// Every figure as a metric (name, kind, help), in the order of
            /// [`Stats::to_pairs`]: see [`crate::metrics`].
            pub fn metrics(&self) -> Vec<crate::metrics::Metric> {
                vec![$(crate::metrics::Metric::from_doc_attrs(
                    stringify!($field),
                    crate::metrics::Kind::$kind,
                    &[$(stringify!($doc)),*],
                    self.$field,
                ),)*]
            }
        }
    };

    (@value $events:ident $supplied:ident $field:ident [event $ev:ident]) => {
        $events.get(Event::$ev)
    };
    (@value $events:ident $supplied:ident $field:ident [supplied]) => {
        $supplied.$field
    };

    // One entry of each kind (the last one may lack its comma).
    (@munch events [$($ev:ident)*] supplied [$($sup:ident)*] fields [$($f:tt)*]
        $(#[$doc:meta])* $field:ident : event($var:ident) $(, $($rest:tt)*)?
    ) => {
        statistics!(@munch events [$($ev)* $var] supplied [$($sup)*]
            fields [$($f)* [$(#[$doc])* $field [event $var] Counter]] $($($rest)*)?);
    };
    (@munch events [$($ev:ident)*] supplied [$($sup:ident)*] fields [$($f:tt)*]
        $(#[$doc:meta])* $field:ident : counter $(($var:ident))? $(, $($rest:tt)*)?
    ) => {
        statistics!(@munch events [$($ev)* $($var)?] supplied [$($sup)* $field]
            fields [$($f)* [$(#[$doc])* $field [supplied] Counter]] $($($rest)*)?);
    };
    (@munch events [$($ev:ident)*] supplied [$($sup:ident)*] fields [$($f:tt)*]
        $(#[$doc:meta])* $field:ident : gauge $(, $($rest:tt)*)?
    ) => {
        statistics!(@munch events [$($ev)*] supplied [$($sup)* $field]
            fields [$($f)* [$(#[$doc])* $field [supplied] Gauge]] $($($rest)*)?);
    };

    // Entry point.
    ($($entries:tt)*) => {
        statistics!(@munch events [] supplied [] fields [] $($entries)*);
    };
}

statistics! {
    /// `get`/`get_or_load` calls that found the buffer cached.
    hits: counter,
    /// Lookups that did not (including ghost hits).
    misses: event(Miss),
    /// Hits on buffers in the MRU state (seen once recently).
    mru_hits: counter(MruHit),
    /// Hits on buffers in the MFU state (seen twice or more).
    mfu_hits: counter(MfuHit),
    /// Inserts of a key remembered in the MRU ghost list (the MRU target `p` grows).
    mru_ghost_hits: event(MruGhostHit),
    /// Inserts of a key remembered in the MFU ghost list (`p` shrinks).
    mfu_ghost_hits: event(MfuGhostHit),
    /// Buffers inserted (by `insert` or by a completed load).
    inserts: event(Insert),
    /// Buffers removed by `remove` or replaced by a new insert of their key.
    removes: event(Remove),
    /// Buffers evicted.
    evictions: event(Eviction),
    /// Bytes evicted.
    evicted_bytes: event(EvictedBytes),
    /// Buffers eviction passed over because a thread was taking a hold on
    /// them at that moment (held buffers themselves are not on the lists).
    evict_skip: event(EvictSkip),
    /// Eviction passes that could not bring the cache under its target
    /// (everything left was held).
    evict_not_enough: event(EvictNotEnough),
    /// Inserts that had to wait for the evict thread (cache past
    /// `c + c >> overflow_shift`).
    overflow_waits: event(OverflowWait),
    /// Ghost entries dropped to keep the history within its bounds.
    ghosts_dropped: event(GhostDropped),
    /// Loader runs by `get_or_load`.
    loads: event(Load),
    /// Loader runs that failed.
    load_failures: event(LoadFailure),
    /// InFlight whose bytes were returned but not cached, because the key was
    /// inserted or removed while they ran (their bytes may predate it).
    loads_superseded: event(LoadSuperseded),
    /// `get_or_load` calls that waited for another thread's load of the same key.
    load_waits: event(LoadWait),
    /// Bytes of cached data: `mru_bytes + mfu_bytes + anon_bytes`.
    size: gauge,
    /// The target size `c` (the current `max_bytes`).
    c: gauge,
    /// The adaptive target for the MRU state's bytes, `0 <= p <= c`.
    p: gauge,
    /// The floor for `set_max_bytes`.
    min_bytes: gauge,
    /// Bytes in the MRU state (held or not).
    mru_bytes: gauge,
    /// Bytes in the MFU state (held or not).
    mfu_bytes: gauge,
    /// Bytes of evicted MRU buffers remembered by the MRU ghost list.
    mru_ghost_bytes: gauge,
    /// Bytes of evicted MFU buffers remembered by the MFU ghost list.
    mfu_ghost_bytes: gauge,
    /// Bytes not in any state: buffers being inserted and removed buffers
    /// still held (OpenZFS's anonymous state).
    anon_bytes: gauge,
    /// Bytes of MRU/MFU buffers currently held by handles (off the lists, so
    /// not evictable).
    held_bytes: gauge,
    /// Bytes of MRU/MFU buffers on the lists (evictable now).
    evictable_bytes: gauge,
    /// Entries in the hash table (cached buffers and ghosts).
    hash_elements: gauge,
    /// Hash inserts whose home slot was already taken.
    hash_collisions: counter,
    /// The longest probe run seen in the (open-addressed) hash table: the
    /// counterpart of ZFS's longest hash chain.
    hash_chain_max: gauge,
    /// Sublists per state list.
    sublists: gauge,
    /// Buffers eviction passed over because they were being written to the
    /// second tier at that moment.
    evict_l2_skip: event(EvictL2Skip),
    /// Bytes evicted whose buffers the second tier already held.
    evict_l2_cached: event(EvictL2Cached),
    /// Bytes evicted that the second tier could have held but did not.
    evict_l2_eligible: event(EvictL2Eligible),
    /// Buffers the evict thread passed over, for the second tier's next
    /// feed, because the tier could hold them and had no copy yet.
    evict_l2_unfed_skip: event(EvictL2Unfed),
    /// Bytes evicted that the second tier could not hold (too large for a
    /// feed, or MRU buffers with `l2_mfu_only`); 0 without a second tier.
    evict_l2_ineligible: event(EvictL2Ineligible),
    /// Memory misses served by the second tier.
    l2_hits: counter,
    /// Of `l2_hits`, reads of part of a buffer that verified only that part
    /// and left the buffer on the tier (`Cache::l2_read_part`).
    l2_part_hits: counter,
    /// Memory misses the second tier could not serve (not there, or its
    /// copy failed to read or verify).
    l2_misses: counter,
    /// Bytes of buffers the second tier holds.
    l2_size: gauge,
    /// Batches written to the second tier.
    l2_writes: counter,
    /// Bytes written to the second tier (buffers and log blocks).
    l2_write_bytes: counter,
    /// Buffers the second tier let go of when its write hand came round to
    /// them.
    l2_evictions: counter,
    /// Copies the second tier's hand kept where they were (not written
    /// again: described anew in a batch's log block), counted each time.
    l2_kept: counter,
    /// Second-tier reads whose checksum did not verify (counted as misses).
    l2_cksum_bad: counter,
    /// Second-tier reads or writes that failed.
    l2_io_errors: counter,
    /// Memory held by the second tier's headers.
    l2_hdr_bytes: gauge,
    /// Memory held by the second tier's history (its ghost lists).
    l2_ghost_bytes: gauge,
    /// Log blocks read to rebuild the second tier's index on start.
    l2_rebuild_blocks: counter,
    /// Time that rebuild took (arcstats: milliseconds; the metric: seconds).
    l2_rebuild_ms: counter,
    /// Buffers loaded ahead of a read (`Cache::load_ahead_async`) and
    /// inserted (OpenZFS's prefetch reads).
    read_ahead_inserts: event(ReadAheadInsert),
    /// Buffers read ahead that a demand read used (OpenZFS's
    /// `demand_hit_predictive_prefetch`): that use was their first, so they
    /// stayed in MRU.
    read_ahead_hits: event(ReadAheadHit),
    /// Buffers read ahead that were evicted before any demand read used
    /// them: fetched for nothing (or too early).
    read_ahead_evicted_unused: event(ReadAheadEvictedUnused),
    /// Memory hits that were part of a use already counted
    /// (`Cache::get_in_memory_same_use`): not in `hits`, no access.
    same_use_hits: event(SameUseHit),
    /// Times the adaptive policy's deciding expert changed (ARC's rules to
    /// S3ARC's or back); 0 under the other policies.
    policy_switches: counter,
}

/// Per-thread striped event counters.
pub(crate) struct Events(Striped<EVENTS>);

impl Events {
    pub(crate) fn new(stripes: usize) -> Events {
        Events(Striped::new(stripes))
    }

    #[inline]
    pub(crate) fn count(&self, e: Event) {
        self.0.add(thread_stripe(), e as usize, 1);
    }

    #[inline]
    pub(crate) fn add(&self, e: Event, n: u64) {
        self.0.add(thread_stripe(), e as usize, n);
    }

    pub(crate) fn get(&self, e: Event) -> u64 {
        self.0.sum(e as usize)
    }
}

impl Stats {
    /// Hits divided by lookups (0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The names and order of `arcstats` (and `multiarc stats`): tools
    /// parse them, so the table must not reorder or rename them.
    #[test]
    fn pairs_keep_the_arcstats_names_and_order() {
        let names: Vec<&str> = Stats::default().to_pairs().iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            [
                "hits",
                "misses",
                "mru_hits",
                "mfu_hits",
                "mru_ghost_hits",
                "mfu_ghost_hits",
                "inserts",
                "removes",
                "evictions",
                "evicted_bytes",
                "evict_skip",
                "evict_not_enough",
                "overflow_waits",
                "ghosts_dropped",
                "loads",
                "load_failures",
                "loads_superseded",
                "load_waits",
                "size",
                "c",
                "p",
                "min_bytes",
                "mru_bytes",
                "mfu_bytes",
                "mru_ghost_bytes",
                "mfu_ghost_bytes",
                "anon_bytes",
                "held_bytes",
                "evictable_bytes",
                "hash_elements",
                "hash_collisions",
                "hash_chain_max",
                "sublists",
                "evict_l2_skip",
                "evict_l2_cached",
                "evict_l2_eligible",
                "evict_l2_unfed_skip",
                "evict_l2_ineligible",
                "l2_hits",
                "l2_part_hits",
                "l2_misses",
                "l2_size",
                "l2_writes",
                "l2_write_bytes",
                "l2_evictions",
                "l2_kept",
                "l2_cksum_bad",
                "l2_io_errors",
                "l2_hdr_bytes",
                "l2_ghost_bytes",
                "l2_rebuild_blocks",
                "l2_rebuild_ms",
                "read_ahead_inserts",
                "read_ahead_hits",
                "read_ahead_evicted_unused",
                "same_use_hits",
                "policy_switches",
            ]
        );
    }

    /// Each pair carries its own field's value, and event counters are
    /// read from their own event.
    #[test]
    fn collect_reads_each_event_into_its_field() {
        let events = Events::new(2);
        events.add(Event::LoadWait, 3);
        events.add(Event::LoadSuperseded, 5);
        events.count(Event::Miss);
        let supplied = Supplied {
            hits: 1,
            mru_hits: 2,
            mfu_hits: 3,
            size: 4,
            c: 5,
            p: 6,
            min_bytes: 7,
            mru_bytes: 8,
            mfu_bytes: 9,
            mru_ghost_bytes: 10,
            mfu_ghost_bytes: 11,
            anon_bytes: 12,
            held_bytes: 13,
            evictable_bytes: 14,
            hash_elements: 15,
            hash_collisions: 16,
            hash_chain_max: 17,
            sublists: 18,
            policy_switches: 33,
            l2_hits: 19,
            l2_misses: 20,
            l2_size: 21,
            l2_writes: 22,
            l2_write_bytes: 23,
            l2_evictions: 24,
            l2_kept: 30,
            l2_cksum_bad: 25,
            l2_io_errors: 26,
            l2_hdr_bytes: 27,
            l2_ghost_bytes: 31,
            l2_rebuild_blocks: 28,
            l2_rebuild_ms: 29,
            l2_part_hits: 32,
        };
        let s = Stats::collect(&events, supplied);
        assert_eq!((s.misses, s.load_waits, s.loads_superseded), (1, 3, 5));
        assert_eq!((s.hits, s.sublists, s.hash_collisions), (1, 18, 16));
        let pairs = s.to_pairs();
        assert!(pairs.contains(&("load_waits", 3)));
        assert!(pairs.contains(&("c", 5)));
        assert!(pairs.contains(&("l2_rebuild_ms", 29)));
        assert!(pairs.contains(&("l2_part_hits", 32)));
        assert_eq!(EVENTS, 26);
    }
}
