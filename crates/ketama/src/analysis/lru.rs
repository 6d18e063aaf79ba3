//! A least-recently-used cache of 64-bit key hashes for the migration
//! cache simulation, sized in units (objects or bytes).
//!
//! Layout: a hash map from key to slot (16 bytes an entry, about 19 with
//! its control byte at the map's load factor) and, per slot, the key, its size and the
//! two list links as parallel vectors (24 bytes); freed slots are reused.
//! `get` (promoting), `peek` (not) and `insert` (evicting from the tail
//! until the new entry fits) are O(1) but for the map's probe.

use std::collections::HashMap;

/// A least-recently-used cache of key hashes, sized in units.
#[derive(Clone)]
pub(crate) struct Lru {
    map: HashMap<u64, u32>,
    key: Vec<u64>,
    size: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    used: u64,
    cap: u64,
}

const NIL: u32 = u32::MAX;

impl Lru {
    pub(crate) fn new(cap: u64) -> Lru {
        Lru {
            map: HashMap::new(),
            key: Vec::new(),
            size: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            cap,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head = n
        } else {
            self.next[p as usize] = n
        }
        if n == NIL {
            self.tail = p
        } else {
            self.prev[n as usize] = p
        }
    }

    fn push_front(&mut self, i: u32) {
        self.prev[i as usize] = NIL;
        self.next[i as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Whether `k` is cached (promoted when it is).
    pub(crate) fn get(&mut self, k: u64) -> bool {
        match self.map.get(&k) {
            Some(&i) => {
                self.unlink(i);
                self.push_front(i);
                true
            }
            None => false,
        }
    }

    pub(crate) fn peek(&self, k: u64) -> bool {
        self.map.contains_key(&k)
    }

    pub(crate) fn insert(&mut self, k: u64, size: u64) {
        if size > self.cap {
            return;
        }
        while self.used + size > self.cap && self.tail != NIL {
            let t = self.tail;
            self.unlink(t);
            self.map.remove(&self.key[t as usize]);
            self.used -= self.size[t as usize];
            self.free.push(t);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.key[i as usize] = k;
                self.size[i as usize] = size;
                i
            }
            None => {
                self.key.push(k);
                self.size.push(size);
                self.prev.push(NIL);
                self.next.push(NIL);
                (self.key.len() - 1) as u32
            }
        };
        self.push_front(i);
        self.map.insert(k, i);
        self.used += size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_used_and_peek_does_not_promote() {
        let mut c = Lru::new(2);
        c.insert(1, 1);
        c.insert(2, 1);
        assert!(c.get(1));
        assert!(c.peek(2));
        c.insert(3, 1); // evicts 2: 1 was used last, a peek is no use
        assert!(!c.peek(2) && c.peek(1) && c.peek(3));
    }
}
