//! HAProxy's lookup (`chash_get_server_hash`): a key goes to the nearer of
//! the points before and after its hash, the point before on a tie, and a
//! down node's points are as absent. Failover walks go outward from the
//! hash in both directions at once, always taking the nearer of the next
//! point forward and the next point backward (backward on a tie): the
//! first serving node such a walk meets with some nodes skipped is where
//! HAProxy sends the key with those nodes down. No layout changes: a
//! lookup reads the point before the found one too
//! ([`Points::search_near`](crate::layout::Points::search_near)).

use super::lookup::FailoverCursor;
use super::Ring;

impl Ring {
    /// Whether lookups take the nearer point ([`crate::Scheme::nearer`]).
    #[inline(always)]
    pub(crate) fn nearer(&self) -> bool {
        self.settings().compat.nearer()
    }

    /// The node for `hash`. The ring must not be empty.
    #[inline]
    pub(crate) fn nearer_index(&self, hash: u32) -> Option<usize> {
        let p = &self.points;
        let (pos, at_hash, prev_hash) = p.search_near(hash);
        let at = if hash.wrapping_sub(prev_hash) <= at_hash.wrapping_sub(hash) {
            if pos == 0 {
                p.len() - 1
            } else {
                pos - 1
            }
        } else {
            pos
        };
        let n = p.node(at);
        if !self.is_down(n) {
            return Some(n);
        }
        let mut c = self.cursor_near(hash, self.live());
        self.step(&mut c)
    }

    /// A walk by distance from `hash` that stops after `limit` distinct
    /// nodes. The ring must not be empty.
    pub(crate) fn cursor_near(&self, hash: u32, limit: usize) -> FailoverCursor {
        let (pos, at_hash, prev_hash) = self.points.search_near(hash);
        let mut c = self.cursor_at(pos, limit);
        c.back = if pos == 0 {
            self.points.len() - 1
        } else {
            pos - 1
        };
        c.hash = hash;
        c.near = [at_hash, prev_hash];
        c
    }

    /// The next distinct serving node of a walk by distance; `winner(pos,
    /// owner)` names the node serving point `pos` (or none).
    #[inline]
    pub(super) fn advance_near(
        &self,
        c: &mut FailoverCursor,
        winner: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<usize> {
        let points = &self.points;
        let len = points.len();
        // Forward and backward cover disjoint points until, together,
        // they have visited all `len`: `steps_left` counts both.
        while c.steps_left > 0 && c.yielded < c.limit {
            // A side's next hash is read only when the walk goes on past
            // the point it last took (`O(log B)` in `Compact`): the first
            // answer costs no more than the lookup.
            if c.stale & 1 != 0 {
                c.near[0] = points.hash(c.pos);
            }
            if c.stale & 2 != 0 {
                c.near[1] = points.hash(c.back);
            }
            let forward = c.near[0].wrapping_sub(c.hash);
            let backward = c.hash.wrapping_sub(c.near[1]);
            let pos = if backward <= forward {
                let p = c.back;
                c.back = if p == 0 { len - 1 } else { p - 1 };
                c.stale = 2;
                p
            } else {
                let p = c.pos;
                c.pos = if p + 1 == len { 0 } else { p + 1 };
                c.stale = 1;
                p
            };
            c.steps_left -= 1;
            if let Some(n) = self.visit(c, pos, &winner) {
                return Some(n);
            }
        }
        None
    }
}
