//! Looking keys up: one key, a batch, the failover walk and its owned
//! cursor, and the walk under a label requirement.

use super::Ring;
use crate::node::Node;
use crate::scheme::Probe;
use crate::Scheme;

impl Ring {
    /// The hash this ring's scheme gives a key (CRC-32 of its bytes for the
    /// nginx and pingora schemes). Cost: one pass over the key.
    #[inline]
    pub fn hash_key(&self, key: &[u8]) -> u32 {
        self.compat().hash_key(key)
    }

    /// The node for a key: the owner of the first point at or after the
    /// key's hash, skipping `down` nodes (under [`Scheme::Haproxy`]: of the
    /// nearer of the points before and after it, skipping `down` nodes'
    /// points). `None` when no node can serve.
    ///
    /// [`Scheme::Haproxy`]: crate::Scheme::Haproxy
    /// Cost: one hash of the key and an `O(log P)` search (`O(1)` expected
    /// in `Compact`).
    #[inline]
    pub fn node(&self, key: &[u8]) -> Option<&Node> {
        self.node_index(key).map(|i| &self.nodes()[i])
    }

    /// The index (into [`nodes`](Self::nodes)) of the node for a key, as
    /// [`node`](Self::node) answers: under Envoy's and gRPC's schemes, by
    /// the key's full 64-bit hash.
    #[inline]
    pub fn node_index(&self, key: &[u8]) -> Option<usize> {
        self.node_index_for_probe(self.compat().probe(key))
    }

    /// The node for a precomputed key hash.
    #[inline]
    pub fn node_for_hash(&self, hash: u32) -> Option<&Node> {
        self.node_index_for_hash(hash).map(|i| &self.nodes()[i])
    }

    /// The index (into [`nodes`](Self::nodes)) of the node for a hash.
    /// Under [`Scheme::EnvoyRingHash`] a 32-bit `hash` stands for the
    /// 64-bit hash `hash << 32`; under [`Scheme::Maglev`] for its slot (a
    /// failover from it retries as from the 64-bit hash `hash << 32`).
    #[inline]
    pub fn node_index_for_hash(&self, hash: u32) -> Option<usize> {
        self.node_index_for_probe(Probe::of_hash(self.compat(), hash))
    }

    /// The node of a 64-bit hash under Envoy's and gRPC's schemes, as their
    /// `chooseHost(hash)` picks it (skipping `down` nodes as a failover
    /// would).
    ///
    /// # Errors
    /// [`Error::NarrowScheme`](crate::Error::NarrowScheme) under the
    /// 32-bit schemes, whose keys have no 64-bit hash.
    pub fn node_index_for_hash64(&self, hash: u64) -> crate::Result<Option<usize>> {
        Ok(self.node_index_for_probe(self.probe64(hash)?))
    }

    /// A failover walk from a 64-bit hash under Envoy's and gRPC's schemes:
    /// the order their retries (with a predicate refusing hosts already
    /// tried) walk.
    ///
    /// # Errors
    /// As [`node_index_for_hash64`](Self::node_index_for_hash64).
    pub fn failover_cursor64(&self, hash: u64) -> crate::Result<FailoverCursor> {
        Ok(self.cursor_for_probe(self.probe64(hash)?, self.live()))
    }

    fn probe64(&self, wide: u64) -> crate::Result<Probe> {
        match self.compat() {
            c if c.is_envoy() => Ok(c.probe64(wide)),
            compat => Err(crate::Error::NarrowScheme { compat }),
        }
    }

    /// The point a probe lands on: the first at or after its hash,
    /// wrapping; under `EnvoyRingHash` the first whose 64-bit hash (top
    /// bits in the layout, low bits in `lows`) is at or after the probe's.
    /// The ring must not be empty.
    #[inline]
    pub(crate) fn position(&self, p: Probe) -> usize {
        if let Scheme::Maglev(m) = self.compat() {
            // Points are the slots in order: no search in any layout.
            return m.slot_of_hash(p.hash) as usize;
        }
        if self.lows.is_empty() {
            return self.points.search(p.hash);
        }
        // The found point's hash comes with the search (`Compact` decodes
        // it there; reading it again would cost a second search).
        let (pos, found, _) = self.points.search_near(p.hash);
        if found != p.hash {
            return pos;
        }
        self.refine(pos, p)
    }

    /// Past the points whose top bits equal the probe's and whose low bits
    /// are below its: rare (the key's top 32 bits equal a point's).
    #[inline]
    fn refine(&self, mut pos: usize, p: Probe) -> usize {
        let low = p.wide as u32;
        let len = self.points.len();
        for _ in 0..len {
            if self.points.hash(pos) != p.hash || self.lows[pos] >= low {
                break;
            }
            pos = if pos + 1 == len { 0 } else { pos + 1 };
        }
        pos
    }

