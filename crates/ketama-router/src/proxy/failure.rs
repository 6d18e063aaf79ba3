//! Pingora's errors in the router's terms: each failed attempt becomes a
//! [`policy::Attempt`](crate::policy::Attempt), and the policy decides what
//! it costs the backend and whether the request goes on.

use pingora::{Error, ErrorSource, ErrorType, RetryType};

use super::{Ctx, Router};
use crate::policy::{self, Attempt, Failure, RetryFacts, Stage};

/// What went wrong, from Pingora's error type and retry hint.
fn failure(e: &Error, stage: Stage) -> Failure {
    use ErrorType::*;
    match (stage, e.etype()) {
        (Stage::Connect, ConnectTimedout) => Failure::ConnectTimeout,
        (Stage::Connect, _) => Failure::Connect,
        (_, ReadTimedout | WriteTimedout) => Failure::Timeout,
        (_, InvalidHTTPHeader | InvalidH2 | H1Error) => Failure::BadResponse,
        // Pingora marks a connection closed or reset before a byte of the
        // response "retry if reused"; one it would retry anyway is the same
        // kind of failure.
        _ if matches!(e.retry, RetryType::ReusedOnly | RetryType::Decided(true)) => Failure::Broken,
        _ => Failure::Other,
    }
}

impl Router {
    /// The retry facts of the request in `ctx`.
    fn facts(
        &self,
        ctx: &Ctx,
        idempotent: bool,
        body_replayable: bool,
        reused: bool,
    ) -> RetryFacts {
        RetryFacts {
            idempotent,
            body_replayable,
            reused,
            attempts: ctx.attempts(),
            retries: ctx
                .state
                .as_ref()
                .map_or(0, |s| s.validated.config.server.retries),
        }
    }

    /// A connect failure: blamed on the backend, the next one within
    /// `retries`.
    pub(super) fn connect_failed(&self, ctx: &Ctx, mut e: Box<Error>) -> Box<Error> {
        let attempt = Attempt {
            stage: Stage::Connect,
            failure: failure(&e, Stage::Connect),
        };
        self.attempt_failed(ctx, attempt, &e);
        let retry = policy::retry(attempt, self.facts(ctx, true, true, false));
        e.set_retry(retry);
        e
    }

    /// A failure once connected, on either side. A backend's is judged by
    /// the policy (blamed only before its response head); a client's
    /// never reaches the backend's accounting and is never retried.
    pub(super) fn exchange_failed(
        &self,
        ctx: &mut Ctx,
        mut e: Box<Error>,
        idempotent: bool,
        body_replayable: bool,
        reused: bool,
    ) -> Box<Error> {
        if *e.esource() != ErrorSource::Upstream {
            e.set_retry(false);
            return e;
        }
        self.attempt_ended(ctx);
        let stage = if ctx.upstream_status.is_some() {
            Stage::Answered
        } else {
            Stage::AwaitingHead
        };
        let attempt = Attempt {
            stage,
            failure: failure(&e, stage),
        };
        self.attempt_failed(ctx, attempt, &e);
        let facts = self.facts(ctx, idempotent, body_replayable, reused);
        e.set_retry(policy::retry(attempt, facts));
        e
    }

    /// Counts a failed attempt where the policy says: against the backend,
    /// or, after its head arrived, in `ketama_upstream_errors_total`.
    fn attempt_failed(&self, ctx: &Ctx, attempt: Attempt, e: &Error) {
        let (Some(state), Some(n)) = (&ctx.state, ctx.backend) else {
            return;
        };
        let b = &state.backends[n];
        if let Some(reason) = attempt.after_head_reason() {
            self.metrics.upstream_error(reason);
            tracing::debug!(backend = b.server.as_str(), error = %e, reason, "exchange broken after the response head");
            return;
        }
        policy::record_failure(b, attempt, e);
    }
}
