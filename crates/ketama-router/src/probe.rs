//! One active health check of one backend ([`crate::checker`] runs them):
//! `GET path` (2xx or 3xx passes), or with `[health] grpc` gRPC's health
//! protocol
//! (`grpc.health.v1.Health/Check`, Envoy's `grpc_health_check`: the
//! answer must be `grpc-status 0` with status `SERVING`). An `h2c`
//! backend is asked in HTTP/2 with prior knowledge, a TLS backend in
//! HTTP/2 when its ALPN picks `h2`, any other in HTTP/1.1 (a gRPC check
//! always goes in HTTP/2: gRPC has no other).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::engine::io::UpstreamIo;
use crate::engine::upstream::{dial_with, TlsTo};

/// What a check asks.
#[derive(Clone, Debug)]
pub enum Ask {
    /// `GET path`: 2xx or 3xx passes.
    Get(Arc<str>),
    /// `grpc.health.v1.Health/Check` for this service (empty: the server
    /// as a whole): `SERVING` passes.
    Grpc(Arc<str>),
}

/// Where a check goes: the address, TLS (`tls`: the settings requests
/// use, so SNI, verification, CA and client certificate are the same, and
/// a backend whose certificate does not verify fails its checks), and
/// whether it speaks HTTP/2 with prior knowledge (`h2c`).
pub struct Target {
    /// The backend's address.
    pub addr: SocketAddr,
    /// Its TLS settings, for a TLS backend.
    pub tls: Option<TlsTo>,
    /// It is an `h2c` backend.
    pub h2c: bool,
    /// The `Host` (or `:authority`) sent.
    pub host: String,
}

/// One check of `to` within `timeout`: whether it passed.
pub async fn check(to: Target, ask: &Ask, timeout: Duration) -> bool {
    let attempt = async {
        let plain = to.tls.is_none();
        let io = dial_with(to.addr, to.tls).await.ok()?;
        let h2 = io.is_h2() || to.h2c || (plain && matches!(ask, Ask::Grpc(_)));
        match ask {
            Ask::Get(path) if !h2 => get(io, &to.host, path).await,
            Ask::Get(path) => ask_h2(io, plain, &to.host, Req::Get(path)).await,
            Ask::Grpc(service) => ask_h2(io, plain, &to.host, Req::Grpc(service)).await,
        }
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

/// Sends `GET path` in HTTP/1.1 on `s`; whether the status passes.
async fn get<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, host: &str, path: &str) -> Option<bool> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ketama-router-health\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 12 {
        let n = s.read(&mut buf[got..]).await.ok()?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let line = std::str::from_utf8(&buf[..got]).ok()?;
    let code: u16 = line.get(9..12)?.parse().ok()?;
    Some((200..400).contains(&code))
}

/// A check's request in HTTP/2.
enum Req<'a> {
    Get(&'a str),
    Grpc(&'a str),
}

/// The `HealthCheckRequest` message for `service`, framed as gRPC frames
/// a message: a zero compression flag, its length (4 bytes, big-endian),
/// then the protobuf (field 1, `service`, a string; nothing for "").
fn health_request(service: &str) -> Vec<u8> {
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a);
        let mut n = service.len();
        while n >= 0x80 {
            msg.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        msg.push(n as u8);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    out
}

/// Whether a `HealthCheckResponse` (gRPC-framed) says `SERVING`: field 1,
/// a varint, equal to 1.
fn serving(body: &[u8]) -> bool {
    let Some((&[0, a, b, c, d], msg)) = body.split_first_chunk::<5>() else {
        return false;
    };
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    let Some(mut msg) = msg.get(..len) else {
        return false;
    };
    // Field 1 (`status`) as a varint; other fields skipped as protobuf
    // says (varints and length-delimited ones are all a response has).
    let mut status = None;
    while let Some((&tag, rest)) = msg.split_first() {
        let (value, rest) = match varint(rest) {
            Some(v) => v,
            None => return false,
        };
        msg = match tag & 7 {
            0 => {
                if tag >> 3 == 1 {
                    status = Some(value);
                }
                rest
            }
            2 => match rest.get(value as usize..) {
                Some(r) => r,
                None => return false,
            },
            _ => return false,
        };
    }
    status == Some(1)
}

/// A protobuf varint at the front of `b`, and what follows it.
fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

/// The check's request in HTTP/2 over `io`; whether the answer passes.
async fn ask_h2(io: UpstreamIo, plain: bool, host: &str, req: Req<'_>) -> Option<bool> {
    let (mut send, conn) = h2::client::handshake(io).await.ok()?;
    let driver = tokio::spawn(conn);
    let scheme = if plain { "http" } else { "https" };
    let answer = async {
        match req {
            Req::Get(path) => {
                let req = http::Request::get(format!("{scheme}://{host}{path}"))
                    .header("user-agent", "ketama-router-health")
                    .body(())
                    .ok()?;
                let (resp, _) = send.send_request(req, true).ok()?;
                let resp = resp.await.ok()?;
                Some((200..400).contains(&resp.status().as_u16()))
            }
            Req::Grpc(service) => {
                let req =
                    http::Request::post(format!("{scheme}://{host}/grpc.health.v1.Health/Check"))
                        .header("content-type", "application/grpc")
                        .header("te", "trailers")
                        .header("user-agent", "ketama-router-health")
                        .body(())
                        .ok()?;
                let (resp, mut body) = send.send_request(req, false).ok()?;
                body.send_data(Bytes::from(health_request(service)), true)
                    .ok()?;
                let resp = resp.await.ok()?;
                if resp.status() != http::StatusCode::OK {
                    return Some(false);
                }
                let (parts, mut recv) = resp.into_parts();
                let mut msg = Vec::new();
                while let Some(d) = recv.data().await {
                    let d = d.ok()?;
                    let _ = recv.flow_control().release_capacity(d.len());
                    msg.extend_from_slice(&d);
                    if msg.len() > 64 << 10 {
                        return Some(false);
                    }
                }
                // Trailers-only answers carry the status in the head.
                let trailers = recv.trailers().await.ok()?;
                let status = trailers
                    .as_ref()
                    .and_then(|t| t.get("grpc-status"))
                    .or_else(|| parts.headers.get("grpc-status"));
                Some(status.is_some_and(|s| s == "0") && serving(&msg))
            }
        }
    }
    .await;
    driver.abort();
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_health_messages() {
        assert_eq!(health_request(""), [0, 0, 0, 0, 0]);
        assert_eq!(
            health_request("svc"),
            [0, 0, 0, 0, 5, 0x0a, 3, b's', b'v', b'c']
        );
        assert!(serving(&[0, 0, 0, 0, 2, 0x08, 1]));
        for not in [
            &[0, 0, 0, 0, 2, 0x08, 2][..],
            &[0, 0, 0, 0, 0],
            &[0, 0, 0, 0, 2, 0x08],
            &[1, 0, 0, 0, 2, 0x08, 1],
            &[],
            &[0, 0, 0, 0, 9, 0x08, 1],
        ] {
            assert!(!serving(not), "{not:?}");
        }
        // An unknown length-delimited field is passed over.
        assert!(serving(&[0, 0, 0, 0, 5, 0x12, 1, b'x', 0x08, 1]));
    }
}
