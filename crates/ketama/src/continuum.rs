//! The memcached world's ketama continuum, as libmemcached 1.x
//! (`MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`) and twemproxy 0.5
//! (`distribution: ketama`) build it:
//!
//! - a server's NAME is its host when its port is 11211 and `host:port`
//!   otherwise (libmemcached writes the port as a number, twemproxy as
//!   written); twemproxy uses the server's configured name instead when it
//!   has one (`name=NAME` in a servers file);
//! - a server gets `floor(pct x 160 / 4 x N) x 4` points, N being the
//!   servers in the continuum and `pct = weight / total weight`, all in
//!   single-precision float as both programs compute it (so a server's
//!   points depend on every other server's weight, not on its own alone);
//! - points come four per MD5 digest of `NAME-I` (I = 0, 1, ...), one per
//!   little-endian 32-bit word;
//! - a key goes to the first point at or after its hash, wrapping around;
//!   among equal point hashes the first server in the programs' order
//!   wins: configuration order in libmemcached (its sort compares the
//!   server index on ties), name order in twemproxy (it sorts its servers
//!   by name, shorter names first, when it loads the configuration, and
//!   its sort is glibc's stable merge sort).
//!
//! Weight 0 here means drained, as in the other schemes: the server is
//! left out of the continuum (neither N nor the total weight counts it),
//! which is what both programs do when a server is removed or, with
//! auto-ejection, ejected. (libmemcached itself turns a weight of 0 into 1;
//! twemproxy refuses it.) `down` keeps the server's points and lookups
//! skip them, as for every scheme.

use crate::error::{Error, Result};
use crate::node::Node;
use crate::Scheme;

/// The longest NAME accepted: twemproxy formats `NAME-I` into a 273-byte
/// buffer and would silently truncate longer ones.
pub(crate) const MAX_NAME: usize = 255;

/// Points per server on average, the programs' constant.
pub(crate) const POINTS_PER_SERVER: u32 = 160;

/// The bytes hashed for `node`'s points under `compat` (without `-I`).
pub(crate) fn name_of(node: &Node, compat: Scheme) -> Result<Vec<u8>> {
    let server = node.server();
    let bad = |reason: String| Error::UnusableServer {
        server: server.to_string(),
        compat,
        reason,
    };
    let name: Vec<u8> = match (compat, node.name()) {
        (Scheme::Twemproxy(_), Some(name)) => name.as_bytes().to_vec(),
        (_, Some(_)) => {
            return Err(bad(format!(
                "name= is a twemproxy server name and {compat} does not use one: remove it or use --compat twemproxy"
            )))
        }
        _ => {
            let (host, port) = split(server).map_err(bad)?;
            let twem = matches!(compat, Scheme::Twemproxy(_));
            if twem && host.starts_with('/') {
                return Err(bad(
                    "twemproxy names a unix-socket server by its configured name: give it name=NAME".into(),
                ));
            }
            match port {
                // A unix socket keeps port 0 (libmemcached adds it with
                // port 0 directly).
                Some((0, _)) if host.starts_with('/') => format!("{host}:0").into_bytes(),
                // libmemcached treats port 0 as the default port.
                None => host.as_bytes().to_vec(),
                Some((n, _)) if n == 11211 || (n == 0 && !twem) => host.as_bytes().to_vec(),
                Some((n, text)) => {
                    if twem {
                        format!("{host}:{text}").into_bytes()
                    } else {
                        format!("{host}:{n}").into_bytes()
                    }
                }
            }
        }
    };
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(bad(format!(
            "its point name is {} bytes: give a name of 1 to {MAX_NAME} bytes (twemproxy truncates longer ones)",
            name.len()
        )));
    }
    Ok(name)
}

/// A host and its port as a number and as written, if given.
type HostPort<'a> = (&'a str, Option<(u16, &'a str)>);

/// Splits a memcached server string: `host`, `host:port`, `[v6]:port`,
/// `[v6]` or a unix socket path (`/run/mc.sock`, port 0 as libmemcached
/// gives it). Returns the host and the port as a number and as written.
fn split(server: &str) -> std::result::Result<HostPort<'_>, String> {
    if server.starts_with('/') {
        return Ok((server, Some((0, "0"))));
    }
    let (host, port) = if let Some(rest) = server.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("an IPv6 address needs its closing ]: write [2001:db8::1]:11211".into());
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return Err("expected :PORT after the IPv6 address's ]".into()),
            },
        }
    } else {
        match server.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address needs brackets: write [2001:db8::1]:11211".into())
            }
            Some((h, p)) => (h, Some(p)),
            None => (server, None),
        }
    };
    if host.is_empty() {
        return Err("the host is empty: write HOST[:PORT], e.g. 10.0.0.1:11211".into());
    }
    match port {
        None => Ok((host, None)),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => Ok((host, Some((n, p)))),
            _ => Err(format!("bad port {p:?}: expected a number from 0 to 65535")),
        },
    }
}

/// Points per node (0 for weight 0), by the programs' float formula.
/// Cost: `O(N)`.
pub(crate) fn point_counts(nodes: &[Node]) -> Vec<u64> {
    let live = nodes.iter().filter(|n| n.weight() > 0).count();
    let total: u64 = nodes.iter().map(|n| n.weight() as u64).sum();
    nodes
        .iter()
        .map(|n| {
            if n.weight() == 0 {
                return 0;
            }
            // Each operation rounds to f32, as C evaluates
            // `pct * 160 / 4 * (float)live` with a float `pct`; the
            // `+ 0.0000000001` both programs add is below half an ulp of
            // any value that floors to 1 or more, so it changes nothing.
            let pct = n.weight() as f32 / total as f32;
            let v = pct * POINTS_PER_SERVER as f32 / 4.0 * live as f32;
            v.floor() as u64 * 4
        })
        .collect()
}