    /// [`node_index_for_hash`](Self::node_index_for_hash) of a probe.
    #[inline]
    pub(crate) fn node_index_for_probe(&self, p: Probe) -> Option<usize> {
        if self.points.len() == 0 {
            return None;
        }
        if self.nearer() {
            return self.nearer_index(p.hash);
        }
        let pos = self.position(p);
        let n = self.points.node(pos);
        if !self.is_down(n) {
            return Some(n);
        }
        let mut c = self.cursor_from(pos, p, self.live());
        self.step(&mut c)
    }

    /// Looks up many precomputed hashes at once: `out` is cleared and gets
    /// one entry per hash, as [`node_index_for_hash`](Self::node_index_for_hash)
    /// would answer. Independent keys' memory accesses overlap (groups of 16
    /// searched in lock step), which on rings larger than the CPU caches is
    /// several times the throughput of one lookup after another.
    pub fn node_indices_for_hashes(&self, hashes: &[u32], out: &mut Vec<Option<usize>>) {
        out.clear();
        if self.points.len() == 0 {
            out.resize(hashes.len(), None);
            return;
        }
        if self.nearer() || self.compat().is_envoy() {
            // The point before the found one decides too (HAProxy), or the
            // low bits and retries (Envoy's): one at a time.
            out.extend(hashes.iter().map(|&h| self.node_index_for_hash(h)));
            return;
        }
        let mut pos = [0usize; crate::layout::GROUP];
        for qs in hashes.chunks(crate::layout::GROUP) {
            let pos = &mut pos[..qs.len()];
            self.points.search_batch(qs, pos);
            out.extend(pos.iter().map(|&p| {
                let n = self.points.node(p);
                if self.is_down(n) {
                    let mut c = self.cursor_at(p, self.live());
                    self.step(&mut c)
                } else {
                    Some(n)
                }
            }));
        }
    }

    /// The node for each key, looked up as a batch (see
    /// [`node_indices_for_hashes`](Self::node_indices_for_hashes)).
    pub fn nodes_for_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Option<&Node>> {
        if self.compat().is_envoy() {
            return keys.iter().map(|k| self.node(k.as_ref())).collect();
        }
        let hashes: Vec<u32> = keys.iter().map(|k| self.hash_key(k.as_ref())).collect();
        let mut idx = Vec::with_capacity(keys.len());
        self.node_indices_for_hashes(&hashes, &mut idx);
        idx.into_iter()
            .map(|i| i.map(|i| &self.nodes()[i]))
            .collect()
    }

