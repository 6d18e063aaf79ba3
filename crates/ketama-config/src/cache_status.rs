//! What a backend's response says about its cache: one [`CacheResult`]
//! per response, read from the header `[cache_status]` names.
//!
//! - `Cache-Status` (the default) is parsed as RFC 9211 says: an RFC 8941
//!   structured list, one member per cache the response passed, the cache
//!   nearest the router last. That last member is the backend's: `hit` (a
//!   boolean parameter: `hit=?0` is not a hit) is a hit, `fwd=stale` is
//!   [`CacheResult::Stale`] (the cache went to the origin to revalidate),
//!   `fwd=bypass` is [`CacheResult::Bypass`], any other `fwd` a miss, and
//!   neither [`CacheResult::Other`]. A value that is not a valid list is
//!   `Other` too (RFC 8941: a field that fails to parse is ignored whole).
//! - Any other header (`X-Cache`, nginx's `$upstream_cache_status` sent as
//!   a header, `CF-Cache-Status`) is read as a comma-separated list whose
//!   last value is matched, ignoring case, against the `hit`, `miss` and
//!   `bypass` lists (nginx's `STALE` and `UPDATING` are answers from the
//!   cache; `EXPIRED` and `REVALIDATED` went to the origin).
//!
//! No such header is [`CacheResult::None`]. Origin contacts are `miss`,
//! `stale` and `bypass` ([`CacheResult::contacted_origin`]).
//!
//! ```
//! use ketama_config::cache_status::{CacheResult, CacheRules};
//!
//! let rfc = CacheRules::default(); // Cache-Status
//! let hit = rfc.classify([&b"OriginCache; fwd=uri-miss, ExampleCache; hit"[..]]);
//! assert_eq!(hit, CacheResult::Hit);
//! assert_eq!(rfc.classify([&b"ExampleCache; hit=?0; fwd=uri-miss"[..]]), CacheResult::Miss);
//!
//! let x_cache = CacheRules::new("x-cache", &["HIT"], &["MISS", "EXPIRED"], &["BYPASS"]);
//! assert_eq!(x_cache.classify([&b"MISS, hit"[..]]), CacheResult::Hit);
//! assert_eq!(x_cache.classify(std::iter::empty::<&[u8]>()), CacheResult::None);
//! ```
//!
//! Cost: one pass over the header's bytes, no allocation.

/// How many results there are (counters are arrays of this length).
pub const RESULTS: usize = 7;

/// What one response says about the backend's cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheResult {
    /// Served from the backend's cache.
    Hit,
    /// The cache fetched it from the origin.
    Miss,
    /// The cache revalidated a stale entry with the origin.
    Stale,
    /// The cache did not take part (it sent the request on unchanged).
    Bypass,
    /// The backend's cache did not have it, but a cache on the way did
    /// (an earlier `Cache-Status` member is a hit: a peer, such as the
    /// key's previous owner): not an origin fetch.
    Peer,
    /// The header said something else (or could not be read).
    Other,
    /// No such header.
    None,
}

impl CacheResult {
    /// Every result, in the order counters index them.
    pub const ALL: [CacheResult; RESULTS] = [
        CacheResult::Hit,
        CacheResult::Miss,
        CacheResult::Stale,
        CacheResult::Bypass,
        CacheResult::Peer,
        CacheResult::Other,
        CacheResult::None,
    ];

    /// Its name in metrics, `/status` and the access log.
    pub fn name(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Miss => "miss",
            CacheResult::Stale => "stale",
            CacheResult::Bypass => "bypass",
            CacheResult::Peer => "peer",
            CacheResult::Other => "other",
            CacheResult::None => "none",
        }
    }

    /// Its index in [`CacheResult::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the response cost the origin a request: `miss`, `stale`
    /// and `bypass`.
    pub fn contacted_origin(self) -> bool {
        matches!(
            self,
            CacheResult::Miss | CacheResult::Stale | CacheResult::Bypass
        )
    }
}

/// How responses are read for their cache result: the header and, for a
/// header other than `Cache-Status`, the values that mean hit, miss and
/// bypass (kept in upper case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheRules {
    header: String,
    hit: Vec<String>,
    miss: Vec<String>,
    bypass: Vec<String>,
}

