//! The servers file: one server per line, as in nginx's `upstream` block.
//!
//! ```text
//! # comment
//! 10.0.0.1:443            # weight 1
//! 10.0.0.2:443 3          # weight 3
//! [2001:db8::1]:443 weight=2
//! unix:/run/cache.sock down
//! ```
//!
//! A line is `SERVER [WEIGHT] [key=value ...] [down]`. The weight defaults
//! to 1; `weight=N` is the same as a bare `N` (giving both is an error).
//! `labels=a,b,c` gives the server labels that lookups may require;
//! `name=NAME` a twemproxy server name (hashed instead of the address by
//! the `twemproxy` scheme, refused by the others); `id=N` a HAProxy server
//! id (1 to 1,048,575; placing the `haproxy` scheme's points, refused by
//! the others).
//! `#` at the start of a line or after whitespace starts a comment; blank
//! lines are ignored. An unknown key, a malformed line or a duplicate
//! server is an error naming the file and the line.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::Node;

/// Parses a servers file's text. `file` names it in error messages; it is
/// a [`Path`], so the two arguments cannot be swapped unnoticed (a file
/// name where the text belongs does not compile):
///
/// ```compile_fail
/// let nodes = ketama::parse_servers("servers.txt", "10.0.0.1:80\n");
/// ```
///
/// `O(lines)`.
///
/// ```
/// let nodes = ketama::parse_servers("a:1 2\nb:1 weight=3 down # drained soon\n", "servers.txt".as_ref())?;
/// assert_eq!(nodes[0].weight(), 2);
/// assert!(nodes[1].is_down());
/// # Ok::<(), ketama::Error>(())
/// ```
pub fn parse_servers(text: &str, file: &Path) -> Result<Vec<Node>> {
    let file = file.display().to_string();
    let file = file.as_str();
    let mut nodes = Vec::new();
    let mut lines_of: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let syntax = |reason: String| Error::Syntax {
            file: file.to_string(),
            line,
            reason,
        };
        let mut tokens = strip_comment(raw).split_whitespace();
        let Some(server) = tokens.next() else {
            continue;
        };
        let mut weight: Option<u32> = None;
        let mut down = false;
        let mut labels: Option<Vec<&str>> = None;
        let mut name: Option<&str> = None;
        let mut id: Option<u32> = None;
        for tok in tokens {
            if tok == "down" {
                if down {
                    return Err(syntax("`down` given twice".into()));
                }
                down = true;
                continue;
            }
            let (value, from_key) = match tok.split_once('=') {
                Some(("weight", v)) => (v, true),
                Some(("labels", v)) => {
                    if labels.is_some() {
                        return Err(syntax(format!("labels given twice for {server:?}: list them all in one labels=a,b,c")));
                    }
                    let list: Vec<&str> = v.split(',').collect();
                    if list.iter().any(|l| l.is_empty()) {
                        return Err(syntax(format!(
                            "empty label in {tok:?}: write labels=a,b,c with no empty names"
                        )));
                    }
                    labels = Some(list);
                    continue;
                }
                Some(("name", v)) => {
                    if name.is_some() {
                        return Err(syntax(format!("name given twice for {server:?}: give one name=NAME")));
                    }
                    if v.is_empty() {
                        return Err(syntax(format!("empty name for {server:?}: write name=NAME")));
                    }
                    name = Some(v);
                    continue;
                }
                Some(("id", v)) => {
                    if id.is_some() {
                        return Err(syntax(format!("id given twice for {server:?}: give one id=N")));
                    }
                    let max = crate::haproxy::MAX_ID;
                    id = Some(v.parse().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
                        syntax(format!(
                            "bad id {v:?} for {server:?}: expected a HAProxy server id, a whole number from 1 to {max}"
                        ))
                    })?);
                    continue;
                }
                Some((key, _)) => {
                    return Err(syntax(format!(
                        "unknown key {key:?} in {tok:?}: the known keys are weight=N, labels=a,b,c, name=NAME and id=N (and the flag `down`)"
                    )))
                }
                None => (tok, false),
            };
            if !from_key && !tok.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax(format!(
                    "unexpected {tok:?} after server {server:?}: expected a weight, key=value or `down`"
                )));
            }
            if weight.is_some() {
                return Err(syntax(format!(
                    "weight given twice for {server:?}: write either a bare number or weight=N"
                )));
            }
            weight = Some(value.parse().map_err(|_| {
                syntax(format!(
                    "bad weight {value:?} for {server:?}: expected a whole number from 0 to {}",
                    u32::MAX
                ))
            })?);
        }
        if let Some(&first_line) = lines_of.get(server) {
            return Err(Error::DuplicateServerLine {
                file: file.to_string(),
                line,
                first_line,
                server: server.to_string(),
            });
        }
        lines_of.insert(server.to_string(), line);
        let mut node = Node::new(server, weight.unwrap_or(1))
            .with_down(down)
            .with_labels(labels.unwrap_or_default());
        if let Some(name) = name {
            node = node.with_name(name);
        }
        if let Some(id) = id {
            node = node.with_id(id);
        }
        nodes.push(node);
    }
    Ok(nodes)
}

