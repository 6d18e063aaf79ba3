//! A ring's labels: their names, each node's label bits, and sets of
//! nodes (one bit per node) for the nodes a requirement allows.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::sort::Collisions;
use crate::Node;

/// The most distinct labels a ring holds.
pub const MAX_LABELS: usize = 64;

/// A ring's label names (bit `i` is `names[i]`) and each node's mask.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Labels {
    pub(super) names: Vec<Box<str>>,
    masks: Box<[u64]>,
}

impl Labels {
    pub(crate) fn new(nodes: &[Node]) -> Result<Self> {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut names = Vec::new();
        let mut masks = vec![0u64; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for l in node.labels() {
                let bit = match index.get(l) {
                    Some(&b) => b,
                    None => {
                        if names.len() == MAX_LABELS {
                            return Err(Error::TooManyLabels {
                                label: l.to_string(),
                                server: node.server().to_string(),
                            });
                        }
                        names.push(Box::from(l));
                        index.insert(l, names.len() as u32 - 1);
                        names.len() as u32 - 1
                    }
                };
                masks[i] |= 1 << bit;
            }
        }
        if names.is_empty() {
            masks.clear();
        }
        Ok(Labels {
            names,
            masks: masks.into_boxed_slice(),
        })
    }

    pub(crate) fn mask_of(&self, node: usize) -> u64 {
        self.masks.get(node).copied().unwrap_or(0)
    }

    /// The label bits of point `i` owned by `owner`: the owner's, or for a
    /// collided point those of every node sharing it (what the label index
    /// holds for the point).
    pub(crate) fn point_mask(&self, i: usize, owner: usize, collisions: &Collisions) -> u64 {
        let m = self.mask_of(owner);
        match collisions.at(i) {
            Some(list) => list.iter().fold(m, |m, &n| m | self.mask_of(n as usize)),
            None => m,
        }
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The mask of these label names, or the error naming the first one
    /// the ring lacks.
    pub(crate) fn mask<S: AsRef<str>>(&self, labels: &[S]) -> Result<u64> {
        let mut mask = 0u64;
        for l in labels {
            let l = l.as_ref();
            let bit = self.names.iter().position(|n| &**n == l).ok_or_else(|| {
                let known: Vec<&str> = self.names().collect();
                Error::UnknownLabel {
                    label: l.to_string(),
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(",")
                    },
                }
            })?;
            mask |= 1 << bit;
        }
        Ok(mask)
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.masks.len() * 8 + self.names.iter().map(|n| n.len() + 16).sum::<usize>()
    }
}

/// A set of node indices: one bit per node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeSet(Box<[u64]>);

impl NodeSet {
    pub(crate) fn with_capacity(nodes: usize) -> Self {
        NodeSet(vec![0u64; nodes.div_ceil(64)].into_boxed_slice())
    }

    pub(crate) fn insert(&mut self, n: usize) {
        self.0[n / 64] |= 1 << (n % 64);
    }

    #[inline(always)]
    pub(crate) fn contains(&self, n: usize) -> bool {
        self.0[n / 64] & (1 << (n % 64)) != 0
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.len() * 8
    }
}
