//! [`Layout`]: N equal shards of the hash space, and the selector of a set of them.

use std::collections::BTreeSet;

use kube_core::ObjectMeta;

use super::selector::{Field, HASH_SPACE, Range, Selector};

/// `count` equal shards of the 64-bit hash space over `field`.
///
/// Shard `i` is `[⌊i·2^64/count⌋, ⌊(i+1)·2^64/count⌋)`: every hash is in exactly one shard.
///
/// ```
/// use std::collections::BTreeSet;
/// use kcache::sharding::{Field, Layout};
/// let layout = Layout::new(4, Field::Uid);
/// assert_eq!(layout.shard_of_hash(0x4000_0000_0000_0000), 1);
/// let both = layout.selector(&BTreeSet::from([0, 1]));
/// assert_eq!(
///     both.to_string(),
///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    count: u32,
    field: Field,
}

impl Layout {
    /// `count` shards over `field`; `count` is at least 1 (0 is taken as 1).
    pub fn new(count: u32, field: Field) -> Self {
        Self {
            count: count.max(1),
            field,
        }
    }

    /// The number of shards.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The hashed field.
    pub fn field(&self) -> Field {
        self.field
    }

    fn bound(&self, i: u32) -> u128 {
        if i >= self.count {
            return HASH_SPACE;
        }
        (u128::from(i) << 64) / u128::from(self.count)
    }

    /// Shard `i`'s hash range (`None` when `i ≥ count`).
    pub fn range(&self, i: u32) -> Option<Range> {
        (i < self.count)
            .then(|| Range::new(self.bound(i), self.bound(i + 1)))
            .flatten()
    }

    /// The shard a hash falls in.
    pub fn shard_of_hash(&self, hash: u64) -> u32 {
        let h = u128::from(hash);
        // A first guess from the proportion, then at most one step either way.
        let mut i = u32::try_from((h * u128::from(self.count)) >> 64).unwrap_or(self.count - 1);
        while i + 1 < self.count && self.bound(i + 1) <= h {
            i += 1;
        }
        while i > 0 && self.bound(i) > h {
            i -= 1;
        }
        i
    }

    /// The shard an object falls in.
    pub fn shard_of(&self, meta: &ObjectMeta) -> u32 {
        self.shard_of_hash(self.field.hash(meta))
    }

    /// The selector of a set of shards: adjacent shards merged into one range; no shards is a
    /// selector of nothing (see [`Selector`]). Indices `≥ count` are ignored.
    pub fn selector(&self, shards: &BTreeSet<u32>) -> Selector {
        let mut ranges: Vec<Range> = Vec::new();
        for &i in shards.iter().filter(|i| **i < self.count) {
            let (start, end) = (self.bound(i), self.bound(i + 1));
            match ranges.last_mut() {
                Some(last) if last.end() == start => {
                    if let Some(merged) = Range::new(last.start(), end) {
                        *last = merged;
                    }
                }
                _ => ranges.extend(Range::new(start, end)),
            }
        }
        Selector::new(self.field, ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_shards_tile_the_hash_space() {
        for count in [1, 2, 3, 7, 12, 64, 1000] {
            let layout = Layout::new(count, Field::Uid);
            assert_eq!(layout.range(0).unwrap().start(), 0);
            assert_eq!(layout.range(count - 1).unwrap().end(), HASH_SPACE);
            for i in 1..count {
                assert_eq!(
                    layout.range(i - 1).unwrap().end(),
                    layout.range(i).unwrap().start()
                );
            }
            assert_eq!(layout.range(count), None);
            assert_eq!(layout.shard_of_hash(0), 0);
            assert_eq!(layout.shard_of_hash(u64::MAX), count - 1);
        }
    }

    #[test]
    fn the_selector_of_every_shard_is_the_whole_space() {
        let layout = Layout::new(12, Field::Uid);
        let all: BTreeSet<u32> = (0..12).collect();
        assert_eq!(
            layout.selector(&all).to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        let gaps = layout.selector(&BTreeSet::from([0, 2, 3, 11]));
        assert_eq!(gaps.ranges().len(), 3);
        assert!(layout.selector(&BTreeSet::new()).is_nothing());
    }

    proptest! {
        #[test]
        fn a_hash_is_in_its_shard_and_in_no_other(count in 1u32..5000, hash: u64) {
            let layout = Layout::new(count, Field::Uid);
            let i = layout.shard_of_hash(hash);
            prop_assert!(layout.range(i).unwrap().contains(hash));
            if i > 0 {
                prop_assert!(!layout.range(i - 1).unwrap().contains(hash));
            }
            if i + 1 < count {
                prop_assert!(!layout.range(i + 1).unwrap().contains(hash));
            }
            let one = layout.selector(&BTreeSet::from([i]));
            prop_assert!(one.matches_hash(hash));
            let others: BTreeSet<u32> = (0..count.min(64)).filter(|j| *j != i).collect();
            prop_assert!(!layout.selector(&others).matches_hash(hash));
        }
    }
}