impl Default for CacheRules {
    /// `Cache-Status` (RFC 9211), with nginx's `$upstream_cache_status`
    /// values for the lists.
    fn default() -> Self {
        CacheRules::new(
            "cache-status",
            &["HIT", "STALE", "UPDATING"],
            &["MISS", "EXPIRED", "REVALIDATED"],
            &["BYPASS"],
        )
    }
}

impl CacheRules {
    /// Rules for `header` (any case) with these value lists.
    pub fn new<S: AsRef<str>>(header: &str, hit: &[S], miss: &[S], bypass: &[S]) -> CacheRules {
        let upper = |l: &[S]| {
            l.iter()
                .map(|s| s.as_ref().trim().to_ascii_uppercase())
                .collect()
        };
        CacheRules {
            header: header.to_ascii_lowercase(),
            hit: upper(hit),
            miss: upper(miss),
            bypass: upper(bypass),
        }
    }

    /// The header read, in lower case.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// The result of a response whose `header` field lines are `lines`,
    /// in the order received (none: [`CacheResult::None`]).
    pub fn classify<'a>(&self, lines: impl IntoIterator<Item = &'a [u8]>) -> CacheResult {
        let mut lines = lines.into_iter().peekable();
        if lines.peek().is_none() {
            return CacheResult::None;
        }
        if self.header == "cache-status" {
            return rfc9211(lines);
        }
        // The last comma-separated value of the last line that has one.
        let mut last: Option<&[u8]> = None;
        for line in lines {
            if let Some(v) = line
                .rsplit(|&b| b == b',')
                .map(trim)
                .find(|v| !v.is_empty())
            {
                last = Some(v);
            }
        }
        let Some(v) = last else {
            return CacheResult::Other;
        };
        let is = |list: &[String]| list.iter().any(|s| s.as_bytes().eq_ignore_ascii_case(v));
        if is(&self.hit) {
            CacheResult::Hit
        } else if is(&self.miss) {
            CacheResult::Miss
        } else if is(&self.bypass) {
            CacheResult::Bypass
        } else {
            CacheResult::Other
        }
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !b.is_ascii_whitespace());
    let end = v.iter().rposition(|b| !b.is_ascii_whitespace());
    match (start, end) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    }
}

/// What one `Cache-Status` member says.
#[derive(Clone, Copy, Debug, Default)]
struct Member {
    hit: bool,
    fwd: Option<Fwd>,
}

#[derive(Clone, Copy, Debug)]
enum Fwd {
    Stale,
    Bypass,
    Other,
}

fn rfc9211<'a>(lines: impl Iterator<Item = &'a [u8]>) -> CacheResult {
    let (mut last, mut earlier_hit) = (None, false);
    for line in lines {
        match parse_list(line) {
            Ok(Some((m, before))) => {
                earlier_hit |= before || last.is_some_and(|l: Member| l.hit);
                last = Some(m);
            }
            Ok(None) => {}
            Err(()) => return CacheResult::Other,
        }
    }
    match last {
        Some(Member { hit: true, .. }) => CacheResult::Hit,
        Some(_) if earlier_hit => CacheResult::Peer,
        Some(Member { fwd: Some(f), .. }) => match f {
            Fwd::Stale => CacheResult::Stale,
            Fwd::Bypass => CacheResult::Bypass,
            Fwd::Other => CacheResult::Miss,
        },
        _ => CacheResult::Other,
    }
}

/// An RFC 8941 list reader over one field line.
struct Reader<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip(&mut self, pred: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&pred) {
            self.at += 1;
        }
    }

    fn take(&mut self, pred: impl Fn(u8) -> bool) -> &'a [u8] {
        let start = self.at;
        self.skip(pred);
        &self.s[start..self.at]
    }
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b)
}