/// Cuts a line at the first `#` that starts the line or follows whitespace.
fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_servers(text, "s.txt".as_ref())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_forms() {
        let n = parse_servers(
            "# header\n\n a:1\nb#c:2 5 # trailing\n[::1]:3 weight=0\nunix:/x down\n\t\n",
            "s.txt".as_ref(),
        )
        .unwrap();
        let got: Vec<_> = n
            .iter()
            .map(|n| (n.server(), n.weight(), n.is_down()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a:1", 1, false),
                ("b#c:2", 5, false),
                ("[::1]:3", 0, false),
                ("unix:/x", 1, true)
            ]
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        assert!(err("a\nb x=1\n").starts_with("s.txt:2: unknown key \"x\""));
        assert!(err("a 1 weight=2").starts_with("s.txt:1: weight given twice"));
        assert!(err("a 1 2").starts_with("s.txt:1: weight given twice"));
        assert!(err("a -1").starts_with("s.txt:1: unexpected \"-1\""));
        assert!(err("a 4294967296").starts_with("s.txt:1: bad weight"));
        assert!(err("a weight=x").starts_with("s.txt:1: bad weight"));
        assert!(err("a foo").starts_with("s.txt:1: unexpected \"foo\""));
        assert!(err("a down down").starts_with("s.txt:1: `down` given twice"));
        assert!(err("a id=0").contains("bad id \"0\""));
        assert!(err("a id=1048576").contains("from 1 to 1048575"));
        assert!(err("a id=2 id=3").contains("id given twice"));
        let n = parse_servers("a:1 3 id=7\nb:1\n", "s.txt".as_ref()).unwrap();
        assert_eq!((n[0].id(), n[1].id()), (Some(7), None));
        assert!(err("a labels=x labels=y").starts_with("s.txt:1: labels given twice"));
        assert!(err("a labels=x,,y").starts_with("s.txt:1: empty label"));
        assert!(err("a labels=").starts_with("s.txt:1: empty label"));
        assert!(err("a name=x name=y").starts_with("s.txt:1: name given twice"));
        assert!(err("a name=").starts_with("s.txt:1: empty name"));
        let n = parse_servers("10.0.0.1:11211 2 name=cache-a", "s.txt".as_ref()).unwrap();
        assert_eq!(n[0].name(), Some("cache-a"));
        let n = parse_servers("a labels=eu,ssd,eu 2", "s.txt".as_ref()).unwrap();
        assert_eq!(n[0].labels().collect::<Vec<_>>(), ["eu", "ssd"]);
        assert_eq!(n[0].weight(), 2);
        assert_eq!(
            err("a\n\nb\na 2\n"),
            "s.txt:4: duplicate server \"a\", first defined on line 1: every server must be unique"
        );
    }
}
