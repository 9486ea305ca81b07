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
/// page ([`NEVER`]: none), for a trace held in memory. (A trace streamed
/// in passes fills a compact [`NextUses`] with a [`NextUseRecorder`].)
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

/// The next use of every request of a trace (the index of the next request
/// of the same page, [`NEVER`] if none), for a trace too large to hold in
/// memory: 4 bytes a request while the trace has fewer than 2^32 - 1
/// requests, 8 beyond ([`NextUses::bytes_per_request`]). Filled by a
/// [`NextUseRecorder`] during a pass over the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextUses {
    /// Indexes below `u32::MAX` (`u32::MAX`: never).
    Narrow(Vec<u32>),
    /// Any index ([`NEVER`]: never).
    Wide(Vec<u64>),
}

impl NextUses {
    /// Bytes a table for `requests` requests takes per request.
    pub fn bytes_per_request(requests: u64) -> u64 {
        if requests < u32::MAX as u64 {
            4
        } else {
            8
        }
    }

    /// The next use of request `index` ([`NEVER`]: none). Panics past the
    /// trace's requests.
    pub fn get(&self, index: u64) -> u64 {
        match self {
            NextUses::Narrow(v) => match v[index as usize] {
                u32::MAX => NEVER,
                n => n as u64,
            },
            NextUses::Wide(v) => v[index as usize],
        }
    }

    /// The number of requests.
    pub fn len(&self) -> usize {
        match self {
            NextUses::Narrow(v) => v.len(),
            NextUses::Wide(v) => v.len(),
        }
    }

    /// Whether there are no requests.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`next_uses`]'s table, wide.
impl From<Vec<u64>> for NextUses {
    fn from(next: Vec<u64>) -> NextUses {
        NextUses::Wide(next)
    }
}

/// Fills a [`NextUses`] from a trace's requests in order: each request
/// sets the next use of the same page's previous request. It holds the
/// table and the last request of every page seen.
#[derive(Debug)]
pub struct NextUseRecorder {
    next: NextUses,
    last: HashMap<u64, u64>,
}

impl NextUseRecorder {
    /// A recorder for a trace of `requests` requests (the table is
    /// allocated now: `requests` times [`NextUses::bytes_per_request`]).
    pub fn new(requests: u64) -> NextUseRecorder {
        let next = if NextUses::bytes_per_request(requests) == 4 {
            NextUses::Narrow(vec![u32::MAX; requests as usize])
        } else {
            NextUses::Wide(vec![NEVER; requests as usize])
        };
        NextUseRecorder {
            next,
            last: HashMap::new(),
        }
    }

    /// Records that request `index` (below the trace's requests, in
    /// increasing order) is of `page`.
    pub fn record(&mut self, index: u64, page: u64) {
        if let Some(prev) = self.last.insert(page, index) {
            match &mut self.next {
                // Narrow only while every index is below u32::MAX.
                NextUses::Narrow(v) => v[prev as usize] = index as u32,
                NextUses::Wide(v) => v[prev as usize] = index,
            }
        }
    }

    /// The table.
    pub fn finish(self) -> NextUses {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_finds_what_next_uses_finds() {
        use crate::workload::Zipf;
        let trace: Vec<u64> = Zipf::new(300, 0.8, 3).take(5_000).collect();
        let mut recorder = NextUseRecorder::new(trace.len() as u64);
        for (i, &page) in trace.iter().enumerate() {
            recorder.record(i as u64, page);
        }
        let narrow = recorder.finish();
        assert!(matches!(narrow, NextUses::Narrow(_)));
        assert_eq!(narrow.len(), trace.len());
        let wide = NextUses::from(next_uses(&trace));
        for i in 0..trace.len() as u64 {
            assert_eq!(narrow.get(i), wide.get(i), "request {i}");
        }
        assert!(narrow.get(trace.len() as u64 - 1) == NEVER);
        assert_eq!(NextUses::bytes_per_request(u32::MAX as u64 - 1), 4);
        assert_eq!(NextUses::bytes_per_request(u32::MAX as u64), 8);
    }

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
