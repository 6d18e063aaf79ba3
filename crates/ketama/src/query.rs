//! A request target's query normalized for a routing key, as CDNs
//! normalize their cache keys: so that `/a?x=1&y=2` and `/a?y=2&x=1`,
//! one cached object, route to one server.
//!
//! The query is the bytes after the target's first `?` (up to a `#`,
//! kept as it is); its parameters are the `&`-separated chunks, each
//! named by its bytes before the first `=` (the whole chunk without one).
//! Nothing is decoded: `%61=1` and `a=1` are different parameters, as
//! they are to nginx's `$arg_NAME` and Varnish.
//!
//! - **filter**: [`QueryFilter::Drop`] removes the parameters with a
//!   listed name, [`QueryFilter::Keep`] keeps only those (Cloudflare's
//!   cache-key query exclude and include); names match exactly.
//! - **sort**: the remaining chunks in full bytewise order (a chunk that
//!   is a prefix of another comes first): Varnish's `std.querysort`
//!   without its comparator that stops at `=`, so that repeated names
//!   keep a deterministic order too.
//!
//! Whenever the query is rewritten, empty chunks (`a=1&&b=2`, a trailing
//! `&`) are dropped, and a query left empty drops its `?`.
//!
//! ```
//! use ketama::query::{QueryFilter, QueryRules};
//!
//! let rules = QueryRules {
//!     sort: true,
//!     filter: QueryFilter::Drop(vec![b"utm_source".to_vec().into()]),
//! };
//! let (mut out, mut scratch) = (Vec::new(), Vec::new());
//! rules.apply(b"/v/1.ts?y=2&utm_source=mail&x=1", &mut out, &mut scratch);
//! assert_eq!(out, b"/v/1.ts?x=1&y=2");
//! ```
//!
//! Cost: one pass over the target, a sort of its chunks; no allocation
//! once `out` and `scratch` have grown to the largest target seen.

/// Which parameters a normalized query keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum QueryFilter {
    /// Every parameter.
    #[default]
    All,
    /// Every parameter but those with these names.
    Drop(Vec<Box<[u8]>>),
    /// Only the parameters with these names.
    Keep(Vec<Box<[u8]>>),
}

/// How a target's query is normalized (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryRules {
    /// Sort the parameters.
    pub sort: bool,
    /// Which parameters stay.
    pub filter: QueryFilter,
}

impl QueryRules {
    /// Whether these rules leave every target as it is.
    pub fn is_identity(&self) -> bool {
        !self.sort && self.filter == QueryFilter::All
    }

    /// Whether a parameter (a whole chunk) stays.
    fn keeps(&self, chunk: &[u8]) -> bool {
        let name = chunk.split(|&b| b == b'=').next().unwrap_or(chunk);
        let listed = |names: &[Box<[u8]>]| names.iter().any(|n| **n == *name);
        match &self.filter {
            QueryFilter::All => true,
            QueryFilter::Drop(names) => !listed(names),
            QueryFilter::Keep(names) => listed(names),
        }
    }