    /// Every distinct serving node once, in ring order from the key's point:
    /// the key's node first, then where it would fail over to. `down` nodes
    /// are skipped. Ends after the last distinct node (unlike pingora's
    /// `node_iter`, which cycles and repeats nodes). Under
    /// [`Scheme::Haproxy`](crate::Scheme::Haproxy) the order is by distance
    /// from the key's hash in both directions (the point before first on a
    /// tie): each node is where HAProxy sends the key once all before it
    /// are down.
    pub fn failover(&self, key: &[u8]) -> Failover<'_> {
        Failover {
            ring: self,
            cursor: self.cursor_for_probe(self.compat().probe(key), self.live()),
        }
    }

    /// [`failover`](Self::failover) for a precomputed hash.
    pub fn failover_for_hash(&self, hash: u32) -> Failover<'_> {
        Failover {
            ring: self,
            cursor: self.failover_cursor(hash),
        }
    }

    /// Up to `n` distinct serving nodes for a key, in failover order.
    pub fn replicas(&self, key: &[u8], n: usize) -> Vec<&Node> {
        self.failover(key).take(n).collect()
    }

    /// A detached failover walk from a hash's point; see [`FailoverCursor`]
    /// (and [`node_index_for_hash`](Self::node_index_for_hash) for what a
    /// 32-bit hash means under Envoy's schemes).
    pub fn failover_cursor(&self, hash: u32) -> FailoverCursor {
        self.cursor_for_probe(Probe::of_hash(self.compat(), hash), self.live())
    }

    /// A detached failover walk from a key's point.
    pub fn failover_cursor_for_key(&self, key: &[u8]) -> FailoverCursor {
        self.cursor_for_probe(self.compat().probe(key), self.live())
    }

    /// A walk from a probe's point that stops after `limit` distinct nodes.
    pub(crate) fn cursor_for_probe(&self, p: Probe, limit: usize) -> FailoverCursor {
        if self.points.len() == 0 {
            return self.cursor_at(0, limit);
        }
        if self.nearer() {
            return self.cursor_near(p.hash, limit);
        }
        self.cursor_from(self.position(p), p, limit)
    }

    /// A walk from point `pos`, the probe's; under Maglev it carries the
    /// probe's 64-bit hash for the retry slots.
    fn cursor_from(&self, pos: usize, p: Probe, limit: usize) -> FailoverCursor {
        let mut c = self.cursor_at(pos, limit);
        if let Scheme::Maglev(_) = self.compat() {
            c.near = [(p.wide >> 32) as u32, p.wide as u32];
        }
        c
    }

    /// A walk from point `pos` that stops after `limit` distinct nodes.
    pub(crate) fn cursor_at(&self, pos: usize, limit: usize) -> FailoverCursor {
        FailoverCursor {
            ring: self.id,
            pos,
            back: 0,
            hash: 0,
            near: [0; 2],
            stale: 0,
            steps_left: self.points.len(),
            yielded: 0,
            limit,
            seen: Seen::default(),
        }
    }

    /// The next distinct serving node of a cursor's walk (its index), as
    /// [`Failover::next_index`] would give; `Ok(None)` when the walk is
    /// over. Cost: the points walked to reach the node.
    ///
    /// # Errors
    /// [`Error::ForeignCursor`](crate::Error::ForeignCursor) for a cursor
    /// another ring made (its position means nothing here).
    pub fn advance(&self, c: &mut FailoverCursor) -> crate::Result<Option<usize>> {
        if !c.is_of(self) {
            return Err(crate::Error::ForeignCursor);
        }
        Ok(self.step(c))
    }

    /// [`advance`](Self::advance) of a cursor known to be this ring's.
    #[inline]
    pub(crate) fn step(&self, c: &mut FailoverCursor) -> Option<usize> {
        if self.nearer() {
            return self.advance_near(c, |_, owner| Some(owner));
        }
        if let Scheme::Maglev(m) = self.compat() {
            return self.advance_maglev(c, m, |_, owner| Some(owner));
        }
        self.advance_with(c, |_, _| Some(0), |_, owner| Some(owner))
    }

    /// Maglev's walk: Envoy's retry slots, attempt after attempt (the
    /// count in `back`, the key's 64-bit hash in `near`), each node once;
    /// after [`MAGLEV_ATTEMPTS`] attempts a node, the table in slot order
    /// from the key's slot, so that the walk still ends with every node.
    pub(super) fn advance_maglev(
        &self,
        c: &mut FailoverCursor,
        m: crate::envoy::Maglev,
        winner: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<usize> {
        let wide = (u64::from(c.near[0]) << 32) | u64::from(c.near[1]);
        let budget = MAGLEV_ATTEMPTS * (self.live() + 1);
        while c.stale == 0 && c.yielded < c.limit {
            if c.back >= budget {
                c.stale = 1;
                c.pos = m.slot(wide, 0) as usize;
                c.steps_left = self.points.len();
                break;
            }
            let pos = m.slot(wide, c.back as u64) as usize;
            c.back += 1;
            if let Some(n) = self.visit(c, pos, &winner) {
                return Some(n);
            }
        }
        self.advance_with(c, |_, _| Some(0), winner)
    }

    /// The walk: `skip(pos, max)` says how many points from `pos` on can be
    /// passed over (`None`: all of the next `max`), `winner(pos, owner)`
    /// names the node serving point `pos` (or none); down nodes and nodes
    /// already yielded are skipped.
    #[inline]
    pub(super) fn advance_with(
        &self,
        c: &mut FailoverCursor,
        skip: impl Fn(usize, usize) -> Option<usize>,
        winner: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<usize> {
        let points = &self.points;
        let len = points.len();
        while c.steps_left > 0 && c.yielded < c.limit {
            let Some(d) = skip(c.pos, c.steps_left) else {
                c.steps_left = 0;
                break;
            };
            let mut pos = c.pos + d;
            if pos >= len {
                pos -= len;
            }
            c.pos = if pos + 1 == len { 0 } else { pos + 1 };
            c.steps_left -= d + 1;
            if let Some(n) = self.visit(c, pos, &winner) {
                return Some(n);
            }
        }
        None
    }

    /// A walk's visit of point `pos`: the node serving it (`winner`), if it
    /// serves and the walk has not yielded it yet (then counted as yielded).
    #[inline(always)]
    pub(super) fn visit(
        &self,
        c: &mut FailoverCursor,
        pos: usize,
        winner: &impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<usize> {
        let n = winner(pos, self.points.node(pos))?;
        if self.is_down(n) || !c.seen.insert(n, self.nodes().len()) {
            return None;
        }
        c.yielded += 1;
        Some(n)
    }
}

/// Retry attempts a Maglev walk makes per serving node before it walks the
/// table in order: Envoy's retries find the first few nodes long before.
const MAGLEV_ATTEMPTS: usize = 16;

/// Iterator over distinct serving nodes in ring order; see
/// [`Ring::failover`]. Cost per node: the points walked to reach it; no
/// allocation for the first 16 nodes, then a bitset of one bit per node.
#[derive(Clone, Debug)]
pub struct Failover<'a> {
    ring: &'a Ring,
    cursor: FailoverCursor,
}

impl<'a> Iterator for Failover<'a> {
    type Item = &'a Node;

    fn next(&mut self) -> Option<&'a Node> {
        self.next_index().map(|i| &self.ring.nodes()[i])
    }
}

