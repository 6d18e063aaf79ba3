//! What the router decides about an attempt at a backend, in its own
//! types, for HTTP/1 and HTTP/2 alike (the engine's attempts ask it):
//! whose fault a failure was, whether it counts against
//! the backend's health, and whether the request goes on to the next
//! backend.
//!
//! **Only the backend's own failures count against it**, by nginx's rule
//! (`ngx_http_upstream_next`): a failure counts toward `max_fails` while
//! the router connects, sends the request or waits for the response head.
//! Once the head has arrived, a broken or timed-out exchange ends that
//! request and is counted in `ketama_upstream_errors_total{reason}`, but
//! the backend stays in rotation: a client that stops reading stalls the
//! router's reads from the backend, and the backend giving up on that is
//! not the backend failing. Without the rule, one client per backend,
//! sending one request each and reading nothing, could take every
//! backend out of rotation.
//!
//! | stage of the attempt | failure | counts against the backend | next backend |
//! |---|---|---|---|
//! | connecting | refused, timed out, TLS | yes | within `retries` |
//! | request sent, no response byte yet | connection closed or reset | yes | idempotent requests: always on a reused connection (a stale keep-alive), within `retries` on a fresh one |
//! | waiting for the head | timed out, bad head | yes | no (a stall is a 504) |
//! | HTTP/2 stream refused (`REFUSED_STREAM`, or past a `GOAWAY`'s last stream) | nothing was processed | no | any method, within `retries`, when its body is still held |
//! | head arrived | anything | no: `ketama_upstream_errors_total` | never (the client has part of the answer) |
//!
//! A request whose body cannot be sent again (not idempotent, or more
//! body than the retry buffer kept) never goes to a second backend.

use crate::state::Backend;

pub mod end;
pub mod route;

/// How far an attempt at a backend got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Connecting (TCP and, for a TLS backend, the handshake).
    Connect,
    /// Connected: sending the request or waiting for the response head.
    AwaitingHead,
    /// Waiting for the client's next request body bytes, with all it sent
    /// so far passed on: a backend that closes now gave up on a slow
    /// upload.
    Upload,
    /// The response head arrived: the backend answered.
    Answered,
}

/// What went wrong with an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be made (refused, unreachable, TLS).
    Connect,
    /// The connection was not made in time.
    ConnectTimeout,
    /// The connection closed or was reset before a byte of the response.
    Broken,
    /// The backend did not answer, or take the request, in time.
    Timeout,
    /// The response was not valid HTTP (head or body framing).
    BadResponse,
    /// An HTTP/2 backend refused the stream (`REFUSED_STREAM`) or its
    /// `GOAWAY` said it never processed it: nothing of the request was
    /// acted on, so it may go elsewhere whatever its method, and the
    /// backend is not blamed (it is draining or at its limit).
    Refused,
    /// Anything else on the backend's side of the exchange.
    Other,
}

impl Failure {
    /// The status the router answers with when this failure ends a
    /// request before any response reached the client: 504 for a timeout,
    /// 502 otherwise.
    pub fn status(self) -> u16 {
        match self {
            Failure::ConnectTimeout | Failure::Timeout => 504,
            _ => 502,
        }
    }
}

/// A failed attempt: where it was and what went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// How far it got.
    pub stage: Stage,
    /// What went wrong.
    pub failure: Failure,
}

impl Attempt {
    /// Whether the failure counts against the backend (passive health,
    /// `ketama_requests_total{status="error"}`, the `backend failed` log
    /// line): only before its response head arrived.
    pub fn blames_backend(&self) -> bool {
        matches!(self.stage, Stage::Connect | Stage::AwaitingHead)
            && self.failure != Failure::Refused
    }

    /// The `reason` of `ketama_upstream_errors_total` for a failure after
    /// the head arrived; `None` for one that blames the backend.
    pub fn after_head_reason(&self) -> Option<&'static str> {
        if matches!(self.stage, Stage::Connect | Stage::AwaitingHead) {
            return None;
        }
        if self.stage == Stage::Upload {
            return Some("closed_during_upload");
        }
        Some(match self.failure {
            Failure::Timeout => "timeout_after_head",
            Failure::BadResponse => "bad_body",
            Failure::Broken
            | Failure::Connect
            | Failure::ConnectTimeout
            | Failure::Refused
            | Failure::Other => "closed_after_head",
        })
    }
}