    /// Writes `target` with its query normalized into `out` (cleared
    /// first); `scratch` holds the chunks' places meanwhile. A target
    /// without a query is copied as it is.
    pub fn apply(&self, target: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<(usize, usize)>) {
        out.clear();
        let Some(q) = target.iter().position(|&b| b == b'?') else {
            out.extend_from_slice(target);
            return;
        };
        let end = target[q..]
            .iter()
            .position(|&b| b == b'#')
            .map_or(target.len(), |i| q + i);
        scratch.clear();
        let mut start = q + 1;
        for (i, &b) in target[..end].iter().enumerate().skip(q + 1) {
            if b == b'&' {
                scratch.push((start, i));
                start = i + 1;
            }
        }
        scratch.push((start, end));
        scratch.retain(|&(a, b)| b > a && self.keeps(&target[a..b]));
        if self.sort {
            scratch.sort_unstable_by(|&(a, b), &(c, d)| target[a..b].cmp(&target[c..d]));
        }
        out.extend_from_slice(&target[..q]);
        for (i, &(a, b)) in scratch.iter().enumerate() {
            out.push(if i == 0 { b'?' } else { b'&' });
            out.extend_from_slice(&target[a..b]);
        }
        out.extend_from_slice(&target[end..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rules: &QueryRules, target: &str) -> String {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        rules.apply(target.as_bytes(), &mut out, &mut scratch);
        String::from_utf8(out).unwrap()
    }

    fn names(n: &[&str]) -> Vec<Box<[u8]>> {
        n.iter().map(|s| s.as_bytes().to_vec().into()).collect()
    }

    #[test]
    fn sorting_orders_whole_chunks_bytewise() {
        let sort = QueryRules {
            sort: true,
            ..QueryRules::default()
        };
        assert_eq!(run(&sort, "/a?y=2&x=1"), "/a?x=1&y=2");
        assert_eq!(run(&sort, "/a?x=1&y=2"), "/a?x=1&y=2");
        // A prefix first; repeated names by their values; bytes, not case.
        assert_eq!(run(&sort, "/a?ab=1&a=2&a=1&B=0"), "/a?B=0&a=1&a=2&ab=1");
        assert_eq!(run(&sort, "/a?aa&a"), "/a?a&aa");
        // Empty chunks go; an empty query drops its `?`.
        assert_eq!(run(&sort, "/a?&b=1&&a=1&"), "/a?a=1&b=1");
        assert_eq!(run(&sort, "/a?&&"), "/a");
        assert_eq!(run(&sort, "/a?"), "/a");
        assert_eq!(run(&sort, "/a"), "/a");
        // Only the first `?` starts the query; a fragment stays.
        assert_eq!(run(&sort, "/a?z=?&b=1#f&g"), "/a?b=1&z=?#f&g");
        assert_eq!(run(&sort, "http://h:1/a?b&a"), "http://h:1/a?a&b");
    }

    #[test]
    fn filters_match_names_exactly_and_undecoded() {
        let drop = QueryRules {
            sort: false,
            filter: QueryFilter::Drop(names(&["utm", "x"])),
        };
        assert_eq!(
            run(&drop, "/a?x=1&utm=2&y=3&X=4&utm_a=5"),
            "/a?y=3&X=4&utm_a=5"
        );
        assert_eq!(run(&drop, "/a?x&x=&%78=1"), "/a?%78=1");
        assert_eq!(run(&drop, "/a?x=1"), "/a");
        let keep = QueryRules {
            sort: true,
            filter: QueryFilter::Keep(names(&["v", "w"])),
        };
        assert_eq!(run(&keep, "/a?z=1&w=2&v=3&v=1"), "/a?v=1&v=3&w=2");
        assert_eq!(run(&keep, "/a?z=1"), "/a");
        let keep_none = QueryRules {
            sort: false,
            filter: QueryFilter::Keep(Vec::new()),
        };
        assert_eq!(run(&keep_none, "/a?z=1&y"), "/a");
        assert!(QueryRules::default().is_identity());
        assert!(!keep_none.is_identity());
    }

    #[test]
    fn every_permutation_of_a_query_is_one_key() {
        let sort = QueryRules {
            sort: true,
            ..QueryRules::default()
        };
        let chunks = ["a=1", "b=2", "a=0", "c", "ab=1"];
        let want = run(&sort, &format!("/p?{}", chunks.join("&")));
        let mut idx: Vec<usize> = (0..chunks.len()).collect();
        // Heap's algorithm over the 120 orders.
        let mut c = vec![0; idx.len()];
        let mut i = 0;
        let mut seen = 0;
        let check = |idx: &[usize]| {
            let q: Vec<&str> = idx.iter().map(|&k| chunks[k]).collect();
            assert_eq!(run(&sort, &format!("/p?{}", q.join("&"))), want);
        };
        check(&idx);
        seen += 1;
        while i < idx.len() {
            if c[i] < i {
                let j = if i % 2 == 0 { 0 } else { c[i] };
                idx.swap(j, i);
                check(&idx);
                seen += 1;
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
        assert_eq!(seen, 120);
    }
}
