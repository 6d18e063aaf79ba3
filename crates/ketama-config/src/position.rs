//! Naming the TOML key at a byte offset, for error messages.

use std::collections::HashMap;

/// Names the key at a byte offset: `line N (table.key)`, the table taken
/// from the nearest header above (`[[array]]` headers counted to an index).
pub(crate) fn key_at(text: &str, offset: usize) -> String {
    let line_no = text[..offset].matches('\n').count() + 1;
    let mut table = String::new();
    let mut arrays: HashMap<String, usize> = HashMap::new();
    let mut key = None;
    for (i, line) in text.lines().enumerate().take(line_no) {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
            let n = arrays.entry(name.trim().to_string()).or_insert(0);
            table = format!("{}[{}]", name.trim(), n);
            *n += 1;
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            table = name.trim().to_string();
        } else if i + 1 == line_no {
            key = t.split_once('=').map(|(k, _)| k.trim().to_string());
        }
    }
    match (key, table.is_empty()) {
        (Some(k), false) => format!("line {line_no} ({table}.{k})"),
        (Some(k), true) => format!("line {line_no} ({k})"),
        (None, false) => format!("line {line_no} ([{table}])"),
        (None, true) => format!("line {line_no}"),
    }
}

/// For a syntax error inside an array or inline table that was never
/// closed, the offset of its opening bracket: the parser notices only
/// where the next line begins, but the user left it open where it
/// started. Skips strings and comments.
pub(crate) fn unclosed_opener(text: &str, offset: usize) -> Option<usize> {
    let b = text.as_bytes();
    let end = offset.min(b.len());
    let mut stack: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < end {
        match b[i] {
            b'#' => {
                while i < end && b[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                let triple = b[i..].starts_with(&[q, q, q]);
                i += if triple { 3 } else { 1 };
                while i < end {
                    if q == b'"' && b[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if triple && b[i..].starts_with(&[q, q, q]) {
                        i += 2;
                        break;
                    }
                    if !triple && (b[i] == q || b[i] == b'\n') {
                        break;
                    }
                    i += 1;
                }
            }
            b'[' | b'{' => stack.push(i),
            b']' | b'}' => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    stack.pop()
}