/// What the retry rule needs to know of the request and the connection.
#[derive(Clone, Copy, Debug)]
pub struct RetryFacts {
    /// Whether the request may be sent twice (GET, HEAD, PUT, DELETE, ...).
    pub idempotent: bool,
    /// Whether all of its body sent so far is still held to send again.
    pub body_replayable: bool,
    /// Whether the attempt used a pooled (kept-alive) connection.
    pub reused: bool,
    /// Attempts made so far, this one included.
    pub attempts: usize,
    /// `[server] retries`.
    pub retries: usize,
}

/// Whether the request goes on to the next backend after `attempt` failed
/// (see the module docs' table).
pub fn retry(attempt: Attempt, f: RetryFacts) -> bool {
    let within = f.attempts <= f.retries;
    match (attempt.stage, attempt.failure) {
        (Stage::Answered | Stage::Upload, _) => false,
        // Nothing was sent, or nothing of it acted on: any request may
        // go elsewhere.
        (Stage::Connect, _) => within,
        (_, Failure::Refused) => f.body_replayable && within,
        _ if !f.idempotent || !f.body_replayable => false,
        // A kept-alive connection the backend closed as it was reused
        // says nothing of the backend; a fresh one closed or reset is a
        // backend dying with connections in its accept queue (nginx's
        // `proxy_next_upstream error`).
        (_, Failure::Broken) => f.reused || within,
        _ => false,
    }
}

/// Records a failed attempt against `backend` when the rule blames it:
/// its passive health (`max_fails` within `fail_timeout`) and a log line
/// (the first failure, then at most one per 10 s with the count not
/// logged). Returns whether it was blamed.
pub fn record_failure(backend: &Backend, attempt: Attempt, error: &dyn std::fmt::Display) -> bool {
    if !attempt.blames_backend() {
        return false;
    }
    let limits = &backend.limits;
    let out = backend
        .health
        .record_failure(limits.max_fails, limits.fail_timeout);
    if let Some(unlogged) = backend.health.should_log() {
        tracing::warn!(
            backend = backend.server.as_str(),
            error = %error,
            unlogged_since_last = unlogged,
            out_of_rotation_ms = if out { limits.fail_timeout.as_millis() as u64 } else { 0 },
            "backend failed"
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(idempotent: bool, reused: bool, attempts: usize) -> RetryFacts {
        RetryFacts {
            idempotent,
            body_replayable: true,
            reused,
            attempts,
            retries: 2,
        }
    }

    #[test]
    fn only_failures_before_the_head_blame_the_backend() {
        for failure in [
            Failure::Connect,
            Failure::Broken,
            Failure::Timeout,
            Failure::BadResponse,
            Failure::Other,
        ] {
            for stage in [Stage::Connect, Stage::AwaitingHead] {
                let a = Attempt { stage, failure };
                assert!(a.blames_backend(), "{a:?}");
                assert_eq!(a.after_head_reason(), None);
            }
            let a = Attempt {
                stage: Stage::Answered,
                failure,
            };
            assert!(!a.blames_backend(), "{a:?}");
            assert!(a.after_head_reason().is_some());
        }
    }

    #[test]
    fn the_retry_rule() {
        let at = |stage, failure| Attempt { stage, failure };
        let connect = at(Stage::Connect, Failure::Connect);
        // A connect failure: any method, within retries.
        assert!(retry(connect, facts(false, false, 1)));
        assert!(retry(connect, facts(true, false, 2)));
        assert!(!retry(connect, facts(true, false, 3)));
        let broken = at(Stage::AwaitingHead, Failure::Broken);
        assert!(retry(broken, facts(true, true, 9)), "stale keep-alive");
        assert!(retry(broken, facts(true, false, 2)));
        assert!(!retry(broken, facts(true, false, 3)));
        assert!(
            !retry(broken, facts(false, true, 1)),
            "a POST is never sent twice"
        );
        let mut f = facts(true, true, 1);
        f.body_replayable = false;
        assert!(!retry(broken, f));
        assert!(!retry(
            at(Stage::AwaitingHead, Failure::Timeout),
            facts(true, true, 1)
        ));
        for failure in [Failure::Broken, Failure::Timeout, Failure::Connect] {
            assert!(!retry(at(Stage::Answered, failure), facts(true, true, 1)));
        }
    }
}
