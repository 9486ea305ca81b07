//! The tier as the ARC sees it: `arc::SecondTier` for [`Tier`], each call
//! forwarded to the tier or, for inline eviction's hook, to the feed.

use super::{feed, Tier};
use crate::arc::{ArcTails, EvictedCopy, Key, Presence, SecondTier, TierFigures, TierRead};

/// The tier as the ARC sees it (`arc::SecondTier`).
impl<K: Key> SecondTier<K> for Tier<K> {
    fn presence(&self, key: &K) -> Presence {
        Tier::presence(self, key)
    }

    fn invalidate(&self, key: &K) -> bool {
        Tier::invalidate(self, key)
    }

    fn persist_invalidations(&self) {
        Tier::persist_invalidations(self)
    }

    fn read(&self, key: &K) -> Option<TierRead> {
        Tier::read(self, key)
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
        Tier::figures(self)
    }
}