/// The line's last member and whether a member before it was a hit;
/// `None` for an empty line; `Err` when it is not a valid list.
fn parse_list(line: &[u8]) -> Result<Option<(Member, bool)>, ()> {
    let mut r = Reader { s: line, at: 0 };
    r.skip(|b| b == b' ');
    let mut last: Option<Member> = None;
    let mut earlier_hit = false;
    while r.peek().is_some() {
        earlier_hit |= last.is_some_and(|m| m.hit);
        last = Some(parse_member(&mut r)?);
        r.skip(is_ows);
        match r.peek() {
            None => break,
            Some(b',') => {
                r.at += 1;
                r.skip(is_ows);
                if r.peek().is_none() {
                    return Err(()); // a trailing comma
                }
            }
            Some(_) => return Err(()),
        }
    }
    Ok(last.map(|m| (m, earlier_hit)))
}

/// An item or inner list, and its parameters.
fn parse_member(r: &mut Reader<'_>) -> Result<Member, ()> {
    if r.peek() == Some(b'(') {
        // An inner list: valid RFC 8941, but no cache's member.
        r.at += 1;
        loop {
            r.skip(|b| b == b' ');
            match r.peek() {
                Some(b')') => {
                    r.at += 1;
                    break;
                }
                Some(_) => {
                    bare_item(r)?;
                    params(r, |_, _| {})?;
                    if !matches!(r.peek(), Some(b' ' | b')')) {
                        return Err(());
                    }
                }
                None => return Err(()),
            }
        }
    } else {
        bare_item(r)?;
    }
    let mut m = Member::default();
    params(r, |key, value| match key {
        b"hit" => m.hit = matches!(value, Value::Bool(true)),
        b"fwd" => {
            m.fwd = Some(match value {
                Value::Token(b"stale") => Fwd::Stale,
                Value::Token(b"bypass") => Fwd::Bypass,
                _ => Fwd::Other,
            })
        }
        _ => {}
    })?;
    Ok(m)
}

/// A parameter's value, as far as the cache result needs it.
enum Value<'a> {
    Bool(bool),
    Token(&'a [u8]),
    Else,
}

/// Parameters: `;key[=value]`, each handed to `f` (a later one with the
/// same key wins, as RFC 8941 says, by being handed later).
fn params<'a>(r: &mut Reader<'a>, mut f: impl FnMut(&[u8], Value<'a>)) -> Result<(), ()> {
    while r.peek() == Some(b';') {
        r.at += 1;
        r.skip(|b| b == b' ');
        if !r
            .peek()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'*')
        {
            return Err(());
        }
        let start = r.at;
        r.skip(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b));
        let key = &r.s[start..r.at];
        let value = if r.peek() == Some(b'=') {
            r.at += 1;
            bare_item(r)?
        } else {
            Value::Bool(true)
        };
        f(key, value);
    }
    Ok(())
}

/// A bare item: integer or decimal, string, token, byte sequence or
/// boolean.
fn bare_item<'a>(r: &mut Reader<'a>) -> Result<Value<'a>, ()> {
    match r.peek().ok_or(())? {
        b'-' | b'0'..=b'9' => {
            if r.peek() == Some(b'-') {
                r.at += 1;
            }
            let int = r.take(|b| b.is_ascii_digit()).len();
            if int == 0 || int > 15 {
                return Err(());
            }
            if r.peek() == Some(b'.') {
                r.at += 1;
                let frac = r.take(|b| b.is_ascii_digit()).len();
                if int > 12 || frac == 0 || frac > 3 {
                    return Err(());
                }
            }
            Ok(Value::Else)
        }
        b'"' => {
            r.at += 1;
            loop {
                match r.peek().ok_or(())? {
                    b'\\' => {
                        r.at += 1;
                        if !matches!(r.peek(), Some(b'"' | b'\\')) {
                            return Err(());
                        }
                        r.at += 1;
                    }
                    b'"' => {
                        r.at += 1;
                        return Ok(Value::Else);
                    }
                    0x20..=0x7e => r.at += 1,
                    _ => return Err(()),
                }
            }
        }
        b':' => {
            r.at += 1;
            let b64 = r.take(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
            if r.peek() != Some(b':') || !base64_ok(b64) {
                return Err(());
            }
            r.at += 1;
            Ok(Value::Else)
        }
        b'?' => {
            r.at += 1;
            let v = match r.peek() {
                Some(b'0') => false,
                Some(b'1') => true,
                _ => return Err(()),
            };
            r.at += 1;
            Ok(Value::Bool(v))
        }
        b if b.is_ascii_alphabetic() || b == b'*' => Ok(Value::Token(r.take(is_tchar))),
        _ => Err(()),
    }
}

