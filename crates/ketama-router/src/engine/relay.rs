//! The second half of every backend attempt, either backend protocol:
//! a response whose head was read (an HTTP/1 backend's, over its
//! connection's buffer, or an HTTP/2 backend's stream) goes to the
//! client, head ([`answered`], [`sent`]) then body ([`body`]) through
//! the one copy loop, and what it did is written to the request's [`Record`] here,
//! once: the backend's status and cache result, the status and bytes the
//! client got, the attempt's end (one upstream observation), a gRPC
//! call's status from the head or the trailers, and a WebSocket tunnel's
//! bytes ([`tunnel`]). The first half (the request's head and body to
//! the backend, and the wait for the response's head) is each protocol's
//! own: [`super::upstream_h1`], [`super::h2::upstream`]; this imports
//! neither.

use std::time::Duration;

use super::attempt::{failed, send_failed, Attempted, Client, ClientFailure, Respond};
use super::body::Framing;
use super::copy::{copy, Copied, CopyError, Sink, Source};
use super::grpc;
use super::io::{Buffered, UpstreamIo};
use super::record::Record;
use super::response_head::ResponseView;
use super::send::SendError;
use super::Engine;
use crate::policy::{Failure, Stage};
use crate::state::RoutingState;

/// The backend's response `head` arrived: recorded (its status, cache
/// result, an HTTP/2 head's `grpc-status`); what the client's side sends
/// it with ([`Client::respond`], the connection's fate decided there).
/// `early`: it came before the request's body was all sent (neither
/// connection is kept).
pub(crate) fn answered<'a>(
    state: &'a RoutingState,
    r: &'a mut Record,
    head: &impl ResponseView,
    framing: Framing,
    early: bool,
) -> Respond<'a> {
    let n = r.backend.unwrap_or_else(|| unreachable!("chosen"));
    r.answered(state, head.status(), head.values(state.cache.header()));
    if let Some(h) = head.headers() {
        r.grpc_status = h
            .get("grpc-status")
            .and_then(|v| grpc::status_code(v.as_bytes()));
    }
    Respond {
        framing,
        early,
        ketama: r.ketama_fields(state, n),
    }
}

/// The head `status` went to the client (or did not: the attempt ends
/// with the client gone): the sink its body goes to, or how the attempt
/// ended.
pub(crate) fn sent<K>(
    e: &Engine,
    state: &RoutingState,
    r: &mut Record,
    status: u16,
    sent: Result<K, SendError>,
) -> Result<K, Attempted> {
    r.status = status;
    sent.map_err(|err| {
        r.attempt_ended(state);
        send_failed(e, err)
    })
}

/// The response's body from `src` to the client's `sink`, and what that
/// did to the record: [`Attempted::Relayed`] only when it went whole; a
/// failure of the source is the backend's.
pub(crate) async fn body<S, K>(
    e: &Engine,
    state: &RoutingState,
    r: &mut Record,
    src: &mut S,
    mut sink: K,
) -> Attempted
where
    S: Source<Error: Into<Failure>>,
    K: Sink<Error = SendError>,
{
    let copied = copy(src, &mut sink).await;
    if let Some(s) = src.grpc_status() {
        r.grpc_status = Some(s);
    }
    let (bytes, t) = match copied {
        Ok(Copied::Whole(b) | Copied::Stopped(b)) => {
            r.attempt_ended(state);
            (b, Attempted::Relayed)
        }
        Err(CopyError::Source(f, b)) => (b, failed(Stage::Answered, f.into())),
        Err(CopyError::Sink(err, b)) => {
            r.attempt_ended(state);
            (b, send_failed(e, err))
        }
    };
    r.bytes_sent = bytes;
    t
}

/// The client failed (`f`) once the request went out (it left while the
/// head was awaited, or its streamed body failed while the response
/// came): the attempt ends, observed as the backend's time so far.
pub(crate) fn client_failed(state: &RoutingState, r: &mut Record, f: ClientFailure) -> Attempted {
    r.attempt_ended(state);
    Attempted::ClientFailed(f)
}

/// After a `101` to the WebSocket upgrade the client asked for, relayed
/// whole: the client's connection and the backend's `up` joined until
/// both ends closed or nothing moved for `idle`; the bytes sent to the
/// client counted with the response's.
pub(crate) async fn tunnel<C: Client>(
    c: &mut C,
    r: &mut Record,
    up: &mut Buffered<UpstreamIo>,
    idle: Duration,
) {
    r.bytes_sent += c.tunnel(up, idle).await;
}
