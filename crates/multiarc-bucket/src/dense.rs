//! When random reads of an object are dense enough to fetch it whole.
//!
//! A random read that misses memory waits a whole round trip for a few
//! KiB. Where an object's random reads land all over it (fio, a database's
//! index lookups, a key-value file), the object is read whole in the end, a
//! round trip per block; fetching its rest at once, in parallel ranged
//! GETs, costs about what a few such reads cost and serves every later read
//! from memory. Where they land in a few places (the column chunks of a
//! Parquet file a query reads, each a run of reads that continue one
//! another), fetching the whole object costs bytes nobody reads.
//!
//! So each version of an object keeps which of its regions (up to
//! [`REGIONS`] equal parts, at least [`MIN_REGION`] each) have seen a
//! random miss: a read that went to the store and that nothing continued
//! (see [`crate::prefetch::Streams`]; a Parquet column chunk's reads are a
//! run, not random). Once a quarter of the regions have (and at least two
//! random misses were seen), the reads are dense: the object's rest is
//! fetched, if it is at most the mount's limit (a fraction of what the
//! cache holds, so that an object never pushes the whole cache out).
//! Every handle of the version shares this, so eight readers of one file
//! find it dense eight times as fast as one.

/// Regions an object is divided into, at most.
pub(crate) const REGIONS: u64 = 64;
/// The smallest region.
pub(crate) const MIN_REGION: u64 = 1 << 20;

/// The random misses of one version of an object, across its handles.
#[derive(Debug)]
pub(crate) struct Density {
    size: u64,
    region: u64,
    regions: u64,
    /// Bit `i`: region `i` has seen a random miss.
    missed: u64,
    random_misses: u64,
    /// The object's rest was asked for.
    fetched: bool,
}

impl Density {
    /// The state of a version of `size` bytes.
    pub(crate) fn new(size: u64) -> Density {
        let regions = size.div_ceil(MIN_REGION).clamp(1, REGIONS);
        Density {
            size,
            region: size.div_ceil(regions).max(1),
            regions,
            missed: 0,
            random_misses: 0,
            fetched: false,
        }
    }

    /// Records a random miss at `offset`: true if the object is to be
    /// fetched whole now (once per version).
    pub(crate) fn random_miss(&mut self, offset: u64) -> bool {
        if self.fetched || offset >= self.size {
            return false;
        }
        self.random_misses += 1;
        self.missed |= 1 << (offset / self.region).min(self.regions - 1);
        let dense =
            u64::from(self.missed.count_ones()) * 4 >= self.regions && self.random_misses >= 2;
        self.fetched = dense;
        dense
    }

    /// Whether the object's rest was asked for.
    #[cfg(test)]
    pub(crate) fn fetched(&self) -> bool {
        self.fetched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    #[test]
    fn random_misses_over_a_quarter_of_the_regions_are_dense() {
        // 16 MiB: 16 regions of 1 MiB, dense at the fourth region.
        let mut d = Density::new(16 * M);
        assert!(!d.random_miss(0));
        assert!(!d.random_miss(100)); // the same region
        assert!(!d.random_miss(5 * M));
        assert!(!d.random_miss(9 * M));
        assert!(d.random_miss(15 * M + 1));
        assert!(d.fetched());
        // Once.
        assert!(!d.random_miss(3 * M));
        // 1 GiB: 64 regions of 16 MiB, dense at the sixteenth.
        let mut g = Density::new(1024 * M);
        for i in 0..15 {
            assert!(!g.random_miss(i * 64 * M + 7), "{i}");
        }
        assert!(g.random_miss(1000 * M));
    }

    #[test]
    fn misses_in_a_few_places_never_are() {
        let mut d = Density::new(1024 * M);
        // Thousands of random misses, all in the same 15 regions.
        for i in 0..10_000u64 {
            assert!(!d.random_miss((i % 15) * 16 * M + i % 4096));
        }
        assert!(!d.fetched());
    }

    #[test]
    fn small_and_empty_objects() {
        // One region: dense at the second random miss.
        let mut s = Density::new(100_000);
        assert!(!s.random_miss(10));
        assert!(s.random_miss(50_000));
        // Past the end (a read racing a shorter version): ignored.
        let mut e = Density::new(0);
        assert!(!e.random_miss(0));
        assert!(!e.random_miss(5));
        assert!(!e.fetched());
        // The last region takes the remainder.
        let mut odd = Density::new(64 * M + 5);
        assert!(!odd.random_miss(64 * M + 4));
    }
}
