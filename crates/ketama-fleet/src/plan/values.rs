//! What a plan's text is read with, by its spec and its metric guards
//! alike: the error that names the line, and durations with their unit.

use std::time::Duration;

/// A plan's error: the line (1-based; 0 when it is the whole plan) and
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct PlanError {
    /// The plan's file name, as given.
    pub file: String,
    /// The line at fault.
    pub line: usize,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// `"30s"`, `"2m"`, `"1h"`, `"500ms"`: a duration with its unit.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let at = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{s:?} has no unit: write 30s, 10m, 1h or 500ms"))?;
    let (n, unit) = s.split_at(at);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a number with a unit (30s, 10m, 1h, 500ms)"))?;
    let ms = match unit.trim() {
        "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        u => return Err(format!("{u:?} is not a unit: use ms, s, m or h")),
    };
    Ok(Duration::from_millis(ms))
}