/// Checks the limits that only the memcached schemes have: distinct NAMEs
/// and, for twemproxy, a total weight that fits its 32-bit counter.
/// Returns each node's NAME.
pub(crate) fn validate(nodes: &[Node], compat: Scheme) -> Result<Vec<Vec<u8>>> {
    let names = nodes
        .iter()
        .map(|n| name_of(n, compat))
        .collect::<Result<Vec<_>>>()?;
    let mut seen: std::collections::HashMap<&[u8], usize> =
        std::collections::HashMap::with_capacity(nodes.len());
    for (i, name) in names.iter().enumerate() {
        if let Some(first) = seen.insert(name, i) {
            return Err(Error::DuplicateName {
                first: nodes[first].server().to_string(),
                second: nodes[i].server().to_string(),
                name: String::from_utf8_lossy(name).into_owned(),
                compat,
            });
        }
    }
    let total: u64 = nodes.iter().map(|n| n.weight() as u64).sum();
    if matches!(compat, Scheme::Twemproxy(_)) && total > u32::MAX as u64 {
        return Err(Error::TotalWeightTooLarge {
            total,
            max: u32::MAX as u64,
            compat,
        });
    }
    Ok(names)
}

/// The programs' server order for ties: configuration order for
/// libmemcached, names sorted by length then bytes for twemproxy.
pub(crate) fn tie_order(compat: Scheme, names: &[Vec<u8>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    if matches!(compat, Scheme::Twemproxy(_)) {
        order.sort_by(|&a, &b| {
            let (x, y) = (&names[a], &names[b]);
            x.len().cmp(&y.len()).then_with(|| x.cmp(y))
        });
    }
    order
}

/// Every point, packed as `hash << 32 | rank` (unsorted), for the nodes in
/// `order` (rank = position in `order`) with `counts` points each.
/// Cost: one MD5 compression per four points (more for NAMEs over 50
/// bytes), eight digests at a time; 8 bytes a point.
pub(crate) fn generate(names: &[Vec<u8>], counts: &[u64], order: &[usize]) -> Vec<u64> {
    let total: u64 = counts.iter().sum();
    let mut out = Vec::with_capacity(total as usize);
    let mut prefix = Vec::with_capacity(MAX_NAME + 1);
    for (rank, &i) in order.iter().enumerate() {
        prefix.clear();
        prefix.extend_from_slice(&names[i]);
        prefix.push(b'-');
        let digests = (counts[i] / 4) as u32;
        crate::md5::digest_run(&prefix, 0..digests, |_, d| {
            for w in d {
                out.push(crate::sort::pack(w, rank as u32));
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyHash;

    fn name(server: &str, compat: Scheme) -> String {
        String::from_utf8(name_of(&Node::new(server, 1), compat).unwrap()).unwrap()
    }

    #[test]
    fn names() {
        let lm = Scheme::Libmemcached;
        let tw = Scheme::Twemproxy(KeyHash::Md5);
        assert_eq!(name("10.0.0.1:11211", lm), "10.0.0.1");
        assert_eq!(name("10.0.0.1", lm), "10.0.0.1");
        assert_eq!(name("10.0.0.1:0", lm), "10.0.0.1");
        assert_eq!(name("cache-a:11212", lm), "cache-a:11212");
        assert_eq!(name("cache-a:011212", lm), "cache-a:11212");
        assert_eq!(name("cache-a:011212", tw), "cache-a:011212");
        assert_eq!(name("[::1]:11212", lm), "::1:11212");
        assert_eq!(name("/run/mc.sock", lm), "/run/mc.sock:0");
        let named = Node::new("10.0.0.1:11211", 1).with_name("cache-a");
        assert_eq!(name_of(&named, tw).unwrap(), b"cache-a");
        for (bad, why) in [
            ("::1:11211", "brackets"),
            ("a:b", "bad port"),
            (":11211", "host is empty"),
            ("[::1", "closing ]"),
            ("a:70000", "bad port"),
        ] {
            let e = name_of(&Node::new(bad, 1), lm).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = name_of(&named, lm).unwrap_err().to_string();
        assert!(e.contains("name= is a twemproxy server name"), "{e}");
        let e = name_of(&Node::new("/run/mc.sock", 1), tw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("name=NAME"), "{e}");
        let long = Node::new("a", 1).with_name("x".repeat(256));
        assert!(name_of(&long, tw)
            .unwrap_err()
            .to_string()
            .contains("256 bytes"));
    }

    #[test]
    fn counts_follow_the_float_formula() {
        // Equal weights: 160 each.
        let nodes: Vec<Node> = (0..5).map(|i| Node::new(format!("h{i}"), 3)).collect();
        assert_eq!(point_counts(&nodes), vec![160; 5]);
        // 1 and 2 of 3, N = 2: 1/3 x 40 x 2 = 26.67 -> 26 x 4 = 104;
        // 2/3 x 80 = 53.3 -> 53 x 4 = 212. Drained nodes count nowhere.
        let nodes = vec![Node::new("a", 1), Node::new("b", 2), Node::new("c", 0)];
        assert_eq!(point_counts(&nodes), vec![104, 212, 0]);
    }
}
