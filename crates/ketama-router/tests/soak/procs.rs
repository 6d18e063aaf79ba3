//! What the processes did: resident memory and open descriptors read from
//! `/proc`, and the lines of a router's log that no injected fault
//! explains.

use std::path::Path;

/// A process's resident set (KiB) and open descriptors now.
pub fn rss_and_fds(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss, fds)
}

/// A log line with a level, its ANSI colours stripped.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The log's panics, and its ERROR lines that none of `causes` (text an
/// injected fault's line contains) explains.
pub fn unexplained_log_lines(log: &Path, causes: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(plain)
        .filter(|l| {
            l.contains("panicked")
                || (l.contains(" ERROR ") && !causes.iter().any(|c| l.contains(c.as_str())))
        })
        .collect()
}
