//! A request the engine read, as routing and forwarding see it: its head's
//! positions over the connection's buffer.

use http::HeaderName;

use super::head::Head;
use crate::policy::route::RequestView;

/// A read request head and the buffer it lies in.
pub struct Request<'a> {
    /// The head's positions.
    pub head: &'a Head,
    /// The connection's buffer.
    pub buf: &'a [u8],
}

impl Request<'_> {
    /// The method, as sent.
    pub fn method(&self) -> &[u8] {
        self.head.method.of(self.buf)
    }

    /// Whether the method is `HEAD` (its response has no body).
    pub fn is_head(&self) -> bool {
        self.method() == b"HEAD"
    }

    /// Whether a request of this method may be sent twice (RFC 9110
    /// section 9.2.2).
    pub fn idempotent(&self) -> bool {
        matches!(
            self.method(),
            b"GET" | b"HEAD" | b"PUT" | b"DELETE" | b"OPTIONS" | b"TRACE"
        )
    }

    /// The target to write to the backend, as nginx forwards it: the
    /// target as sent for origin-form, and for absolute-form its path and
    /// query (`/` first when it had no path); with `slash`, a `/` goes
    /// before the returned bytes.
    pub fn forward_target(&self) -> (bool, &[u8]) {
        (self.head.empty_path, self.head.request_uri.of(self.buf))
    }

    /// An absolute-form target's authority: it stands for `Host`.
    pub fn authority(&self) -> Option<&[u8]> {
        self.head.authority.map(|a| a.of(self.buf))
    }

    /// The protocol as nginx's `$server_protocol` writes it.
    pub fn protocol(&self) -> &'static str {
        if self.head.http11 {
            "HTTP/1.1"
        } else {
            "HTTP/1.0"
        }
    }
}

impl RequestView for Request<'_> {
    fn request_uri(&self) -> &[u8] {
        self.head.request_uri.of(self.buf)
    }

    fn path(&self) -> &[u8] {
        if self.head.empty_path {
            return b"/";
        }
        let uri = self.request_uri();
        &uri[..uri
            .iter()
            .position(|&b| b == b'?' || b == b'#')
            .unwrap_or(uri.len())]
    }

    fn header(&self, name: &HeaderName) -> Option<&[u8]> {
        if name == http::header::HOST {
            if let Some(a) = self.authority() {
                return Some(a);
            }
        }
        self.head.header(self.buf, name.as_str().as_bytes())
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.head.authority.map(|_| self.head.target.of(self.buf))
    }
}
