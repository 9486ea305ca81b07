//! Belady's OPT (the MIN algorithm): on a miss with a full cache, evict the
//! page whose next use is farthest in the future. It is the bound every
//! other policy's hit ratio is measured against, and it needs the future:
//! each request comes with the index of the next request of the same page.
//!
//! The simulation keeps a max-heap of next uses with lazy deletion: an entry
//! whose next use no longer matches the page's record is skipped, and the
//! heap is compacted once stale entries dominate.

use std::collections::{BinaryHeap, HashMap};

/// The next use of a page that is never requested again.
pub const NEVER: u64 = u64::MAX;

/// Belady's OPT with a capacity of `capacity` pages.
#[derive(Debug)]
pub struct OptPolicy {
    capacity: usize,
    /// Cached page -> its next use.
    cached: HashMap<u64, u64>,
    /// (next use, page), stale entries skipped.
    heap: BinaryHeap<(u64, u64)>,
}

impl OptPolicy {
    /// An empty OPT cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: usize) -> OptPolicy {
        assert!(
            capacity_pages > 0,
            "OPT needs a capacity of at least one page"
        );
        OptPolicy {
            capacity: capacity_pages,
            cached: HashMap::new(),
            heap: BinaryHeap::new(),
        }
    }

    /// Requests `page`, whose next request is at index `next_use` of the
    /// trace ([`NEVER`] if none): returns true on a hit.
    pub fn access(&mut self, page: u64, next_use: u64) -> bool {
        let hit = self.cached.contains_key(&page);
        if !hit && self.cached.len() == self.capacity {
            while let Some((when, victim)) = self.heap.pop() {
                if self.cached.get(&victim) == Some(&when) {
                    self.cached.remove(&victim);
                    break;
                }
            }
        }
        self.cached.insert(page, next_use);
        self.heap.push((next_use, page));
        if self.heap.len() > 4 * self.capacity + 1024 {
            let cached = &self.cached;
            self.heap
                .retain(|&(when, page)| cached.get(&page) == Some(&when));
        }
        hit
    }
}

/// For each request of `trace`, the index of the next request of the same
/// page ([`NEVER`]: none), for a trace held in memory. (`multiarc replay`
/// streams its traces and computes these in a pass of its own.)
pub fn next_uses(trace: &[u64]) -> Vec<u64> {
    let mut next = vec![NEVER; trace.len()];
    let mut last = HashMap::new();
    for (i, &page) in trace.iter().enumerate() {
        if let Some(prev) = last.insert(page, i) {
            next[prev] = i as u64;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_is_beladys() {
        // Capacity 2, trace 1 2 3 1 2: when 3 arrives, OPT evicts the page
        // whose next use is farthest (2, used at index 4; 1 is used at 3).
        let trace = [1u64, 2, 3, 1, 2];
        let next = next_uses(&trace);
        assert_eq!(next, vec![3, 4, NEVER, NEVER, NEVER]);
        let mut opt = OptPolicy::new(2);
        let hits: Vec<bool> = trace
            .iter()
            .zip(&next)
            .map(|(&id, &n)| opt.access(id, n))
            .collect();
        assert_eq!(hits, vec![false, false, false, true, false]);
    }

    #[test]
    fn opt_never_does_worse_than_lru() {
        use crate::reference::{LruPolicy, PagePolicy};
        use crate::workload::Zipf;
        let trace: Vec<u64> = Zipf::new(2000, 0.8, 7).take(20_000).collect();
        let next = next_uses(&trace);
        for c in [1, 10, 100, 500] {
            let mut opt = OptPolicy::new(c);
            let mut lru = LruPolicy::new(c);
            let o = (0..trace.len())
                .filter(|&i| opt.access(trace[i], next[i]))
                .count();
            let l = trace.iter().filter(|&&p| lru.access(p)).count();
            assert!(o >= l, "capacity {c}: opt {o} < lru {l}");
        }
    }
}