impl Failover<'_> {
    /// The next node's index into [`Ring::nodes`] instead of the node.
    pub fn next_index(&mut self) -> Option<usize> {
        self.ring.step(&mut self.cursor)
    }
}

/// A failover walk's position, owned and detached from the ring: for
/// callers that cannot hold a [`Failover`] (which borrows the ring), such
/// as an iterator that owns an `Arc<Ring>`, or a request that keeps its
/// walk across retries. Advance it with [`Ring::advance`] on the ring that
/// made it; any other ring refuses it with
/// [`Error::ForeignCursor`](crate::Error::ForeignCursor):
///
/// ```
/// use ketama::{Error, Node, Ring};
///
/// let a = Ring::new(vec![Node::new("10.0.0.1:80", 1)])?;
/// let b = Ring::new(vec![Node::new("10.0.0.2:80", 1)])?;
/// let mut c = a.failover_cursor(42);
/// assert!(matches!(b.advance(&mut c), Err(Error::ForeignCursor)));
/// assert_eq!(a.advance(&mut c)?, Some(0));
/// # Ok::<(), ketama::Error>(())
/// ```
///
/// Cost: 136 bytes inline; it allocates only once a walk has yielded more
/// than 16 distinct nodes (then one bit per node).
#[derive(Clone, Debug)]
pub struct FailoverCursor {
    /// The id of the ring that made it.
    ring: u64,
    /// The next point forward.
    pub(super) pos: usize,
    /// The next point backward (walks by distance, HAProxy's); Maglev's
    /// next retry attempt.
    pub(super) back: usize,
    /// The key's hash (walks by distance).
    pub(super) hash: u32,
    /// The hashes of points `pos` and `back` (walks by distance), and
    /// which of them (bit 0, bit 1) must be read again; Maglev's 64-bit
    /// key hash, top and low halves, and (`stale` 1) whether its walk has
    /// passed to slot order.
    pub(super) near: [u32; 2],
    pub(super) stale: u8,
    pub(super) steps_left: usize,
    pub(super) yielded: usize,
    /// The most distinct nodes the walk can yield: it stops there instead
    /// of walking the rest of the ring for nothing.
    pub(super) limit: usize,
    pub(super) seen: Seen,
}

impl FailoverCursor {
    /// Whether `ring` made this cursor.
    pub(super) fn is_of(&self, ring: &Ring) -> bool {
        self.ring == ring.id
    }
}

const INLINE_SEEN: usize = 16;

/// The set of nodes a walk has yielded: inline for the first few, then a
/// bitset.
#[derive(Clone, Debug, Default)]
pub(super) enum Seen {
    #[default]
    Empty,
    Inline(u8, [u32; INLINE_SEEN]),
    Bits(Vec<u64>),
}

impl Seen {
    /// Inserts `n`; returns whether it was new.
    #[inline]
    pub(super) fn insert(&mut self, n: usize, universe: usize) -> bool {
        match self {
            Seen::Empty => {
                let mut a = [0; INLINE_SEEN];
                a[0] = n as u32;
                *self = Seen::Inline(1, a);
                true
            }
            Seen::Inline(len, a) => {
                let len_us = *len as usize;
                if a[..len_us].contains(&(n as u32)) {
                    return false;
                }
                if len_us < INLINE_SEEN {
                    a[len_us] = n as u32;
                    *len += 1;
                    return true;
                }
                let mut bits = vec![0u64; universe.div_ceil(64)];
                for &m in a.iter() {
                    bits[m as usize / 64] |= 1 << (m % 64);
                }
                bits[n / 64] |= 1 << (n % 64);
                *self = Seen::Bits(bits);
                true
            }
            Seen::Bits(bits) => {
                let (w, b) = (n / 64, 1u64 << (n % 64));
                let new = bits[w] & b == 0;
                bits[w] |= b;
                new
            }
        }
    }
}

#[cfg(test)]
mod size {
    /// The size [`super::FailoverCursor`]'s docs state: keep it true.
    #[test]
    fn a_cursor_is_136_bytes() {
        assert_eq!(std::mem::size_of::<super::FailoverCursor>(), 136);
    }
}
