//! The walk under a label requirement, on the shared ring: the first
//! eligible node for a hash, and failover walks that visit only the points
//! the label index cannot rule out. [`crate::Requirement`] is the public
//! face; a dedicated ring needs none of this.

use super::labels::NodeSet;
use super::lookup::FailoverCursor;
use super::Ring;
use crate::scheme::Probe;
use crate::Scheme;

impl Ring {
    /// The eligible serving node for `hash` under a requirement (`mask`,
    /// its label bits; `eligible`, its nodes; `serving`, how many eligible
    /// nodes serve). With a label index the first candidate comes with no
    /// branch on the found point's eligibility (as unpredictable as the
    /// requirement's share); its owner is nearly always the answer (a
    /// collided point's owner comes first in tie order).
    pub(crate) fn first_required(
        &self,
        p: Probe,
        eligible: &NodeSet,
        mask: u64,
        serving: usize,
    ) -> Option<usize> {
        let len = self.points.len();
        if len == 0 || serving == 0 {
            return None;
        }
        if self.nearer() || self.compat().is_envoy() {
            let mut c = self.cursor_for_probe(p, serving);
            return self.step_required(&mut c, eligible, mask);
        }
        let mut pos = self.points.search(p.hash);
        if !self.label_index.is_empty() {
            let d = self.label_index.next(pos, len, mask, len)?;
            pos = if pos + d >= len {
                pos + d - len
            } else {
                pos + d
            };
        }
        let owner = self.points.node(pos);
        if eligible.contains(owner) && !self.is_down(owner) {
            return Some(owner);
        }
        let mut c = self.cursor_at(pos, serving);
        self.step_required(&mut c, eligible, mask)
    }

    /// A failover walk from a probe's point that yields at most `serving`
    /// nodes (an empty walk when none serves).
    pub(crate) fn cursor_required(&self, p: Probe, serving: usize) -> FailoverCursor {
        if self.points.len() == 0 || serving == 0 {
            return self.cursor_at(0, 0);
        }
        self.cursor_for_probe(p, serving)
    }

    /// [`advance`](Self::advance) under a label requirement (`mask`, its
    /// label bits; `eligible`, its nodes): at each point the serving node
    /// is its owner if eligible, else the first eligible node that
    /// generated the same hash (a collided point), else none. With a label
    /// index the walk visits only the points it cannot rule out.
    pub(crate) fn advance_required(
        &self,
        c: &mut FailoverCursor,
        eligible: &NodeSet,
        mask: u64,
    ) -> crate::Result<Option<usize>> {
        if !c.is_of(self) {
            return Err(crate::Error::ForeignCursor);
        }
        Ok(self.step_required(c, eligible, mask))
    }

    /// [`advance_required`](Self::advance_required) of a cursor known to
    /// be this ring's.
    fn step_required(
        &self,
        c: &mut FailoverCursor,
        eligible: &NodeSet,
        mask: u64,
    ) -> Option<usize> {
        let winner = |pos: usize, owner: usize| {
            if eligible.contains(owner) {
                Some(owner)
            } else {
                self.collisions.at(pos).and_then(|list| {
                    list.iter()
                        .map(|&n| n as usize)
                        .find(|&n| eligible.contains(n))
                })
            }
        };
        if self.nearer() {
            return self.advance_near(c, winner);
        }
        if let Scheme::Maglev(m) = self.compat() {
            return self.advance_maglev(c, m, winner);
        }
        if self.label_index.is_empty() {
            return self.advance_with(c, |_, _| Some(0), winner);
        }
        let len = self.points.len();
        self.advance_with(
            c,
            |pos, max| self.label_index.next(pos, len, mask, max),
            winner,
        )
    }
}
