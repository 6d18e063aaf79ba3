//! Pingora's request as the router's routing reads it: a
//! [`RequestView`] of its header, with the target as its client sent it
//! when Pingora's header holds another (see [`crate::reqline`]).

use http::HeaderName;
use pingora::http::RequestHeader;

use crate::policy::route::RequestView;

/// A request as Pingora parsed it, with the target as its client sent it
/// when Pingora's header holds another (see [`crate::reqline`]).
pub struct PingoraRequest<'a> {
    /// Pingora's header.
    pub req: &'a RequestHeader,
    /// The target as sent, when it differs.
    pub sent: Option<&'a crate::reqline::Sent>,
}

impl RequestView for PingoraRequest<'_> {
    fn request_uri(&self) -> &[u8] {
        match self.sent {
            Some(s) => &s.request_uri[..],
            None => self
                .req
                .uri
                .path_and_query()
                .map_or(self.req.uri.path(), |pq| pq.as_str())
                .as_bytes(),
        }
    }

    fn path(&self) -> &[u8] {
        match self.sent {
            Some(s) => {
                let f = &s.forward[..];
                &f[..f
                    .iter()
                    .position(|&b| b == b'?' || b == b'#')
                    .unwrap_or(f.len())]
            }
            None => self.req.uri.path().as_bytes(),
        }
    }

    fn header(&self, name: &HeaderName) -> Option<&[u8]> {
        self.req.headers.get(name).map(|v| v.as_bytes())
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.sent.and_then(|s| s.absolute.as_deref())
    }

    fn scheme_authority(&self) -> Option<(&str, &str)> {
        let uri = &self.req.uri;
        Some((uri.scheme_str()?, uri.authority()?.as_str()))
    }

    fn uri_host(&self) -> Option<&[u8]> {
        self.req.uri.host().map(str::as_bytes)
    }
}
