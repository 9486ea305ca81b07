//! What the cached store counts: requests and bytes to the store, hits per
//! tier, coalesced and single-flighted block reads.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident,)*) => {
        /// A snapshot of a [`CachedStore`](crate::CachedStore)'s counters
        /// (since it was built). The block cache's own statistics are
        /// [`CachedStore::cache`](crate::CachedStore::cache)`().stats()`.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct CachedStoreStats {
            $($(#[$doc])* pub $field: u64,)*
        }

        #[derive(Default)]
        pub(crate) struct Counters {
            $(pub(crate) $field: AtomicU64,)*
        }

        impl Counters {
            pub(crate) fn snapshot(&self) -> CachedStoreStats {
                CachedStoreStats {
                    $($field: self.$field.load(Ordering::Relaxed),)*
                }
            }
        }

        impl CachedStoreStats {
            /// The counters as (name, value) pairs, in declaration order.
            pub fn to_pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field),)*]
            }

            /// The counters as metrics (component `object_store`), in
            /// declaration order: see [`multiarc::metrics`].
            pub fn metrics(&self) -> Vec<multiarc::metrics::Metric> {
                vec![$(multiarc::metrics::Metric::from_doc_attrs(
                    stringify!($field),
                    multiarc::metrics::Kind::Counter,
                    &[$(stringify!($doc)),*],
                    self.$field,
                )
                .in_component("object_store"),)*]
            }
        }
    };
}

counters! {
    /// Requests sent to the inner store by reads: block fetches, metadata
    /// fetches and reads passed through (writes and lists not counted).
    store_requests,
    /// Ranged GETs of blocks (part of `store_requests`).
    block_requests,
    /// Metadata fetches (HEAD; part of `store_requests`).
    metadata_requests,
    /// Reads passed through uncached (a version asked for, or an object
    /// with neither ETag nor version; part of `store_requests`).
    passthrough_reads,
    /// Bytes of blocks received from the store.
    store_bytes,
    /// Block reads served from memory.
    memory_hits,
    /// Block reads served from the second tier (local device).
    l2_hits,
    /// Of `l2_hits`, reads of a small part of a block that read and
    /// verified that part alone and left the block on the second tier
    /// (`multiarc::Cache::l2_read_part`).
    l2_part_hits,
    /// Blocks fetched from the store by this store's own requests.
    blocks_fetched,
    /// Block GETs that fetched more than one block (adjacent missing
    /// blocks of one read coalesced into one request).
    coalesced_requests,
    /// Blocks fetched beyond the first of a coalesced GET (requests saved).
    coalesced_blocks,
    /// Blocks added to a sequential read's fetch past its end (readahead;
    /// part of `blocks_fetched` once fetched).
    readahead_blocks,
    /// Block reads that waited for another reader's load of the same block
    /// instead of sending their own request (single flight).
    single_flight_waits,
    /// Metadata reads served from the metadata cache.
    metadata_hits,
    /// Metadata reads that waited for another reader's fetch of it.
    metadata_waits,
    /// Reads restarted because the object changed under them (its ETag,
    /// version or size differed, or a conditional fetch failed).
    version_changes,
    /// Objects invalidated by writes through this store.
    invalidations,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A block read served by reading part of it from the second tier.
    pub(crate) fn l2_part_hit(&self) {
        Counters::add(&self.l2_hits, 1);
        Counters::add(&self.l2_part_hits, 1);
    }
}