/// Whether `b` decodes as base64 the way RFC 8941 parsers decode byte
/// sequences: `=` only at the end, and when there, as much as makes the
/// length a multiple of 4 (it may be left out); never one data symbol
/// alone in its group of four.
fn base64_ok(b: &[u8]) -> bool {
    let data = b.iter().take_while(|&&c| c != b'=').count();
    let pad = b.len() - data;
    if b[data..].iter().any(|&c| c != b'=') || data % 4 == 1 {
        return false;
    }
    pad == 0 || (pad <= 2 && (data + pad) % 4 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rfc(v: &str) -> CacheResult {
        CacheRules::default().classify([v.as_bytes()])
    }

    #[test]
    fn the_last_member_decides() {
        assert_eq!(rfc("ExampleCache; hit"), CacheResult::Hit);
        assert_eq!(rfc("ExampleCache; hit=?1"), CacheResult::Hit);
        assert_eq!(rfc("ExampleCache; hit=?0"), CacheResult::Other);
        assert_eq!(rfc("ExampleCache; fwd=uri-miss"), CacheResult::Miss);
        assert_eq!(
            rfc("ExampleCache; fwd=stale; fwd-status=304"),
            CacheResult::Stale
        );
        assert_eq!(rfc("ExampleCache; fwd=bypass"), CacheResult::Bypass);
        assert_eq!(rfc("ExampleCache; stored"), CacheResult::Other);
        assert_eq!(rfc("Origin; hit, Edge; fwd=miss"), CacheResult::Peer);
        assert_eq!(rfc("Origin; fwd=miss, Edge; fwd=miss"), CacheResult::Miss);
        assert_eq!(rfc("Peer; hit, Edge; fwd=stale"), CacheResult::Peer);
        assert_eq!(
            rfc("Origin; fwd=miss, \"Edge cache\"; hit; ttl=30"),
            CacheResult::Hit
        );
        assert_eq!(
            rfc("Edge; fwd=miss;key=\"a\\\"b\";detail=:aGk=:, Near;hit;ttl=-1.5"),
            CacheResult::Hit
        );
        // Several field lines are one list.
        let r = CacheRules::default();
        assert_eq!(
            r.classify([&b"A; hit"[..], b"B; fwd=miss"]),
            CacheResult::Peer
        );
        assert_eq!(
            r.classify([&b"A; fwd=miss"[..], b"B; fwd=miss"]),
            CacheResult::Miss
        );
        assert_eq!(r.classify([&b"A; fwd=miss"[..], b""]), CacheResult::Miss);
    }

    #[test]
    fn an_invalid_list_is_other() {
        for v in [
            "Edge; hit,",
            "Edge; HIT",
            "Edge; hit=?2",
            "Edge hit",
            "\"open",
            ",",
            "Edge;;hit",
        ] {
            assert_eq!(rfc(v), CacheResult::Other, "{v}");
        }
        assert_eq!(
            CacheRules::default().classify(std::iter::empty()),
            CacheResult::None
        );
    }

    #[test]
    fn other_headers_match_their_last_value() {
        let r = CacheRules::new("X-Cache", &["HIT", "STALE"], &["MISS"], &["BYPASS"]);
        assert_eq!(r.header(), "x-cache");
        assert_eq!(r.classify([&b"hit"[..]]), CacheResult::Hit);
        assert_eq!(r.classify([&b" HIT , Miss "[..]]), CacheResult::Miss);
        assert_eq!(r.classify([&b"MISS"[..], b"stale"]), CacheResult::Hit);
        assert_eq!(r.classify([&b"bypass"[..]]), CacheResult::Bypass);
        assert_eq!(r.classify([&b"DYNAMIC"[..]]), CacheResult::Other);
        assert_eq!(r.classify([&b""[..]]), CacheResult::Other);
        assert!(CacheResult::Stale.contacted_origin() && !CacheResult::Hit.contacted_origin());
    }
}
