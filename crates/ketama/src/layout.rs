//! How a built ring stores its points. A layout never changes routing, only
//! bytes and speed.
//!
//! Both layouts keep the sorted point hashes in one dense `u32` array (the
//! binary search touches only hashes, so a cache line holds 16 of them) and
//! the owner of each point in a parallel array:
//!
//! | layout   | hash | owner | bytes/point | nodes it holds |
//! |----------|------|-------|-------------|----------------|
//! | `Wide`   | u32  | u32   | 8           | 2^32           |
//! | `Packed` | u32  | u16   | 6           | 65,536         |
//!
//! `Packed` spends the same 6 bytes as pingora-ketama's `PointV2`
//! (`[u8; 6]`: hash then u16 node), split into two arrays instead of one.

use std::fmt;
use std::str::FromStr;

/// A ring's storage layout. See the [module docs](self) for the byte counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// u32 hash + u32 node index: 8 B/point, any node count.
    #[default]
    Wide,
    /// u32 hash + u16 node index: 6 B/point, at most 65,536 nodes.
    Packed,
}

impl Layout {
    /// Every layout, in the order tools list them.
    pub const ALL: [Layout; 2] = [Layout::Wide, Layout::Packed];

    /// The most nodes (counting weight-0 ones) a ring in this layout holds.
    pub fn max_nodes(self) -> usize {
        match self {
            Layout::Wide => u32::MAX as usize,
            Layout::Packed => 1 << 16,
        }
    }

    /// The name used on command lines and in configs.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Wide => "wide",
            Layout::Packed => "packed",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown layout name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layout {0:?}: expected one of wide, packed")]
pub struct UnknownLayout(pub String);

impl FromStr for Layout {
    type Err = UnknownLayout;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownLayout(s.to_string()))
    }
}

/// The owners of the points, in the width the layout chose.
#[derive(Clone, Debug)]
pub(crate) enum Owners {
    Wide(Box<[u32]>),
    Packed(Box<[u16]>),
}

/// Sorted, deduplicated points in a layout.
#[derive(Clone, Debug)]
pub(crate) struct Points {
    hashes: Box<[u32]>,
    owners: Owners,
}

impl Points {
    /// Stores sorted, deduplicated packed points (see `sort::pack`).
    /// The caller has checked that every node index fits the layout.
    pub(crate) fn new(layout: Layout, sorted: &[u64]) -> Self {
        let hashes = sorted.iter().map(|&p| crate::sort::hash_of(p)).collect();
        let owners = match layout {
            Layout::Wide => Owners::Wide(sorted.iter().map(|&p| crate::sort::node_of(p)).collect()),
            Layout::Packed => Owners::Packed(
                sorted
                    .iter()
                    .map(|&p| crate::sort::node_of(p) as u16)
                    .collect(),
            ),
        };
        Points { hashes, owners }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    #[inline]
    pub(crate) fn hash(&self, i: usize) -> u32 {
        self.hashes[i]
    }

    #[inline]
    pub(crate) fn node(&self, i: usize) -> usize {
        match &self.owners {
            Owners::Wide(o) => o[i] as usize,
            Owners::Packed(o) => o[i] as usize,
        }
    }

    /// Index of the first point whose hash is >= `hash`, wrapping to 0 past
    /// the last point. `O(log n)`. The ring must not be empty.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        let i = self.hashes.partition_point(|&h| h < hash);
        if i == self.hashes.len() {
            0
        } else {
            i
        }
    }

    /// Heap bytes held by the points.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.hashes.len() * 4
            + match &self.owners {
                Owners::Wide(o) => o.len() * 4,
                Owners::Packed(o) => o.len() * 2,
            }
    }
}
