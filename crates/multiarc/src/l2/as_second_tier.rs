//! The tier as the ARC sees it: `arc::SecondTier` for [`L2Arc`], each call
//! forwarded to the tier or, for inline eviction's hook, to the feed.

use super::{feed, L2Arc};
use crate::arc::{ArcTails, EvictedCopy, Key, Presence, SecondTier, TierFigures, TierRead};

/// The tier as the ARC sees it (`arc::SecondTier`).
impl<K: Key> SecondTier<K> for L2Arc<K> {
    fn presence(&self, key: &K) -> Presence {
        L2Arc::presence(self, key)
    }

    fn invalidate(&self, key: &K) -> bool {
        L2Arc::invalidate(self, key)
    }

    fn persist_invalidations(&self) {
        L2Arc::persist_invalidations(self)
    }

    fn read(&self, key: &K) -> Option<TierRead> {
        L2Arc::read(self, key)
    }

    fn classify_eviction(&self, presence: Presence, bytes: u64, mfu: bool) -> EvictedCopy {
        if presence == Presence::Cached {
            EvictedCopy::Cached
        } else if self.feed.takes(bytes, mfu) {
            EvictedCopy::Eligible
        } else {
            EvictedCopy::Ineligible
        }
    }

    fn before_room(&self, arc: &dyn ArcTails<K>, size: u64) {
        feed::feed_inline(self, arc, size);
    }

    fn before_evict_pass(&self, arc: &dyn ArcTails<K>, bytes: u64, round: u32) {
        feed::feed_before_eviction(self, arc, bytes, round);
    }

    fn figures(&self) -> TierFigures {
        L2Arc::figures(self)
    }
}
