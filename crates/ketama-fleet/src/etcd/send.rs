//! One request, from endpoint to endpoint: the client's failover.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::{Client, EtcdError, Result};

impl Client {
    /// Sends one request, trying each endpoint from the last good one; a
    /// rejected token is renewed once.
    pub(super) fn send<T>(
        &self,
        what: &'static str,
        mut call: impl FnMut(&str, Option<&str>) -> std::result::Result<T, EtcdError>,
    ) -> Result<T> {
        let n = self.endpoints.len().max(1);
        let started = std::time::Instant::now();
        let mut last = String::from("no endpoints configured");
        // A member that answers 5xx is up but cannot serve now (a leader
        // election, a lost quorum): the next one may; once every one has
        // said so, the pass is tried again while the request's patience
        // lasts, so a write made as the leader dies lands on the new one.
        let mut pause = Duration::from_millis(50);
        loop {
            let mut busy = false;
            let first = self.current.load(Relaxed);
            for k in 0..n {
                let i = (first + k) % n;
                let Some(base) = self.endpoints.get(i) else {
                    break;
                };
                let mut renewed = false;
                loop {
                    let token = match self.authenticate(base) {
                        Ok(t) => t,
                        Err(EtcdError::Unreachable { reason, .. }) => {
                            last = reason;
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    match call(base, token.as_deref()) {
                        Ok(v) => {
                            self.current.store(i, Relaxed);
                            return Ok(v);
                        }
                        Err(EtcdError::Unreachable { reason, .. }) => {
                            last = reason;
                            break;
                        }
                        Err(EtcdError::Status { status, body, .. })
                            if (500..600).contains(&status) =>
                        {
                            last = format!(
                                "{base}: answered {status}{} (electing a leader, or no quorum)",
                                if body.is_empty() {
                                    String::new()
                                } else {
                                    format!(" {body}")
                                }
                            );
                            busy = true;
                            break;
                        }
                        Err(EtcdError::Status { status, body, .. })
                            if !renewed
                                && self.credentials.is_some()
                                && (status == 401 || body.contains("invalid auth token")) =>
                        {
                            *self.token.lock().unwrap_or_else(|e| e.into_inner()) = None;
                            renewed = true;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            if !busy || started.elapsed() + pause > self.patience {
                break;
            }
            std::thread::sleep(pause);
            pause *= 2;
        }
        let _ = what;
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints(),
            reason: last,
        })
    }
}

/// A transport error as `BASE: what failed` (ureq's own text repeats the
/// whole URL).
pub(super) fn transport(base: &str, e: &ureq::Error) -> String {
    match e {
        ureq::Error::Transport(t) => {
            let mut out = format!("{base}: {}", t.kind());
            if let Some(m) = t.message() {
                out.push_str(&format!(": {m}"));
            }
            if let Some(src) = std::error::Error::source(t) {
                out.push_str(&format!(": {src}"));
            }
            out
        }
        ureq::Error::Status(code, _) => format!("{base}: answered {code}"),
    }
}
