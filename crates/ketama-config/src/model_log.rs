//! `[access_log]`: one line per request, local to each router like
//! `[server]` (a fleet's shared config never names a router's files).

use serde::Deserialize;

/// How an access log line is written.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (the fields are in the router guide).
    #[default]
    Json,
    /// nginx's `combined` format with the backend appended, quoted.
    Combined,
}

/// `[access_log]`: where and how requests are logged (absent: no log).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessLogSection {
    /// A file, appended to (created if missing), or `"-"` for standard
    /// output. SIGUSR1 reopens it; a reload may change it.
    pub path: String,
    /// `json` (default) or `combined`.
    #[serde(default)]
    pub format: LogFormat,
    /// Lines waiting for the writer, at most; past it lines are dropped
    /// and counted, never waited for.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: usize,
    /// How often the writer writes what is waiting (it writes sooner
    /// when the buffer is half full).
    #[serde(default = "default_flush_ms")]
    pub flush_ms: u64,
}

fn default_buffer_bytes() -> usize {
    64 << 10
}

fn default_flush_ms() -> u64 {
    1000
}
