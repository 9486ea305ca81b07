//! Counting a trace's distinct block ids, for a replay's first pass (which
//! turns fractions of them into capacities).
//!
//! A set of ids costs one hash-table probe per request, and once the set
//! outgrows the processor's caches each probe is a miss to memory. Block
//! traces request runs of neighbouring blocks (an ARC `.lis` line is a run,
//! 24 blocks long on average in P6; a CloudPhysics request is its blocks),
//! so [`DistinctBlocks`] keeps ids in groups of 64 neighbours: a table
//! from group number (`id / 64`) to a 64-bit mask of the ids seen, and the
//! mask of the group the last id fell in at hand. A run costs a probe per
//! group it touches instead of one per block. Ids without neighbours cost
//! what a set of ids would, with a larger entry per id.

use std::collections::HashMap;

/// Ids per group: the bits of a mask.
const GROUP: u64 = 64;

/// The distinct ids seen so far (see the module comment).
#[derive(Debug, Default)]
pub struct DistinctBlocks {
    /// Group number to the index of its mask in `masks`.
    groups: HashMap<u64, usize>,
    /// One mask per group, bit `id % 64` set for each id seen.
    masks: Vec<u64>,
    /// The group of the last id, and its mask's index (`None` before the
    /// first id).
    last: Option<(u64, usize)>,
    /// Distinct ids seen.
    count: u64,
}

impl DistinctBlocks {
    /// No id seen yet.
    pub fn new() -> DistinctBlocks {
        DistinctBlocks::default()
    }

    /// Counts `id`: true the first time it is seen.
    #[inline]
    pub fn insert(&mut self, id: u64) -> bool {
        let group = id / GROUP;
        let index = match self.last {
            Some((g, index)) if g == group => index,
            _ => self.group_index(group),
        };
        let bit = 1u64 << (id % GROUP);
        let mask = &mut self.masks[index];
        if *mask & bit != 0 {
            return false;
        }
        *mask |= bit;
        self.count += 1;
        true
    }

    /// The index of `group`'s mask (a new empty one the first time), now
    /// the group at hand.
    fn group_index(&mut self, group: u64) -> usize {
        let masks = &mut self.masks;
        let index = *self.groups.entry(group).or_insert_with(|| {
            masks.push(0);
            masks.len() - 1
        });
        self.last = Some((group, index));
        index
    }

    /// Distinct ids seen.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True before the first id.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// About how many bytes the structure holds now (its table's slots,
    /// keys, indices and control bytes, and the masks), for checks against
    /// the memory available.
    pub fn bytes(&self) -> u64 {
        let slot = (std::mem::size_of::<(u64, usize)>() + 1) as u64;
        self.groups.capacity() as u64 * slot
            + self.masks.capacity() as u64 * std::mem::size_of::<u64>() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Zipf;
    use std::collections::HashSet;

    /// The count and every answer of `insert` are a set's, on `ids`.
    fn agrees_with_a_set(ids: impl IntoIterator<Item = u64>) -> u64 {
        let mut set = HashSet::new();
        let mut distinct = DistinctBlocks::new();
        for id in ids {
            assert_eq!(distinct.insert(id), set.insert(id), "id {id}");
        }
        assert_eq!(distinct.len(), set.len() as u64);
        assert_eq!(distinct.is_empty(), set.is_empty());
        distinct.len()
    }

    #[test]
    fn counts_as_a_set_does() {
        assert_eq!(agrees_with_a_set([]), 0);
        // Runs of neighbours, overlapping, across group boundaries.
        let runs = [
            (0u64, 10u64),
            (60, 10),
            (5, 3),
            (127, 2),
            (1000, 200),
            (990, 30),
        ];
        let expected = agrees_with_a_set(runs.iter().flat_map(|&(s, n)| s..s + n));
        assert_eq!(expected, 10 + 10 + 2 + 200 + 10);
        // The ends of the id space, and ids one group apart.
        agrees_with_a_set([u64::MAX, 0, u64::MAX - 63, 63, 64, u64::MAX, 0, 128, 64]);
        // Scattered ids, repeated (a Zipf workload) and spread out.
        agrees_with_a_set(Zipf::new(5000, 0.9, 3).take(50_000));
        agrees_with_a_set(
            Zipf::new(5000, 0.9, 4)
                .take(50_000)
                .map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
    }

    #[test]
    fn its_bytes_grow_with_the_groups() {
        let mut distinct = DistinctBlocks::new();
        assert_eq!(distinct.bytes(), 0);
        distinct.insert(1);
        let one = distinct.bytes();
        assert!(one > 0);
        for id in 0..64 {
            distinct.insert(id);
        }
        assert_eq!(distinct.bytes(), one, "one group of neighbours");
        for id in 0..10_000u64 {
            distinct.insert(id * 64);
        }
        assert!(distinct.bytes() >= 10_000 * 24, "{}", distinct.bytes());
    }
}
